"""Completions the lane store missed, retried until it records them.

A turn's completion (and the release of its lease) can fail because the store is
unreachable at that moment. Dropping it left the lease held until the lane TTL
(30 minutes of 409 session_tier_busy for that lane). Instead the completion is
kept here, in memory, and retried every `interval` seconds until the store
records it or the lease expires anyway. So a lease outlives the request that took
it by at most the store's outage plus one interval (and the store timeout); only
a crash of the process leaves it to the lane TTL.

A retry records the same outcome as the original attempt would have; if the
lease is gone meanwhile (expired, replaced), plan_finalize ignores it, so a late
retry can never overwrite a newer lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tiergate import metrics
from tiergate.lanes.errors import SessionTierError

log = logging.getLogger(__name__)

RETRY_INTERVAL_SECONDS = 1.0


@dataclass(slots=True)
class _Pending:
    attempt: Callable[[], Awaitable[object]]  # raises SessionTierError while unreachable
    lease_expires_at: float


class PendingCompletions:
    def __init__(
        self,
        interval: float = RETRY_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.interval = interval
        self.clock = clock
        self._items: list[_Pending] = []
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._items)

    def add(self, attempt: Callable[[], Awaitable[object]], lease_expires_at: float) -> None:
        """Retry `attempt` until it stops raising SessionTierError or the lease expires."""
        self._items.append(_Pending(attempt, lease_expires_at))
        metrics.SESSION_TIER_PENDING_COMPLETIONS.set(len(self._items))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._items:
            await asyncio.sleep(self.interval)
            await self.retry_once()

    async def retry_once(self) -> None:
        """One pass over the pending completions, oldest first; stops at the first
        that still fails (the store is still down: the rest would fail too)."""
        while self._items:
            item = self._items[0]
            if item.lease_expires_at <= self.clock():
                self._items.pop(0)  # the lease expired by itself: nothing to release
                continue
            try:
                await item.attempt()
            except SessionTierError:
                break
            self._items.pop(0)
        metrics.SESSION_TIER_PENDING_COMPLETIONS.set(len(self._items))

    async def close(self) -> None:
        """At shutdown: one last attempt each, then give up (the lane TTL bounds them)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._items:
            await self.retry_once()
            if self._items:
                log.warning(
                    "%d session tier completions not recorded at shutdown; their leases "
                    "expire with the lane TTL",
                    len(self._items),
                )
