"""The one storage protocol every piece of shared gateway state goes through.

Affinity pins, escalation tier state, share-cap day buckets, strike rings and
bandit arms all live behind this protocol, so a single-process deployment uses
the in-memory backend and a fleet shares Redis with no code change.

Values are bytes (callers encode with orjson). Every write takes a TTL in
seconds (None = no expiry). `transact` is the optimistic read-modify-write
used by the deferred escalation commit: the callback receives fresh values and
returns the new ones; a concurrent writer makes the backend re-run it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")


class StateUnavailable(Exception):
    """The backend cannot be reached. Callers degrade (affinity is a no-op)."""


@dataclass(slots=True)
class Write:
    """One write produced by a transaction callback. value None deletes the key."""

    key: str
    value: bytes | None
    ttl: float | None = None


@dataclass(slots=True)
class Incr:
    """One counter increment of a batch: add `amount`, (re)set the TTL if given."""

    key: str
    amount: float
    ttl: float | None = None


TransactFn = Callable[[list[bytes | None]], tuple[list[Write], T]]


class StateStore(Protocol):
    """Key-value state with TTLs, counters and optimistic transactions."""

    name: str

    async def get(self, key: str) -> bytes | None: ...

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """All values in one round trip (Redis MGET)."""
        ...

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None: ...

    async def set_many(self, writes: Sequence[Write]) -> None:
        """Several writes in one round trip (Redis pipeline); value None deletes."""
        ...

    async def delete(self, key: str) -> None: ...

    async def incr(self, key: str, amount: float = 1.0, ttl: float | None = None) -> float:
        """Add to a numeric counter, (re)setting its TTL; returns the new value."""
        ...

    async def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes | None, ttl: float | None = None
    ) -> bool:
        """Write `value` only if the key currently holds `expected` (None = absent)."""
        ...

    async def transact(self, keys: Sequence[str], fn: TransactFn[T], retries: int = 16) -> T:
        """Optimistic read-modify-write over `keys`.

        `fn` is pure: given the current values it returns the writes to apply
        and a result. If any key changed between read and write, re-read and
        re-run `fn` (Redis WATCH/MULTI; memory needs no retry under asyncio).
        """
        ...

    async def apply_batch(
        self,
        writes: Sequence[Write],
        incrs: Sequence[Incr] = (),
        guard: tuple[str, bytes | None] | None = None,
    ) -> bool:
        """Apply writes and counter increments atomically in ONE round trip.

        With `guard=(key, expected)` nothing is applied, and False returned,
        unless `key` still holds `expected` (None = absent): the one-trip
        commit of a value computed from an earlier read (Redis: one Lua call).
        """
        ...

    async def ping(self) -> bool: ...

    async def close(self) -> None: ...


AsyncFactory = Callable[[], Awaitable[StateStore]]
