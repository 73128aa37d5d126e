"""Scale: 1, 2 and 4 gateway processes sharing one Redis; throughput, and whether
the share cap and the session pins still hold across the fleet.

Every request asks `X-OrcaRouter-Tier: strong` on the `agent` router (share cap
20% of requests), so the cap is what stops escalations. Each virtual user is
one session at a time (a new session every few turns) and sends each request to
the next instance in turn, so every session visits every process. Each session
has its own prompt prefix, so at the simulator a cold read (no cached tokens)
on a model the session already used means it moved to another API key.

Checks after each run:
  state   warnings the gateways logged: commits skipped, Redis pool exhausted
  share   strong requests / all requests, at the simulator and in the gateways'
          shared Redis counters, against the cap (allowing a small race margin)
  pins    per (session, model): at most one cold read
No load balancer: the load generator spreads its connections over the ports.
Processes are not pinned to cores here (the fleet is meant to use both).

Run: .venv/bin/python bench/bench_scale.py [--quick] [--procs 1,2,4]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import urllib.request
import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import common
from loadgen import run_loadgen

STRONG = "openai/gpt-5"
CAP_PERCENT = 20.0
WARMUP_REQUESTS = 20
"""The router's share_warmup_requests (set explicitly in the config below)."""
RACE_MARGIN_POINTS = 2.0
"""Concurrent requests read the share before any of them commits: a few may pass
together. The cap holds when the observed share is within this many points."""


def _sim_json(sim: common.Proc, path: str, method: str = "GET") -> Any:
    req = urllib.request.Request(
        sim.url + path, method=method, data=b"" if method == "POST" else None
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def redis_share(prefix: str) -> dict[str, float]:
    """The router's share counters as the gateways see them (summed over days)."""
    import redis

    r = redis.Redis.from_url(common.REDIS_URL)
    out: dict[str, float] = {}
    for key in r.scan_iter(match=f"{prefix}esc:share:agent:*", count=1000):
        field = key.decode().rsplit(":", 1)[1]
        out[field] = out.get(field, 0.0) + float(r.get(key) or 0)
    r.close()
    return out


LOG_SIGNS = {
    "commit_skipped": "commit skipped",
    "pool_exhausted": "Too many connections",
    "degraded": "unreachable",
}
"""Gateway log lines that mean shared state was not read or written for a request."""


def log_state_errors(gws: list[common.Proc]) -> dict[str, int]:
    """Count the state-store failures the gateways logged during the run."""
    counts = dict.fromkeys(LOG_SIGNS, 0)
    for g in gws:
        try:
            text = g.log_path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if '"level":"warning"' not in line and '"level":"error"' not in line:
                continue
            for name, sign in LOG_SIGNS.items():
                counts[name] += sign in line
    return counts


def pin_check(rows: list[list[Any]]) -> dict[str, Any]:
    """rows: [session, model, tier header, cached tokens] in the order they finished."""
    cold: Counter[tuple[str, str]] = Counter()
    models_per_session: dict[str, set[str]] = defaultdict(set)
    for sid, model, _tier, cached in rows:
        models_per_session[sid].add(model)
        if not cached:
            cold[(sid, model)] += 1
    violations = sum(1 for n in cold.values() if n > 1)
    return {
        "sessions": len(models_per_session),
        "session_model_pairs": sum(len(m) for m in models_per_session.values()),
        "pairs_with_more_than_one_cold_read": violations,
        "sessions_on_two_models": sum(1 for m in models_per_session.values() if len(m) > 1),
    }


def run_fleet(n: int, sim: common.Proc, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    prefix = common.new_prefix(f"scale{n}")
    cfg = common.gateway_config(
        sim.url, "agent", state="redis", prefix=prefix, share_cap_percent=CAP_PERCENT
    )
    agent = next(r for r in cfg["routers"] if r["name"] == "agent")
    agent["escalation"]["share_warmup_requests"] = WARMUP_REQUESTS
    if args.no_affinity:  # the control run: shows the pin check can fail
        cfg["affinity"] = {"enabled": False}
    _sim_json(sim, "/_sim/reset", "POST")
    gws: list[common.Proc] = []
    try:
        with ThreadPoolExecutor(n) as pool:  # start-up is mostly imports: overlap it
            futures = [
                pool.submit(common.start_gateway, cfg, workdir, None, f"gw{n}-{i}", args.log_level)
                for i in range(n)
            ]
            gws.extend(f.result() for f in futures)
        body = common.agent_body(common.MODELS["agent"], per_session_prefix=True)
        phase = {
            "label": f"fleet-{n}",
            "ports": [int(g.url.rsplit(":", 1)[1]) for g in gws],
            "rotate_ports": True,
            "headers": {"authorization": f"Bearer {common.TOKEN}", "x-orcarouter-tier": "strong"},
            "body": json.dumps(body),
            "session_header": "x-orcarouter-session-id",
            "session_prefix": uuid.uuid4().hex[:10],
            "turns_per_session": args.turns_per_session,
            "concurrency": args.concurrency,
            "requests": args.requests,
            "duration": args.seconds,
            "warmup": 0,
            "collect": True,
        }
        watch = {f"gw{i}": g.pid for i, g in enumerate(gws)} | {"sim": sim.pid}
        rpid = common.redis_pid()
        if rpid is not None:  # the shared server: other users' load shows here too
            watch["redis"] = rpid
        res = run_loadgen({"cpu": None, "watch": watch, "phases": [phase]})["phases"][0]
        stats = _sim_json(sim, "/_sim/stats")
        shared = redis_share(prefix)
    finally:
        for g in gws:
            g.stop()
        common.redis_cleanup(prefix)
    state_errors = log_state_errors(gws)
    by_model: Counter[str] = Counter()
    for e in stats["entries"]:
        by_model[e["model"]] += e["requests"]
    total = sum(by_model.values()) or 1
    sim_share = 100 * by_model.get(STRONG.split("/", 1)[1], 0) / total
    redis_pct = 100 * shared.get("req_strong", 0.0) / (shared.get("req") or 1)
    el = res["elapsed_s"] or 1
    pins = pin_check(res["collected"])
    # The cap is not enforced for the router's first `share_warmup_requests` (by design);
    # requests already in flight then finish later, so skip those as well.
    steady = res["collected"][WARMUP_REQUESTS + args.concurrency :]
    steady_pct = 100 * sum(1 for row in steady if row[1] == STRONG) / max(1, len(steady))
    return {
        "processes": n,
        "requests": res["count"],
        "errors": res["errors"] + sum(v for k, v in res["statuses"].items() if k != "200"),
        "rps": res["rps"],
        "latency": common.summarize_us(res["latency_us"]),
        "cpu_pct": {k: 100 * v / el for k, v in res["watch_cpu_s"].items()},
        "loadgen_cpu_pct": 100 * res["loadgen_cpu_s"] / el,
        "sim_requests_by_model": dict(by_model),
        "strong_share_sim_pct": sim_share,
        "strong_share_redis_pct": redis_pct,
        "redis_counters": shared,
        "strong_share_after_warmup_pct": steady_pct,
        "requests_after_warmup": len(steady),
        "share_cap_holds": steady_pct <= CAP_PERCENT + RACE_MARGIN_POINTS,
        "pins": pins,
        "pins_hold": pins["pairs_with_more_than_one_cold_read"] == 0,
        "state_errors": state_errors,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--procs", default="1,2,4", help="fleet sizes")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--seconds", type=float, default=10.0, help="per fleet size")
    p.add_argument("--requests", type=int, default=10**9, help="cap per fleet size")
    p.add_argument("--turns-per-session", type=int, default=5)
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--no-affinity", action="store_true", help="control run: affinity off")
    p.add_argument("--quick", action="store_true", help="tiny run (smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.procs, args.concurrency, args.seconds, args.requests = "2", 8, 3.0, 200
    info = common.machine_info()
    common.print_machine(info)
    if not common.redis_available():
        print(f"Redis not reachable at {common.REDIS_URL}: the scale benchmark needs it")
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="tiergate-scale-"))
    sim = common.start_sim(workdir, None)
    try:
        fleets = []
        for n in (int(x) for x in args.procs.split(",")):
            print(f"-> {n} gateway process(es) ...", flush=True)
            fleets.append(run_fleet(n, sim, workdir, args))
    finally:
        sim.stop()
    title = f"agent router, every request asks strong, cap {CAP_PERCENT:g}%"
    print(f"\n## Gateway fleet on one Redis ({title})\n")
    rows = []
    for f in fleets:
        gw_cpu = sum(v for k, v in f["cpu_pct"].items() if k.startswith("gw"))
        rows.append(
            [
                f["processes"],
                f["requests"],
                f["rps"],
                f["latency"].get("p50_ms"),
                f["latency"].get("p99_ms"),
                gw_cpu,
                f["cpu_pct"].get("sim"),
                f["cpu_pct"].get("redis"),
                f["loadgen_cpu_pct"],
                f["strong_share_sim_pct"],
                f["strong_share_redis_pct"],
                f["strong_share_after_warmup_pct"],
                "yes" if f["share_cap_holds"] else "NO",
                f["pins"]["sessions"],
                f["pins"]["pairs_with_more_than_one_cold_read"],
                "yes" if f["pins_hold"] else "NO",
                f["state_errors"]["commit_skipped"],
                f["state_errors"]["pool_exhausted"],
                f["errors"],
            ]
        )
    print(
        common.table(
            [
                "procs",
                "requests",
                "req/s",
                "p50 ms",
                "p99 ms",
                "gateways CPU %",
                "sim CPU %",
                "Redis CPU %",
                "loadgen CPU %",
                "strong % (sim)",
                "strong % (Redis)",
                "strong % steady",
                "cap holds",
                "sessions",
                "pin breaks",
                "pins hold",
                "commits skipped",
                "pool exhausted",
                "errors",
            ],
            rows,
        )
    )
    path = common.write_result(
        "scale",
        {
            "machine": info,
            "args": vars(args),
            "cap_percent": CAP_PERCENT,
            "race_margin_points": RACE_MARGIN_POINTS,
            "fleets": fleets,
        },
    )
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
