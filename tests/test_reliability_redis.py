"""Redis stopped and restarted under traffic (a Redis this test starts on its own
port, never the shared one): affinity and escalation degrade to no-ops and
recover, session tiers answer 503 storage unavailable, nothing hangs."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from escalation_support import coding_router
from servers import TOKEN, PrivateRedis, ServerThread, gateway_config, private_redis
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app

SYSTEM = "You are a coding agent in a large repository. " + " ".join(
    f"Rule {i}: keep diffs small and tests green." for i in range(300)
)


@pytest.fixture
def own_redis() -> Iterator[PrivateRedis]:
    with private_redis() as server:
        yield server


def _chat(
    client: httpx.Client, url: str, messages: list[dict[str, Any]], **extra: Any
) -> httpx.Response:
    t0 = time.monotonic()
    r = client.post(
        f"{url}/v1/chat/completions",
        json={"model": "orcarouter/coding", "messages": messages, **extra},
        headers={"x-orcarouter-session-id": "outage"},
    )
    assert time.monotonic() - t0 < 5, "a request hung while Redis was down"
    return r


def _warm(r: httpx.Response, prev_prompt: int) -> bool:
    details = r.json()["usage"].get("prompt_tokens_details") or {}
    return details.get("cached_tokens", 0) >= prev_prompt - 128


def test_redis_outage_degrades_and_recovers(
    sim_and_gateway: tuple[ServerThread, ServerThread, PrivateRedis],
) -> None:
    _, gw, redis_srv = sim_and_gateway
    client = httpx.Client(timeout=10, headers={"authorization": f"Bearer {TOKEN}"})
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]

    def turn(i: int, **extra: Any) -> httpx.Response:
        messages.append({"role": "user", "content": f"step {i}: " + "output line\n" * 200})
        r = _chat(client, gw.url, messages, **extra)
        if r.status_code == 200:
            messages.append(
                {"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]}
            )
        return r

    prev = 0
    for i in range(3):  # healthy: pinned and warm
        r = turn(i)
        assert r.status_code == 200
        if i:
            assert _warm(r, prev)
        prev = r.json()["usage"]["prompt_tokens"]
    assert r.headers["x-orca-session-tier"] == "base"

    redis_srv.stop(kill=True)
    lane = {
        "session_tier": {
            "session": "s",
            "lane": "main",
            "approved_model": "openai:gpt-5-mini",
            "approved_tier": 1,
        }
    }
    for i in range(3, 9):  # down: still served, escalation serves base, lanes are 503
        r = turn(i)
        assert r.status_code == 200, r.text
        assert r.headers.get("x-orca-session-tier") == "base"
        tier = _chat(client, gw.url, [{"role": "user", "content": "x"}], **lane)
        assert tier.status_code == 503
        assert tier.json()["error"]["code"] == "session_tier_storage_unavailable"
        assert "choices" not in tier.json()  # never a synthetic completion

    redis_srv.start()  # same port, empty: affinity starts over and holds again
    time.sleep(1.2)  # the resilient store retries the backend after its back-off
    results = [turn(i) for i in range(9, 14)]
    assert all(r.status_code == 200 for r in results)
    warm_after = [
        _warm(b, a.json()["usage"]["prompt_tokens"]) for a, b in itertools.pairwise(results)
    ]
    assert all(warm_after[1:]), warm_after  # pins re-established after the first turn back
    assert _chat(client, gw.url, [{"role": "user", "content": "x"}], **lane).status_code == 200


@pytest.fixture
def sim_and_gateway(
    own_redis: PrivateRedis, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ServerThread, ServerThread, PrivateRedis]]:
    monkeypatch.setenv("SESSION_TIER_MODE", "sticky")
    with ServerThread(create_sim_app()) as sim:
        router = coding_router(mode="auto")
        cfg = parse_config(
            gateway_config(
                sim.url,
                routers=[router],
                state={"backend": "redis", "url": own_redis.url},
                session_tiers={"backend": "redis"},
            )
        )
        with ServerThread(create_app(cfg)) as gw:
            yield sim, gw, own_redis
