"""`tiergate replay counterfactual`: join outcomes and odds to a corpus, replay, score.

The I/O half of the counterfactual score (the pure half is
tiergate.replay.counterfactual). A session's outcome r comes from its corpus
field `resolved` or from a labels file keyed by session id or by instance
(`source.key`); the strong odds p from its field `strong_odds` or a CSV keyed
the same way. Outcomes can be anything pass/fail an operator logs: CI runs
(`pass`/`fail`), merged pull requests (`merged`/`closed`), benchmark
results (`true`/`false`, `1`/`0`).

Each group (framework by default) is replayed on its own, as one workspace's
traffic, so the share caps meet only that framework's sessions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tiergate.replay.counterfactual import (
    DEFAULT_RESAMPLES,
    SessionValue,
    curves,
    parse_odds,
    parse_outcome,
    score,
)
from tiergate.replay.harness import RunResult

GROUPINGS = ("framework", "protocol", "run", "archetype", "all")


def instance_of(doc: Mapping[str, Any]) -> str:
    source = doc.get("source") or {}
    return str(source.get("key") or source.get("instance_id") or doc["session_id"])


def group_of(doc: Mapping[str, Any], by: str) -> str:
    """The group a session is reported under: its framework, protocol, run or archetype."""
    source = doc.get("source") or {}
    if by == "all":
        return "all"
    if by == "archetype":
        return str(doc.get("archetype") or "unlabelled")
    if by == "run":
        sid = str(doc["session_id"])
        return sid.split("/", 1)[0] if "/" in sid else "(none)"
    return str(source.get(by) or "unknown")


def _lookup(table: Mapping[str, str] | None, doc: Mapping[str, Any]) -> str | None:
    if table is None:
        return None
    for key in (str(doc["session_id"]), instance_of(doc)):
        if key in table:
            return table[key]
    return None


@dataclass
class Joined:
    """Sessions with both r and p, and how many lacked either."""

    sessions: list[dict[str, Any]] = field(default_factory=list)
    r: dict[str, float] = field(default_factory=dict)
    p: dict[str, float] = field(default_factory=dict)
    no_outcome: int = 0
    no_odds: int = 0


def join(
    corpus: Sequence[dict[str, Any]],
    outcomes: Mapping[str, str] | None = None,
    odds: Mapping[str, str] | None = None,
) -> Joined:
    """Keep the sessions whose r and p are known (a file's value wins over the field)."""
    out = Joined()
    for doc in corpus:
        sid = str(doc["session_id"])
        from_file = _lookup(outcomes, doc)
        r = parse_outcome(from_file if from_file is not None else doc.get("resolved"))
        from_odds = _lookup(odds, doc)
        p = parse_odds(from_odds if from_odds is not None else doc.get("strong_odds"))
        if r is None:
            out.no_outcome += 1
            continue
        if p is None:
            out.no_odds += 1
            continue
        out.sessions.append(doc)
        out.r[sid], out.p[sid] = r, p
    return out


def session_values(run: RunResult, joined: Joined) -> list[SessionValue]:
    """Per session of a replay: billed turns, strong turns and the first strong turn."""
    values = []
    by_id = {str(d["session_id"]): d for d in joined.sessions}
    for sess, records in zip(run.facts.sessions, run.by_session(), strict=True):
        tiers = [rec.tier for rec in records if rec.tier is not None]
        first = next((i + 1 for i, t in enumerate(tiers) if t == "strong"), None)
        sid = sess.session_id
        values.append(
            SessionValue(
                session_id=sid,
                instance=instance_of(by_id[sid]),
                resolved=joined.r[sid],
                odds=joined.p[sid],
                turns=len(tiers),
                strong=sum(t == "strong" for t in tiers),
                first_strong=first,
            )
        )
    return values


def evaluate(
    joined: Joined,
    policies: Sequence[str],
    by: str = "framework",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    split: str | None = None,
) -> dict[str, Any]:
    """Replay every group under every policy and score it; the JSON the CLI writes.

    With `split`, each replayed group is also scored per subset (`group / key`):
    the replay, and so the caps, still see the whole group's traffic."""
    from tiergate.replay import experiments as ex
    from tiergate.replay.costmodel import CostModel
    from tiergate.replay.harness import run_policy
    from tiergate.replay.pipeline import prepare

    groups: dict[str, list[dict[str, Any]]] = {}
    for doc in joined.sessions:
        groups.setdefault(group_of(doc, by), []).append(doc)
    result: dict[str, Any] = {
        "definition": "q = r + (1 - r) * p * s / n; PGR = (Q - Q_base) / (Q_strong - Q_base)",
        "group_by": by,
        "split": split,
        "resamples": resamples,
        "groups": {},
    }
    for name, docs in sorted(groups.items()):
        prep = prepare(docs, f"counterfactual/{name}", progress)
        part = {str(d["session_id"]): group_of(d, split) if split else None for d in docs}
        scored: dict[str, dict[str, Any]] = {}
        subsets: dict[str, list[SessionValue]] = {}
        for policy in ex.policy_list(list(policies)):
            run = asyncio.run(run_policy(prep.facts, policy, CostModel(), progress=progress))
            values = session_values(run, joined)
            subsets = {name: values}
            for v in values if split else ():
                subsets.setdefault(f"{name} / {part[v.session_id]}", []).append(v)
            for key, subset in subsets.items():
                scored.setdefault(key, {})[policy.name] = score(subset, resamples, seed)
        for key, subset in subsets.items():
            result["groups"][key] = {"policies": scored[key], "curves": curves(subset)}
    return result


def _table(path: str, key: str | None, column: str | None, prefer: str | None) -> dict[str, str]:
    """key -> value from a CSV/JSON/JSONL file (tiergate.replay.importers.labels' reader)."""
    from tiergate.replay.importers.labels import load_labels

    if column is None and prefer is not None:
        with open(path, encoding="utf-8") as fh:
            head = fh.readline()
        if prefer in [c.strip() for c in head.split(",")]:
            column = prefer
    return load_labels(path, key, column).by_key


def run_command(args: Any, progress_bar: Any, show_progress: bool) -> int:
    """The CLI: load, join, replay per group, print the table, write JSON and the figure."""
    import sys

    from tiergate.replay.corpus import CorpusError, load_corpus
    from tiergate.replay.counterfactual_report import plot, render

    try:
        corpus = load_corpus(args.corpus)
        outcomes = (
            _table(args.outcomes, args.outcome_key, args.outcome_column, None)
            if args.outcomes
            else None
        )
        odds = (
            _table(args.odds, args.odds_key, args.odds_column, "frontier_solve_rate")
            if args.odds
            else None
        )
    except CorpusError as err:
        print(f"{args.corpus}: {len(err.problems)} problem(s):", file=sys.stderr)
        for problem in err.problems[:20]:
            print(f"  - {problem}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as err:
        print(f"counterfactual: {err}", file=sys.stderr)
        return 2
    joined = join(corpus, outcomes, odds)
    print(
        f"{len(joined.sessions)} of {len(corpus)} sessions scored"
        f" ({joined.no_outcome} without an outcome, {joined.no_odds} without odds)",
        file=sys.stderr,
    )
    if not joined.sessions:
        print("no session has both an outcome and odds: nothing to score", file=sys.stderr)
        return 1
    turns = sum(len(d["turns"]) for d in joined.sessions)
    with progress_bar(turns * (1 + len(args.policy)), show_progress, "counterfactual") as bar:
        doc = evaluate(
            joined, args.policy, args.by, args.resamples, args.seed_bootstrap, bar, args.split
        )
    doc["corpus"] = str(args.corpus)
    doc["dropped"] = {"no_outcome": joined.no_outcome, "no_odds": joined.no_odds}
    print(render(doc))
    if args.json:
        import orjson

        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"
        if args.json == "-":
            sys.stdout.buffer.write(data)
        else:
            with open(args.json, "wb") as fh:
                fh.write(data)
    if args.plot:
        print(f"wrote {plot(doc, args.plot)}", file=sys.stderr)
    return 0
