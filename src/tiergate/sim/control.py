"""Test-only control endpoints under /_sim: faults, clock, agent script, stats, reset."""

from __future__ import annotations

import gc
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tiergate.sim.faults import parse_rule
from tiergate.sim.script import parse_script_name
from tiergate.sim.state import SimState


def _json(value: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(value), status, media_type="application/json")


async def _body(request: Request) -> Any:
    raw = await request.body()
    return orjson.loads(raw) if raw.strip() else {}


def control_routes(state: SimState) -> list[Route]:
    async def add_faults(request: Request) -> Response:
        try:
            payload = await _body(request)
            rules = [parse_rule(p) for p in (payload if isinstance(payload, list) else [payload])]
        except (ValueError, orjson.JSONDecodeError) as exc:
            return _json({"error": str(exc)}, 400)
        for rule in rules:
            state.faults.add(rule)
        return _json({"armed": [r.to_json() for r in state.faults.rules()]})

    async def list_faults(request: Request) -> Response:
        return _json({"armed": [r.to_json() for r in state.faults.rules()]})

    async def clear_faults(request: Request) -> Response:
        cleared = len(state.faults.rules())
        state.faults.clear()
        return _json({"cleared": cleared})

    async def clock(request: Request) -> Response:
        if request.method == "POST":
            try:
                payload = await _body(request)
                advance = payload.get("advance", 0) if isinstance(payload, dict) else None
                if not isinstance(advance, int | float) or isinstance(advance, bool):
                    raise ValueError("advance must be a number of seconds")
            except (ValueError, orjson.JSONDecodeError) as exc:
                return _json({"error": str(exc)}, 400)
            state.clock.advance(float(advance))
        return _json({"now": state.clock.now(), "offset": state.clock.offset})

    async def script(request: Request) -> Response:
        """POST {"name": "fix" | "loop" | null} arms (or disarms) an agent script."""
        if request.method == "POST":
            try:
                payload = await _body(request)
                if not isinstance(payload, dict):
                    raise ValueError("expected an object")
                state.script = parse_script_name(payload.get("name"))
            except (ValueError, orjson.JSONDecodeError) as exc:
                return _json({"error": str(exc)}, 400)
        return _json({"name": state.script})

    async def stats(request: Request) -> Response:
        return _json({**state.stats.snapshot(), "cache_entries": state.cache.entry_count()})

    async def reset(request: Request) -> Response:
        state.reset()
        return _json({"status": "reset"})

    async def health(request: Request) -> Response:
        # gc_frozen: objects `tiergate sim` froze at start (gc_policy), so a bench
        # can tell its upstream will not stall on full collections of them
        return _json({"status": "ok", "gc_frozen": gc.get_freeze_count()})

    return [
        Route("/_sim/faults", add_faults, methods=["POST"]),
        Route("/_sim/faults", list_faults, methods=["GET"]),
        Route("/_sim/faults", clear_faults, methods=["DELETE"]),
        Route("/_sim/clock", clock, methods=["GET", "POST"]),
        Route("/_sim/script", script, methods=["GET", "POST"]),
        Route("/_sim/stats", stats, methods=["GET"]),
        Route("/_sim/reset", reset, methods=["POST"]),
        Route("/_sim/health", health, methods=["GET"]),
    ]
