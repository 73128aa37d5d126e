"""Budget reservations: what a request holds against its spend counters while
it is in flight, and when a hold is refused. Pure: no I/O (the limiter applies it).

A request's worst-case cost is added to each budget counter it counts against
(workspace day, key day, key month) at admission, in the same atomic
increment that reads the new total. The request is refused if the total
*before* its own hold had already reached the budget; otherwise it is served
and may take the counter over by at most its own hold. So under any
concurrency the overshoot of a budget is bounded by one request's worst case,
and with no concurrency the rule is today's (refuse once spend reached the
budget). When the reply is billed the hold is replaced by the actual cost (one
increment of `actual - held`); on a failure it is released (`-held`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tiergate.gateway.errors import GatewayError
from tiergate.money import usd
from tiergate.state.base import Incr

DAY = 86400.0
DAY_TTL = 2 * DAY  # outlives its UTC day, so a late reconcile still finds it
MONTH_TTL = 32 * DAY

Period = Literal["day", "month"]


def budget_key(scope_id: str, now: float) -> str:
    return f"lim:usd:{scope_id}:{time.strftime('%Y%m%d', time.gmtime(now))}"


def month_budget_key(scope_id: str, now: float) -> str:
    return f"lim:usdm:{scope_id}:{time.strftime('%Y%m', time.gmtime(now))}"


@dataclass(frozen=True, slots=True)
class Counter:
    """One budget counter a request counts against."""

    key: str
    ttl: float
    limit: float
    period: Period
    scope: str  # "workspace" or "key", for the refusal message


def counters(
    scope_id: str,
    day_limit: float | None,
    month_limit: float | None,
    scope: str,
    now: float,
) -> list[Counter]:
    """The day and month counters of one scope that have a budget."""
    out: list[Counter] = []
    if day_limit is not None:
        out.append(Counter(budget_key(scope_id, now), DAY_TTL, day_limit, "day", scope))
    if month_limit is not None:
        out.append(Counter(month_budget_key(scope_id, now), MONTH_TTL, month_limit, "month", scope))
    return out


def over_budget(counter: Counter, total_after_hold: float, held: float) -> bool:
    """True when the spend before this hold had already reached the budget."""
    return total_after_hold - held >= counter.limit


def refusal(counter: Counter, retry_after: int) -> GatewayError:
    """The 429 for a request refused by `counter`."""
    if counter.period == "day":
        message = (
            f"Daily budget of {usd(counter.limit)} reached for this {counter.scope}; "
            "it resets at 00:00 UTC"
        )
    else:
        message = (
            f"Monthly budget of {usd(counter.limit)} reached for this {counter.scope}; "
            "it resets on the 1st, 00:00 UTC"
        )
    return GatewayError(429, message, "budget_exceeded", {"retry-after": str(retry_after)})


@dataclass(frozen=True, slots=True)
class Settlement:
    """What closing a reservation writes: to the shared store, and to this
    instance's own counters for the holds made there while the shared one was down."""

    shared: list[Incr]
    local: list[Incr]

    def __bool__(self) -> bool:
        return bool(self.shared or self.local)


class Reservation:
    """Amounts held on budget counters by one request, settled exactly once."""

    __slots__ = ("amount", "held", "local", "open")

    def __init__(
        self, amount: float, held: Sequence[Counter] = (), local: Sequence[Counter] = ()
    ) -> None:
        self.amount = amount
        self.held = list(held)  # the shared counters actually incremented
        self.local = list(local)  # held on this instance: the shared store was unreachable
        self.open = bool(self.held or self.local)

    def close(self, cost: float) -> Settlement:
        """The increments that replace the holds by `cost` (0 releases them);
        empty once closed, so a second settle is a no-op. A local hold's cost is
        also added to the shared counter (best effort), so what was spent while
        the shared store was down counts there once it is back."""
        if not self.open:
            return Settlement([], [])
        self.open = False
        cost = max(0.0, cost)
        delta = cost - self.amount
        shared = [Incr(c.key, delta, c.ttl) for c in self.held] if delta else []
        local = [Incr(c.key, delta, c.ttl) for c in self.local] if delta else []
        if cost:
            shared += [Incr(c.key, cost, c.ttl) for c in self.local]
        return Settlement(shared, local)


NO_RESERVATION = Reservation(0.0)
