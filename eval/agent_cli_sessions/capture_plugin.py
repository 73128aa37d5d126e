"""pytest plugin: record what the gateway's planner sees in each agent-CLI test.

Loaded by `python -m eval.agent_cli_sessions.recapture` (never by the normal
suite). Per planned request it appends one JSON line to
`$TIERGATE_CAPTURE_DIR/<test name>.jsonl`: the inbound body as the gateway read
it (before its codec), the session headers, the wire format, a monotonic
timestamp, and what the live engine decided (session id and source,
conversation, side request, the learned score, the tier header); per commit,
the upstream reply as the corpus `response` shape. Raw captures hold whole
prompts, so they go to /tmp; `eval.agent_cli_sessions.build` trims them into
the committed fixtures.
"""

from __future__ import annotations

import contextvars
import itertools
import os
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from tiergate.gateway import planner as planner_mod
from tiergate.routing.session import HEADER_SOURCES
from tiergate.routing.transcript import TranscriptSummary

OUT = Path(os.environ.get("TIERGATE_CAPTURE_DIR", "/tmp/clitraces/raw"))
#: Client headers the engine reads: the session id sources and the tier asks.
KEPT_HEADERS = (*HEADER_SOURCES, "x-orcarouter-tier", "x-orcarouter-escalate")

_lock = threading.Lock()
_seq = itertools.count()
_score: contextvars.ContextVar[float | None] = contextvars.ContextVar("score", default=None)
_orig_plan = planner_mod.Planner.plan
_orig_commit = planner_mod.Planner.commit
_orig_explain = planner_mod.explain_session_score


def _test_name() -> str:
    raw = os.environ.get("PYTEST_CURRENT_TEST", "unknown").split(" ")[0]
    return raw.split("::")[-1]


def _write(record: dict[str, Any]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with _lock, open(OUT / f"{_test_name()}.jsonl", "ab") as fh:
        fh.write(orjson.dumps({"seq": next(_seq), **record}) + b"\n")


def _explain(summary: TranscriptSummary, lexical: float) -> tuple[float, dict[str, float]]:
    score, why = _orig_explain(summary, lexical)
    _score.set(score)
    return score, why


async def _plan(
    self: Any, req: Any, body: Any, headers: Any, workspace: Any, request_id: str = "", **kw: Any
) -> Any:
    _score.set(None)
    plan = await _orig_plan(self, req, body, headers, workspace, request_id, **kw)
    kept = {h: headers.get(h) for h in KEPT_HEADERS if headers.get(h) is not None}
    session = plan.session
    _write(
        {
            "kind": "request",
            "t": time.monotonic(),
            "format": req.source_format,
            "request_id": request_id,
            "headers": kept,
            "body": body,
            "live": {
                "session": None if session is None else [session.value, session.source],
                "conversation": plan.conversation,
                "side_request": plan.side_request,
                "score": _score.get(),
                "tier_header": plan.tier_header,
            },
        }
    )
    return plan


async def _commit(self: Any, plan: Any, outcome: Any) -> None:
    resp = outcome.response
    reply = None
    if resp is not None:
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in resp.tool_calls
        ]
        reply = {"content": resp.text(), "finish_reason": resp.finish_reason}
        if calls:
            reply["tool_calls"] = calls
    _write(
        {
            "kind": "commit",
            "request_id": plan.extras.get("request_id"),
            "success": outcome.success,
            "status": outcome.status,
            "response": reply,
        }
    )
    await _orig_commit(self, plan, outcome)


planner_mod.Planner.plan = _plan  # type: ignore[method-assign]
planner_mod.Planner.commit = _commit  # type: ignore[method-assign]
planner_mod.explain_session_score = _explain  # type: ignore[assignment]
