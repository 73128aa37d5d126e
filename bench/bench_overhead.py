"""Overhead: the same agent-shaped load sent directly to the simulator and through
tiergate, side by side in one run; added latency and sustained throughput.

Processes (all on loopback, bounded in count and time):
  simulator  `python -m tiergate sim` (zero latency)          core 1 (shared with loadgen)
  gateway    `python -m tiergate serve --config` one process    core 0 (alone)
  loadgen    bench/loadgen.py, its own process                  core 1
For every target, the load generator alternates rounds of direct and through-the-
gateway requests, so both see the same machine state; added latency is the
difference of the percentiles. Max sustained req/s is a closed loop at rising
concurrency until throughput stops rising (3% rule). CPU cost per request is
measured for the gateway, the simulator and the load generator itself.

Variants (see common.VARIANT_HELP): plain, router, agent; states memory, redis.
With --litellm the LiteLLM proxy is measured in the same run (bench_litellm.py).

Run: .venv/bin/python bench/bench_overhead.py [--quick] [--litellm]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import common
from loadgen import run_loadgen

SESSION_HEADER = "x-orcarouter-session-id"
TARGET_ADDED_P50_MS = 1.0
TARGET_ADDED_P99_MS = 5.0
TARGET_RPS_RATIO = 10.0


def parse_args(argv: list[str] | None, prog: str | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--variants", default="plain,router,agent", help="comma list of plain,router,agent,learned"
    )
    p.add_argument("--states", default="memory,redis", help="comma list of memory,redis")
    p.add_argument("--modes", default="nonstream,stream", help="comma list of nonstream,stream")
    p.add_argument("--concurrency", default="1,32", help="comma list of client concurrencies")
    p.add_argument(
        "--requests", type=int, default=600, help="measured requests per target and point"
    )
    p.add_argument("--rounds", type=int, default=3, help="direct/through alternations per point")
    p.add_argument(
        "--sweep", default="4,16,32,64,128", help="concurrency levels of the req/s sweep"
    )
    p.add_argument("--sweep-seconds", type=float, default=3.0)
    p.add_argument("--no-sweep", action="store_true", help="skip the max req/s sweep")
    p.add_argument("--database", default="none", choices=["none", "sqlite"], help="usage rows")
    p.add_argument("--log-level", default="INFO", help="gateway log level (INFO = shipped default)")
    p.add_argument("--litellm", action="store_true", help="also measure the LiteLLM proxy")
    p.add_argument("--litellm-venv", type=Path, default=None, help="LiteLLM venv path")
    p.add_argument("--no-install", action="store_true", help="never pip-install LiteLLM")
    p.add_argument(
        "--body-kb",
        type=int,
        default=0,
        help="grow the agent body to at least this many KB with earlier turns (0: ~12 KB)",
    )
    p.add_argument("--quick", action="store_true", help="tiny run (smoke test)")
    p.add_argument("--name", default=None, help="name of the JSON in bench/out/")
    args = p.parse_args(argv)
    if args.quick:
        args.variants = "agent" if args.variants == "plain,router,agent" else args.variants
        args.states = "memory" if args.states == "memory,redis" else args.states
        args.modes, args.concurrency = "nonstream,stream", "1,4"
        args.requests, args.rounds, args.sweep, args.sweep_seconds = 40, 1, "4", 0.5
    return args


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _port(proc: common.Proc) -> list[int]:
    return [int(proc.url.rsplit(":", 1)[1])]


def _phase(
    label: str,
    proc: common.Proc,
    model: str,
    token: str,
    *,
    stream: bool,
    conc: int,
    requests: int,
    warmup: int,
    session: bool,
    duration: float = 120.0,
    group: str | None = None,
    body_kb: int = 0,
) -> dict[str, Any]:
    return {
        "label": label,
        "ports": _port(proc),
        "headers": {"authorization": f"Bearer {token}"},
        "body": json.dumps(common.agent_body(model, stream=stream, pad_kb=body_kb)),
        "stream": stream,
        "session_header": SESSION_HEADER if session else None,
        "session_prefix": uuid.uuid4().hex[:10],
        "turns_per_session": 50,
        "concurrency": conc,
        "requests": requests,
        "duration": duration,
        "warmup": warmup,
        "group": group,
    }


def measure_target(
    name: str,
    server: common.Proc,
    sim: common.Proc,
    model: str,
    token: str,
    session: bool,
    args: argparse.Namespace,
    load_cpu: int | None,
) -> dict[str, Any]:
    """All latency points (interleaved with direct) and the throughput sweep for one server."""
    phases: list[dict[str, Any]] = []
    per_round = max(1, args.requests // args.rounds)
    for mode in _csv(args.modes):
        stream = mode == "stream"
        for conc in (int(c) for c in _csv(args.concurrency)):
            warm = max(10, conc * 2) if not args.quick else conc
            for r in range(args.rounds):
                key = f"{mode}|{conc}|{r}"
                phases.append(
                    _phase(
                        f"direct|{key}",
                        sim,
                        common.MODELS["direct"],
                        common.UPSTREAM_KEYS[0],
                        stream=stream,
                        conc=conc,
                        requests=per_round,
                        warmup=warm,
                        session=False,
                        body_kb=args.body_kb,
                    )
                )
                phases.append(
                    _phase(
                        f"through|{key}",
                        server,
                        model,
                        token,
                        stream=stream,
                        conc=conc,
                        requests=per_round,
                        warmup=warm,
                        session=session,
                        body_kb=args.body_kb,
                    )
                )
    if not args.no_sweep:
        for conc in (int(c) for c in _csv(args.sweep)):
            phases.append(
                _phase(
                    f"sweep|{conc}",
                    server,
                    model,
                    token,
                    stream=False,
                    conc=conc,
                    requests=10**9,
                    warmup=conc * 2,
                    session=session,
                    duration=args.sweep_seconds,
                    group=name,
                    body_kb=args.body_kb,
                )
            )
    spec = {"cpu": load_cpu, "watch": {"server": server.pid, "sim": sim.pid}, "phases": phases}
    raw = run_loadgen(spec)["phases"]
    return {"points": _points(raw), "sweep": _sweep(raw)}


def _points(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int], dict[str, list[dict[str, Any]]]] = {}
    for ph in raw:
        kind, _, rest = ph["label"].partition("|")
        if kind not in ("direct", "through"):
            continue
        mode, conc, _ = rest.split("|")
        groups.setdefault((mode, int(conc)), {"direct": [], "through": []})[kind].append(ph)
    points = []
    for (mode, conc), g in groups.items():
        d_lat = [x for ph in g["direct"] for x in ph["latency_us"]]
        t_lat = [x for ph in g["through"] for x in ph["latency_us"]]
        d_ttfb = [x for ph in g["direct"] for x in ph["ttfb_us"]]
        t_ttfb = [x for ph in g["through"] for x in ph["ttfb_us"]]
        n_t = sum(ph["count"] for ph in g["through"]) or 1
        n_d = sum(ph["count"] for ph in g["direct"]) or 1
        d, t = common.summarize_us(d_lat), common.summarize_us(t_lat)
        dt, tt = common.summarize_us(d_ttfb), common.summarize_us(t_ttfb)
        points.append(
            {
                "mode": mode,
                "concurrency": conc,
                "direct": d,
                "through": t,
                "direct_ttfb": dt,
                "through_ttfb": tt,
                "added_p50_ms": t.get("p50_ms", 0) - d.get("p50_ms", 0),
                "added_p99_ms": t.get("p99_ms", 0) - d.get("p99_ms", 0),
                "added_ttfb_p50_ms": tt.get("p50_ms", 0) - dt.get("p50_ms", 0),
                "server_cpu_us_per_req": sum(ph["watch_cpu_s"]["server"] for ph in g["through"])
                / n_t
                * 1e6,
                "sim_cpu_us_per_req": sum(ph["watch_cpu_s"]["sim"] for ph in g["direct"])
                / n_d
                * 1e6,
                "loadgen_cpu_us_per_req": sum(ph["loadgen_cpu_s"] for ph in g["through"])
                / n_t
                * 1e6,
                "loadgen_cpu_us_per_req_direct": sum(ph["loadgen_cpu_s"] for ph in g["direct"])
                / n_d
                * 1e6,
                "errors": sum(ph["errors"] for ph in g["through"]),
                "non_200": sum(
                    v for ph in g["through"] for k, v in ph["statuses"].items() if k != "200"
                ),
            }
        )
    return points


def _sweep(raw: list[dict[str, Any]]) -> dict[str, Any] | None:
    steps = []
    for ph in raw:
        if not ph["label"].startswith("sweep|"):
            continue
        el = ph["elapsed_s"] or 1.0
        steps.append(
            {
                "concurrency": ph["concurrency"],
                "rps": ph["rps"],
                "p50_ms": common.summarize_us(ph["latency_us"]).get("p50_ms"),
                "server_cpu_pct": 100 * ph["watch_cpu_s"]["server"] / el,
                "sim_cpu_pct": 100 * ph["watch_cpu_s"]["sim"] / el,
                "loadgen_cpu_pct": 100 * ph["loadgen_cpu_s"] / el,
                "errors": ph["errors"],
                "non_200": sum(v for k, v in ph["statuses"].items() if k != "200"),
            }
        )
    if not steps:
        return None
    best = max(steps, key=lambda s: s["rps"])
    return {"max_rps": best["rps"], "at": best, "steps": steps}


def _targets(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    out = []
    states = _csv(args.states)
    if "redis" in states and not common.redis_available():
        print(f"Redis not reachable at {common.REDIS_URL}: redis variants skipped", file=sys.stderr)
        states = [s for s in states if s != "redis"]
    for variant in _csv(args.variants):
        for state in states:
            out.append((f"tiergate {variant}/{state}", variant, state))
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    info = common.machine_info()
    common.print_machine(info)
    gw_cpu, load_cpu = common.cpu_layout()
    print(f"cores: server under test on {gw_cpu}, simulator + loadgen on {load_cpu}", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="tiergate-bench-"))
    results: dict[str, Any] = {
        "machine": info,
        "args": {k: str(v) for k, v in vars(args).items()},
        "cpu_layout": {"server": gw_cpu, "load": load_cpu},
        "targets": {},
    }
    sim = common.start_sim(workdir, load_cpu)
    try:
        for name, variant, state in _targets(args):
            prefix = common.new_prefix("overhead")
            cfg = common.gateway_config(
                sim.url,
                variant,
                state=state,
                prefix=prefix,
                database=args.database,
                workdir=workdir,
            )
            print(f"-> {name} ...", flush=True)
            gw = common.start_gateway(cfg, workdir, gw_cpu, log_level=args.log_level)
            try:
                res = measure_target(
                    name,
                    gw,
                    sim,
                    common.MODELS[variant],
                    common.TOKEN,
                    variant == "agent",
                    args,
                    load_cpu,
                )
                res["idle_rss_mb"] = None
                res["rss_mb_after"] = gw.rss_bytes() / 2**20
            finally:
                gw.stop()
                if state == "redis":
                    common.redis_cleanup(prefix)
            results["targets"][name] = {"variant": variant, "state": state, **res}
        if args.litellm:
            results["litellm"] = _run_litellm(args, sim, workdir, gw_cpu, load_cpu, results)
    finally:
        sim.stop()
    return results


def _run_litellm(
    args: argparse.Namespace,
    sim: common.Proc,
    workdir: Path,
    gw_cpu: int | None,
    load_cpu: int | None,
    results: dict[str, Any],
) -> dict[str, Any]:
    import bench_litellm

    venv = args.litellm_venv or bench_litellm.DEFAULT_VENV
    exe, note = bench_litellm.ensure_venv(venv, install=not args.no_install)
    print(f"-> LiteLLM proxy: {note}", flush=True)
    if exe is None:
        return {"available": False, "why": note}
    try:
        proc = bench_litellm.start_litellm(exe, sim.url, workdir, gw_cpu)
    except RuntimeError as err:
        return {"available": False, "why": f"LiteLLM did not start: {err}"[:2000]}
    try:
        res = measure_target(
            "litellm",
            proc,
            sim,
            common.MODELS["direct"],
            bench_litellm.MASTER_KEY,
            False,
            args,
            load_cpu,
        )
    finally:
        proc.stop()
    name = f"LiteLLM {bench_litellm.LITELLM_SPEC.split('==')[1]}"
    results["targets"][name] = {"variant": "peer", "state": "-", **res}
    return {"available": True, "name": name, "note": note}


def report(results: dict[str, Any]) -> None:
    targets = results["targets"]
    rows = []
    for name, t in targets.items():
        for p in t["points"]:
            stream = p["mode"] == "stream"
            rows.append(
                [
                    name,
                    p["mode"],
                    p["concurrency"],
                    p["direct"].get("p50_ms"),
                    p["through"].get("p50_ms"),
                    p["added_p50_ms"],
                    p["direct"].get("p99_ms"),
                    p["through"].get("p99_ms"),
                    p["added_p99_ms"],
                    p["added_ttfb_p50_ms"] if stream else None,
                    round(p["server_cpu_us_per_req"]),
                    round(p["loadgen_cpu_us_per_req"]),
                    p["errors"] + p["non_200"],
                ]
            )
    print("\n## Added latency (ms; through = via the server, direct = straight to the simulator)\n")
    print(
        common.table(
            [
                "target",
                "mode",
                "c",
                "direct p50",
                "through p50",
                "added p50",
                "direct p99",
                "through p99",
                "added p99",
                "added TTFB p50",
                "server CPU us/req",
                "loadgen CPU us/req",
                "errors",
            ],
            rows,
        )
    )
    sweeps = [(n, t["sweep"]) for n, t in targets.items() if t.get("sweep")]
    if sweeps:
        print("\n## Max sustained req/s per server process (non-streaming, closed loop)\n")
        print(
            common.table(
                [
                    "target",
                    "max req/s",
                    "at c",
                    "p50 ms there",
                    "server CPU %",
                    "sim CPU %",
                    "loadgen CPU %",
                    "errors",
                ],
                [
                    [
                        n,
                        s["max_rps"],
                        s["at"]["concurrency"],
                        s["at"]["p50_ms"],
                        s["at"]["server_cpu_pct"],
                        s["at"]["sim_cpu_pct"],
                        s["at"]["loadgen_cpu_pct"],
                        s["at"]["errors"] + s["at"]["non_200"],
                    ]
                    for n, s in sweeps
                ],
            )
        )
    _headline(results)


def _headline(results: dict[str, Any]) -> None:
    targets = results["targets"]
    lines = []
    for name in ("tiergate agent/memory", "tiergate agent/redis"):
        t = targets.get(name)
        p = next(
            (
                p
                for p in (t or {}).get("points", [])
                if p["mode"] == "nonstream" and p["concurrency"] == 1
            ),
            None,
        )
        if p is None:
            continue
        ok50 = p["added_p50_ms"] <= TARGET_ADDED_P50_MS
        ok99 = p["added_p99_ms"] <= TARGET_ADDED_P99_MS
        lines.append(
            f"{name}, c=1: added p50 {p['added_p50_ms']:.2f} ms (target <= {TARGET_ADDED_P50_MS}: "
            f"{'met' if ok50 else 'NOT met'}), added p99 {p['added_p99_ms']:.2f} ms "
            f"(target <= {TARGET_ADDED_P99_MS}: {'met' if ok99 else 'NOT met'})"
        )
    peer = results.get("litellm")
    if peer is not None:
        if not peer.get("available"):
            lines.append(f"LiteLLM figures unavailable: {peer.get('why')}")
        else:
            base = (targets.get(peer["name"], {}).get("sweep") or {}).get("max_rps")
            for name, t in targets.items():
                if name.startswith("tiergate") and t.get("sweep") and base:
                    ratio = t["sweep"]["max_rps"] / base
                    results.setdefault("ratios", {})[name] = ratio
                    verdict = "met" if ratio >= TARGET_RPS_RATIO else "NOT met"
                    lines.append(
                        f"{name}: {ratio:.1f}x LiteLLM's sustained req/s "
                        f"(target >= {TARGET_RPS_RATIO}x: {verdict})"
                    )
    if lines:
        print("\n## Against the targets\n")
        print("\n".join(f"- {ln}" for ln in lines))


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = parse_args(argv, prog)
    results = run(args)
    report(results)
    for t in results["targets"].values():  # keep the JSON small: drop raw samples
        t.pop("raw", None)
    path = common.write_result(args.name or ("litellm" if args.litellm else "overhead"), results)
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
