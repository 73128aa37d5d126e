"""Benchmark: the request path's lexical scans, and difficulty cost by session depth.

1. Lexical scans, before and after: `difficulty._scan_text` (the delta scorer's
   per-text counts) and the strike producers (`request_strikes` on a request whose
   latest turn is the text as a tool result after an edit; `response_strikes` on a
   reply carrying it), on the agent benchmark's latest turn (a 774-character
   `go test` result, bench/common.py:agent_body), 16 KB of Go source and a 16 KB
   failing pytest log. "plain" is the frozen copy of the implementation before the
   fast path (tests/test_scan_equivalence.py, which proves both give identical
   results); "fast" is the current code.
2. Depth: the delta extractor must cost the same at turn 2 and turn 200 of one
   agent session (it reads only the latest turn); the full-transcript scorer reads
   everything, so it grows with the session.

Run: .venv/bin/python bench/bench_difficulty.py [--quick]
"""

from __future__ import annotations

import argparse
import random
import sys
import timeit
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import common
from scan_reference import (
    go_source,
    pytest_log,
    ref_request_strikes,
    ref_response_strikes,
    ref_scan_text,
)
from test_difficulty_samples import TRIVIAL_TURNS, hard_turn_text, request, tool_result, user
from tiergate.core.model import ChatRequest, ChatResponse, Message, TextPart, ToolCall
from tiergate.formats.openai import parse_request
from tiergate.routing import difficulty, observations, strikes
from tiergate.routing.progress import progress_of

LATEST = "Why does the pool drop jobs under load? Explain the race condition step by step."


# ---- lexical scans ------------------------------------------------------------


def agent_request() -> ChatRequest:
    """The overhead benchmark's agent request, with its per-request counter filled in."""
    body = common.agent_body("bench")
    last = body["messages"][-1]
    last["content"] = last["content"].replace(common.COUNTER, "1")
    return parse_request(body)


def tool_turn(text: str) -> ChatRequest:
    """A request whose latest turn is `text` as a tool result, after an edit and a run."""
    edit = ToolCall("c1", "edit_file", '{"path": "pool/worker.go", "old_str": "a", "new_str": "b"}')
    run = ToolCall("c2", "run_command", '{"cmd": "go test ./..."}')
    return ChatRequest(
        model="bench",
        messages=[
            Message("user", [TextPart("The worker pool drops jobs on shutdown. Fix it.")]),
            Message("assistant", [], tool_calls=[edit]),
            Message("tool", [TextPart("Edited pool/worker.go")], tool_call_id="c1"),
            Message("assistant", [], tool_calls=[run]),
            Message("tool", [TextPart(text)], tool_call_id="c2"),
        ],
    )


def best_us(fn: Callable[[], object], number: int, repeat: int = 7) -> float:
    """Best per-call time: the least disturbed run on a shared machine."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def paired_best_us(
    a: Callable[[], object], b: Callable[[], object], number: int, repeat: int = 9
) -> tuple[float, float]:
    """Best per-call times of two functions timed in alternation, so a burst of
    load from elsewhere on the machine hits both alike."""
    best_a = best_b = float("inf")
    for _ in range(repeat):
        best_a = min(best_a, timeit.timeit(a, number=number))
        best_b = min(best_b, timeit.timeit(b, number=number))
    return best_a / number * 1e6, best_b / number * 1e6


def cold_request_strikes(req: ChatRequest) -> list[strikes.Strike]:
    """request_strikes folding the whole request with its classification memo emptied
    first: on the request path the latest turn's texts are new, so neither the memo
    nor the progress cache can help them."""
    observations.clear_memos()
    return strikes.request_strikes(req, progress_of(req.messages))


def scans(quick: bool) -> list[dict[str, Any]]:
    agent = agent_request()
    cases = [
        ("agent latest turn", agent.messages[-1].text(), agent, 2000),
        ("16 KB Go source", go_source(16_384)[:16_384], None, 100),
        ("16 KB pytest failure log", pytest_log(16_384)[-16_384:], None, 100),
    ]
    rows = []
    for name, text, req, number in cases:
        req = req or tool_turn(text)
        resp = ChatResponse(id="r", model="bench", content=[TextPart(text)])
        n = max(number // 100, 2) if quick else number
        assert difficulty._scan_text(text) == ref_scan_text(text)
        row: dict[str, Any] = {"text": name, "chars": len(text)}
        pairs: tuple[tuple[str, Callable[[], object], Callable[[], object]], ...] = (
            ("scan_text", partial(ref_scan_text, text), partial(difficulty._scan_text, text)),
            (  # since issue 15 the two differ in meaning (stuck evidence, not failures)
                "request_strikes",
                partial(ref_request_strikes, req),
                partial(cold_request_strikes, req),
            ),
            (
                "response_strikes",
                partial(ref_response_strikes, resp),
                partial(strikes.response_strikes, resp),
            ),
        )
        for key, plain, fast in pairs:
            before, after = paired_best_us(plain, fast, n)
            row[key] = {"plain_us": round(before, 1), "fast_us": round(after, 1)}
        rows.append(row)
    return rows


def report_scans(rows: list[dict[str, Any]]) -> None:
    print(
        "\nLexical scans, µs per call (plain = before the fast path, same results;"
        " request_strikes: plain = the producers before issue 15, memo cold)"
    )
    heads = ("scan_text", "request_strikes", "response_strikes")
    print(f"{'text':>26} {'chars':>6}  " + "  ".join(f"{h:>22}" for h in heads))
    for r in rows:
        cells = []
        for key in heads:
            a, b = r[key]["plain_us"], r[key]["fast_us"]
            cells.append(f"{a:7.1f} -> {b:6.1f} ({a / b:4.1f}x)".rjust(22))
        print(f"{r['text']:>26} {r['chars']:>6}  " + "  ".join(cells))


# ---- depth ----------------------------------------------------------------------


def session(turns: int, seed: int = 7) -> ChatRequest:
    """One synthetic agent session cut at `turns` user turns. Every message is
    distinct (as in real sessions, so nothing is memoised by accident), every
    25th turn pastes a 3 KB trace, and the latest turn is the same at every depth,
    so only the history differs."""
    rng = random.Random(seed)
    msgs: list[Message] = []
    for i in range(turns - 1):
        text = hard_turn_text(i, 3000) if i % 25 == 3 else rng.choice(TRIVIAL_TURNS)
        msgs.append(user(f"{text} (step {i})"))
        path = f"pkg/pool/worker_{i}.go"
        args = f'{{"path": "{path}", "old": "mu.Lock()", "new": "mu.RLock()"}}'
        msgs.append(Message("assistant", [], tool_calls=[ToolCall(f"c{i}", "edit_file", args)]))
        msgs.append(tool_result(f"Edited {path} (3 lines)", f"c{i}"))
        msgs.append(Message("assistant", [TextPart(f"Done with step {i}: read lock now.")]))
    msgs.append(user(LATEST))
    failure = "--- FAIL: TestPoolDrain (0.02s)\n    pool_test.go:41: lost 3 jobs\nFAIL"
    msgs.append(tool_result(failure))
    return request(msgs)


def per_call_us(fn: Callable[[ChatRequest], float], req: ChatRequest, number: int) -> float:
    return best_us(lambda: fn(req), number, repeat=5)


def cold(fn: Callable[[ChatRequest], float]) -> Callable[[ChatRequest], float]:
    """The scorer with its per-text memo emptied first: a request never seen before."""

    def run(req: ChatRequest) -> float:
        difficulty.clear_scan_memo()
        return fn(req)

    return run


def depth(quick: bool) -> tuple[list[dict[str, Any]], bool]:
    shallow, deep = session(2), session(200)
    chars = [sum(len(m.text()) for m in r.messages) for r in (shallow, deep)]
    print(f"\nsession: turn 2 = {chars[0]:,} chars in messages, turn 200 = {chars[1]:,} chars")
    ok = True
    out = []
    scale = 50 if quick else 1
    rows = (
        ("delta (cold)", cold(difficulty.delta_score), 1.5, 2000, 2000),
        ("delta (warm)", difficulty.delta_score, 1.5, 2000, 2000),
        ("full (cold)", cold(difficulty.full_score), None, 2000, 10),
        ("full (warm)", difficulty.full_score, None, 2000, 100),
    )
    for name, fn, limit, n_shallow, n_deep in rows:
        a = per_call_us(fn, shallow, max(n_shallow // scale, 2))
        b = per_call_us(fn, deep, max(n_deep // scale, 2))
        ratio = b / a
        verdict = ""
        if limit is not None and not quick:  # a tiny run is too noisy to judge
            passed = ratio <= limit
            ok &= passed
            verdict = f"  (limit {limit}x: {'ok' if passed else 'FAIL'})"
        print(f"{name:>12}: turn 2 {a:8.1f} us  turn 200 {b:9.1f} us  ratio {ratio:6.2f}x{verdict}")
        out.append({"scorer": name, "turn_2_us": round(a, 1), "turn_200_us": round(b, 1)})
    print("cold: per-message count memo emptied before each call (a request never seen before)")
    print("warm: history already scanned by the session's earlier requests (the steady state)")
    assert difficulty.delta_score(shallow) == difficulty.delta_score(deep)
    return out, ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="tiny run (smoke test)")
    args = p.parse_args(argv)
    info = common.machine_info()
    common.print_machine(info)
    res: dict[str, Any] = {"machine": info, "args": vars(args), "scans": scans(args.quick)}
    report_scans(res["scans"])
    res["depth"], ok = depth(args.quick)
    print(f"\nJSON: {common.write_result('difficulty', res)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
