"""The `tiergate replay counterfactual` parser (argument parsing only, no heavy imports)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

#: The engines scored by default: the shipped capped engine and its variants.
DEFAULT_POLICIES = ("escalation", "escalation-uncapped", "escalation-lexical")


def add_counterfactual_parser(
    sub: Any, func: Callable[[argparse.Namespace], int], policies: Sequence[str]
) -> None:
    cf = sub.add_parser(
        "counterfactual",
        help="score escalation by counterfactual value (PGR) against random, length and oracle",
        description=(
            "Replay a corpus whose sessions have an outcome r (did the agent resolve the "
            "task: CI passed, PR merged) and the strong model's odds p on the task, and "
            "report per framework: PGR = (Q - Q_base) / (Q_strong - Q_base) with credit "
            "q = r + (1 - r) p s / n, the share of turns served strong, waste (resolved "
            "sessions escalated), escalations cut off partway, and the random, length-rule "
            "and oracle baselines at the same share, with instance-clustered 95 % intervals."
        ),
    )
    cf.add_argument(
        "--corpus", metavar="FILE.jsonl", required=True, help="the sessions (replay corpus JSONL)"
    )
    cf.add_argument(
        "--outcomes",
        metavar="FILE",
        help="CSV/JSON/JSONL of session id or instance id -> outcome "
        "(1/0, true/false, pass/fail, merged/closed); default: each session's `resolved`",
    )
    cf.add_argument("--outcome-key", metavar="COLUMN", help="key column (default the first)")
    cf.add_argument(
        "--outcome-column", metavar="COLUMN", help="outcome column (default the second)"
    )
    cf.add_argument(
        "--odds",
        metavar="FILE",
        help="CSV of session id or instance id -> p, e.g. "
        "swebench-solve-rates/instances.csv; default: each session's `strong_odds`",
    )
    cf.add_argument(
        "--odds-key", metavar="COLUMN", default=None, help="key column (default the first)"
    )
    cf.add_argument(
        "--odds-column",
        metavar="COLUMN",
        default=None,
        help="odds column (default frontier_solve_rate if present, else the second)",
    )
    cf.add_argument(
        "--policy",
        nargs="+",
        metavar="NAME",
        default=list(DEFAULT_POLICIES),
        choices=[n for n in policies if n.startswith("escalation")],
        help=f"engine policies to score (default {' '.join(DEFAULT_POLICIES)})",
    )
    cf.add_argument(
        "--by",
        default="framework",
        choices=("framework", "protocol", "run", "archetype", "all"),
        help="report (and replay) per source.framework (default), protocol, "
        "run (session-id prefix), archetype or all together",
    )
    cf.add_argument(
        "--split",
        choices=("framework", "protocol", "run", "archetype"),
        help="also score each group's sessions per this key (e.g. archetype: labelled "
        "vs unlabelled tasks), replayed with the whole group",
    )
    cf.add_argument(
        "--resamples", type=int, default=1000, metavar="N", help="bootstrap resamples (1000)"
    )
    cf.add_argument("--seed-bootstrap", type=int, default=0, metavar="N", help=argparse.SUPPRESS)
    cf.add_argument("--json", metavar="OUT", help="write the scores as JSON ('-' for stdout)")
    cf.add_argument("--plot", metavar="OUT.png|svg", help="write PGR against strong-turn share")
    cf.add_argument("--no-progress", action="store_true", help="no progress bar")
    cf.set_defaults(func=func)
