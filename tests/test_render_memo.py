"""formats/render_memo.HistoryMemo: a rendered message list reused as a slice
for the sources a conversation's previous list shares by identity, one slot per
live conversation even when two open with the same message object (issue #30)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.formats.render_memo import HistoryMemo


class Counting:
    """`render_one` that counts its calls and drops odd numbers (None)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, source: Any) -> str | None:
        self.calls += 1
        return None if source.n % 2 else f"r{source.n}"


class Source:
    def __init__(self, n: int) -> None:
        self.n = n


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), max_size=30))
def test_the_memo_renders_what_a_plain_loop_renders(ops: list[tuple[int, int]]) -> None:
    """Three conversations sharing one first object, each growing or cut back."""
    memo: HistoryMemo[str] = HistoryMemo(limit=4)
    first = Source(0)
    convs: list[list[Source]] = [[first], [first], [first]]
    for counter, (which, grow) in enumerate(ops, 1):
        conv = convs[which]
        if grow:
            conv.extend(Source(counter * 10 + k) for k in range(grow))
        elif len(conv) > 1:
            del conv[-1]
        render = Counting()
        got = memo.render(list(conv), "v", render)
        assert got == [r for s in conv if (r := Counting()(s)) is not None]
        assert len(memo) <= 4


def test_twins_sharing_their_first_message_each_reuse_their_own_history() -> None:
    memo: HistoryMemo[str] = HistoryMemo()
    first = Source(0)
    old = [first, *(Source(n) for n in range(1, 200))]
    young = [first, Source(1001)]
    memo.render(old, "v", Counting())
    memo.render(young, "v", Counting())
    for n in range(5):
        old.append(Source(300 + n))
        render = Counting()
        memo.render(old, "v", render)
        assert render.calls == 1  # only the new source: the young twin took no slot of the old's
        young.append(Source(2000 + n))
        render = Counting()
        memo.render(young, "v", render)
        assert render.calls == 1
    assert len(memo) == 2
