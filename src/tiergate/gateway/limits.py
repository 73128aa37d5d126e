"""Request rate limits and spend budgets per workspace and per virtual key,
shared through the state store so every gateway instance enforces the same
numbers.

Requests per minute: a fixed one-minute window counter, incremented at
admission. USD per day and per month: UTC-day and UTC-month counters of
spend. At admission each request adds its worst-case cost to them (a
reservation, gateway/reservations.py) in the same atomic increment that reads
the total, and is refused if the total before its hold had reached the
budget; when the reply is billed the hold is replaced by the actual cost, and
on a failure it is released. So concurrent requests, on one instance or many
sharing Redis, overshoot a budget by at most one request's worst case. Over
any limit the request is refused with 429 and a Retry-After until the window
resets.

If the state store is unreachable, budgets fall back to this instance's own
counters (a MemoryStore): each instance then holds the whole budget on its
own, so a fleet of N overshoots by at most N budgets while the shared store is
down, instead of without bound; what is billed meanwhile is added to the
shared counter once it answers again (best effort). Rate limits fail open (the
request is served and the outage is logged by the store wrapper): refusing all
traffic because Redis blinked would turn a soft dependency into a hard one.
"""

from __future__ import annotations

import asyncio
import calendar
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tiergate.gateway.errors import GatewayError
from tiergate.gateway.reservations import (
    NO_RESERVATION,
    Counter,
    Reservation,
    Settlement,
    budget_key,
    counters,
    month_budget_key,
    over_budget,
    refusal,
)
from tiergate.state import StateStore
from tiergate.state.base import StateUnavailable
from tiergate.state.memory import MemoryStore

__all__ = [
    "Limiter",
    "WorkspaceLimits",
    "budget_key",
    "month_budget_key",
    "seconds_to_next_day",
    "seconds_to_next_minute",
    "seconds_to_next_month",
]

log = logging.getLogger(__name__)

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


#: (scope id, its limits, "workspace" or "key"): one scope a request counts against
Scope = tuple[str, WorkspaceLimits, str]


def rpm_key(workspace_id: str, now: float) -> str:
    return f"lim:rpm:{workspace_id}:{int(now // 60)}"


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
    """Rate admission, budget reservations and their settlement, for every workspace."""

    def __init__(self, store: StateStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self.local: StateStore = MemoryStore()  # budgets while `store` is down

    async def admit(
        self, workspace_id: str, limits: WorkspaceLimits, scope: str = "workspace"
    ) -> None:
        """Count the request against the scope's requests per minute (429 GatewayError
        when over). Budgets are checked by `reserve`, once the request's cost is known."""
        if limits.rate_limit_rpm is None:
            return
        now = self.clock()
        try:
            count = await self.store.incr(rpm_key(workspace_id, now), 1.0, ttl=120)
        except StateUnavailable:
            return  # fail open, see module docstring
        if count > limits.rate_limit_rpm:
            raise GatewayError(
                429,
                f"Rate limit of {limits.rate_limit_rpm} requests per minute exceeded",
                "rate_limit_exceeded",
                {"retry-after": str(seconds_to_next_minute(now))},
            )

    async def reserve(self, scopes: Sequence[Scope], amount: float) -> Reservation:
        """Hold `amount` USD on every budget counter of `scopes`, one atomic increment
        each (sent concurrently). Raise the 429 of the first counter whose spend had
        already reached its budget, after rolling every hold back."""
        now = self.clock()
        wanted: list[Counter] = []
        for scope_id, limits, label in scopes:
            day, month = limits.budget_usd_per_day, limits.budget_usd_per_month
            wanted.extend(counters(scope_id, day, month, label, now))
        if not wanted:
            return NO_RESERVATION
        amount = max(0.0, amount)
        totals = await self._hold_all(self.store, wanted, amount)
        down = [c for c, t in zip(wanted, totals, strict=True) if isinstance(t, StateUnavailable)]
        local_totals = dict(zip(down, await self._hold_all(self.local, down, amount), strict=True))
        held: list[Counter] = []
        local: list[Counter] = []
        refused: Counter | None = None
        failure: BaseException | None = None
        for counter, total in zip(wanted, totals, strict=True):
            if isinstance(total, StateUnavailable):  # this instance's own counter instead
                total = local_totals[counter]
                if isinstance(total, BaseException):
                    failure = failure or total
                    continue
                local.append(counter)
            elif isinstance(total, BaseException):
                failure = failure or total
                continue
            else:
                held.append(counter)
            if refused is None and over_budget(counter, total, amount):
                refused = counter
        hold = Reservation(amount, held, local)
        if refused is not None or failure is not None:
            await self.settle(hold, 0.0)
            if failure is not None:
                raise failure
            assert refused is not None
            wait = seconds_to_next_day(now) if refused.period == "day" else None
            raise refusal(refused, wait or seconds_to_next_month(now))
        return hold

    @staticmethod
    async def _hold_all(
        store: StateStore, wanted: Sequence[Counter], amount: float
    ) -> list[float | BaseException]:
        """Each counter's total after adding `amount` (or the error); several are sent
        concurrently, one is awaited directly (a task per call costs ~50 us)."""
        if not wanted:
            return []
        if len(wanted) == 1:
            try:
                return [await store.incr(wanted[0].key, amount, ttl=wanted[0].ttl)]
            except Exception as err:  # noqa: BLE001 - sorted by the caller, as gather does
                return [err]
        return await asyncio.gather(
            *(store.incr(c.key, amount, ttl=c.ttl) for c in wanted), return_exceptions=True
        )

    async def settle(self, hold: Reservation, cost: float) -> None:
        """Replace the hold by the billed `cost` (0 releases it); a no-op once settled."""
        await self.apply(hold.close(cost))

    async def apply(self, settlement: Settlement) -> None:
        """A settlement's increments, in one round trip (never raises: it runs in the
        background after the reply, and a lost settlement only misstates spend)."""
        if settlement.local:
            await self.local.apply_batch((), settlement.local)
        if not settlement.shared:
            return
        try:
            await self.store.apply_batch((), settlement.shared)
        except StateUnavailable:
            return
        except Exception:
            log.exception("budget settlement failed")
