"""Hypothesis state machine over the tier/cap invariants.

Random sessions of single requests and *concurrent batches* (several requests
resolved from the same snapshot, committed in a random order, exactly the
race a fleet of gateway processes produces) are driven through the real
snapshot -> resolve -> commit path on a MemoryStore. After every step:

- never more than `max_per_session` ratchets, and the stored count equals the
  ratchets that actually applied;
- never a de-escalation while the strong cache is warm;
- a committed escalation is never lost: inside a batch at most one tier
  transition applies, and the tier ends where that transition put it;
- served strong only when the share cap allowed it; failed requests change
  nothing; shadow and manual modes never auto-escalate; every header is one
  of the documented values; a side request never triggers or de-escalates.
Requests belong to random conversations of the one session, and some are
side requests (routing.conversation): the invariants are the session's.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from escalation_support import (
    BASE_MODEL,
    HEADER_VALUES,
    REQ_STRIKE,
    RESP_STRIKE,
    STRONG_MODEL,
    T0,
    make_router,
)
from tiergate.config import UNMAPPED_CACHE_WINDOW, RouterConfig
from tiergate.routing.escalation import (
    EscalationDecision,
    EscalationInputs,
    resolve_escalation,
)
from tiergate.routing.escalation_commit import CommitResult, commit_escalation
from tiergate.routing.escalation_read import read_escalation_snapshot
from tiergate.routing.tier_state import TierState, TurnOutcome, tier_state_key
from tiergate.state.memory import MemoryStore

SCOPE = "default:machine"
_TRANSITIONS = {"escalate", "deescalate", "reset"}


@dataclass(frozen=True)
class Req:
    delta: float | None
    strike: bool
    response_strike: bool
    tier: str | None
    once: bool
    success: bool
    strong_available: bool
    conv: str = ""
    side: bool = False


requests = st.builds(
    Req,
    delta=st.sampled_from([None, 0.1, 0.3, 0.5, 0.56, 0.8]),
    strike=st.booleans(),
    response_strike=st.booleans(),
    tier=st.sampled_from([None, None, None, None, "strong", "base"]),
    once=st.sampled_from([False, False, False, True]),
    success=st.sampled_from([True, True, True, False]),
    strong_available=st.sampled_from([True, True, True, False]),
    conv=st.sampled_from(["", "main", "main", "sub"]),  # conversations inside the session
    side=st.sampled_from([False, False, False, True]),
)


class EscalationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store = MemoryStore()  # TTLs run on the real clock: nothing expires mid-run
        self.router: RouterConfig = make_router()
        self.now = T0
        self.ratchets = 0
        self.ids = 0

    def teardown(self) -> None:
        self.loop.close()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def state(self) -> TierState:
        raw = self.run(self.store.get(tier_state_key(SCOPE, self.router.name)))
        return TierState.from_bytes(raw) or TierState()

    @initialize(
        mode=st.sampled_from(["manual", "auto", "auto"]),
        max_per_session=st.integers(0, 3),
        strike_threshold=st.integers(1, 3),
        rollout=st.sampled_from([0.0, 100.0, 100.0]),
        cap=st.sampled_from([20.0, 50.0, 100.0]),
        cap_mode=st.sampled_from(["admit", "suppress"]),
    )
    def configure(
        self,
        mode: str,
        max_per_session: int,
        strike_threshold: int,
        rollout: float,
        cap: float,
        cap_mode: str,
    ) -> None:
        self.router = make_router(
            mode,
            share_cap_mode=cap_mode,
            max_per_session=max_per_session,
            strike_threshold=strike_threshold,
            rollout_percent=rollout,
            share_cap_percent=cap,
            share_cap_basis="requests",
            share_warmup_requests=4,
            strike_decay_seconds=900,
        )

    # ---- driving --------------------------------------------------------------------

    def resolve(self, req: Req) -> EscalationDecision:
        self.ids += 1
        inp = EscalationInputs(
            router=self.router,
            scope=SCOPE,
            request_id=f"r{self.ids}",
            now=self.now,
            delta_score=req.delta,
            request_strikes=(REQ_STRIKE,) if req.strike else (),
            tier_header=req.tier,
            escalate_header="once" if req.once else None,
            strong_available=req.strong_available,
            conversation=req.conv,
            side_request=req.side,
        )
        snap = self.run(read_escalation_snapshot(self.store, self.router, SCOPE, None, self.now))
        decision = resolve_escalation(inp, snap)
        self.check_decision(decision, snap.state or TierState())
        if req.side:  # a side request never triggers or de-escalates
            assert decision.reason not in ("difficulty", "strikes", "de_escalated")
        return decision

    def commit(self, req: Req, decision: EscalationDecision) -> CommitResult:
        before = self.state()
        before_raw = dict(self.store._data)
        outcome = TurnOutcome(
            success=req.success,
            billed=req.success,
            served_tier=decision.serve_tier,
            served_model=STRONG_MODEL if decision.serve_tier == "strong" else BASE_MODEL,
            cost_usd=0.01,
            response_strikes=(RESP_STRIKE,) if req.response_strike else (),
            cache_window_seconds=300.0,
        )
        result = self.run(commit_escalation(self.store, decision, outcome, self.now))
        if not req.success:
            assert not result.committed
            assert dict(self.store._data) == before_raw, "a failed request changed state"
        self.ratchets += result.applied.count("escalate")
        for kind in [*result.applied, *(f"stale {k}" for k in result.stale)]:
            event(kind)
        after = self.state()
        if "deescalate" in result.applied:
            window = before.cache_window_seconds or UNMAPPED_CACHE_WINDOW
            last = before.strong_served_at
            assert last is None or self.now - last > window, "de-escalated while warm"
        if "escalate" in result.applied:
            assert after.tier == "strong"
            assert after.trigger == "explicit" or (
                self.router.escalation.mode == "auto" and self.router.escalation.rollout_percent > 0
            ), "auto escalation outside a live auto canary"
        return result

    def check_decision(self, d: EscalationDecision, seen: TierState) -> None:
        esc = self.router.escalation
        assert d.header in HEADER_VALUES
        event(f"header {d.header}")
        if d.serve_tier == "strong" and d.share_capped:
            # suppress: nothing strong over the cap; admit: only a session already strong
            # keeps its tier (never cut off partway), no new escalation is admitted
            assert esc.share_cap_mode == "admit", "served strong over the share cap"
            # (a one-request serve is judged on that one request: routing/admission.py)
            assert seen.tier == "strong" or d.reason in ("once", "base_unavailable"), (
                "a new escalation admitted over the share cap"
            )
        if d.reason == "denied:session_cap":
            assert seen.escalations_used >= esc.max_per_session
        if d.shadow:  # recorded, never switched: the tier stays base
            assert d.session_tier == "base"
            assert not any(i.kind == "escalate" for i in d.intents)
            assert d.reason in (None, "once", "denied:share_cap", "strong_unavailable")

    @rule(req=requests, idle=st.sampled_from([1.0, 60.0, 299.0, 301.0, 900.0, 3600.0]))
    def single_request(self, req: Req, idle: float) -> None:
        self.now += idle
        self.commit(req, self.resolve(req))

    @precondition(lambda self: self.ratchets <= 3)
    @rule(
        batch=st.lists(requests, min_size=2, max_size=4),
        seed=st.integers(0, 2**16),
        idle=st.sampled_from([1.0, 400.0]),
    )
    def concurrent_batch(self, batch: list[Req], seed: int, idle: float) -> None:
        self.now += idle
        decisions = [self.resolve(r) for r in batch]  # all from the same snapshot
        order = list(range(len(batch)))
        random.Random(seed).shuffle(order)
        applied: list[tuple[str, str]] = []
        for i in order:
            result = self.commit(batch[i], decisions[i])
            applied += [(k, self.state().tier) for k in result.applied if k in _TRANSITIONS]
        assert len(applied) <= 1, f"several transitions applied from one snapshot: {applied}"
        if applied:
            assert self.state().tier == applied[0][1], "a committed transition was lost"

    # ---- invariants -----------------------------------------------------------------

    @invariant()
    def ratchets_are_capped_and_counted(self) -> None:
        state = self.state()
        assert state.escalations_used <= self.router.escalation.max_per_session
        assert state.escalations_used == self.ratchets


TestEscalationMachine = EscalationMachine.TestCase
TestEscalationMachine.settings = settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
