"""The per-session, per-router tier state and its pure transitions.

The tier state is the only escalation memory.

Separate from the model pins (report §4): the pin says which model serves the
session inside a tier; this record says which tier the session is in, why, and
the evidence gathered toward the next transition. It is small, capped and
expiring (`tier_ttl_seconds`, 4 h idle by default, refreshed on every commit).

`epoch` counts tier transitions. Every transition intent carries the epoch it
was decided on, and applies only if the state still has it: that is what lets
a stale concurrent writer lose instead of clobbering a committed escalation.

`apply_intents` is the whole body of the commit transaction, pure so that
property tests can drive it without a store.

Evidence is kept per conversation (routing.conversation): a strike mark is
tagged with the conversation that struck, and the difficulty streak is one
counter per conversation, so a sub-agent's turns neither add to nor reset the
main thread's evidence. The tier, the epoch, the ratchet count and the cache
bookkeeping are the session's. Conversation "" is the untagged one (callers
that name no conversation, and states written before the tags existed); its
evidence counts for every conversation, so an upgrade keeps what it had.
"""

from __future__ import annotations

import functools
import hashlib
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import orjson

from tiergate.config import EscalationConfig
from tiergate.routing.admission import slot_alive, slot_of
from tiergate.routing.caps import session_cap_reached
from tiergate.routing.strikes import Strike

Tier = Literal["base", "strong"]

#: Recent turn ids remembered for deduplication (client retries, double commits).
SEEN_RING_SIZE = 32
#: Strike marks kept at most; older ones decay out anyway.
MAX_STRIKE_MARKS = 16
#: Conversations whose difficulty streak is kept (most recently evaluated last).
MAX_STREAKS = 8


@dataclass(frozen=True, slots=True)
class StrikeMark:
    """One struck turn: its id, when it was committed, and the first reason."""

    turn: str
    at: float
    reason: str
    conv: str = ""  # the conversation that struck ("" = untagged, counts for all)

    def counts_for(self, conv: str) -> bool:
        return self.conv == conv or not self.conv


@dataclass(slots=True)
class TierState:
    tier: Tier = "base"
    epoch: int = 0
    #: Ratchets made; never refunded by resets or de-escalation.
    escalations_used: int = 0
    trigger: str | None = None
    escalated_at: float | None = None
    #: Provider cache window of the strong model, recorded when first served strong.
    cache_window_seconds: float | None = None
    #: Last time this session was served by the strong tier (its cache warmth).
    strong_served_at: float | None = None
    last_seen: float = 0.0
    clean_turns: int = 0
    #: Consecutive high-difficulty evaluated turns, per conversation (bounded).
    streaks: dict[str, int] = field(default_factory=dict)
    strikes: list[StrikeMark] = field(default_factory=list)
    seen_turns: list[str] = field(default_factory=list)
    #: The base model the session started on, so de-escalation lands back on it.
    base_model: str | None = None
    #: Trigger of a shadow escalation already recorded (suppresses repeats).
    shadow_trigger: str | None = None
    #: Requests committed for this session (its length so far, for the forecast).
    turns: int = 0
    #: Share-cap admission (routing.admission): the slot holding this session's
    #: reservation of forecast remaining turns, how many are left, and how many
    #: of them are strong (an escalated session's).
    reserve_slot: int | None = None
    reserve_left: float = 0.0
    strong_left: float = 0.0

    def live_strikes(
        self, now: float, decay_seconds: float, conv: str | None = None
    ) -> list[StrikeMark]:
        """Strikes inside the decay window; only those counting for `conv` if given."""
        return [
            s
            for s in self.strikes
            if now - s.at <= decay_seconds and (conv is None or s.counts_for(conv))
        ]

    def streak_of(self, conv: str) -> int:
        return self.streaks.get(conv, self.streaks.get("", 0))

    @property
    def difficulty_streak(self) -> int:
        """The longest streak of any conversation (what reports show)."""
        return max(self.streaks.values(), default=0)

    def set_streak(self, conv: str, value: int) -> None:
        """Record `conv`'s streak; the untagged legacy streak is consumed by it."""
        self.streaks.pop(conv, None)
        if conv:
            self.streaks.pop("", None)
        if value:
            self.streaks[conv] = value
            while len(self.streaks) > MAX_STREAKS:
                del self.streaks[next(iter(self.streaks))]

    def clear_evidence(self) -> None:
        self.streaks = {}
        self.strikes = []
        self.clean_turns = 0

    def remember_turn(self, turn: str) -> None:
        self.seen_turns.append(turn)
        del self.seen_turns[:-SEEN_RING_SIZE]

    # ---- compact serialisation (short keys: one of these per live session) ----

    def to_bytes(self) -> bytes:
        doc: dict[str, Any] = {
            "t": self.tier,
            "e": self.epoch,
            "u": self.escalations_used,
            "ls": self.last_seen,
            "c": self.clean_turns,
            "d": self.difficulty_streak,  # what a pre-conversation reader uses
            "k": [[s.turn, s.at, s.reason] for s in self.strikes],
            "r": self.seen_turns,
        }
        if any(s.conv for s in self.strikes):  # beside "k", so older readers still parse it
            doc["kc"] = [s.conv for s in self.strikes]
        if self.streaks:
            doc["ds"] = self.streaks
        optional = {
            "g": self.trigger,
            "ea": self.escalated_at,
            "w": self.cache_window_seconds,
            "sa": self.strong_served_at,
            "b": self.base_model,
            "sh": self.shadow_trigger,
            "n": self.turns or None,
            "rs": self.reserve_slot,
            "rl": self.reserve_left or None,
            "rk": self.strong_left or None,
        }
        doc.update({k: v for k, v in optional.items() if v is not None})
        return orjson.dumps(doc)

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> TierState | None:
        """Parse a stored state; an unreadable record counts as no state."""
        if raw is None:
            return None
        try:
            doc = orjson.loads(raw)
            marks = doc.get("k", [])
            convs = doc.get("kc")
            if not isinstance(convs, list) or len(convs) != len(marks):
                convs = [""] * len(marks)  # untagged: counts for every conversation
            streaks = doc.get("ds")
            if streaks is None:  # written before per-conversation streaks
                legacy = int(doc.get("d", 0))
                streaks = {"": legacy} if legacy else {}
            return cls(
                tier="strong" if doc.get("t") == "strong" else "base",
                epoch=int(doc.get("e", 0)),
                escalations_used=int(doc.get("u", 0)),
                trigger=doc.get("g"),
                escalated_at=doc.get("ea"),
                cache_window_seconds=doc.get("w"),
                strong_served_at=doc.get("sa"),
                last_seen=float(doc.get("ls", 0.0)),
                clean_turns=int(doc.get("c", 0)),
                streaks={str(c): int(n) for c, n in streaks.items()},
                strikes=[
                    StrikeMark(str(t), float(a), str(r), str(c))
                    for (t, a, r), c in zip(marks, convs, strict=True)
                ],
                seen_turns=[str(t) for t in doc.get("r", [])],
                base_model=doc.get("b"),
                shadow_trigger=doc.get("sh"),
                turns=int(doc.get("n", 0)),
                reserve_slot=None if doc.get("rs") is None else int(doc["rs"]),
                reserve_left=float(doc.get("rl", 0.0)),
                strong_left=float(doc.get("rk", 0.0)),
            )
        except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError):
            return None


_every_field = operator.attrgetter(*(f.name for f in fields(TierState)))
"""Every field of a TierState, in __init__ order (apply_intents copies one per commit)."""


@functools.lru_cache(maxsize=4096)
def session_hash(scope: str) -> str:
    """The session's identity in keys and audit rows: never the raw session id.
    (Memoised: a request's read, decision and commit each name the same session.)"""
    return hashlib.blake2b(scope.encode(), digest_size=12).hexdigest()


def tier_state_key(scope: str, router: str) -> str:
    return f"esc:tier:{session_hash(scope)}:{router}"


def short_turn_id(request_id: str) -> str:
    """Bound the ring's size whatever id format the caller uses."""
    if len(request_id) <= 16:
        return request_id
    return hashlib.blake2b(request_id.encode(), digest_size=8).hexdigest()


# ---- intents ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CountTraffic:
    """Count the served request into the share buckets (and the score histogram).

    `forecast` (share_cap_mode admit only, else None) is the session's expected
    remaining turns after this one: what an escalation admitted now reserves
    (routing.admission). `new_session`: the first request of a session.
    """

    score: float | None = None
    forecast: float | None = None
    new_session: bool = False
    kind: Literal["count_traffic"] = "count_traffic"


@dataclass(frozen=True, slots=True)
class RecordTurn:
    """Record an evaluated turn: difficulty streak, strikes, clean-turn count."""

    turn: str
    high: bool | None
    request_strike: str | None = None
    conv: str = ""
    #: False for a side request: remembered for dedup, but no strike, streak or clean turn.
    evaluated: bool = True
    kind: Literal["record_turn"] = "record_turn"


@dataclass(frozen=True, slots=True)
class Escalate:
    trigger: str
    epoch: int
    kind: Literal["escalate"] = "escalate"


@dataclass(frozen=True, slots=True)
class Deescalate:
    """Back to base. `strong_served_at` is the cache warmth the decision saw: if a
    concurrent request was served strong since, the cache is warm again and
    the de-escalation is stale."""

    epoch: int
    strong_served_at: float | None
    kind: Literal["deescalate"] = "deescalate"


@dataclass(frozen=True, slots=True)
class Reset:
    """Client reset: back to base, and veto evidence or in-flight auto escalations."""

    epoch: int
    kind: Literal["reset"] = "reset"


@dataclass(frozen=True, slots=True)
class MarkShadow:
    """A shadow escalation was recorded; remember it so it is recorded once."""

    trigger: str
    epoch: int
    kind: Literal["mark_shadow"] = "mark_shadow"


Intent = CountTraffic | RecordTurn | Escalate | Deescalate | Reset | MarkShadow
TRANSITIONS = (Escalate, Deescalate, Reset, MarkShadow)


# ---- outcome and pure application ------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How the request ended. Only a billed success is a turn (§4.1 hygiene).

    `served_tier` is the tier that actually served (the decision's, unless a
    fallback changed it); `response_strikes` come from the final successful
    response only; `cache_window_seconds` is the serving channel's provider
    prompt-cache window.
    """

    success: bool
    billed: bool = True
    served_tier: Tier = "base"
    served_model: str | None = None
    cost_usd: float = 0.0
    response_strikes: Sequence[Strike] = ()
    cache_window_seconds: float | None = None


@dataclass(slots=True)
class ApplyReport:
    applied: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    duplicate_turn: bool = False
    #: Admission reservations made and consumed, as (slot, turns, strong turns)
    #: (routing.admission).
    reserve: list[tuple[int, float, float]] = field(default_factory=list)
    consume: list[tuple[int, float, float]] = field(default_factory=list)


def apply_intents(
    current: TierState | None,
    intents: Sequence[Intent],
    outcome: TurnOutcome,
    esc: EscalationConfig,
    now: float,
) -> tuple[TierState, ApplyReport]:
    """Apply intents onto the fresh state. Pure; the body of the commit transaction.

    Evidence first (this turn's strikes and streak), then transitions (which
    clear evidence), then serving bookkeeping. A transition whose epoch no
    longer matches lost a race: it merges if the state already is where it
    wanted to go, and is dropped as stale otherwise.
    """
    src = current or TierState()
    st = TierState(*_every_field(src))  # a copy; cheaper than dataclasses.replace
    st.strikes = src.live_strikes(now, esc.strike_decay_seconds)
    st.seen_turns = list(src.seen_turns)
    st.streaks = dict(src.streaks)
    report = ApplyReport()
    for intent in intents:
        if isinstance(intent, RecordTurn):
            _record_turn(st, intent, outcome, now, report)
    was = (st.tier, st.epoch)
    for intent in intents:
        if isinstance(intent, TRANSITIONS):
            _transition(st, intent, esc, now, report)
    st.last_seen = now
    forecast = next((i.forecast for i in intents if isinstance(i, CountTraffic)), None)
    _book_reservation(st, was, forecast, outcome, now, report)
    if any(isinstance(i, RecordTurn) and not i.evaluated for i in intents):
        return st, report  # a side request warms no conversation's cache, starts no pin
    if outcome.served_tier == "strong":
        st.strong_served_at = now
        if st.tier == "strong" and st.cache_window_seconds is None:
            st.cache_window_seconds = outcome.cache_window_seconds
    elif st.base_model is None and outcome.served_model:
        st.base_model = outcome.served_model
    return st, report


def _record_turn(
    st: TierState, intent: RecordTurn, outcome: TurnOutcome, now: float, report: ApplyReport
) -> None:
    if intent.turn in st.seen_turns:
        report.duplicate_turn = True
        return
    st.remember_turn(intent.turn)
    st.turns += 1
    if not intent.evaluated:
        report.applied.append("record_turn")
        return
    reason = intent.request_strike or next((s.reason for s in outcome.response_strikes), None)
    if reason is not None:
        st.strikes.append(StrikeMark(intent.turn, now, reason, intent.conv))
        del st.strikes[:-MAX_STRIKE_MARKS]
    elif st.tier == "strong":
        st.clean_turns += 1
    if intent.high is not None:
        st.set_streak(intent.conv, st.streak_of(intent.conv) + 1 if intent.high else 0)
    report.applied.append("record_turn")


def _transition(
    st: TierState,
    intent: Escalate | Deescalate | Reset | MarkShadow,
    esc: EscalationConfig,
    now: float,
    report: ApplyReport,
) -> None:
    if isinstance(intent, MarkShadow):
        already = st.shadow_trigger is not None
    else:
        already = st.tier == ("strong" if isinstance(intent, Escalate) else "base")
    if st.epoch != intent.epoch or (already and not isinstance(intent, Reset)):
        (report.merged if already else report.stale).append(intent.kind)
        return
    if isinstance(intent, Deescalate) and st.strong_served_at != intent.strong_served_at:
        report.stale.append(intent.kind)  # served strong meanwhile: warm again
        return
    if isinstance(intent, Escalate):
        if session_cap_reached(st.escalations_used, esc.max_per_session):
            report.stale.append(intent.kind)
            return
        st.tier, st.trigger, st.escalated_at = "strong", intent.trigger, now
        st.escalations_used += 1
        st.cache_window_seconds = None
        st.shadow_trigger = None
    elif isinstance(intent, MarkShadow):
        st.shadow_trigger = intent.trigger
        st.clear_evidence()
        report.applied.append(intent.kind)
        return
    else:  # Deescalate, Reset: back to base; the per-session cap is not refunded
        st.tier, st.trigger, st.escalated_at = "base", None, None
        st.cache_window_seconds = None
        st.shadow_trigger = None
    st.epoch += 1
    st.clear_evidence()
    report.applied.append(intent.kind)


def _book_reservation(
    st: TierState,
    was: tuple[Tier, int],
    forecast: float | None,
    outcome: TurnOutcome,
    now: float,
    report: ApplyReport,
) -> None:
    """Admission bookkeeping (routing.admission), after this turn's transitions.

    Every session holds a reservation of its forecast remaining turns in a slot
    (`reserve_left`); an escalated session's is also a strong reservation
    (`strong_left`). Each later turn consumes one (a strong serve one strong
    too). A tier transition releases what is left and reserves anew for the new
    tier, and so does a turn whose slot has lapsed. Nothing without a forecast
    (suppress mode), and nothing for a duplicate turn.
    """
    if forecast is None and st.reserve_slot is None:
        return
    transitioned = (st.tier, st.epoch) != was
    alive = st.reserve_slot is not None and slot_alive(st.reserve_slot, now)
    if st.reserve_slot is not None and (transitioned or not alive or forecast is None):
        if alive:  # release what is left
            report.consume.append((st.reserve_slot, st.reserve_left, st.strong_left))
        st.reserve_slot, st.reserve_left, st.strong_left = None, 0.0, 0.0
    if forecast is None or report.duplicate_turn:
        return
    if st.reserve_slot is None:  # a new session, a transition, or a lapsed slot
        slot = slot_of(now)
        strong = forecast if st.tier == "strong" else 0.0
        st.reserve_slot, st.reserve_left, st.strong_left = slot, forecast, strong
        report.reserve.append((slot, forecast, strong))
        return
    used = min(1.0, st.reserve_left)
    used_strong = 0.0
    if outcome.served_tier == "strong" and st.tier == "strong":
        used_strong = min(1.0, st.strong_left)
    if used or used_strong:
        st.reserve_left -= used
        st.strong_left -= used_strong
        report.consume.append((st.reserve_slot, used, used_strong))
