"""What the message memo saves per turn of a growing session, per inbound format.

    .venv/bin/python bench/bench_parse_memo.py [--turns 200] [--tool-kb 2]

Why: agents resend the whole history every turn, so without the memo a codec's
parse grows with the session (issue #30). This replays one agent-shaped session
(a task, then per turn an assistant tool call and a tool result of `--tool-kb`
KB) in the OpenAI chat, Anthropic Messages and Responses shapes, and times at
chosen turns the codec's parse of the decoded body, and its render back to the
same format (Responses: to chat completions, its upstream), side by side in
the same run: fresh, and with the conversation's memos warm from the previous
turn (as the gateway does). The JSON decode,
the same either way, is not included; it is reported once per turn for scale.
In-process, best of `--repeat` runs per point, garbage collector off while timed.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from tiergate.formats import anthropic, openai, responses
from tiergate.formats.message_memo import MessageMemo

Parser = Callable[..., Any]


def openai_turn(k: int, tool_bytes: int) -> list[dict[str, Any]]:
    call = {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": f"Step {k}.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{k}", "content": f"out {k} " + "x" * tool_bytes},
    ]


def anthropic_turn(k: int, tool_bytes: int) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": f"t{k}", "name": "bash", "input": {"cmd": f"ls {k}"}}
    result = {
        "type": "tool_result",
        "tool_use_id": f"t{k}",
        "content": f"out {k} " + "x" * tool_bytes,
    }
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"Step {k}."}, use]},
        {"role": "user", "content": [result]},
    ]


def responses_turn(k: int, tool_bytes: int) -> list[dict[str, Any]]:
    call = {"type": "function_call", "call_id": f"c{k}", "name": "shell", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": f"c{k}", "output": "x" * tool_bytes}
    return [call, output]


def bodies(fmt: str, turns: int, tool_bytes: int) -> list[bytes]:
    task = "Fix the date parser so ISO weeks parse. " * 20
    field = "messages"
    if fmt == "responses":  # Codex: instructions, then input items
        messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        head: dict[str, Any] = {"model": "m", "instructions": "You are a coding agent. " * 200}
        turn = responses_turn
        field = "input"
    elif fmt == "openai":
        messages = [
            {"role": "system", "content": "You are a coding agent. " * 200},
            {"role": "user", "content": task},
        ]
        head = {"model": "m"}
        turn = openai_turn
    else:
        messages = [{"role": "user", "content": task}]
        head = {"model": "m", "max_tokens": 1024, "system": "You are a coding agent. " * 200}
        turn = anthropic_turn
    out = []
    for k in range(turns):
        out.append(orjson.dumps({**head, field: messages}))
        messages = [*messages, *turn(k, tool_bytes)]
    return out


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        with no_gc():
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return min(times) * 1e6


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Timed sections run with the cyclic collector off, as timeit does: a
    collection's pause belongs to the heap, not to the code being timed."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def run(fmt: str, turns: int, tool_bytes: int, points: list[int], repeat: int) -> None:
    codec = {"openai": openai, "anthropic": anthropic, "responses": responses}[fmt]
    parse: Parser = codec.parse_request
    # Responses has no upstream of its own: its requests go out as chat completions
    render: Callable[[Any, str], Any] = (
        openai.render_request if fmt == "responses" else codec.render_request
    )
    raw = bodies(fmt, turns, tool_bytes)
    memo = MessageMemo()
    print(f"\n{fmt}: turn, body KB, messages, decode us, parse fresh / memo us, ratio,")
    print("  render fresh / memo us, ratio (render to the client's own format)")
    for i, data in enumerate(raw, start=1):
        if i not in points:  # keep both memos warm, as the gateway does
            render(parse(orjson.loads(data), memo, len(data)), "up")
            continue
        decoded = orjson.loads(data)
        decode = best(lambda d=data: orjson.loads(d), repeat)
        fresh = best(lambda d=decoded: parse(d), repeat)
        # fresh messages each run, so the render memo misses as without it
        render_fresh = min(best(lambda q=parse(decoded): render(q, "up"), 1) for _ in range(repeat))
        warm: list[float] = []
        warm_render: list[float] = []
        for _ in range(repeat):  # each run continues what the previous turn left in the memos
            m = MessageMemo()
            render(parse(orjson.loads(raw[i - 2]), m, len(raw[i - 2])), "up")
            body = orjson.loads(data)
            with no_gc():
                t0 = time.perf_counter()
                req = parse(body, m, len(data))
                t1 = time.perf_counter()
                render(req, "up")
                t2 = time.perf_counter()
            warm.append((t1 - t0) * 1e6)
            warm_render.append((t2 - t1) * 1e6)
        render(parse(orjson.loads(data), memo, len(data)), "up")
        n = len(decoded.get("messages") or decoded.get("input"))
        print(
            f"{i:5d} {len(data) / 1024:8.0f} {n:5d} {decode:9.0f} {fresh:7.0f} / {min(warm):5.0f}"
            f" {fresh / min(warm):5.1f}x {render_fresh:7.0f} / {min(warm_render):5.0f}"
            f" {render_fresh / min(warm_render):5.1f}x"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--turns", type=int, default=200, help="session length")
    ap.add_argument("--tool-kb", type=float, default=2.0, help="KB per tool result")
    ap.add_argument("--repeat", type=int, default=7, help="runs per point (best is kept)")
    ap.add_argument("--format", choices=["openai", "anthropic", "responses", "all"], default="all")
    args = ap.parse_args(argv)
    points = sorted({2, args.turns // 4, args.turns // 2, args.turns})
    every = ("openai", "anthropic", "responses")
    for fmt in every if args.format == "all" else (args.format,):
        run(fmt, args.turns, int(args.tool_kb * 1024), points, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
