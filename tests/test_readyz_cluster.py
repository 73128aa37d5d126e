"""`/readyz` on a Redis Cluster (three primaries started here): every primary is
pinged, not only the one holding the common slot, and a primary that is down is
named in `state_nodes`; ready again once it is back. Both cluster clients: the
RESP cluster wire (redis:// URLs) and redis-py's (rediss://, URLs with options)."""

from __future__ import annotations

import time
import uuid

import httpx

from redis_cluster_support import start_node, stop_node
from servers import ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app
from tiergate.state.redis_cluster import RedisClusterStore


def addr(port: int) -> str:
    return f"127.0.0.1:{port}"


def readyz(url: str) -> tuple[int, dict[str, object], float]:
    start = time.monotonic()
    r = httpx.get(f"{url}/readyz", timeout=10)
    return r.status_code, r.json(), time.monotonic() - start


def test_readyz_pings_every_primary_and_names_the_one_down(cluster: list[int]) -> None:
    seed = cluster[0]
    state = {"backend": "redis", "cluster": True, "url": f"redis://{addr(seed)}"}
    state["key_prefix"] = f"rz{uuid.uuid4().hex[:8]}:"
    all_ok = {addr(p): "ok" for p in cluster}
    with ServerThread(create_sim_app()) as sim:
        cfg = parse_config(gateway_config(sim.url, state=state))
        with ServerThread(create_app(cfg)) as gw:
            status, body, _ = readyz(gw.url)
            assert (status, body["status"], body["state_nodes"]) == (200, "ready", all_ok)
            assert body["checks"] == {"state": "ok"}

            for down in (cluster[2], seed):  # a primary without the common slot, then the seed
                stop_node(down)
                try:
                    for _ in range(2):  # the second call re-reads the slot map (stale)
                        status, body, took = readyz(gw.url)
                        assert (status, body["status"]) == (503, "not_ready")
                        assert body["checks"] == {"state": "unreachable"}
                        assert body["state_nodes"] == {**all_ok, addr(down): "unreachable"}
                        assert took < 2.0  # cheap: one PING per primary, concurrently
                finally:
                    start_node(down)
                status, body, _ = readyz(gw.url)
                assert (status, body["status"], body["state_nodes"]) == (200, "ready", all_ok)


async def test_ping_nodes_on_redis_pys_cluster_client(cluster: list[int]) -> None:
    """The client of rediss:// and URLs with options names the primary down too."""
    store = RedisClusterStore(f"redis://{addr(cluster[1])}", f"rz{uuid.uuid4().hex[:8]}:")
    store._wire = store._cluster_wire  # as for a URL the RESP cluster wire does not take
    try:
        assert await store.ping_nodes() == {addr(p): True for p in cluster}
        stop_node(cluster[2])
        try:
            nodes = await store.ping_nodes()
        finally:
            start_node(cluster[2])
        assert nodes == {addr(cluster[0]): True, addr(cluster[1]): True, addr(cluster[2]): False}
        assert await store.ping_nodes() == {addr(p): True for p in cluster}
    finally:
        await store.close()


async def test_no_node_answering_names_the_seed() -> None:
    """Nothing listening at all: not ready, and the seed is the node named."""
    from servers import free_port

    port = free_port()
    store = RedisClusterStore(f"redis://127.0.0.1:{port}", "rz:")
    try:
        assert await store.ping_nodes() == {addr(port): False}
        store._wire = store._cluster_wire
        assert await store.ping_nodes() == {addr(port): False}
    finally:
        await store.close()
