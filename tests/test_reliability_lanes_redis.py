"""Session-tier lanes on a Redis that dies (issue #16): two gateways share a
redis-server this test starts on its own port, kills and restarts under load.

Lanes recover as fast as the state store (within a few seconds of the restart),
a completion that could not be recorded while Redis was unreachable is retried
until it is (its lease does not outlive the request by more than the outage),
and the outage is logged once per interval with a counter in /metrics."""

from __future__ import annotations

import concurrent.futures
import logging
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from servers import TOKEN, PrivateRedis, ServerThread, gateway_config, private_redis
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import SimSettings, create_sim_app

LANES_LOGGERS = ("tiergate.lanes", "tiergate.gateway.lanes")


@pytest.fixture
def own_redis() -> Iterator[PrivateRedis]:
    with private_redis() as server:
        yield server


def _config(sim_url: str, redis_url: str) -> Any:
    return parse_config(
        gateway_config(
            sim_url,
            state={"backend": "redis", "url": redis_url},
            session_tiers={"backend": "redis"},
        )
    )


@pytest.fixture
def two_gateways(
    own_redis: PrivateRedis, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ServerThread, ServerThread, ServerThread]]:
    monkeypatch.setenv("SESSION_TIER_MODE", "sticky")
    with (
        ServerThread(create_sim_app(SimSettings(latency_ms=5))) as sim,
        ServerThread(create_app(_config(sim.url, own_redis.url))) as a,
        ServerThread(create_app(_config(sim.url, own_redis.url))) as b,
    ):
        yield sim, a, b


def lane_body(session: str, turn: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for i in range(turn):
        messages.append({"role": "user", "content": f"step {i}"})
        messages.append({"role": "assistant", "content": f"done {i}"})
    messages.append({"role": "user", "content": f"step {turn}"})
    return {
        "model": "orcarouter/coding",
        "messages": messages,
        "session_tier": {
            "session": session,
            "lane": "main",
            "approved_model": "openai:gpt-5-mini",
            "approved_tier": 1,
        },
    }


class Load:
    """Sequential lane sessions on worker threads, alternating between gateways;
    every answer is kept as (time, status, error code)."""

    def __init__(self, urls: list[str], workers: int = 6) -> None:
        self.urls = urls
        self.workers = workers
        self.answers: list[tuple[float, int, str | None]] = []
        self.stop = threading.Event()
        self.pool = concurrent.futures.ThreadPoolExecutor(workers)
        self.futures: list[concurrent.futures.Future[None]] = []

    def _worker(self, w: int) -> None:
        with httpx.Client(timeout=10, headers={"authorization": f"Bearer {TOKEN}"}) as client:
            turn = 0
            while not self.stop.is_set():
                url = self.urls[turn % len(self.urls)]
                r = client.post(f"{url}/v1/chat/completions", json=lane_body(f"w{w}", turn))
                code = None if r.status_code == 200 else r.json()["error"].get("code")
                self.answers.append((time.monotonic(), r.status_code, code))
                turn = turn + 1 if r.status_code == 200 else turn
                time.sleep(0.02)

    def __enter__(self) -> Load:
        self.futures = [self.pool.submit(self._worker, w) for w in range(self.workers)]
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for f in self.futures:
            f.result(timeout=30)
        self.pool.shutdown()


def test_lanes_recover_within_seconds_of_a_redis_restart(
    two_gateways: tuple[ServerThread, ServerThread, ServerThread],
    own_redis: PrivateRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, a, b = two_gateways
    caplog.set_level(logging.INFO)
    with Load([a.url, b.url]) as load:
        time.sleep(1.5)
        killing = time.monotonic()
        own_redis.stop(kill=True)
        killed = time.monotonic()
        time.sleep(4)
        restarting = time.monotonic()
        own_redis.start()
        restarted = time.monotonic()
        time.sleep(6)
    before = [x for x in load.answers if x[0] < killing]
    down = [x for x in load.answers if killed + 0.5 < x[0] < restarting]
    settled = [x for x in load.answers if x[0] > restarted + 3]
    assert before and all(s == 200 for _, s, _ in before), [x for x in before if x[1] != 200][:5]
    assert down and {c for _, _, c in down} == {"session_tier_storage_unavailable"}
    bad = [(round(t - restarted, 2), s, c) for t, s, c in settled if s != 200]
    assert settled and not bad, bad[:10]  # no 503 and no 409 three seconds after the restart
    warnings = [
        r
        for r in caplog.records
        if r.name.startswith(LANES_LOGGERS) and r.levelno >= logging.WARNING
    ]
    # once per interval per gateway (two gateways, outage shorter than the interval)
    assert len(warnings) <= 4, [r.getMessage() for r in warnings]
    metrics = httpx.get(f"{a.url}/metrics").text + httpx.get(f"{b.url}/metrics").text
    assert "tiergate_session_tier_storage_errors_total" in metrics


def test_a_completion_redis_missed_is_recorded_when_it_answers_again(
    own_redis: PrivateRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis stops answering (SIGSTOP) while a lane request is upstream: its
    completion cannot be recorded, and is recorded once Redis answers again, so
    the lane is free for the next turn at once, not after the 30-minute TTL."""
    monkeypatch.setenv("SESSION_TIER_MODE", "sticky")
    assert own_redis.proc is not None
    with (
        ServerThread(create_sim_app(SimSettings(latency_ms=1500))) as sim,
        ServerThread(create_app(_config(sim.url, own_redis.url))) as gw,
    ):
        client = httpx.Client(timeout=20, headers={"authorization": f"Bearer {TOKEN}"})
        url = f"{gw.url}/v1/chat/completions"
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            first = pool.submit(client.post, url, json=lane_body("paused", 0))
            time.sleep(0.8)  # the lease is taken; the reply is upstream
            own_redis.proc.send_signal(signal.SIGSTOP)
            try:
                assert first.result(timeout=15).status_code == 200
            finally:
                own_redis.proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 5
        while True:
            r = client.post(url, json=lane_body("paused", 1))
            if r.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert r.status_code == 200, r.text  # not 409 session_tier_busy for 30 minutes
