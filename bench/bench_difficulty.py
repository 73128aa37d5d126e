"""Benchmark: difficulty scoring cost at turn 2 vs turn 200 of one agent session.

The delta extractor must cost the same at any depth (it reads only the latest
turn); the full-transcript scorer reads everything, so it grows with the session.
Run: .venv/bin/python bench/bench_difficulty.py
"""

from __future__ import annotations

import random
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_difficulty_samples import TRIVIAL_TURNS, hard_turn_text, request, tool_result, user
from tiergate.core.model import ChatRequest, Message, TextPart, ToolCall
from tiergate.routing import difficulty

LATEST = "Why does the pool drop jobs under load? Explain the race condition step by step."


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
    best = min(timeit.repeat(lambda: fn(req), number=number, repeat=5))
    return best / number * 1e6


def cold(fn: Callable[[ChatRequest], float]) -> Callable[[ChatRequest], float]:
    """The scorer with its per-text memo emptied first: a request never seen before."""

    def run(req: ChatRequest) -> float:
        difficulty.clear_scan_memo()
        return fn(req)

    return run


def main() -> int:
    shallow, deep = session(2), session(200)
    chars = [sum(len(m.text()) for m in r.messages) for r in (shallow, deep)]
    print(f"session: turn 2 = {chars[0]:,} chars in messages, turn 200 = {chars[1]:,} chars")
    ok = True
    rows = (
        ("delta (cold)", cold(difficulty.delta_score), 1.5, 2000, 2000),
        ("delta (warm)", difficulty.delta_score, 1.5, 2000, 2000),
        ("full (cold)", cold(difficulty.full_score), None, 2000, 10),
        ("full (warm)", difficulty.full_score, None, 2000, 100),
    )
    for name, fn, limit, n_shallow, n_deep in rows:
        a = per_call_us(fn, shallow, n_shallow)
        b = per_call_us(fn, deep, n_deep)
        ratio = b / a
        verdict = ""
        if limit is not None:
            passed = ratio <= limit
            ok &= passed
            verdict = f"  (limit {limit}x: {'ok' if passed else 'FAIL'})"
        print(f"{name:>12}: turn 2 {a:8.1f} us  turn 200 {b:9.1f} us  ratio {ratio:6.2f}x{verdict}")
    print("cold: per-message count memo emptied before each call (a request never seen before)")
    print("warm: history already scanned by the session's earlier requests (the steady state)")
    assert difficulty.delta_score(shallow) == difficulty.delta_score(deep)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
