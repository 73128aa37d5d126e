"""Sticky session tiers through real HTTP: off mode, leases, stream observation
and the safe boundary, with httpx or the official SDKs against the gateway and
the provider simulator, each on a real socket.

Request shapes, error codes and privacy: test_lanes_http_requests.py. A killed
gateway process and `tiergate db migrate`: test_lanes_http_process.py. The
library's own rules: test_lanes_{decide,flow,observe,...}.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from lanes_http_support import (
    ANTHROPIC_TOOLS,
    CLAUDE,
    GPT5,
    MINI,
    TOOLS,
    Gateway,
    Sim,
    chat,
    error_code,
    gateway,
    managed,
    normalized,
    oai,
    post,
    public,
    resolved,
    session,
    sim_server,
    sse_tool_ids,
    sticky,
    tool_turn,
    turn,
    user,
)
from tiergate.lanes import MemoryLaneStore, migrate
from tiergate.lanes.hashing import tool_id_hash
from tiergate.sim.app import SimSettings

CHAT, MESSAGES = "/v1/chat/completions", "/v1/messages"


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    with sim_server() as s:
        yield s


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[Sim]:
    """100 output tokens a second: a HOLD reply keeps its lane leased for 0.6 s."""
    with sim_server(SimSettings(tokens_per_second=100)) as s:
        yield s


HOLD = "[[sim:output=60]]"


@pytest.fixture(scope="module")
def gw(sim: Sim) -> Iterator[Gateway]:
    """Sticky tiers on the default (memory) store; every test uses its own sessions."""
    with sticky(sim.url) as g:
        yield g


@pytest.fixture(autouse=True)
def _fresh_sim(sim: Sim) -> None:
    sim.reset()


# ---- off: byte for byte the gateway without the feature ---------------------------


class NoFeature:
    """The pipeline as it was before session tiers: no extraction at all, and the
    lease calls are never reached."""

    enabled = False

    def extract(self, body: dict[str, Any]) -> tuple[dict[str, Any], None]:
        return body, None

    async def prepare(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("prepare reached without the feature")

    async def finalize(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("finalize reached without the feature")


# All carry tier metadata. With the feature on they would take leases, except
# the invalid one (a 400) and the concrete model (no binding).
OFF_REQUESTS: list[tuple[str, dict[str, Any]]] = [
    (CHAT, turn("auto:coding", user("Plan"), **managed("o1", GPT5))),
    (CHAT, turn("roleplay:coding", user("Go"), stream=True, **public("o2", GPT5))),
    (
        CHAT,
        turn(
            "auto:coding",
            user("Open [[sim:tool]]"),
            stream=True,
            tools=TOOLS,
            **managed("o3", MINI),
        ),
    ),
    (
        MESSAGES,
        turn(
            "auto:coding",
            user("Open [[sim:tool]]"),
            max_tokens=64,
            stream=True,
            tools=ANTHROPIC_TOOLS,
            **managed("o4", CLAUDE),
        ),
    ),
    (CHAT, turn("auto:coding", user("Bad"), session_tier={"session": "", "approved_tier": "2"})),
    (CHAT, turn("openai/gpt-5", user("Hi"), **managed("o5", GPT5))),
]


def observe(sim: Sim, g: Gateway) -> dict[str, Any]:
    """Everything a client and the provider can see of OFF_REQUESTS."""
    sim.reset()
    replies = []
    for path, body in OFF_REQUESTS:
        r = post(g.url, path, body)
        headers = {k: v for k, v in r.headers.items() if k not in ("x-orca-request-id", "date")}
        replies.append((r.status_code, headers, normalized(r.content)))
    key_headers = ("authorization", "x-api-key")  # which of a channel's keys served is random
    upstream = [
        (u.path, {k: v for k, v in u.headers.items() if k not in key_headers}, u.body)
        for u in sim.recorder.seen
    ]
    billed: dict[tuple[str, str], dict[str, int]] = {}
    for row in sim.stats()["entries"]:
        total = billed.setdefault((row["provider"], row["model"]), {})
        for name, value in row.items():
            if name not in ("provider", "api_key", "model"):
                total[name] = total.get(name, 0) + value
    return {"replies": replies, "upstream": upstream, "billed": billed}


def without_tier(body: dict[str, Any]) -> dict[str, Any]:
    """The body minus the tier metadata of either shape (the roleplay shape's
    top-level session_id included)."""
    body.pop("session_tier", None)
    routing = body.get("routing")
    if isinstance(routing, dict) and "session_tier" in routing:
        body.pop("session_id", None)
        routing.pop("session_tier", None)
        if not routing:
            del body["routing"]
    return body


@pytest.fixture(scope="module")
def without_feature(sim: Sim) -> dict[str, Any]:
    with gateway(sim.url) as g:
        g.app.state.tiergate.gateway.lanes = NoFeature()
        return observe(sim, g)


@pytest.mark.parametrize(
    ("env", "tiers"),
    [
        ({}, {}),
        ({}, {"mode": "off", "backend": "sqlite", "sqlite_path": "missing.db"}),
        ({"SESSION_TIER_MODE": "off"}, {"mode": "sticky", "backend": "sqlite"}),
        ({"SESSION_TIER_MODE": "STICKY"}, {"mode": "sticky", "backend": "sqlite"}),
    ],
    ids=["default", "config-off", "env-off-wins", "env-malformed"],
)
def test_off_is_byte_for_byte_the_gateway_without_the_feature(
    sim: Sim,
    without_feature: dict[str, Any],
    env: dict[str, str],
    tiers: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Same statuses, headers and bodies for the client; same bytes, headers and
    billing upstream; no lane store opened, no file created. Were the feature on,
    the sticky+sqlite variants would answer 503 (no migrated file)."""
    monkeypatch.chdir(tmp_path)  # a lane file created anywhere relative would show here
    caplog.set_level(logging.WARNING, logger="tiergate.lanes")
    with gateway(sim.url, env=env, session_tiers=tiers) as g:
        assert g.tiers.store is None
        seen = observe(sim, g)
    assert seen["replies"] == without_feature["replies"]

    # the same upstream calls, except that the tier metadata (with its raw session
    # id) no longer reaches the provider, which would reject it (issue #16)
    def shape(upstream: list[Any]) -> list[Any]:  # the body's length differs, by design
        return [(p, {k: v for k, v in h.items() if k != "content-length"}) for p, h, _ in upstream]

    assert shape(seen["upstream"]) == shape(without_feature["upstream"])
    assert [json.loads(b) for _, _, b in seen["upstream"]] == [
        without_tier(json.loads(b)) for _, _, b in without_feature["upstream"]
    ]
    assert all(b"session_tier" not in b for _, _, b in seen["upstream"])
    # the roleplay shape's raw session id never reaches the provider either (issue #28)
    assert all(b"session_id" not in b and b'"o2"' not in b for _, _, b in seen["upstream"])
    assert seen["billed"] == without_feature["billed"]
    assert list(tmp_path.iterdir()) == []
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("tiergate.lanes")]
    if env.get("SESSION_TIER_MODE") == "STICKY":
        assert len(warnings) == 1 and "SESSION_TIER_MODE" in warnings[0]
        assert "STICKY" not in warnings[0]  # names the setting, never its value
    else:
        assert warnings == []


# ---- one lease per lane ---------------------------------------------------------------


def race(urls: list[str], inbound: str, lane: str) -> list[httpx.Response]:
    """One request per URL for the same lane, released together."""
    path, extra = (CHAT, {}) if inbound == "openai" else (MESSAGES, {"max_tokens": 100})
    body = turn("auto:coding", user(f"Race {HOLD}"), **managed(lane, MINI), **extra)
    barrier = threading.Barrier(len(urls))

    def one(url: str) -> httpx.Response:
        barrier.wait()
        return post(url, path, body)

    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(one, urls))


def assert_one_busy(replies: list[httpx.Response]) -> None:
    statuses = sorted(r.status_code for r in replies)
    assert statuses == [200, 409], [r.text for r in replies]
    (busy,) = [r for r in replies if r.status_code == 409]
    assert error_code(busy) == "session_tier_busy"  # in the caller's error format


@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_concurrent_requests_for_one_lane_exactly_one_is_busy(slow_sim: Sim, inbound: str) -> None:
    slow_sim.reset()
    with sticky(slow_sim.url) as g:
        lane = session()
        assert_one_busy(race([g.url, g.url], inbound, lane))
        assert slow_sim.requests() == 1  # the refused request never went upstream
        quick = turn("auto:coding", user("Again [[sim:output=1]]"), **managed(lane, MINI))
        again = chat(g.url, quick)
        assert resolved(again) == "openai/gpt-5-mini"  # the winner's reply freed the lane


def test_two_gateway_instances_on_one_sqlite_file_share_the_lease(
    slow_sim: Sim, tmp_path: Path
) -> None:
    path = str(tmp_path / "lanes.db")
    migrate(path)
    with (
        sticky(slow_sim.url, backend="sqlite", sqlite_path=path) as a,
        sticky(slow_sim.url, backend="sqlite", sqlite_path=path) as b,
    ):
        slow_sim.reset()
        assert_one_busy(race([a.url, b.url], "openai", session()))
        assert slow_sim.requests() == 1


class SlowStore(MemoryLaneStore):
    """Writes take 50 ms, like a busy disk, so "the lease is released before the
    client sees the end of the reply" is checked, not won by a lucky race."""

    async def swap(self, *args: Any, **kwargs: Any) -> bool:
        await asyncio.sleep(0.05)
        return await super().swap(*args, **kwargs)


@pytest.mark.parametrize("stream", [False, True])
def test_the_next_turn_right_after_a_reply_finds_the_lane_free(sim: Sim, stream: bool) -> None:
    quick_failures = {"cooldown_seconds": 0, "max_attempts": 1}
    with gateway(sim.url, server=quick_failures, session_tiers={"mode": "sticky"}) as g:
        g.tiers.store = SlowStore()
        prompt = user("Read it [[sim:tool]]")
        body = turn("auto:coding", prompt, stream=stream, tools=TOOLS, **managed(session(), MINI))
        for _ in range(2):
            assert chat(g.url, body).status_code == 200
        sim.fault(kind="status", status=500, count=1, model="gpt-5-mini")
        assert chat(g.url, body).status_code == 502
        assert chat(g.url, body).status_code == 200  # a retry straight after the error


@pytest.mark.parametrize("fault", ["stream_error", "disconnect"])
def test_the_next_turn_right_after_a_stream_cut_mid_reply_finds_the_lane_free(
    sim: Sim, fault: str
) -> None:
    """The lane is released before the client sees the error event that ends a
    stream cut mid-reply (interrupted, or ended without completing): a client
    that retries on that event gets 200, not 409 session_tier_busy."""
    quick_failures = {"cooldown_seconds": 0, "max_attempts": 1}
    with gateway(sim.url, server=quick_failures, session_tiers={"mode": "sticky"}) as g:
        g.tiers.store = SlowStore()
        for i in range(3):
            lane = session()
            sim.fault(kind=fault, status=500, after_chunks=2, count=1)
            body = turn("auto:coding", user(f"Long {i} [[sim:output=20]]"), stream=True)
            cut = chat(g.url, {**body, **managed(lane, MINI)})
            assert cut.status_code == 200 and b'"error"' in cut.content, cut.content
            again = chat(g.url, turn("auto:coding", user(f"Again {i}"), **managed(lane, MINI)))
            assert again.status_code == 200, again.text
            record = g.lane(lane)
            assert record is not None and record.lease_id is None


# ---- streamed tool calls: observed, hashed, bytes unchanged ---------------------


def streamed_tool_turn(inbound: str, lane: str) -> tuple[str, dict[str, Any]]:
    prompt = user("Read the config [[sim:tool]]")
    tier = managed(lane, MINI)  # the model the router picks anyway, so bytes can match
    if inbound == "openai":
        return CHAT, turn("auto:coding", prompt, stream=True, tools=TOOLS, **tier)
    body = turn("auto:coding", prompt, stream=True, max_tokens=128, tools=ANTHROPIC_TOOLS, **tier)
    return MESSAGES, body


@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_streamed_tool_call_is_recorded_hashed_and_bytes_are_unchanged(
    sim: Sim, gw: Gateway, inbound: str
) -> None:
    lane = session()
    with gateway(sim.url) as off:
        sim.reset()
        plain = post(off.url, *streamed_tool_turn(inbound, lane))
    sim.reset()
    tiered = post(gw.url, *streamed_tool_turn(inbound, lane))
    assert resolved(tiered) == resolved(plain) == "openai/gpt-5-mini"
    assert normalized(tiered.content) == normalized(plain.content)
    (call_id,) = sse_tool_ids(tiered.content)
    record = gw.lane(lane)
    assert record is not None and record.lease_id is None and record.last_turn_ok
    assert record.outstanding == (tool_id_hash(gw.scope(lane), call_id),)
    assert call_id not in repr(record)


def test_recorded_tool_ids_gate_the_next_boundary(gw: Gateway) -> None:
    """Two lanes with the same streamed tool-call turn; a new user turn asks for
    another approval. Only the lane whose transcript answers the call switches."""
    lanes, calls = {}, {}
    for name in ("answered", "unanswered"):
        lanes[name] = session()
        (calls[name],) = sse_tool_ids(
            post(gw.url, *streamed_tool_turn("openai", lanes[name])).content
        )
    question, follow_up = user("Read the config [[sim:tool]]"), user("Now review [[sim:text]]")
    exchange = tool_turn(calls["answered"], '{"path": "a"}', "ok")
    answered = turn("auto:coding", question, *exchange, follow_up, tools=TOOLS)
    unanswered = turn("auto:coding", question, follow_up, tools=TOOLS)
    answered.update(managed(lanes["answered"], CLAUDE))
    unanswered.update(managed(lanes["unanswered"], CLAUDE))
    assert resolved(chat(gw.url, answered)) == "anthropic/claude-sonnet-4-5"
    assert resolved(chat(gw.url, unanswered)) == "openai/gpt-5-mini"
    still = gw.lane(lanes["unanswered"])
    assert still is not None and still.approved_model == MINI[0] and len(still.outstanding) == 1


# ---- the safe boundary ---------------------------------------------------------------


def test_new_approval_waits_for_a_user_turn_after_every_tool_result(gw: Gateway) -> None:
    lane = session()
    client = oai(gw.url)

    def send(messages: list[dict[str, Any]], approval: tuple[str, int]) -> tuple[str, Any]:
        raw = client.chat.completions.with_raw_response.create(
            model="auto:coding",
            messages=messages,  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            extra_body=managed(lane, approval),
        )
        return raw.headers["x-orca-resolved-model"], raw.parse().choices[0]

    history: list[dict[str, Any]] = [user("Fix the failing test [[sim:tool]]")]
    model, first = send(history, GPT5)
    assert model == "openai/gpt-5" and first.finish_reason == "tool_calls"
    (call,) = first.message.tool_calls
    history += tool_turn(call.id, call.function.arguments, "def test(): assert 1 == 2")
    # every result is back, but there is no new user turn: the old route stays,
    # and a retry of that continuation is no new turn either
    for _ in range(2):
        model, reply = send(history, CLAUDE)
        assert model == "openai/gpt-5" and reply.finish_reason == "stop"
    history += [{"role": "assistant", "content": reply.message.content}, user("On [[sim:text]]")]
    model, _ = send(history, CLAUDE)
    assert model == "anthropic/claude-sonnet-4-5"
    record = gw.lane(lane)
    assert record is not None and (record.approved_model, record.approved_tier) == CLAUDE
    assert record.actual_route == "anthropic/claude-sonnet-4-5" and record.outstanding == ()


def test_a_failed_turn_opens_no_boundary(sim: Sim) -> None:
    no_cooldown = {"cooldown_seconds": 0, "max_attempts": 1}
    with gateway(sim.url, server=no_cooldown, session_tiers={"mode": "sticky"}) as g:
        lane = session()

        def send(history: list[dict[str, Any]], approval: tuple[str, int]) -> httpx.Response:
            return chat(g.url, turn("auto:coding", *history, **managed(lane, approval)))

        history = [user("Hello")]
        first = send(history, GPT5)
        assert resolved(first) == "openai/gpt-5"
        history += [first.json()["choices"][0]["message"], user("Second question")]
        sim.fault(kind="status", status=500, count=None, model="gpt-5")
        failed = send(history, GPT5)
        assert failed.status_code == 502 and "x-orca-resolved-model" not in failed.headers
        httpx.delete(f"{sim.url}/_sim/faults")
        # the same user turn again, now asking for claude: the failure closed the boundary
        retried = send(history, CLAUDE)
        assert resolved(retried) == "openai/gpt-5"
        # the next user turn after a success opens it (the failure left no unknown tools)
        history += [retried.json()["choices"][0]["message"], user("Third question")]
        assert resolved(send(history, CLAUDE)) == "anthropic/claude-sonnet-4-5"


def test_a_confirmed_credential_failure_invalidates_only_that_lane(sim: Sim) -> None:
    """A 401 on the served route drops that lane's binding; other lanes keep theirs."""
    no_retry = {"cooldown_seconds": 0, "max_attempts": 1}
    with gateway(sim.url, server=no_retry, session_tiers={"mode": "sticky"}) as g:
        store = g.tiers.store
        assert store is not None
        lane_a, lane_b = session(), session()
        for lane in (lane_a, lane_b):
            r = chat(g.url, turn("auto:coding", user("Hello"), **managed(lane, CLAUDE)))
            assert resolved(r) == "anthropic/claude-sonnet-4-5"
        assert asyncio.run(store.live_count(0)) == 2
        sim.fault(kind="status", status=401, count=1, model="claude-sonnet-4-5")
        failed = chat(
            g.url, turn("auto:coding", user("Hello"), user("Again"), **managed(lane_a, CLAUDE))
        )
        assert failed.status_code == 502
        assert asyncio.run(store.live_count(0)) == 1  # lane A invalidated, lane B kept
