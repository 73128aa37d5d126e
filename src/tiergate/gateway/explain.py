"""The read-only diagnostic: what the engine would decide for a request.

It runs the same planner as a real request (session id, tier, strategy,
pins) and stops before dispatch, so nothing is sent upstream and nothing is
committed: the planner only reads state, and `commit` is never called here.
"""

from __future__ import annotations

from typing import Any

from tiergate.core.model import ChatRequest
from tiergate.gateway.planner import RoutePlan
from tiergate.routing.difficulty import delta_score, full_score


def describe_plan(plan: RoutePlan, req: ChatRequest) -> dict[str, Any]:
    """A JSON-ready account of a plan: identifiers and scores, never prompt text."""
    d = plan.decision
    out: dict[str, Any] = {
        "router": plan.router.name if plan.router else None,
        "session": (
            {
                "source": plan.session.source,
                "long_pin_eligible": plan.session.long_pin_eligible,
                "scope": plan.scope,
            }
            if plan.session
            else None
        ),
        "candidates": plan.models,
        "would_serve": plan.models[0] if plan.models else None,
        "pins": {
            "model": plan.pins.model,
            "channel": (
                {"channel": plan.channel_pin.channel, "key_index": plan.channel_pin.key_index}
                if plan.channel_pin
                else None
            ),
        },
        "scores": {"full_transcript": full_score(req), "delta": delta_score(req)},
        "x_orca_session_tier": plan.tier_header,
    }
    if d is not None:
        out["escalation"] = {
            "serve_tier": d.serve_tier,
            "session_tier": d.session_tier,
            "reason": d.reason,
            "trigger": d.trigger,
            "shadow": d.shadow,
            "threshold": d.threshold,
            "threshold_source": d.threshold_source,
            "difficulty_streak": d.difficulty_streak,
            "strike_count": d.strike_count,
            "share_capped": d.share_capped,
            "pending_intents": [type(i).__name__ for i in d.intents],
            "events_on_commit": [e.kind for e in d.events],
        }
    return out
