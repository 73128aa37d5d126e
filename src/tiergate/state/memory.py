"""In-process state backend: the embedded default for a single gateway process.

A dict of (value, expires_at) with Redis-like semantics so the contract tests
hold for both backends. Atomicity comes from asyncio itself: no method awaits
between reading and writing, so compare_and_set and transact cannot interleave
with another coroutine and never need a retry.

Expiry is lazy (an expired key reads as absent and is dropped on access) plus a
bounded prune on every write: a min-heap of expiry times is popped at most
`prune_batch` entries at a time, so no single request pays for a large sweep.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from tiergate.state.base import Incr, TransactFn, Write

T = TypeVar("T")

_Entry = tuple[bytes, float | None]  # (value, monotonic expiry or None)


def format_number(value: float) -> bytes:
    """Encode a counter value the way Redis INCRBYFLOAT does: no trailing '.0'."""
    if math.isfinite(value) and value == int(value) and abs(value) < 2**63:
        return str(int(value)).encode()
    return repr(value).encode()


def parse_number(raw: bytes | None) -> float:
    """Decode a counter; a missing key counts as 0. Non-numbers raise ValueError."""
    if raw is None:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("value is not a valid float") from None
    if not math.isfinite(value):
        raise ValueError("value is not a valid float")
    return value


class MemoryStore:
    """StateStore over a dict. Single process only; state is lost on restart."""

    name = "memory"

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        prune_batch: int = 128,
    ) -> None:
        self._clock = clock
        self._prune_batch = prune_batch
        self._data: dict[str, _Entry] = {}
        self._expiries: list[tuple[float, str]] = []  # heap; may hold stale entries

    # ---- internals -----------------------------------------------------------

    def _live(self, key: str, now: float) -> bytes | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        value, expires_at = entry
        if expires_at is not None and expires_at <= now:
            del self._data[key]
            return None
        return value

    def _put(self, key: str, value: bytes | None, ttl: float | None, now: float) -> None:
        """Write or delete. A TTL <= 0 means "already expired", so it deletes."""
        if value is None or (ttl is not None and ttl <= 0):
            self._data.pop(key, None)
            return
        expires_at = None if ttl is None else now + ttl
        # An exact-size copy: orjson's output can pin a 4 KiB buffer, which at
        # 100,000 sessions is most of the process's memory (bench_memory.py).
        self._data[key] = (bytes(memoryview(value)), expires_at)
        if expires_at is not None:
            heapq.heappush(self._expiries, (expires_at, key))

    def _prune(self, now: float) -> None:
        """Drop up to `prune_batch` expired keys; compact the heap if it is mostly stale."""
        heap = self._expiries
        for _ in range(self._prune_batch):
            if not heap or heap[0][0] > now:
                break
            expires_at, key = heapq.heappop(heap)
            entry = self._data.get(key)
            # Only delete if this heap entry is the key's current expiry (not a stale one).
            if entry is not None and entry[1] == expires_at:
                del self._data[key]
        if len(heap) > 2 * len(self._data) + 1024:
            self._expiries = [(e[1], k) for k, e in self._data.items() if e[1] is not None]
            heapq.heapify(self._expiries)

    def __len__(self) -> int:
        """Number of stored keys, including expired ones not yet pruned."""
        return len(self._data)

    # ---- StateStore ----------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        return self._live(key, self._clock())

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """`_live` per key, inlined: a router request reads about a dozen keys."""
        now = self._clock()
        data = self._data
        out: list[bytes | None] = []
        for key in keys:
            entry = data.get(key)
            if entry is not None and entry[1] is not None and entry[1] <= now:
                del data[key]  # expired: absent, and dropped on access
                entry = None
            out.append(None if entry is None else entry[0])
        return out

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        now = self._clock()
        self._put(key, value, ttl, now)
        self._prune(now)

    async def set_many(self, writes: Sequence[Write]) -> None:
        now = self._clock()
        for w in writes:
            self._put(w.key, w.value, w.ttl, now)
        self._prune(now)

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def incr(self, key: str, amount: float = 1.0, ttl: float | None = None) -> float:
        """Like INCRBYFLOAT (+ PEXPIRE when ttl is given; ttl None keeps the current expiry)."""
        return self._incr(key, amount, ttl)

    def _incr(self, key: str, amount: float, ttl: float | None) -> float:
        """`incr` without a coroutine per call (apply_batch runs several per request)."""
        if ttl is not None and ttl <= 0:
            raise ValueError("incr ttl must be positive or None")
        now = self._clock()
        current = self._live(key, now)
        value = parse_number(current) + amount
        if not math.isfinite(value):
            raise ValueError("increment would produce NaN or Infinity")
        if ttl is None:
            kept_expiry = None if current is None else self._data[key][1]
            self._data[key] = (format_number(value), kept_expiry)
        else:
            self._put(key, format_number(value), ttl, now)
        self._prune(now)
        return value

    async def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes | None, ttl: float | None = None
    ) -> bool:
        now = self._clock()
        if self._live(key, now) != expected:
            return False
        self._put(key, value, ttl, now)
        return True

    async def transact(self, keys: Sequence[str], fn: TransactFn[T], retries: int = 16) -> T:
        """Atomic without retries: nothing can run between this read and write."""
        now = self._clock()
        writes, result = fn([self._live(k, now) for k in keys])
        for w in writes:
            self._put(w.key, w.value, w.ttl, now)
        self._prune(now)
        return result

    async def apply_batch(
        self,
        writes: Sequence[Write],
        incrs: Sequence[Incr] = (),
        guard: tuple[str, bytes | None] | None = None,
    ) -> bool:
        """Atomic by construction: nothing awaits between the check and the writes."""
        now = self._clock()
        if guard is not None and self._live(guard[0], now) != guard[1]:
            return False
        for w in writes:
            self._put(w.key, w.value, w.ttl, now)
        for inc in incrs:
            self._incr(inc.key, inc.amount, inc.ttl)
        return True

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        return None
