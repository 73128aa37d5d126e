"""The counterfactual score as a Markdown table and a PGR-against-share figure.

Reads the JSON `tiergate replay counterfactual --json` writes (so the docs,
the dashboard and an operator's notebook all draw from one document).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _ci(row: dict[str, Any], key: str, fmt: str = "num") -> str:
    value = row.get(key)
    iv = (row.get("interval") or {}).get(key)
    text = _pct(value) if fmt == "pct" else _num(value)
    if iv is None or value is None:
        return text
    lo, hi = iv
    inner = f"{100 * lo:.0f}-{100 * hi:.0f}" if fmt == "pct" else f"{lo:.2f}-{hi:.2f}"
    return f"{text} ({inner})"


HEADER = (
    "| group | policy | sessions (instances) | resolved | strong turns | PGR (95 % CI) "
    "| random | length rule | oracle | PGR - max(random, length) lower CI "
    "| resolved escalated (waste) | cut off partway |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def render(doc: dict[str, Any]) -> str:
    """One Markdown row per group and policy, intervals in brackets."""
    lines = [HEADER]
    for group, g in doc["groups"].items():
        for policy, row in g["policies"].items():
            iv = row.get("interval") or {}
            lows = [
                iv[k][0]
                for k in ("pgr_minus_random", "pgr_minus_length_rule")
                if iv.get(k) is not None
            ]
            margin = f"{min(lows):+.2f}" if lows else "-"
            lines.append(
                f"| {group} | {policy} | {row['sessions']} ({row['instances']}) "
                f"| {row['resolved']} | {_ci(row, 'strong_share', 'pct')} | {_ci(row, 'pgr')} "
                f"| {_num(row.get('random'))} | {_ci(row, 'length_rule')} "
                f"| {_ci(row, 'oracle')} | {margin} | {_pct(row.get('waste'))} "
                f"| {_pct(row.get('cut_off'))} |"
            )
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: str | Path) -> Path:
    """PGR against strong-turn share per group: random, length rule, oracle, policies."""
    from tiergate.replay.figures import LINES, MARKERS, OKABE_ITO, SERIES, plt

    groups = list(doc["groups"].items())
    cols = min(len(groups), 3) or 1
    rows = (len(groups) + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
    for ax, (name, g) in zip(axes.flat, groups, strict=False):
        c = g["curves"]
        ax.plot([0, 1], [0, 1], color=OKABE_ITO["grey"], ls=":", label="random")
        if c["length_rule"]:
            ax.plot(
                c["share"], c["length_rule"], color=OKABE_ITO["black"], ls="--", label="length rule"
            )
            ax.plot(c["share"], c["oracle"], color=OKABE_ITO["green"], ls="-.", label="oracle")
        for i, (policy, row) in enumerate(g["policies"].items()):
            if row.get("pgr") is None:
                continue
            iv = (row.get("interval") or {}).get("pgr")
            yerr = None if iv is None else [[row["pgr"] - iv[0]], [iv[1] - row["pgr"]]]
            ax.errorbar(
                [row["strong_share"]],
                [row["pgr"]],
                yerr=yerr,
                fmt=MARKERS[i % len(MARKERS)],
                color=OKABE_ITO[SERIES[i % len(SERIES)]],
                ls=LINES[i % len(LINES)],
                capsize=3,
                label=policy,
            )
        first = next(iter(g["policies"].values()))
        ax.set_title(f"{name} ({first['sessions']} sessions)", fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("share of turns served strong", fontsize=8)
        ax.set_ylabel("PGR", fontsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(groups) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8)
    fig.tight_layout(rect=(0, 0.08 if rows == 1 else 0.05, 1, 1))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


#: The operator's guide to `tiergate replay counterfactual`, the last section of the
#: generated docs/replay.md (tiergate.replay.report keeps it on every regeneration).
GUIDE = (
    "## Counterfactual value on your own logs",
    "",
    "Escalation is worth its price when the strong turns rescue sessions the base model was "
    "losing. `tiergate replay counterfactual` measures that on logged sessions (DESIGN.md, "
    '"Counterfactual escalation value"): each session needs its outcome **r** and the strong '
    "model's odds **p** on its task; a policy earns `q = r + (1 - r) * p * s / n` per session "
    "(s of its n turns served strong) and scores `PGR = (Q - Q_base) / (Q_strong - Q_base)`, "
    "reported per framework beside random escalation, the length rule and the oracle at the "
    "same strong-turn share, with instance-clustered 95 % intervals.",
    "",
    "```",
    "tiergate replay import LOGS/ --out sessions.jsonl",
    "tiergate replay counterfactual --corpus sessions.jsonl --outcomes ci.csv \\",
    "    --odds odds.csv --odds-column frontier_solve_rate --json cf.json --plot cf.svg",
    "```",
    "",
    "- **Outcomes** (`--outcomes`, else each session's `resolved` field): a CSV, JSON or JSONL "
    "keyed by session id or by the session's `source.key` (an instance, a ticket, a branch). "
    "Any pass/fail your team already records works: the CI run on the agent's branch "
    "(`pass`/`fail`), whether its pull request was merged (`merged`/`closed`), a benchmark's "
    "`true`/`false` or `1`/`0`. A session with no outcome is left out and counted.",
    "- **Odds** (`--odds`, else each session's `strong_odds`): p per task in [0, 1], keyed the "
    "same way; e.g. how often the strong model passed CI on that kind of task, or a benchmark's "
    "solve rate among frontier systems. Do not take p from the session's own outcome.",
    "- `--by framework|protocol|run|all` picks the groups; each group is replayed as its own "
    "workspace, so the share caps meet only its traffic. `--policy` picks the engines "
    "(default `escalation escalation-uncapped escalation-lexical`).",
    "- Columns: strong turns (cost axis), PGR, the three baselines at the same share, the "
    "lower 95 % bound of PGR minus the better of random and the length rule, waste (resolved "
    "sessions escalated anyway) and escalations cut off partway (strong served fewer turns "
    "than from its first strong turn to the end: a cap or flapping interrupted it).",
    "",
    "**Live, on the running gateway.** Post each session's outcome when it is known "
    "(`POST /v1/outcomes` with the workspace token: the session id the agent sent, "
    "`resolved`, and `strong_odds` when you have one), and the gateway scores its own "
    "escalations the same way from its usage rows: `GET /admin/api/stats/escalation-value` "
    "and the dashboard's Value page (docs/operator.md, docs/dashboard.md).",
)
