"""Frontier escalation: resolve (pure) and commit (deferred), report §4.

Data flow per request:

1. `read_escalation_snapshot` (routing/escalation_read.py) reads the session's
   tier state, the share-cap day buckets and the percentile histogram in ONE
   `get_many` round trip.
2. `resolve_escalation(inputs, snapshot)` is pure: it returns the tier to
   serve, the `X-Orca-Session-Tier` header, and *intents* (what to change if
   this request succeeds) with the audit events they would produce. It writes
   nothing, so speculative resolutions, the read-only diagnostic endpoint and
   requests that later fail or 403 change no state.
3. After a successful, billed upstream response, `commit_escalation`
   (routing/escalation_commit.py) applies
   the intents onto a FRESH read inside `store.transact` (Redis WATCH/MULTI,
   compare-and-set in memory). Transition intents carry the tier epoch they
   were decided on, so a stale concurrent writer cannot clobber a committed
   escalation and two racing identical escalations merge into one ratchet.

Trigger classes, by trust (§4.1): A, client headers (`X-OrcaRouter-Tier`,
`X-OrcaRouter-Escalate: once`); B, difficulty (delta score at or above the
threshold on two consecutive evaluated turns); C, strikes (`strike_threshold`
struck turns inside `strike_decay_seconds`). No fuzzy signal ratchets alone;
every class obeys the caps (§4.3); de-escalation is asymmetric (§4.4).

Evidence (strikes, the difficulty streak) counts within one conversation of
the session (`EscalationInputs.conversation`, routing.conversation); the tier
it ratchets is the session's. A side request is served on the session's tier
and counted as traffic, but is no evaluated turn: no evidence, no trigger, no
de-escalation.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from tiergate.config import UNMAPPED_CACHE_WINDOW, EscalationConfig, RouterConfig
from tiergate.routing.admission import (
    AdmissionCounters,
    admission_refused,
    mean_session_turns,
    remaining_turns,
)
from tiergate.routing.caps import (
    ShareCounters,
    session_cap_reached,
    share_exceeded,
)
from tiergate.routing.percentile import (
    ScoreHistogram,
    percentile_threshold,
)
from tiergate.routing.strikes import Strike
from tiergate.routing.tier_state import (
    CountTraffic,
    Deescalate,
    Escalate,
    Intent,
    MarkShadow,
    RecordTurn,
    Reset,
    Tier,
    TierState,
    short_turn_id,
    tier_state_key,
)

logger = logging.getLogger(__name__)

#: Delta threshold when `escalation.delta_t2` is not configured. The report
#: measured realistic delta scores as bimodal (easy ~0.23, hard ~0.72) with
#: nothing in 0.35-0.65, and the reused full-transcript T2 of 0.70 passing hard
#: turns by 0.019 (§6.2). 0.55 sits mid-gap: identical decisions on that
#: corpus with ~0.17 of headroom on either side. The replay sweep re-checks it.
DEFAULT_DELTA_T2 = 0.55
#: Consecutive evaluated turns at or above the threshold that make a trigger.
DIFFICULTY_STREAK = 2

AuditKind = Literal["escalated", "denied_cap", "de_escalated", "reset", "shadow", "strong_served"]
HEADER_NAME = "X-Orca-Session-Tier"


# ---- thresholds and canary ----------------------------------------------------


def effective_delta_threshold(router: RouterConfig) -> float:
    """The absolute delta-score threshold: `delta_t2`, else `DEFAULT_DELTA_T2`.

    An explicit `delta_t2: null` keeps the documented meaning "use
    thresholds.t2"; leaving the key out gets the calibrated default instead
    of the full-transcript T2 that sits on the cliff.
    """
    esc = router.escalation
    if esc.delta_t2 is not None:
        return esc.delta_t2
    if "delta_t2" in esc.model_fields_set:
        return router.thresholds.t2
    return DEFAULT_DELTA_T2


def delta_threshold(router: RouterConfig, scores: ScoreHistogram | None) -> tuple[float, str]:
    """The threshold in force and where it came from ("percentile" or "absolute")."""
    esc = router.escalation
    if esc.percentile is not None and scores is not None:
        value = percentile_threshold(scores, esc.percentile, esc.percentile_warmup)
        if value is not None:
            return value, "percentile"
    return effective_delta_threshold(router), "absolute"


def in_canary(scope: str, rollout_percent: float) -> bool:
    """Stable per-session canary: the same session always lands the same way."""
    if rollout_percent >= 100:
        return True
    if rollout_percent <= 0:
        return False
    digest = hashlib.blake2b(b"canary:" + scope.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 10_000 < rollout_percent * 100


def _header_value(raw: str | None) -> str | None:
    return raw.strip().lower() if raw else None


# ---- inputs and snapshot ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EscalationInputs:
    """Everything the resolver needs from the request, computed by the caller.

    `scope` identifies the session (workspace-qualified session id), None when
    no session could be identified. `request_id` is the turn's idempotency id:
    a client-supplied key, else `strikes.turn_id(req)`, so retries dedupe.
    `delta_score` comes from the difficulty scorer (None if not computed).
    `strong_available` / `base_available` are False when no model of that tier
    can serve this request (capabilities, health).
    """

    router: RouterConfig
    scope: str | None
    request_id: str
    now: float
    delta_score: float | None = None
    request_strikes: Sequence[Strike] = ()
    tier_header: str | None = None
    escalate_header: str | None = None
    workspace: str | None = None
    workspace_cap_percent: float | None = None
    strong_available: bool = True
    base_available: bool = True
    score_reasons: tuple[tuple[str, float], ...] = ()
    """The learned scorer's top contributions (feature name, logit share), for audit."""
    conversation: str = ""
    """The conversation inside the session (routing.conversation); "" = untagged."""
    side_request: bool = False
    """A side request (routing.conversation.is_side_request): no evaluated turn."""


@dataclass(frozen=True, slots=True)
class EscalationSnapshot:
    state: TierState | None = None
    router_share: ShareCounters = field(default_factory=ShareCounters)
    workspace_share: ShareCounters | None = None
    scores: ScoreHistogram | None = None
    #: The store could not be read: serve base, change nothing.
    degraded: bool = False
    #: The tier state exactly as read (None = absent): the commit's guard value.
    state_raw: bytes | None = None
    #: Admission counters (share_cap_mode admit only): router, then workspace.
    router_admission: AdmissionCounters | None = None
    workspace_admission: AdmissionCounters | None = None


def percentile_on(esc: EscalationConfig) -> bool:
    """The router escalates on its own top delta scores (`escalation.percentile`)."""
    return esc.mode == "auto" and esc.percentile is not None


def escalation_applies(router: RouterConfig) -> bool:
    """Escalation is off, or meaningless for DSL rules that pick models directly."""
    return router.escalation.mode != "off" and router.strategy != "dsl"


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One escalation audit row. Hashes and numbers only, never prompt text."""

    kind: AuditKind
    router: str
    #: the session's scope (the usage rows' session_hash); None for a request with
    #: no identifiable session (only a `strong_served` has one)
    session_hash: str | None
    trigger: str | None
    header: str | None
    tier_before: Tier
    tier_after: Tier
    delta_score: float | None
    threshold: float
    difficulty_streak: int
    strike_count: int
    router_share: float | None
    workspace_share: float | None
    at: float
    scorer: str = "lexical"
    score_reasons: tuple[tuple[str, float], ...] = ()


# ---- decision -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EscalationDecision:
    """What to serve, what to tell the client, and what to commit on success."""

    applies: bool
    serve_tier: Tier = "base"
    header: str | None = None
    reason: str | None = None
    trigger: str | None = None
    shadow: bool = False
    session_tier: Tier | None = None
    base_model: str | None = None
    threshold: float | None = None
    threshold_source: str | None = None
    difficulty_streak: int = 0
    strike_count: int = 0
    share_capped: bool = False
    intents: tuple[Intent, ...] = ()
    events: tuple[AuditEvent, ...] = ()
    router_name: str = ""
    workspace: str | None = None
    state_key: str | None = None
    state_raw: bytes | None = field(default=None, repr=False)
    config: EscalationConfig | None = field(default=None, repr=False, compare=False)
    #: `state_raw` as parsed at decision time (the commit applies onto it instead
    #: of parsing the same bytes again); None when absent or unreadable.
    state: TierState | None = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form for the diagnostic endpoint."""
        out = {k: getattr(self, k) for k in self.__slots__ if k not in ("config", "state")}
        out["intents"] = [asdict(i) for i in self.intents]
        out["events"] = [asdict(e) for e in self.events]
        return out


def _inactive(router: RouterConfig, intents: tuple[Intent, ...] = ()) -> EscalationDecision:
    return EscalationDecision(
        applies=False, intents=intents, router_name=router.name, config=router.escalation
    )


def resolve_escalation(inp: EscalationInputs, snap: EscalationSnapshot) -> EscalationDecision:
    """Decide the tier for this request. Pure: reads `snap`, writes nothing."""
    router, esc = inp.router, inp.router.escalation
    if not escalation_applies(router):
        return _inactive(router)
    if snap.degraded:  # no tier memory readable: serve base, change nothing
        header = "base" if inp.scope is not None else None
        return EscalationDecision(applies=inp.scope is not None, header=header, config=esc)
    threshold, source = delta_threshold(router, snap.scores)
    score = inp.delta_score if percentile_on(esc) else None
    state = snap.state or TierState()
    caps = _cap_gates(inp, snap, state)
    traffic = CountTraffic(
        score=score,
        forecast=caps.forecast,
        new_session=caps.forecast is not None and inp.scope is not None and snap.state_raw is None,
    )
    if inp.scope is None:  # unidentifiable session: counted as router traffic, never tiered
        if inp.base_available or not inp.strong_available:
            return _inactive(router, (traffic,))
        # only the strong tier can serve it: a strong serve, counted and capped as one
        refused = caps.one_refused
        served = () if refused else (_base_unavailable_event(inp, snap, threshold, "base"),)
        return EscalationDecision(
            applies=False,
            serve_tier="base" if refused else "strong",
            reason="denied:share_cap" if refused else "base_unavailable",
            trigger="base_unavailable",
            share_capped=refused,
            intents=(traffic,),
            events=served,
            router_name=router.name,
            config=esc,
        )

    turn = short_turn_id(inp.request_id)
    new_turn = turn not in state.seen_turns
    conv, side = inp.conversation, inp.side_request
    live = state.live_strikes(inp.now, esc.strike_decay_seconds, conv)
    strike_now = (
        bool(inp.request_strikes) and new_turn and not side and all(s.turn != turn for s in live)
    )
    strike_count = len(live) + strike_now
    high = None if inp.delta_score is None or side else inp.delta_score >= threshold
    streak = state.streak_of(conv)
    if new_turn and high is not None:
        streak = streak + 1 if high else 0

    tier_ask = _header_value(inp.tier_header)
    once = _header_value(inp.escalate_header) == "once"
    ws_share = snap.workspace_share
    canary = in_canary(inp.scope, esc.rollout_percent)

    intents: list[Intent] = [
        traffic,
        RecordTurn(
            turn,
            high,
            inp.request_strikes[0].reason if strike_now else None,
            conv=conv,
            evaluated=not side,
        ),
    ]
    events: list[AuditEvent] = []
    shash = inp.scope  # the usage rows' and access log's session_hash: one join key

    def audit(kind: AuditKind, trigger: str | None, after: Tier, header: str | None) -> None:
        events.append(
            AuditEvent(
                kind=kind,
                router=router.name,
                session_hash=shash,
                trigger=trigger,
                header=header,
                tier_before=state.tier,
                tier_after=after,
                delta_score=inp.delta_score,
                threshold=threshold,
                difficulty_streak=streak,
                strike_count=strike_count,
                router_share=snap.router_share.share(esc.share_cap_basis),
                workspace_share=ws_share.share(esc.share_cap_basis) if ws_share else None,
                at=inp.now,
                scorer=esc.scorer,
                score_reasons=inp.score_reasons,
            )
        )

    serve: Tier = state.tier
    session_tier: Tier = state.tier
    reason: str | None = None
    trigger: str | None = None
    shadow = False

    if tier_ask == "base":
        serve = session_tier = "base"
        reason = trigger = "reset"
        intents.append(Reset(state.epoch))
        if state.tier == "strong" or streak or strike_count or state.shadow_trigger:
            audit("reset", "explicit", "base", "base; reason=reset")
    elif state.tier == "strong":
        if tier_ask is None and not once and not side and _deescalation_due(inp, state, strike_now):
            serve = session_tier = "base"
            reason = trigger = "de_escalated"
            intents.append(Deescalate(state.epoch, state.strong_served_at))
            audit("de_escalated", "de_escalated", "base", "base; reason=de_escalated")
        elif caps.strong_refused:
            serve, reason, trigger = "base", "denied:share_cap", state.trigger
            audit("denied_cap", trigger, "strong", "base; reason=denied:share_cap")
    else:
        wanted = "explicit" if tier_ask == "strong" else None
        auto = esc.mode == "auto" and not side
        if wanted is None and auto and (canary or state.shadow_trigger is None):
            if streak >= DIFFICULTY_STREAK:
                wanted = "difficulty"
            elif strike_count >= esc.strike_threshold:
                wanted = "strikes"
        if wanted is not None:
            trigger = wanted
            denial = (
                "denied:session_cap"
                if session_cap_reached(state.escalations_used, esc.max_per_session)
                else "denied:share_cap"
                if caps.escalation_refused
                else None
            )
            would = f"base; reason={denial}" if denial else f"strong; reason={wanted}"
            if wanted != "explicit" and not canary:
                shadow = True
                audit("shadow", wanted, "base", would)
                if denial is None:
                    intents.append(MarkShadow(wanted, state.epoch))
            elif denial is not None:
                reason = denial
                audit("denied_cap", wanted, "base", would)
            else:
                serve = session_tier = "strong"
                reason = wanted
                intents.append(Escalate(wanted, state.epoch))
                audit("escalated", wanted, "strong", would)

    def deny_share(why: str) -> None:
        """The share cap refuses this strong serve: one denied_cap event per request."""
        nonlocal reason, trigger
        reason, trigger = "denied:share_cap", why
        if not any(e.kind == "denied_cap" for e in events):
            audit("denied_cap", why, session_tier, "base; reason=denied:share_cap")

    if once and serve == "base" and reason != "denied:share_cap" and reason != "de_escalated":
        if caps.one_refused:
            deny_share("once")
        else:
            serve, reason, trigger = "strong", "once", "once"

    if serve == "strong" and not inp.strong_available:
        serve, reason = "base", "strong_unavailable"
    elif serve == "base" and not inp.base_available and inp.strong_available:
        # Nothing in base can serve (capabilities, health): the strong tier serves
        # this one request, counted as strong and bound by the share cap like a
        # once boost (it does not ratchet, so the per-session cap does not apply).
        if caps.one_refused:
            if reason != "denied:share_cap":
                deny_share("base_unavailable")
        else:
            serve, reason, trigger = "strong", "base_unavailable", "base_unavailable"
            # one request on strong, the session's tier unchanged: audited like a
            # tier decision, so the strong serve shows in the session's history
            audit("strong_served", "base_unavailable", session_tier, STRONG_SERVED_HEADER)

    header = serve if reason is None else f"{serve}; reason={reason}"
    return EscalationDecision(
        applies=True,
        serve_tier=serve,
        header=header,
        reason=reason,
        trigger=trigger,
        shadow=shadow,
        session_tier=session_tier,
        base_model=state.base_model,
        threshold=threshold,
        threshold_source=source,
        difficulty_streak=streak,
        strike_count=strike_count,
        share_capped=caps.escalation_refused,
        intents=tuple(intents),
        events=tuple(events),
        router_name=router.name,
        workspace=inp.workspace,
        state_key=tier_state_key(inp.scope, router.name),
        state_raw=snap.state_raw,
        config=esc,
        state=snap.state if snap.state_raw is not None else None,
    )


STRONG_SERVED_HEADER = "strong; reason=base_unavailable"


def _base_unavailable_event(
    inp: EscalationInputs, snap: EscalationSnapshot, threshold: float, tier: Tier
) -> AuditEvent:
    """The audit event of a strong serve because no base model can serve, for a
    request with no identifiable session (no tier state: no streak, no strikes)."""
    esc, ws = inp.router.escalation, snap.workspace_share
    return AuditEvent(
        kind="strong_served",
        router=inp.router.name,
        session_hash=inp.scope,
        trigger="base_unavailable",
        header=STRONG_SERVED_HEADER,
        tier_before=tier,
        tier_after=tier,
        delta_score=inp.delta_score,
        threshold=threshold,
        difficulty_streak=0,
        strike_count=0,
        router_share=snap.router_share.share(esc.share_cap_basis),
        workspace_share=ws.share(esc.share_cap_basis) if ws else None,
        at=inp.now,
        scorer=esc.scorer,
        score_reasons=inp.score_reasons,
    )


@dataclass(frozen=True, slots=True)
class CapGates:
    """What the share caps refuse on this request (`share_cap_mode`).

    suppress (the report's literal rule): over the cap, every strong serve is
    refused, a session already strong included. admit (routing.admission): a
    session already strong is never refused (only a cap of 0 stops it); a new
    escalation is refused when its forecast turns would push the projected share
    over the cap, a one-request strong serve (`once`, base unavailable) when that
    one request would.
    """

    strong_refused: bool
    escalation_refused: bool
    one_refused: bool
    forecast: float | None = None
    """The session's expected remaining turns after this one (admit mode)."""


def _cap_gates(inp: EscalationInputs, snap: EscalationSnapshot, state: TierState) -> CapGates:
    esc = inp.router.escalation
    if esc.share_cap_mode == "suppress" or snap.router_admission is None:
        capped = _share_capped(inp, snap)
        return CapGates(capped, capped, capped)
    share, adm = snap.router_share, snap.router_admission
    forecast = remaining_turns(mean_session_turns(share.requests, adm.sessions), state.turns + 1)
    basis, warmup = esc.share_cap_basis, esc.share_warmup_requests
    gates = [(share, adm, esc.share_cap_percent)]
    ws, wadm, wcap = snap.workspace_share, snap.workspace_admission, inp.workspace_cap_percent
    if ws is not None and wcap is not None:
        gates.append((ws, wadm or AdmissionCounters(), wcap))
    kill = any(cap <= 0 for _, _, cap in gates)
    one = kill or any(admission_refused(c, a, p, basis, warmup, 1.0) for c, a, p in gates)
    new = one or any(admission_refused(c, a, p, basis, warmup, 1.0 + forecast) for c, a, p in gates)
    return CapGates(kill, new, one, forecast)


def _share_capped(inp: EscalationInputs, snap: EscalationSnapshot) -> bool:
    """Is the router's, or the workspace's, escalated share over its cap?"""
    esc = inp.router.escalation
    basis, warmup = esc.share_cap_basis, esc.share_warmup_requests
    if share_exceeded(snap.router_share, esc.share_cap_percent, basis, warmup):
        return True
    ws = snap.workspace_share
    cap = inp.workspace_cap_percent
    return cap is not None and ws is not None and share_exceeded(ws, cap, basis, warmup)


def _deescalation_due(inp: EscalationInputs, state: TierState, strike_now: bool) -> bool:
    """Only when free (§4.4): cache-cold, enough clean turns, and an easy turn.

    Cache-cold means idle past the provider window recorded at escalation,
    measured from the last strong-served request. A turn that itself strikes
    never de-escalates.
    """
    esc, t1 = inp.router.escalation, inp.router.thresholds.t1
    window = state.cache_window_seconds or float(UNMAPPED_CACHE_WINDOW)
    last = state.strong_served_at
    cold = last is None or inp.now - last > window
    return (
        cold
        and state.clean_turns >= esc.deescalate_clean_turns
        and inp.delta_score is not None
        and inp.delta_score < t1
        and not strike_now
    )
