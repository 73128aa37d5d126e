"""Rendered pieces of a message, remembered by the message's identity.

Why: the message memo (formats/message_memo.py) hands the next request of a
conversation the *same* parsed Message objects for the history it shares, so a
codec can render each of those once and reuse the result while it is held
(issue #30: an Anthropic render of 400 messages took about 0.9 ms a turn).
An entry holds its message, so an id is never reused for another object while
remembered. The results are shared between requests: callers must treat them
as read-only (copy before editing). Bounded by characters of rendered text plus
a fixed cost per entry; oldest entries go first. Purely a cache. No I/O.
"""

from __future__ import annotations

import contextlib
import operator
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tiergate.core.same_objects import identical_prefix
from tiergate.core.slot_groups import SlotGroups

T = TypeVar("T")

#: What an entry costs beyond its text (the message, the dicts, the key), counted
#: in characters, so a memo of short messages stays small too.
ENTRY_OVERHEAD = 512


class IdentityMemo(Generic[T]):
    """`render(obj)` per (object identity, variant), within `max_chars`."""

    __slots__ = ("_chars", "_entries", "max_chars")

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._entries: dict[tuple[int, Hashable], tuple[object, T, int]] = {}
        self._chars = 0

    @property
    def chars(self) -> int:
        return self._chars

    def __len__(self) -> int:
        return len(self._entries)

    def hit(self, obj: object, variant: Hashable) -> T | None:
        """The remembered rendering of `obj`, or None (the hot path: no closure)."""
        entry = self._entries.get((id(obj), variant))
        return entry[1] if entry is not None and entry[0] is obj else None

    def get(
        self, obj: object, variant: Hashable, render: Callable[[], T], size: Callable[[], int]
    ) -> T:
        """The remembered rendering of `obj`, or `render()` remembered at `size()`
        characters (plus ENTRY_OVERHEAD)."""
        key = (id(obj), variant)
        hit = self._entries.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        out = render()
        cost = size() + ENTRY_OVERHEAD
        old = self._entries.pop(key, None)
        if old is not None:
            self._chars -= old[2]
        self._entries[key] = (obj, out, cost)
        self._chars += cost
        while self._chars > self.max_chars and self._entries:
            # StopIteration/RuntimeError: emptied or resized by another thread meanwhile.
            with contextlib.suppress(StopIteration, RuntimeError, KeyError):
                self._chars -= self._entries.pop(next(iter(self._entries)))[2]
        return out

    def clear(self) -> None:
        self._entries.clear()
        self._chars = 0


#: Conversations whose rendered message list HistoryMemo keeps, and how long one
#: may go unused.
HISTORY_SLOTS = 128
HISTORY_IDLE_SECONDS = 600.0


@dataclass(slots=True)
class _History(Generic[T]):
    sources: list[Any]
    rendered: list[T]
    marks: list[int]  #: renderings after each source


def _sources(slot: _History[Any]) -> int:
    return len(slot.sources)


class HistoryMemo(Generic[T]):
    """A conversation's rendered message list, its shared prefix reused as a slice.

    Why: with IdentityMemo each message renders once, but the render still called
    it for every message of the history, every turn: a Python loop that grew with
    the session (issue #30). The message memo hands the next turn the *same*
    Message objects, so the longest prefix of identical sources (found by a
    comparison in C) has exactly the renderings of the last list's. Slots are
    keyed by the list's first message and a variant, several to a key
    (core/slot_groups.py: conversations that open with the same messages, such as
    one task run twice at once, get the same first object from the message memo),
    at most `limit` in all, none idle past `idle_seconds`, least recently used
    first out. Results are shared: read-only."""

    __slots__ = ("_slots",)

    def __init__(
        self,
        limit: int = HISTORY_SLOTS,
        idle_seconds: float = HISTORY_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # Each slot counts 1 against `limit`; the size bound is the same count.
        self._slots: SlotGroups[tuple[int, Hashable], _History[T]] = SlotGroups(
            limit, limit, idle_seconds, clock
        )

    def __len__(self) -> int:
        return len(self._slots)

    def render(
        self, sources: list[Any], variant: Hashable, render_one: Callable[[Any], T | None]
    ) -> list[T]:
        """`[r for s in sources if (r := render_one(s)) is not None]`, reusing the
        previous list's renderings for the sources it shares by identity."""
        if not sources:
            return []
        key = (id(sources[0]), variant)
        # A slot holds its first source, so the id names that object while it is held.
        best = self._slots.best(key, lambda slot: identical_prefix(slot.sources, sources), _sources)
        out: list[T] = []
        marks: list[int] = []
        count = 0
        if best is not None:
            slot, count = best
            out = slot.rendered[: slot.marks[count - 1]]
            marks = slot.marks[:count]
        for source in sources[count:]:
            item = render_one(source)
            if item is not None:
                out.append(item)
            marks.append(len(out))
        self._slots.add(key, _History(list(sources), out, marks), 1, best, _sources)
        return list(out)

    def clear(self) -> None:
        self._slots.clear()


#: Messages MessageWrappers keeps (pointers only: their parts are held elsewhere).
WRAPPER_SLOTS = 16384


class MessageWrappers:
    """`{"role": role, "content": blocks}`, the same dict again for the same blocks.

    Why: a format that joins each message's remembered blocks into a fresh list
    and dict every turn (Anthropic: tool results and the user text after them are
    one message) hands the upstream encoder (formats/body_encode.py) a history in
    which no message is the previous turn's object, so it has to encode all of
    it again. Remembered by the identities of the blocks, in order; an entry
    keeps its blocks, so an id is not reused while remembered. Least recently
    stored first out. Results are shared: read-only (copy before editing)."""

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int = WRAPPER_SLOTS) -> None:
        self.limit = limit
        self._entries: OrderedDict[tuple[Any, ...], tuple[list[Any], dict[str, Any]]] = (
            OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._entries)

    def wrap(self, role: str, blocks: list[Any]) -> dict[str, Any]:
        key = (role, *map(id, blocks))
        hit = self._entries.get(key)
        if hit is not None and all(map(operator.is_, hit[0], blocks)):
            return hit[1]
        message = {"role": role, "content": blocks}
        self._entries[key] = (list(blocks), message)
        if len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        return message

    def clear(self) -> None:
        self._entries.clear()
