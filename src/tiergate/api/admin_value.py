"""GET /admin/api/stats/escalation-value: did the strong turns pay off, on this
gateway's own traffic?

The live counterpart of `tiergate replay counterfactual` (docs/replay.md). A
session's turns and which of them the strong tier served come from its usage
rows; how it ended, r, and the strong model's odds on its task, p, from the
outcomes the operator posted (POST /v1/outcomes, tiergate.api.outcomes).
Each router's sessions are scored with the same pure code as the replay
(tiergate.replay.counterfactual): PGR at the router's strong-turn share,
beside random escalation, the length rule and the oracle at that share, with
task-clustered 95 % intervals, and the two baseline curves for the plot.

A session without its own p takes `odds` (default 1.0: "the strong model would
have saved every failing session"; PGR then reads as the share of the failing
sessions' turns that were served strong). Sessions are the ones with a served
request in the window; their rows are read from a day before it, so a session
that began just before `since` is counted whole. The fold and the scoring run
in a worker thread, so the event loop keeps serving traffic, and an answer is
reused for 30 s per query unless an outcome arrives (the dashboard polls every
5 s; 5,000 sessions cost about a second of CPU).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import Response

from tiergate.api.admin_common import AdminContext, invalid, json_response
from tiergate.api.admin_stats import _window
from tiergate.db import session_outcomes_table, usage_table
from tiergate.replay.counterfactual import SessionValue, curves, score
from tiergate.routing.affinity import STRONG_TIER

_DAY = 86400.0
#: Default window: a week (outcomes arrive after the sessions, from CI).
DEFAULT_WINDOW = 7 * _DAY
#: A session's rows are read from this long before the window.
SESSION_SPAN = _DAY
#: Resamples of the intervals (the replay's 1,000 is for reports; this is live).
RESAMPLES = 400
#: At most this many sessions are scored per request (the most recent ones).
MAX_SESSIONS = 5000
#: An answer is reused this long per query (while no outcome arrives), and so many kept.
CACHE_SECONDS = 30.0
CACHE_ENTRIES = 32


@dataclass(slots=True)
class _Session:
    router: str
    resolved: float
    odds: float | None
    task: str | None
    turns: int = 0
    strong: int = 0
    first_strong: int | None = None


class UsageTurn(Protocol):
    """One served usage row of a session with an outcome (the join's columns)."""

    @property
    def session_hash(self) -> str: ...
    @property
    def router(self) -> str: ...
    @property
    def tier(self) -> str | None: ...
    @property
    def resolved(self) -> float: ...
    @property
    def strong_odds(self) -> float | None: ...
    @property
    def task(self) -> str | None: ...


def fold_sessions(rows: Iterable[UsageTurn]) -> dict[str, dict[str, _Session]]:
    """Sessions by router from their rows in serving order: n turns, s strong,
    the 1-based turn of the first strong serve. A session belongs to the router
    of its first turn. Pure."""
    by_router: dict[str, dict[str, _Session]] = defaultdict(dict)
    seen: dict[str, _Session] = {}
    for r in rows:
        s = seen.get(r.session_hash)
        if s is None:
            s = _Session(r.router, float(r.resolved), r.strong_odds, r.task)
            seen[r.session_hash] = s
            by_router[r.router][r.session_hash] = s
        s.turns += 1
        if r.tier == STRONG_TIER:
            s.strong += 1
            if s.first_strong is None:
                s.first_strong = s.turns
    return dict(by_router)


def _default_odds(request: Request) -> float:
    raw = request.query_params.get("odds")
    if raw is None:
        return 1.0
    try:
        p = float(raw)
    except ValueError:
        p = -1.0
    if not 0.0 <= p <= 1.0:
        raise invalid("odds: a number from 0 to 1")
    return p


def session_values(sessions: dict[str, _Session], default_odds: float) -> list[SessionValue]:
    return [
        SessionValue(
            session_id=shash,
            instance=s.task or shash,
            resolved=s.resolved,
            odds=default_odds if s.odds is None else s.odds,
            turns=s.turns,
            strong=s.strong,
            first_strong=s.first_strong,
        )
        for shash, s in sessions.items()
    ]


def score_router(router: str, sessions: dict[str, _Session], default_odds: float) -> dict[str, Any]:
    """One router's figures and curves (pure; run in a worker thread)."""
    values = session_values(sessions, default_odds)
    out = score(values, resamples=RESAMPLES)
    out["router"] = router
    out["default_odds_sessions"] = sum(1 for s in sessions.values() if s.odds is None)
    out["curves"] = curves(values)
    return out


def _score_all(rows: Sequence[UsageTurn], default_odds: float) -> list[dict[str, Any]]:
    """Fold the rows and score every router (pure; runs in a worker thread)."""
    by_router = fold_sessions(rows)
    return [score_router(name, by_router[name], default_odds) for name in sorted(by_router)]


class _Answers:
    """Recent answers of one database, by query: the dashboard polls every 5 s,
    and scoring 5,000 sessions costs about a second of CPU. An answer is reused
    for CACHE_SECONDS unless an outcome arrived since (the key holds the
    outcomes' count and latest time)."""

    def __init__(self) -> None:
        self.items: OrderedDict[tuple[Any, ...], tuple[float, dict[str, Any]]] = OrderedDict()

    def get(self, key: tuple[Any, ...], now: float) -> dict[str, Any] | None:
        hit = self.items.get(key)
        return hit[1] if hit is not None and now - hit[0] < CACHE_SECONDS else None

    def put(self, key: tuple[Any, ...], now: float, answer: dict[str, Any]) -> None:
        self.items[key] = (now, answer)
        self.items.move_to_end(key)
        while len(self.items) > CACHE_ENTRIES:
            self.items.popitem(last=False)


_answers: weakref.WeakKeyDictionary[AsyncEngine, _Answers] = weakref.WeakKeyDictionary()


async def escalation_value(ctx: AdminContext, request: Request) -> Response:
    since, until = _window(request, default_seconds=DEFAULT_WINDOW)
    default_odds = _default_odds(request)
    router_filter = request.query_params.get("router") or None
    workspace_filter = request.query_params.get("workspace") or None
    engine = await ctx.fresh_engine()
    u, o = usage_table, session_outcomes_table
    async with engine.connect() as conn:
        count, latest = (await conn.execute(select(func.count(), func.max(o.c.ts)))).one()
    # the dashboard asks for "the last 7 days" with a new `until` every poll: times
    # count to the cache's grain, so polls within one grain share an answer
    grain = (int(since // CACHE_SECONDS), int(until // CACHE_SECONDS))
    key = (router_filter, workspace_filter, default_odds, *grain, int(count), latest)
    answers = _answers.setdefault(engine, _Answers())
    now = time.time()
    cached = answers.get(key, now)
    if cached is not None:
        return json_response(cached)
    in_window = [
        u.c.ts >= since,
        u.c.ts < until,
        u.c.status == 200,
        u.c.router.is_not(None),
        u.c.session_hash.is_not(None),
    ]
    if router_filter:
        in_window.append(u.c.router == router_filter)
    if workspace_filter:
        in_window.append(u.c.workspace == workspace_filter)
    active = (
        select(u.c.session_hash)
        .where(*in_window)
        .group_by(u.c.session_hash)
        .order_by(func.max(u.c.ts).desc())
        .limit(MAX_SESSIONS)
    )
    rows_q = (
        select(u.c.session_hash, u.c.router, u.c.tier, o.c.resolved, o.c.strong_odds, o.c.task)
        .join(o, o.c.session_hash == u.c.session_hash)
        .where(
            u.c.session_hash.in_(active.scalar_subquery()),
            u.c.ts >= since - SESSION_SPAN,
            u.c.ts < until,
            u.c.status == 200,
            u.c.router.is_not(None),
        )
        .order_by(u.c.session_hash, u.c.ts, u.c.id)
    )
    missing_q = (
        select(func.count(func.distinct(u.c.session_hash)))
        .select_from(u.outerjoin(o, o.c.session_hash == u.c.session_hash))
        .where(*in_window, o.c.session_hash.is_(None))
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(rows_q)).all()
        missing = int((await conn.execute(missing_q)).scalar() or 0)
    answer = {
        "since": since,
        "until": until,
        "default_odds": default_odds,
        "sessions_without_outcome": missing,
        "computed_at": now,
        "routers": await asyncio.to_thread(_score_all, rows, default_odds),
    }
    answers.put(key, now, answer)
    return json_response(answer)
