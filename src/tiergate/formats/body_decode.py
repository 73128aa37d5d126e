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

A long body arrives as the pieces uvicorn read it in (up to 256 KB each).
`loads_parts` compares those pieces where they lie and reads the new messages in
place (copying them out only when they straddle two pieces), so the body is
never joined whole: the join was one more write and read
of every byte, and it evicted from the cache what the rest of the request then
missed (issue #30; docs/performance.md, "Session 21").

The result equals `orjson.loads(body)` (tests/test_body_decode.py, a property
test over edited, truncated, reformatted and split bodies); a body the fast path cannot
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from tiergate.core.body_pieces import joined, spans
from tiergate.core.slot_groups import HISTORY_CACHE_BYTES, SlotGroups, SlotMemo, fewest_continued

#: Bodies smaller than this are decoded whole: the decode is a few microseconds.
MIN_BYTES = 16 * 1024
#: Leading bytes that key a slot; conversations sharing them are told apart by
#: the compare (core/slot_groups.py keeps several per key: a body continuing one
#: takes its place, any other gets a slot of its own).
KEY_BYTES = 256
DEFAULT_SLOTS = 128
DEFAULT_IDLE_SECONDS = 600.0
#: The chunk the common-prefix search compares before it bisects.
_CHUNK = 64 * 1024
#: Bytes compared to turn away a slot the body does not continue (_continued_elements).
_PROBE_BYTES = 64

#: A JSON string (escapes included), or a bracket: what a boundary scan must see.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_QUOTE, _OPEN_ARRAY, _CLOSE_ARRAY, _OPEN_OBJECT = 0x22, 0x5B, 0x5D, 0x7B
_OPENING = (_OPEN_ARRAY, _OPEN_OBJECT)
_SPACE = b" \t\r\n"


class Parts:
    """A body as the pieces it arrived in, read in place: compared and sliced
    without joining them (a body in one piece is that piece)."""

    __slots__ = ("parts", "size", "starts")

    def __init__(self, parts: Sequence[bytes]) -> None:
        self.parts = tuple(parts)
        self.starts: list[int] = []
        at = 0
        for part in self.parts:
            self.starts.append(at)
            at += len(part)
        self.size = at

    def slice(self, start: int, end: int) -> bytes:
        """Bytes [start, end): a copy of that range only."""
        cut = list(spans(self.parts, self.starts, start, min(end, self.size)))
        if len(cut) == 1:
            part, a, b = cut[0]
            return part if a == 0 and b == len(part) else part[a:b]
        return b"".join(memoryview(part)[a:b] for part, a, b in cut)

    def joined(self) -> bytes:
        return joined(self.parts)


def _aligned(
    x: Parts, x_at: int, y: Parts, y_at: int, n: int, most: int
) -> Iterator[tuple[bytes, int, memoryview]]:
    """Spans of x[x_at:] and y[y_at:] that lie inside one piece of each, in order,
    n bytes in all, none longer than `most`: (x's piece, offset in it, y's bytes)."""
    while n > 0:
        xi, yi = bisect_right(x.starts, x_at) - 1, bisect_right(y.starts, y_at) - 1
        xp, xo = x.parts[xi], x_at - x.starts[xi]
        yp, yo = y.parts[yi], y_at - y.starts[yi]
        take = min(len(xp) - xo, len(yp) - yo, n, most)
        yield xp, xo, memoryview(yp)[yo : yo + take]
        x_at, y_at, n = x_at + take, y_at + take, n - take


def same(x: Parts, x_at: int, y: Parts, y_at: int, n: int) -> bool:
    """Are x[x_at : x_at + n] and y[y_at : y_at + n] the same bytes (both in range)?"""
    if x_at + n > x.size or y_at + n > y.size:
        return False
    if len(x.parts) == 1 and len(y.parts) == 1:  # the usual body, under 256 KB
        return x.parts[0].startswith(memoryview(y.parts[0])[y_at : y_at + n], x_at)
    return all(xp.startswith(ys, xo) for xp, xo, ys in _aligned(x, x_at, y, y_at, n, n))


@dataclass(slots=True)
class _Slot:
    data: Parts  #: the conversation's last body
    ends: list[int]  #: offset just past each element of the array
    close: int  #: offset of the array's `]`
    raws: list[Any]  #: the array's decoded elements
    head: dict[str, Any]  #: the members before the array, the array's key last
    rest: dict[str, Any]  #: the members after it


def _elements(slot: _Slot) -> int:
    return len(slot.ends)


def common_prefix(a: Parts, b: Parts) -> int:
    """How many leading bytes two bodies held in pieces share: memcmp span by span
    (each at most _CHUNK and inside one piece of each) up to the first span that
    differs (one pass), then a bisection inside it."""
    at = 0
    for ap, ao, bs in _aligned(a, 0, b, 0, min(a.size, b.size), _CHUNK):
        if not ap.startswith(bs, ao):
            lo, hi = 0, len(bs)  # the first lo bytes agree; they differ before hi
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if ap.startswith(bs[lo:mid], ao + lo):
                    lo = mid
                else:
                    hi = mid
            return at + lo
        at += len(bs)
    return at


def _continued_elements(raw: Parts, slot: _Slot) -> int:
    """How many of the slot's elements `raw` repeats byte for byte from its start,
    when it continues the slot: shares all of them but at most CONTINUATION_SLACK
    latest ones (an agent appends, or edits its latest messages); else 0.
    Each try compares the element's own bytes before the rest, so another
    conversation, or an edited latest message, costs a short compare, not a pass
    over the whole history; the history is compared once."""
    old = slot.data
    ends = slot.ends
    fewest = fewest_continued(len(ends))
    # A continuation repeats every byte before the end of element `fewest`; the
    # last few of them tell another conversation of the same agent in one compare.
    mark = ends[fewest - 1]
    probe = min(mark, _PROBE_BYTES)
    if not same(raw, mark - probe, old, mark - probe, probe):
        return 0
    for count in range(len(ends), fewest - 1, -1):
        start = ends[count - 2] if count > 1 else 0
        if not same(raw, start, old, start, ends[count - 1] - start):
            continue  # this element changed: try one fewer
        return count if same(raw, 0, old, 0, start) else 0
    return 0


def _shared_elements(raw: Parts, slot: _Slot) -> int:
    """How many of the slot's elements `raw` repeats byte for byte from its start:
    the continuation's count, else where the two bodies part (one memcmp pass)."""
    return _continued_elements(raw, slot) or bisect_right(slot.ends, common_prefix(raw, slot.data))


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


class BodyDecodeMemo(SlotMemo):
    """`loads(raw)`, equal to `orjson.loads(raw)`, reusing each recent conversation's
    last decode (see the module docstring). `field` is the array the conversation
    grows: `messages` (chat completions, Anthropic) or `input` (Responses)."""

    __slots__ = ("key_bytes", "min_bytes")

    def __init__(
        self,
        limit: int = DEFAULT_SLOTS,
        max_bytes: int = HISTORY_CACHE_BYTES,
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

    def loads(self, raw: bytes, field: str = "messages") -> Any:
        """`raw` decoded; orjson.JSONDecodeError exactly when orjson.loads raises it."""
        return self.loads_parts((raw,), field)

    def loads_parts(self, parts: Sequence[bytes], field: str = "messages") -> Any:
        """`loads` of the pieces' concatenation, without joining a body it can
        reuse: the new messages are read in place, or copied out alone when
        they straddle two pieces."""
        size = sum(map(len, parts))
        if size < self.min_bytes or size > self.max_bytes:
            return orjson.loads(joined(parts))
        raw = Parts(parts)
        key = (field, raw.slice(0, self.key_bytes))
        best = self._slots.best(
            key,
            lambda slot: _shared_elements(raw, slot),
            _elements,
            lambda slot: _continued_elements(raw, slot),
        )
        # A body the memo would not keep (more live sessions than it holds) is
        # decoded whole, as without a memo: laying it out would be wasted.
        kept = self._slots.keeps(key, size, best, _elements)
        if best is not None and kept:
            found = self._warm(raw, field, key, best)
            if found is not None:
                return found
        whole = raw.joined()
        body = orjson.loads(whole)
        if kept and isinstance(body, dict) and type(body.get(field)) is list:
            self._cold(whole, field, key, body)
        return body

    def _warm(
        self, raw: Parts, field: str, key: tuple[str, bytes], best: tuple[_Slot, int]
    ) -> dict[str, Any] | None:
        slot, count = best
        pos = slot.ends[count - 1]
        # What follows the shared messages, read where it lies when one piece
        # holds it (always, for a body in one piece); else copied out, which is
        # still less than the join of the whole body it replaces.
        last = len(raw.parts) - 1
        if pos >= raw.starts[last]:
            buf, base = raw.parts[last], raw.starts[last]
        else:
            buf, base = raw.slice(pos, raw.size), pos
        scanned = scan_elements(buf, pos - base)
        if scanned is None:
            return None
        new_ends, close = scanned  # offsets in buf
        try:
            new = orjson.loads(b"[0" + buf[pos - base : close + 1])
        except orjson.JSONDecodeError:
            return None
        if len(new) != len(new_ends) + 1:  # a scalar element: not ours to reuse
            return None
        tail, old = len(buf) - close, slot.data
        if tail == old.size - slot.close and same(raw, base + close, old, slot.close, tail):
            rest = slot.rest
        else:
            fresh = _rest(buf, close)
            if fresh is None:
                return None
            rest = fresh
        raws = slot.raws[:count]
        raws.extend(new[1:])
        ends = slot.ends[:count]
        ends.extend(base + end for end in new_ends)
        body = slot.head.copy()
        body[field] = raws
        body.update(rest)
        fresh_slot = _Slot(raw, ends, base + close, list(raws), slot.head, rest)
        self._slots.add(key, fresh_slot, raw.size, best, _elements)
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
        slot = _Slot(Parts((raw,)), ends, close, list(raws), head, rest)
        self._slots.add(key, slot, len(raw))

    def clear(self) -> None:
        self._slots.clear()
