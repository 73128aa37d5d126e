"""Keep serving when the state backend goes away, and resume when it returns.

ResilientStore wraps any StateStore. When the backend raises StateUnavailable
it counts the error, logs one warning per `log_interval` (not one per request),
and for `retry_interval` seconds afterwards fails fast without touching the
network, so a dead Redis costs each request nothing instead of a connect
timeout. After that interval the next call probes the backend again; the first
success clears the degraded state and logs the recovery. Errors are re-raised:
callers decide what "degrade" means for them (affinity becomes a no-op; see
`try_get_many` / `try_set_many` for that common case).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from tiergate import metrics
from tiergate.state.base import Incr, StateStore, StateUnavailable, TransactFn, Write
from tiergate.state.redis import TransactionConflict

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class ResilientStore:
    """A StateStore that fails fast while its backend is down and recovers by itself."""

    def __init__(
        self,
        inner: StateStore,
        *,
        log_interval: float = 30.0,
        retry_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self._log_interval = log_interval
        self._retry_interval = retry_interval
        self._clock = clock
        self._degraded_since: float | None = None
        self._fail_fast_until = 0.0
        self._last_log = -float("inf")
        self._suppressed = 0

    @property
    def degraded(self) -> bool:
        """True from the first backend failure until the next successful call."""
        return self._degraded_since is not None

    # ---- bookkeeping ---------------------------------------------------------

    def _on_failure(self, op: str, err: StateUnavailable) -> None:
        now = self._clock()
        metrics.STATE_STORE_ERRORS_TOTAL.labels(backend=self.name, op=op).inc()
        if self._degraded_since is None:
            self._degraded_since = now
            metrics.STATE_STORE_DEGRADED.labels(backend=self.name).set(1)
        self._fail_fast_until = now + self._retry_interval
        if now - self._last_log >= self._log_interval:
            log.warning(
                "state backend %s unreachable (%s); affinity and tier state are no-ops "
                "until it returns [%d more failures since the last report]",
                self.name,
                err,
                self._suppressed,
            )
            self._last_log = now
            self._suppressed = 0
        else:
            self._suppressed += 1

    def _on_success(self) -> None:
        if self._degraded_since is not None:
            log.warning(
                "state backend %s reachable again after %.1fs degraded",
                self.name,
                self._clock() - self._degraded_since,
            )
            self._degraded_since = None
            self._fail_fast_until = 0.0
            self._last_log = -float("inf")  # report the next outage straight away
            self._suppressed = 0
            metrics.STATE_STORE_DEGRADED.labels(backend=self.name).set(0)

    async def _call(self, op: str, call: Callable[[], Awaitable[R]]) -> R:
        if self._clock() < self._fail_fast_until:
            raise StateUnavailable(f"{self.name} {op}: backend degraded (failing fast)")
        try:
            result = await call()
        except TransactionConflict:
            raise  # contention, not an outage: the backend is fine
        except StateUnavailable as err:
            self._on_failure(op, err)
            raise
        self._on_success()
        return result

    # ---- StateStore ----------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        return await self._call("get", lambda: self.inner.get(key))

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return await self._call("get_many", lambda: self.inner.get_many(keys))

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        await self._call("set", lambda: self.inner.set(key, value, ttl))

    async def set_many(self, writes: Sequence[Write]) -> None:
        await self._call("set_many", lambda: self.inner.set_many(writes))

    async def delete(self, key: str) -> None:
        await self._call("delete", lambda: self.inner.delete(key))

    async def incr(self, key: str, amount: float = 1.0, ttl: float | None = None) -> float:
        return await self._call("incr", lambda: self.inner.incr(key, amount, ttl))

    async def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes | None, ttl: float | None = None
    ) -> bool:
        return await self._call(
            "compare_and_set", lambda: self.inner.compare_and_set(key, expected, value, ttl)
        )

    async def transact(self, keys: Sequence[str], fn: TransactFn[T], retries: int = 16) -> T:
        return await self._call("transact", lambda: self.inner.transact(keys, fn, retries))

    async def apply_batch(
        self,
        writes: Sequence[Write],
        incrs: Sequence[Incr] = (),
        guard: tuple[str, bytes | None] | None = None,
    ) -> bool:
        return await self._call("apply_batch", lambda: self.inner.apply_batch(writes, incrs, guard))

    async def ping(self) -> bool:
        """Always probes the backend (health checks must not be short-circuited)."""
        ok = await self.inner.ping()
        if ok:
            self._on_success()
        return ok

    async def ping_nodes(self) -> dict[str, bool] | None:
        """Per node (a cluster's primaries: `host:port` -> answered), or None for a
        backend that is one node (then `ping` is its health)."""
        probe = getattr(self.inner, "ping_nodes", None)
        if probe is None:
            return None
        nodes: dict[str, bool] = await probe()
        if nodes and all(nodes.values()):
            self._on_success()
        return nodes

    async def close(self) -> None:
        await self.inner.close()


async def try_get_many(store: StateStore, keys: Sequence[str]) -> list[bytes | None] | None:
    """get_many, or None when the backend is unavailable (the caller degrades)."""
    try:
        return await store.get_many(keys)
    except StateUnavailable:
        return None


async def try_set_many(store: StateStore, writes: Sequence[Write]) -> bool:
    """set_many; False when the backend is unavailable and the writes were skipped."""
    try:
        await store.set_many(writes)
    except StateUnavailable:
        return False
    return True
