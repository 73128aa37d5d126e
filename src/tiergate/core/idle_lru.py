"""A map bounded twice: at most `limit` entries, and none idle for longer than
`idle_seconds`; the least recently used go first.

Why: per-session memos (routing.transcript's summaries) are only useful while
a session is active, but sessions end without telling the gateway. A count bound
alone is reached only after `limit` sessions, which on a busy gateway can take
hours, so memory climbs all that while (issue #27: RSS still rising after a
60-minute soak). The idle bound makes the steady size depend on how many sessions
are active (arrival rate x idle_seconds), not on how long the process has run.
Expiry is amortised O(1): entries are kept in last-use order, and each `put`
drops expired entries from the old end. Not thread-safe (one event loop).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class IdleLru(Generic[K, V]):
    """LRU with a size bound and an idle time-to-live."""

    __slots__ = ("_clock", "_items", "idle_seconds", "limit")

    def __init__(
        self, limit: int, idle_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if limit < 1 or idle_seconds <= 0:
            raise ValueError("IdleLru needs limit >= 1 and idle_seconds > 0")
        self.limit = limit
        self.idle_seconds = idle_seconds
        self._clock = clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()  # oldest use first

    def __len__(self) -> int:
        return len(self._items)

    def pop(self, key: K) -> V | None:
        """Remove and return the entry (None if absent or idle too long)."""
        held = self._items.pop(key, None)
        if held is None or self._clock() - held[0] > self.idle_seconds:
            return None
        return held[1]

    def put(self, key: K, value: V) -> None:
        """Store `key` as the most recently used, evicting expired and overflow entries."""
        now = self._clock()
        items = self._items
        items.pop(key, None)
        cutoff = now - self.idle_seconds
        while items:
            used = next(iter(items.values()))[0]
            if used >= cutoff and len(items) < self.limit:
                break
            items.popitem(last=False)
        items[key] = (now, value)
