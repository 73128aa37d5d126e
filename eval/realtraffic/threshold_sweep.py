"""What raising `escalation.delta_t2` buys and costs, per corpus and agent protocol.

    python -m eval.realtraffic.threshold_sweep --corpus-dir realtraffic \
        --learned-scores /tmp/foldout.json

docs/session-scorer.md tells an operator who would rather escalate fewer easy
sessions to raise the threshold the difficulty score is compared with. This
measures that: each corpus of eval.realtraffic.figures (synthetic default,
independent synthetic held out, real SWE-bench Lite dev by protocol) is
extracted once (the gateway's codec, scorers and strike producers), then the
real engine is replayed per threshold under the shipped capped `escalation`
policy with `scorer: learned` and, for comparison, `scorer: lexical`. Real rows
of the learned scorer use the trainer's fold-out scores (a session scored by a
model that never saw its instance), exactly as the figures do.

Per threshold: sessions escalated per difficulty class (counts, rates), by
which trigger, turns denied by a cap, and cost against always-frontier with
affinity. Writes docs/threshold-sweep.json, the operating-curve figure
docs/figures/threshold-sweep.svg and the section of docs/real-traffic.md
between the `sweep:begin` / `sweep:end` markers.

The sweep reports; it chooses nothing. The shipped default stays 0.55.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
from tqdm import tqdm

from eval.common import measured_stamp, publish
from eval.realtraffic import figures
from eval.realtraffic.svg import Curve, Panel, operating_curves
from tiergate.replay import experiments as ex
from tiergate.replay.costmodel import CostModel
from tiergate.replay.features import CorpusFacts, SessionFacts
from tiergate.replay.harness import STANDARD_POLICIES, Policy, RunResult, replay_router
from tiergate.replay.metrics import outcomes
from tiergate.replay.pipeline import prepare
from tiergate.routing.escalation import DEFAULT_DELTA_T2

THRESHOLDS = (0.45, 0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95)
SCORERS = ("learned", "lexical")
CLASSES = ("easy", "medium", "hard")
BASELINE = "always-frontier-affinity"
#: Issue #15's targets: (max easy rate, min hard rate) per kind of corpus.
TARGETS = {"real": (0.10, 0.60), "synthetic": (0.02, 0.90)}
COLOURS = {"learned": "#4c72b0", "lexical": "#55a868"}
ROOT = figures.ROOT
DOC = ROOT / "docs" / "real-traffic.md"
BEGIN, END = "<!-- sweep:begin -->", "<!-- sweep:end -->"

Tick = Callable[[], None]


def session_class(s: SessionFacts) -> str:
    """easy / medium / hard: the SWE-bench bucket on real traffic; on synthetic
    corpora a session is hard when it has a `needs_strong` turn, else easy."""
    if s.archetype in CLASSES:
        return s.archetype
    return "hard" if s.hard else "easy"


def sweep_policy(scorer: str, threshold: float, capped: bool = True) -> Policy:
    """The shipped `escalation` policy (or its uncapped twin) with the scorer named
    and `delta_t2` set; every other setting is the config default."""
    if capped:
        return Policy(
            f"sweep-{scorer}@{threshold:.3f}",
            router=replay_router(scorer=scorer, delta_t2=threshold),
        )
    return replace(
        ex.ENGINE_UNCAPPED,
        name=f"sweep-{scorer}-uncapped@{threshold:.3f}",
        router=replay_router(share_cap_percent=100, scorer=scorer, delta_t2=threshold),
    )


def _rate(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def point(run: RunResult, baseline_cost: float) -> dict[str, Any]:
    """One threshold's outcome: per class escalated (by trigger), cost, caps."""
    rows = outcomes(run)
    classes: dict[str, dict[str, Any]] = {}
    for name in CLASSES:
        sub = [o for o, s in zip(rows, run.facts.sessions, strict=True) if session_class(s) == name]
        if not sub:
            continue
        esc = [o for o in sub if o.escalated]
        classes[name] = {
            "sessions": len(sub),
            "escalated": len(esc),
            "rate": _rate(len(esc), len(sub)),
            "triggers": dict(sorted(Counter(o.trigger or "-" for o in esc).items())),
        }
    cost = 1000 * sum(o.cost for o in rows) / len(rows)
    hard_turns = sum(o.hard_turns for o in rows)
    return {
        "classes": classes,
        "escalated": sum(o.escalated for o in rows),
        "triggers": dict(sorted(Counter(o.trigger for o in rows if o.trigger).items())),
        "denied_turns": sum(
            1 for r in run.records if r.reason is not None and r.reason.startswith("denied")
        ),
        "hard_turn_coverage": _rate(sum(o.covered_turns for o in rows), hard_turns),
        "cost_per_1k_sessions": round(cost, 4),
        "cost_vs_frontier_affinity": round(cost / baseline_cost, 4) if baseline_cost else None,
        "_escalated_sessions": sorted(o.index for o in rows if o.escalated),
    }


async def sweep_facts(
    facts: CorpusFacts,
    thresholds: Sequence[float] = THRESHOLDS,
    scorers: Sequence[str] = SCORERS,
    capped: bool = True,
    tick: Tick | None = None,
) -> dict[str, Any]:
    """Replay the same extracted facts once per (scorer, threshold); the extraction
    is the expensive part and is policy-independent (replay.features)."""
    rp = ex.Replayer(facts, CostModel())
    base = await rp.run(STANDARD_POLICIES[BASELINE])
    base_cost = 1000 * sum(o.cost for o in outcomes(base)) / max(1, len(facts.sessions))
    out: dict[str, Any] = {"baseline_cost_per_1k_sessions": round(base_cost, 4)}
    for scorer in scorers:
        points = []
        for t in sorted(thresholds):
            run = await rp.run(sweep_policy(scorer, t, capped))
            points.append({"threshold": t, **point(run, base_cost)})
            rp.runs.pop(run.policy.name)  # the records are large; each run is used once
            if tick is not None:
                tick()
        out[scorer] = points
    return out


def monotone(points: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Whether, as the threshold rises, escalated counts per class never rise and
    each escalated set is a subset of the one below (checked, not assumed: caps
    shared across sessions could in principle free a session at a higher one)."""
    counts = all(
        b["classes"][c]["escalated"] <= a["classes"][c]["escalated"]
        for a, b in itertools.pairwise(points)
        for c in a["classes"]
    )
    subsets = all(
        set(b["_escalated_sessions"]) <= set(a["_escalated_sessions"])
        for a, b in itertools.pairwise(points)
    )
    return {"counts_non_increasing": counts, "sessions_nested": subsets}


def meets(points: Sequence[dict[str, Any]], kind: str) -> list[float]:
    """Thresholds whose easy and hard rates both meet the issue's target for `kind`."""
    max_easy, min_hard = TARGETS[kind]
    return [
        p["threshold"]
        for p in points
        if "easy" in p["classes"]
        and "hard" in p["classes"]
        and p["classes"]["easy"]["rate"] <= max_easy + 1e-9
        and p["classes"]["hard"]["rate"] >= min_hard - 1e-9
    ]


def _public(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in p.items() if not k.startswith("_")} for p in points]


def _by_protocol(sessions: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for s in sessions:
        groups.setdefault(figures.protocol_of(s), []).append(s)
    return sorted(groups.items())


def run_all(
    corpus_dir: Path | None,
    learned_scores: dict[str, list[float]] | None,
    thresholds: Sequence[float] = THRESHOLDS,
    capped: bool = True,
) -> list[dict[str, Any]]:
    """Every corpus of eval.realtraffic.figures, by protocol, swept."""
    results = []
    bar = tqdm(total=0, unit="replay", desc="threshold sweep", file=sys.stderr)
    for c in figures.corpora(corpus_dir):
        real = c.name.startswith("real")
        scores = learned_scores if real else None
        for protocol, group in _by_protocol(c.load()):
            bar.set_postfix_str(f"{c.name.split(' (')[0]} / {protocol}: extracting")
            prep = prepare(group, "threshold-sweep")
            if scores is not None:
                prep = figures.with_learned_scores(prep, scores)
            del group
            bar.total = (bar.total or 0) + len(SCORERS) * len(thresholds)
            bar.set_postfix_str(f"{c.name.split(' (')[0]} / {protocol}: replaying")
            swept = asyncio.run(sweep_facts(prep.facts, thresholds, SCORERS, capped, bar.update))
            kind = "real" if real else "synthetic"
            results.append(
                {
                    "corpus": c.name,
                    "held_out": c.held_out,
                    "protocol": protocol,
                    "kind": kind,
                    "learned_scores": "fold-out" if scores is not None else "shipped",
                    "policy": "escalation (capped)" if capped else "escalation-uncapped",
                    "baseline_cost_per_1k_sessions": swept["baseline_cost_per_1k_sessions"],
                    **{
                        s: {
                            "points": _public(swept[s]),
                            "monotone": monotone(swept[s]),
                            "meets_target_at": meets(swept[s], kind),
                        }
                        for s in SCORERS
                    },
                }
            )
            del prep, swept
            gc.collect()
    bar.close()
    return results


def _pct(p: dict[str, Any], c: str) -> str:
    v = p["classes"].get(c)
    return "-" if v is None else f"{v['escalated']}/{v['sessions']} ({100 * v['rate']:.1f} %)"


def _trig(p: dict[str, Any], c: str) -> str:
    v = p["classes"].get(c)
    return "-" if v is None else (", ".join(f"{k} {n}" for k, n in v["triggers"].items()) or "none")


def title(r: dict[str, Any]) -> str:
    return f"{r['corpus'].split(' (')[0]} / {r['protocol']}"


def markdown(results: list[dict[str, Any]], stamp: str, figure: str, command: str) -> str:
    lines = [
        BEGIN,
        "",
        f"_Generated by `{command}` — {stamp}._",
        "",
        "| corpus / protocol | scorer | `delta_t2` | easy escalated | medium escalated "
        "| hard escalated | first trigger: easy / hard sessions | turns denied by a cap "
        "| cost vs always-frontier-affinity |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in results:
        for s in SCORERS:
            label = f"{s} ({r['learned_scores']})" if s == "learned" else s
            for p in r[s]["points"]:
                t = f"{p['threshold']:.2f}"
                if p["threshold"] == DEFAULT_DELTA_T2:
                    t = f"**{t}**"
                lines.append(
                    f"| {title(r)} | {label} | {t} | {_pct(p, 'easy')} | {_pct(p, 'medium')} "
                    f"| {_pct(p, 'hard')} | {_trig(p, 'easy')} / {_trig(p, 'hard')} "
                    f"| {p['denied_turns']} "
                    f"| {100 * p['cost_vs_frontier_affinity']:.1f} % |"
                )
    lines += ["", "Thresholds meeting issue #15's targets (both sides at once):", ""]
    for r in results:
        max_easy, min_hard = TARGETS[r["kind"]]
        for s in SCORERS:
            found = r[s]["meets_target_at"]
            lines.append(
                f"- {title(r)}, {s} (easy <= {100 * max_easy:g} %, hard >= {100 * min_hard:g} %): "
                + (", ".join(f"{t:.2f}" for t in found) if found else "**none**")
            )
    lines += ["", f"![operating curves per protocol as delta_t2 varies]({figure})", "", END]
    return "\n".join(lines)


def run_labels(xy: Sequence[tuple[float, float]], ts: Sequence[float]) -> list[str | None]:
    """One label per run of consecutive thresholds landing on the same point
    ("0.60-0.95"), written at the run's first point; None elsewhere."""
    out: list[str | None] = [None] * len(ts)
    i = 0
    while i < len(ts):
        j = i
        while j + 1 < len(ts) and xy[j + 1] == xy[i]:
            j += 1
        out[i] = f"{ts[i]:.2f}" if i == j else f"{ts[i]:.2f}-{ts[j]:.2f}"
        i = j + 1
    return out


def plot(
    results: list[dict[str, Any]], path: Path, stamp: str, policy: str = "escalation (capped)"
) -> None:
    panels = []
    for r in results:
        curves = []
        for s in SCORERS:
            pts = r[s]["points"]
            xy = [
                (100 * p["classes"]["easy"]["rate"], 100 * p["classes"]["hard"]["rate"])
                for p in pts
            ]
            ts = [p["threshold"] for p in pts]
            labels = run_labels(xy, ts)
            marked = ts.index(DEFAULT_DELTA_T2) if DEFAULT_DELTA_T2 in ts else None
            name = f"{s} scorer" + (" (fold-out on real)" if s == "learned" else "")
            curves.append(Curve(name, COLOURS[s], xy, labels, marked, s == "lexical"))
        max_easy, min_hard = TARGETS[r["kind"]]
        role = "held out" if r["held_out"] else ("fold-out" if r["kind"] == "real" else "in-sample")
        sub = f"{role}; target box: easy ≤ {100 * max_easy:g} %, hard ≥ {100 * min_hard:g} %"
        panels.append(Panel(title(r), curves, (100 * max_easy, 100 * min_hard), sub))
    operating_curves(
        panels,
        path,
        f"Sessions escalated as escalation.delta_t2 rises, policy {policy}",
        columns=3,
        note=f"Thresholds {min(THRESHOLDS):.2f}-{max(THRESHOLDS):.2f}; "
        f"real: SWE-bench Lite buckets, synthetic: sessions with/without needs_strong turns. "
        f"{stamp}.",
        marked_label=f"shipped default delta_t2 {DEFAULT_DELTA_T2}",
    )


def argv_of(argv: list[str] | None) -> list[str]:
    return list(sys.argv[1:] if argv is None else argv)


def measure(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """Run the sweep; the JSON document (stamped with date, commit and command)."""
    scores = orjson.loads(args.learned_scores.read_bytes()) if args.learned_scores else None
    capped = not args.uncapped
    started = time.perf_counter()
    results = run_all(args.corpus_dir, scores, args.thresholds, capped)
    stamp = measured_stamp()
    return {
        "measured": stamp,
        "command": command,
        "runtime_seconds": round(time.perf_counter() - started, 1),
        "policy": "escalation (capped)" if capped else "escalation-uncapped",
        "thresholds": list(args.thresholds),
        "shipped_threshold": DEFAULT_DELTA_T2,
        "targets": {k: {"easy_rate_max": e, "hard_rate_min": h} for k, (e, h) in TARGETS.items()},
        "classes": "real: SWE-bench Lite fix-time buckets; synthetic: hard = a session with "
        "a needs_strong turn, easy = the rest",
        "chooses_nothing": "a report; the shipped delta_t2 stays 0.55",
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m eval.realtraffic.threshold_sweep",
        description="Replay the synthetic, independent and real corpora through the engine "
        "at a range of escalation.delta_t2 thresholds (learned and lexical scorer) and "
        "write the operating curves.",
    )
    p.add_argument("--corpus-dir", type=Path, help="output folder of eval.realtraffic.build")
    p.add_argument(
        "--learned-scores",
        type=Path,
        help="fold-out learned scores of the real sessions "
        "(python -m eval.train_session_scorer --foldout-scores FILE); without it the real "
        "learned rows use the shipped scorer, trained on them (in-sample)",
    )
    p.add_argument(
        "--thresholds",
        type=lambda s: tuple(float(x) for x in s.split(",")),
        default=THRESHOLDS,
        help="comma-separated delta_t2 values (default %(default)s)",
    )
    p.add_argument("--uncapped", action="store_true", help="lift the share caps")
    p.add_argument("--json", type=Path, default=ROOT / "docs" / "threshold-sweep.json")
    p.add_argument("--figure", type=Path, default=ROOT / "docs" / "figures" / "threshold-sweep.svg")
    p.add_argument("--no-doc", action="store_true", help="do not rewrite docs/real-traffic.md")
    p.add_argument(
        "--from-json",
        type=Path,
        help="redraw the figure and the doc section from this earlier output; replays nothing",
    )
    args = p.parse_args(argv)
    if args.from_json:
        doc = orjson.loads(args.from_json.read_bytes())
    else:
        command = "python -m eval.realtraffic.threshold_sweep " + shlex.join(argv_of(argv))
        doc = measure(args, command.strip())
    results, stamp = doc["results"], doc["measured"]
    plot(results, args.figure, stamp, doc.get("policy", "escalation (capped)"))
    try:
        figure = str(args.figure.resolve().relative_to(DOC.parent))
    except ValueError:
        figure = str(args.figure)
    section = markdown(results, f"{stamp}, policy {doc['policy']}", figure, doc["command"])
    fresh = None if args.from_json else args.json
    publish(fresh, doc, section, None if args.no_doc else DOC, BEGIN, END)
    print(f"runtime {doc['runtime_seconds']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
