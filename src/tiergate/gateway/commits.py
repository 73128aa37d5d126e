"""Deferred commits, ordered per session.

A turn's state writes (pins, tier state, share counters, bandit feedback) need
the upstream reply but not the client: sending the reply first takes the commit
off the request's latency. The price would be a race, where a client that fires
its next turn at once gets it planned on state that does not include the
previous turn yet. `SessionCommits` closes that race inside a process: the
session's next turn waits for its predecessor's commit (normally long finished)
before it reads state.

Across processes (a fleet on Redis) the next turn may land on another gateway,
so there a non-streaming reply leaves only once its commit has been *sent*:
`spawn_sent` gives the commit the loop turns it needs to write its one EVALSHA
before the reply is written, and the store's acknowledgement is awaited in the
background. Redis applies what reached it first first, and the client's next
turn can only start after the reply, so another gateway's read finds this
turn's writes. A commit that must first reconnect (or re-read, after a failed
guard) writes later; a next turn that overtakes it plans on the previous pins,
and the guarded commit still keeps the tier state right (docs/performance.md,
session 25). Streamed replies commit as the stream ends, in both cases.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)

SETTLE_TIMEOUT_SECONDS = 2.0
"""Longest a turn waits for its predecessor's commit. Commits are bounded by the
state store's own timeouts (0.5 s on Redis), so this only guards against a bug."""


class SessionCommits:
    """Background commit tasks, keyed by session scope (None: no session)."""

    __slots__ = ("_by_scope", "_running")

    def __init__(self) -> None:
        self._running: set[asyncio.Task[None]] = set()
        self._by_scope: dict[str, asyncio.Task[None]] = {}

    def spawn(self, scope: str | None, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run `coro` in the background; the scope's next `settle` waits for it."""
        task = asyncio.get_running_loop().create_task(coro)
        self._running.add(task)
        if scope is not None:
            self._by_scope[scope] = task
        task.add_done_callback(lambda t: self._done(scope, t))
        return task

    async def spawn_sent(self, scope: str | None, coro: Coroutine[Any, Any, None]) -> None:
        """`spawn` and return once the commit's writes have left for the store.

        Two loop turns: in the first, the task runs up to its first real wait,
        which on the usual path is the reply to its one EVALSHA, already written
        or queued behind commands in flight; in the second the client's queue
        is written (`resp._Connection.flush`). Waiting for the acknowledgement
        instead would put a store round trip on every reply.
        """
        self.spawn(scope, coro)
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    def _done(self, scope: str | None, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if scope is not None and self._by_scope.get(scope) is task:
            del self._by_scope[scope]
        if not task.cancelled() and task.exception() is not None:
            log.error("deferred commit failed", exc_info=task.exception())

    async def settle(self, scope: str | None) -> None:
        """Wait until the scope's last commit has landed (no-op when none is running)."""
        if scope is None:
            return
        task = self._by_scope.get(scope)
        if task is None or task.done():
            return
        try:
            # shield: a cancelled waiter (client gone) must not cancel the commit
            await asyncio.wait_for(asyncio.shield(task), SETTLE_TIMEOUT_SECONDS)
        except TimeoutError:
            log.warning("previous commit still running; planning on current state")
        except Exception:  # noqa: BLE001 - its failure is logged by _done
            pass

    def pending(self) -> int:
        return len(self._running)

    async def drain(self) -> None:
        """Wait for every commit still running (graceful shutdown)."""
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
