"""A conversation's previous upstream body, reused byte for byte to encode its next.

Why: with the message and render memos (formats/message_memo.py,
formats/render_memo.py) the upstream body of a conversation's next turn holds
the *same* rendered message objects as its last one, plus one or two new ones,
yet `orjson.dumps` wrote every message again (issue #30: 0.2-0.4 us per KB, the
largest cost left growing with the session once the decode memo was in). The
encoding of a JSON array is its elements' encodings joined by commas, so for the
longest prefix of elements that are the previous body's (the same object, or one
that encodes to the same bytes: a system message rendered afresh), the previous
bytes are exact; only the new elements are encoded.

`dumps(body)` is byte for byte `orjson.dumps(body)` (tests/test_body_encode.py,
a property test); anything else (no array, a short one) is plain orjson. The
reused objects must not be mutated (the render memo's rule already). Slots are
keyed by the array's first two elements, several to a key (core/slot_groups.py:
two conversations that open alike each keep their own). Bounded by slot count,
bytes held and idle time. Not thread-safe (one event loop per
process). Pure: no I/O.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import orjson

from tiergate.core.slot_groups import SlotGroups
from tiergate.formats.message_memo import signature

#: Arrays shorter than this are encoded whole.
MIN_ELEMENTS = 8
#: Elements not the same object that are still compared by their encoding (a
#: system message rendered afresh each turn); past these the rest is encoded
#: whole, so an upstream whose messages are all rebuilt each turn costs what it
#: did without the memo.
MAX_REENCODED = 4
#: The fields upstream bodies grow a conversation in: chat completions and
#: Anthropic `messages`, Gemini `contents`.
FIELDS = ("messages", "contents")
DEFAULT_SLOTS = 128
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
DEFAULT_IDLE_SECONDS = 600.0


@dataclass(slots=True)
class _Slot:
    items: list[Any]  #: the array's elements, as last encoded
    data: bytes  #: the body they were encoded in
    start: int  #: offset of the array's `[` in `data`
    ends: list[int]  #: offset just past each element, from `start`


def _items(slot: _Slot) -> int:
    return len(slot.items)


def _shared(slot: _Slot, items: list[Any]) -> int:
    """How many leading elements of `items` encode as the slot's did: the same
    object, or one whose encoding is the slot's bytes (never mere equality:
    1, 1.0 and True are equal and encode differently)."""
    data, ends = slot.data, slot.ends
    limit = min(len(slot.items), len(items))
    if all(map(operator.is_, slot.items, items)):  # the usual case, a loop in C
        return limit
    same = list(map(operator.is_, slot.items, items))  # map stops at the shorter list
    count = 0
    for _ in range(MAX_REENCODED):
        try:
            count = same.index(False, count)
        except ValueError:
            return limit
        begin = ends[count - 1] + 1 if count else 1
        part = orjson.dumps(items[count])
        if len(part) != ends[count] - begin or not data.startswith(part, slot.start + begin):
            return count
        count += 1
    return count  # more rendered afresh than a system prompt's: encode the rest whole


def _split(body: dict[str, Any]) -> tuple[str, list[Any]] | None:
    for field in FIELDS:
        items = body.get(field)
        if type(items) is list and len(items) >= MIN_ELEMENTS:
            return field, items
    return None


class BodyEncodeMemo:
    """`dumps(body)`, byte for byte `orjson.dumps(body)`, reusing each recent
    conversation's last encoding of its message array (see the module docstring)."""

    __slots__ = ("_slots", "reused")

    def __init__(
        self,
        limit: int = DEFAULT_SLOTS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._slots: SlotGroups[Hashable, _Slot] = SlotGroups(limit, max_bytes, idle_seconds, clock)
        self.reused = 0  #: elements the last `dumps` took from the memo (for tests, benches)

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def bytes_held(self) -> int:
        return self._slots.size

    def dumps(self, body: Any) -> bytes:
        split = _split(body) if type(body) is dict else None
        self.reused = 0
        if split is None:
            return orjson.dumps(body)
        field, items = split
        before: dict[str, Any] = {}
        after: dict[str, Any] = {}
        side = before
        for k, v in body.items():
            if k == field:
                side = after
            else:
                side[k] = v
        head = orjson.dumps(before)[:-1] + b"," if before else b"{"
        head += orjson.dumps(field) + b":"
        key = (field, signature(items))
        best = self._slots.best(key, lambda slot: _shared(slot, items), _items)
        slot, count = best if best is not None else (None, 0)
        self.reused = count
        pieces: list[Any] = [head]
        if slot is not None:
            ends = slot.ends[:count]
            pieces.append(memoryview(slot.data)[slot.start : slot.start + ends[-1]])
            at = ends[-1]
        else:
            ends = []
            pieces.append(b"[")
            at = 1
        for i in range(count, len(items)):
            part = orjson.dumps(items[i])
            if i:
                pieces.append(b",")
                at += 1
            pieces.append(part)
            at += len(part)
            ends.append(at)
        pieces.append(b"]")
        pieces.append(b"," + orjson.dumps(after)[1:] if after else b"}")
        data = b"".join(pieces)
        self._slots.add(key, _Slot(list(items), data, len(head), ends), len(data), best, _items)
        return data

    def clear(self) -> None:
        self._slots.clear()
