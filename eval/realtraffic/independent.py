"""An independent synthetic corpus, written apart from tiergate's own generator.

tiergate.replay.generator was written alongside the escalation engine, so a
figure on it may flatter the engine. This corpus shares none of its text
banks, templates or shapes: different tasks, different wording, different
tool names, and both agent protocols (a text-protocol agent that sends
command output back as a `user` message, and a tool-call agent). It is a
HELD-OUT check: never tune a threshold on it.

Archetypes (ground truth, `needs_strong`):
- `chore`      a routine change, 3-8 calls; never needs strong;
- `long_chore` the same, 18-30 calls (length alone must not escalate);
- `deep_bug`   routine start, then from a random call a hard fault: a data
               race, a corrupted index, an intermittent deadlock; strong from there;
- `design`     a hard design question from the first call.

    python -m eval.realtraffic.independent --sessions 160 --out FILE.jsonl
"""

from __future__ import annotations

import argparse
import random
import sys
from typing import Any

from tiergate.replay.corpus import write_corpus
from tiergate.replay.importers.transcript import Transcript, session_doc, tool_call

DEFAULT_SEED = 7177
MIX = {"chore": 0.35, "long_chore": 0.15, "deep_bug": 0.35, "design": 0.15}
HARD_FROM_START = ("design",)

_SYSTEM_TEXT = (
    "You operate a Linux shell for the user. Answer with your reasoning and then exactly one "
    "shell command inside a ```sh fence. The command's output will be sent back to you."
)
_SYSTEM_TOOLS = "You are a coding assistant with a terminal tool and a file editor tool."
_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "terminal",
            "description": "Run one shell command and return its output.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "edit_file",
            "description": "Replace a span of a file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "file": {"type": "string"},
                    "find": {"type": "string"},
                    "replace": {"type": "string"},
                },
            },
        },
    },
]
_SERVICES = ("ledger", "inventory", "billing-sync", "geo-index", "mailer", "scheduler")
_CHORES = (
    "Bump the version in setup.cfg of the {svc} service to {ver} and update the changelog.",
    "The README of {svc} still says port 8080; the service listens on {port} now. Fix the docs.",
    "Rename the helper `fmt_date` to `format_date` across the {svc} package.",
    "Add a `--dry-run` flag to the {svc} CLI that prints what it would do.",
    "Our linter complains about an unused import in {svc}/util.py; please remove it.",
)
_HARD = (
    "Under load the {svc} workers sometimes write the same ledger row twice. Both writers hold "
    "what should be the row lock. Here is a trace from two workers interleaving:\n{trace}\n"
    "Find the race and fix it without serialising all writes.",
    "After last night's compaction the {svc} B-tree index returns keys out of order for some "
    "ranges. Pages dumped from the bad range:\n{trace}\nWork out which invariant broke and "
    "repair the compaction routine.",
    "Every few hours {svc} stops making progress: all threads are parked. Thread dump:\n{trace}\n"
    "Find the lock-order inversion and propose a fix that keeps the cache coherent.",
)
_DESIGN = (
    "We need {svc} to move from a single Postgres primary to an active-active setup across two "
    "regions with at most 2 s of replication lag. Lay out the conflict-resolution scheme, what "
    "breaks in the current schema, and a migration plan with rollback points.",
    "Design an exactly-once delivery layer for {svc} on top of an at-least-once queue; explain "
    "the idempotency keys, the outbox table and how a crash between steps is recovered.",
)
_CHORE_CMDS = (
    "git status",
    "ls {svc}",
    "grep -rn fmt_date {svc}",
    "python -m pytest -q {svc}/tests",
    "sed -n 1,40p {svc}/setup.cfg",
    "git diff --stat",
)
_HARD_CMDS = (
    "python -m pytest -q {svc}/tests/test_concurrency.py -x",
    "gdb -batch -ex 'thread apply all bt' -p 4121",
    "python tools/dump_pages.py 88-97",
    "strace -f -e trace=futex -p 4121 2>&1 | tail -40",
)


def _trace(rng: random.Random, svc: str) -> str:
    lines = []
    for i in range(rng.randint(25, 60)):
        tid = rng.choice((4121, 4122, 4125))
        addr = rng.randint(0x7F0000000000, 0x7FFFFFFFFFFF)
        lines.append(
            f"[{tid}] {svc}.store.write_row(id={rng.randint(1000, 9999)}) "
            f"lock@0x{addr:x} seq={i} state={rng.choice(('ACQ', 'REL', 'WAIT', 'SPIN'))}"
        )
    return "\n".join(lines)


def _output(rng: random.Random, svc: str, hard: bool) -> str:
    if not hard:
        return rng.choice(
            (
                f" M {svc}/setup.cfg\n?? notes.txt",
                f"{svc}/__init__.py\n{svc}/cli.py\n{svc}/util.py\n{svc}/tests",
                "3 passed in 0.41s",
                f"{svc}/util.py:12:def fmt_date(ts):",
            )
        )
    fails = "\n".join(
        f"E   AssertionError: row {rng.randint(1, 500)} written {rng.randint(2, 4)} times"
        for _ in range(rng.randint(3, 12))
    )
    return (
        f"FAILED {svc}/tests/test_concurrency.py::test_parallel_writers - AssertionError\n{fails}\n"
        f"Traceback (most recent call last):\n"
        f'  File "{svc}/store.py", line {rng.randint(80, 400)}, in write_row\n'
        f"    self._commit(row)\nRuntimeError: invariant violated: seq went backwards\n"
        f"=== 1 failed, {rng.randint(10, 90)} passed in {rng.uniform(3, 40):.1f}s ==="
    )


def _session(index: int, seed: int) -> dict[str, Any]:
    rng = random.Random(f"independent:{seed}:{index}")
    kind = rng.choices(list(MIX), weights=list(MIX.values()))[0]
    protocol = rng.choice(("text", "tool-call"))
    svc = rng.choice(_SERVICES)
    t = Transcript(f"ind-{index:04d}", f"ind-{index:04d}", "independent-synthetic", "generated")
    if protocol == "tool-call":
        t.tools = _TOOLS
    t.add({"role": "system", "content": _SYSTEM_TOOLS if protocol == "tool-call" else _SYSTEM_TEXT})
    calls = {
        "chore": rng.randint(3, 8),
        "long_chore": rng.randint(18, 30),
        "deep_bug": rng.randint(8, 20),
        "design": rng.randint(3, 10),
    }[kind]
    hard_from = {"deep_bug": rng.randint(2, max(2, calls - 2)), "design": 1}.get(kind, calls + 1)
    if kind == "design":
        task = rng.choice(_DESIGN).format(svc=svc)
    else:
        task = rng.choice(_CHORES).format(
            svc=svc,
            ver=f"2.{rng.randint(0, 9)}.{rng.randint(0, 9)}",
            port=rng.choice((8443, 9000, 7070)),
        )
    t.add({"role": "user", "content": task})
    for call in range(1, calls + 1):
        hard = call >= hard_from
        if kind == "deep_bug" and call == hard_from:
            t.add(
                {
                    "role": "user",
                    "content": rng.choice(_HARD).format(svc=svc, trace=_trace(rng, svc)),
                }
            )
        cmd = rng.choice(_HARD_CMDS if hard else _CHORE_CMDS).format(svc=svc)
        thought = f"Next I will run `{cmd.split()[0]}` to see where things stand."
        if protocol == "text":
            t.add({"role": "assistant", "content": f"{thought}\n\n```sh\n{cmd}\n```"})
            t.add({"role": "user", "content": f"exit code 0\n{_output(rng, svc, hard)}"})
        else:
            cid = f"tc_{index}_{call}"
            t.add(
                {
                    "role": "assistant",
                    "content": thought,
                    "tool_calls": [tool_call(cid, "terminal", {"cmd": cmd})],
                }
            )
            t.add({"role": "tool", "tool_call_id": cid, "content": _output(rng, svc, hard)})
    doc = session_doc(t, archetype=kind)
    assert doc is not None
    for i, turn in enumerate(doc["turns"], 1):
        turn["needs_strong"] = i >= hard_from
        turn["idle_seconds_before"] = 0.0 if i == 1 else round(rng.uniform(3, 40), 1)
    doc["source"]["protocol"] = protocol
    return doc


def generate(sessions: int = 160, seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    return [_session(i, seed) for i in range(sessions)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m eval.realtraffic.independent",
        description="Write the independent (held-out) synthetic corpus as replay JSONL.",
    )
    p.add_argument("--sessions", type=int, default=160)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--out", default="-", help="output file (default stdout)")
    args = p.parse_args(argv)
    docs = generate(args.sessions, args.seed)
    if args.out == "-":
        write_corpus(docs, sys.stdout.buffer)
    else:
        with open(args.out, "wb") as fh:
            write_corpus(docs, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
