"""The serving process's start-up heap, frozen once so full collections skip it,
and every collection's pause timed for /metrics.

Why: CPython's full (generation 2) collection walks every object the cycle
collector tracks. A gateway holds about 110 K of them from start-up alone
(modules, the config, routing tables, pydantic and SQLAlchemy machinery), all of
which live as long as the process. Served 200-turn agent sessions measured full
passes of 47-118 ms on a 2-core VM: a stall for every request in flight, and the
slowest requests of the run (issue #30's p99 bar; docs/performance.md, "Session
22"). `gc.freeze()`, the gc module's documented remedy, moves what exists now
into a permanent generation that collections never visit, so they walk only
what serving created (memos, sessions). Frozen objects are still freed by
reference counting; only a cycle among them would be kept, and start-up's
garbage is collected just before the freeze.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

from tiergate.metrics import GC_PAUSE_SECONDS

log = logging.getLogger("tiergate.gc")


def freeze_startup_heap() -> int:
    """Collect start-up's garbage, then freeze what is left; returns the number of
    objects frozen. Call once, when serving starts."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("start-up heap frozen", extra={"objects": frozen})
    return frozen


class PauseTimer:
    """A gc callback timing each collection into tiergate_gc_pause_seconds{generation}."""

    __slots__ = ("_observers", "_started")

    def __init__(self) -> None:
        self._started = 0.0
        self._observers = [GC_PAUSE_SECONDS.labels(str(g)) for g in range(3)]

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._observers[info["generation"]].observe(time.perf_counter() - self._started)


def time_pauses() -> PauseTimer:
    """Time every collection from now on (once per process; the callback is returned
    so a caller can remove it from gc.callbacks)."""
    timer = PauseTimer()
    gc.callbacks.append(timer)
    return timer
