"""Share-cap admission control: refuse NEW escalations, never cut one off.

The seed's literal rule ("at the cap all escalation routing is suppressed",
report §4.3, `share_cap_mode: suppress`) rations: a share hovering at its cap
serves an escalated session strong, base, strong, ... and every switch is a
cold re-read of the whole context on the other model, so the rescue never
finishes. `share_cap_mode: admit` (the default: docs/escalation.md "Caps" has
the measurements side by side, and what admit trades) instead keeps a
session the engine escalated strong until the de-escalation rule (or a
client reset) ends it, and holds the share at the cap by refusing
new escalations whose admission would push the *projected* share over it:

    projected = (strong served + strong outstanding + 1 + r)
              / (requests so far + 1 + max(outstanding, strong outstanding + r))

over the cap's window: the share once every session open now has finished,
if no new session arrived. `strong outstanding` is the forecast remaining
turns of the sessions already escalated, `outstanding` those of all open
sessions (their reservations, below), 1 is this request and `r` the
candidate's own forecast remaining turns (already part of `outstanding`:
admitting it moves them from base to strong). Sessions that arrive later add
traffic and ask for admission themselves.

Forecast: a session at its turn `k` is expected to run `max(T - k, T / 2)`
more turns, with `T` the router's mean session length over the window
(requests / sessions started; a 10-turn prior until 20 sessions are seen, so
sessions still open cannot make it look short). Agent session lengths are
heavy-tailed: a session that already outlived the mean is not about to end,
hence the floor of half the mean.

Reservations: a session reserves its forecast remaining turns in a 5-minute
slot counter (`esc:admit:{router}:s{slot}:o`), an escalated session also as
strong turns (`:so`); each later turn consumes one from the same slot (a
decrement of `:o`, a strong serve also of `:so`), and a tier transition
(escalation, de-escalation, reset) releases what is left and reserves anew for
the new tier. Each slot keeps only its net (reserved minus used): the sum of
the nets is the sum of the reservations minus the sum of the uses, so two keys
a slot tell what four did. `outstanding` is that net over the current and the
previous slot, so the reservation of a session
that simply stops (most do: agents do not de-escalate, their tier state
expires) lapses within 5-10 minutes instead of accumulating; a session still
going when its slot lapses reserves its forecast again in the current slot.
All counters are `incr`s (they commute), written with the share counters in
the commit's one round trip.

Everything here is pure except the key names' clock; the state store sees
only the keys listed by `admission_keys` and the increments of `admission_incrs`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from tiergate.routing.caps import ShareBasis, ShareCounters, counter_value, day_stamps
from tiergate.state.base import Incr

#: Reservation slot length: a reservation lives one to two slots.
SLOT_SECONDS = 300.0
#: Slots read: the current one and the previous one.
SLOTS_READ = 2
#: Counter fields per slot: turns and strong turns reserved, net of those used.
SLOT_FIELDS = ("o", "so")
#: Mean session length assumed until `FORECAST_MIN_SESSIONS` sessions are seen.
PRIOR_SESSION_TURNS = 10.0
FORECAST_MIN_SESSIONS = 20
_DAY = 86400.0


@dataclass(frozen=True, slots=True)
class AdmissionCounters:
    """Sessions started over the share window; reservations net of use over the
    live slots (negative when a lapsed slot's reservation was used since)."""

    sessions: float = 0.0
    reserved_net: float = 0.0
    strong_reserved_net: float = 0.0

    @property
    def outstanding(self) -> float:
        """Forecast turns still to come from the sessions open now."""
        return max(0.0, self.reserved_net)

    @property
    def strong_outstanding(self) -> float:
        """Forecast strong turns still to come from sessions already escalated."""
        return max(0.0, self.strong_reserved_net)


def slot_of(now: float) -> int:
    return int(now // SLOT_SECONDS)


def slot_alive(slot: int, now: float) -> bool:
    """Is a reservation made in `slot` still read (current or previous slot)?"""
    return slot > slot_of(now) - SLOTS_READ


def _prefix(scope: str, workspace: bool) -> str:
    return f"esc:wadmit:{scope}" if workspace else f"esc:admit:{scope}"


def admission_keys(
    scope: str, now: float, window_days: int, workspace: bool = False
) -> tuple[str, ...]:
    """Day buckets of sessions started, then SLOT_FIELDS per live slot.

    The names change only when the day or the slot does, so they are built once
    per (scope, day, slot): every escalating request reads them (issue #29's
    planning budget)."""
    day = int(now // _DAY)
    return _admission_keys(_prefix(scope, workspace), day, slot_of(now), window_days)


@functools.lru_cache(maxsize=1024)
def _admission_keys(prefix: str, day: int, current: int, window_days: int) -> tuple[str, ...]:
    keys = [f"{prefix}:{d}:sess" for d in day_stamps(day * _DAY, window_days)]
    for slot in range(current, current - SLOTS_READ, -1):
        keys += [f"{prefix}:s{slot}:{f}" for f in SLOT_FIELDS]
    return tuple(keys)


def admission_from_values(values: Sequence[bytes | None], window_days: int) -> AdmissionCounters:
    """Decode the values read for `admission_keys` (same window). Most counters
    are absent (a slot's fields exist only once a session reserved in it)."""
    totals = [0.0] * (1 + len(SLOT_FIELDS))
    n = len(SLOT_FIELDS)
    for i, raw in enumerate(values):
        if raw is not None:
            totals[0 if i < window_days else 1 + (i - window_days) % n] += counter_value(raw)
    return AdmissionCounters(*totals)


# ---- forecast and decision (pure) ------------------------------------------------


def mean_session_turns(requests: float, sessions: float) -> float:
    """The router's mean session length over the window (with a prior early on)."""
    if sessions <= 0:
        return PRIOR_SESSION_TURNS
    observed = requests / sessions
    if sessions < FORECAST_MIN_SESSIONS:
        return max(observed, PRIOR_SESSION_TURNS)
    return observed


def remaining_turns(mean_turns: float, turns_taken: int) -> float:
    """Expected turns after this one, for a session at its turn `turns_taken`."""
    return max(mean_turns - turns_taken, mean_turns / 2.0, 0.0)


def projected_share(
    share: ShareCounters, adm: AdmissionCounters, new_turns: float, basis: ShareBasis
) -> float | None:
    """The share once the open sessions have finished, with `new_turns` more strong
    turns (this request and, for an escalation, its forecast remaining turns).

    On the spend basis, future turns are priced at the window's mean cost of a
    strong and of a base request (the request basis applies while nothing is
    priced).
    """
    strong = adm.strong_outstanding + new_turns
    total = 1.0 + max(adm.outstanding, strong - 1.0)
    base_requests = share.requests - share.strong_requests
    if basis == "spend" and share.spend > 0 and share.strong_requests > 0 and base_requests > 0:
        per_strong = share.strong_spend / share.strong_requests
        per_base = (share.spend - share.strong_spend) / base_requests
        future_strong = strong * per_strong
        future = future_strong + (total - strong) * per_base
        return (share.strong_spend + future_strong) / (share.spend + future)
    requests = share.requests + total
    return (share.strong_requests + strong) / requests if requests > 0 else None


def admission_refused(
    share: ShareCounters,
    adm: AdmissionCounters,
    cap_percent: float,
    basis: ShareBasis,
    warmup_requests: int,
    new_turns: float,
) -> bool:
    """Would admitting `new_turns` more strong turns push the projected share over
    the cap? Same edges as `caps.share_exceeded`: a cap of 0 refuses everything,
    below `warmup_requests` requests nothing is refused, the comparison is
    strictly greater."""
    if cap_percent <= 0:
        return True
    if share.requests < warmup_requests:
        return False
    projected = projected_share(share, adm, new_turns, basis)
    return projected is not None and projected * 100.0 > cap_percent


# ---- writes -------------------------------------------------------------------------


def admission_incrs(
    router: str,
    workspace: str | None,
    now: float,
    window_days: int,
    new_session: bool,
    reserve: Sequence[tuple[int, float, float]],
    consume: Sequence[tuple[int, float, float]],
) -> list[Incr]:
    """Increments for one committed turn: a session started, reservations made
    and consumed (slot, turns, strong turns), for the router and the workspace.
    A release and a new reservation in one slot (a transition) net to one write."""
    scopes = [_prefix(router, False)]
    if workspace is not None:
        scopes.append(_prefix(workspace, True))
    day = day_stamps(now, 1)[0]
    day_ttl = (window_days + 1) * _DAY
    slot_ttl = (SLOTS_READ + 1) * SLOT_SECONDS
    all_f, strong_f = SLOT_FIELDS
    net: dict[tuple[int, str], float] = {}
    for sign, moves in ((1.0, reserve), (-1.0, consume)):
        for slot, turns, strong in moves:
            if turns > 0:
                net[slot, all_f] = net.get((slot, all_f), 0.0) + sign * turns
            if strong > 0:
                net[slot, strong_f] = net.get((slot, strong_f), 0.0) + sign * strong
    out: list[Incr] = []
    for p in scopes:
        if new_session:
            out.append(Incr(f"{p}:{day}:sess", 1.0, day_ttl))
        out += [Incr(f"{p}:s{slot}:{f}", v, slot_ttl) for (slot, f), v in net.items() if v]
    return out
