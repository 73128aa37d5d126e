"""The `tiergate replay` command line, registered on the main CLI with one call.

    tiergate replay [--corpus FILE.jsonl] [--policy NAME ...] [--json OUT] [--seed N]
                    [--state URL] [--e2e]
    tiergate replay export [--seed N] [--out FILE.jsonl]
    tiergate replay report [--corpus FILE.jsonl] [--out DIR] [--no-e2e] [--state URL]
    tiergate replay import [--format NAME] PATH... [--out FILE.jsonl] [--labels FILE ...]
    tiergate replay counterfactual --corpus FILE.jsonl [--outcomes FILE] [--odds FILE] ...

Only argument parsing lives here, with no heavy imports, so every other
`tiergate` command starts as fast as before; the commands themselves are in
`tiergate.replay.commands` and load on use.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

DEFAULT_SEED = 20260814
DEFAULT_SESSIONS = 400
#: The report's experiments, in report order (tiergate.replay.pipeline.EXPERIMENTS).
EXPERIMENTS = ("main", "policies", "sweep", "adversarial", "prevalence", "latency", "e2e")
#: Policy names `--policy` accepts (tiergate.replay.experiments.policy_list, checked by tests).
POLICY_NAMES = (
    "always-cheap",
    "always-cheap-affinity",
    "always-frontier",
    "always-frontier-affinity",
    "escalation",
    "escalation-uncapped",
)
#: Further `--policy` names, not in the default run: the engine with each
#: `escalation.scorer` named explicitly (tiergate.replay.experiments.SCORER_POLICIES).
SCORER_POLICY_NAMES = (
    "escalation-learned",
    "escalation-learned-uncapped",
    "escalation-lexical",
    "escalation-lexical-uncapped",
)
#: ... and with each `escalation.share_cap_mode` named explicitly
#: (tiergate.replay.experiments.CAP_MODE_POLICIES).
CAP_MODE_POLICY_NAMES = ("escalation-admit", "escalation-suppress")
EXTRA_POLICY_NAMES = SCORER_POLICY_NAMES + CAP_MODE_POLICY_NAMES
#: Log formats `replay import` reads (tiergate.replay.importers.FORMATS, checked by tests).
IMPORT_FORMATS = (
    "auto",
    "mini-swe-agent",
    "swe-agent",
    "openhands",
    "claude-code",
    "codex",
    "opencode",
    "autocoderover",
    "moatless",
    "terminal-bench",
    "openai",
)


def _lazy(name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from tiergate.replay import commands

        result: int = getattr(commands, name)(args)
        return result

    return run


def _add_common(p: argparse.ArgumentParser, *, corpus: bool = True) -> None:
    if corpus:
        p.add_argument(
            "--corpus", metavar="FILE.jsonl", help="replay this corpus instead of generating one"
        )
    p.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"generator seed (default {DEFAULT_SEED})"
    )
    p.add_argument(
        "--sessions",
        type=int,
        default=DEFAULT_SESSIONS,
        metavar="N",
        help=f"sessions to generate (default {DEFAULT_SESSIONS})",
    )


def _add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state",
        metavar="URL",
        default="memory",
        help="state store: 'memory' (default) or redis://host:port/db",
    )
    p.add_argument(
        "--e2e-sessions",
        type=int,
        metavar="N",
        default=None,
        help="end-to-end mode: replay every k-th session so N are sent (default all)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_replay_parser(subparsers: Any) -> None:
    """Register `replay` (with `export` and `report`) on the main CLI's subparsers."""
    r = subparsers.add_parser(
        "replay",
        help="replay sessions through the real escalation engine",
        description="Replay multi-turn sessions turn by turn through tiergate's escalation "
        "engine on a simulated clock and report cost, coverage and precision per policy. "
        "Without --corpus it generates the seeded default corpus (400 sessions).",
    )
    _add_common(r)
    _add_run(r)
    r.add_argument(
        "--policy",
        nargs="+",
        metavar="NAME",
        choices=POLICY_NAMES + EXTRA_POLICY_NAMES,
        help=f"policies to replay (default all): {', '.join(POLICY_NAMES)}; "
        f"also {', '.join(EXTRA_POLICY_NAMES)}",
    )
    r.add_argument("--json", metavar="OUT", help="write the metrics JSON here ('-' for stdout)")
    r.add_argument(
        "--e2e",
        action="store_true",
        help="also send the sessions over HTTP through a gateway to the simulator",
    )
    r.set_defaults(func=_lazy("cmd_replay"))
    sub = r.add_subparsers(dest="replay_command", metavar="SUBCOMMAND")

    e = sub.add_parser(
        "export",
        help="write the generated corpus as JSONL",
        description="Write the seeded default corpus in the replay corpus format (JSONL).",
    )
    _add_common(e, corpus=False)
    e.add_argument("--out", metavar="FILE.jsonl", default="-", help="output file (default stdout)")
    e.set_defaults(func=_lazy("cmd_export"))

    rep = sub.add_parser(
        "report",
        help="run every experiment and write the Markdown report, figures and metrics JSON",
        description="Run the seven experiments (main replay, policies, threshold sweep, "
        "adversarial cap run, prevalence, latency, end to end) and write OUT/replay.md, "
        "OUT/figures/replay-*.png and OUT/replay-metrics.json.",
    )
    _add_common(rep)
    _add_run(rep)
    rep.add_argument(
        "--out",
        metavar="DIR",
        default="replay-report",
        help="output directory (default replay-report)",
    )
    rep.add_argument("--no-e2e", action="store_true", help="skip the end-to-end HTTP experiment")
    rep.add_argument(
        "--metrics", metavar="FILE", help="metrics JSON path (default OUT/replay-metrics.json)"
    )
    rep.add_argument(
        "--only",
        nargs="+",
        metavar="EXPERIMENT",
        choices=EXPERIMENTS,
        help=f"run only these experiments: {', '.join(EXPERIMENTS)} (default all)",
    )
    rep.set_defaults(func=_lazy("cmd_report"))
    _add_import(sub)
    _add_explain(sub)
    from tiergate.replay.counterfactual_cli import add_counterfactual_parser

    add_counterfactual_parser(sub, _lazy("cmd_counterfactual"), POLICY_NAMES + EXTRA_POLICY_NAMES)


def _add_import(sub: Any) -> None:
    imp = sub.add_parser(
        "import",
        help="turn agent logs into a replay corpus (JSONL)",
        description=(
            "Read agent logs (mini-swe-agent .traj.json, SWE-agent .traj, OpenHands "
            "output.jsonl, trajectory JSON or session folders, Claude Code session JSONL, "
            "Codex CLI rollouts, opencode's database, AutoCodeRover and Moatless task "
            "folders, a JSONL of OpenAI chat requests) and write replay-corpus sessions: "
            "one turn per model call, each with the cumulative request the agent sent and "
            "the reply. Folders are searched recursively. With --labels, a label per "
            "session is joined on its key (an instance id where the log names one); "
            "sessions with a --hard-label get every turn marked needs_strong."
        ),
    )
    imp.add_argument("paths", nargs="+", metavar="PATH", help="log files or folders")
    imp.add_argument(
        "--format",
        default="auto",
        choices=IMPORT_FORMATS,
        help="log format (default: detect per file)",
    )
    imp.add_argument("--out", metavar="FILE.jsonl", default="-", help="output (default stdout)")
    imp.add_argument("--labels", metavar="FILE", help="CSV, JSON or JSONL of key -> label")
    imp.add_argument("--label-key", metavar="COLUMN", help="key column (default the first)")
    imp.add_argument("--label-column", metavar="COLUMN", help="label column (default the second)")
    imp.add_argument(
        "--hard-label",
        action="append",
        default=[],
        metavar="LABEL",
        help="a label (or bucket) whose sessions need the strong tier (repeatable)",
    )
    imp.add_argument(
        "--bucket",
        action="append",
        default=[],
        metavar="LABEL=BUCKET",
        help="report a label under this archetype name (repeatable)",
    )
    imp.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="COLUMN=VALUE",
        help="keep only label rows with this column value, e.g. in_verified=false (repeatable)",
    )
    imp.add_argument(
        "--labelled-only", action="store_true", help="drop sessions the labels file does not name"
    )
    imp.add_argument(
        "--id-prefix",
        metavar="NAME",
        help="prefix every session id with NAME/, so runs of one task by several agents "
        "keep distinct ids when corpora are concatenated",
    )
    imp.add_argument("--no-progress", action="store_true", help="no progress bar")
    imp.set_defaults(func=_lazy("cmd_import"))


def _add_explain(sub: Any) -> None:
    ex = sub.add_parser(
        "explain",
        help="why each session went to the strong tier, turn by turn",
        description=(
            "Replay the corpus under one policy and print, per session, every billed "
            "turn: the tier that served it, the learned and lexical scores the engine "
            "read, the strikes it raised and what the engine decided (trigger, cap "
            "denial, the top score reasons of its audit event). By default the escalated "
            "sessions; no prompt text is printed."
        ),
    )
    _add_common(ex)
    ex.add_argument(
        "--policy",
        default="escalation",
        metavar="NAME",
        choices=[n for n in POLICY_NAMES + EXTRA_POLICY_NAMES if n.startswith("escalation")],
        help="an engine policy (default escalation: the shipped, capped engine)",
    )
    ex.add_argument(
        "--session",
        action="append",
        default=[],
        metavar="ID",
        help="sessions whose id contains ID (repeatable); default: the escalated ones",
    )
    ex.add_argument("--all", action="store_true", help="every session, escalated or not")
    ex.add_argument("--limit", type=int, default=20, metavar="N", help="at most N (default 20)")
    ex.add_argument("--json", metavar="OUT", help="write the traces as JSON ('-' for stdout)")
    ex.add_argument("--no-progress", action="store_true", help="no progress bar")
    ex.set_defaults(func=_lazy("cmd_explain"))
