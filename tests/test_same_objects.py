"""identical_prefix: the shared prefix by identity, whatever the lists hold."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tiergate.core.same_objects import identical_prefix

# Equal but distinct objects: each pair must count as different.
LONG = ["x"] * 300
POOL: list[Any] = [1, 1.0, True, {"a": 1}, {"a": 1}, [1], [1], "".join(LONG), "".join(LONG)]


def naive(old: list[Any], new: list[Any]) -> int:
    count = 0
    for a, b in zip(old, new, strict=False):
        if a is not b:
            break
        count += 1
    return count


@given(
    st.lists(st.integers(0, len(POOL) - 1), max_size=40),
    st.lists(st.integers(0, len(POOL) - 1), max_size=40),
    st.integers(0, 40),
)
def test_matches_a_plain_loop(old_picks: list[int], new_picks: list[int], shared: int) -> None:
    """Lists that share a random prefix of picks, then anything: the three paths
    (all shared, all but the last, a difference earlier) all agree with a loop."""
    old = [POOL[i] for i in old_picks]
    new = [*old[:shared], *(POOL[i] for i in new_picks)]
    assert identical_prefix(old, new) == naive(old, new)
    assert identical_prefix(new, old) == naive(new, old)


def test_equal_is_not_identical() -> None:
    a, b = {"role": "user", "content": "hi"}, {"role": "user", "content": "hi"}
    assert a == b
    assert identical_prefix([a, a], [a, b]) == 1
    assert identical_prefix([1, True], [1, 1]) == 1  # True == 1, and encodes as "true"
    assert identical_prefix([1.0], [1]) == 0


def test_the_usual_shapes() -> None:
    history = [{"i": i} for i in range(400)]
    grown = [*history, {"i": 400}, {"i": 401}]
    edited = [*history[:-1], {"i": 399}]
    early = [*history[:10], {"i": 10}, *history[11:]]
    assert identical_prefix(history, grown) == 400
    assert identical_prefix(grown, history) == 400
    assert identical_prefix(history, edited) == 399
    assert identical_prefix(history, early) == 10
    assert identical_prefix([], grown) == identical_prefix(grown, []) == 0
