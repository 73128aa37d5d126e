"""eval/value_ceiling.py's knowledge-free column: the first k turns of every session."""

from __future__ import annotations

from eval.value_ceiling import strong_opening
from hypothesis import given
from hypothesis import strategies as st

from tiergate.replay.counterfactual import SessionValue, score

_sessions = st.lists(
    st.tuples(st.integers(1, 60), st.booleans(), st.floats(0, 1)), min_size=1, max_size=80
)


def _values(raw: list[tuple[int, bool, float]]) -> list[SessionValue]:
    return [SessionValue(f"s{i}", f"t{i}", float(r), p, n) for i, (n, r, p) in enumerate(raw)]


@given(_sessions, st.floats(0.0, 1.0))
def test_the_opening_spends_the_share_evenly_from_turn_one(
    raw: list[tuple[int, bool, float]], share: float
) -> None:
    sessions = _values(raw)
    out = strong_opening(sessions, share)
    total = sum(v.turns for v in sessions)
    assert sum(v.strong for v in out) <= share * total + 1e-9
    ks = {v.strong for v in out if v.strong < v.turns}  # sessions the opening did not cover
    assert max(ks, default=0) - min(ks, default=0) <= 1  # k or k + 1 turns each
    for v in out:
        assert v.strong <= v.turns
        assert v.first_strong == (1 if v.strong else None)


def test_on_sessions_of_one_length_the_opening_buys_what_random_does() -> None:
    """With every session as long, per-session turns are per-session value: no
    gain over random (the gain comes from short sessions only)."""
    sessions = [SessionValue(f"s{i}", f"t{i}", 0.0, 0.5, 10) for i in range(100)]
    got = score(strong_opening(sessions, 0.2), resamples=0)
    assert abs(got["pgr"] - 0.2) < 1e-9


def test_short_sessions_lift_the_opening_above_random() -> None:
    sessions = [SessionValue(f"s{i}", f"t{i}", 0.0, 0.5, 2 if i % 2 else 38) for i in range(100)]
    got = score(strong_opening(sessions, 0.1), resamples=0)
    assert got["pgr"] > got["random"] + 0.2
