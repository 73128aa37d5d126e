"""The escalation engine, rule by rule, through snapshot -> resolve -> commit.

Every test drives real state (MemoryStore) through the same functions the
gateway calls; resolve-only checks build snapshots by hand.
"""

from __future__ import annotations

import pytest

from escalation_support import (
    BASE_MODEL,
    REQ_STRIKE,
    RESP_STRIKE,
    T0,
    SessionDriver,
    make_router,
)
from tiergate.config import EscalationConfig, RouterConfig
from tiergate.routing.caps import ShareCounters
from tiergate.routing.escalation import (
    DEFAULT_DELTA_T2,
    Escalate,
    EscalationInputs,
    EscalationSnapshot,
    RecordTurn,
    effective_delta_threshold,
    in_canary,
    resolve_escalation,
)
from tiergate.routing.escalation_commit import commit_escalation
from tiergate.routing.escalation_read import explain_escalation
from tiergate.routing.tier_state import TierState, TurnOutcome
from tiergate.state.base import StateUnavailable
from tiergate.state.memory import MemoryStore

HIGH, LOW = 0.72, 0.23  # the report's hard and easy delta-score modes


def driver(store: MemoryStore | None = None, **esc: object) -> SessionDriver:
    mode = str(esc.pop("mode", "auto"))
    return SessionDriver(store or MemoryStore(), make_router(mode, **esc))


def everything(store: object) -> dict[str, object]:
    """Every key of a MemoryStore with its value and expiry: purity must cover all keys."""
    assert isinstance(store, MemoryStore)
    return dict(store._data)


def kinds(turn_events: tuple) -> list[str]:  # type: ignore[type-arg]
    return [e.kind for e in turn_events]


# ---- applicability -------------------------------------------------------------------


@pytest.mark.parametrize(
    "router",
    [make_router("off"), make_router("auto", strategy="dsl")],
    ids=["mode-off", "dsl"],
)
async def test_engine_is_silent_when_off_or_dsl(router: RouterConfig) -> None:
    d = SessionDriver(MemoryStore(), router)
    t = await d.turn(tier="strong")
    assert t.decision.header is None and t.decision.serve_tier == "base"
    assert not t.decision.intents and not t.commit.committed
    assert len(d.store) == 0  # type: ignore[arg-type]


async def test_unidentified_session_gets_no_header_but_counts_as_router_traffic() -> None:
    d = driver()
    d.scope = None
    t = await d.turn(tier="strong", once=True)
    assert t.decision.header is None and t.decision.serve_tier == "base"
    assert t.commit.committed
    assert await d.store.get("esc:share:coding:20260101:req") == b"1"


async def test_plain_session_is_base() -> None:
    t = await driver().turn()
    assert t.decision.header == "base" and t.decision.serve_tier == "base"


# ---- class A: client headers ----------------------------------------------------------


async def test_explicit_strong_escalates_at_n_equals_one_and_sticks() -> None:
    d = driver()
    first = await d.turn(tier=" STRONG ")
    assert first.decision.header == "strong; reason=explicit"
    assert kinds(first.commit.events) == ["escalated"]
    assert first.commit.events[0].trigger == "explicit"
    second = await d.turn()
    assert second.decision.header == "strong" and second.decision.serve_tier == "strong"
    state = await d.state()
    assert state is not None and state.tier == "strong" and state.escalations_used == 1


async def test_once_boosts_one_request_without_changing_the_tier() -> None:
    d = driver()
    boosted = await d.turn(once=True)
    assert boosted.decision.header == "strong; reason=once"
    assert boosted.decision.session_tier == "base" and not boosted.commit.events
    assert (await d.turn()).decision.header == "base"
    state = await d.state()
    assert state is not None and state.escalations_used == 0
    assert (await d.turn(tier="strong")).decision.header == "strong; reason=explicit"


async def test_reset_returns_to_base_and_does_not_refund_the_session_cap() -> None:
    d = driver()
    await d.turn(tier="strong")
    reset = await d.turn(tier="base")
    assert reset.decision.header == "base; reason=reset"
    assert kinds(reset.commit.events) == ["reset"]
    again = await d.turn(tier="strong")
    assert again.decision.header == "base; reason=denied:session_cap"
    assert kinds(again.commit.events) == ["denied_cap"]


async def test_once_is_exempt_from_the_session_cap() -> None:
    d = driver()
    await d.turn(tier="strong")
    await d.turn(tier="base")
    t = await d.turn(once=True)
    assert t.decision.header == "strong; reason=once" and t.decision.serve_tier == "strong"


async def test_reset_vetoes_a_pending_auto_escalation() -> None:
    d = driver()
    await d.turn(delta=HIGH)  # streak 1: one more hard turn would ratchet
    vetoed = await d.turn(delta=HIGH, tier="base")
    assert vetoed.decision.header == "base; reason=reset"
    assert not any(isinstance(i, Escalate) for i in vetoed.decision.intents)
    # The evidence is gone: the next hard turn starts a new streak.
    assert (await d.turn(delta=HIGH)).decision.header == "base"
    assert (await d.turn(delta=HIGH)).decision.header == "strong; reason=difficulty"


async def test_reset_vetoes_an_in_flight_auto_escalation() -> None:
    """A concurrent reset commits first: the auto escalation decided before it is stale."""
    d = driver()
    await d.turn(delta=HIGH)
    d.now += 10
    auto = await d.resolve(d.inputs(delta=HIGH))
    reset = await d.resolve(d.inputs(tier="base"))
    assert auto.reason == "difficulty"
    await commit_escalation(d.store, reset, TurnOutcome(True), d.now)
    late = await commit_escalation(d.store, auto, TurnOutcome(True, served_tier="strong"), d.now)
    assert late.stale == ("escalate",) and not late.events
    state = await d.state()
    assert state is not None and state.tier == "base" and state.escalations_used == 0


# ---- class B: difficulty ----------------------------------------------------------------


async def test_two_consecutive_hard_turns_ratchet_on_the_second() -> None:
    d = driver()
    assert (await d.turn(delta=HIGH)).decision.header == "base"
    t = await d.turn(delta=HIGH)
    assert t.decision.header == "strong; reason=difficulty"
    ev = t.commit.events[0]
    assert ev.kind == "escalated" and ev.delta_score == HIGH and ev.difficulty_streak == 2
    assert ev.threshold == DEFAULT_DELTA_T2


async def test_an_easy_turn_breaks_the_streak() -> None:
    d = driver()
    for delta in (HIGH, LOW, HIGH):
        assert (await d.turn(delta=delta)).decision.header == "base"


async def test_failed_requests_neither_break_nor_advance_the_streak() -> None:
    d = driver()
    await d.turn(delta=HIGH)
    failed = await d.turn(delta=LOW, success=False)
    assert not failed.commit.committed
    assert (await d.turn(delta=HIGH)).decision.header == "strong; reason=difficulty"


def test_default_delta_threshold_has_margin_and_explicit_settings_win() -> None:
    assert effective_delta_threshold(make_router()) == DEFAULT_DELTA_T2 == 0.55
    assert effective_delta_threshold(make_router(delta_t2=0.5)) == 0.5
    explicit_null = RouterConfig.model_validate(
        {"name": "r", "thresholds": {"t2": 0.66}, "escalation": {"delta_t2": None}}
    )
    assert effective_delta_threshold(explicit_null) == 0.66  # documented: null = thresholds.t2


async def test_threshold_applies_at_the_boundary() -> None:
    d = driver(delta_t2=0.6)
    await d.turn(delta=0.6)
    assert (await d.turn(delta=0.6)).decision.reason == "difficulty"
    d2 = driver(delta_t2=0.6)
    await d2.turn(delta=0.599)
    assert (await d2.turn(delta=0.599)).decision.header == "base"


async def test_percentile_gate_after_warmup() -> None:
    d = driver(percentile=90, percentile_warmup=50, delta_t2=0.95)
    # Warm-up: the absolute threshold (0.95) applies, and every score is recorded.
    for i in range(50):
        d.scope = f"default:warm-{i}"
        t = await d.turn(delta=0.5 if i % 20 == 0 else 0.2)  # 6 % of traffic at 0.5
        assert t.decision.threshold_source == "absolute" and t.decision.header == "base"
    d.scope = "default:hot"
    first = await d.turn(delta=0.5)
    assert first.decision.threshold_source == "percentile"
    assert first.decision.threshold is not None and 0.2 < first.decision.threshold < 0.25
    assert (await d.turn(delta=0.5)).decision.header == "strong; reason=difficulty"
    # A score in the bulk of the traffic is not in the top 10 %.
    d.scope = "default:calm"
    await d.turn(delta=0.2)
    assert (await d.turn(delta=0.2)).decision.header == "base"


# ---- class C: strikes -------------------------------------------------------------------


async def test_two_struck_turns_inside_the_decay_window_ratchet() -> None:
    d = driver()
    assert (await d.turn(strikes=[REQ_STRIKE])).decision.header == "base"
    t = await d.turn(strikes=[REQ_STRIKE])
    assert t.decision.header == "strong; reason=strikes"
    assert t.commit.events[0].strike_count == 2


async def test_strikes_decay() -> None:
    d = driver(strike_decay_seconds=300)
    await d.turn(strikes=[REQ_STRIKE])
    assert (await d.turn(strikes=[REQ_STRIKE], idle=400)).decision.header == "base"


async def test_one_turn_with_several_signals_is_one_strike() -> None:
    """No fuzzy signal ratchets alone: a turn strikes at most once."""
    d = driver()
    other = REQ_STRIKE.__class__("repeated_failing_command", "request")
    t = await d.turn(strikes=[REQ_STRIKE, other], response_strikes=[RESP_STRIKE])
    assert t.decision.header == "base" and t.decision.strike_count == 1
    state = await d.state()
    assert state is not None and len(state.strikes) == 1


async def test_retries_with_the_same_request_id_do_not_double_count() -> None:
    d = driver()
    await d.turn(strikes=[REQ_STRIKE], request_id="turn-a")
    retry = await d.turn(strikes=[REQ_STRIKE], request_id="turn-a")
    assert retry.decision.header == "base" and retry.commit.duplicate_turn
    assert (await d.turn(strikes=[REQ_STRIKE])).decision.reason == "strikes"


async def test_infrastructure_failures_never_strike() -> None:
    d = driver()
    for _ in range(3):  # 429 / 5xx / fallback exhaustion: success=False
        t = await d.turn(strikes=[REQ_STRIKE], response_strikes=[RESP_STRIKE], success=False)
        assert not t.commit.committed
    assert await d.state() is None


async def test_response_strikes_land_at_commit_and_count_next_turn() -> None:
    d = driver()
    await d.turn(response_strikes=[RESP_STRIKE])
    assert (await d.turn()).decision.strike_count == 1
    assert (await d.turn(response_strikes=[RESP_STRIKE])).decision.header == "base"
    assert (await d.turn()).decision.header == "strong; reason=strikes"


async def test_strike_threshold_is_configurable() -> None:
    d = driver(strike_threshold=3)
    await d.turn(strikes=[REQ_STRIKE])
    assert (await d.turn(strikes=[REQ_STRIKE])).decision.header == "base"
    assert (await d.turn(strikes=[REQ_STRIKE])).decision.reason == "strikes"


# ---- caps ---------------------------------------------------------------------------------


async def test_session_cap_denies_auto_escalation_after_de_escalation() -> None:
    d = driver()
    await d.turn(tier="strong")
    await d.turn(tier="base")
    await d.turn(delta=HIGH)
    t = await d.turn(delta=HIGH)
    assert t.decision.header == "base; reason=denied:session_cap"
    ev = t.commit.events[0]
    assert ev.kind == "denied_cap" and ev.trigger == "difficulty"


async def test_max_per_session_zero_allows_only_once_boosts() -> None:
    d = driver(max_per_session=0)
    assert (await d.turn(tier="strong")).decision.reason == "denied:session_cap"
    assert (await d.turn(once=True)).decision.reason == "once"


def _capped_snapshot(state: TierState | None = None) -> EscalationSnapshot:
    return EscalationSnapshot(state=state, router_share=ShareCounters(100, 30, 10.0, 3.0))


def _inputs(router: RouterConfig, **kw: object) -> EscalationInputs:
    base: dict[str, object] = {"scope": "default:s", "request_id": "r", "now": T0}
    base.update(kw)
    return EscalationInputs(router=router, **base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "trigger"),
    [({"tier_header": "strong"}, "explicit"), ({"escalate_header": "once"}, "once")],
)
def test_share_cap_binds_explicit_asks_and_once_boosts(kw: dict[str, str], trigger: str) -> None:
    router = make_router(share_warmup_requests=20)
    d = resolve_escalation(_inputs(router, **kw), _capped_snapshot())
    assert d.header == "base; reason=denied:share_cap" and d.serve_tier == "base"
    assert [(e.kind, e.trigger) for e in d.events] == [("denied_cap", trigger)]
    assert d.events[0].router_share == pytest.approx(0.3)


def test_share_cap_suppresses_an_already_strong_session() -> None:
    router = make_router(share_warmup_requests=20)
    strong = TierState(tier="strong", epoch=1, escalations_used=1, trigger="explicit")
    d = resolve_escalation(_inputs(router), _capped_snapshot(strong))
    assert d.header == "base; reason=denied:share_cap" and d.session_tier == "strong"
    assert not any(isinstance(i, Escalate) for i in d.intents)


def test_share_cap_binds_auto_triggers() -> None:
    router = make_router(share_warmup_requests=20)
    primed = TierState(streaks={"": 1})
    d = resolve_escalation(_inputs(router, delta_score=HIGH), _capped_snapshot(primed))
    assert d.header == "base; reason=denied:share_cap"


def test_workspace_cap_binds_across_routers() -> None:
    router = make_router(share_warmup_requests=20, share_cap_percent=50)
    snap = EscalationSnapshot(
        router_share=ShareCounters(100, 30, 10.0, 3.0),
        workspace_share=ShareCounters(1000, 310, 100.0, 31.0),
    )
    ask = _inputs(router, tier_header="strong", workspace="default", workspace_cap_percent=30)
    assert resolve_escalation(ask, snap).reason == "denied:share_cap"
    roomy = _inputs(router, tier_header="strong", workspace="default", workspace_cap_percent=40)
    assert resolve_escalation(roomy, snap).reason == "explicit"


async def test_share_cap_holds_against_header_abuse() -> None:
    """§6.5 in miniature: every request asks for strong; the spend share converges."""
    store = MemoryStore()
    router = make_router(share_cap_percent=20, share_warmup_requests=20, share_cap_basis="requests")
    served_strong = denied = 0
    for s in range(60):
        d = SessionDriver(store, router, scope=f"default:abuser-{s}")
        for _ in range(5):
            t = await d.turn(tier="strong")
            served_strong += t.decision.serve_tier == "strong"
            denied += t.decision.reason == "denied:share_cap"
            if t.decision.reason == "denied:share_cap":
                assert kinds(t.commit.events) == ["denied_cap"]
    assert served_strong + denied == 300
    assert 0.19 < served_strong / 300 <= 0.22


# ---- de-escalation --------------------------------------------------------------------------


async def _escalated(d: SessionDriver) -> None:
    await d.turn(idle=0)  # served base first: the session's base model
    await d.turn(tier="strong")


async def test_de_escalation_when_cold_clean_and_easy_lands_on_the_start_model() -> None:
    d = driver()
    await _escalated(d)
    for _ in range(3):
        assert (await d.turn(delta=LOW)).decision.header == "strong"
    t = await d.turn(delta=LOW, idle=301)
    assert t.decision.header == "base; reason=de_escalated"
    assert t.decision.base_model == BASE_MODEL
    assert kinds(t.commit.events) == ["de_escalated"]
    state = await d.state()
    assert state is not None and state.tier == "base" and state.escalations_used == 1


async def test_never_de_escalates_while_warm() -> None:
    d = driver()
    await _escalated(d)
    for _ in range(6):
        assert (await d.turn(delta=LOW, idle=290)).decision.header == "strong"


async def test_de_escalation_needs_three_strike_free_turns() -> None:
    d = driver()
    await _escalated(d)
    await d.turn(delta=LOW)  # clean
    await d.turn(delta=LOW, strikes=[REQ_STRIKE])  # struck on the request side
    await d.turn(delta=LOW, response_strikes=[RESP_STRIKE])  # struck on the response side
    assert (await d.turn(delta=LOW, idle=400)).decision.header == "strong"  # 1 clean so far
    assert (await d.turn(delta=LOW, idle=400)).decision.header == "strong"  # 2 clean
    assert (await d.turn(delta=LOW, idle=400)).decision.header == "base; reason=de_escalated"


async def test_de_escalation_needs_an_easy_latest_turn() -> None:
    d = driver()
    await _escalated(d)
    for _ in range(3):
        await d.turn(delta=LOW)
    assert (await d.turn(delta=0.35, idle=400)).decision.header == "strong"  # not < t1


async def test_a_concurrent_strong_request_keeps_the_cache_warm() -> None:
    """De-escalation decided on a cold snapshot is stale once a racing request
    was served strong: the cache is warm again and switching would not be free."""
    d = driver()
    await _escalated(d)
    for _ in range(3):
        await d.turn(delta=LOW)
    d.now += 400
    down = await d.resolve(d.inputs(delta=LOW))
    stay = await d.resolve(d.inputs(delta=LOW, tier="strong"))
    assert down.reason == "de_escalated" and stay.serve_tier == "strong"
    await commit_escalation(d.store, stay, TurnOutcome(True, served_tier="strong"), d.now)
    late = await commit_escalation(d.store, down, TurnOutcome(True), d.now)
    assert late.stale == ("deescalate",) and not late.events
    state = await d.state()
    assert state is not None and state.tier == "strong"


async def test_cache_window_recorded_at_escalation_sets_coldness() -> None:
    d = driver()
    await d.turn(tier="strong", cache_window=3600)  # DeepSeek-like hour window
    for _ in range(3):
        await d.turn(delta=LOW, cache_window=3600)
    assert (await d.turn(delta=LOW, idle=1800)).decision.header == "strong"
    assert (await d.turn(delta=LOW, idle=3700)).decision.reason == "de_escalated"


# ---- modes, rollout, availability ---------------------------------------------------------


async def test_manual_mode_ignores_difficulty_and_strikes_but_honours_asks() -> None:
    d = driver(mode="manual")
    for _ in range(3):
        assert (await d.turn(delta=HIGH, strikes=[REQ_STRIKE])).decision.header == "base"
    assert (await d.turn(tier="strong")).decision.header == "strong; reason=explicit"


async def test_shadow_mode_records_once_and_switches_nothing() -> None:
    d = driver(rollout_percent=0)
    await d.turn(delta=HIGH)
    t = await d.turn(delta=HIGH)
    assert t.decision.header == "base" and t.decision.shadow and t.decision.serve_tier == "base"
    assert kinds(t.commit.events) == ["shadow"]
    assert t.commit.events[0].header == "strong; reason=difficulty"  # what live would do
    for _ in range(3):
        again = await d.turn(delta=HIGH)
        assert again.decision.header == "base" and not again.commit.events
    state = await d.state()
    assert state is not None and state.tier == "base" and state.escalations_used == 0
    # Client asks are always live.
    assert (await d.turn(tier="strong")).decision.header == "strong; reason=explicit"


def test_canary_is_a_stable_per_session_split() -> None:
    sessions = [f"default:s{i}" for i in range(2000)]
    live = [s for s in sessions if in_canary(s, 25)]
    assert 0.2 < len(live) / len(sessions) < 0.3
    assert live == [s for s in sessions if in_canary(s, 25)]
    assert all(in_canary(s, 100) for s in sessions[:50])
    assert not any(in_canary(s, 0) for s in sessions[:50])


async def test_sessions_outside_the_canary_are_shadowed() -> None:
    router = make_router(rollout_percent=50)
    outside = next(f"default:s{i}" for i in range(100) if not in_canary(f"default:s{i}", 50))
    d = SessionDriver(MemoryStore(), router, scope=outside)
    await d.turn(delta=HIGH)
    t = await d.turn(delta=HIGH)
    assert t.decision.header == "base" and t.decision.shadow


async def test_strong_unavailable_serves_base_but_keeps_the_tier() -> None:
    d = driver()
    t = await d.turn(tier="strong", strong_available=False)
    assert t.decision.header == "base; reason=strong_unavailable"
    assert t.decision.serve_tier == "base" and t.decision.session_tier == "strong"
    assert (await d.turn()).decision.header == "strong"


# ---- purity and hygiene -------------------------------------------------------------------


async def test_resolve_and_explain_change_no_state() -> None:
    d = driver()
    await d.turn(delta=HIGH)
    await d.turn(strikes=[REQ_STRIKE])
    before = everything(d.store)
    for kw in ({"tier": "strong"}, {"tier": "base"}, {"once": True}, {"delta": HIGH}):
        decision = await explain_escalation(d.store, d.inputs(**kw))  # type: ignore[arg-type]
        assert decision.intents  # it would change things...
    assert everything(d.store) == before


async def test_failed_or_unbilled_outcomes_commit_nothing() -> None:
    d = driver()
    await d.turn()
    snapshot = everything(d.store)
    t = await d.turn(tier="strong", success=False)
    assert t.decision.reason == "explicit" and not t.commit.committed
    assert everything(d.store) == snapshot


async def test_tier_state_expires_after_idle_ttl() -> None:
    clock = [0.0]
    store = MemoryStore(clock=lambda: clock[0])
    d = SessionDriver(store, make_router(tier_ttl_seconds=4 * 3600))
    await d.turn(tier="strong")
    clock[0] = 3 * 3600
    await d.turn()  # activity refreshes the TTL
    clock[0] = 6.9 * 3600
    assert await d.state() is not None
    clock[0] = 7.1 * 3600
    assert await d.state() is None


def test_decision_as_dict_is_json_ready_and_excludes_config() -> None:
    import orjson

    d = resolve_escalation(_inputs(make_router(), tier_header="strong"), EscalationSnapshot())
    doc = d.as_dict()
    assert "config" not in doc and doc["header"] == "strong; reason=explicit"
    assert {i["kind"] for i in doc["intents"]} == {"count_traffic", "record_turn", "escalate"}
    orjson.dumps(doc)


def test_record_turn_carries_only_the_first_request_strike() -> None:
    d = resolve_escalation(
        _inputs(make_router(), request_strikes=(REQ_STRIKE,), delta_score=0.1),
        EscalationSnapshot(),
    )
    rec = next(i for i in d.intents if isinstance(i, RecordTurn))
    assert rec.request_strike == "errored_tool_results" and rec.high is False


def test_degraded_snapshot_serves_base_with_no_intents() -> None:
    d = resolve_escalation(
        _inputs(make_router(), tier_header="strong"), EscalationSnapshot(degraded=True)
    )
    assert d.serve_tier == "base" and d.header == "base" and not d.intents


def test_escalation_config_defaults_match_the_report() -> None:
    esc = EscalationConfig()
    assert (esc.max_per_session, esc.share_cap_percent, esc.share_warmup_requests) == (1, 20, 20)
    assert (esc.strike_threshold, esc.deescalate_clean_turns, esc.tier_ttl_seconds) == (
        2,
        3,
        4 * 3600,
    )


class UnreachableStore(MemoryStore):
    """A backend that is down: every read and transaction raises StateUnavailable."""

    async def get_many(self, keys: object) -> list[bytes | None]:  # type: ignore[override]
        raise StateUnavailable("down")

    async def transact(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        raise StateUnavailable("down")

    async def apply_batch(self, *args: object, **kwargs: object) -> bool:  # type: ignore[override]
        raise StateUnavailable("down")


async def test_an_unreachable_store_degrades_to_base_and_skips_the_commit() -> None:
    d = SessionDriver(UnreachableStore(), make_router())
    t = await d.turn(tier="strong")
    assert t.decision.header == "base" and t.decision.serve_tier == "base"
    assert not t.commit.committed
    # A decision made while the store was up, committed while it is down, is skipped.
    up = resolve_escalation(_inputs(make_router(), tier_header="strong"), EscalationSnapshot())
    result = await commit_escalation(UnreachableStore(), up, TurnOutcome(True), T0)
    assert not result.committed and result.error == "state_unavailable" and not result.events
