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
a property test); anything else (no array, a short one) is plain orjson.
`encode(body)` is the same bytes in pieces: the upstream client writes them with
one vectored write (uvloop's `writelines`), so the kept history is not copied
into a new buffer every turn (issue #30: a 441 KB join at turn 200). A slot
keeps its array in a few pieces: each turn's new messages are one, and the
last two merge while the newer is at least as long (`_push`), so a
conversation of n turns is held in about log2(n) pieces. The
reused objects must not be mutated (the render memo's rule already). Slots are
keyed by the array's first two elements, several to a key (core/slot_groups.py:
two conversations that open alike each keep their own). Bounded by slot count,
bytes held and idle time. Not thread-safe (one event loop per
process). Pure: no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import orjson

from tiergate.core.body_pieces import BodyPiece, spans
from tiergate.core.same_objects import identical_prefix
from tiergate.core.slot_groups import HISTORY_CACHE_BYTES, SlotGroups, SlotMemo, fewest_continued
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
DEFAULT_IDLE_SECONDS = 600.0


@dataclass(slots=True)
class _Slot:
    items: list[Any]  #: the array's elements, as last encoded
    pieces: list[BodyPiece]  #: the array's bytes, from its `[` to its last element's end
    starts: list[int]  #: offset of each piece in those bytes
    ends: list[int]  #: offset just past each element, from the `[`


def _items(slot: _Slot) -> int:
    return len(slot.items)


def _push(pieces: list[BodyPiece], starts: list[int], piece: bytes, at: int) -> None:
    """Append `piece` (at offset `at`), then merge the last two pieces while the
    last is at least as long as the one before: lengths then at least halve
    piece to piece, so a slot holds a few pieces (about log2 of the turns)
    and each byte is copied a few times over a conversation, not once a turn."""
    pieces.append(piece)
    starts.append(at)
    while len(pieces) > 1 and len(pieces[-1]) >= len(pieces[-2]):
        last = pieces.pop()
        starts.pop()
        pieces[-1] = b"".join((pieces[-1], last))


def _span(slot: _Slot, begin: int, end: int) -> list[BodyPiece]:
    """The slot's array bytes `begin`..`end` as pieces (views where a piece is cut)."""
    pieces = slot.pieces
    if begin == 0 and end == slot.starts[-1] + len(pieces[-1]):
        return pieces[:]  # the usual case: every piece, whole
    return [
        piece if lo == 0 and hi == len(piece) else memoryview(piece)[lo:hi]
        for piece, lo, hi in spans(pieces, slot.starts, begin, end)
    ]


def _encodes_as(slot: _Slot, begin: int, part: bytes) -> bool:
    """Whether the slot's array bytes from `begin` are `part` (memcmp per piece)."""
    at = 0
    for piece in _span(slot, begin, begin + len(part)):
        if not part.startswith(piece, at):
            return False
        at += len(piece)
    return True


def _shared(slot: _Slot, items: list[Any]) -> int:
    """How many leading elements of `items` encode as the slot's did: the same
    object, or one whose encoding is the slot's bytes (never mere equality:
    1, 1.0 and True are equal and encode differently)."""
    ends = slot.ends
    old = slot.items
    limit = min(len(old), len(items))
    count = identical_prefix(old, items)  # the usual case: all of them
    for _ in range(MAX_REENCODED):
        if count == limit:
            return limit
        begin = ends[count - 1] + 1 if count else 1
        part = orjson.dumps(items[count])
        if len(part) != ends[count] - begin or not _encodes_as(slot, begin, part):
            return count
        count += 1
        count += identical_prefix(old[count:], items[count:])
    return count  # more rendered afresh than a system prompt's: encode the rest whole


def _continued(slot: _Slot, items: list[Any]) -> int:
    """`_shared` when `items` continues the slot (all its elements but at most
    CONTINUATION_SLACK latest ones), else 0: one identity check turns away another
    conversation of the same agent first."""
    fewest = fewest_continued(len(slot.items))
    if fewest > len(items) or slot.items[fewest - 1] is not items[fewest - 1]:
        return 0
    count = _shared(slot, items)
    return count if count >= fewest else 0


def _split(body: dict[str, Any]) -> tuple[str, list[Any]] | None:
    for field in FIELDS:
        items = body.get(field)
        if type(items) is list and len(items) >= MIN_ELEMENTS:
            return field, items
    return None


class BodyEncodeMemo(SlotMemo):
    """`dumps(body)`, byte for byte `orjson.dumps(body)`, reusing each recent
    conversation's last encoding of its message array (see the module docstring)."""

    __slots__ = ("reused",)

    def __init__(
        self,
        limit: int = DEFAULT_SLOTS,
        max_bytes: int = HISTORY_CACHE_BYTES,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._slots: SlotGroups[Hashable, _Slot] = SlotGroups(limit, max_bytes, idle_seconds, clock)
        self.reused = 0  #: elements the last `dumps` took from the memo (for tests, benches)

    def dumps(self, body: Any) -> bytes:
        """`orjson.dumps(body)`, byte for byte."""
        pieces = self.encode(body)
        return pieces[0] if len(pieces) == 1 and type(pieces[0]) is bytes else b"".join(pieces)

    def encode(self, body: Any) -> list[BodyPiece]:
        """`orjson.dumps(body)` in pieces, for a vectored socket write: the kept
        history is handed over as it is, not copied into one new buffer
        (`b"".join(pieces) == orjson.dumps(body)`). The pieces must not be changed."""
        split = _split(body) if type(body) is dict else None
        self.reused = 0
        if split is None:
            return [orjson.dumps(body)]
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
        best = self._slots.best(
            key,
            lambda slot: _shared(slot, items),
            _items,
            lambda slot: _continued(slot, items),
        )
        # A body the memo would not keep (more live sessions than it holds) is
        # encoded whole, as without a memo. Its size is not known before it is
        # encoded: an item is at least a byte, and `add` has the last word.
        if not self._slots.keeps(key, len(items), best, _items):
            return [orjson.dumps(body)]
        slot, count = best if best is not None else (None, 0)
        self.reused = count
        if slot is not None:
            ends = slot.ends[:count]
            at = ends[-1]
            pieces = _span(slot, 0, at)
            starts = slot.starts[: len(pieces)]
        else:
            ends, pieces, starts, at = [], [], [], 0
        added = [b"" if count else b"["]  # what this turn adds, as one piece
        start = at
        at += len(added[0])
        for i in range(count, len(items)):
            part = orjson.dumps(items[i])
            if i:
                added.append(b",")
                at += 1
            added.append(part)
            at += len(part)
            ends.append(at)
        if at > start:  # nothing added: the same array again (a retried request)
            _push(pieces, starts, b"".join(added), start)
        tail = b"]," + orjson.dumps(after)[1:] if after else b"]}"
        size = len(head) + at + len(tail)
        self._slots.add(key, _Slot(list(items), pieces, starts, ends), size, best, _items)
        return [head, *pieces, tail]

    def clear(self) -> None:
        self._slots.clear()
