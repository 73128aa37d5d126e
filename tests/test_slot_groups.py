"""core.slot_groups, the several-per-key slots of the per-conversation memos
(issue #30: two live sessions opening alike took each other's single slot, and
the older one's next turn redid its whole history)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.core.slot_groups import (
    CONTINUATION_SLACK,
    GAP_FACTOR,
    NEW,
    PER_KEY,
    SCORED_PER_KEY,
    SlotGroups,
)

LIMIT, MAX_SIZE, IDLE, SHIELD, MIN_SHIELD = 5, 60, 10.0, 4.0, 0.5


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass(eq=False)
class Value:
    """A slot's content: its length in elements, and what it shares with requests."""

    length: int
    shares: dict[int, int] = field(default_factory=dict)  # request id -> shared count


@dataclass
class Model:
    """The plain reading of SlotGroups: groups in least-recently-added order, each
    a list of (value, size, added, turn gap) most recent first."""

    groups: list[tuple[str, list[tuple[Value, int, float, float]]]] = field(default_factory=list)

    def group(self, key: str) -> list[tuple[Value, int, float, float]]:
        return next((g for k, g in self.groups if k == key), [])

    def remove(self, key: str, value: Value) -> None:
        for i, (k, g) in enumerate(self.groups):
            if k == key:
                g[:] = [h for h in g if h[0] is not value]
                if not g:
                    del self.groups[i]
                return

    def count(self) -> int:
        return sum(len(g) for _, g in self.groups)

    def size(self) -> int:
        return sum(h[1] for _, g in self.groups for h in g)

    def room(self, key: str, size: int, now: float) -> bool:
        """Whether a new conversation's slot fits once the slots used more than
        SHIELD (or IDLE) ago go, least recently used first, `key`'s group last."""
        order = [g for k, g in self.groups if k != key] + [self.group(key)]
        victims = [h for g in order for h in reversed(g)]
        count, total = self.count() + 1, self.size() + size
        for held in [None, *victims]:
            if held is not None:
                if shielded(held, now):
                    return False
                count, total = count - 1, total - held[1]
            if count <= LIMIT and total <= MAX_SIZE:
                return True
        return False


def shielded(held: tuple[Value, int, float, float], now: float) -> bool:
    """Used within IDLE and within a few of its conversation's turn gaps (the
    longest lately), at least MIN_SHIELD (a new one's) and at most SHIELD."""
    gap = held[3]
    shield = MIN_SHIELD if gap == NEW else min(SHIELD, max(MIN_SHIELD, GAP_FACTOR * gap))
    return held[2] >= max(now - IDLE, now - shield)


def _length(v: Value) -> int:
    return v.length


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "add", "continue", "best", "wait"]),
            st.sampled_from("ab"),
            st.integers(0, 30),
            st.integers(1, 6),
        ),
        max_size=50,
    )
)
def test_slot_groups_behave_like_the_plain_model(ops: list[Any]) -> None:
    """Same slots, sizes and choices as the model after every operation; never
    over a bound once an add has run; an idle slot is never chosen; a new
    conversation's slot never evicts one used within SHIELD."""
    clock = Clock()
    groups: SlotGroups[str, Value] = SlotGroups(LIMIT, MAX_SIZE, IDLE, clock, SHIELD, MIN_SHIELD)
    model = Model()
    request = 0
    for op, key, n, length in ops:
        request += 1
        live = [h for h in model.group(key) if clock.now - h[2] <= IDLE]
        if op == "wait":
            clock.now += n / 3
            continue
        if op == "best":
            for i, h in enumerate(model.group(key)):
                h[0].shares[request] = (n + i) % (h[0].length + 1)
            got = groups.best(key, lambda v, r=request: v.shares.get(r, 0), _length)
            ranked = [
                ((h[0].shares[request], h[0].shares[request] >= h[0].length), -i, h[0])
                for i, h in enumerate(live)
                if h[0].shares[request]
            ]
            want = max(ranked, key=lambda r: (r[0], r[1])) if ranked else None
            assert (got is None) == (want is None)
            if got is not None and want is not None:
                assert got[0] is want[2] and got[1] == want[0][0]
            continue
        value = Value(length)
        continued = None
        moved_on = False
        gap = NEW
        if op == "continue" and live:
            old, _, old_added, old_gap = live[n % len(live)]
            continued = (old, min(n % 4 + old.length - 3, old.length))
            shared = continued[1]
            whole = shared >= old.length
            if whole or (shared > 1 and shared + CONTINUATION_SLACK >= old.length):
                model.remove(key, old)
                moved_on = True
                gap = max(clock.now - old_added, old_gap / 2)
        predicted = groups.keeps(key, n, continued, _length)
        kept = groups.add(key, value, n, continued, _length)
        assert predicted == kept
        want_kept = n <= MAX_SIZE and (moved_on or model.room(key, n, clock.now))
        if want_kept:
            g = model.group(key)
            model.groups = [(k, h) for k, h in model.groups if k != key]
            g.insert(0, (value, n, clock.now, gap))
            model.groups.append((key, g))
            assert len(g) <= PER_KEY  # LIMIT is the tighter bound here
            while model.groups:
                _, oldest = model.groups[0]
                victim = oldest[-1]
                over = model.count() > LIMIT or model.size() > MAX_SIZE
                if victim[2] >= clock.now - IDLE and not over:
                    break
                oldest.pop()
                if not oldest:
                    model.groups.pop(0)
            assert len(groups) <= LIMIT and groups.size <= MAX_SIZE
        assert kept == want_kept
        assert len(groups) == model.count() and groups.size == model.size()
    groups.clear()
    assert len(groups) == 0 and groups.size == 0


def test_two_conversations_opening_alike_keep_a_slot_each() -> None:
    """The twin case: each continues its own slot, neither evicts the other."""
    groups: SlotGroups[str, list[int]] = SlotGroups(10, 10_000, 60.0)

    def prefix(old: list[int], new: list[int]) -> int:
        n = 0
        while n < min(len(old), len(new)) and old[n] == new[n]:
            n += 1
        return n

    old = [1, 2, *range(100, 300)]
    groups.add("k", old, 1)
    young = [1, 2, 3]
    best = groups.best("k", lambda v: prefix(v, young), len)
    assert best == (old, 2)  # shares the opening only: not a continuation
    groups.add("k", young, 1, best, len)
    assert len(groups) == 2
    old_next = [*old, 301]
    best = groups.best("k", lambda v: prefix(v, old_next), len)
    assert best is not None and best[0] is old  # the old session finds its own history
    groups.add("k", old_next, 1, best, len)
    young_next = [*young, 4]
    best = groups.best("k", lambda v: prefix(v, young_next), len)
    assert best is not None and best[0] is young and best[1] == 3
    groups.add("k", young_next, 1, best, len)
    assert len(groups) == 2  # each continuation replaced its own slot


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(1, 8), min_size=2, max_size=PER_KEY + 4),
    st.lists(st.integers(0, 9), min_size=PER_KEY + 4, max_size=PER_KEY + 4),
    st.lists(st.booleans(), min_size=PER_KEY + 4, max_size=PER_KEY + 4),
)
def test_a_continued_slot_is_chosen_without_scoring_the_others(
    lengths: list[int], shares: list[int], continued: list[bool]
) -> None:
    """With `continues`: the continued slot sharing the most (then wholly, then the
    longer, then the most recent), and `shared` never called; with none continued,
    the plain choice among the SCORED_PER_KEY most recent."""
    groups: SlotGroups[str, Value] = SlotGroups(1000, 10_000, IDLE, Clock())
    values = [Value(n) for n in lengths]
    for v in values:
        groups.add("k", v, 1)
    held = values[::-1][:PER_KEY]  # most recent first, as kept
    share = {id(v): shares[i] % (v.length + 1) for i, v in enumerate(held)}
    goes_on = {id(v): continued[i] and share[id(v)] > 0 for i, v in enumerate(held)}
    scored: list[Value] = []

    def shared(v: Value) -> int:
        scored.append(v)
        return share[id(v)]

    got = groups.best("k", shared, _length, lambda v: share[id(v)] if goes_on[id(v)] else 0)
    candidates = [v for v in held if goes_on[id(v)]]
    if candidates:
        order = sorted(candidates, key=lambda v: -v.length)  # stable: recent first
        want = max(order, key=lambda v: (share[id(v)], share[id(v)] >= v.length))
        assert got == (want, share[id(want)]) and scored == []
        return
    ranked = [v for v in held[:SCORED_PER_KEY] if share[id(v)]]
    if not ranked:
        assert got is None
        return
    want = max(ranked, key=lambda v: (share[id(v)], share[id(v)] >= v.length))
    assert got == (want, share[id(want)])
    assert len(scored) == min(len(held), SCORED_PER_KEY)


def test_more_live_sessions_than_fit_keep_the_ones_held() -> None:
    """Live sessions come back in turn. Plain LRU evicted each just before its
    next turn, so none was ever continued; shielded, the sessions held go on
    being continued and the rest are not kept until a held one goes quiet."""
    clock = Clock()
    groups: SlotGroups[str, Value] = SlotGroups(100, 10 * 8, 600.0, clock, 120.0)
    held: list[Value | None] = [None] * 12  # twelve sessions of one agent, 8 each
    continued_per_round = []
    for _ in range(5):
        continued = 0
        for i in range(12):
            old = held[i]
            best = groups.best("agent", lambda v, o=old: v.length if v is o else 0, _length)
            value = Value(old.length + 1 if old else 1)
            continued += best is not None
            held[i] = value if groups.add("agent", value, 8, best, _length) else None
            clock.now += 0.1
        continued_per_round.append(continued)
    assert continued_per_round == [0, 10, 10, 10, 10]
    clock.now += 5.1  # the held sessions end: four turn gaps, at least 5 s, later
    assert groups.keeps("agent", 8) and groups.add("agent", Value(1), 8)


def test_a_full_key_keeps_its_live_slots() -> None:
    """Past PER_KEY live conversations of one opening, a new one is not kept."""
    clock = Clock()
    groups: SlotGroups[str, Value] = SlotGroups(10 * PER_KEY, 10 * PER_KEY, 600.0, clock, 120.0)
    values = [Value(1) for _ in range(PER_KEY)]
    assert all(groups.add("agent", v, 1) for v in values)
    assert not groups.keeps("agent", 1) and not groups.add("agent", Value(1), 1)
    assert len(groups) == PER_KEY
    best = groups.best("agent", lambda v: 1 if v is values[0] else 0, _length)
    assert best is not None and groups.add("agent", Value(2), 1, best, _length)  # continued
    clock.now += 121.0
    assert groups.add("agent", Value(1), 1)  # the least recent went quiet: it goes
    assert len(groups) == PER_KEY


def _turn(groups: SlotGroups[str, Value], key: str, held: Value | None) -> Value | None:
    """One turn of conversation `key` (one element longer): the new value if kept."""
    best = groups.best(key, lambda v: v.length if v is held else 0, _length)
    value = Value(held.length + 1 if held else 1)
    return value if groups.add(key, value, 1, best, _length) else None


def test_a_session_that_ended_gives_way_after_a_few_of_its_turn_gaps() -> None:
    """Shielded for GAP_FACTOR times its turn gap, the longest lately (halved at
    each turn), at least the minimum: a session that ended stops holding its
    slot soon, one that is merely between turns keeps it."""
    clock = Clock()
    groups: SlotGroups[str, Value] = SlotGroups(100, 2, 600.0, clock, 120.0, 0.5)
    a = _turn(groups, "a", None)
    b = _turn(groups, "b", None)
    clock.now += 10.0
    a = _turn(groups, "a", a)  # a's gap: 10 s
    clock.now += 2.0
    a = _turn(groups, "a", a)  # 2 s, but 10 s lately: 5 s (20 s shield)
    b = _turn(groups, "b", b)  # 12 s (48 s shield)
    assert a is not None and b is not None
    clock.now += 19.9
    assert not groups.keeps("c", 1) and _turn(groups, "c", None) is None
    clock.now += 0.2  # a's shield is over, b's is not
    assert groups.keeps("c", 1) and _turn(groups, "c", None) is not None
    assert groups.best("a", lambda v: v.length, _length) is None  # a gave way
    assert groups.best("b", lambda v: v.length, _length) is not None
    assert groups.turned_away == 2  # once by keeps, once by add


def test_a_quick_session_is_shielded_for_the_minimum() -> None:
    clock = Clock()
    groups: SlotGroups[str, Value] = SlotGroups(100, 1, 600.0, clock, 120.0, 0.5)
    a = _turn(groups, "a", None)
    clock.now += 0.01
    a = _turn(groups, "a", a)  # a 10 ms gap: shielded 0.5 s, not 40 ms
    clock.now += 0.45
    assert not groups.keeps("c", 1)
    clock.now += 0.1
    assert groups.keeps("c", 1)


def test_a_slot_never_continued_gives_way_after_the_minimum() -> None:
    """A memo that fails to recognise its conversations (objects rebuilt upstream)
    adds a slot per turn that is never continued: such slots hold the memo only
    for the minimum shield, so they cannot lock it."""
    clock = Clock()
    groups: SlotGroups[str, Value] = SlotGroups(100, 1, 600.0, clock, 120.0, 0.5)
    assert groups.add("a", Value(1), 1)
    clock.now += 0.45
    assert not groups.keeps("c", 1)
    clock.now += 0.1
    assert groups.keeps("c", 1)
