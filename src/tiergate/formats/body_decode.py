"""A conversation's previous body, reused byte for byte to decode its next one.

Why: agents resend the whole history every turn, and once the message memo
(formats/message_memo.py) stopped re-parsing it, the JSON decode of the whole
body was what still grew with the session (issue #30: 0.6-0.75 us per KB, about
a quarter of the plain proxy's CPU at 1 MB). An agent's next body begins with
the same bytes as its last one, up to some message: usually the last, or a few
before it when the client moves a prompt-cache marker. For the longest such
prefix that ends on a message boundary, the previous decode of those messages,
and of the top-level members before the array, is exact: JSON is context free,
so the same bytes read from the same parser state decode to the same values.
Only the new messages, and the members after the array (reused too while their
bytes are unchanged: an agent's system prompt and tools), are decoded.

The result equals `orjson.loads(body)` (tests/test_body_decode.py, a property
test over edited, truncated and reformatted bodies); a body the fast path cannot
read is decoded whole, so every error is orjson's. The decoded objects are
shared with the next request of the conversation, so nothing may mutate them
(the message and render memos' rule already). Matching costs a memcmp of the
bytes shared; a message's end is found by a regex scan that skips strings in C.
Bounded by slot count, bytes held and idle time. Not thread-safe (one event loop
per process). Pure: no I/O.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tiergate.core.slot_groups import CONTINUATION_SLACK, SlotGroups

#: Bodies smaller than this are decoded whole: the decode is a few microseconds.
MIN_BYTES = 16 * 1024
#: Leading bytes that key a slot; conversations sharing them are told apart by
#: the compare (core/slot_groups.py keeps several per key: a body continuing one
#: takes its place, any other gets a slot of its own).
KEY_BYTES = 256
DEFAULT_SLOTS = 128
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
DEFAULT_IDLE_SECONDS = 600.0
#: The chunk the common-prefix search compares before it bisects.
_CHUNK = 64 * 1024

#: A JSON string (escapes included), or a bracket: what a boundary scan must see.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_QUOTE, _OPEN_ARRAY, _CLOSE_ARRAY, _OPEN_OBJECT = 0x22, 0x5B, 0x5D, 0x7B
_OPENING = (_OPEN_ARRAY, _OPEN_OBJECT)
_SPACE = b" \t\r\n"


@dataclass(slots=True)
class _Slot:
    data: bytes  #: the conversation's last body
    ends: list[int]  #: offset just past each element of the array
    close: int  #: offset of the array's `]`
    raws: list[Any]  #: the array's decoded elements
    head: dict[str, Any]  #: the members before the array, the array's key last
    rest: dict[str, Any]  #: the members after it


def _elements(slot: _Slot) -> int:
    return len(slot.ends)


def common_prefix(a: bytes, b: bytes) -> int:
    """How many leading bytes `a` and `b` share: memcmp chunk by chunk up to the
    first chunk that differs (one pass), then a bisection inside it."""
    n = min(len(a), len(b))
    view = memoryview(b)
    lo = 0
    while lo < n:
        hi = min(lo + _CHUNK, n)
        if not a.startswith(view[lo:hi], lo):
            break
        lo = hi
    else:
        return n
    while hi - lo > 1:  # a[:lo] == b[:lo], and they differ before hi
        mid = (lo + hi) // 2
        if a.startswith(view[lo:mid], lo):
            lo = mid
        else:
            hi = mid
    return lo


def _shared_elements(raw: bytes, slot: _Slot) -> int:
    """How many of the slot's elements `raw` repeats byte for byte from its start.
    The last few boundaries are tried first: an agent appends (all shared) or
    edits its latest messages (all but one or two). Each try compares the
    element's own bytes before the rest, so an edited latest message costs one
    short compare, not a pass over the whole history; the history is compared
    once."""
    view = memoryview(slot.data)
    ends = slot.ends
    for count in range(len(ends), max(len(ends) - CONTINUATION_SLACK, 1) - 1, -1):
        start = ends[count - 2] if count > 1 else 0
        if not raw.startswith(view[start : ends[count - 1]], start):
            continue  # this element changed: try one fewer
        if raw.startswith(view[:start]):
            return count
        break  # an earlier element changed: find where, once
    return bisect_right(ends, common_prefix(raw, slot.data))


def scan_elements(raw: bytes, pos: int) -> tuple[list[int], int] | None:
    """From `pos`, inside an array and outside any string: the offset just past each
    container element that follows, and the offset of the array's `]` (None if
    the body ends first). Scalar elements are not counted: callers compare the
    count with the decoded elements and fall back when it differs."""
    ends: list[int] = []
    depth = 0
    for token in _TOKEN.finditer(raw, pos):
        c = raw[token.start()]
        if c == _QUOTE:
            continue
        if c in _OPENING:
            depth += 1
            continue
        depth -= 1
        if depth == 0:
            ends.append(token.end())
        elif depth < 0:
            return (ends, token.start()) if c == _CLOSE_ARRAY else None
    return None


def _skip_space(raw: bytes, i: int) -> int:
    n = len(raw)
    while i < n and raw[i] in _SPACE:
        i += 1
    return i


def _array_start(raw: bytes, key: bytes) -> int | None:
    """The offset of the `[` opening the top-level member `key`'s array, or None."""
    depth = 0
    for token in _TOKEN.finditer(raw):
        s = token.start()
        c = raw[s]
        if c == _QUOTE:
            if depth == 1 and token.end() - s == len(key) and raw.startswith(key, s):
                i = _skip_space(raw, token.end())
                if i < len(raw) and raw[i] == 0x3A:  # ':' : a key, not a value
                    i = _skip_space(raw, i + 1)
                    if i < len(raw) and raw[i] == _OPEN_ARRAY:
                        return i
            continue
        depth += 1 if c in _OPENING else -1
    return None


def _rest(raw: bytes, close: int) -> dict[str, Any] | None:
    """The top-level members after the array closing at `close` (None: not readable)."""
    i = _skip_space(raw, close + 1)
    if i >= len(raw):
        return None
    if raw[i] == 0x7D:  # '}': nothing after the array
        return {} if _skip_space(raw, i + 1) == len(raw) else None
    if raw[i] != 0x2C:  # ','
        return None
    try:
        rest = orjson.loads(b"{" + raw[i + 1 :])
    except orjson.JSONDecodeError:
        return None
    return rest if isinstance(rest, dict) else None


class BodyDecodeMemo:
    """`loads(raw)`, equal to `orjson.loads(raw)`, reusing each recent conversation's
    last decode (see the module docstring). `field` is the array the conversation
    grows: `messages` (chat completions, Anthropic) or `input` (Responses)."""

    __slots__ = ("_slots", "key_bytes", "min_bytes")

    def __init__(
        self,
        limit: int = DEFAULT_SLOTS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        min_bytes: int = MIN_BYTES,
        key_bytes: int = KEY_BYTES,
    ) -> None:
        self.min_bytes = min_bytes
        self.key_bytes = key_bytes
        #: slots by the array's field and their body's leading bytes
        self._slots: SlotGroups[tuple[str, bytes], _Slot] = SlotGroups(
            limit, max_bytes, idle_seconds, clock
        )

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def bytes_held(self) -> int:
        return self._slots.size

    @property
    def max_bytes(self) -> int:
        return self._slots.max_size

    def loads(self, raw: bytes, field: str = "messages") -> Any:
        """`raw` decoded; orjson.JSONDecodeError exactly when orjson.loads raises it."""
        if len(raw) < self.min_bytes or len(raw) > self.max_bytes:
            return orjson.loads(raw)
        key = (field, raw[: self.key_bytes])
        best = self._slots.best(key, lambda slot: _shared_elements(raw, slot), _elements)
        if best is not None:
            found = self._warm(raw, field, key, best)
            if found is not None:
                return found
        body = orjson.loads(raw)
        if isinstance(body, dict) and type(body.get(field)) is list:
            self._cold(raw, field, key, body)
        return body

    def _warm(
        self, raw: bytes, field: str, key: tuple[str, bytes], best: tuple[_Slot, int]
    ) -> dict[str, Any] | None:
        slot, count = best
        pos = slot.ends[count - 1]
        scanned = scan_elements(raw, pos)
        if scanned is None:
            return None
        new_ends, close = scanned
        try:
            new = orjson.loads(b"[0" + raw[pos : close + 1])
        except orjson.JSONDecodeError:
            return None
        if len(new) != len(new_ends) + 1:  # a scalar element: not ours to reuse
            return None
        tail = len(raw) - close
        if tail == len(slot.data) - slot.close and raw.endswith(
            memoryview(slot.data)[slot.close :]
        ):
            rest = slot.rest
        else:
            fresh = _rest(raw, close)
            if fresh is None:
                return None
            rest = fresh
        raws = slot.raws[:count]
        raws.extend(new[1:])
        ends = slot.ends[:count]
        ends.extend(new_ends)
        body = slot.head.copy()
        body[field] = raws
        body.update(rest)
        fresh_slot = _Slot(raw, ends, close, list(raws), slot.head, rest)
        self._slots.add(key, fresh_slot, len(raw), best, _elements)
        return body

    def _cold(self, raw: bytes, field: str, key: tuple[str, bytes], body: dict[str, Any]) -> None:
        """Remember `raw`'s layout, when its array can be found and read."""
        start = _array_start(raw, orjson.dumps(field))
        if start is None:
            return
        scanned = scan_elements(raw, start + 1)
        raws = body[field]
        if scanned is None or len(scanned[0]) != len(raws) or not raws:
            return
        ends, close = scanned
        rest = _rest(raw, close)
        if rest is None:
            return
        # The body's own values, so the next request shares them: a member after the
        # array holds its last occurrence, as in `body`.
        rest = {k: body[k] for k in rest}
        try:
            head = orjson.loads(raw[:start] + b"0}")  # the array's key last, valued 0
        except orjson.JSONDecodeError:
            return
        self._slots.add(key, _Slot(raw, ends, close, list(raws), head, rest), len(raw))

    def clear(self) -> None:
        self._slots.clear()
