"""The one lane-storage contract the memory, SQLite and Redis adapters share.

Two operations carry the whole feature: `load` a lane and `swap` it with
compare-and-swap semantics on an opaque version tag (etag). Decisions are
made in pure code between the two; a concurrent writer makes `swap` return
False and the caller re-reads. Random etags (not counters) rule out ABA when a
lane is deleted and re-created. An expired record counts as absent everywhere,
so expiry needs no background job. Live lanes are capped per store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tiergate.lanes.record import LaneRecord

DEFAULT_CAPACITY = 10_000


@dataclass(frozen=True, slots=True)
class Versioned:
    record: LaneRecord
    etag: str


class LaneStore(Protocol):
    """Per-lane atomic storage. Every method raises StorageUnavailable on failure."""

    name: str
    capacity: int

    async def load(self, scope: str, now: float) -> Versioned | None:
        """The live record of a lane, or None if absent or expired at `now`."""
        ...

    async def swap(
        self, scope: str, expected: str | None, record: LaneRecord | None, now: float
    ) -> bool:
        """Write `record` (None deletes) iff the lane's etag is `expected`.

        `expected` None means "absent or expired". Returns False on a version
        mismatch. Raises CapacityExhausted if the write would add a live lane
        while `capacity` live lanes exist (after pruning expired ones).
        """
        ...

    async def live_count(self, now: float) -> int: ...

    async def ping(self) -> bool: ...

    async def close(self) -> None: ...
