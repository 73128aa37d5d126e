"""Lane-store outages in the log: one warning per interval, not one per request.

While the store is down every lane request fails the same way; a warning each
time (157 lines in 25 s in the fault test of issue #16) buries everything else.
Like the state store (state/resilient.py) the first failure is logged at once,
later ones are counted and summarised once per `interval`, and the first success
after an outage logs the recovery. Every failure is counted in
`tiergate_session_tier_storage_errors_total{op}`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from tiergate import metrics

log = logging.getLogger(__name__)

LOG_INTERVAL_SECONDS = 30.0


class OutageLog:
    def __init__(
        self, interval: float = LOG_INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self.clock = clock
        self._since: float | None = None
        self._last_log = -float("inf")
        self._suppressed = 0

    def failed(self, op: str, err: Exception) -> None:
        metrics.SESSION_TIER_STORAGE_ERRORS_TOTAL.labels(op=op).inc()
        now = self.clock()
        if self._since is None:
            self._since = now
        if now - self._last_log >= self.interval:
            log.warning(
                "session tier storage unavailable (%s during %s); lane requests answer 503 "
                "until it returns [%d more failures since the last report]",
                type(err).__name__,
                op,
                self._suppressed,
            )
            self._last_log = now
            self._suppressed = 0
        else:
            self._suppressed += 1

    def succeeded(self) -> None:
        if self._since is not None:
            log.warning(
                "session tier storage reachable again after %.1fs", self.clock() - self._since
            )
            self._since = None
            self._last_log = -float("inf")  # report the next outage straight away
            self._suppressed = 0
