"""Outlier detection instead of one-strike cooldown (issue #27): the pure state
machine (routing/outlier.py) by property, and the distributor that applies it."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.api.masking import key_view
from tiergate.config_load import parse_config
from tiergate.core.upstream import Target
from tiergate.reload import rebuild_distributor
from tiergate.routing import outlier
from tiergate.routing.affinity import key_fingerprint
from tiergate.routing.distributor import Distributor
from tiergate.routing.outlier import Health, OutlierPolicy

MODEL = "m"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _distributor(keys: list[int], **policy: Any) -> tuple[Distributor, Clock]:
    """One model on len(keys) channels; channel i has keys[i] keys."""
    channels = [
        {
            "name": f"c{i}",
            "type": "openai",
            "keys": [f"k{i}-{j}" for j in range(n)],
            "models": {MODEL: {}},
        }
        for i, n in enumerate(keys)
    ]
    cfg = parse_config({"server": {"outlier": policy}, "channels": channels})
    clock = Clock()
    return Distributor.from_config(cfg, clock=clock), clock


def _fail(d: Distributor, ch: int, key: int, status: int = 502) -> None:
    t = Target(MODEL, d.channels[ch], key)
    d.report_failure(t, disable_key=False, retry_after=None, status=status)


def _usable(d: Distributor) -> int:
    now = d.clock()
    return sum(len(ch.usable_keys(now)) for ch in d.channels if ch.healthy(now))


# ---- the pure machine ------------------------------------------------------------------------


def test_five_failures_in_a_row_eject_and_four_do_not() -> None:
    p = OutlierPolicy()
    h = Health()
    for i in range(4):
        h = outlier.record_failure(p, h, float(i), allowed=True)
    assert not h.ejected
    h = outlier.record_success(p, h, 4.0)  # the run is broken
    for i in range(5):
        h = outlier.record_failure(p, h, 5.0 + i, allowed=True)
    assert h.ejected and h.ejected_until == 9.0 + p.base_ejection_seconds


def test_a_failure_rate_over_the_window_ejects() -> None:
    p = OutlierPolicy(consecutive_failures=0, failure_rate_min_requests=10)
    h = Health()
    for i in range(10):  # fail, succeed, fail, ...: never two in a row, 50 %
        now = 1.0 + i * 0.1
        ok = i % 2 == 1
        if ok:
            h = outlier.record_success(p, h, now)
        else:
            h = outlier.record_failure(p, h, now, allowed=True)
    assert not h.ejected  # the 10th outcome was a success; a failure decides
    h = outlier.record_failure(p, h, 2.1, allowed=True)
    assert h.ejected
    # the same rate spread over more than the window never ejects
    h = Health()
    for i in range(40):
        now = i * 3.0  # ~3 outcomes per 10 s window: below the minimum volume
        h = (outlier.record_success if i % 2 else _failure)(p, h, now)
    assert not h.ejected


def _failure(p: OutlierPolicy, h: Health, now: float) -> Health:
    return outlier.record_failure(p, h, now, allowed=True)


def test_a_failed_trial_ejects_longer_up_to_the_cap_and_a_success_ends_it() -> None:
    p = OutlierPolicy(consecutive_failures=1, base_ejection_seconds=10, max_ejection_seconds=35)
    now = 0.0
    h = outlier.record_failure(p, Health(), now, allowed=True)
    lengths = []
    for _ in range(5):
        lengths.append(h.ejected_until - now)
        assert not outlier.trial_due(h, h.ejected_until - 0.01)
        now = h.ejected_until
        assert outlier.trial_due(h, now)
        h = outlier.claim_trial(p, h, now)
        assert not outlier.trial_due(h, now)  # one trial at a time
        h = outlier.record_failure(p, h, now, allowed=True)
    assert lengths == [10, 20, 30, 35, 35]
    now = h.ejected_until
    h = outlier.record_success(p, outlier.claim_trial(p, h, now), now)
    assert not h.ejected and outlier.admits(h)


def test_a_failure_that_was_in_flight_does_not_extend_an_ejection() -> None:
    p = OutlierPolicy(consecutive_failures=1)
    h = outlier.record_failure(p, Health(), 0.0, allowed=True)
    later = outlier.record_failure(p, h, 1.0, allowed=True)
    assert later.ejected_until == h.ejected_until and later.ejections == 1


@given(
    total=st.integers(1, 20),
    ejected=st.integers(0, 20),
    usable=st.integers(0, 20),
    percent=st.floats(0, 99.99),
)
def test_may_eject_never_the_last_key_below_100_percent(
    total: int, ejected: int, usable: int, percent: float
) -> None:
    p = OutlierPolicy(max_ejection_percent=percent)
    if outlier.may_eject(p, total, ejected, usable):
        assert usable >= 1 and ejected + 1 <= total * percent / 100 + 1e-6


outcome = st.tuples(st.booleans(), st.floats(0, 20))  # (failed, seconds later)


@settings(max_examples=200)
@given(st.lists(outcome, max_size=60), st.integers(1, 10), st.floats(0, 60))
def test_the_machine_ejects_only_on_evidence(
    events: list[tuple[bool, float]], consecutive: int, base: float
) -> None:
    """An ejection always follows a failure that crossed a threshold; a success
    always ends one; ejection length never exceeds the cap."""
    p = OutlierPolicy(consecutive_failures=consecutive, base_ejection_seconds=base)
    h, now = Health(), 0.0
    for failed, dt in events:
        now += dt
        if outlier.trial_due(h, now):
            h = outlier.claim_trial(p, h, now)
        before = h
        if failed:
            h = outlier.record_failure(p, h, now, allowed=True)
            if h.ejected and not before.ejected:
                counted = outlier._count(p, before, now, failed=True)
                assert outlier.over_threshold(p, counted)
        else:
            h = outlier.record_success(p, h, now)
            assert not h.ejected and h.consecutive == 0
        if h.ejected:
            assert h.ejected_until - now <= p.max_ejection_seconds + 1e-9
            assert h.ejections >= 1


health_values = st.builds(
    Health,
    ejected=st.booleans(),
    consecutive=st.integers(0, 50),
    window_start=st.floats(0, 100),
    window_requests=st.integers(0, 50),
    window_failures=st.integers(0, 50),
    ejections=st.integers(0, 9),
    ejected_until=st.floats(0, 500),
    trial_until=st.floats(0, 500),
    restored_at=st.floats(0, 500),
)


@given(health_values, st.floats(0, 200), st.booleans())
def test_counting_an_outcome_is_replace_on_the_counted_fields_only(
    h: Health, now: float, failed: bool
) -> None:
    """`_count` builds its result field by field (it runs on every request); it must
    equal the `dataclasses.replace` form, so a field added to Health and not
    listed there cannot be silently reset to its default."""
    p = OutlierPolicy()
    fresh = now - h.window_start >= p.window_seconds or now < h.window_start
    start = dataclasses.replace(h, window_start=now, window_requests=0, window_failures=0)
    base = start if fresh else h
    expected = dataclasses.replace(
        base,
        window_requests=base.window_requests + 1,
        window_failures=base.window_failures + int(failed),
        consecutive=h.consecutive + 1 if failed else 0,
    )
    assert outlier._count(p, h, now, failed) == expected
    assert {f.name for f in dataclasses.fields(Health)} == {
        "ejected", "consecutive", "window_start", "window_requests", "window_failures",
        "ejections", "ejected_until", "trial_until", "restored_at",
    }  # fmt: skip


# ---- the distributor -------------------------------------------------------------------------


failure_events = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 5), st.booleans(), st.floats(0, 8)),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), failure_events, st.floats(0, 99))
def test_no_failure_sequence_takes_a_model_out_below_100_percent(
    keys: list[int], events: list[tuple[int, int, bool, float]], percent: float
) -> None:
    """Whatever fails and in whatever order, the model keeps a usable key, and no
    more keys are ejected than max_ejection_percent allows."""
    d, clock = _distributor(keys, consecutive_failures=1, max_ejection_percent=percent)
    total = sum(keys)
    for ch, key, failed, dt in events:
        clock.now += dt
        ch %= len(keys)
        key %= keys[ch]
        for t in d.attempts([MODEL]):  # trials are claimed as real traffic would
            if failed:
                _fail(d, t.channel.index, t.key_index)
            else:
                d.report_success(t)
            break
        if failed:
            _fail(d, ch, key)
        assert _usable(d) >= 1 and d.is_live(MODEL)
        ejected = sum(k.outlier.ejected for c in d.channels for k in c.keys)
        assert ejected <= max(int(total * percent / 100 + 1e-9), 0)


def test_a_blip_on_a_single_key_channel_never_ejects_it() -> None:
    d, _ = _distributor([1])
    for _ in range(50):
        _fail(d, 0, 0)
    assert d.is_live(MODEL) and not d.channels[0].keys[0].outlier.ejected
    assert [t.key_index for t in d.attempts([MODEL])] == [0]


def test_an_ejected_key_gets_one_trial_first_and_a_success_restores_it() -> None:
    d, clock = _distributor([4], base_ejection_seconds=5)
    for _ in range(5):
        _fail(d, 0, 2)
    ch = d.channels[0]
    assert ch.keys[2].outlier.ejected and not ch.key_usable(2, clock.now)
    assert ("c0", 2, "cooling_down") in d.key_health()
    assert 2 not in [t.key_index for t in d.attempts([MODEL])]  # ejected for 5 s
    clock.now += 5
    first = next(iter(d.attempts([MODEL])))
    assert first.key_index == 2  # the trial, before the healthy keys
    assert 2 not in [t.key_index for t in d.attempts([MODEL])]  # no second trial meanwhile
    d.report_success(first)
    assert ch.key_usable(2, clock.now) and ("c0", 2, "ok") in d.key_health()


def test_the_admin_view_shows_an_ejected_key_as_out_until_its_trial_succeeds() -> None:
    """The admin API's key view said "ok" for an ejected key once its ejection time
    was over and before its trial: it now reads the same rule as key_health."""
    d, clock = _distributor([4], base_ejection_seconds=5)
    for _ in range(5):
        _fail(d, 0, 2)
    ch = d.channels[0]
    view = key_view(ch, 2, "k0-2", "k0-2", [], clock.now)
    assert (view["status"], view["ejected"], view["cooldown_remaining_seconds"]) == (
        "cooling_down",
        True,
        5.0,
    )
    clock.now += 6  # ejection over, no trial yet: still out of ordinary rotation
    view = key_view(ch, 2, "k0-2", "k0-2", [], clock.now)
    assert (view["status"], view["ejected"]) == ("cooling_down", True)
    trial = next(iter(d.attempts([MODEL])))
    d.report_success(trial)
    view = key_view(ch, 2, "k0-2", "k0-2", [], clock.now)
    assert (view["status"], view["ejected"], view["cooldown_remaining_seconds"]) == ("ok", False, 0)


def test_a_failed_trial_ejects_for_twice_as_long() -> None:
    d, clock = _distributor([4], base_ejection_seconds=5)
    for _ in range(5):
        _fail(d, 0, 1)
    clock.now += 5
    trial = next(iter(d.attempts([MODEL])))
    assert trial.key_index == 1
    _fail(d, 0, 1)
    k = d.channels[0].keys[1]
    assert k.outlier.ejected and k.outlier.ejected_until == clock.now + 10


def test_a_429_with_retry_after_keeps_its_exact_cooldown() -> None:
    d, clock = _distributor([2])
    ch = d.channels[0]
    d.report_failure(Target(MODEL, ch, 0), disable_key=False, retry_after=7, status=429)
    assert ch.keys[0].cooldown_until == clock.now + 7 and ch.cooldown_until == 0
    assert not ch.keys[0].outlier.ejected  # a rate limit is no outlier signal
    d.report_failure(Target(MODEL, ch, 1), disable_key=False, retry_after=3, status=429)
    assert ch.cooldown_until == clock.now + 3  # every key cooling: the channel too
    assert d.unavailable_reason([MODEL]) == (429, 3)


def test_reload_keeps_an_ejection_and_an_operator_re_enable_clears_it() -> None:
    d, clock = _distributor([3])
    for _ in range(5):
        _fail(d, 0, 1)
    channel = {"name": "c0", "type": "openai", "keys": ["k0-1", "new"], "models": {MODEL: {}}}
    cfg = parse_config({"channels": [channel]})
    new = rebuild_distributor(cfg, d)
    assert new.channels[0].keys[0].outlier.ejected  # "k0-1", now at index 0
    assert not new.channels[0].key_usable(0, clock.now)
    cleared = rebuild_distributor(cfg, new, {("c0", key_fingerprint("k0-1"))})
    assert cleared.channels[0].key_usable(0, clock.now)
