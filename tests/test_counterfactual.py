"""Counterfactual escalation value: the credit, PGR and the baseline ladder (pure).

DESIGN.md "Counterfactual escalation value": properties every correct scorer
must have, over random groups of sessions (hypothesis), plus hand-computed
cases.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.replay.counterfactual import (
    Arrays,
    SessionValue,
    credit,
    cut_off,
    length_rule_pgr,
    oracle_pgr,
    pgr,
    random_pgr,
    score,
    strong_share,
    waste,
)


@st.composite
def groups(draw: st.DrawFn, min_size: int = 1) -> list[SessionValue]:
    size = draw(st.integers(min_size, 12))
    out = []
    for i in range(size):
        n = draw(st.integers(1, 30))
        s = draw(st.integers(0, n))
        first = None if s == 0 else draw(st.integers(1, n - s + 1))
        out.append(
            SessionValue(
                session_id=f"s{i}",
                instance=f"t{draw(st.integers(0, 4))}",
                resolved=float(draw(st.booleans())),
                odds=draw(st.sampled_from([0.0, 0.2, 0.5, 0.8, 1.0])),
                turns=n,
                strong=s,
                first_strong=first,
            )
        )
    return out


def rescuable(values: list[SessionValue]) -> bool:
    return any((1 - v.resolved) * v.odds > 0 for v in values)


def with_strong(values: list[SessionValue], strong: list[int]) -> list[SessionValue]:
    return [
        SessionValue(v.session_id, v.instance, v.resolved, v.odds, v.turns, s, 1 if s else None)
        for v, s in zip(values, strong, strict=True)
    ]


def ones(values: list[SessionValue]) -> np.ndarray:
    return np.ones(len(values))


@given(st.floats(0, 1), st.floats(0, 1), st.integers(1, 50))
def test_credit_lies_between_the_outcome_and_a_full_rescue(r: float, p: float, turns: int) -> None:
    for s in range(turns + 1):
        q = credit(r, p, s, turns)
        assert r - 1e-12 <= q <= r + (1 - r) * p + 1e-12


def test_credit_is_the_share_of_a_rescue_served_strong() -> None:
    assert credit(0.0, 0.8, 5, 10) == pytest.approx(0.4)
    assert credit(1.0, 0.8, 5, 10) == 1.0
    assert credit(0.0, 0.8, 0, 10) == 0.0


@settings(max_examples=60, deadline=None)
@given(groups())
def test_all_strong_scores_one_and_none_scores_zero(values: list[SessionValue]) -> None:
    everything = Arrays.of(with_strong(values, [v.turns for v in values]))
    nothing = Arrays.of(with_strong(values, [0] * len(values)))
    if rescuable(values):
        assert pgr(everything, ones(values)) == pytest.approx(1.0)
        assert pgr(nothing, ones(values)) == pytest.approx(0.0)
        assert strong_share(everything, ones(values)) == pytest.approx(1.0)
    else:
        assert pgr(everything, ones(values)) is None


@settings(max_examples=40, deadline=None)
@given(groups(), st.floats(0.05, 0.95), st.integers(0, 2**16))
def test_random_escalation_scores_its_share_in_expectation(
    values: list[SessionValue], share: float, seed: int
) -> None:
    """Escalating each session at turn 1 with probability `share`: mean PGR = share."""
    if not rescuable(values):
        return
    rng = np.random.default_rng(seed)
    draws = 4000
    picks = rng.random((draws, len(values))) < share
    a = Arrays.of(values)
    gains = (picks * a.gain).sum(axis=1) / a.gain.sum()
    # the Monte Carlo mean of the realised PGR matches the exact expected value
    assert gains.mean() == pytest.approx(random_pgr(share), abs=0.05)
    assert random_pgr(share) == share


@settings(max_examples=60, deadline=None)
@given(groups())
def test_the_oracle_beats_any_policy_at_its_share(values: list[SessionValue]) -> None:
    a = Arrays.of(values)
    w = ones(values)
    value = pgr(a, w)
    if value is None:
        return
    share = strong_share(a, w)
    oracle = oracle_pgr(a, w, share)
    length = length_rule_pgr(a, w, share)
    assert oracle is not None and length is not None
    assert value <= oracle + 1e-9
    assert length <= oracle + 1e-9
    assert random_pgr(share) <= oracle + 1e-9


@settings(max_examples=40, deadline=None)
@given(groups())
def test_baselines_run_from_zero_to_one(values: list[SessionValue]) -> None:
    a = Arrays.of(values)
    w = ones(values)
    if not rescuable(values):
        assert oracle_pgr(a, w, 0.5) is None
        return
    for f in (oracle_pgr, length_rule_pgr):
        assert f(a, w, 0.0) == pytest.approx(0.0)
        assert f(a, w, 1.0) == pytest.approx(1.0)


def test_the_length_rule_at_a_hand_computed_share() -> None:
    """Two failing sessions of 2 and 4 turns, p = 1: at N = 2 it serves 1 + 3 of 6 turns."""
    values = [
        SessionValue("a", "a", 0.0, 1.0, 2),
        SessionValue("b", "b", 0.0, 1.0, 4),
    ]
    a = Arrays.of(values)
    # N = 2: s = (1, 3), share 4/6, value (1/2 + 3/4) / 2
    assert length_rule_pgr(a, ones(values), 4 / 6) == pytest.approx((0.5 + 0.75) / 2)
    # the oracle spends 4 turns on the short session first (2 turns, whole), then 2 of 4
    assert oracle_pgr(a, ones(values), 4 / 6) == pytest.approx((1.0 + 0.5) / 2)


def test_waste_and_cut_off_count_sessions() -> None:
    values = [
        SessionValue("won-esc", "t1", 1.0, 0.5, 10, strong=10, first_strong=1),
        SessionValue("won", "t2", 1.0, 0.5, 10),
        SessionValue("lost-cut", "t3", 0.0, 0.5, 10, strong=3, first_strong=4),
        SessionValue("lost-full", "t4", 0.0, 0.5, 10, strong=7, first_strong=4),
    ]
    a = Arrays.of(values)
    assert waste(a, ones(values)) == pytest.approx(0.5)
    assert cut_off(a, ones(values)) == pytest.approx(1 / 3)
    assert [v.cut_off for v in values] == [False, False, True, False]


def test_score_reports_intervals_that_cover_the_estimate() -> None:
    rng = np.random.default_rng(3)
    values = []
    for i in range(80):
        n = int(rng.integers(3, 30))
        s = int(rng.integers(0, n + 1)) if rng.random() < 0.3 else 0
        values.append(
            SessionValue(
                f"s{i}",
                f"t{i % 25}",
                float(rng.random() < 0.4),
                float(rng.choice([0.0, 0.4, 1.0])),
                n,
                s,
                (n - s + 1) if s else None,
            )
        )
    doc = score(values, resamples=200)
    assert doc["instances"] == 25 and doc["sessions"] == 80
    for key in ("pgr", "strong_share", "oracle", "length_rule"):
        lo, hi = doc["interval"][key]
        assert lo <= doc[key] <= hi
    assert doc["random"] == pytest.approx(doc["strong_share"])
    assert doc["pgr_minus_random"] == pytest.approx(doc["pgr"] - doc["random"])
    assert doc["cut_off"] == 0.0  # every escalation above ran to the end


def test_no_rescuable_session_gives_no_pgr() -> None:
    doc = score([SessionValue("a", "a", 1.0, 1.0, 5, 5, 1)], resamples=50)
    assert doc["pgr"] is None and doc["oracle"] is None and doc["waste"] == 1.0
