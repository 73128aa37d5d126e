"""The measurements behind the stack choices: server + event loop + HTTP parser,
upstream HTTP client, JSON library.

1. server: the real gateway app (`agent` variant, memory state) under uvicorn with
   uvloop or asyncio and httptools or h11, each its own process on core 0, plus
   `tiergate serve` exactly as shipped; req/s at c=32, p50 at c=1 and gateway
   CPU per request, all driven by the same load generator; and GET /healthz, the
   server stack's own floor cost per request without the pipeline.
2. upstream client: aiohttp vs httpx posting the agent-shaped body to the
   simulator at concurrency 32; client CPU per request and req/s.
3. JSON: orjson vs the standard library on the agent-shaped body.

Run: .venv/bin/python bench/bench_stack.py [--quick] [--only server,client,json]
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
    from tiergate.config import load_config
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


# ---- upstream client --------------------------------------------------------------------


async def _client_run(kind: str, url: str, body: bytes, n: int, conc: int) -> tuple[float, float]:
    """(wall seconds, client CPU seconds) for n POSTs at concurrency conc."""
    headers = {
        "authorization": f"Bearer {common.UPSTREAM_KEYS[0]}",
        "content-type": "application/json",
    }
    left = n

    if kind == "aiohttp":
        import aiohttp

        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, limit_per_host=512))

        async def one() -> None:
            async with session.post(url, data=body, headers=headers) as resp:
                orjson.loads(await resp.read())

        close: Any = session.close
    else:
        import httpx

        client = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=512)
        )

        async def one() -> None:
            resp = await client.post(url, content=body, headers=headers)
            orjson.loads(resp.content)

        close = client.aclose

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one()

    left = conc * 2
    await asyncio.gather(*(worker() for _ in range(conc)))  # warm-up: connections
    left = n
    w0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(conc)))
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    await close()
    return wall, cpu


def bench_clients(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    import uvloop

    _, load_cpu = common.cpu_layout()
    sim = common.start_sim(workdir, load_cpu)
    url = f"{sim.url}/v1/chat/completions"
    body = orjson.dumps(common.agent_body(common.MODELS["direct"])).replace(b"@@N@@", b"1")
    out = []
    try:
        for kind in ("aiohttp", "httpx"):
            wall, cpu = uvloop.run(_client_run(kind, url, body, args.client_requests, 32))
            n = args.client_requests
            out.append({"client": kind, "rps": n / wall, "client_cpu_us_per_req": cpu / n * 1e6})
    finally:
        sim.stop()
    return out


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", default="server,client,json")
    p.add_argument("--seconds", type=float, default=5.0, help="c=32 window per server variant")
    p.add_argument("--requests", type=int, default=500, help="c=1 requests per server variant")
    p.add_argument("--client-requests", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=3, help="runs per server variant (median)")
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
        print("\n## Upstream HTTP client (POST agent body to the simulator, c=32)\n")
        print(
            common.table(
                ["client", "req/s", "client CPU us/req"],
                [[r["client"], r["rps"], r["client_cpu_us_per_req"]] for r in res["clients"]],
            )
        )
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
    print(f"\nJSON: {common.write_result('stack', res)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
