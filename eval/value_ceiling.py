"""How much counterfactual value each kind of knowledge can buy (issue #29): the ceiling
a decision that knows p, or p and the session's length, or r too, reaches at a share.

    PYTHONPATH=src:. python -m eval.value_ceiling \\
        --manifest /work/cache/cfscore/corpus/outcomes-manifest.csv

Why: issue #29 asks every left-out framework for PGR >= max(random, length rule)
+ 0.15 at the same strong-turn share. Before fitting anything, this asks what is
reachable at all if the decision knew, at turn 1 (full credit, never cut off):
- `knows r`: whether the base agent will fail this session, failing sessions in a
  random order (p unknown);
- `knows n`: only the session's final length, shortest first (each strong turn
  of a session is worth (1 - r) p / n, so short sessions are the cheap rescues:
  the length rule's opposite);
- `knows p`: the strong model's true odds on the task, ranked highest first (what a
  perfect task-text model of p would give);
- `knows p, n`: p and the session's final length, ranked by p / n (cheap rescues first);
- `knows r, p` (the oracle): ranked by (1 - r) p / n, the fractional-knapsack optimum;
- `knows nothing: first k turns`: every session strong for its first k turns, then
  base (`strong_opening`): where the value sits, at the price of escalating
  every session (its waste column says so).
The gap between `knows p` and the oracle is what only knowing whether the base is
losing can buy; between random and `knows p`, what any model of p can buy at most.

Reads only the outcome manifest eval/realtraffic/outcomes.py writes (r, p, turns,
framework, instance per session). Nothing is fitted here; SWE-bench Verified is
absent from the corpora (removed at build), RouteLLM's and RouterArena's data are
never read. Figures carry instance-clustered 95 % intervals (the replay scorer's
own, tiergate.replay.counterfactual.score).
"""

from __future__ import annotations

import argparse
import csv
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from tiergate.replay.counterfactual import SessionValue, score

#: Session -> ranking key for a decision made at turn 1 (higher escalates first).
Knowledge = Callable[[SessionValue], float]


def _shuffled(v: SessionValue) -> float:
    """A fixed pseudo-random order within ties (a hash of the session id)."""
    return (zlib.crc32(v.session_id.encode()) & 0xFFFF) / 65536.0


KNOWLEDGE: dict[str, Knowledge] = {
    "knows r": lambda v: (1.0 - v.resolved) + 0.5 * _shuffled(v),
    "knows n": lambda v: 1.0 / v.turns + 1e-9 * _shuffled(v),
    "knows p": lambda v: v.odds,
    "knows p, n": lambda v: v.odds / v.turns,
    "knows r, p (oracle)": lambda v: (1.0 - v.resolved) * v.odds / v.turns,
}


def group_of(row: dict[str, str]) -> str:
    """One framework per benchmark, as the counterfactual table groups them."""
    if row["benchmark"] in row["framework"]:
        return row["framework"]
    return f"{row['framework']} ({row['benchmark']})"


def read_manifest(path: Path) -> dict[str, list[SessionValue]]:
    groups: dict[str, list[SessionValue]] = defaultdict(list)
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            groups[group_of(row)].append(
                SessionValue(
                    session_id=row["session_id"],
                    instance=f"{row['benchmark']}:{row['instance_id']}",
                    resolved=float(row["resolved"]),
                    odds=float(row["strong_odds"] or 0.0),
                    turns=max(1, int(row["turns"])),
                )
            )
    return dict(groups)


def escalate_from_turn_one(
    sessions: Sequence[SessionValue], key: Knowledge, share: float, turn: int = 1
) -> list[SessionValue]:
    """Escalate whole sessions at `turn` (1: the first), best key first, until `share`
    of the turns is spent; a session that would cross the budget, or ends before
    `turn`, is left base (never cut off)."""
    budget = share * sum(v.turns for v in sessions)
    spent = 0
    chosen: set[str] = set()
    for v in sorted(sessions, key=key, reverse=True):
        cost = v.turns - turn + 1
        if cost <= 0 or spent + cost > budget:
            continue
        spent += cost
        chosen.add(v.session_id)
    return [
        SessionValue(
            v.session_id, v.instance, v.resolved, v.odds, v.turns, v.turns - turn + 1, turn
        )
        if v.session_id in chosen
        else v
        for v in sessions
    ]


def strong_opening(sessions: Sequence[SessionValue], share: float) -> list[SessionValue]:
    """Knowing nothing: every session's first k turns strong, then base, with k
    (fractional: a hashed subset of sessions gets one turn more) spending `share`.

    Not a candidate policy (it escalates every resolved session and switches each
    session's model once): it shows where the value sits. A turn is worth
    (1 - r) p / n, so the same few turns for every session spend more of the budget
    on short sessions than random whole sessions do, without knowing which are short.
    """
    budget = share * sum(v.turns for v in sessions)
    k, spent = 0, 0
    while True:
        step = sum(1 for v in sessions if v.turns > k)
        if step == 0 or spent + step > budget:
            break
        spent, k = spent + step, k + 1
    longer = [v for v in sessions if v.turns > k]
    extra = {v.session_id for v in sorted(longer, key=_shuffled)[: int(budget - spent)]}
    out = []
    for v in sessions:
        s = min(v.turns, k + (v.session_id in extra))
        out.append(
            SessionValue(v.session_id, v.instance, v.resolved, v.odds, v.turns, s, 1 if s else None)
        )
    return out


def rows(
    groups: dict[str, list[SessionValue]], shares: Sequence[float], resamples: int
) -> list[list[str]]:
    out = []
    for name, sessions in sorted(groups.items()):
        if len(sessions) < 100:
            continue
        for share in shares:
            cells = [name, str(len(sessions)), f"{share:.0%}"]
            base = None
            for key in KNOWLEDGE.values():
                got = score(escalate_from_turn_one(sessions, key, share), resamples=resamples)
                lo, hi = (got.get("interval") or {}).get("pgr") or (None, None)
                if base is None:
                    base = got
                    cells += [f"{got['random']:.2f}", f"{got['length_rule']:.2f}"]
                band = f" ({lo:.2f}-{hi:.2f})" if lo is not None else ""
                cells.append(f"{got['pgr']:.2f}{band}")
            got = score(strong_opening(sessions, share), resamples=resamples)
            lo, hi = (got.get("interval") or {}).get("pgr") or (None, None)
            band = f" ({lo:.2f}-{hi:.2f})" if lo is not None else ""
            cells.append(f"{got['pgr']:.2f}{band}, waste {got['waste']:.0%}")
            bar = max(base["random"], base["length_rule"]) + 0.15 if base else 0.0
            cells.append(f"{bar:.2f}")
            out.append(cells)
    return out


def repository_prior(instances_csv: Path) -> Knowledge:
    """A session's key: its SWE-bench repository's mean frontier solve rate over the
    instances outside Lite (Verified is absent from the file), so no Lite task's
    own rate enters; 0 for sessions of other benchmarks. Needs no text."""
    rates: dict[str, list[float]] = defaultdict(list)
    with open(instances_csv, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["in_lite"] != "true":
                repo = row["instance_id"].rsplit("-", 1)[0]
                rates[repo].append(float(row["frontier_solve_rate"]))
    mean = {repo: sum(v) / len(v) for repo, v in rates.items()}

    def key(v: SessionValue) -> float:
        return mean.get(v.instance.split(":", 1)[-1].rsplit("-", 1)[0], 0.0)

    return key


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--manifest", type=Path, required=True, help="outcomes-manifest.csv")
    ap.add_argument("--share", type=float, nargs="+", default=[0.15, 0.20], help="shares")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    ap.add_argument(
        "--instances",
        type=Path,
        help="instances.csv: add a `repository prior` column (a learned-free\n"
        "estimate of p: the task's repository's mean rate outside Lite)",
    )
    args = ap.parse_args(argv)
    if args.instances:
        KNOWLEDGE["repository prior"] = repository_prior(args.instances)
    heads = ["framework (benchmark)", "sessions", "share", "random", "length rule"]
    heads += [f"{k} (95 % CI)" for k in KNOWLEDGE]
    heads += ["knows nothing: first k turns of every session (95 % CI)", "issue's bar"]
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for cells in rows(read_manifest(args.manifest), args.share, args.resamples):
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
