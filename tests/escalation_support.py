"""Shared helpers for the escalation tests: router configs and a session driver."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tiergate.config import EscalationConfig, RouterConfig, Thresholds
from tiergate.routing.escalation import (
    EscalationDecision,
    EscalationInputs,
    resolve_escalation,
)
from tiergate.routing.escalation_commit import CommitResult, commit_escalation
from tiergate.routing.escalation_read import read_escalation_snapshot
from tiergate.routing.strikes import Strike
from tiergate.routing.tier_state import TierState, TurnOutcome, tier_state_key
from tiergate.state.base import StateStore

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
BASE_MODEL = "openai/gpt-5-mini"
STRONG_MODEL = "anthropic/claude-sonnet-5"
REQ_STRIKE = Strike("errored_tool_results", "request", "2 failed results")
RESP_STRIKE = Strike("malformed_tool_arguments", "response", "edit")

HEADER_VALUES = {
    "base",
    "strong",
    "strong; reason=explicit",
    "strong; reason=once",
    "strong; reason=difficulty",
    "strong; reason=strikes",
    "base; reason=reset",
    "base; reason=de_escalated",
    "base; reason=strong_unavailable",
    "base; reason=denied:session_cap",
    "base; reason=denied:share_cap",
}


def coding_router(**escalation: Any) -> dict[str, Any]:
    """The gated_adaptive "coding" router of the gateway-level tests, as config."""
    return {
        "name": "coding",
        "allowed_models": ["openai/*", "anthropic/*"],
        "strategy": "gated_adaptive",
        "weak_pool": ["openai/gpt-5-mini"],
        "strong_pool": ["anthropic/claude-sonnet-4-5"],
        "default_model": "openai/gpt-5-mini",
        "escalation": escalation,
    }


def make_router(mode: str = "auto", strategy: str = "balanced", **esc: Any) -> RouterConfig:
    """A router whose share cap does not bind unless a test asks for it."""
    esc.setdefault("share_warmup_requests", 10_000)
    return RouterConfig(
        name="coding",
        allowed_models=["*"],
        strategy=strategy,  # type: ignore[arg-type]
        strong_pool=[STRONG_MODEL],
        thresholds=Thresholds(t1=0.35, t2=0.70),
        escalation=EscalationConfig(mode=mode, **esc),  # type: ignore[arg-type]
    )


@dataclass
class Turn:
    decision: EscalationDecision
    commit: CommitResult


@dataclass
class SessionDriver:
    """Plays one session's turns through snapshot -> resolve -> commit on a store."""

    store: StateStore
    router: RouterConfig
    scope: str | None = "default:session-1"
    workspace: str | None = None
    workspace_cap_percent: float | None = None
    now: float = T0
    counter: int = 0
    history: list[Turn] = field(default_factory=list)

    def inputs(
        self,
        delta: float | None = 0.2,
        strikes: Sequence[Strike] = (),
        tier: str | None = None,
        once: bool = False,
        request_id: str | None = None,
        strong_available: bool = True,
        conversation: str = "",
        side: bool = False,
    ) -> EscalationInputs:
        if request_id is None:
            self.counter += 1
            request_id = f"r{self.counter}"
        return EscalationInputs(
            router=self.router,
            scope=self.scope,
            request_id=request_id,
            now=self.now,
            delta_score=delta,
            request_strikes=tuple(strikes),
            tier_header=tier,
            escalate_header="once" if once else None,
            workspace=self.workspace,
            workspace_cap_percent=self.workspace_cap_percent,
            strong_available=strong_available,
            conversation=conversation,
            side_request=side,
        )

    async def resolve(self, inp: EscalationInputs) -> EscalationDecision:
        snap = await read_escalation_snapshot(
            self.store, self.router, inp.scope, inp.workspace, inp.now
        )
        return resolve_escalation(inp, snap)

    async def turn(
        self,
        delta: float | None = 0.2,
        strikes: Sequence[Strike] = (),
        tier: str | None = None,
        once: bool = False,
        idle: float = 20.0,
        success: bool = True,
        response_strikes: Sequence[Strike] = (),
        request_id: str | None = None,
        strong_available: bool = True,
        cost: float = 0.01,
        cache_window: float = 300.0,
        conversation: str = "",
        side: bool = False,
    ) -> Turn:
        self.now += idle
        inp = self.inputs(
            delta, strikes, tier, once, request_id, strong_available, conversation, side
        )
        decision = await self.resolve(inp)
        outcome = TurnOutcome(
            success=success,
            billed=success,
            served_tier=decision.serve_tier,
            served_model=STRONG_MODEL if decision.serve_tier == "strong" else BASE_MODEL,
            cost_usd=cost * (10 if decision.serve_tier == "strong" else 1),
            response_strikes=tuple(response_strikes),
            cache_window_seconds=cache_window,
        )
        commit = await commit_escalation(self.store, decision, outcome, self.now + 1.0)
        self.now += 1.0
        t = Turn(decision, commit)
        self.history.append(t)
        return t

    async def state(self) -> TierState | None:
        assert self.scope is not None
        raw = await self.store.get(tier_state_key(self.scope, self.router.name))
        return TierState.from_bytes(raw)
