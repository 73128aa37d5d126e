"""Redis Cluster: how one gateway's state traffic falls on three primaries, with the
earlier single-slot layout (every key under `{tg}`) and with the hash tags of
state/cluster_keys.py (per session, per router, per workspace).

Three `redis-server --cluster-enabled yes` primaries on loopback ports are
started in a temp dir (tests/redis_cluster_support.py). For each layout one
asyncio process plays S sessions x T turns of the state calls a router request
with escalation and affinity makes: the one read (tier state, both model pins,
two channel pins, the router's and the workspace's share buckets) and the
guarded commit (tier state and pins, the share counters), C requests in flight.
Per primary: keys held, calls (MGET and EVALSHA, from INFO commandstats, reset
before each layout) and the server time spent in them, so the hottest node's
share is visible; and the client's requests/s and CPU per request (the client,
redis-py's cluster client, is the bottleneck here, not the servers).

Sessions are dealt round-robin over `--routers` routers and `--workspaces`
workspaces (1 and 1 by default: every request then reads and increments the
same router's and workspace's counters, the hottest case).

Run: .venv/bin/python bench/bench_cluster.py [--quick] [--sessions 2000] [--turns 3]
     [--routers 1] [--workspaces 1]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import common

sys.path.insert(0, str(common.ROOT / "tests"))
from redis_cluster_support import cli, primaries, redis_cluster
from tiergate.routing.affinity import channel_pin_key, model_pin_key
from tiergate.routing.caps import router_share_keys, share_incrs, workspace_share_keys
from tiergate.routing.session import SessionId, session_scope
from tiergate.routing.tier_state import tier_state_key
from tiergate.state.base import Write
from tiergate.state.redis_cluster import RedisClusterStore

NOW = 1_767_225_600.0
MODELS = ("openai/gpt-5-mini", "anthropic/claude-sonnet-4-5")


class SingleSlotStore(RedisClusterStore):
    """The earlier layout: every key under the prefix's one tag, so one slot."""

    def _k(self, key: str) -> str:
        return self.prefix + key


def read_keys(scope: str, router: str, workspace: str) -> list[str]:
    return [
        tier_state_key(scope, router),
        model_pin_key(scope, router),
        model_pin_key(scope, router, "strong"),
        *(channel_pin_key(scope, m) for m in MODELS),
        *router_share_keys(router, NOW, 2),
        *workspace_share_keys(workspace, NOW, 2),
    ]


async def one_request(
    store: RedisClusterStore, scope: str, turn: int, router: str = "r0", workspace: str = "w0"
) -> None:
    values = await store.get_many(read_keys(scope, router, workspace))
    tier = tier_state_key(scope, router)
    writes = [
        Write(tier, f"state-{turn}".encode(), 4 * 3600),
        Write(model_pin_key(scope, router), MODELS[0].encode(), 3600),
        Write(channel_pin_key(scope, MODELS[0]), b'["oa",1,"fp"]', 300),
    ]
    incrs = share_incrs(router, workspace, NOW, 2, strong=False, cost=0.001)
    assert await store.apply_batch(writes, incrs, guard=(tier, values[0]))


TOP_LEVEL = ("cmdstat_mget", "cmdstat_evalsha")


def node_stats(port: int) -> tuple[int, int]:
    """Calls of the store's top-level commands and the server µs spent in them
    (a script's µs include the commands it runs; those are not counted again)."""
    calls = usec = 0
    for line in cli(port, "INFO", "commandstats").splitlines():
        name, _, rest = line.partition(":")
        if name in TOP_LEVEL:
            fields = dict(f.split("=") for f in rest.split(","))
            calls += int(fields["calls"])
            usec += int(fields["usec"])
    return calls, usec


async def run_layout(
    cls: type[RedisClusterStore], ports: list[int], args: argparse.Namespace
) -> dict[str, Any]:
    prefix = f"b{uuid.uuid4().hex[:6]}:"
    store = cls(f"redis://127.0.0.1:{ports[0]}", prefix, connect_timeout=5, socket_timeout=5)
    sessions = [
        (
            session_scope("w", SessionId(f"s{i}", "header", True)),
            f"r{i % args.routers}",
            f"w{i % args.workspaces}",
        )
        for i in range(args.sessions)
    ]
    work = [(s, t) for t in range(args.turns) for s in sessions]
    for scope, router, workspace in sessions[: args.routers * args.workspaces]:
        await one_request(store, scope, -1, router, workspace)  # slot map, scripts loaded
    for port in ports:
        cli(port, "CONFIG", "RESETSTAT")
    cpu0, t0 = time.process_time(), time.perf_counter()

    async def worker(items: list[tuple[tuple[str, str, str], int]]) -> None:
        for (scope, router, workspace), turn in items:
            await one_request(store, scope, turn, router, workspace)

    conc = args.concurrency
    await asyncio.gather(*(worker(work[i::conc]) for i in range(conc)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    nodes = []
    for port in ports:
        calls, usec = node_stats(port)
        keys = len(cli(port, "--scan", "--pattern", f"*{prefix[:-1]}*").split())
        nodes.append({"port": port, "keys": keys, "calls": calls, "server_us": usec})
    await store.delete_prefix()
    await store.close()
    hottest = max(nodes, key=lambda n: n["server_us"])
    return {
        "requests": len(work),
        "requests_per_s": len(work) / wall,
        "client_cpu_us_per_request": cpu / len(work) * 1e6,
        "calls_per_request": sum(n["calls"] for n in nodes) / len(work),
        "server_us_per_request": sum(n["server_us"] for n in nodes) / len(work),
        "hottest_node_server_us_per_request": hottest["server_us"] / len(work),
        "hottest_node_calls_per_request": hottest["calls"] / len(work),
        "nodes": nodes,
    }


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="tiny run (smoke test)")
    p.add_argument("--sessions", type=int, default=2000)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--routers", type=int, default=1)
    p.add_argument("--workspaces", type=int, default=1)
    args = p.parse_args()
    if args.quick:
        args.sessions, args.turns, args.concurrency = 60, 2, 8
    info = common.machine_info()
    common.print_machine(info)
    out: dict[str, Any] = {"machine": info, "args": vars(args), "layouts": {}}
    with tempfile.TemporaryDirectory() as tmp, redis_cluster(Path(tmp)) as ports:
        ports = primaries(ports)
        for name, cls in (("single-slot", SingleSlotStore), ("hash-tags", RedisClusterStore)):
            out["layouts"][name] = asyncio.run(run_layout(cls, ports, args))
    rows = []
    for name, r in out["layouts"].items():
        keys = "/".join(str(n["keys"]) for n in r["nodes"])
        calls = "/".join(str(n["calls"]) for n in r["nodes"])
        rows.append(
            [
                name,
                r["requests"],
                r["requests_per_s"],
                r["client_cpu_us_per_request"],
                keys,
                calls,
                r["calls_per_request"],
                r["server_us_per_request"],
                r["hottest_node_server_us_per_request"],
            ]
        )
    print(
        common.table(
            [
                "layout",
                "requests",
                "req/s (client)",
                "client CPU µs/req",
                "keys per node",
                "calls per node",
                "calls/req",
                "server µs/req (all)",
                "server µs/req (hottest node)",
            ],
            rows,
        )
    )
    print(f"\nJSON: {common.write_result('cluster', out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
