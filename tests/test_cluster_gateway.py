"""The real gateway on a real Redis Cluster (three primaries started here, Redis and,
when its binary is there, Valkey): many sessions over HTTP with escalation on,
their state spread over every primary, tier state and strikes sticking, the
share counters exact; and the session-tier lease store (`session_tiers.backend:
redis`) on the same cluster: its contract tests, and sticky lanes over HTTP."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from lanes_http_support import CLAUDE, chat, gateway, managed, resolved, session, sim_server, turn
from lanes_http_support import user as plain_user
from redis_cluster_support import keys_on, primaries
from servers import TOKEN, ServerThread, gateway_config
from test_lanes_contract import (  # the lane-store contract, on the cluster
    test_capacity_exhaustion_is_503_until_lanes_expire,
    test_concurrent_requests_for_one_lane_one_wins,
    test_expired_entries_are_pruned,
    test_expired_record_counts_as_absent,
    test_in_flight_lease_makes_the_lane_busy,
    test_round_trip_keeps_every_field,
    test_swap_is_compare_and_swap,
)
from tiergate.api.admin_sessions import workspace_id
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.lanes import LaneStore, RedisLaneStore, open_lane_store
from tiergate.routing.caps import counters_from_values, router_share_keys, workspace_share_keys
from tiergate.sim.app import create_sim_app
from tiergate.state.redis_cluster import RedisClusterStore

STRONG = "anthropic/claude-sonnet-4-5"
WEAK = "openai/gpt-5-mini"
SESSIONS = 24

__all__ = [
    "test_capacity_exhaustion_is_503_until_lanes_expire",
    "test_concurrent_requests_for_one_lane_one_wins",
    "test_expired_entries_are_pruned",
    "test_expired_record_counts_as_absent",
    "test_in_flight_lease_makes_the_lane_busy",
    "test_round_trip_keeps_every_field",
    "test_swap_is_compare_and_swap",
]


@pytest.fixture
async def make_store(cluster: list[int]) -> AsyncIterator[Any]:
    """Overrides the contract's: lane stores on the cluster, one per "instance"."""
    prefix = f"l{uuid.uuid4().hex[:8]}:lanes:"
    opened: list[RedisLaneStore] = []

    def make(capacity: int = 10_000) -> LaneStore:
        seed = cluster[len(opened) % len(cluster)]
        store = open_lane_store(
            "redis",
            redis_url=f"redis://127.0.0.1:{seed}",
            key_prefix=prefix,
            capacity=capacity,
            cluster=True,
        )
        assert isinstance(store, RedisLaneStore)
        opened.append(store)
        return store

    yield make
    if opened:
        keys = [k async for k in opened[0].client.scan_iter(match="{" + prefix[:-1] + "}:*")]
        if keys:
            await opened[0].client.unlink(*keys)
    for store in opened:
        await store.close()


def _router() -> dict[str, Any]:
    return {
        "name": "coding",
        "allowed_models": ["openai/*", "anthropic/*"],
        "strategy": "gated_adaptive",
        "weak_pool": [WEAK],
        "mid_pool": [WEAK],
        "strong_pool": [STRONG],
        "default_model": WEAK,
        # lexical: the failure loop below must escalate by its strikes (kept in the
        # tier state on the session's slot); the learned scorer may get there first
        "escalation": {"mode": "auto", "share_cap_percent": 100, "scorer": "lexical"},
    }


def _send(gw: str, sid: str, messages: list[dict[str, Any]], **headers: str) -> tuple[str, str]:
    r = httpx.post(
        f"{gw}/v1/chat/completions",
        headers={"authorization": f"Bearer {TOKEN}", "x-orcarouter-session-id": sid, **headers},
        json={"model": "orcarouter/coding", "messages": messages},
        timeout=15,
    )
    assert r.status_code == 200, r.text
    messages.append({"role": "assistant", "content": "ok"})
    return r.headers["x-orca-resolved-model"], r.headers.get("x-orca-session-tier", "")


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text + " [[sim:text]]"}


def _failing_turn(i: int) -> list[dict[str, Any]]:
    """Two errored tool results in the latest turn: one strike."""
    calls = [(f"call_{i}_{k}", cmd) for k, cmd in enumerate(("go build ./...", "go test ./..."))]
    err = f"./pool/worker.go:{40 + i}:2: undefined: jobQueue\nexit status 2"
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": c, "type": "function", "function": {"name": "run", "arguments": f'"{cmd}"'}}
                for c, cmd in calls
            ],
        },
        *({"role": "tool", "tool_call_id": c, "content": f"error: {err}"} for c, _ in calls),
    ]


async def _counters(url: str, prefix: str) -> tuple[tuple[int, int], int]:
    store = RedisClusterStore(url, prefix)
    try:
        now = time.time()
        r = counters_from_values(await store.get_many(router_share_keys("coding", now, 2)))
        w_keys = workspace_share_keys(workspace_id("default"), now, 2)
        w = counters_from_values(await store.get_many(w_keys))
        return (int(r.requests), int(r.strong_requests)), int(w.requests)
    finally:
        await store.close()


def test_many_sessions_through_the_gateway_spread_and_stick(cluster: list[int]) -> None:
    prefix = f"gw{uuid.uuid4().hex[:8]}:"
    url = f"redis://127.0.0.1:{cluster[0]}"
    state = {"backend": "redis", "cluster": True, "url": url, "key_prefix": prefix}
    ws = [{"name": "default", "tokens": [TOKEN], "escalation_share_cap_percent": 100}]
    served: list[tuple[str, str]] = []
    with ServerThread(create_sim_app()) as sim:
        cfg = parse_config(gateway_config(sim.url, state=state, workspaces=ws, routers=[_router()]))
        with ServerThread(create_app(cfg)) as gw:
            assert httpx.get(f"{gw.url}/readyz", timeout=5).json()["checks"]["state"] == "ok"
            for i in range(SESSIONS):
                sid = f"cluster-session-{i}"
                messages: list[dict[str, Any]] = [_user(f"Rename the variable in file {i}.")]
                first = _send(gw.url, sid, messages)
                messages.append(_user("Now sort the imports."))
                ask = {"X-OrcaRouter-Tier": "strong"} if i % 2 == 0 else {}
                second = _send(gw.url, sid, messages, **ask)
                messages.append(_user("Bump the version string."))
                third = _send(gw.url, sid, messages)
                served += [first, second, third]
                assert first == (WEAK, "base")
                if i % 2 == 0:  # the tier state written in the session's slot is read back
                    assert (second, third) == (
                        (STRONG, "strong; reason=explicit"),
                        (STRONG, "strong"),
                    )
                else:
                    assert (second, third) == ((WEAK, "base"), (WEAK, "base"))
            loop: list[dict[str, Any]] = [_user("Make the build pass.")]
            tiers = []
            for i in range(4):  # strikes: kept in the tier state, across turns
                loop.extend(_failing_turn(i))
                model, tier = _send(gw.url, "cluster-failure-loop", loop)
                served.append((model, tier))
                tiers.append(tier)
            assert "strong; reason=strikes" in tiers, tiers
            want = ((len(served), sum(m == STRONG for m, _ in served)), len(served))
            deadline = time.monotonic() + 10  # commits land after the reply
            while (got := asyncio.run(_counters(url, prefix))) != want:
                assert time.monotonic() < deadline, (got, want)
                time.sleep(0.05)
    nodes = {p: keys_on(p, prefix + "{s:*") for p in primaries(cluster)}
    assert len(nodes) == 3 and all(nodes.values()), {p: len(k) for p, k in nodes.items()}
    tags = {k[len(prefix) : k.index("}")] for keys in nodes.values() for k in keys}
    assert len(tags) == SESSIONS + 1  # one tag per session, pins and tier state together
    session_keys = [k.split("}:", 1)[1] for keys in nodes.values() for k in keys]
    assert {k.split(":")[0] + ":" + k.split(":")[1] for k in session_keys} == {
        "aff:m",
        "aff:c",
        "esc:tier",
    }


def test_sticky_session_tiers_on_the_cluster(cluster: list[int]) -> None:
    prefix = f"lt{uuid.uuid4().hex[:8]}:"
    url = f"redis://127.0.0.1:{cluster[1]}"
    state = {"backend": "redis", "cluster": True, "url": url, "key_prefix": prefix}
    tiers = {"mode": "sticky", "backend": "redis"}
    with sim_server() as sim, gateway(sim.url, state=state, session_tiers=tiers) as g:
        assert isinstance(g.tiers.store, RedisLaneStore)
        lanes = [session() for _ in range(6)]
        for lane in lanes:
            body = turn("auto:coding", plain_user("Plan the change"), **managed(lane, CLAUDE))
            assert resolved(chat(g.url, body)) == STRONG
            again = turn("auto:coding", plain_user("Go on"), **managed(lane, CLAUDE))
            assert resolved(chat(g.url, again)) == STRONG  # the lease was released
            record = g.lane(lane)
            assert record is not None and record.approved_model == CLAUDE[0]
        assert g.live_lanes() == len(lanes)
    holders = [p for p in primaries(cluster) if keys_on(p, "{" + prefix + "lanes}:*")]
    assert len(holders) == 1  # one slot: the lane store runs on a cluster, unspread
