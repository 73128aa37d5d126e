"""Helpers for the session-tier tests over real HTTP (tests/test_lanes_http*.py).

The provider simulator runs behind `RecordingSim`, a thin ASGI wrapper that
keeps every request the gateway sent upstream, so a test can compare exact
upstream bytes without changing the simulator. `gateway()` starts a gateway
whose SESSION_TIER_* environment is exactly what the test says: the settings
are read from os.environ when the app is created, and a stray variable in the
developer's shell must not change what a test exercises.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import uuid4

import anthropic
import httpx
import openai
import pytest
from starlette.applications import Starlette

from servers import ANTHROPIC_TOOLS as ANTHROPIC_TOOLS
from servers import TOKEN, ServerThread, gateway_config
from servers import TOOLS as TOOLS
from tiergate.app import create_app
from tiergate.config import GatewayConfig
from tiergate.config_load import parse_config
from tiergate.gateway.auth import TokenTable
from tiergate.lanes import LaneRecord, SessionTiers, scope_hash
from tiergate.sim.app import SimSettings, create_sim_app

T = TypeVar("T")

TIER_ENV = ("SESSION_TIER_MODE", "SESSION_TIER_TTL_SECONDS", "SESSION_TIER_LEASE_SECONDS")


# Approvals the test config can serve: gpt-5-mini (tier 1) is what the
# `coding` router picks on its own (cheapest); gpt-5 and claude are tier 3.
MINI = ("openai:gpt-5-mini", 1)
GPT5 = ("openai:gpt-5", 3)
CLAUDE = ("anthropic:claude-sonnet-4-5", 3)


def meta(session: str, approval: tuple[str, int], lane: str = "main") -> dict[str, Any]:
    """The managed `session_tier` object."""
    model, tier = approval
    return {"session": session, "lane": lane, "approved_model": model, "approved_tier": tier}


def managed(session: str, approval: tuple[str, int], lane: str = "main") -> dict[str, Any]:
    """Body fields of the managed shape (router models: auto:<name>)."""
    return {"session_tier": meta(session, approval, lane)}


def public(session: str, approval: tuple[str, int], lane: str = "main") -> dict[str, Any]:
    """Body fields of the public shape (roleplay:<name>)."""
    model, tier = approval
    approved = {"lane": lane, "approved_model": model, "approved_tier": tier}
    return {"session_id": session, "routing": {"session_tier": approved}}


def turn(model: str, *messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A request body: the model, its messages, then any other fields."""
    return {"model": model, "messages": list(messages), **fields}


# ---- the simulator, recorded ----------------------------------------------------


@dataclass(frozen=True)
class Upstream:
    path: str
    headers: dict[str, str]
    body: bytes
    query: bytes = b""


class RecordingSim:
    """ASGI wrapper: passes everything to the simulator, keeps provider requests."""

    def __init__(self, settings: SimSettings | None = None) -> None:
        self.app: Starlette = create_sim_app(settings)
        self.seen: list[Upstream] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/_sim"):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        self.seen.append(Upstream(scope["path"], headers, body, scope.get("query_string", b"")))
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return dict(await receive())

        await self.app(scope, replay, send)


@dataclass
class Sim:
    server: ServerThread
    recorder: RecordingSim

    @property
    def url(self) -> str:
        return self.server.url

    def reset(self) -> None:
        """Clear cache, faults and counters, and forget what was recorded."""
        httpx.post(f"{self.url}/_sim/reset").raise_for_status()
        self.recorder.seen.clear()

    def stats(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(f"{self.url}/_sim/stats").json()
        return data

    def requests(self) -> int:
        return int(self.stats()["totals"]["requests"])

    def fault(self, **rule: Any) -> None:
        httpx.post(f"{self.url}/_sim/faults", json=rule).raise_for_status()


@contextlib.contextmanager
def sim_server(settings: SimSettings | None = None) -> Iterator[Sim]:
    recorder = RecordingSim(settings)
    with ServerThread(recorder) as server:
        yield Sim(server, recorder)


# ---- the gateway ------------------------------------------------------------------


@dataclass
class Gateway:
    server: ServerThread
    app: Starlette
    cfg: GatewayConfig

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def tiers(self) -> SessionTiers:
        tiers: SessionTiers = self.app.state.tiergate.gateway.lanes.tiers
        return tiers

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the gateway's own event loop (its store lives there)."""
        assert self.server.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.server.loop).result(10)

    def scope(self, session: str, lane: str = "main", kind: str = "managed") -> str:
        ws = TokenTable(self.cfg.workspaces).lookup(TOKEN)
        assert ws is not None
        return scope_hash(kind, ws.id, session, lane)

    def lane(self, session: str, lane: str = "main", kind: str = "managed") -> LaneRecord | None:
        """The lane's live record, read through the store the app itself uses."""
        store = self.tiers.store
        assert store is not None
        found = self.run(store.load(self.scope(session, lane, kind), time.time()))
        return None if found is None else found.record

    def live_lanes(self) -> int:
        store = self.tiers.store
        assert store is not None
        return self.run(store.live_count(time.time()))


def make_config(sim_url: str, **overrides: Any) -> GatewayConfig:
    return parse_config(gateway_config(sim_url, **overrides))


@contextlib.contextmanager
def gateway(
    sim_url: str, *, env: dict[str, str] | None = None, **overrides: Any
) -> Iterator[Gateway]:
    """A gateway on the simulator; `env` is the whole SESSION_TIER_* environment."""
    cfg = make_config(sim_url, **overrides)
    with pytest.MonkeyPatch.context() as mp:
        for name in TIER_ENV:
            mp.delenv(name, raising=False)
        for name, value in (env or {}).items():
            mp.setenv(name, value)
        app = create_app(cfg)
    with ServerThread(app) as server:
        yield Gateway(server, app, cfg)


def sticky(sim_url: str, **tiers: Any) -> contextlib.AbstractContextManager[Gateway]:
    """A gateway with sticky session tiers enabled through its config."""
    return gateway(sim_url, session_tiers={"mode": "sticky", **tiers})


# ---- clients -------------------------------------------------------------------------


def oai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)


def ant(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=TOKEN, max_retries=0)


def post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{url}{path}",
        json=body,
        headers={"authorization": f"Bearer {TOKEN}", "anthropic-version": "2023-06-01"},
        timeout=30,
    )


def chat(url: str, body: dict[str, Any]) -> httpx.Response:
    return post(url, "/v1/chat/completions", body)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool_turn(call_id: str, arguments: str, result: str) -> list[dict[str, Any]]:
    """The assistant's tool call and the client's result, as OpenAI messages."""
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def error_code(resp: httpx.Response) -> str | None:
    """The error code in either client format (OpenAI or Anthropic envelope)."""
    body = resp.json()
    if resp.request.url.path.endswith("/messages"):
        assert body["type"] == "error" and body["error"]["type"], body  # Anthropic's shape
    else:
        assert body["error"]["type"] and body["error"]["message"], body  # OpenAI's shape
    code = body["error"].get("code")
    return None if code is None else str(code)


# ---- reading replies ---------------------------------------------------------------


def session() -> str:
    """A fresh session id: tests share gateways, never lanes."""
    return f"s-{uuid4().hex}"


def resolved(resp: httpx.Response) -> str:
    """The model that served a successful reply."""
    assert resp.status_code == 200, resp.text
    return resp.headers["x-orca-resolved-model"]


def sse_tool_ids(raw: bytes) -> list[str]:
    """Tool-call ids a client received, from raw OpenAI or Anthropic SSE bytes."""
    ids = []
    for line in raw.decode().splitlines():
        if not line.startswith("data: {"):
            continue
        data = json.loads(line[len("data: ") :])
        for choice in data.get("choices", []):
            ids += [tc["id"] for tc in choice["delta"].get("tool_calls", []) if tc.get("id")]
        block = data.get("content_block") or {}
        if data.get("type") == "content_block_start" and block.get("type") == "tool_use":
            ids.append(block["id"])
    return ids


_CREATED = re.compile(rb'"created":\d+')
_RESPONSE_ID = re.compile(rb'"id":"(chatcmpl-|msg_)[^"]*"')


def normalized(raw: bytes) -> bytes:
    """Response bytes minus wall-clock time and the provider's response id (unique
    per simulator request, like a request id). Tool-call ids stay."""
    return _RESPONSE_ID.sub(rb'"id":"\1"', _CREATED.sub(b'"created":0', raw))


def upstream_bodies(sim: Sim) -> list[dict[str, Any]]:
    """The JSON bodies the gateway sent the provider since the last reset."""
    return [json.loads(u.body) for u in sim.recorder.seen]
