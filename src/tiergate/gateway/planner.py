"""Decide where a request goes: named router, tier, strategy, pins.

Order per request (report §4): identify the session, resolve the escalation
tier, narrow the router's candidates to that tier's pool, rank them with the
router's strategy, and only then apply the session's sticky pins inside that
candidate set. Deciding reads state but writes nothing; the returned plan
carries the writes (`commit`) the pipeline applies after a successful reply.

Inside a session, the conversation (routing.conversation: main thread,
sub-agent, side request) keys the in-process transcript summary, the turn ids
and the escalation evidence; pins, tier, caps and lanes stay the session's.
Side requests may start the session's pins but never move them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tiergate import metrics
from tiergate.config import GatewayConfig, ModelConfig, RouterConfig
from tiergate.core.model import ChatRequest, ChatResponse
from tiergate.core.upstream import Target
from tiergate.gateway import no_route, state_read
from tiergate.gateway.auth import Workspace
from tiergate.gateway.commits import SessionCommits
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.names import router_name
from tiergate.gateway.state_read import ReadPlan, StateRead, plan_read
from tiergate.recorder import Recorder
from tiergate.routing import affinity, bands, escalation, linucb, strategies
from tiergate.routing.affinity import ChannelPin, Pins
from tiergate.routing.conversation import is_side_request, transcript_slot, turn_key
from tiergate.routing.difficulty import delta_score
from tiergate.routing.distributor import Distributor
from tiergate.routing.escalation import (
    EscalationDecision,
    EscalationInputs,
    EscalationSnapshot,
)
from tiergate.routing.escalation_commit import commit_escalation
from tiergate.routing.session import SessionId, resolve_session_id, session_scope
from tiergate.routing.session_scorer import explain as explain_session_score
from tiergate.routing.strikes import request_strikes, response_strikes
from tiergate.routing.tier_state import TurnOutcome
from tiergate.routing.tiers import TierPools, resolve_tier_pools
from tiergate.routing.transcript import TranscriptCache, TranscriptSummary
from tiergate.state import StateStore, is_shared_backend
from tiergate.state.base import Incr, StateUnavailable, Write

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What happened upstream, for the deferred commit."""

    success: bool
    target: Target | None = None
    response: ChatResponse | None = None
    cost: float = 0.0
    fallback: bool = False
    status: int = 200


@dataclass
class RoutePlan:
    """The decision for one request plus the writes to apply if it succeeds."""

    models: list[str]
    router: RouterConfig | None = None
    channel_pin: ChannelPin | None = None
    tier_header: str | None = None
    session: SessionId | None = None
    scope: str | None = None
    session_hash: str | None = None
    tier: str = affinity.BASE_TIER
    pins: Pins = field(default_factory=Pins)
    decision: EscalationDecision | None = None
    bandit_x: np.ndarray | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    committer: Planner | None = None
    conversation: str = ""  # routing.conversation key inside the session ("" = unknown)
    side_request: bool = False  # starts no moved pin, records no evidence

    async def commit(self, outcome: Outcome) -> None:
        """Apply the plan's deferred writes after the upstream reply."""
        if self.committer is not None:
            await self.committer.commit(self, outcome)


class Planner:
    """Turns a parsed request into a RoutePlan, and commits it afterwards."""

    def __init__(
        self,
        cfg: GatewayConfig,
        distributor: Distributor,
        store: StateStore,
        recorder: Recorder | None = None,
        clock: Callable[[], float] = time.time,
        commits: SessionCommits | None = None,
    ) -> None:
        self.cfg = cfg
        self.distributor = distributor
        self.store = store
        self.recorder = recorder
        self.clock = clock
        self.routers = {r.name: r for r in cfg.routers}
        exposed = list(cfg.exposed_models())
        self.tier_pools: dict[str, TierPools] = {
            r.name: resolve_tier_pools(r, exposed) for r in cfg.routers
        }
        self.bandits = linucb.BanditStore(store)
        self.transcripts = TranscriptCache()
        self.shared_state = is_shared_backend(store)
        # shared with the planner a config reload replaces, so ordering survives it
        self.commits = commits if commits is not None else SessionCommits()

    # ---- deciding (reads only) -----------------------------------------------

    async def plan(
        self,
        req: ChatRequest,
        body: dict[str, Any],
        headers: Mapping[str, str],
        workspace: Workspace,
        request_id: str = "",
        *,
        lane_turn: bool = False,
    ) -> RoutePlan:
        """`lane_turn`: an opted-in session-tier turn; its approval, not escalation,
        decides the model, so the tier engine is skipped."""
        session = resolve_session_id(headers, body)
        scope = session_scope(workspace.id, session) if session is not None else None
        await self.commits.settle(scope)  # read-your-writes: the previous turn's commit
        name = router_name(req.model)
        if name is None:
            plan = await self._plan_concrete(req, session, scope)
            plan.side_request = is_side_request(req, session)
            return plan
        router = self.routers.get(name)
        if router is None:
            raise GatewayError(404, f"The router '{name}' does not exist", "model_not_found")
        if not router.enabled:
            raise GatewayError(503, f"The router '{name}' is disabled", "router_disabled")
        plan = await self._plan_router(
            req, body, headers, workspace, request_id, router, session, scope, lane_turn
        )
        plan.extras["workspace_id"] = workspace.id
        return plan

    async def _plan_concrete(
        self, req: ChatRequest, session: SessionId | None, scope: str | None
    ) -> RoutePlan:
        """A concrete model bypasses routing and is never escalated; only the
        {channel, key} pin applies, to keep the prompt cache warm."""
        if self.distributor.model_config(req.model) is None:
            raise GatewayError(404, f"The model '{req.model}' does not exist", "model_not_found")
        plan = RoutePlan(
            models=[req.model], session=session, scope=scope, session_hash=scope, committer=self
        )
        if scope is not None and self.cfg.affinity.enabled:
            plan.pins = await affinity.read_pins(self.store, scope, None, [req.model])
            plan.channel_pin = affinity.honoured_channel_pin(
                plan.pins, req.model, self.distributor.views(req.model)
            )
        return plan

    async def _plan_router(
        self,
        req: ChatRequest,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        workspace: Workspace,
        request_id: str,
        router: RouterConfig,
        session: SessionId | None,
        scope: str | None,
        lane_turn: bool = False,
    ) -> RoutePlan:
        live: dict[str, ModelConfig] = {
            n: m for n, m in self.cfg.exposed_models().items() if self.distributor.is_live(n)
        }
        pools = self.tier_pools[router.name]
        esc_on = escalation.escalation_applies(router) and not lane_turn
        pin_router = router.name if strategies.pin_applies(router, router.strategy) else None
        # The read covers every allowed live model: the candidates among them are
        # known only after the transcript, which the read overlaps.
        allowed = strategies.allowed_models(router, live)
        reading = await self._start_read(
            router, scope, workspace, list(allowed), esc_on, pin_router
        )
        try:
            # Whole-transcript facts come from the session's running summary (only the
            # messages appended since its last turn are read), and the full-transcript
            # score is computed only if the strategy asks for it (StrategyContext).
            # One summary per conversation of the session; a side request is
            # summarised on its own (it is small) and never replaces a conversation's.
            side, conv, summary_key = transcript_slot(req, body, session, scope)
            transcript = self.transcripts.summarize(summary_key, req)
            ctx = strategies.StrategyContext(
                request=req,
                router=router,
                headers=headers,
                prompt_tokens=transcript.prompt_tokens(req),
                transcript=transcript,
            )
            candidates = strategies.capable_candidates(
                allowed, req, ctx.prompt_tokens, transcript.images
            )
        except BaseException:
            _abandon(reading)
            raise
        plan = RoutePlan(
            models=[],
            router=router,
            session=session,
            scope=scope,
            session_hash=scope,
            committer=self,
            conversation=conv,
            side_request=side,
        )
        state = await reading

        if esc_on:
            decision = self._decide_tier(
                req,
                headers,
                workspace,
                request_id,
                router,
                scope,
                candidates,
                pools,
                state.snap,
                transcript,
                conv,
                side,
            )
            plan.decision = decision
            plan.tier = decision.serve_tier
            plan.tier_header = decision.header
            # Strictly the tier's pool: a strong-tier model never serves as base.
            candidates = strategies.tier_candidates(candidates, router, decision.serve_tier, pools)
            if not candidates and decision.reason == "denied:share_cap":
                raise strong_tier_denied(router.name)

        if router.strategy == "linucb":
            ctx.bandit_arms = await self.bandits.load(router.name, [c.name for c in candidates])
            plan.bandit_x = ctx.bandit_context()

        if bands.banded(router):
            ctx.thresholds = bands.band_thresholds(router, state.band_scores)
        ranked = self._rank(router, candidates, ctx, state, plan.tier, pin_router)
        if ctx.score is not None and bands.uses_percentile_bands(router):
            plan.extras["band_score"] = ctx.score  # feeds the percentile edges at commit
        if state.pins is not None and ranked:
            plan.pins = state.pins_for(plan.tier)
            if pin_router is not None:
                pinned = plan.pins.model
                if pinned is None and plan.decision is not None and plan.tier == "base":
                    pinned = plan.decision.base_model  # the model the session started on
                ranked = affinity.apply_model_pin(ranked, pinned)
            plan.channel_pin = affinity.honoured_channel_pin(
                plan.pins, ranked[0], self.distributor.views(ranked[0])
            )
        default = no_route.safety_net(
            router, ranked, self.distributor, req, ctx.prompt_tokens, transcript.images
        )
        if default is not None and (not esc_on or default in pools.pool(plan.tier)):
            ranked.append(default)  # the safety net, bound by the tier too
        if not ranked:
            raise no_route.no_route_error(
                router,
                self.cfg.exposed_models(),
                self.distributor,
                req,
                ctx.prompt_tokens,
                transcript.images,
            )
        plan.models = ranked
        return plan

    def _rank(
        self,
        router: RouterConfig,
        candidates: list[strategies.Candidate],
        ctx: strategies.StrategyContext,
        state: StateRead,
        tier: str,
        pin_router: str | None,
    ) -> list[str]:
        """Candidates best-first by the router's strategy.

        A session pinned inside the candidate set is served by its pin whatever the
        ranking says, so for gated_adaptive the ranking only orders fallbacks: it
        then uses `balanced` instead of scoring the whole transcript, keeping the
        per-turn cost independent of conversation length.
        """
        strategy = router.strategy
        if (
            strategy in ("gated_adaptive", "learned")
            and pin_router is not None
            and state.pins is not None
        ):
            pinned = state.pins_for(tier).model
            if pinned is not None and any(c.name == pinned for c in candidates):
                strategy = "balanced"
        return strategies.rank(strategy, candidates, ctx)

    async def _start_read(
        self,
        router: RouterConfig,
        scope: str | None,
        workspace: Workspace,
        models: list[str],
        esc_on: bool,
        pin_router: str | None,
    ) -> Awaitable[StateRead]:
        """Everything this request needs from the state store, in ONE round trip
        (gateway/state_read.py), started now and awaited once the work that does
        not need it is done.

        Why: on a shared store the read is a network round trip, and the request
        waited for it with nothing to do (at one request at a time, the agent
        router added 0.31-0.37 ms more on Redis than on memory, 0.08-0.16 ms of
        it CPU: docs/performance.md, session 24). As a task given one loop turn,
        it has written its request before the transcript is summarised and the
        candidates built, so the round trip and that work overlap. An in-process
        store has no round trip, and a request that reads nothing has none
        either: neither pays for a task."""
        read = plan_read(
            router,
            scope,
            workspace.id,
            models,
            now=self.clock(),
            escalation_on=esc_on,
            pin_router=pin_router,
            affinity_on=self.cfg.affinity.enabled,
        )
        keys = read.keys()
        if not keys:
            return _ready(state_read.EMPTY)
        fetch = self._fetch_state(read, keys)
        if not self.shared_state:
            return fetch
        task = asyncio.get_running_loop().create_task(fetch)
        try:
            await asyncio.sleep(0)  # the task runs up to its first wait: the request is out
        except BaseException:  # this request was cancelled meanwhile (client gone)
            task.cancel()
            raise
        return task

    async def _fetch_state(self, read: ReadPlan, keys: list[str]) -> StateRead:
        try:
            values = await self.store.get_many(keys)
        except StateUnavailable:
            if read.pins is not None:
                metrics.AFFINITY_DEGRADED_TOTAL.labels(op="read").inc()
            return state_read.DEGRADED
        return read.decode(values)

    def _decide_tier(
        self,
        req: ChatRequest,
        headers: Mapping[str, str],
        workspace: Workspace,
        request_id: str,
        router: RouterConfig,
        scope: str | None,
        candidates: list[strategies.Candidate],
        pools: TierPools,
        snap: EscalationSnapshot,
        transcript: TranscriptSummary,
        conv: str = "",
        side: bool = False,
    ) -> EscalationDecision:
        """The tier for this turn (pure over the snapshot). Unidentified sessions
        (no scope) are served base, get no header, and still count as router
        traffic for the share cap."""
        strong = set(pools.strong)
        base = set(pools.base)
        score = delta_score(req)
        reasons: tuple[tuple[str, float], ...] = ()
        if router.escalation.scorer == "learned":
            score, why = explain_session_score(transcript, score)
            reasons = tuple(why.items())
        inputs = EscalationInputs(
            router=router,
            scope=scope,
            request_id=turn_key(req, conv),
            now=self.clock(),
            delta_score=score,
            request_strikes=request_strikes(req, transcript.progress),  # the summary's fold
            tier_header=headers.get("x-orcarouter-tier"),
            escalate_header=headers.get("x-orcarouter-escalate"),
            workspace=workspace.id,
            workspace_cap_percent=workspace.share_cap_percent,
            strong_available=any(c.name in strong for c in candidates),
            base_available=any(c.name in base for c in candidates),
            score_reasons=reasons,
            conversation=conv,
            side_request=side,
        )
        return escalation.resolve_escalation(inputs, snap)

    # ---- committing (after the upstream reply) -------------------------------

    async def commit(self, plan: RoutePlan, outcome: Outcome) -> None:
        """Pins, escalation intents, bandit feedback: only a success writes pins
        and advances the tier state; the bandit learns from failures too."""
        target = outcome.target
        served_tier = self.served_tier(plan, target) or plan.tier
        plan.extras["served_tier"] = served_tier
        pins: list[Write] = []
        if outcome.success and target is not None and plan.scope is not None:
            pins = self._pin_writes(plan, target, served_tier)
        band_score = plan.extras.get("band_score")
        band_incrs = []
        if plan.router is not None and band_score is not None:
            band_incrs = [bands.band_score_incr(plan.router, band_score, self.clock())]
        d = plan.decision
        if d is not None and d.intents and outcome.success and outcome.response is not None:
            # one round trip: tier state, share counters and pins together
            await self._commit_escalation(plan, outcome, served_tier, pins)
            if band_incrs:  # percentile bands beside escalation: one more round trip
                await self._write_pins_and_counters([], band_incrs)
        elif pins or band_incrs:
            await self._write_pins_and_counters(pins, band_incrs)
        if plan.router is not None and plan.router.strategy == "linucb" and target is not None:
            assert plan.bandit_x is not None
            usage = outcome.response.usage if outcome.response is not None else None
            tokens = usage.input_tokens + usage.output_tokens if usage is not None else 0
            # priced per token: the penalty compares arms, not prompt lengths (issue 17)
            reward = linucb.reward(outcome.success, outcome.cost, tokens=tokens)
            await self.bandits.update(plan.router.name, target.model, plan.bandit_x, reward)
            request_id = plan.extras.get("request_id")
            if outcome.success and request_id:  # client feedback may credit this arm later
                key = feedback_key(plan.extras.get("workspace_id", ""), request_id)
                await self.bandits.remember(key, plan.router.name, target.model, plan.bandit_x)

    async def _write_pins_and_counters(self, pins: list[Write], incrs: list[Incr]) -> None:
        """Pins and the percentile bands' score counter in one round trip."""
        if not incrs:
            await affinity.write_pins(self.store, pins)
            return
        try:
            await self.store.apply_batch(pins, incrs)
        except StateUnavailable:
            if pins:
                metrics.AFFINITY_DEGRADED_TOTAL.labels(op="write").inc()
            log.warning("pins and band score not written: state store unavailable")

    def served_tier(self, plan: RoutePlan, target: Target | None) -> str | None:
        """The tier that actually served: strong exactly when a strong-tier model
        served, whatever path chose it. None for a concrete model (no router)."""
        if plan.router is None:
            return None
        if target is None or plan.decision is None:
            return plan.tier
        strong = target.model in self.tier_pools[plan.router.name].strong
        return affinity.STRONG_TIER if strong else affinity.BASE_TIER

    def _pin_writes(self, plan: RoutePlan, target: Target, served_tier: str) -> list[Write]:
        """Re-pin the session to what served it (refreshing TTLs); none when the
        store was unreachable at read time (the write-back is skipped too)."""
        if not self.cfg.affinity.enabled or plan.pins.degraded:
            return []
        ch = target.channel.config
        window = affinity.cache_window(ch.type, self.cfg.affinity, ch.cache_window_seconds)
        pin_router = None
        if plan.router is not None and strategies.pin_applies(plan.router, plan.router.strategy):
            pin_router = plan.router.name
        channel_pin: ChannelPin | None = ChannelPin(ch.name, target.key_index)
        if plan.side_request:  # a side request may start the session's pins, never move them
            if plan.pins.model is not None or served_tier != plan.tier:
                pin_router = None
            if plan.pins.channel_for(target.model) is not None:
                channel_pin = None
        return affinity.plan_pin_writes(
            plan.scope,
            router=pin_router,
            tier=served_tier,
            model=target.model,
            channel_pin=channel_pin,
            channel_window=window,
            long_pin_eligible=plan.session is not None and plan.session.long_pin_eligible,
            backend_is_redis=self.shared_state,
            long_pin_seconds=self.cfg.affinity.long_pin_seconds,
        )

    async def _commit_escalation(
        self, plan: RoutePlan, outcome: Outcome, served: str, pins: list[Write]
    ) -> None:
        assert plan.decision is not None
        window = None
        if outcome.target is not None:
            ch = outcome.target.channel.config
            window = affinity.cache_window(ch.type, self.cfg.affinity, ch.cache_window_seconds)
        result = await commit_escalation(
            self.store,
            plan.decision,
            TurnOutcome(
                success=outcome.success,
                billed=outcome.success and outcome.response is not None,
                served_tier="strong" if served == affinity.STRONG_TIER else "base",
                served_model=outcome.target.model if outcome.target else None,
                cost_usd=outcome.cost,
                response_strikes=response_strikes(outcome.response) if outcome.response else (),
                cache_window_seconds=window,
            ),
            self.clock(),
            extra_writes=pins,
        )
        for ev in result.events:
            metrics.observe_escalation_event(ev.router, ev.kind, ev.trigger, ev.header)
            if self.recorder is not None:
                self.recorder.record("audit", audit_row(ev, plan))


def _ready(state: StateRead) -> asyncio.Future[StateRead]:
    """A read already answered (awaiting it does not suspend)."""
    done: asyncio.Future[StateRead] = asyncio.get_running_loop().create_future()
    done.set_result(state)
    return done


def _abandon(reading: Awaitable[StateRead]) -> None:
    """Drop a started read when planning failed before awaiting it: a task is
    cancelled (the store drops its reply), a coroutine closed (never awaited)."""
    if isinstance(reading, asyncio.Task):
        reading.cancel()
    elif isinstance(reading, Coroutine):
        reading.close()


def strong_tier_denied(router: str) -> GatewayError:
    """Only the strong tier could serve this request and the share cap forbids it:
    an error the client can act on, never a silent strong serve."""
    return GatewayError(
        503,
        f"Only strong-tier models of router '{router}' can serve this request, and the"
        " router's escalated-share cap (escalation.share_cap_percent, or the workspace's"
        " escalation_share_cap_percent) is reached",
        "strong_tier_denied",
    )


def feedback_key(workspace_id: str, request_id: str) -> str:
    """The bandit's pending-feedback id: workspace-qualified, so one workspace's
    token cannot rate another workspace's requests."""
    return f"{workspace_id}:{request_id}"


def audit_row(ev: escalation.AuditEvent, plan: RoutePlan) -> dict[str, Any]:
    """An audit event as a database row: identifiers and scores, never prompt text."""
    return {
        "ts": ev.at,
        "event": ev.kind,
        # a decision for no identifiable session names no workspace (it counts no
        # workspace share): the plan's workspace id, as every other event carries
        "workspace": (plan.decision.workspace if plan.decision else None)
        or plan.extras.get("workspace_id"),
        "router": ev.router,
        "session_hash": ev.session_hash,
        "request_id": plan.extras.get("request_id"),
        "trigger": ev.trigger,
        "detail": {
            "header": ev.header,
            "tier_before": ev.tier_before,
            "tier_after": ev.tier_after,
            "delta_score": ev.delta_score,
            "threshold": ev.threshold,
            "difficulty_streak": ev.difficulty_streak,
            "strike_count": ev.strike_count,
            "router_share": ev.router_share,
            "workspace_share": ev.workspace_share,
            "scorer": ev.scorer,
            "score_reasons": dict(ev.score_reasons),
        },
    }
