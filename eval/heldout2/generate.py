"""Generate the second independent held-out corpus (issue #15) as replay-corpus JSONL.

    python -m eval.heldout2.generate --out-dir eval/out/heldout2 [--seed 1515]
    python -m eval.heldout2.generate --sample eval/heldout2/sample.jsonl

Writes one file per protocol (`heldout2-text.jsonl`, `heldout2-tools.jsonl`),
each 60 easy, 40 medium and 60 hard sessions by default, in the replay corpus
format of DESIGN.md: `archetype` is the bucket (easy | medium | hard) and
`label` says protocol, harness style and scenario kind. `needs_strong` is true
on a hard session's turns from the first turn whose request carries evidence of
the difficulty (all turns when the task statement itself states it), false on
every easy and medium turn. Pure Python and deterministic: every session draws
from its own `random.Random` seeded by (seed, protocol, index).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval.heldout2.easy import build_easy, build_medium
from eval.heldout2.hard import build_hard
from eval.heldout2.render import (
    TEXT_STYLES,
    TOOL_STYLES,
    first_user,
    system_prompt,
    text_command,
    text_observation,
    text_reply,
    tool_call,
    tool_result,
    tool_schemas,
)
from eval.heldout2.world import Step, World, make_world

DEFAULT_SEED = 1515
PROTOCOLS = ("text", "tools")
BUCKETS: dict[str, Callable[[random.Random, World], tuple[str, list[Step], str]]] = {
    "easy": build_easy,
    "medium": build_medium,
    "hard": build_hard,
}
DEFAULT_COUNTS = {"easy": 60, "medium": 40, "hard": 60}
MODEL = "orcarouter/coding"


def _idle(rng: random.Random, st: Step | None) -> float:
    """Seconds before a turn: model latency plus the previous command's run time."""
    if st is None:
        return 0.0
    base = rng.uniform(1.5, 12.0)
    if st.kind == "bash" and (
        "pytest" in st.args.get("cmd", "") or "seq" in st.args.get("cmd", "")
    ):
        base += rng.uniform(2.0, 150.0)
    if rng.random() < 0.02:
        base += rng.uniform(120.0, 900.0)  # the user stepped away
    return round(base, 1)


def _session_headers(style: str, sid: str) -> tuple[dict[str, str], dict[str, Any]]:
    if style == "claude_code":
        return {}, {"metadata": {"user_id": f"user_{sid.replace('-', '')}_account__session_{sid}"}}
    return {"X-Session-Id": sid}, {}


def render_session(
    rng: random.Random,
    protocol: str,
    sid: str,
    bucket: str,
    task: str,
    steps: list[Step],
    w: World,
    kind: str,
) -> dict[str, Any]:
    """Turn scenario steps into corpus turns with cumulative history."""
    style = rng.choice(TEXT_STYLES if protocol == "text" else TOOL_STYLES)
    headers, extra = _session_headers(style, sid)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(style, w, rng)},
        {"role": "user", "content": first_user(style, task, w)},
    ]
    body_extra: dict[str, Any] = {**extra, "temperature": rng.choice([0.0, 0.0, 0.2, 1.0])}
    if protocol == "tools":
        body_extra["tools"] = tool_schemas(style)
        if rng.random() < 0.5:
            body_extra["tool_choice"] = "auto"
    if rng.random() < 0.5:
        body_extra["max_tokens"] = rng.choice([4096, 8192, 16384])
    hard_from = next((i for i, s in enumerate(steps) if s.hard_from_here), None)
    turns = []
    prev: Step | None = None
    for i, st in enumerate(steps):
        request = {"model": MODEL, "messages": [dict(x) for x in messages], **body_extra}
        if protocol == "text":
            reply = text_reply(style, st, text_command(style, st, w, rng))
            response: dict[str, Any] = {"content": reply, "finish_reason": "stop"}
            assistant: dict[str, Any] = {"role": "assistant", "content": reply}
            follow = [{"role": "user", "content": text_observation(style, st, w, rng)}]
        else:
            name, args = tool_call(style, st, w)
            content = st.thought if (style != "generic" or rng.random() < 0.5) else ""
            if not name:  # Claude Code ends with a plain answer
                response = {"content": st.args.get("summary", "Done."), "finish_reason": "stop"}
                assistant = {"role": "assistant", "content": response["content"]}
                follow = []
            else:
                prefix = "toolu_01" if style == "claude_code" else "call_"
                cid = f"{prefix}{rng.getrandbits(96):024x}"
                calls = [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ]
                response = {"content": content, "tool_calls": calls, "finish_reason": "tool_calls"}
                assistant = {"role": "assistant", "content": content or None, "tool_calls": calls}
                follow = [
                    {"role": "tool", "tool_call_id": cid, "content": tool_result(style, st, w)}
                ]
        turn: dict[str, Any] = {
            "request": request,
            "needs_strong": bucket == "hard" and hard_from is not None and i >= hard_from,
            "idle_seconds_before": _idle(rng, prev),
            "response": response,
        }
        if headers:
            turn["headers"] = dict(headers)
        turns.append(turn)
        if st.kind != "finish":
            messages += [assistant, *follow]
        prev = st
    return {
        "session_id": sid,
        "archetype": bucket,
        "label": {
            "bucket": bucket,
            "kind": kind,
            "protocol": protocol,
            "style": style,
            "repo": w.repo,
            "turns": len(turns),
            "hard_from_turn": None if bucket != "hard" else (hard_from or 0) + 1,
        },
        "turns": turns,
    }


def generate(
    protocol: str, seed: int = DEFAULT_SEED, counts: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """All sessions of one protocol, buckets interleaved in a seeded order."""
    counts = counts or DEFAULT_COUNTS
    order = [b for b, n in counts.items() for _ in range(n)]
    random.Random(f"{seed}:{protocol}:order").shuffle(order)
    out = []
    for i, bucket in enumerate(order):
        rng = random.Random(f"{seed}:{protocol}:{i}")
        w = make_world(rng)
        task, steps, kind = BUCKETS[bucket](rng, w)
        out.append(
            render_session(rng, protocol, f"h2-{protocol}-{i:04d}", bucket, task, steps, w, kind)
        )
    return out


def write_jsonl(sessions: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for s in sessions:
            fh.write(json.dumps(s, ensure_ascii=False, separators=(",", ":")) + "\n")


def sample(seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    """The committed sample: the shortest session of each bucket and protocol."""
    picked = []
    for protocol in PROTOCOLS:
        sessions = generate(protocol, seed)
        for bucket in BUCKETS:
            mine = [s for s in sessions if s["archetype"] == bucket]
            picked.append(min(mine, key=lambda s: (len(s["turns"]), s["session_id"])))
    return picked


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--out-dir", type=Path, default=Path("eval/out/heldout2"))
    ap.add_argument("--sample", type=Path, help="write only the small committed sample here")
    args = ap.parse_args(argv)
    if args.sample:
        write_jsonl(sample(args.seed), args.sample)
        print(f"wrote {args.sample}")
        return 0
    for protocol in PROTOCOLS:
        sessions = generate(protocol, args.seed)
        path = args.out_dir / f"heldout2-{protocol}.jsonl"
        write_jsonl(sessions, path)
        turns = sum(len(s["turns"]) for s in sessions)
        print(
            f"wrote {path}: {len(sessions)} sessions, {turns} turns, "
            f"{path.stat().st_size // 1024} KiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
