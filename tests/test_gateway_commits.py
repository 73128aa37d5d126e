"""Deferred commits: the reply goes out before the turn's state writes, the
session's next turn still plans on them, and a client that disconnects
cancels its upstream call."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest

from servers import TOKEN, ServerThread, gateway_config
from tiergate import metrics
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.gateway.commits import SessionCommits
from tiergate.sim.app import create_sim_app
from tiergate.sim.settings import SimSettings
from tiergate.state.base import Incr, Write
from tiergate.state.memory import MemoryStore

# ---- SessionCommits ------------------------------------------------------------


async def test_settle_waits_for_the_scopes_commit_only() -> None:
    commits = SessionCommits()
    done: list[str] = []

    async def commit(name: str, seconds: float) -> None:
        await asyncio.sleep(seconds)
        done.append(name)

    commits.spawn("a", commit("a", 0.05))
    commits.spawn("b", commit("b", 0.5))
    started = time.perf_counter()
    await commits.settle("a")
    assert done == ["a"]
    assert time.perf_counter() - started < 0.4  # did not wait for b
    await commits.settle(None)  # no session: nothing to wait for
    await commits.drain()
    assert done == ["a", "b"]
    assert commits.pending() == 0


async def test_a_cancelled_waiter_does_not_cancel_the_commit() -> None:
    commits = SessionCommits()
    finished = asyncio.Event()

    async def commit() -> None:
        await asyncio.sleep(0.05)
        finished.set()

    commits.spawn("s", commit())
    waiter = asyncio.ensure_future(commits.settle("s"))
    await asyncio.sleep(0.01)
    waiter.cancel()
    await asyncio.wait_for(finished.wait(), 1)


async def test_a_failed_commit_is_logged_and_does_not_block_the_next_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    commits = SessionCommits()

    async def boom() -> None:
        raise RuntimeError("store exploded")

    commits.spawn("s", boom())
    await commits.settle("s")
    await commits.drain()
    assert any("deferred commit failed" in r.getMessage() for r in caplog.records)


# ---- through the gateway -------------------------------------------------------


class SlowWriteStore(MemoryStore):
    """Writes take 200 ms and every call is logged in order, so a test can see
    whether a turn's reads happened before or after the previous turn's writes."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        self.log.append("read")
        return await super().get_many(keys)

    async def set_many(self, writes: Sequence[Write]) -> None:
        await asyncio.sleep(0.2)
        await super().set_many(writes)
        self.log.append("write")

    async def apply_batch(
        self,
        writes: Sequence[Write],
        incrs: Sequence[Incr] = (),
        guard: tuple[str, bytes | None] | None = None,
    ) -> bool:
        await asyncio.sleep(0.2)
        ok = await super().apply_batch(writes, incrs, guard)
        self.log.append("write")
        return ok


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app(SimSettings(latency_ms=0))) as s:
        yield s


def _chat(session: str) -> dict[str, Any]:
    return {
        "model": "router/coding",
        "messages": [{"role": "user", "content": "Rename the helper and run the tests."}],
        "metadata": {"session_id": session},
    }


def test_reply_does_not_wait_for_the_commit_but_the_next_turn_does(sim: ServerThread) -> None:
    app = create_app(parse_config(gateway_config(sim.url)))
    with ServerThread(app) as gw:
        store = SlowWriteStore()
        app.state.tiergate.gateway.planner.store = store
        headers = {"authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=gw.url, headers=headers, timeout=10) as client:
            started = time.perf_counter()
            first = client.post("/v1/chat/completions", json=_chat("sess-1"))
            first_seconds = time.perf_counter() - started
            second = client.post("/v1/chat/completions", json=_chat("sess-1"))
        assert first.status_code == 200 and second.status_code == 200
        assert first_seconds < 0.15, "the reply waited for the 200 ms commit"
        # turn 2 read state only after turn 1's writes landed
        assert store.log[:3] == ["read", "write", "read"], store.log


def _raw_post(url: str, body: bytes) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\n"
        f"authorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head + body)
    return sock


def _disconnects() -> float:
    return metrics.REQUESTS_TOTAL.labels("", "", "", "499")._value.get()


def test_a_client_that_disconnects_cancels_its_upstream_call() -> None:
    with ServerThread(create_sim_app(SimSettings(latency_ms=3000))) as slow_sim:
        app = create_app(parse_config(gateway_config(slow_sim.url)))
        with ServerThread(app) as gw:
            before = _disconnects()
            body = {"model": "openai/gpt-5-mini", "messages": [{"role": "user", "content": "hi"}]}
            sock = _raw_post(gw.url, json.dumps(body).encode())
            time.sleep(0.3)  # the gateway is now waiting on the 3 s upstream
            sock.close()
            deadline = time.monotonic() + 2.0  # well before the upstream would answer
            while _disconnects() == before and time.monotonic() < deadline:
                time.sleep(0.02)
            assert _disconnects() == before + 1
            # the request task was not left cancelled: the gateway still serves
            fast = httpx.get(f"{gw.url}/healthz", timeout=5)
            assert fast.status_code == 200


def test_the_usage_row_is_recorded_on_the_event_loop_after_the_reply(sim: ServerThread) -> None:
    """The row is written once the reply is sent, and on the loop's own thread
    (Starlette would run a plain-function background task in a worker thread)."""
    app = create_app(parse_config(gateway_config(sim.url)))
    with ServerThread(app) as gw:
        recorder = app.state.tiergate.gateway.recorder
        seen: list[bool] = []
        original = recorder.record

        def record(table: str, row: dict[str, Any]) -> None:
            try:
                asyncio.get_running_loop()
                seen.append(True)
            except RuntimeError:
                seen.append(False)
            original(table, row)

        recorder.record = record
        headers = {"authorization": f"Bearer {TOKEN}"}
        reply = httpx.post(
            f"{gw.url}/v1/chat/completions", json=_chat("sess-rec"), headers=headers, timeout=10
        )
        assert reply.status_code == 200
        deadline = time.monotonic() + 2
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen == [True]
