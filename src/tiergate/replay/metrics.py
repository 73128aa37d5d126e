"""Replay metrics: the stable metrics JSON of DESIGN.md, per policy and per archetype.

Definitions (uniform across policies, computed from what served each turn):
- a turn is a billed request; failed upstream attempts are not turns;
- a session is *escalated* when at least one of its turns was served strong;
- `false_positive_sessions`: escalated sessions with no `needs_strong` turn;
- `missed_sessions`: sessions with a `needs_strong` turn and no strong turn;
- `hard_turn_coverage`: share of `needs_strong` turns served strong;
- `strong_turn_share`: share of all turns served strong;
- `escalation_latency_turns`: over escalated sessions with hard turns, the mean
  number of hard turns served on base before the first strong turn;
- `cache_hit_rate`: cached prompt tokens over all prompt tokens (cost model);
- `escalations_cut_off`: escalated sessions whose strong run was interrupted
  by a base serve before the de-escalation rule (or a client reset) ended it:
  a turn served base while the session's tier stayed strong (the share cap in
  `share_cap_mode: suppress`, or no strong model available).
  `escalations_cut_off_share` is that count over the sessions escalated;
- `cost_per_1k_sessions`: total cost / sessions x 1000 (USD).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tiergate.replay.corpus import archetype_rank
from tiergate.replay.features import SessionFacts
from tiergate.replay.harness import RunResult, TurnRecord

METRIC_KEYS = (
    "cost_per_1k_sessions",
    "hard_turn_coverage",
    "strong_turn_share",
    "sessions_escalated",
    "false_positive_sessions",
    "missed_sessions",
    "escalation_latency_turns",
    "cache_hit_rate",
    "escalations_cut_off",
)


@dataclass(frozen=True, slots=True)
class SessionOutcome:
    """One session under one policy."""

    index: int
    archetype: str
    turns: int
    hard_turns: int
    strong_turns: int
    covered_turns: int
    cost: float
    strong_cost: float
    prompt_tokens: int
    cached_tokens: float
    first_strong_turn: int | None
    """1-based billed-turn position of the first strong turn."""
    first_hard_turn: int | None
    latency: int | None
    """Hard turns served on base before the first strong turn (escalated hard sessions)."""
    trigger: str | None
    cut_off: bool = False
    """Served base on some turn while its tier stayed strong (an interrupted rescue)."""

    @property
    def escalated(self) -> bool:
        return self.strong_turns > 0

    @property
    def hard(self) -> bool:
        return self.hard_turns > 0


def session_outcome(
    sess: SessionFacts, records: Sequence[TurnRecord], policy_tier: str | None
) -> SessionOutcome:
    served = [r for r in records if r.tier is not None]
    first_strong = next((r.served_index for r in served if r.tier == "strong"), None)
    first_hard = next((r.served_index for r in served if r.needs_strong), None)
    hard_turns = sum(r.needs_strong for r in served)
    latency = None
    if first_strong is not None and hard_turns:
        latency = sum(
            1
            for r in served
            if r.needs_strong and r.tier == "base" and (r.served_index or 0) < first_strong
        )
    trigger = None
    if first_strong is not None:
        rec = next(r for r in served if r.tier == "strong")
        trigger = "policy" if policy_tier is not None else rec.trigger or "tier"
    return SessionOutcome(
        index=sess.index,
        archetype=sess.archetype,
        turns=len(served),
        hard_turns=hard_turns,
        strong_turns=sum(r.tier == "strong" for r in served),
        covered_turns=sum(r.tier == "strong" and r.needs_strong for r in served),
        cost=sum(r.cost for r in served),
        strong_cost=sum(r.cost for r in served if r.tier == "strong"),
        prompt_tokens=sum(r.prompt_tokens for r in served),
        cached_tokens=sum(r.cached_tokens for r in served),
        first_strong_turn=first_strong,
        first_hard_turn=first_hard,
        latency=latency,
        trigger=trigger,
        cut_off=any(r.tier == "base" and r.session_tier == "strong" for r in served),
    )


def outcomes(run: RunResult) -> list[SessionOutcome]:
    return [
        session_outcome(s, recs, run.policy.tier)
        for s, recs in zip(run.facts.sessions, run.by_session(), strict=True)
    ]


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def summarize(rows: Sequence[SessionOutcome]) -> dict[str, Any]:
    """The DESIGN metric keys (plus counts) over a set of session outcomes."""
    turns = sum(o.turns for o in rows)
    hard = sum(o.hard_turns for o in rows)
    latencies = [o.latency for o in rows if o.latency is not None]
    first = [o.first_strong_turn for o in rows if o.first_strong_turn is not None]
    return {
        "sessions": len(rows),
        "turns": turns,
        "hard_turns": hard,
        "hard_sessions": sum(o.hard for o in rows),
        "cost_per_1k_sessions": round(1000 * sum(o.cost for o in rows) / len(rows), 4)
        if rows
        else None,
        "hard_turn_coverage": _round(_ratio(sum(o.covered_turns for o in rows), hard)),
        "strong_turn_share": _round(_ratio(sum(o.strong_turns for o in rows), turns)),
        "sessions_escalated": sum(o.escalated for o in rows),
        "false_positive_sessions": sum(o.escalated and not o.hard for o in rows),
        "missed_sessions": sum(o.hard and not o.escalated for o in rows),
        "escalations_cut_off": sum(o.cut_off for o in rows),
        "escalations_cut_off_share": _round(
            _ratio(sum(o.cut_off for o in rows), sum(o.escalated for o in rows))
        ),
        "escalation_latency_turns": _round(statistics.fmean(latencies)) if latencies else None,
        "cache_hit_rate": _round(
            _ratio(sum(o.cached_tokens for o in rows), sum(o.prompt_tokens for o in rows))
        ),
        "triggers": dict(Counter(o.trigger for o in rows if o.trigger is not None)),
        "first_escalation_turn_mean": _round(statistics.fmean(first)) if first else None,
        "first_escalation_turn_median": statistics.median(first) if first else None,
    }


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def policy_metrics(run: RunResult) -> dict[str, Any]:
    """One policy's metrics JSON block: totals plus the per-archetype breakdown."""
    rows = outcomes(run)
    out = summarize(rows)
    names = sorted({o.archetype for o in rows}, key=archetype_rank)
    out["archetypes"] = {a: summarize([o for o in rows if o.archetype == a]) for a in names}
    out["audit_events"] = dict(Counter(e.kind for e in run.events))
    out["denied_turns"] = sum(
        1 for r in run.records if r.reason is not None and r.reason.startswith("denied")
    )
    return out
