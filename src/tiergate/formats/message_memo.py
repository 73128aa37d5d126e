"""What the previous request of a conversation parsed, reused message by message.

Why: agents resend the whole history every turn, so a 200-turn session's body
carries 400 messages of which one or two are new, and parsing the other 398 again
is most of the gateway's cost on long bodies (issue #30: at 1 MB, 844 messages,
parsing took about half the plain proxy's CPU). The codec's result for a
message depends only on that message and on the messages before it (a system
message is the system prompt only while no conversation message precedes it), so
for the longest prefix of raw messages *equal* to the previous request's, the
previous parse is exact. Equality is Python's own dict comparison (C, memcmp on
strings), so a slot that belongs to another conversation only costs a compare.

Slots are keyed by the inbound format and a cheap signature of the first two
messages, several to a key (core/slot_groups.py: conversations that open alike,
such as one task run several times at once, each keep their own, and a request
takes the slot sharing the most messages). A slot holds the raw message dicts
of the conversation's last request, the system parts and messages parsing them
appended, and after each raw message how
many of each it had, so a match costs a list compare in C and two slices, not a
Python loop over the history (which grew with the session). Bounded by slot
count, by the bytes of the bodies held, and by idle time (core.idle_lru's
reasoning: sessions end without telling the gateway). Not thread-safe (one
event loop per process). Pure: no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from tiergate.core.model import Message, TextPart, ToolSpec
from tiergate.core.slot_groups import HISTORY_CACHE_BYTES, SlotGroups, SlotMemo, fewest_continued
from tiergate.formats.member_memo import MemberMemo

#: Conversations remembered, and the body bytes their slots may hold together.
DEFAULT_SLOTS = 128
#: A slot unused this long is dropped.
DEFAULT_IDLE_SECONDS = 600.0
#: Characters of the first messages' text the signature reads.
SIGNATURE_CHARS = 256

#: After each raw message: how many system parts and conversation messages the
#: messages up to it had appended (so any prefix's parse is two slices).
Mark = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Reuse:
    """The parse of the first `count` raw messages, as the previous request had it
    (`origin`: the memo's slot it came from and how many messages the match
    shared, so `MessageMemo.store` replaces that slot when the request continues it,
    even after `upto` cut the reuse back). Its lists may be the memo's own: read
    them, never change them."""

    count: int
    system: list[TextPart]
    messages: list[Message]
    marks: list[Mark]
    origin: tuple[_Slot, int] | None = None

    def upto(self, count: int) -> Reuse | None:
        """The same reuse cut to its first `count` raw messages (None for 0), for a
        codec whose messages can change after they are appended (formats/responses)."""
        if count <= 0:
            return None
        if count >= self.count:
            return self
        return _cut(count, self.system, self.messages, self.marks, self.origin)


@dataclass(frozen=True, slots=True)
class Parsed:
    """What parsing a body's raw messages appended, for `MessageMemo.store`."""

    system: list[TextPart]
    messages: list[Message]
    marks: list[Mark]


@dataclass(slots=True)
class _Slot:
    raws: list[Any]
    parsed: Parsed


def _head(message: Any) -> Hashable:
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    text: str | None
    if isinstance(content, str):
        text, n = content[:SIGNATURE_CHARS], len(content)
    elif isinstance(content, list) and content and isinstance(content[0], dict):
        first = content[0].get("text")
        text, n = (first[:SIGNATURE_CHARS] if isinstance(first, str) else None), len(content)
    else:
        text, n = None, 0
    role = message.get("role")
    return (role if isinstance(role, str) else None, text, n)  # hashable, whatever was sent


def signature(raws: Sequence[Any]) -> Hashable:
    """Which conversation a message list most likely continues: its first two messages'
    roles and text heads (a system prompt and a task, for an agent)."""
    return tuple(_head(m) for m in raws[:2])


def _cut(
    count: int,
    system: list[TextPart],
    messages: list[Message],
    marks: list[Mark],
    origin: tuple[_Slot, int] | None,
) -> Reuse:
    """The first `count` raw messages' share of a parse: slices, no loop in Python;
    the lists themselves when that share is all of them (the usual turn), as a
    Reuse is only read (`parse_messages` copies it into the request's own lists)."""
    n_system, n_messages = marks[count - 1]
    if count == len(marks) and n_messages == len(messages) and n_system == len(system):
        return Reuse(count, system, messages, marks, origin)
    return Reuse(count, system[:n_system], messages[:n_messages], marks[:count], origin)


def _length(slot: _Slot) -> int:
    return len(slot.raws)


def shared_prefix(old: Sequence[Any], new: Sequence[Any], limit: int) -> int:
    """How many leading items of `old` and `new` (at most `limit`) are equal, by list
    comparison in C (identity first, then ==), bisecting on slices when not all are.
    The usual answer first: every item the same object (the decode memo hands a
    conversation's next body the last one's decoded messages). A slice and `==`
    check that in about 0.7 us at 400 messages, against 5.7 us for
    `all(map(operator.is_, ...))`, whose per-item call costs more than the
    slice's reference counts (docs/performance.md, session 24)."""
    head = old if len(old) == limit else old[:limit]
    if head == new[:limit]:
        return limit
    lo, hi = 0, limit - 1  # old[:lo] == new[:lo]; they differ before limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[lo:mid] == new[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def continued_prefix(old: Sequence[Any], new: Sequence[Any], limit: int) -> int:
    """`shared_prefix` when `new` continues `old` (shares all of its first `limit`
    items but at most CONTINUATION_SLACK latest ones), else 0. One item is compared
    first, so another conversation of the same agent costs one compare, not a
    slice of its whole history."""
    fewest = fewest_continued(limit)
    a, b = old[fewest - 1], new[fewest - 1]
    if a is not b and a != b:
        return 0
    count = shared_prefix(old, new, limit)
    return count if count >= fewest else 0


class MessageMemo(SlotMemo):
    """The last parse of each recent conversation (see the module docstring), and
    `members`: what was checked and parsed of the members a conversation resends
    unchanged besides its messages (formats/member_memo.py)."""

    __slots__ = ("members",)

    def __init__(
        self,
        limit: int = DEFAULT_SLOTS,
        max_bytes: int = HISTORY_CACHE_BYTES,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._slots: SlotGroups[Hashable, _Slot] = SlotGroups(limit, max_bytes, idle_seconds, clock)
        self.members = MemberMemo(max_bytes=max_bytes, idle_seconds=idle_seconds, clock=clock)

    @property
    def max_bytes(self) -> int:
        return self._slots.max_size

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self._slots.max_size = value
        self.members.max_bytes = value

    def match(self, fmt: str, raws: Sequence[Any]) -> Reuse | None:
        """The previous parse of the longest prefix of `raws` equal to a slot's, or
        None when nothing is shared. The last message is never reused: it is the
        turn's own (and usually new) message."""
        if len(raws) < 2:
            return None
        last = len(raws) - 1

        def reusable(slot: _Slot) -> int:  # the most this request can reuse of a slot
            return min(len(slot.raws), last)

        best = self._slots.best(
            (fmt, signature(raws)),
            lambda slot: shared_prefix(slot.raws, raws, reusable(slot)),
            reusable,
            lambda slot: continued_prefix(slot.raws, raws, reusable(slot)),
        )
        if best is None:
            return None
        slot, count = best
        p = slot.parsed
        return _cut(count, p.system, p.messages, p.marks, best)

    def store(
        self, fmt: str, raws: list[Any], parsed: Parsed, size: int, reuse: Reuse | None = None
    ) -> None:
        """Remember a successful parse of `raws` (`size`: the body's bytes, for the
        bound; `reuse`: what `match` gave this parse, whose slot it replaces when it
        continues that conversation); evicts idle slots, then the least recently
        used over any bound."""
        continued = reuse.origin if reuse is not None else None
        self._slots.add((fmt, signature(raws)), _Slot(raws, parsed), size, continued, _length)

    def clear(self) -> None:
        self._slots.clear()
        self.members.clear()


#: A codec's parse of one raw message at `path`, appending to the system parts
#: and the conversation messages.
MessageParser = Callable[[Any, str, list[TextPart], list[Message]], None]


def parse_messages(
    raws: Sequence[Any],
    memo: MessageMemo | None,
    reuse: Reuse | None,
    parse_one: MessageParser,
    system: list[TextPart],
    messages: list[Message],
    field: str = "messages",
) -> Parsed | None:
    """Append to `system` and `messages` from `reuse` (the memo's match for the shared
    prefix, or None), then parse the rest with the codec's `parse_one` (errors name
    `field[i]`); returns what the raw messages appended, for `memo.store` once the
    whole body parsed (None without a memo). Reused messages cost slices, not a loop."""
    s_base, m_base = len(system), len(messages)
    marks: list[Mark] = []
    start = 0
    if reuse is not None:
        system.extend(reuse.system)
        messages.extend(reuse.messages)
        marks.extend(reuse.marks)
        start = reuse.count
    for i in range(start, len(raws)):
        parse_one(raws[i], f"{field}[{i}]", system, messages)
        if memo is not None:
            marks.append((len(system) - s_base, len(messages) - m_base))
    if memo is None:
        return None
    return Parsed(system[s_base:], messages[m_base:], marks)


def parse_tools_reusing(
    raw: Any,
    memo: MessageMemo | None,
    size: int,
    parse: Callable[[Any], list[ToolSpec]],
    kind: str,
) -> list[ToolSpec]:
    """A codec's `parse` of a body's tools; with a memo, the parse this very list
    had in an earlier request of the conversation (formats/member_memo.py; `kind`
    names the codec, `size` is the body's bytes). The list is the request's own
    copy; the specs are shared and, like the messages, never mutated."""
    if memo is None:
        return parse(raw)
    return list(memo.members.parsed(kind, raw, size, lambda: parse(raw)))
