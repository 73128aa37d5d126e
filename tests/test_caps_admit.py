"""share_cap_mode: admit (routing.admission) against the literal suppress mode.

Property: many interleaved sessions on one store, share cap 20 % binding from
the first requests. In admit mode no session the engine escalated is ever
served base while its tier stays strong (no rescue cut off partway), and the
share stays bounded; in suppress mode a strong session over the cap is served
base, the seed's literal rule.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from escalation_support import T0, SessionDriver, make_router
from tiergate.config import UNMAPPED_CACHE_WINDOW
from tiergate.routing.admission import (
    SLOT_FIELDS,
    SLOT_SECONDS,
    AdmissionCounters,
    admission_from_values,
    admission_incrs,
    admission_keys,
    admission_refused,
    mean_session_turns,
    projected_share,
    remaining_turns,
)
from tiergate.routing.caps import ShareCounters
from tiergate.state.memory import MemoryStore

# (session index, difficulty high?) per request
_traffic = st.lists(st.tuples(st.integers(0, 7), st.booleans()), min_size=40, max_size=160)


async def _play(
    mode: str, traffic: list[tuple[int, bool]], gaps: dict[int, list[float]] | None = None
) -> list[SessionDriver]:
    """Play `traffic`, 7 s apart; `gaps` gets each session's idle time before
    each of its turns (a session left alone past the cache window goes cold)."""
    store = MemoryStore(clock=lambda: T0)
    router = make_router(share_cap_percent=20, share_warmup_requests=5, share_cap_mode=mode)
    drivers = [SessionDriver(store, router, scope=f"default:s{i}") for i in range(8)]
    last: dict[int, float] = {}
    now = T0
    for i, high in traffic:
        now += 7.0
        d = drivers[i]
        d.now = now
        if gaps is not None:
            gaps.setdefault(i, []).append(now - last.get(i, now))
        await d.turn(delta=0.9 if high else 0.2, idle=0.0)
        now = d.now
        last[i] = now
    return drivers


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_traffic)
def test_admit_never_cuts_off_an_escalated_session(traffic: list[tuple[int, bool]]) -> None:
    gaps: dict[int, list[float]] = {}
    drivers = asyncio.run(_play("admit", traffic, gaps))
    for i, d in enumerate(drivers):
        strong_run = False
        for t, gap in zip(d.history, gaps.get(i, []), strict=True):
            dec = t.decision
            if strong_run and dec.session_tier == "strong":
                assert dec.serve_tier == "strong", dec.header  # never base mid-rescue
            if dec.reason == "de_escalated":  # only once the cache went cold (seed 4.4)
                assert gap > UNMAPPED_CACHE_WINDOW, gap
            if dec.reason in ("de_escalated", "reset"):
                strong_run = False
            if dec.session_tier == "strong" and dec.serve_tier == "strong":
                strong_run = True


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_traffic)
def test_admit_share_stays_bounded(traffic: list[tuple[int, bool]]) -> None:
    """Admitted runs are bounded by the sessions' own lengths: the strong share
    never exceeds what was admitted below the cap plus the runs it committed."""
    drivers = asyncio.run(_play("admit", traffic))
    turns = [t for d in drivers for t in d.history]
    strong = sum(t.decision.serve_tier == "strong" for t in turns)
    admitted = sum(t.decision.reason in ("difficulty", "strikes") for t in turns)
    # every escalation is admitted below the cap, so strong turns beyond the cap
    # come only from runs already admitted: at most one full session each
    assert strong <= 0.2 * len(turns) + admitted * max(len(d.history) for d in drivers) + 5


def test_suppress_keeps_the_literal_rule() -> None:
    """Over the cap a strong session is served base (denied:share_cap); admit serves it."""

    async def run(mode: str) -> list[str | None]:
        store = MemoryStore(clock=lambda: T0)
        router = make_router(share_cap_percent=20, share_warmup_requests=5, share_cap_mode=mode)
        hard = SessionDriver(store, router, scope="default:hard")
        for _ in range(3):
            await hard.turn(delta=0.9)
        assert hard.history[-1].decision.session_tier == "strong"
        easy = SessionDriver(store, router, scope="default:easy", now=hard.now)
        for _ in range(3):
            await easy.turn(delta=0.2)  # 6 requests, 2 strong: over 20 %
        hard.now = easy.now
        return [(await hard.turn(delta=0.9)).decision.header for _ in range(2)]

    assert asyncio.run(run("suppress")) == ["base; reason=denied:share_cap"] * 2
    assert asyncio.run(run("admit")) == ["strong", "strong"]


def test_admit_refuses_a_new_escalation_at_the_cap() -> None:
    """A second session asking at the cap is refused; the first keeps its run."""

    async def run() -> tuple[str | None, str | None]:
        store = MemoryStore(clock=lambda: T0)
        router = make_router(share_cap_percent=20, share_warmup_requests=5, share_cap_mode="admit")
        a = SessionDriver(store, router, scope="default:a")
        for _ in range(3):
            await a.turn(delta=0.9)
        easy = SessionDriver(store, router, scope="default:easy", now=a.now)
        for _ in range(4):
            await easy.turn(delta=0.2)
        b = SessionDriver(store, router, scope="default:b", now=easy.now)
        for _ in range(3):
            await b.turn(delta=0.9)
        a.now = b.now
        return b.history[-1].decision.header, (await a.turn(delta=0.9)).decision.header

    b_header, a_header = asyncio.run(run())
    assert b_header == "base; reason=denied:share_cap"
    assert a_header == "strong"


def test_projection_and_forecast() -> None:
    share = ShareCounters(requests=100, strong_requests=18)
    none = AdmissionCounters()
    assert projected_share(share, none, 1.0, "requests") == 19 / 101
    # two escalated sessions expect 6 more strong turns among 20 forecast turns
    adm = AdmissionCounters(sessions=10, reserved_net=20, strong_reserved_net=6)
    p = projected_share(share, adm, 1.0 + 4.0, "requests")
    assert p == (18 + 6 + 5) / (100 + 1 + 20)
    assert admission_refused(share, adm, 20, "requests", 20, 5.0)
    assert not admission_refused(share, none, 20, "requests", 20, 1.0)
    assert not admission_refused(ShareCounters(10, 9), adm, 20, "requests", 20, 5.0)  # warm-up
    assert admission_refused(share, none, 0, "requests", 20, 1.0)  # a cap of 0
    assert mean_session_turns(100, 0) == 10.0  # the prior
    assert mean_session_turns(400, 20) == 20.0
    assert remaining_turns(10.0, 3) == 7.0
    assert remaining_turns(10.0, 9) == 5.0  # at least half the mean


_counter = st.one_of(st.none(), st.integers(-10_000, 10_000).map(lambda n: str(n / 4).encode()))


@given(st.integers(1, 7), st.data())
def test_admission_decode_is_the_plain_fold(days: int, data: st.DataObject) -> None:
    """The decode skips absent counters for speed; it must equal summing each
    field over the live slots, and the sessions over the days."""
    width = days + 2 * len(SLOT_FIELDS)
    values = data.draw(st.lists(_counter, min_size=width, max_size=width))
    n = len(SLOT_FIELDS)
    num = [float(v) if v is not None else 0.0 for v in values]
    slots = num[days:]
    want = AdmissionCounters(sum(num[:days]), *(sum(slots[i::n]) for i in range(n)))
    assert admission_from_values(values, days) == want


@given(st.floats(0, 4e9), st.integers(1, 7), st.booleans())
def test_admission_keys_follow_the_day_and_the_slot(now: float, days: int, ws: bool) -> None:
    """The key names are cached per (scope, day, slot): a later time in the same
    slot reads the same keys, the next slot shifts them, and every increment the
    commit writes now is among the keys read now."""
    keys = admission_keys("coding", now, days, workspace=ws)
    assert len(keys) == days + 2 * len(SLOT_FIELDS) and len(set(keys)) == len(keys)
    start = now - now % SLOT_SECONDS
    assert admission_keys("coding", start, days, workspace=ws) == keys
    later = admission_keys("coding", start + SLOT_SECONDS, days, workspace=ws)
    assert later[days + len(SLOT_FIELDS) :] == keys[days : days + len(SLOT_FIELDS)]
    slot = int(now // SLOT_SECONDS)
    written = admission_incrs("coding", "coding", now, days, True, [(slot, 3.0, 1.0)], [])
    prefix = "esc:wadmit:" if ws else "esc:admit:"
    assert {i.key for i in written if i.key.startswith(prefix)} <= set(keys)


# (slot offset from now's, turns, strong turns): reservations, then uses
_moves = st.lists(
    st.tuples(st.integers(-3, 0), st.integers(0, 40).map(lambda n: n / 4), st.integers(0, 40)),
    max_size=12,
)


@given(_moves, _moves, st.booleans())
def test_net_slot_counters_read_what_reserved_minus_used_would(
    reserve: list[tuple[int, float, int]], consume: list[tuple[int, float, int]], ws: bool
) -> None:
    """Each slot keeps reserved minus used in one counter; read back through a
    real store, the outstanding turns equal the separate sums (over the live
    slots) the four counters per slot used to hold, clamped at zero."""
    now = T0 + 1234.5
    slot = int(now // SLOT_SECONDS)
    res = [(slot + d, t, float(min(s, 4))) for d, t, s in reserve]
    use = [(slot + d, t, float(min(s, 4))) for d, t, s in consume]

    async def run() -> AdmissionCounters:
        store = MemoryStore(clock=lambda: now)
        for i in range(0, max(len(res), len(use)), 3):  # several commits
            incrs = admission_incrs("r", "w", now, 2, False, res[i : i + 3], use[i : i + 3])
            await store.apply_batch([], incrs)
        keys = admission_keys("w" if ws else "r", now, 2, workspace=ws)
        return admission_from_values(await store.get_many(list(keys)), 2)

    got = asyncio.run(run())
    live = {slot, slot - 1}
    turns = sum(t for s, t, _ in res if s in live) - sum(t for s, t, _ in use if s in live)
    strong = sum(x for s, _, x in res if s in live) - sum(x for s, _, x in use if s in live)
    assert abs(got.outstanding - max(0.0, turns)) < 1e-9
    assert abs(got.strong_outstanding - max(0.0, strong)) < 1e-9
