"""Escalation figures per corpus and agent protocol, re-runnable with one command.

    python -m eval.realtraffic.figures --corpus-dir realtraffic

Replays each corpus through the real engine (`tiergate replay`'s own
pipeline) under the shipped capped `escalation` policy (default scorer:
learned), `escalation-uncapped`, the same two with `scorer: lexical`, and
`always-frontier-affinity` (the cost baseline), split by agent protocol:

- the synthetic default corpus (tiergate.replay.generator, seeded);
- the independent synthetic corpus (eval.realtraffic.independent; held out);
- the real-traffic development corpus (eval.realtraffic.build), if built.

Writes docs/real-traffic-figures.json, the figure
docs/figures/real-traffic-escalation.png, and rewrites the section of
docs/real-traffic.md between the `figures:begin` / `figures:end` markers,
stamped with the date and commit measured at.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from eval.common import measured_stamp, publish
from eval.realtraffic import independent
from tiergate.replay.corpus import archetype_rank, load_corpus
from tiergate.replay.generator import generate_corpus
from tiergate.replay.pipeline import Prepared, prepare, run_policies

POLICIES = (
    "escalation",
    "escalation-uncapped",
    "escalation-lexical",
    "escalation-lexical-uncapped",
    "always-frontier-affinity",
)
ENGINE_POLICIES = POLICIES[:4]
#: Policies whose difficulty trigger reads the learned session scorer (the default).
LEARNED_READERS = frozenset({"escalation", "escalation-uncapped"})
BASELINE = "always-frontier-affinity"
PLOTTED = (
    ("escalation", "#4c72b0", "learned, capped (shipped)"),
    ("escalation-uncapped", "#dd8452", "learned, uncapped"),
    ("escalation-lexical", "#55a868", "lexical, capped"),
    ("escalation-lexical-uncapped", "#c44e52", "lexical, uncapped"),
)
REAL_ORDER = ("easy", "medium", "hard")
#: Report order of buckets that are not SWE-bench's or the default generator's.
OTHER_ORDER = ("chore", "long_chore", "deep_bug", "design")
ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "real-traffic.md"
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"


@dataclass
class Corpus:
    name: str
    held_out: bool
    load: Callable[[], list[dict[str, Any]]]


def protocol_of(doc: dict[str, Any]) -> str:
    source = doc.get("source") or {}
    if isinstance(source.get("protocol"), str):
        return str(source["protocol"])
    for turn in doc["turns"]:
        if any(m.get("role") == "tool" for m in turn["request"]["messages"]):
            return "tool-call"
    return "text"


def _loader(path: Path) -> Callable[[], list[dict[str, Any]]]:
    return lambda: load_corpus(path)


def corpora(corpus_dir: Path | None) -> list[Corpus]:
    out = [
        Corpus("synthetic default (tiergate replay)", False, lambda: generate_corpus()),
        Corpus("independent synthetic (held out)", True, lambda: independent.generate()),
    ]
    if corpus_dir is not None:
        for protocol in ("text", "tool-call"):
            path = corpus_dir / f"realtraffic-{protocol}.jsonl"
            if path.exists():
                out.append(Corpus("real SWE-bench Lite (dev)", False, _loader(path)))
    return out


def _bucket_rank(name: str) -> tuple[int, int]:
    if name in REAL_ORDER:
        return (0, REAL_ORDER.index(name))
    if name in OTHER_ORDER:
        return (1, OTHER_ORDER.index(name))
    return (2, archetype_rank(name))


def with_learned_scores(prep: Prepared, scores: dict[str, list[float]]) -> Prepared:
    """The prepared corpus with each turn's learned score replaced by `scores` (the
    trainer's leave-one-repository-out scores), so the engine replays fold-out."""
    sessions = []
    for s in prep.facts.sessions:
        new = scores.get(s.session_id)
        if new is None or len(new) != len(s.turns):
            raise ValueError(f"no fold-out scores for {s.session_id} ({len(s.turns)} turns)")
        turns = tuple(replace(t, learned=v) for t, v in zip(s.turns, new, strict=True))
        sessions.append(replace(s, turns=turns))
    return replace(prep, facts=replace(prep.facts, sessions=tuple(sessions)))


def measure(
    sessions: list[dict[str, Any]], learned_scores: dict[str, list[float]] | None = None
) -> dict[str, Any]:
    """Per policy: totals and per-bucket escalation for one protocol's sessions."""
    prep = prepare(sessions, "figures")
    if learned_scores is not None:
        prep = with_learned_scores(prep, learned_scores)
    doc = asyncio.run(run_policies(prep, list(POLICIES)))
    baseline = doc["policies"][BASELINE]["cost_per_1k_sessions"]
    rows: dict[str, Any] = {}
    for name in ENGINE_POLICIES:
        p = doc["policies"][name]
        buckets = {
            a: {
                "sessions": v["sessions"],
                "hard_sessions": v["hard_sessions"],
                "escalated": v["sessions_escalated"],
                "first_escalation_turn_median": v["first_escalation_turn_median"],
            }
            for a, v in sorted(p["archetypes"].items(), key=lambda kv: _bucket_rank(kv[0]))
        }
        rows[name] = {
            "sessions": p["sessions"],
            "turns": p["turns"],
            "hard_sessions": p["hard_sessions"],
            "escalated": p["sessions_escalated"],
            "false_positive_sessions": p["false_positive_sessions"],
            "hard_turn_coverage": p["hard_turn_coverage"],
            "strong_turn_share": p["strong_turn_share"],
            "first_escalation_turn_median": p["first_escalation_turn_median"],
            "cost_per_1k_sessions": p["cost_per_1k_sessions"],
            "cost_vs_frontier_affinity": round(p["cost_per_1k_sessions"] / baseline, 4)
            if baseline
            else None,
            "triggers": p["triggers"],
            "denied_turns": p["denied_turns"],
            "buckets": buckets,
        }
    return rows


def framework_of(doc: dict[str, Any]) -> str:
    return str((doc.get("source") or {}).get("framework") or "-")


def _groups(sessions: list[dict[str, Any]]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(protocol, framework, sessions): per protocol, then per framework if it has several."""
    out = []
    by_protocol: dict[str, list[dict[str, Any]]] = {}
    for s in sessions:
        by_protocol.setdefault(protocol_of(s), []).append(s)
    for protocol, group in sorted(by_protocol.items()):
        out.append((protocol, "all", group))
        frameworks = sorted({framework_of(s) for s in group})
        if len(frameworks) > 1:
            for fw in frameworks:
                out.append((protocol, fw, [s for s in group if framework_of(s) == fw]))
    return out


def run_all(
    corpus_dir: Path | None,
    split_frameworks: bool = True,
    learned_scores: dict[str, list[float]] | None = None,
) -> list[dict[str, Any]]:
    """`learned_scores` (fold-out, by session id) replace the shipped scorer's on the
    real corpora, which it was trained on."""
    results = []
    for c in corpora(corpus_dir):
        sessions = c.load()
        scores = learned_scores if c.name.startswith("real") else None
        for protocol, framework, group in _groups(sessions):
            if framework != "all" and (not split_frameworks or c.name.startswith("independent")):
                continue
            print(f"{c.name} / {protocol} / {framework}: {len(group)} sessions", file=sys.stderr)
            results.append(
                {
                    "corpus": c.name,
                    "held_out": c.held_out,
                    "protocol": protocol,
                    "framework": framework,
                    "policies": measure(group, scores),
                    "learned_scores": "fold-out" if scores is not None else "shipped",
                }
            )
        del sessions
        gc.collect()
    return results


def _protocol(r: dict[str, Any]) -> str:
    return r["protocol"] if r["framework"] == "all" else f"{r['protocol']} ({r['framework']})"


def _policy(name: str, r: dict[str, Any]) -> str:
    learned = name in LEARNED_READERS
    if learned and r.get("learned_scores") == "fold-out":
        return f"`{name}` (fold-out)"
    if learned and r["corpus"].startswith("real"):
        return f"`{name}` (in-sample)"
    return f"`{name}`"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _buckets(b: dict[str, Any]) -> str:
    return "; ".join(f"{a} {v['escalated']}/{v['sessions']}" for a, v in b.items())


def _triggers(p: dict[str, Any]) -> str:
    found = ", ".join(f"{k} {v}" for k, v in sorted(p["triggers"].items())) or "none"
    return f"{found}; {p['denied_turns']} denied"


def _first(b: dict[str, Any]) -> str:
    return (
        "; ".join(
            f"{a} {v['first_escalation_turn_median']}"
            for a, v in b.items()
            if v["first_escalation_turn_median"] is not None
        )
        or "-"
    )


def markdown(results: list[dict[str, Any]], stamp: str, figure: str) -> str:
    lines = [
        BEGIN,
        "",
        f"_Generated by `python -m eval.realtraffic.figures` — {stamp}._",
        "",
        "| corpus | protocol (agents) | policy "
        "| sessions escalated per bucket (escalated/sessions) "
        "| false-positive sessions | hard-turn coverage | strong share of requests "
        "| first escalation turn (median) "
        "| cost vs always-frontier-affinity | escalations by trigger; turns denied by a cap |",
        "|---|---|---|---|---:|---:|---:|---|---:|---|",
    ]
    for r in results:
        for name, p in r["policies"].items():
            lines.append(
                f"| {r['corpus']} | {_protocol(r)} | {_policy(name, r)} | {_buckets(p['buckets'])} "
                f"| {p['false_positive_sessions']} of {p['sessions'] - p['hard_sessions']} "
                f"| {_pct(p['hard_turn_coverage'])} | {_pct(p.get('strong_turn_share'))} "
                f"| {_first(p['buckets'])} "
                f"| {_pct(p['cost_vs_frontier_affinity'])} | {_triggers(p)} |"
            )
    lines += ["", f"![sessions escalated per bucket]({figure})", "", END]
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [r for r in results if r["framework"] == "all"]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.8), sharey=True)
    for ax, r in zip(axes if len(panels) > 1 else [axes], panels, strict=True):
        names = list(r["policies"]["escalation"]["buckets"])
        x = range(len(names))
        for offset, (policy, colour, label) in enumerate(PLOTTED):
            b = r["policies"][policy]["buckets"]
            share = [
                100 * b[n]["escalated"] / b[n]["sessions"] if b[n]["sessions"] else 0 for n in names
            ]
            ax.bar([i + 0.2 * offset for i in x], share, width=0.2, color=colour, label=label)
        ax.set_xticks([i + 0.3 for i in x])
        ax.set_xticklabels([n.replace("_", "\n") for n in names], fontsize=7)
        ax.set_title(f"{r['corpus'].split(' (')[0]}\n{r['protocol']}", fontsize=8)
        ax.set_ylim(0, 100)
    axes_list = axes if len(panels) > 1 else [axes]
    axes_list[0].set_ylabel("sessions escalated (%)")
    axes_list[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("Sessions escalated per difficulty bucket", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m eval.realtraffic.figures",
        description="Replay the synthetic, independent and real corpora through the engine "
        "(capped and uncapped) and write docs/real-traffic figures.",
    )
    p.add_argument("--corpus-dir", type=Path, help="output folder of eval.realtraffic.build")
    p.add_argument("--json", type=Path, default=ROOT / "docs" / "real-traffic-figures.json")
    p.add_argument(
        "--figure", type=Path, default=ROOT / "docs" / "figures" / "real-traffic-escalation.png"
    )
    p.add_argument("--no-doc", action="store_true", help="do not rewrite docs/real-traffic.md")
    p.add_argument(
        "--learned-scores",
        type=Path,
        help="fold-out learned scores of the real sessions "
        "(python -m eval.train_session_scorer --foldout-scores FILE); without it the real "
        "rows of the learned policies use the shipped scorer, trained on them (in-sample)",
    )
    args = p.parse_args(argv)
    scores = orjson.loads(args.learned_scores.read_bytes()) if args.learned_scores else None
    results = run_all(args.corpus_dir, learned_scores=scores)
    stamp = measured_stamp()
    plot(results, args.figure)
    section = markdown(results, stamp, f"figures/{args.figure.name}")
    payload = {"measured": stamp, "results": results}
    publish(args.json, payload, section, None if args.no_doc else DOC, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
