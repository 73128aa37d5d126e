"""POST /v1/feedback: a client's verdict on a request it was served.

`{"request_id": "<X-Orca-Request-Id of the reply>", "score": 0.0-1.0}` with
the workspace token that made the request. Two uses:

- a `linucb` router's bandit credits the score to the arm (model) that served
  the request, for the context it was served in, exactly once
  (`BanditStore.feedback`; the planner remembered the arm at commit);
- the score is stored in the `feedback` table for every router, where the
  dashboard's escalation latency reads it (a base-tier turn scored below 0.5
  was a hard turn the cheap model served).

404 when the request is unknown to this workspace (or its feedback window of
one hour passed and nothing recorded it); 409 when feedback was already given.
"""

from __future__ import annotations

import re
import time
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import Response

from tiergate import metrics
from tiergate.db import feedback_table, usage_table
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.inbound import OPENAI
from tiergate.gateway.pipeline import Gateway
from tiergate.gateway.planner import feedback_key
from tiergate.recorder import Recorder

_REQUEST_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


def parse_feedback(body: dict[str, Any]) -> tuple[str, float]:
    request_id, score = body.get("request_id"), body.get("score")
    if not isinstance(request_id, str) or not _REQUEST_ID.match(request_id):
        raise GatewayError(400, "request_id: the X-Orca-Request-Id of a reply", "invalid_request")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise GatewayError(400, "score: a number from 0 to 1", "invalid_request")
    unknown = sorted(set(body) - {"request_id", "score"})
    if unknown:
        raise GatewayError(400, f"unknown field: {unknown[0]}", "invalid_request")
    return request_id, float(score)


async def _known(engine: AsyncEngine, request_id: str, workspace: str) -> tuple[bool, bool]:
    """(served to this workspace, feedback already recorded)."""
    u, f = usage_table, feedback_table
    async with engine.connect() as conn:
        served = (
            await conn.execute(
                select(u.c.id)
                .where(u.c.request_id == request_id, u.c.workspace == workspace, u.c.status == 200)
                .limit(1)
            )
        ).first() is not None
        rated = (
            await conn.execute(select(f.c.id).where(f.c.request_id == request_id).limit(1))
        ).first() is not None
    return served, rated


async def handle_feedback(
    gateway: Gateway, engine: AsyncEngine | None, recorder: Recorder, request: Request
) -> Response:
    try:
        workspace = gateway.authenticate(request)
        request_id, score = parse_feedback(await gateway.read_json(request))
        served = False
        if engine is not None:
            try:
                await recorder.flush()  # the reply's usage row may still be queued
                served, rated = await _known(engine, request_id, workspace.name)
            except (SQLAlchemyError, OSError):
                served, rated = False, False  # the bandit can still learn
            if rated:
                raise GatewayError(
                    409, "Feedback for this request was already recorded", "duplicate_feedback"
                )
        key = feedback_key(workspace.id, request_id)
        credited = await gateway.planner.bandits.feedback(key, score) is not None
        if not (served or credited):
            metrics.FEEDBACK_TOTAL.labels("unknown").inc()
            raise GatewayError(
                404, "No served request with this id in this workspace", "request_not_found"
            )
        recorded = False
        if engine is not None and served:
            try:
                async with engine.begin() as conn:
                    await conn.execute(
                        feedback_table.insert(),
                        {
                            "request_id": request_id,
                            "workspace": workspace.name,
                            "score": score,
                            "credited": credited,
                            "ts": time.time(),
                        },
                    )
                recorded = True
            except (SQLAlchemyError, OSError):
                recorded = False
        metrics.FEEDBACK_TOTAL.labels("credited" if credited else "recorded").inc()
    except GatewayError as err:
        return gateway.error_response(OPENAI, err, dict(err.headers or {}))
    return Response(
        orjson.dumps(
            {"request_id": request_id, "score": score, "credited": credited, "recorded": recorded}
        ),
        200,
        media_type="application/json",
    )
