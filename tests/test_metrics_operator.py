"""The operator metrics on /metrics: token and cost counters, requests in flight,
upstream key health and the standard process_* family, after real traffic
through the simulator."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from servers import TOKEN, ServerThread, gateway_config
from test_metrics_endpoint import scrape, value
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import SimSettings, create_sim_app

LONG_SYSTEM = "You are a careful coding agent. " + " ".join(
    f"Rule {i}: keep functions small and test behaviour." for i in range(300)
)


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app(SimSettings(latency_ms=400))) as s:
        yield s


@pytest.fixture(scope="module")
def gw(sim: ServerThread) -> Iterator[ServerThread]:
    with ServerThread(create_app(parse_config(gateway_config(sim.url)))) as g:
        yield g


def chat(gw: ServerThread, session: str) -> httpx.Response:
    return httpx.post(
        f"{gw.url}/v1/chat/completions",
        headers={
            "authorization": f"Bearer {TOKEN}",
            "x-orcarouter-include-cost": "true",
            "x-orcarouter-session-id": session,
        },
        json={
            "model": "openai/gpt-5-mini",
            "messages": [
                {"role": "system", "content": LONG_SYSTEM},
                {"role": "user", "content": "Hello"},
            ],
        },
        timeout=10,
    )


def test_tokens_and_cost_count_what_the_replies_billed(gw: ServerThread) -> None:
    labels = {"channel": "oa", "model": "openai/gpt-5-mini"}
    before = scrape(gw.url, None)
    replies = [chat(gw, "metrics-tokens") for _ in range(2)]  # the second reads the cache
    after = scrape(gw.url, None)

    def delta(name: str, **extra: str) -> float:
        return value(after, name, **labels, **extra) - value(before, name, **labels, **extra)

    usages = [r.json()["usage"] for r in replies]
    cached = sum(u.get("prompt_tokens_details", {}).get("cached_tokens", 0) for u in usages)
    assert cached > 0
    assert delta("tiergate_tokens_total", kind="input") == sum(u["prompt_tokens"] for u in usages)
    assert delta("tiergate_tokens_total", kind="cached") == cached
    assert delta("tiergate_tokens_total", kind="output") == sum(
        u["completion_tokens"] for u in usages
    )
    cost = sum(float(r.headers["x-orca-cost"]) for r in replies)
    assert delta("tiergate_cost_usd_total") == pytest.approx(cost, rel=1e-6)


def test_in_flight_counts_a_request_until_it_is_answered(gw: ServerThread) -> None:
    base = value(scrape(gw.url, None), "tiergate_requests_in_flight")
    worker = threading.Thread(target=chat, args=(gw, "metrics-in-flight"))
    worker.start()
    seen = 0.0
    deadline = time.monotonic() + 5
    while worker.is_alive() and time.monotonic() < deadline and seen <= base:
        seen = value(scrape(gw.url, None), "tiergate_requests_in_flight")
        time.sleep(0.02)
    worker.join(10)
    assert seen == base + 1  # the simulator holds each reply 400 ms
    assert value(scrape(gw.url, None), "tiergate_requests_in_flight") == base


def test_key_health_shows_a_failure_and_a_key_cooling_down(
    sim: ServerThread, gw: ServerThread
) -> None:
    keys = [{"channel": "oa", "key_index": str(i)} for i in range(3)]
    samples = scrape(gw.url, None)
    assert [value(samples, "tiergate_upstream_key_healthy", **k) for k in keys] == [1, 1, 1]
    fault = {"kind": "status", "status": 500, "count": 1, "model": "gpt-5-mini"}
    httpx.post(f"{sim.url}/_sim/faults", json=fault).raise_for_status()
    try:
        assert chat(gw, "metrics-health").status_code == 200  # retried on another key
    finally:
        httpx.delete(f"{sim.url}/_sim/faults")
    samples = scrape(gw.url, None)  # one 500 is counted, but is no outlier: still healthy
    assert sum(value(samples, "tiergate_upstream_key_healthy", **k) for k in keys) == 3
    failures = [value(samples, "tiergate_upstream_key_consecutive_failures", **k) for k in keys]
    assert sorted(failures) == [0, 0, 1]
    fault = {"kind": "status", "status": 429, "count": 1, "model": "gpt-5-mini"}
    httpx.post(f"{sim.url}/_sim/faults", json={**fault, "retry_after": 30}).raise_for_status()
    try:
        assert chat(gw, "metrics-health-429").status_code == 200
    finally:
        httpx.delete(f"{sim.url}/_sim/faults")
    samples = scrape(gw.url, None)  # a rate limit cools its key for the Retry-After
    assert sum(value(samples, "tiergate_upstream_key_healthy", **k) for k in keys) == 2


def test_process_metrics_are_exported(gw: ServerThread) -> None:
    samples = scrape(gw.url, None)
    assert value(samples, "process_resident_memory_bytes") > 10_000_000
    assert value(samples, "process_cpu_seconds_total") > 0
    assert value(samples, "process_start_time_seconds") > 1.7e9
