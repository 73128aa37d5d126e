"""Why did the engine escalate? Per-session triggers and the strike evidence behind them.

    PYTHONPATH=src:. python -m eval.strike_audit --corpus FILE.jsonl \
        [--policy escalation-lexical ...] [--detail easy] [--context 6]

Streams the corpus (real-traffic files are large): facts are extracted one
session at a time, each policy is replayed, and a table of escalated sessions
per bucket and trigger is printed. With `--detail BUCKET`, every
strike-triggered escalation of that bucket is explained: each turn up to the
escalation that carried a strike, its reasons, and the action/observation
timeline that raised the evidence (routing.progress), so a misfire on normal
work can be told from a genuine no-progress signal. Prints to stdout only;
the output quotes the corpus and is not for committing.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from tiergate.core.model import Message
from tiergate.formats.openai import parse_request
from tiergate.replay.experiments import SCORER_POLICIES
from tiergate.replay.features import CorpusFacts, extract
from tiergate.replay.harness import STANDARD_POLICIES, RunResult, run_policy
from tiergate.replay.metrics import outcomes
from tiergate.routing.actions import in_editor, shell_action
from tiergate.routing.observations import Follows, latest_turn_bounds, observe
from tiergate.routing.progress import Progress


def stream(path: Path, only: set[str] | None = None) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            doc = orjson.loads(line)
            if only is None or doc["session_id"] in only:
                yield doc


def policy(name: str) -> Any:
    return SCORER_POLICIES.get(name) or STANDARD_POLICIES[name]


def table(run: RunResult) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for o in outcomes(run):
        row = out.setdefault(o.archetype, Counter())
        row["sessions"] += 1
        if o.escalated:
            row["escalated"] += 1
            row[o.trigger or "?"] += 1
    return out


def first_escalation(run: RunResult) -> dict[int, tuple[int, str]]:
    """session index -> (turn index, trigger) of its first strong turn."""
    out: dict[int, tuple[int, str]] = {}
    for (s, t), rec in zip(run.facts.order, run.records, strict=True):
        if rec.tier == "strong" and s not in out:
            out[s] = (t, rec.trigger or "tier")
    return out


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n // 2] + " ... " + text[-n // 2 :]


def timeline(messages: list[Message]) -> list[dict[str, Any]]:
    """Every action/observation step of a request, with the fold's state after it."""
    p = Progress()
    steps: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        before = len(p.stuck)
        action = None
        obs = None
        if m.role == "tool":
            action = p.pending_calls.get(m.tool_call_id or "")
            obs = observe(m, "action")
        elif m.role == "user":
            follows: Follows = (
                "action" if p.pending_text is not None else "reply" if p.replied else "opening"
            )
            obs = observe(m, follows)
            action = p.pending_text
            if action is None and obs is not None and obs.command:
                action = shell_action(obs.command, "bash")
            if action is not None and obs is not None:  # the files it edits, as the fold sees them
                action = in_editor(action, p.open_file, p.cwd, obs.open_file or "")
        p.add(m, i)
        if obs is None:
            continue
        steps.append(
            {
                "i": i,
                "tool": action.tool if action else "-",
                "edit": bool(action and action.edit),
                "revert": bool(action and action.revert),
                "sig": _short(action.signature, 140) if action else "",
                "paths": list(action.paths) if action and action.edit else [],
                "failed": obs.failed,
                "passed": obs.tests_passed,
                "keys": sorted(obs.failures),
                "edits": p.edits,
                "out": _short(m.text(), 220),
                "stuck": [(s.reason, s.detail) for s in p.stuck[before:]],
            }
        )
    return steps


def explain(doc: dict[str, Any], turn: int, context: int) -> None:
    req = parse_request(doc["turns"][turn]["request"])
    steps = timeline(list(req.messages))
    start, _ = latest_turn_bounds(req.messages)
    hits = [k for k, s in enumerate(steps) if s["stuck"] and s["i"] >= start]
    for k in hits:
        print(f"    raised at message {steps[k]['i']}: {steps[k]['stuck']}")
        for s in steps[max(0, k - context) : k + 1]:
            flag = ("E" if s["edit"] else "") + ("R" if s["revert"] else "")
            state = "FAIL" if s["failed"] else "pass" if s["passed"] else "ok"
            print(f"      [{s['i']:>4}] edits={s['edits']:<2} {flag:<2} {state:<4} {s['sig']}")
            if s["paths"]:
                print(f"             files={s['paths']}")
            if s["failed"]:
                print(f"             keys={s['keys']}")
            print(f"             out: {s['out']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--policy", nargs="+", default=["escalation-lexical"])
    ap.add_argument("--detail", nargs="*", default=[], help="buckets to explain")
    ap.add_argument("--context", type=int, default=6)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    facts: CorpusFacts = extract(stream(args.corpus))
    summary: dict[str, Any] = {}
    for name in args.policy:
        run = asyncio.run(run_policy(facts, policy(name)))
        rows = table(run)
        summary[name] = {a: dict(c) for a, c in rows.items()}
        print(f"== {name}")
        for a, c in sorted(rows.items()):
            print(f"  {a:<8} {dict(c)}")
        if not args.detail:
            continue
        first = first_escalation(run)
        wanted: dict[str, list[tuple[int, list[str]]]] = {}  # session id -> strike turns
        for s, (t, trigger) in sorted(first.items()):
            sess = facts.sessions[s]
            if trigger != "strikes" or sess.archetype not in args.detail:
                continue
            marks: list[tuple[int, list[str]]] = []
            for tf in sess.turns[: t + 1]:
                reasons = [x.reason for x in tf.request_strikes + tf.response_strikes]
                if reasons:
                    marks.append((tf.index, reasons))
            wanted[sess.session_id] = marks
        for doc in stream(args.corpus, set(wanted)):
            sid = doc["session_id"]
            print(f"\n## {sid} ({len(doc['turns'])} turns)")
            for turn, reasons in wanted[sid]:
                print(f"  turn {turn}: {reasons}")
                explain(doc, turn, args.context)
    if args.json:
        args.json.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
