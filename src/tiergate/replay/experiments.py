"""The report's experiments, each a function of one prepared corpus.

1. main replay: outcomes per archetype under the escalation engine;
2. five policies (plus the engine under its shipped share caps) on the same sessions;
3. threshold sweep: the delta gate, the full-transcript gate, the percentile gate;
4. adversarial cap run: every request asks for the strong tier;
5. prevalence sensitivity: per-archetype costs re-weighted from 0 to 100 % hard;
6. escalation latency by trigger;
7. end to end over HTTP (e2e.py).

The corpus is 50 % hard by construction (a stress mix, report §5). Under the
shipped 20 % share cap such a mix saturates the cap, which then decides
nearly everything. The trigger experiments (1, 3, 6) therefore run the engine
with the share caps lifted (`ENGINE_UNCAPPED`: every other setting shipped);
experiment 2 shows both, and experiment 4 measures the caps on their own.

Keys starting with "_" hold per-turn series for the figures and are left out
of the metrics JSON.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tiergate.replay.corpus import archetype_rank
from tiergate.replay.costmodel import CostModel
from tiergate.replay.features import CorpusFacts
from tiergate.replay.harness import (
    STANDARD_POLICIES,
    Policy,
    RunResult,
    StoreFactory,
    memory_store,
    replay_router,
    run_policy,
)
from tiergate.replay.metrics import SessionOutcome, outcomes, policy_metrics, summarize
from tiergate.routing.escalation import effective_delta_threshold

ENGINE_UNCAPPED = Policy(
    "escalation-uncapped",
    router=replay_router(share_cap_percent=100),
    workspace_cap_percent=None,
)
"""The engine with every shipped setting except the share caps (router and workspace)."""

SCORER_POLICIES: dict[str, Policy] = {
    p.name: p
    for scorer in ("learned", "lexical")
    for p in (
        Policy(f"escalation-{scorer}", router=replay_router(scorer=scorer)),
        Policy(
            f"escalation-{scorer}-uncapped",
            router=replay_router(share_cap_percent=100, scorer=scorer),
            workspace_cap_percent=None,
        ),
    )
}
"""The shipped and uncapped engines with each `escalation.scorer` named explicitly
(`escalation` itself reads the default, `learned`; routing.session_scorer)."""

CAP_MODE_POLICIES: dict[str, Policy] = {
    f"escalation-{mode}": Policy(f"escalation-{mode}", router=replay_router(share_cap_mode=mode))
    for mode in ("admit", "suppress")
}
"""The shipped engine with each `escalation.share_cap_mode` named explicitly
(docs/escalation.md, "Caps": measured side by side)."""

SWEEP_T2 = (0.35, 0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70, 0.75)
SWEEP_PERCENTILES = (70.0, 80.0, 90.0, 95.0)
PREVALENCES = (0.0, 0.05, 0.10, 0.20, 0.30, 0.50, 0.75, 1.0)
PREVALENCE_POLICIES = (
    "always-cheap",
    "always-cheap-affinity",
    "always-frontier",
    "always-frontier-affinity",
    "escalation",
    "escalation-uncapped",
)
MARGIN_TARGET = 0.1


@dataclass
class Replayer:
    """Runs policies over one prepared corpus, memoising runs by policy name."""

    facts: CorpusFacts
    cost_model: CostModel = field(default_factory=CostModel)
    store_factory: StoreFactory = memory_store
    progress: Callable[[int], None] | None = None
    runs: dict[str, RunResult] = field(default_factory=dict)

    async def run(self, policy: Policy) -> RunResult:
        if policy.name not in self.runs:
            self.runs[policy.name] = await run_policy(
                self.facts, policy, self.cost_model, self.store_factory, self.progress
            )
        return self.runs[policy.name]


# ---- 1. main replay -------------------------------------------------------------------


async def main_replay(rp: Replayer) -> dict[str, Any]:
    """Outcomes by archetype for the engine as shipped, share caps included."""
    run = await rp.run(STANDARD_POLICIES["escalation"])
    rows = outcomes(run)
    by_archetype = {}
    for a in sorted({o.archetype for o in rows}, key=archetype_rank):
        sub = [o for o in rows if o.archetype == a]
        s = summarize(sub)
        by_archetype[a] = {
            "sessions": s["sessions"],
            "hard_sessions": s["hard_sessions"],
            "escalated": s["sessions_escalated"],
            "by_difficulty": s["triggers"].get("difficulty", 0),
            "by_strikes": s["triggers"].get("strikes", 0),
            "other_triggers": sum(
                v for k, v in s["triggers"].items() if k not in ("difficulty", "strikes")
            ),
            "false_positives": s["false_positive_sessions"],
            "missed": s["missed_sessions"],
            "first_escalation_turn_mean": s["first_escalation_turn_mean"],
            "first_escalation_turn_median": s["first_escalation_turn_median"],
            "peak_delta_score": round(max(_peak(run, o.index) for o in sub), 3),
        }
    first_turns: dict[str, list[int]] = {}
    for o in rows:
        if o.first_strong_turn is not None and o.trigger is not None:
            first_turns.setdefault(o.trigger, []).append(o.first_strong_turn)
    return {
        "policy": run.policy.name,
        "threshold": effective_delta_threshold(run.policy.engine_router()),
        "archetypes": by_archetype,
        "audit_events": dict(Counter(e.kind for e in run.events)),
        "_first_turns": first_turns,
    }


def _peak(run: RunResult, session: int) -> float:
    return max(t.delta for t in run.facts.sessions[session].turns)


# ---- 2. policies ----------------------------------------------------------------------


def policy_list(names: Sequence[str] | None = None) -> list[Policy]:
    """Policies by name: the five standard ones, the uncapped engine, and sweep names."""
    known = {
        **STANDARD_POLICIES,
        ENGINE_UNCAPPED.name: ENGINE_UNCAPPED,
        **SCORER_POLICIES,
        **CAP_MODE_POLICIES,
    }
    if not names:
        return [*STANDARD_POLICIES.values(), ENGINE_UNCAPPED]
    missing = [n for n in names if n not in known]
    if missing:
        raise KeyError(f"unknown policy {missing[0]!r}; known: {', '.join(known)}")
    return [known[n] for n in names]


async def policies(rp: Replayer, names: Sequence[str] | None = None) -> dict[str, Any]:
    out = {}
    for policy in policy_list(names):
        out[policy.name] = policy_metrics(await rp.run(policy))
    return out


# ---- 3. threshold sweep ---------------------------------------------------------------


def _sweep_point(run: RunResult) -> dict[str, Any]:
    rows = outcomes(run)
    s = summarize(rows)
    return {
        "sessions_escalated": s["sessions_escalated"],
        "by_difficulty": s["triggers"].get("difficulty", 0),
        "by_strikes": s["triggers"].get("strikes", 0),
        "false_positive_sessions": s["false_positive_sessions"],
        "missed_sessions": s["missed_sessions"],
        "hard_turn_coverage": s["hard_turn_coverage"],
        "cost_per_1k_sessions": s["cost_per_1k_sessions"],
        "_signature": sorted((o.index, o.trigger or "") for o in rows if o.escalated),
    }


def margin(points: dict[float, dict[str, Any]], chosen: float) -> dict[str, Any]:
    """How far the outcome stays identical around `chosen`, measured on the sweep grid.

    Identical means the same sessions escalate with the same triggers. The
    margin on each side is the distance to the farthest grid point with the
    same outcome such that every grid point in between agrees too.
    """
    grid = sorted(points)
    if chosen not in points:
        return {"chosen": chosen, "below": None, "above": None, "met": False}
    ref = points[chosen]["_signature"]
    i = grid.index(chosen)
    lo = hi = chosen
    for t in reversed(grid[:i]):
        if points[t]["_signature"] != ref:
            break
        lo = t
    for t in grid[i + 1 :]:
        if points[t]["_signature"] != ref:
            break
        hi = t
    below, above = round(chosen - lo, 3), round(hi - chosen, 3)
    return {
        "chosen": chosen,
        "identical_from": lo,
        "identical_to": hi,
        "below": below,
        "above": above,
        "met": below >= MARGIN_TARGET - 1e-9 and above >= MARGIN_TARGET - 1e-9,
    }


async def threshold_sweep(rp: Replayer) -> dict[str, Any]:
    delta: dict[float, dict[str, Any]] = {}
    full: dict[float, dict[str, Any]] = {}
    pct: dict[float, dict[str, Any]] = {}
    for t in SWEEP_T2:
        p = replace(ENGINE_UNCAPPED, name=f"delta-gate@{t:.2f}", router=_uncapped(delta_t2=t))
        delta[t] = _sweep_point(await rp.run(p))
        p = replace(
            ENGINE_UNCAPPED, name=f"full-gate@{t:.2f}", router=_uncapped(delta_t2=t), score="full"
        )
        full[t] = _sweep_point(await rp.run(p))
    for q in SWEEP_PERCENTILES:
        p = replace(ENGINE_UNCAPPED, name=f"percentile-gate@{q:g}", router=_uncapped(percentile=q))
        pct[q] = _sweep_point(await rp.run(p))
    chosen = effective_delta_threshold(ENGINE_UNCAPPED.engine_router())
    facts = rp.facts
    hard = [t.delta for s in facts.sessions for t in s.turns if t.served_index and t.needs_strong]
    # Failure loops are meant for the strike trigger, not the difficulty gate.
    hard_gate = [
        t.delta
        for s in facts.sessions
        if s.archetype != "failure_loop"
        for t in s.turns
        if t.served_index and t.needs_strong
    ]
    easy = [
        t.delta for s in facts.sessions for t in s.turns if t.served_index and not t.needs_strong
    ]
    easy_sessions = [
        t.delta for s in facts.sessions if not s.hard for t in s.turns if t.served_index
    ]
    return {
        "delta_gate": {f"{t:.2f}": _public(v) for t, v in delta.items()},
        "full_transcript_gate": {f"{t:.2f}": _public(v) for t, v in full.items()},
        "percentile_gate": {f"{q:g}": _public(v) for q, v in pct.items()},
        "threshold": chosen,
        "delta_margin": margin(delta, chosen),
        "scores": {
            "hard_turns": _dist(hard),
            "hard_turns_outside_failure_loops": _dist(hard_gate),
            "other_turns": _dist(easy),
            "easy_session_max": round(max(easy_sessions), 4) if easy_sessions else None,
        },
        "_delta_hard": hard,
        "_delta_other": easy,
        "_drift": _length_drift(facts),
    }


def _uncapped(**escalation: object) -> Any:
    return replay_router(share_cap_percent=100, **escalation)


def _public(point: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in point.items() if not k.startswith("_")}


def _dist(values: Sequence[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    qs = statistics.quantiles(values, n=20, method="inclusive")
    return {
        "n": len(values),
        "min": round(min(values), 4),
        "p5": round(qs[0], 4),
        "median": round(statistics.median(values), 4),
        "p95": round(qs[-1], 4),
        "max": round(max(values), 4),
    }


def _length_drift(facts: CorpusFacts) -> dict[str, list[float]]:
    """Mean full-transcript and delta score by turn over the long trivial sessions (§3.2)."""
    full: dict[int, list[float]] = {}
    delta: dict[int, list[float]] = {}
    for s in facts.sessions:
        if s.archetype != "long_trivial":
            continue
        for t in s.turns:
            if t.served_index:
                full.setdefault(t.served_index, []).append(t.full)
                delta.setdefault(t.served_index, []).append(t.delta)
    turns = sorted(k for k, v in full.items() if len(v) >= 5)
    return {
        "turn": [float(k) for k in turns],
        "full": [statistics.fmean(full[k]) for k in turns],
        "delta": [statistics.fmean(delta[k]) for k in turns],
    }


# ---- 4. adversarial cap run -----------------------------------------------------------


ADVERSARIAL = Policy("adversarial-explicit-strong", force_headers={"x-orcarouter-tier": "strong"})


async def adversarial(rp: Replayer, policy: Policy = ADVERSARIAL) -> dict[str, Any]:
    """Every request asks for strong: how closely the share cap holds the line.
    `policy` swaps the router (e.g. the spend basis) for the same attack."""
    run = await rp.run(policy)
    esc = run.policy.engine_router().escalation
    served = [r for r in run.records if r.tier is not None]
    basis_share = [
        (r.spend_share if esc.share_cap_basis == "spend" else r.request_share) for r in served
    ]
    strong = sum(r.tier == "strong" for r in served)
    spend = sum(r.cost for r in served)
    strong_spend = sum(r.cost for r in served if r.tier == "strong")
    final = strong_spend / spend if esc.share_cap_basis == "spend" else strong / len(served)
    cap = esc.share_cap_percent / 100
    warm = esc.share_warmup_requests
    # "After warm-up": from the first request after the warm-up floor at which the
    # share the engine sees has come down to the cap (the unconstrained warm-up
    # requests drive it far above; it cannot fall faster than traffic arrives).
    settled = next(
        (i for i, s in enumerate(basis_share) if i >= warm and s is not None and s <= cap),
        None,
    )
    after = [s for s in basis_share[settled:] if s is not None] if settled is not None else []
    half = [s for s in basis_share[len(basis_share) // 2 :] if s is not None]
    denied = Counter(e.trigger for e in run.events if e.kind == "denied_cap")
    return {
        "cap_percent": esc.share_cap_percent,
        "basis": esc.share_cap_basis,
        "warmup_requests": warm,
        "requests": len(served),
        "served_strong": strong,
        "strong_request_share": round(strong / len(served), 4),
        "strong_spend_share": round(strong_spend / spend, 4) if spend else None,
        "final_share": round(final, 4),
        "settled_at_request": settled,
        "max_deviation_after_settling_points": round(100 * max(abs(s - cap) for s in after), 3)
        if after
        else None,
        "max_share_after_settling": round(max(after), 4) if after else None,
        "max_deviation_second_half_points": round(100 * max(abs(s - cap) for s in half), 3)
        if half
        else None,
        "denials": sum(denied.values()),
        "denials_by_trigger": dict(denied),
        "denied_session_cap": sum(1 for r in served if r.reason == "denied:session_cap"),
        "_share": basis_share,
        "_request_share": [r.request_share for r in served],
        "_spend_share": [r.spend_share for r in served],
    }


# ---- 5. prevalence ----------------------------------------------------------------------


def prevalence(rp: Replayer) -> dict[str, Any]:
    """Cost per 1,000 sessions as the hard share goes 0 -> 100 %, class mix held fixed."""
    out: dict[str, Any] = {"prevalences": list(PREVALENCES), "policies": {}}
    for name in PREVALENCE_POLICIES:
        run = rp.runs.get(name)
        if run is None:
            continue
        rows = outcomes(run)
        hard = [o for o in rows if o.hard]
        easy = [o for o in rows if not o.hard]
        hc, ec = _mean_cost(hard), _mean_cost(easy)
        hs, es = _mean(hard, "strong_cost"), _mean(easy, "strong_cost")
        curve = [1000 * ((1 - p) * ec + p * hc) for p in PREVALENCES]
        share = [
            ((1 - p) * es + p * hs) / ((1 - p) * ec + p * hc) if ec or hc else 0.0
            for p in PREVALENCES
        ]
        ht, et = _mean(hard, "turns"), _mean(easy, "turns")
        hst, est = _mean(hard, "strong_turns"), _mean(easy, "strong_turns")
        request_share = [
            ((1 - p) * est + p * hst) / ((1 - p) * et + p * ht) if et or ht else 0.0
            for p in PREVALENCES
        ]
        out["policies"][name] = {
            "cost_per_1k_sessions": [round(c, 3) for c in curve],
            "strong_spend_share": [round(s, 4) for s in share],
            "strong_request_share": [round(s, 4) for s in request_share],
        }
    return out


def _mean_cost(rows: Sequence[SessionOutcome]) -> float:
    return statistics.fmean(o.cost for o in rows) if rows else 0.0


def _mean(rows: Sequence[SessionOutcome], attr: str) -> float:
    return statistics.fmean(getattr(o, attr) for o in rows) if rows else 0.0


# ---- 6. escalation latency --------------------------------------------------------------


async def latency(rp: Replayer) -> dict[str, Any]:
    run = await rp.run(ENGINE_UNCAPPED)
    by: dict[str, list[int]] = {}
    for o in outcomes(run):
        if o.latency is not None and o.trigger is not None:
            by.setdefault(o.trigger, []).append(o.latency)
    table = {
        trig: {
            "sessions": len(v),
            "mean": round(statistics.fmean(v), 3),
            "median": statistics.median(v),
            "max": max(v),
            "histogram": dict(sorted(Counter(v).items())),
        }
        for trig, v in sorted(by.items())
    }
    return {"policy": run.policy.name, "by_trigger": table}
