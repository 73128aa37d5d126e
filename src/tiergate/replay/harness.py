"""The replay driver: the real escalation engine, turn by turn, on a simulated clock.

Per turn, in global simulated-time order across sessions, exactly what the
gateway's planner does (tiergate.gateway.planner `_decide_tier` and
`_commit_escalation`), with the turn's precomputed facts (features.py):

1. `read_escalation_snapshot` from the real state store (memory by default,
   Redis with `--state redis://...`), at the simulated `now`;
2. `resolve_escalation` (pure) with the turn's delta score, request strikes
   and client headers;
3. serve the decided tier on the session's pinned model of that tier, cost it
   with the cost model, and `commit_escalation` with the outcome: response-side
   strikes from the corpus reply, the cost for the spend-share cap, the
   provider's cache window. A turn whose `upstream_status` is not 200 is a
   failed, unbilled request: it commits nothing, exactly as in the gateway.

Only the audit sink is replaced: committed audit events are kept in memory.
Idle gaps advance the clock; nothing sleeps. The memory store runs on the
simulated clock too, so the 4-hour tier-state expiry is simulated; Redis
expires keys on its own wall clock (no replayed gap comes near 4 hours).

Fixed-tier policies (always cheap, always frontier) skip the engine and only
cost the turns, so all policies are compared on the same sessions and clock.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from tiergate.config import EscalationConfig, RouterConfig, Thresholds
from tiergate.replay.costmodel import CHEAP_PAIR, FRONTIER_PAIR, CostModel, SessionCache
from tiergate.replay.features import WORKSPACE_ID, CorpusFacts, TurnFacts
from tiergate.routing.escalation import (
    AuditEvent,
    EscalationDecision,
    EscalationInputs,
    EscalationSnapshot,
    resolve_escalation,
)
from tiergate.routing.escalation_commit import commit_escalation
from tiergate.routing.escalation_read import read_escalation_snapshot
from tiergate.routing.tier_state import Tier, TurnOutcome
from tiergate.state.base import StateStore
from tiergate.state.memory import MemoryStore

ROUTER_NAME = "coding"
#: The workspace-wide cross-router cap of the replay's workspace (config default).
WORKSPACE_CAP_PERCENT = 30.0

Score = Literal["delta", "full"]


def replay_router(**escalation: object) -> RouterConfig:
    """The router the replay drives: cheap pair as base tier, frontier pair as strong.

    Every escalation setting is the config default (mode auto, delta_t2 0.55,
    share cap 20 % of requests, strike threshold 2, ...) unless overridden.
    """
    esc = {"mode": "auto", **escalation}
    return RouterConfig(
        name=ROUTER_NAME,
        allowed_models=[*CHEAP_PAIR, *FRONTIER_PAIR],
        strategy="balanced",
        strong_pool=list(FRONTIER_PAIR),
        thresholds=Thresholds(),
        escalation=EscalationConfig.model_validate(esc),
    )


@dataclass(frozen=True)
class Policy:
    """How turns are served: a fixed tier, or the escalation engine with a router config."""

    name: str
    tier: Tier | None = None
    """Fixed tier; None means the escalation engine decides."""
    affinity: bool = True
    router: RouterConfig | None = None
    score: Score = "delta"
    """Which difficulty score feeds the engine: the latest-turn delta (the gateway's)
    or the full-transcript score (the length-biased alternative, for comparison)."""
    force_headers: Mapping[str, str] = field(default_factory=dict)
    """Headers added to every request (lower-case names), e.g. the adversarial run."""
    workspace_cap_percent: float | None = WORKSPACE_CAP_PERCENT
    """The workspace-wide share cap; None leaves only the router's caps."""

    def engine_router(self) -> RouterConfig:
        return self.router or replay_router()


STANDARD_POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("always-cheap", tier="base", affinity=False),
        Policy("always-cheap-affinity", tier="base", affinity=True),
        Policy("always-frontier", tier="strong", affinity=False),
        Policy("always-frontier-affinity", tier="strong", affinity=True),
        Policy("escalation"),
    )
}


@dataclass(slots=True)
class TurnRecord:
    """What one turn got under one policy."""

    session: int
    served_index: int | None
    at: float
    needs_strong: bool
    tier: Tier | None
    """The tier that served it; None for a failed upstream attempt."""
    model: str | None
    cost: float
    prompt_tokens: int
    cached_tokens: float
    header: str | None = None
    reason: str | None = None
    trigger: str | None = None
    delta: float = 0.0
    spend_share: float | None = None
    request_share: float | None = None
    """The router's escalated shares the engine saw when deciding this turn."""
    audit: tuple[AuditEvent, ...] = ()
    """The audit events this turn's commit wrote (escalations, cap denials, resets)."""
    session_tier: Tier | None = None
    """The session's tier after the engine's decision (None for fixed-tier policies).
    A turn served base while this is strong is an escalation cut off partway
    (share cap in suppress mode, strong tier unavailable)."""


@dataclass
class RunResult:
    policy: Policy
    facts: CorpusFacts
    records: list[TurnRecord]
    events: list[AuditEvent]
    elapsed_seconds: float

    def by_session(self) -> list[list[TurnRecord]]:
        out: list[list[TurnRecord]] = [[] for _ in self.facts.sessions]
        for r in self.records:
            out[r.session].append(r)
        return out


class SimClock:
    """The replay's clock: set to each turn's simulated time before it is handled."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


StoreFactory = Callable[[SimClock], StateStore]


def memory_store(clock: SimClock) -> StateStore:
    return MemoryStore(clock=clock)


def redis_store_factory(url: str) -> StoreFactory:
    """A Redis store under a fresh key prefix per run (deleted by `close_store`)."""
    from tiergate.state.redis import RedisStore

    def make(clock: SimClock) -> StateStore:
        return RedisStore(url, key_prefix=f"tgreplay:{uuid.uuid4().hex[:12]}:")

    return make


async def close_store(store: StateStore) -> None:
    delete = getattr(store, "delete_prefix", None)
    if delete is not None:
        await delete()
    await store.close()


class _Engine:
    """The escalation engine's per-turn calls, as the planner makes them."""

    def __init__(self, policy: Policy, store: StateStore) -> None:
        self.router = policy.engine_router()
        self.score = policy.score
        self.force = {k.lower(): v for k, v in policy.force_headers.items()}
        self.store = store
        self.workspace_cap = policy.workspace_cap_percent

    def _score(self, f: TurnFacts) -> float:
        """The score the planner would compute (escalation.scorer), or the full one."""
        if self.score == "full":  # the length-biased alternative, whatever the scorer
            return f.full
        return f.learned if self.router.escalation.scorer == "learned" else f.delta

    async def decide(
        self, f: TurnFacts, scope: str, now: float
    ) -> tuple[EscalationDecision, EscalationSnapshot]:
        tier_header = self.force.get("x-orcarouter-tier", f.tier_header)
        once_header = self.force.get("x-orcarouter-escalate", f.escalate_header)
        inputs = EscalationInputs(
            router=self.router,
            scope=scope,
            request_id=f.request_id,
            now=now,
            delta_score=self._score(f),
            request_strikes=f.request_strikes,
            tier_header=tier_header,
            escalate_header=once_header,
            workspace=WORKSPACE_ID,
            workspace_cap_percent=self.workspace_cap,
            strong_available=True,
            conversation=f.conversation,
            side_request=f.side_request,
            score_reasons=f.reasons if self.router.escalation.scorer == "learned" else (),
        )
        snap = await read_escalation_snapshot(self.store, self.router, scope, WORKSPACE_ID, now)
        return resolve_escalation(inputs, snap), snap


async def run_policy(
    facts: CorpusFacts,
    policy: Policy,
    cost_model: CostModel | None = None,
    store_factory: StoreFactory = memory_store,
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Replay every turn of `facts` under `policy`; returns per-turn records and audit events."""
    cost_model = cost_model or CostModel()
    started = time.perf_counter()
    clock = SimClock()
    store = store_factory(clock) if policy.tier is None else None
    engine = _Engine(policy, store) if store is not None else None
    caches = [SessionCache() for _ in facts.sessions]
    records: list[TurnRecord] = []
    events: list[AuditEvent] = []
    try:
        for n, (s, t) in enumerate(facts.order):
            sess = facts.sessions[s]
            f = sess.turns[t]
            clock.now = f.at
            decision = None
            tier: Tier = policy.tier or "base"
            spend_share = request_share = None
            if engine is not None:
                decision, snap = await engine.decide(f, sess.scope, f.at)
                spend_share = snap.router_share.spend_share
                request_share = snap.router_share.request_share
                tier = decision.serve_tier if decision.applies else "base"
            if f.status != 200:
                if engine is not None and decision is not None:
                    await commit_escalation(engine.store, decision, TurnOutcome(False, False), f.at)
                records.append(
                    TurnRecord(s, None, f.at, f.needs_strong, None, None, 0.0, f.prompt_tokens, 0.0)
                )
                continue
            model = cost_model.pinned(sess.session_id, tier)
            cost = cost_model.turn(
                caches[s], model, f.at, f.prompt_tokens, f.prefix_tokens, policy.affinity
            )
            rec = TurnRecord(
                session=s,
                served_index=f.served_index,
                at=f.at,
                needs_strong=f.needs_strong,
                tier=tier,
                model=model.name,
                cost=cost.usd,
                prompt_tokens=f.prompt_tokens,
                cached_tokens=cost.cached_tokens,
                delta=f.delta,
                spend_share=spend_share,
                request_share=request_share,
            )
            if engine is not None and decision is not None:
                rec.header, rec.reason, rec.trigger = (
                    decision.header,
                    decision.reason,
                    decision.trigger,
                )
                rec.session_tier = decision.session_tier
                outcome = TurnOutcome(
                    success=True,
                    billed=True,
                    served_tier=tier,
                    served_model=model.name,
                    cost_usd=cost.usd,
                    response_strikes=f.response_strikes,
                    cache_window_seconds=model.cache_window,
                )
                result = await commit_escalation(engine.store, decision, outcome, f.at)
                events.extend(result.events)
                rec.audit = tuple(result.events)
            records.append(rec)
            if progress is not None and n % 256 == 255:
                progress(256)
        if progress is not None:
            progress(len(facts.order) % 256)
    finally:
        if store is not None:
            await close_store(store)
    return RunResult(policy, facts, records, events, time.perf_counter() - started)
