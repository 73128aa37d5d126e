"""Request rate limits and spend budgets per workspace and per virtual key,
shared through the state store so every gateway instance enforces the same
numbers.

Requests per minute: a fixed one-minute window counter, incremented at
admission. USD per day and per month: UTC-day and UTC-month counters of
billed cost, incremented at commit and checked at admission, so a workspace
or key can overshoot by at most the requests already in flight when it
crossed the line. Over any limit the request is refused with 429 and a
Retry-After until the window resets.

If the state store is unreachable the limits fail open (the request is
served and the outage is logged by the store wrapper): refusing all traffic
because Redis blinked would turn a soft dependency into a hard one.
"""

from __future__ import annotations

import calendar
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from tiergate.gateway.errors import GatewayError
from tiergate.state import StateStore
from tiergate.state.base import StateUnavailable
from tiergate.state.memory import parse_number

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class WorkspaceLimits:
    """The limits of one scope: a workspace, or a virtual key within it."""

    rate_limit_rpm: int | None = None
    budget_usd_per_day: float | None = None
    budget_usd_per_month: float | None = None

    @property
    def budgeted(self) -> bool:
        return self.budget_usd_per_day is not None or self.budget_usd_per_month is not None

    @property
    def active(self) -> bool:
        return self.rate_limit_rpm is not None or self.budgeted


def rpm_key(workspace_id: str, now: float) -> str:
    return f"lim:rpm:{workspace_id}:{int(now // 60)}"


def budget_key(workspace_id: str, now: float) -> str:
    return f"lim:usd:{workspace_id}:{time.strftime('%Y%m%d', time.gmtime(now))}"


def month_budget_key(scope_id: str, now: float) -> str:
    return f"lim:usdm:{scope_id}:{time.strftime('%Y%m', time.gmtime(now))}"


def seconds_to_next_month(now: float) -> int:
    t = time.gmtime(now)
    year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
    start = calendar.timegm((year, month, 1, 0, 0, 0, 0, 0, 0))
    return max(1, math.ceil(start - now))


def seconds_to_next_minute(now: float) -> int:
    return max(1, math.ceil(60 - now % 60))


def seconds_to_next_day(now: float) -> int:
    return max(1, math.ceil(DAY - now % DAY))


class Limiter:
    """Admission checks and spend accounting for every workspace."""

    def __init__(self, store: StateStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    async def admit(
        self, workspace_id: str, limits: WorkspaceLimits, scope: str = "workspace"
    ) -> None:
        """Raise a 429 GatewayError when the workspace (or key: `scope`) is over a limit."""
        if not limits.active:
            return
        now = self.clock()
        try:
            if limits.budget_usd_per_day is not None:
                spent = parse_number(await self.store.get(budget_key(workspace_id, now)))
                if spent >= limits.budget_usd_per_day:
                    wait = seconds_to_next_day(now)
                    raise GatewayError(
                        429,
                        f"Daily budget of ${limits.budget_usd_per_day:.2f} reached for this "
                        f"{scope}; it resets at 00:00 UTC",
                        "budget_exceeded",
                        {"retry-after": str(wait)},
                    )
            if limits.budget_usd_per_month is not None:
                key = month_budget_key(workspace_id, now)
                if parse_number(await self.store.get(key)) >= limits.budget_usd_per_month:
                    raise GatewayError(
                        429,
                        f"Monthly budget of ${limits.budget_usd_per_month:.2f} reached for "
                        f"this {scope}; it resets on the 1st, 00:00 UTC",
                        "budget_exceeded",
                        {"retry-after": str(seconds_to_next_month(now))},
                    )
            if limits.rate_limit_rpm is not None:
                count = await self.store.incr(rpm_key(workspace_id, now), 1.0, ttl=120)
                if count > limits.rate_limit_rpm:
                    raise GatewayError(
                        429,
                        f"Rate limit of {limits.rate_limit_rpm} requests per minute exceeded",
                        "rate_limit_exceeded",
                        {"retry-after": str(seconds_to_next_minute(now))},
                    )
        except StateUnavailable:
            return  # fail open, see module docstring

    async def charge(self, workspace_id: str, limits: WorkspaceLimits, cost: float) -> None:
        """Add a billed request's cost to the day's and month's spend (when budgeted)."""
        if not limits.budgeted or cost <= 0:
            return
        now = self.clock()
        try:
            if limits.budget_usd_per_day is not None:
                await self.store.incr(budget_key(workspace_id, now), cost, ttl=2 * DAY)
            if limits.budget_usd_per_month is not None:
                await self.store.incr(month_budget_key(workspace_id, now), cost, ttl=32 * DAY)
        except StateUnavailable:
            return
