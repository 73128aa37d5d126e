"""Memo slots grouped by a cheap key, several conversations to a key.

Why: the per-conversation memos (formats/body_decode.py, message_memo.py,
render_memo.py, body_encode.py) find a conversation's previous request by a key
read off its opening: the first bytes, the first two messages, the first
message's identity. Conversations that open the same way share that key: one
task run several times at once (best-of-n, pass@k), sub-agents that share their
parent's opening, agents in one repository whose first message starts with the
same context block. With one slot per key each such request replaced the other
conversation's slot, so the other's next turn redid its whole history (issue
#30: turn 200 cost 2.65-3.15x turn 2 beside a twin). Here a key holds up to
PER_KEY slots, and the caller's request takes the slot sharing the most with
it. A request that continues a slot (shares all of it but the last `slack`
elements, which a client may edit: Claude Code moves its cache marker) takes
that slot's place; any other request adds a slot of its own. Many sessions of
one coding agent share a key, so a memo that can tell a continuation cheaply
passes `best` a test that finds it without scoring every slot.

Bounded by slot count, by the sizes held (a memo's body bytes), and by idle
time (core.idle_lru's reasoning: sessions end without telling the gateway);
the least recently used slot goes first, and an idle slot is never returned.
A new conversation's slot does not evict a slot still shielded (used within a
few of its conversation's turn gaps: SHIELD_SECONDS' note): it is not kept
instead. Live sessions come back in turn, so when more of them are live than
a memo holds, plain LRU evicted each one just before its next turn, and none
was ever continued (48 sessions of 441 KB against a 16 MB memo: 7.5x the CPU
of one session, worse than no memo at all; docs/performance.md, session 26).
Shielded, the memo keeps the sessions it holds and serves the rest whole,
while a session that ended gives way a few of its turn gaps later. A
continuation still evicts the least recently used to grow, so the memo sheds
one session at a time as they grow.
Not thread-safe (one event loop per process). Pure: no I/O.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from operator import itemgetter
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
S = TypeVar("S")

#: Slots one key keeps: conversations opening the same way, alive at once. Many
#: sessions of one agent open alike; past this many each request's slot was gone
#: by its next turn and every body was decoded whole (3x the CPU at 24 sessions of
#: 200 KB; docs/performance.md, session 25).
PER_KEY = 64
#: Slots scored with `shared` for a request that continues none (a new
#: conversation): the most recently used serve it as well as any.
SCORED_PER_KEY = 16
#: A request sharing all but this many of a slot's elements continues its
#: conversation (a client may edit its latest messages) and takes its place.
CONTINUATION_SLACK = 2
#: How long after its use a slot is not evicted for a new conversation's slot:
#: GAP_FACTOR times its conversation's turn gap (the longest lately), at least
#: MIN_SHIELD_SECONDS, at most SHIELD_SECONDS. A few gaps: an agent's turns vary
#: (a quick tool, then a test run), while a session that ended gives way soon
#: after its last turn. A slot not yet continued gets the minimum: a memo may
#: fail to recognise a conversation (its objects rebuilt upstream), and such
#: slots, never continued, must not hold it for long (docs/performance.md,
#: session 26).
SHIELD_SECONDS = 120.0
MIN_SHIELD_SECONDS = 5.0
GAP_FACTOR = 4.0
#: The turn gap of a conversation not seen twice yet.
NEW = -1.0
#: MiB of bodies each history memo (body decode, message parse, upstream encode)
#: holds by default (server.history_cache_mb). A coding agent's session at turn
#: 200 is about 440 KB, and past turn 400 over 1 MB: 16 MiB held 36 such
#: sessions, or 16 of 1 MB, which one team's agents pass. Past the bound a
#: session is served whole, at several times the CPU (64 sessions of 441 KB:
#: a mean of 8.9-9.6 ms a request at 16 MiB, 2.6-4.1 ms at 64 MiB;
#: docs/performance.md, session 27). Memory: 0.5-1 MiB a held session of 441 KB
#: across the memos.
HISTORY_CACHE_MB = 64
HISTORY_CACHE_BYTES = HISTORY_CACHE_MB * 1024 * 1024


def fewest_continued(length: int) -> int:
    """The fewest of a slot's `length` elements a request continuing it shares."""
    return max(length - CONTINUATION_SLACK, 1)


#: A slot as held: its value, size, when it was stored, and its conversation's
#: turn gap in seconds, the longest lately (NEW: not seen twice yet).
_Held = tuple[S, int, float, float]


class SlotGroups(Generic[K, S]):
    """Slots by key, each key's most recently used first (see the module docstring)."""

    __slots__ = (
        "_clock",
        "_count",
        "_groups",
        "_size",
        "idle_seconds",
        "limit",
        "max_size",
        "min_shield_seconds",
        "shield_seconds",
        "turned_away",
    )

    def __init__(
        self,
        limit: int,
        max_size: int,
        idle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        shield_seconds: float = SHIELD_SECONDS,
        min_shield_seconds: float = MIN_SHIELD_SECONDS,
    ) -> None:
        self.limit = limit
        self.max_size = max_size
        self.idle_seconds = idle_seconds
        self.shield_seconds = shield_seconds
        self.min_shield_seconds = min_shield_seconds
        #: new conversations not kept for want of room (a memo too small: /metrics)
        self.turned_away = 0
        self._clock = clock
        #: groups in least-recently-used order
        self._groups: OrderedDict[K, list[_Held[S]]] = OrderedDict()
        self._size = 0
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def size(self) -> int:
        return self._size

    def best(
        self,
        key: K,
        shared: Callable[[S], int],
        length: Callable[[S], int],
        continues: Callable[[S], int] | None = None,
    ) -> tuple[S, int] | None:
        """The live slot of `key` sharing the most with a request, by `shared` (0:
        nothing), and that count; on a tie the slot the request wholly continues
        (`shared == length`), then the most recently used. None if none shares.

        `continues` (optional) is a cheaper test: the count a request shares with a
        slot when it continues it (all but at most CONTINUATION_SLACK latest
        elements), else 0. Then the continued slot ranking highest is the answer,
        and no slot is scored by `shared`: many live conversations of one agent
        open alike, and scoring each (a compare up to where it parts from the
        request) cost a request about 20 us a slot (docs/performance.md, session
        25). Slots are tried longest first, and the search stops at a slot the
        request wholly continues or at one too short to share more; a young
        conversation's slot, no longer than the opening it shares, is continued
        by any request of that opening, so a longer one must outrank it. A
        request that continues no slot is scored against the SCORED_PER_KEY most
        recently used only."""
        group = self._groups.get(key)
        if group is None:
            return None
        cutoff = self._clock() - self.idle_seconds
        if len(group) == 1:  # the usual case: one conversation per opening
            value, _, used, _ = group[0]
            if used < cutoff:
                return None
            count = shared(value)
            return (value, count) if count else None
        if continues is not None:
            found = _continued(group, cutoff, length, continues)
            if found is not None:
                return found
            group = group[:SCORED_PER_KEY]
        best: S | None = None
        best_rank = (0, False)
        for value, _, used, _ in group:
            if used < cutoff:
                continue
            count = shared(value)
            if not count:
                continue
            rank = (count, count >= length(value))
            if rank > best_rank:
                best, best_rank = value, rank
        return None if best is None else (best, best_rank[0])

    def add(
        self,
        key: K,
        value: S,
        size: int,
        continued: tuple[S, int] | None = None,
        length: Callable[[S], int] | None = None,
    ) -> bool:
        """Remember `value` (of `size`) as `key`'s most recent slot; whether it was
        kept. `continued` is the slot the request was matched to and how much it
        shared: when that is all of it, or all but CONTINUATION_SLACK elements and
        more than the opening one, the conversation moved on and its old slot goes.
        Then evicts idle slots and the least recently used over any bound. A value
        larger than `max_size` is not kept (the old slot still goes: the new value
        supersedes it), nor a new conversation's that would evict a shielded
        slot (see the module docstring)."""
        now = self._clock()
        group = self._groups.get(key)
        index = _moved_on(group, continued, length)
        gap = NEW
        if group is not None and index is not None:
            _, _, last_used, last_gap = group[index]
            gap = max(now - last_used, last_gap / 2)  # the longest lately, decaying
            self._drop(group, index)  # the group stays: the new slot joins it
        if size > self.max_size or (index is None and not self._room(key, size, now)):
            if group is not None and not group:
                del self._groups[key]
            self.turned_away += size <= self.max_size
            return False
        if group is None:
            group = self._groups[key] = []
        else:
            self._groups.move_to_end(key)  # now the most recently used group
        group.insert(0, (value, size, now, gap))
        self._size += size
        self._count += 1
        if len(group) > PER_KEY:
            self._remove_held(key, group, len(group) - 1)
        cutoff = now - self.idle_seconds
        while self._groups:
            oldest_key, oldest = next(iter(self._groups.items()))
            over = self._count > self.limit or self._size > self.max_size
            if oldest[-1][2] >= cutoff and not over:
                break
            self._remove_held(oldest_key, oldest, len(oldest) - 1)
        return True

    def keeps(
        self,
        key: K,
        size: int,
        continued: tuple[S, int] | None = None,
        length: Callable[[S], int] | None = None,
    ) -> bool:
        """Whether `add(key, <value>, size, continued, length)` would keep the value
        now: a memo asks before building a slot it would not keep, and does not
        add it when the answer is no (it counts in `turned_away` here)."""
        if size > self.max_size:
            return False
        if _moved_on(self._groups.get(key), continued, length) is not None:
            return True
        if self._room(key, size, self._clock()):
            return True
        self.turned_away += 1  # the caller does not add it
        return False

    def _room(self, key: K, size: int, now: float) -> bool:
        """Whether a new conversation's slot of `size` fits under `key` once idle
        slots and unshielded ones go, in `add`'s eviction order (`key`'s group
        last: the new slot makes it the most recently used)."""
        cutoff = now - self.idle_seconds
        count, total = self._count + 1, self._size + size
        group = self._groups.get(key)
        if group is not None and len(group) >= PER_KEY:  # its least recent slot goes first
            if self._shielded(group[-1], now, cutoff):
                return False
            count, total = count - 1, total - group[-1][1]
        if count <= self.limit and total <= self.max_size:
            return True
        others = (g for k, g in self._groups.items() if k != key)
        own = [group[: PER_KEY - 1]] if group else []
        for held in itertools.chain(others, own):
            for slot in reversed(held):
                if self._shielded(slot, now, cutoff):
                    return False
                count, total = count - 1, total - slot[1]
                if count <= self.limit and total <= self.max_size:
                    return True
        return False

    def _shielded(self, slot: _Held[S], now: float, cutoff: float) -> bool:
        """Whether `slot` is live and used within its shield (SHIELD_SECONDS' note)."""
        shield = min(self.shield_seconds, max(self.min_shield_seconds, GAP_FACTOR * slot[3]))
        return slot[2] >= max(cutoff, now - shield)

    def _drop(self, group: list[_Held[S]], index: int) -> None:
        self._size -= group.pop(index)[1]
        self._count -= 1

    def _remove_held(self, key: K, group: list[_Held[S]], index: int) -> None:
        self._drop(group, index)
        if not group:
            del self._groups[key]

    def clear(self) -> None:
        self._groups.clear()
        self._size = 0
        self._count = 0


class SlotMemo:
    """What a memo built on SlotGroups reports of itself (for /metrics, benches and
    tests); the body decode, message and body encode memos derive from it."""

    __slots__ = ("_slots",)
    _slots: SlotGroups[Any, Any]

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def bytes_held(self) -> int:
        return self._slots.size

    @property
    def turned_away(self) -> int:
        """New conversations not kept: more active ones than the bound holds."""
        return self._slots.turned_away

    @property
    def max_bytes(self) -> int:
        """The bound on body bytes held; a body larger than this is not remembered."""
        return self._slots.max_size


def _moved_on(
    group: list[_Held[S]] | None,
    continued: tuple[S, int] | None,
    length: Callable[[S], int] | None,
) -> int | None:
    """The index in `group` of the slot a request continues (`continued`, as `add`
    takes it) when the conversation moved on from it, else None."""
    if continued is None or length is None or not group:
        return None
    old, count = continued
    held = length(old)
    if count >= held or (count > 1 and count + CONTINUATION_SLACK >= held):
        for i, slot in enumerate(group):
            if slot[0] is old:
                return i
    return None


def _continued(
    group: list[_Held[S]],
    cutoff: float,
    length: Callable[[S], int],
    continues: Callable[[S], int],
) -> tuple[S, int] | None:
    """`SlotGroups.best`'s answer among the live slots a request continues, or None:
    the highest (count, wholly) rank, longest slot first, the most recent first
    among equals."""
    live = [(length(value), value) for value, _, used, _ in group if used >= cutoff]
    live.sort(key=itemgetter(0), reverse=True)  # stable
    found: S | None = None
    rank = (0, False)
    for size, value in live:
        if size < rank[0] or rank[1]:
            break  # too short to share more, or a slot already wholly continued
        count = continues(value)
        if count and (count, count >= size) > rank:
            found, rank = value, (count, count >= size)
    return None if found is None else (found, rank[0])
