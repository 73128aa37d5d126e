"""GET /metrics after real traffic through the simulator: request counts and
latencies by router/model/channel/status, upstream latency, cache-read tokens,
escalations and denials, share-cap utilisation, lease conflicts; and the
optional metrics token.

The registry is process-wide, so assertions compare a scrape before the
traffic with one after it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from admin_support import ADMIN, STRONG, WEAK, admin_config, chat, escalating_router, gateway
from lanes_http_support import MINI, managed, sim_server, sticky, turn, user
from lanes_http_support import chat as lane_chat
from lanes_http_support import session as lane_session
from servers import ServerThread
from tiergate.sim.app import SimSettings, create_sim_app

METRICS_TOKEN = "tg-metrics-token-for-scrapers"
LONG_SYSTEM = "You are a careful coding agent. " + " ".join(
    f"Rule {i}: keep functions small, name things clearly and test behaviour." for i in range(300)
)
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str, token: str | None = METRICS_TOKEN) -> Samples:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = httpx.get(f"{url}/metrics", headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    out: Samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    db = tmp_path_factory.mktemp("metrics") / "tg.db"
    routers = [
        escalating_router("esc"),
        escalating_router("capped", share_cap_percent=0),
        {"name": "coding", "allowed_models": ["openai/*"], "strategy": "cheapest"},
    ]
    with ServerThread(create_sim_app()) as sim:
        doc = admin_config(sim.url, str(db), routers=routers)
        doc["server"]["metrics_token"] = METRICS_TOKEN
        with gateway(doc) as (gw, _):
            before = scrape(gw.url)
            convo = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "Hi"}]
            for _ in range(2):
                assert (
                    chat(gw, "orcarouter/coding", session="warm", messages=convo).status_code == 200
                )
            strong = {"X-OrcaRouter-Tier": "strong"}
            assert chat(gw, "orcarouter/esc", session="e1", headers=strong).status_code == 200
            assert chat(gw, "orcarouter/capped", session="c1", headers=strong).status_code == 200
            assert chat(gw, "nobody/model").status_code == 404
            yield {"gw": gw, "before": before, "after": scrape(gw.url)}


def delta(t: dict[str, Any], name: str, **labels: str) -> float:
    return value(t["after"], name, **labels) - value(t["before"], name, **labels)


def test_requests_and_latency_by_router_model_channel_status(traffic: dict[str, Any]) -> None:
    ok = {"router": "coding", "model": WEAK, "channel": "oa", "status": "200"}
    assert delta(traffic, "tiergate_requests_total", **ok) == 2
    assert delta(traffic, "tiergate_request_latency_seconds_count", **ok) == 2
    assert delta(traffic, "tiergate_request_latency_seconds_sum", **ok) > 0
    strong = {"router": "esc", "model": STRONG, "channel": "an", "status": "200"}
    assert delta(traffic, "tiergate_requests_total", **strong) == 1
    refused = {"router": "", "model": "", "channel": "", "status": "404"}
    assert delta(traffic, "tiergate_requests_total", **refused) == 1


def test_upstream_latency_and_cache_read_tokens(traffic: dict[str, Any]) -> None:
    # two on router coding, one on router capped (its denied escalation is served base)
    assert delta(traffic, "tiergate_upstream_latency_seconds_count", channel="oa", model=WEAK) == 3
    assert delta(traffic, "tiergate_cache_read_tokens_total", channel="oa", model=WEAK) > 1000


def test_escalations_denials_and_share_cap_utilisation(traffic: dict[str, Any]) -> None:
    escalated = {"router": "esc", "event": "escalated", "trigger": "explicit"}
    assert delta(traffic, "tiergate_escalation_events_total", **escalated) == 1
    denied = {"router": "capped", "event": "denied_cap", "trigger": "explicit"}
    assert delta(traffic, "tiergate_escalation_events_total", **denied) == 1
    assert (
        delta(traffic, "tiergate_escalation_denials_total", router="capped", reason="share_cap")
        == 1
    )
    after = traffic["after"]
    share = value(after, "tiergate_escalated_share", router="esc")
    assert share == 1.0  # one request, served strong
    assert value(after, "tiergate_share_cap_utilisation", router="esc") == pytest.approx(5.0)
    assert ("tiergate_config_version", frozenset()) in after


def test_metrics_token(traffic: dict[str, Any]) -> None:
    url = traffic["gw"].url
    assert httpx.get(f"{url}/metrics").status_code == 401
    wrong = httpx.get(f"{url}/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    scrape(url, ADMIN)  # the admin token works too


def test_metrics_are_open_without_a_metrics_token(tmp_path: Path) -> None:
    with ServerThread(create_sim_app()) as sim, gateway(admin_config(sim.url, None)) as (gw, _):
        assert "tiergate_state_store_errors" in httpx.get(f"{gw.url}/metrics").text


def test_lease_conflicts_are_counted() -> None:
    with sim_server(SimSettings(tokens_per_second=100)) as sim, sticky(sim.url) as g:
        before = scrape(g.url, None)
        body = turn("auto:coding", user("Race [[sim:output=60]]"), **managed(lane_session(), MINI))
        barrier = threading.Barrier(2)

        def one(_: int) -> int:
            barrier.wait()
            return lane_chat(g.url, body).status_code

        with ThreadPoolExecutor(2) as pool:
            statuses = sorted(pool.map(one, range(2)))
        assert statuses == [200, 409]
        after = scrape(g.url, None)
    name = "tiergate_session_tier_lease_conflicts_total"
    assert value(after, name) - value(before, name) == 1
