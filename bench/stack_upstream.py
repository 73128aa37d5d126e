"""The upstream HTTP client comparison of bench_stack.py: aiohttp, httpx and
tiergate's own client (tiergate.providers.client) posting the agent-shaped body
to the simulator, sequentially (c=1) and at concurrency 32.

Each client runs in this process, pinned to the core the gateway would get, with
the simulator on the other core; the figures are the client's own CPU per
request (process CPU time) and wall time. Every (client, concurrency) point runs
`rounds` times in alternating order and the medians are reported.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

import common

KINDS = ("aiohttp", "httpx", "tiergate")
CONCURRENCY = (1, 32)


async def _open(
    kind: str, url: str, body: bytes, headers: dict[str, str]
) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    """(one POST + JSON parse, close) for one client library."""
    if kind == "aiohttp":
        import aiohttp

        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, limit_per_host=512))

        async def one_aiohttp() -> None:
            async with session.post(url, data=body, headers=headers) as resp:
                orjson.loads(await resp.read())

        return one_aiohttp, session.close
    if kind == "httpx":
        import httpx

        client = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=512)
        )

        async def one_httpx() -> None:
            resp = await client.post(url, content=body, headers=headers)
            orjson.loads(resp.content)

        return one_httpx, client.aclose
    from tiergate.providers.client import HTTPClient

    own = HTTPClient(limit_per_host=512)

    async def one_own() -> None:
        orjson.loads(await (await own.post(url, body, headers)).read())

    return one_own, own.close


async def client_run(kind: str, url: str, body: bytes, n: int, conc: int) -> tuple[float, float]:
    """(wall seconds, client CPU seconds) for n POSTs at concurrency conc."""
    headers = {
        "authorization": f"Bearer {common.UPSTREAM_KEYS[0]}",
        "content-type": "application/json",
    }
    one, close = await _open(kind, url, body, headers)
    left = 0

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one()

    left = max(conc * 2, 50)
    await asyncio.gather(*(worker() for _ in range(conc)))  # warm-up: connections
    left = n
    w0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(conc)))
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    await close()
    return wall, cpu


@contextlib.contextmanager
def _pinned(cpu: int | None) -> Iterator[None]:
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def bench_clients(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    import uvloop

    client_cpu, sim_cpu = common.cpu_layout()
    sim = common.start_sim(workdir, sim_cpu)
    url = f"{sim.url}/v1/chat/completions"
    body = orjson.dumps(common.agent_body(common.MODELS["direct"])).replace(b"@@N@@", b"1")
    n = args.client_requests
    runs: dict[tuple[str, int], list[tuple[float, float]]] = {}
    try:
        with _pinned(client_cpu):
            for r in range(args.rounds):
                for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
                    for conc in CONCURRENCY:
                        point = uvloop.run(client_run(kind, url, body, n, conc))
                        runs.setdefault((kind, conc), []).append(point)
    finally:
        sim.stop()
    out = []
    for (kind, conc), points in runs.items():
        wall = statistics.median(w for w, _ in points)
        cpu = statistics.median(c for _, c in points)
        out.append(
            {
                "client": kind,
                "concurrency": conc,
                "rounds": len(points),
                "rps": n / wall,
                "wall_us_per_req": wall / n * 1e6,
                "client_cpu_us_per_req": cpu / n * 1e6,
            }
        )
    out.sort(key=lambda row: (row["concurrency"], KINDS.index(row["client"])))
    return out


def clients_table(rows: list[dict[str, Any]]) -> str:
    return str(
        common.table(
            ["client", "concurrency", "req/s", "wall us/req", "client CPU us/req"],
            [
                [
                    r["client"],
                    r["concurrency"],
                    r["rps"],
                    r["wall_us_per_req"],
                    r["client_cpu_us_per_req"],
                ]
                for r in rows
            ],
        )
    )
