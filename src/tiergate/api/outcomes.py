"""POST /v1/outcomes: how a session ended, for the counterfactual escalation value.

Escalation is worth its price when the strong turns rescue sessions the base
model was losing (DESIGN.md, "Counterfactual escalation value"). The gateway
knows which turns each session had served strong; only the operator knows how
the session ended. Their CI, once the agent's branch passes or fails, or
their merge bot, posts it here with the workspace token:

    {"session_id": "<the X-OrcaRouter-Session-Id the agent sent>",
     "resolved": true, "strong_odds": 0.4, "task": "PROJ-123"}

The session is named by exactly one of `session_id` (as the agent sent it),
`session_hash` (the usage rows' and the dashboard's) or `request_id` (the
X-Orca-Request-Id of any request it was served). `resolved` takes the words
outcomes are logged in (true/false, 1/0, pass/fail, merged/closed);
`strong_odds` is p, the strong model's chance on the task, when the operator
has one; `task` is their key for the task (never its text), so reruns of one
task resample together in the intervals. A second post for a session replaces
the first (a CI rerun). Errors are OpenAI error JSON; 404 when the session was
never served to this workspace, 503 when the gateway runs without a database.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import Response

from tiergate import metrics
from tiergate.db import session_outcomes_table, usage_table
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.inbound import OPENAI
from tiergate.gateway.pipeline import Gateway
from tiergate.recorder import Recorder
from tiergate.replay.counterfactual import parse_odds, parse_outcome
from tiergate.routing.session import SessionId, sanitize_session_id, session_scope

log = logging.getLogger("tiergate.outcomes")

_HASH = re.compile(r"^[0-9a-f]{32}$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
_TASK = re.compile(r"^[A-Za-z0-9._:/@#+=\-]{1,200}$")
_KEYS = ("session_id", "session_hash", "request_id")
_FIELDS = {*_KEYS, "resolved", "strong_odds", "task"}


@dataclass(frozen=True, slots=True)
class OutcomeBody:
    """A validated outcome: which session (one of the three keys), r, p, task."""

    key: str
    value: str
    resolved: float
    strong_odds: float | None
    task: str | None


def _bad(message: str) -> GatewayError:
    return GatewayError(400, message, "invalid_request")


def parse_outcome_body(body: dict[str, Any]) -> OutcomeBody:
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise _bad(f"unknown field: {unknown[0]}")
    given = [k for k in _KEYS if body.get(k) is not None]
    if len(given) != 1:
        raise _bad("name the session by exactly one of session_id, session_hash, request_id")
    key = given[0]
    raw = body[key]
    if key == "session_id":
        value = sanitize_session_id(raw)
        if value is None:
            raise _bad("session_id: the session id the agent sent (a string or an integer)")
    else:
        pattern = _HASH if key == "session_hash" else _REQUEST_ID
        if not isinstance(raw, str) or not pattern.match(raw):
            what = "32 hex digits" if key == "session_hash" else "an X-Orca-Request-Id"
            raise _bad(f"{key}: {what}")
        value = raw
    resolved = parse_outcome(body.get("resolved"))
    if resolved is None:
        raise _bad("resolved: true/false, 1/0, pass/fail or merged/closed")
    odds_raw = body.get("strong_odds")
    odds = parse_odds(odds_raw) if isinstance(odds_raw, int | float) else None
    if odds_raw is not None and odds is None:
        raise _bad("strong_odds: a number from 0 to 1")
    task = body.get("task")
    if task is not None and (not isinstance(task, str) or not _TASK.match(task)):
        raise _bad("task: an identifier of up to 200 letters, digits and ._:/@#+=- (no text)")
    return OutcomeBody(key, value, resolved, odds, task)


async def _session_hash(
    engine: AsyncEngine, outcome: OutcomeBody, workspace: str, workspace_id: str
) -> str | None:
    """The session's hash, when a request of it was served to this workspace."""
    u = usage_table
    if outcome.key == "request_id":
        where = [u.c.request_id == outcome.value]
    else:
        scope = outcome.value
        if outcome.key == "session_id":  # the planner's scope of an explicit id
            scope = session_scope(workspace_id, SessionId(outcome.value, "outcome", True))
        where = [u.c.session_hash == scope]
    query = (
        select(u.c.session_hash)
        .where(*where, u.c.workspace == workspace, u.c.status == 200)
        .where(u.c.session_hash.is_not(None))
        .limit(1)
    )
    async with engine.connect() as conn:
        row = (await conn.execute(query)).first()
    return None if row is None else str(row[0])


async def _store(engine: AsyncEngine, shash: str, workspace: str, outcome: OutcomeBody) -> bool:
    """Insert or replace the session's outcome in one statement (two posts of one
    session at once, a CI retry racing its first attempt, both land: the later
    wins). True when a row was there just before (for the reply, best effort)."""
    t = session_outcomes_table
    row = {
        "session_hash": shash,
        "workspace": workspace,
        "resolved": outcome.resolved,
        "strong_odds": outcome.strong_odds,
        "task": outcome.task,
        "ts": time.time(),
    }
    insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
    stmt = insert(t).values(row)
    stmt = stmt.on_conflict_do_update(
        index_elements=[t.c.session_hash],
        set_={k: stmt.excluded[k] for k in row if k != "session_hash"},
    )
    async with engine.begin() as conn:
        before = await conn.execute(select(t.c.ts).where(t.c.session_hash == shash))
        existed = before.first() is not None
        await conn.execute(stmt)
    return existed


async def handle_outcome(
    gateway: Gateway, engine: AsyncEngine | None, recorder: Recorder, request: Request
) -> Response:
    try:
        workspace = gateway.authenticate(request)
        outcome = parse_outcome_body(await gateway.read_json(request))
        if engine is None:
            raise GatewayError(
                503, "Session outcomes need the gateway's database", "database_unavailable"
            )
        try:
            await recorder.flush()  # the session's last usage rows may still be queued
            shash = await _session_hash(engine, outcome, workspace.name, workspace.id)
            if shash is None:
                raise GatewayError(
                    404, "No served session with this id in this workspace", "session_not_found"
                )
            replaced = await _store(engine, shash, workspace.name, outcome)
        except (SQLAlchemyError, OSError) as err:
            log.warning(
                "outcome not stored",
                extra={"workspace": workspace.name, "error_type": type(err).__name__},
            )
            raise GatewayError(
                503, "The gateway's database is unreachable", "database_unavailable"
            ) from None
    except GatewayError as err:
        metrics.OUTCOMES_TOTAL.labels("unavailable" if err.status == 503 else "refused").inc()
        log.info(
            "outcome refused", extra={"status": err.status, "error_type": err.code or "invalid"}
        )
        return gateway.error_response(OPENAI, err, dict(err.headers or {}))
    metrics.OUTCOMES_TOTAL.labels("replaced" if replaced else "recorded").inc()
    log.info(
        "outcome recorded",
        extra={"workspace": workspace.name, "session_hash": shash, "replaced": replaced},
    )
    body = {
        "session_hash": shash,
        "resolved": outcome.resolved,
        "strong_odds": outcome.strong_odds,
        "task": outcome.task,
        "replaced": replaced,
    }
    return Response(orjson.dumps(body), 200, media_type="application/json")
