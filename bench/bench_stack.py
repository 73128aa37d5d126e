"""The measurements behind the stack choices: server + event loop + HTTP parser,
upstream HTTP client, JSON library.

1. server: the real gateway app (`agent` variant, memory state) under uvicorn with
   uvloop or asyncio and httptools or h11, each its own process on core 0, plus
   `tiergate serve` exactly as shipped; req/s at c=32, p50 at c=1 and gateway
   CPU per request, all driven by the same load generator; and GET /healthz, the
   server stack's own floor cost per request without the pipeline.
2. upstream client: aiohttp vs httpx vs tiergate's own client posting the
   agent-shaped body to the simulator at c=1 and c=32; client CPU and wall time
   per request (bench/stack_upstream.py).
3. JSON: orjson vs the standard library on the agent-shaped body.
4. redis: the state store's two hot-path calls, MGET of 9 keys (the plan's read)
   and EVALSHA of the batch script (the commit), through redis-py and through
   RespClient (state/resp.py) side by side, under uvloop; CPU and wall time per
   call, one call at a time (c=1) and 32 at once (c=32: wall = elapsed / calls).
   CPU counts the kernel too; at c=1 it includes the loop sleeping and waking for
   every reply, so it rises when Redis's core is busy with other work.

Run: .venv/bin/python bench/bench_stack.py [--quick] [--only server,client,json,redis]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import timeit
import uuid
from pathlib import Path
from typing import Any

import orjson

import common
from loadgen import run_loadgen
from stack_upstream import bench_clients, clients_table

SERVER_VARIANTS: list[tuple[str, str | None, str | None]] = [
    ("shipped: tiergate serve", None, None),
    ("uvicorn.run uvloop + httptools", "uvloop", "httptools"),
    ("uvicorn.run asyncio + httptools", "asyncio", "httptools"),
    ("uvicorn.run uvloop + h11", "uvloop", "h11"),
    ("uvicorn.run asyncio + h11", "asyncio", "h11"),
]


def serve_variant(config: str, port: int, loop: str, http: str) -> None:
    """Child process: the gateway app under uvicorn.run with the given loop and parser."""
    import uvicorn

    from tiergate.app import create_app
    from tiergate.config_load import load_config
    from tiergate.logs import setup_logging

    setup_logging("INFO")
    uvicorn.run(
        create_app(load_config(config)),
        host=common.HOST,
        port=port,
        loop=loop,
        http=http,
        log_level="warning",
        log_config=None,
    )


def bench_servers(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    """Each variant `--rounds` times, in alternating order; the median of each figure."""
    import yaml

    gw_cpu, load_cpu = common.cpu_layout()
    sim = common.start_sim(workdir, load_cpu)
    cfg = common.gateway_config(sim.url, "agent")
    path = workdir / "stack.yaml"
    path.write_text(yaml.safe_dump(cfg))
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in SERVER_VARIANTS}
    try:
        for r in range(args.rounds):
            order = SERVER_VARIANTS if r % 2 == 0 else SERVER_VARIANTS[::-1]
            for label, loop, http in order:
                if loop is None or http is None:
                    proc = common.start_gateway(cfg, workdir, gw_cpu, name="gw-shipped")
                else:
                    port = common.free_port()
                    argv = [common.PYTHON, str(Path(__file__).resolve()), "--serve", str(path)]
                    argv += ["--port", str(port), "--loop", loop, "--http", http]
                    name = f"gw-{loop}-{http}"
                    proc = common.spawn(name, argv, port=port, workdir=workdir, cpu=gw_cpu)
                try:
                    runs[label].append(_drive(proc, args, load_cpu))
                finally:
                    proc.stop()
                print(f"   {label}: {runs[label][-1]['rps']:.0f} req/s", flush=True)
    finally:
        sim.stop()
    out = []
    for label, rs in runs.items():
        row: dict[str, Any] = {"server": label, "rounds": len(rs)}
        for key in (
            "rps",
            "p50_ms_c1",
            "gateway_cpu_us_per_req",
            "healthz_rps",
            "healthz_cpu_us_per_req",
        ):
            row[key] = statistics.median(x[key] for x in rs)
        row["errors"] = sum(x["errors"] for x in rs)
        out.append(row)
    return out


def _drive(proc: common.Proc, args: argparse.Namespace, load_cpu: int | None) -> dict[str, Any]:
    body = json.dumps(common.agent_body(common.MODELS["agent"]))
    base = {
        "ports": [int(proc.url.rsplit(":", 1)[1])],
        "headers": {"authorization": f"Bearer {common.TOKEN}"},
        "body": body,
        "session_header": "x-orcarouter-session-id",
        "turns_per_session": 50,
    }
    phases = [
        {
            **base,
            "label": "c1",
            "session_prefix": uuid.uuid4().hex[:8],
            "concurrency": 1,
            "requests": args.requests,
            "duration": 60,
            "warmup": 20,
        },
        {
            **base,
            "label": "c32",
            "session_prefix": uuid.uuid4().hex[:8],
            "concurrency": 32,
            "requests": 10**9,
            "duration": args.seconds,
            "warmup": 64,
        },
    ]
    floor = {
        **base,
        "label": "healthz",
        "method": "GET",
        "path": "/healthz",
        "body": "",
        "session_header": None,
        "concurrency": 32,
        "requests": 10**9,
        "duration": args.seconds,
        "warmup": 64,
    }
    spec = {"cpu": load_cpu, "watch": {"gw": proc.pid}, "phases": [*phases, floor]}
    c1, c32, hz = run_loadgen(spec)["phases"]
    return {
        "healthz_rps": hz["rps"],
        "healthz_cpu_us_per_req": hz["watch_cpu_s"]["gw"] / max(1, hz["count"]) * 1e6,
        "p50_ms_c1": common.summarize_us(c1["latency_us"]).get("p50_ms"),
        "rps": c32["rps"],
        "gateway_cpu_us_per_req": c32["watch_cpu_s"]["gw"] / max(1, c32["count"]) * 1e6,
        "errors": c1["errors"] + c32["errors"],
    }


# ---- JSON ---------------------------------------------------------------------------------


def bench_json(number: int) -> list[dict[str, Any]]:
    doc = common.agent_body(common.MODELS["agent"])
    raw = orjson.dumps(doc)

    def best(fn: Any) -> float:
        return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6

    return [
        {
            "library": "orjson",
            "loads_us": best(lambda: orjson.loads(raw)),
            "dumps_us": best(lambda: orjson.dumps(doc)),
        },
        {
            "library": "json (stdlib)",
            "loads_us": best(lambda: json.loads(raw)),
            "dumps_us": best(lambda: json.dumps(doc).encode()),
        },
    ]


# ---- Redis client ---------------------------------------------------------------------------


async def _redis_run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each (op, client, concurrency) `--rounds` times in alternating order; medians."""
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    from tiergate.state.base import Incr, Write
    from tiergate.state.redis import _BATCH, RedisStore

    prefix = common.new_prefix("resp")
    store = RedisStore(common.REDIS_URL, key_prefix=prefix)
    fast = store._fast
    if fast is None:
        raise SystemExit(f"RespClient does not speak {common.REDIS_URL}")
    # redis-py exactly as RedisStore configured it before RespClient.
    py = aioredis.from_url(
        common.REDIS_URL,
        socket_connect_timeout=0.5,
        socket_timeout=0.5,
        max_connections=512,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
    )
    py_batch = py.register_script(_BATCH.source)
    keys = [f"pin:{i}" for i in range(9)]
    await store.set_many([Write(k, b"x" * 120, 600) for k in keys])
    pkeys = [prefix + k for k in keys]
    # A commit shaped like the gateway's: a guard (on a key that stays absent, so every
    # call applies), 3 writes, 4 counter increments.
    batch_keys = [prefix + k for k in ("guard", "tier", "pin:a", "pin:b", *"cdef")]
    batch_args: list[Any] = ["1", "0", b"", 3, 4]
    batch_args += ["set", b"t" * 300, 600_000, "set", b"p" * 100, 600_000, "set", b"q" * 100, ""]
    batch_args += ["1.0", 86_400_000] * 4

    async def py_mget() -> Any:
        return await py.mget(pkeys)

    async def fast_mget() -> Any:
        return await fast.call("MGET", *pkeys)

    async def store_mget() -> Any:
        return await store.get_many(keys)

    async def py_eval() -> Any:
        return await py_batch(keys=batch_keys, args=batch_args)

    async def fast_eval() -> Any:
        return await fast.evalsha(_BATCH, batch_keys, batch_args)

    writes = [Write("pin:a", b"p" * 100, 600), Write("pin:b", b"q" * 100)]
    incrs = [Incr(k, 1.0, 86_400) for k in "cdef"]

    async def store_eval() -> Any:
        tier = Write("tier", b"t" * 300, 600)
        return await store.apply_batch([tier, *writes], incrs, guard=("guard", None))

    cases = [
        ("MGET 9 keys", "redis-py", py_mget),
        ("MGET 9 keys", "RespClient", fast_mget),
        ("MGET 9 keys", "RedisStore.get_many (RespClient)", store_mget),
        ("EVALSHA batch", "redis-py", py_eval),
        ("EVALSHA batch", "RespClient", fast_eval),
        ("EVALSHA batch", "RedisStore.apply_batch (RespClient)", store_eval),
    ]
    n = args.redis_calls
    runs: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    try:
        for r in range(args.rounds):
            for op, client, fn in cases if r % 2 == 0 else cases[::-1]:
                for conc in (1, 32):
                    runs.setdefault((op, client, conc), []).append(await _calls(fn, n, conc))
    finally:
        await store.delete_prefix()
        await store.close()
        await py.aclose()
    out = []
    for (op, client, conc), rs in runs.items():
        out.append(
            {
                "op": op,
                "client": client,
                "concurrency": conc,
                "calls": n,
                "rounds": len(rs),
                "cpu_us_per_call": statistics.median(c for c, _ in rs),
                "wall_us_per_call": statistics.median(w for _, w in rs),
            }
        )
    return out


async def _calls(fn: Any, n: int, conc: int) -> tuple[float, float]:
    """(CPU us, wall us) per call for n calls of fn, `conc` in flight at a time. CPU is
    the whole process's, kernel included (the socket calls are part of a call's cost)."""
    left = 0

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await fn()

    left = max(100, n // 10)
    await asyncio.gather(*(worker() for _ in range(conc)))  # warm-up: connections, scripts
    left = n
    w0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(conc)))
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return cpu / n * 1e6, wall / n * 1e6


def bench_redis(args: argparse.Namespace) -> list[dict[str, Any]]:
    import uvloop

    return uvloop.run(_redis_run(args))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", default="server,client,json,redis")
    p.add_argument("--seconds", type=float, default=5.0, help="c=32 window per server variant")
    p.add_argument("--requests", type=int, default=500, help="c=1 requests per server variant")
    p.add_argument("--client-requests", type=int, default=3000)
    p.add_argument("--redis-calls", type=int, default=5000, help="calls per Redis measurement")
    p.add_argument(
        "--rounds", type=int, default=3, help="runs per server variant / Redis case (median)"
    )
    p.add_argument("--quick", action="store_true")
    p.add_argument("--serve", metavar="CONFIG", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--loop", help=argparse.SUPPRESS)
    p.add_argument("--http", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        serve_variant(args.serve, args.port, args.loop, args.http)
        return 0
    if args.quick:
        args.seconds, args.requests, args.client_requests, args.rounds = 0.5, 30, 200, 1
        args.redis_calls = 300
    info = common.machine_info()
    common.print_machine(info)
    workdir = Path(tempfile.mkdtemp(prefix="tiergate-stack-"))
    only = set(args.only.split(","))
    res: dict[str, Any] = {"machine": info, "args": vars(args)}
    if "server" in only:
        print("-> servers", flush=True)
        res["servers"] = bench_servers(args, workdir)
        print("\n## Server, event loop, HTTP parser (real gateway app, agent variant)\n")
        print(
            common.table(
                [
                    "server",
                    "req/s c=32",
                    "p50 ms c=1",
                    "gateway CPU us/req",
                    "GET /healthz req/s",
                    "GET /healthz CPU us/req",
                    "errors",
                ],
                [
                    [
                        r["server"],
                        r["rps"],
                        r["p50_ms_c1"],
                        r["gateway_cpu_us_per_req"],
                        r["healthz_rps"],
                        r["healthz_cpu_us_per_req"],
                        r["errors"],
                    ]
                    for r in res["servers"]
                ],
            )
        )
    if "client" in only:
        res["clients"] = bench_clients(args, workdir)
        print("\n## Upstream HTTP client (POST agent body to the simulator)\n")
        print(clients_table(res["clients"]))
    if "json" in only:
        res["json"] = bench_json(200 if args.quick else 2000)
        size = len(orjson.dumps(common.agent_body("m")))
        print(f"\n## JSON on the agent-shaped body ({size} bytes)\n")
        print(
            common.table(
                ["library", "loads us", "dumps us"],
                [[r["library"], r["loads_us"], r["dumps_us"]] for r in res["json"]],
            )
        )
    if "redis" in only and not common.redis_available():
        print(f"-> redis clients: skipped, Redis is not reachable at {common.REDIS_URL}")
    elif "redis" in only:
        print("-> redis clients", flush=True)
        res["redis"] = bench_redis(args)
        print(f"\n## Redis client on the hot path ({common.REDIS_URL}, uvloop)\n")
        print(
            common.table(
                ["call", "client", "concurrency", "CPU us/call", "wall us/call"],
                [
                    [
                        r["op"],
                        r["client"],
                        r["concurrency"],
                        r["cpu_us_per_call"],
                        r["wall_us_per_call"],
                    ]
                    for r in res["redis"]
                ],
            )
        )
    print(f"\nJSON: {common.write_result('stack', res)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
