"""Benchmark: the learned request scorer's cost per request, beside the lexical score.

Both scorers run in one process, interleaved, on the same requests: MMLU-sized
questions (about 150 to 1,600 characters), the agent benchmark's latest turn, and
a 16 KB pasted document (the learned scorer reads at most learned.ASK_CHARS of
it). Reported: median and p90 microseconds per call over many single calls, so
the figure is a per-request latency, not a batch throughput; then the median
over every real prompt of the two benchmarks, each scored once. The learned
scorer's budget is 100 us median per request (issue 17). The lexical score is
memoised per text (routing.difficulty), so its repeat-call figure is a cache hit.

Run: .venv/bin/python bench/bench_request_scorer.py [--quick]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from tiergate.core.model import ChatRequest, Message, TextPart
from tiergate.routing import difficulty, learned

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
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
    parser.add_argument(
        "--data", type=Path, default=DATA, metavar="DIR",
        help="shared benchmark data for the corpus median (default: %(default)s)",
    )  # fmt: skip
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
    corpus = corpus_prompts(args.data)
    if corpus:
        reqs = [request(t) for t in corpus]
        times = [per_call_us(lambda r=r: scorer.score(r), 1)[0] for r in reqs]
        p50 = statistics.median(times)
        verdict = "within" if p50 <= 100 else "OVER"
        print(f"per request over {len(reqs)} real prompts (MMLU + RouterArena sub_10): "
              f"p50 {p50:.1f} us, p90 {statistics.quantiles(times, n=10)[8]:.1f} us, "
              f"max {max(times):.1f} us: {verdict} the 100 us median budget")  # fmt: skip
    else:
        print(f"no benchmark data under {args.data}: corpus median skipped")
    return 0


def corpus_prompts(data: Path) -> list[str]:
    """Every MMLU prompt and RouterArena question under `data` (empty when absent)."""
    texts: list[str] = []
    for path in sorted((data / "routellm-mmlu").glob("mmlu_*.csv")):
        with path.open(newline="", encoding="utf-8") as fh:
            texts += [row["prompt"] for row in csv.DictReader(fh)]
    arena = data / "routerarena-sub10" / "gemini-2.0-flash-001.jsonl"
    if arena.exists():
        with arena.open(encoding="utf-8") as fh:
            texts += [json.loads(line)["question"] for line in fh if line.strip()]
    return texts


if __name__ == "__main__":
    raise SystemExit(main())
