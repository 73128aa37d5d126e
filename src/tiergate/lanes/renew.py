"""Background renewal of in-flight leases, one task per lane turn (issue #27).

A lease used to live as long as the lane (30 minutes by default), so a gateway
killed mid-turn left its lane answering 409 session_tier_busy everywhere for
that long. Now a lease is short (`session_tiers.lease_seconds`, 60 s by default)
and its holder renews it every third of that while the turn runs. A dead holder
stops renewing, so its lease lapses within one lifetime and the next request
takes the lane over (decide.plan_acquire).

A renewal stops when the turn is finalized (`stop`), when the request no longer
holds the lease (an operator released it, or it lapsed and was taken over), and
at the lane TTL from the turn's start: a turn never finalized through a bug can
then hold its lane no longer than a lease could before renewal existed. A store
error skips one renewal; the outage log reports it, the next interval retries.
A stop never cancels a store call in progress: the task sees the stop and ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from tiergate.lanes.errors import SessionTierError
from tiergate.lanes.lease import Lease

log = logging.getLogger(__name__)

#: Renewals per lease lifetime: two may fail (a store blip) before it lapses.
RENEWALS_PER_LEASE = 3
MIN_INTERVAL_SECONDS = 0.05

Renew = Callable[[Lease], Awaitable[bool]]


class LeaseRenewals:
    def __init__(
        self, renew: Renew, lease_seconds: float, clock: Callable[[], float] = time.time
    ) -> None:
        self._renew = renew
        self.interval = max(lease_seconds / RENEWALS_PER_LEASE, MIN_INTERVAL_SECONDS)
        self.clock = clock
        self._running: dict[str, tuple[asyncio.Event, asyncio.Task[None]]] = {}

    def __len__(self) -> int:
        return len(self._running)

    def start(self, lease: Lease, until: float) -> None:
        """Renew `lease` every interval until `stop`, loss of the lease or `until`."""
        stopped = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._run(lease, until, stopped))
        self._running[lease.lease_id] = (stopped, task)
        task.add_done_callback(lambda _: self._forget(lease.lease_id, task))

    def stop(self, lease: Lease) -> None:
        entry = self._running.pop(lease.lease_id, None)
        if entry is not None:
            entry[0].set()

    def _forget(self, lease_id: str, task: asyncio.Task[None]) -> None:
        entry = self._running.get(lease_id)
        if entry is not None and entry[1] is task:
            del self._running[lease_id]

    async def _run(self, lease: Lease, until: float, stopped: asyncio.Event) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopped.wait(), self.interval)
                return  # the turn was finalized
            if self.clock() >= until:
                log.warning("session tier lease not finalized within the lane TTL: renewal ends")
                return
            try:
                held = await self._renew(lease)
            except SessionTierError:
                continue  # the store is down (reported once by the outage log): next interval
            if not held:
                log.info("session tier lease no longer held by its request: renewal ends")
                return

    async def close(self) -> None:
        """Shutdown: every renewal ends (after any store call in progress)."""
        running = list(self._running.values())
        self._running.clear()
        for stopped, _ in running:
            stopped.set()
        await asyncio.gather(*(task for _, task in running), return_exceptions=True)
