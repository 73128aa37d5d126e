"""Benchmark: the learned request scorer's cost per request, beside the lexical score.

Both scorers run in one process, interleaved, on the same requests: MMLU-sized
questions (about 150 to 1,600 characters), the agent benchmark's latest turn, and
a 16 KB pasted document (the learned scorer reads at most learned.ASK_CHARS of
it). Reported: median and p90 microseconds per call over many single calls, so
the figure is a per-request latency, not a batch throughput. The learned
scorer's budget is 100 us median (issue 17).

Run: .venv/bin/python bench/bench_request_scorer.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from tiergate.core.model import ChatRequest, Message, TextPart
from tiergate.routing import difficulty, learned

SHORT = (
    "Which of the following structures is derived from ectomesenchyme?\n"
    "A. Motor neurons\nB. Skeletal muscles\nC. Melanocytes\nD. Sweat glands\nAnswer:"
)
MEDIUM = (
    "Statement 1 | Every group of order p^2 where p is prime is Abelian. Statement 2 | For a "
    "fixed prime p a Sylow p-subgroup of a group G is a normal subgroup of G if and only if it "
    "is the only Sylow p-subgroup of G.\nA. True, True\nB. False, False\nC. True, False\n"
    "D. False, True\nAnswer:"
)
LONG = (
    "This question refers to the following information.\n"
    + " ".join(["The treaty was signed after long negotiations between the powers."] * 22)
    + "\nWhich of the following best explains the outcome described above?\n"
    "A. Economic pressure\nB. Military defeat\nC. Religious reform\nD. Popular revolt\nAnswer:"
)
AGENT = (
    "The worker pool drops jobs under load. Explain the race condition step by step, then "
    "fix `pool/worker.go` so `go test ./...` passes:\n\n    func (p *Pool) Submit(j Job) {\n"
    "        p.jobs <- j\n    }\n"
)
DOCUMENT = "Summarise the key obligations in this contract.\n" + ("Clause text. " * 1300)

CASES = {"mmlu_short": SHORT, "mmlu_medium": MEDIUM, "mmlu_long": LONG,
         "agent_turn": AGENT, "document_16k": DOCUMENT}  # fmt: skip


def request(text: str) -> ChatRequest:
    return ChatRequest(model="bench", messages=[Message("user", [TextPart(text)])])


def per_call_us(fn: Callable[[], object], calls: int) -> list[float]:
    """Wall time of each of `calls` single calls, in microseconds."""
    out = []
    clock = time.perf_counter
    for _ in range(calls):
        start = clock()
        fn()
        out.append((clock() - start) * 1e6)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/bench_request_scorer.py",
        description="Per-request cost of the learned request scorer next to the lexical score.",
    )
    parser.add_argument("--quick", action="store_true", help="fewer calls (smoke run)")
    args = parser.parse_args()
    calls = 200 if args.quick else 3000
    scorer = learned.load_scorer()
    print(f"artifact {scorer.version}: {len(scorer.weights)} weights")
    print(f"{'case':14s} {'chars':>6s} | {'learned p50':>11s} {'p90':>7s} | "
          f"{'lexical p50':>11s} {'p90':>7s}  (us per call)")  # fmt: skip
    medians = []
    for name, text in CASES.items():
        req = request(text)
        learned_fn = lambda req=req: scorer.score(req)  # noqa: E731
        lexical_fn = lambda req=req: difficulty.score(difficulty.full_transcript_features(req))  # noqa: E731
        learned_fn(), lexical_fn()  # warm caches
        a: list[float] = []
        b: list[float] = []
        for _ in range(5):  # interleaved rounds: both see the same machine load
            a += per_call_us(learned_fn, calls // 5)
            b += per_call_us(lexical_fn, calls // 5)
        qa, qb = statistics.quantiles(a, n=10), statistics.quantiles(b, n=10)
        medians.append(statistics.median(a))
        print(f"{name:14s} {len(text):6d} | {statistics.median(a):11.1f} {qa[8]:7.1f} | "
              f"{statistics.median(b):11.1f} {qb[8]:7.1f}")  # fmt: skip
    worst = max(medians)
    verdict = "within" if worst <= 100 else "OVER"
    print(f"learned scorer: worst median {worst:.1f} us, {verdict} the 100 us budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
