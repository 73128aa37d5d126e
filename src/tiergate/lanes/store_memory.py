"""Process-local lane store: the default, for a single gateway process.

Atomic without locks: each operation runs to completion between awaits on the
one event loop. At most `capacity` (10,000) live lanes; expired entries are
pruned on access, and all of them when a new lane would exceed the cap.
"""

from __future__ import annotations

import uuid

from tiergate.lanes.errors import CapacityExhausted
from tiergate.lanes.record import LaneRecord
from tiergate.lanes.store_base import DEFAULT_CAPACITY, Versioned


class MemoryLaneStore:
    name = "memory"

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._lanes: dict[str, Versioned] = {}

    def _live(self, scope: str, now: float) -> Versioned | None:
        entry = self._lanes.get(scope)
        if entry is not None and not entry.record.live(now):
            del self._lanes[scope]  # prune on access
            return None
        return entry

    def prune(self, now: float) -> int:
        expired = [s for s, v in self._lanes.items() if not v.record.live(now)]
        for scope in expired:
            del self._lanes[scope]
        return len(expired)

    async def load(self, scope: str, now: float) -> Versioned | None:
        return self._live(scope, now)

    async def swap(
        self, scope: str, expected: str | None, record: LaneRecord | None, now: float
    ) -> bool:
        current = self._live(scope, now)
        if (current.etag if current else None) != expected:
            return False
        if record is None:
            self._lanes.pop(scope, None)
            return True
        if current is None and len(self._lanes) >= self.capacity:
            self.prune(now)
            if len(self._lanes) >= self.capacity:
                raise CapacityExhausted()
        self._lanes[scope] = Versioned(record, uuid.uuid4().hex)
        return True

    async def live_count(self, now: float) -> int:
        return sum(1 for v in self._lanes.values() if v.record.live(now))

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        self._lanes.clear()
