"""A hypothesis strategy shared by the message-memo tests of every codec."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st


@st.composite
def conversations(draw: st.DrawFn, message: st.SearchStrategy[Any]) -> list[list[Any]]:
    """Message lists of one or two interleaved conversations, request after request:
    each appends messages, sometimes edits or drops an earlier one (a client
    compacting its history)."""
    first = draw(st.lists(message, min_size=1, max_size=4))
    histories = [
        first,
        draw(st.one_of(st.just(copy.deepcopy(first)), st.lists(message, min_size=1, max_size=3))),
    ]
    out = []
    for _ in range(draw(st.integers(1, 8))):
        h = histories[draw(st.integers(0, 1))]
        action = draw(st.sampled_from(["append", "append", "append", "edit", "drop"]))
        if action == "append" or len(h) < 2:
            h.extend(draw(st.lists(message, min_size=1, max_size=3)))
        elif action == "edit":
            h[draw(st.integers(0, len(h) - 1))] = draw(message)
        else:
            del h[draw(st.integers(0, len(h) - 2))]
        out.append(copy.deepcopy(h))
    return out
