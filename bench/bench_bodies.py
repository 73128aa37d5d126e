"""Overhead against body size, on real agent request bodies (issue #30), side by side.

Coding agents resend the whole history every turn: mid-session bodies are
100-300 KB and long sessions pass 1 MB. This bench sends real bodies of each
size directly to the simulator and through the server under test, alternating
rounds so both see the same machine, and reports added p50/p99, the server's
CPU per request and the per-KB slope of each. Beside it: the bare cost of
copying the bytes once in memory, the same bodies through two bare relays
(bench/bare_proxy.py: one more process that moves the bytes and reads none of
them; `--no-bare` skips them) and, with `--litellm`, the LiteLLM proxy on the
same bodies in the same run. The streaming relay passes each chunk on as it
arrives: what one more hop costs on this machine. The store-and-forward relay
holds each request until its body has arrived, as any proxy that routes on the
body must (the latest message is at its end): the floor for a gateway.

Bodies: `--bodies FILE.jsonl` is a replay corpus (`tiergate replay import`
output, or eval/realtraffic's outcome corpora built from public runs; nothing
fetched is committed): for each size the turn request nearest to it is taken
as sent (OpenAI chat format), model replaced. Without `--bodies`, or when no
turn is within 30 % of a size, the generated agent body grown to that size is
used (marked `synthetic`).

Whole-session replay (`--session-turns`): one session's turns sent in order on
one session id, so the transcript memo is warm as in production; the added
latency at turn 2 and at the last turn shows whether the cost grows with the
session. A real session is used when the corpus has one that long, else the
generated body grown turn by turn.

    .venv/bin/python bench/bench_bodies.py --bodies CORPUS.jsonl [--litellm] [--quick]
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

import common
from loadgen import COUNTER, run_loadgen

SESSION_HEADER = "x-orcarouter-session-id"
#: The bare relays' target names, by whether they hold whole requests.
RELAYS = {False: "bare relay (streaming)", True: "bare relay (store and forward)"}
#: The issue's bars (added ms at every size up to 1 MB, agent router on Redis).
TARGET_P50_MS = 0.5
TARGET_P99_MS = 1.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--bodies", type=Path, help="replay corpus (JSONL) to take real bodies from")
    p.add_argument("--sizes", default="10,100,300,1000", help="body sizes in KB")
    p.add_argument(
        "--variants", default="plain,router,agent", help="comma list of plain,router,agent"
    )
    p.add_argument("--states", default="memory,redis", help="comma list of memory,redis")
    p.add_argument(
        "--requests",
        type=int,
        default=200,
        help="requests per size and target (CPU is read in 10 ms ticks: keep it large)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="direct/through alternations per size and replayed turn",
    )
    p.add_argument(
        "--session-turns",
        default="2,50,100,200",
        help="turns of the whole-session replay measured (empty: skip it)",
    )
    p.add_argument("--session-repeats", type=int, default=20, help="requests per measured turn")
    p.add_argument("--litellm", action="store_true", help="also measure the LiteLLM proxy")
    p.add_argument(
        "--no-bare", action="store_true", help="skip the bare TCP relays (bench/bare_proxy.py)"
    )
    p.add_argument("--litellm-venv", type=Path, default=None, help="LiteLLM venv path")
    p.add_argument("--no-install", action="store_true", help="never pip-install LiteLLM")
    p.add_argument("--quick", action="store_true", help="tiny run (smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.variants, args.states = "10,100", "agent", "memory"
        args.requests, args.rounds, args.session_turns, args.session_repeats = 12, 1, "2,10", 4
    return args


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


# ---- bodies -------------------------------------------------------------------------


def with_counter(body: dict[str, Any], model: str) -> str:
    """The body for the load generator: the model replaced and a per-request counter at
    the end of the latest message, so no two requests are the same."""
    out = copy.deepcopy(body)
    out["model"] = model
    out.pop("stream", None)
    out.pop("stream_options", None)
    last = out["messages"][-1]
    content = last.get("content")
    if isinstance(content, list):
        last["content"] = [*content, {"type": "text", "text": f"[{COUNTER}]"}]
    else:
        last["content"] = f"{content or ''}\n[{COUNTER}]"
    return json.dumps(out)


def corpus_turns(path: Path | None, limit_sessions: int = 5000) -> list[list[dict[str, Any]]]:
    """Every session's turn requests (OpenAI chat bodies), one list per session."""
    if path is None:
        return []
    sessions = []
    with path.open("rb") as fh:
        for i, line in enumerate(fh):
            if i >= limit_sessions:
                break
            if line.strip():
                doc = orjson.loads(line)
                sessions.append([t["request"] for t in doc.get("turns", []) if "request" in t])
    return sessions


def pick_bodies(
    sessions: list[list[dict[str, Any]]], sizes_kb: list[int]
) -> dict[int, tuple[dict[str, Any], str]]:
    """Per size, the real turn nearest to it (within 30 %), else a synthetic one."""
    best: dict[int, tuple[float, dict[str, Any]]] = {}
    for turns in sessions:
        for body in turns:
            n = len(orjson.dumps(body)) / 1024
            for kb in sizes_kb:
                miss = abs(n - kb) / kb
                if miss <= 0.3 and (kb not in best or miss < best[kb][0]):
                    best[kb] = (miss, body)
    out: dict[int, tuple[dict[str, Any], str]] = {}
    for kb in sizes_kb:
        if kb in best:
            out[kb] = (best[kb][1], "real")
        else:
            out[kb] = (common.agent_body("m", pad_kb=kb), "synthetic")
    return out


def session_bodies(
    sessions: list[list[dict[str, Any]]], turns: list[int]
) -> tuple[dict[int, dict[str, Any]], str]:
    """Turn bodies of one session at least max(turns) long, else a generated one."""
    need = max(turns)
    longest = max(sessions, key=len, default=[])
    if len(longest) >= need:
        return {t: longest[t - 1] for t in turns}, f"real ({len(longest)} turns)"
    base = common.agent_body("m")
    out = {}
    for t in turns:  # each turn adds one tool call and its ~2 KB result, as an agent does
        out[t] = common.agent_body("m", pad_kb=max(0, (len(orjson.dumps(base)) + 2300 * t) // 1024))
    return out, "synthetic (grown ~2.3 KB a turn)"


# ---- measuring ----------------------------------------------------------------------


def _phase(
    label: str,
    proc: common.Proc,
    token: str,
    body: str,
    requests: int,
    session: str | None,
    warmup: int,
) -> dict[str, Any]:
    return {
        "label": label,
        "ports": [int(proc.url.rsplit(":", 1)[1])],
        "headers": {"authorization": f"Bearer {token}"},
        "body": body,
        "stream": False,
        "session_header": SESSION_HEADER if session else None,
        "session_prefix": session or "s",
        "turns_per_session": 0,
        "concurrency": 1,
        "requests": requests,
        "duration": 300.0,
        "warmup": warmup,
    }


def measure(
    server: common.Proc,
    sim: common.Proc,
    model: str,
    token: str,
    bodies: dict[int, tuple[dict[str, Any], str]],
    args: argparse.Namespace,
    load_cpu: int | None,
    session: bool,
) -> list[dict[str, Any]]:
    """Added latency and server CPU per size: direct and through alternate per round.
    (The bare relay is measured with the direct request itself: `model` direct,
    `token` the simulator's key.)"""
    phases = []
    per_round = max(1, args.requests // args.rounds)
    for kb, (body, _) in bodies.items():
        direct = with_counter(body, common.MODELS["direct"])
        through = direct if model == common.MODELS["direct"] else with_counter(body, model)
        sid = uuid.uuid4().hex[:10] if session else None
        for r in range(args.rounds):
            phases.append(
                _phase(f"direct|{kb}|{r}", sim, common.UPSTREAM_KEYS[0], direct, per_round, None, 3)
            )
            phases.append(_phase(f"through|{kb}|{r}", server, token, through, per_round, sid, 3))
    spec = {"cpu": load_cpu, "watch": {"server": server.pid, "sim": sim.pid}, "phases": phases}
    return _points(run_loadgen(spec)["phases"], bodies)


def _points(
    raw: list[dict[str, Any]], bodies: dict[int, tuple[dict[str, Any], str]]
) -> list[dict[str, Any]]:
    out = []
    for kb, (body, source) in bodies.items():
        d = [ph for ph in raw if ph["label"].startswith(f"direct|{kb}|")]
        t = [ph for ph in raw if ph["label"].startswith(f"through|{kb}|")]
        ds = common.summarize_us([x for ph in d for x in ph["latency_us"]])
        ts = common.summarize_us([x for ph in t for x in ph["latency_us"]])
        n_t = sum(ph["count"] for ph in t) or 1
        n_d = sum(ph["count"] for ph in d) or 1
        out.append(
            {
                "kb": kb,
                "bytes": len(orjson.dumps(body)),
                "messages": len(body.get("messages", [])),
                "source": source,
                "direct": ds,
                "through": ts,
                "added_p50_ms": ts.get("p50_ms", 0) - ds.get("p50_ms", 0),
                "added_p99_ms": ts.get("p99_ms", 0) - ds.get("p99_ms", 0),
                "server_cpu_us_per_req": sum(ph["watch_cpu_s"]["server"] for ph in t) / n_t * 1e6,
                # the simulator's own CPU per request, direct and through: a
                # through request it finds costlier to serve shows up as added latency
                "sim_cpu_us_per_req": {
                    "direct": sum(ph["watch_cpu_s"]["sim"] for ph in d) / n_d * 1e6,
                    "through": sum(ph["watch_cpu_s"]["sim"] for ph in t) / n_t * 1e6,
                },
                "non_200": sum(v for ph in t for k, v in ph["statuses"].items() if k != "200"),
            }
        )
    return out


def session_replay(
    server: common.Proc,
    sim: common.Proc,
    model: str,
    token: str,
    bodies: dict[int, dict[str, Any]],
    args: argparse.Namespace,
    load_cpu: int | None,
) -> list[dict[str, Any]]:
    """The measured turns, each on a session id of its own (memo warm), interleaved:
    `--rounds` rounds, each sending every turn's share of `--session-repeats`.
    Why interleaved: sent one turn after the other, a burst of this VM's noise
    landed on one turn, and one tree's turn-200 ratio read 1.12x in one run and
    2.34x in the next (docs/performance.md, "Session 22")."""
    run = "replay-" + uuid.uuid4().hex[:8]
    phases = []
    n = max(1, args.session_repeats // args.rounds)
    for r in range(args.rounds):
        for turn, body in sorted(bodies.items()):
            direct = with_counter(body, common.MODELS["direct"])
            through = direct if model == common.MODELS["direct"] else with_counter(body, model)
            phases.append(
                _phase(f"direct|{turn}|{r}", sim, common.UPSTREAM_KEYS[0], direct, n, None, 2)
            )
            phases.append(
                _phase(f"through|{turn}|{r}", server, token, through, n, f"{run}-{turn}", 2)
            )
    spec = {"cpu": load_cpu, "watch": {"server": server.pid, "sim": sim.pid}, "phases": phases}
    return _points(run_loadgen(spec)["phases"], {t: (b, "") for t, b in sorted(bodies.items())})


def measure_target(
    server: common.Proc,
    sim: common.Proc,
    model: str,
    token: str,
    bodies: dict[int, tuple[dict[str, Any], str]],
    replay: dict[int, dict[str, Any]],
    args: argparse.Namespace,
    load_cpu: int | None,
    session: bool,
) -> dict[str, Any]:
    """One server under test: its points per body size and, given `replay` turns,
    its whole-session replay (the gateways, the bare relays and LiteLLM alike)."""
    res: dict[str, Any] = {
        "points": measure(server, sim, model, token, bodies, args, load_cpu, session)
    }
    if replay:
        res["session"] = session_replay(server, sim, model, token, replay, args, load_cpu)
    return res


def copy_floor_us(bodies: dict[int, tuple[dict[str, Any], str]]) -> dict[int, float]:
    """Microseconds to copy each body's bytes once (best of 50): the physical floor.

    The copy goes into one buffer mapped before the clock starts, as a proxy's
    steady state reuses its memory. Copying into fresh memory (what this measured
    until session 27, `bytes(bytearray(body))`) also timed the page faults of
    mapping 2 MB: 962 us for 1 MB on one VM against 14-20 us for 300 KB, a floor
    slope of 1.03 us/KB instead of about 0.02, which flattered the gateways' slopes
    against it (docs/performance.md, session 27)."""
    raws = {kb: orjson.dumps(body) for kb, (body, _) in bodies.items()}
    target = memoryview(bytearray(max((len(r) for r in raws.values()), default=0)))
    out = {}
    for kb, raw in raws.items():
        n = len(raw)
        target[:n] = raw  # touch every page before timing
        best = float("inf")
        for _ in range(50):
            t0 = time.perf_counter()
            target[:n] = raw
            best = min(best, time.perf_counter() - t0)
        out[kb] = best * 1e6
    return out


def slope_us_per_kb(points: list[dict[str, Any]], key: str) -> float | None:
    """Least-squares slope of `key` (ms or us) against body KB, in us per KB."""
    if len(points) < 2:
        return None
    xs = [p["bytes"] / 1024 for p in points]
    ys = [p[key] * (1000 if key.endswith("_ms") else 1) for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else None


def session_growth(
    points: list[dict[str, Any]], floor: list[dict[str, Any]] | None
) -> dict[str, float] | None:
    """Issue #30's turn-200 question for one target's session replay: added p50 at
    the last measured turn against the first, as a ratio, and the same ratio after
    taking away what the store-and-forward relay's added p50 grew over the same
    turns (`floor`: the bytes' own cost on this machine, which a proxy that reads
    the body before routing it cannot skip). None for fewer
    than two turns or a first turn that added nothing measurable."""
    if len(points) < 2 or points[0]["added_p50_ms"] <= 0:
        return None
    first, last = points[0]["added_p50_ms"], points[-1]["added_p50_ms"]
    out = {"first_ms": first, "last_ms": last, "ratio": last / first}
    if floor and len(floor) == len(points):
        relay = floor[-1]["added_p50_ms"] - floor[0]["added_p50_ms"]
        out["relay_growth_ms"] = relay
        out["ratio_net_of_relay"] = (last - relay) / first
    return out


# ---- run and report -----------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    info = common.machine_info()
    common.print_machine(info)
    gw_cpu, load_cpu = common.cpu_layout()
    sizes = [int(x) for x in _csv(args.sizes)]
    sessions = corpus_turns(args.bodies)
    bodies = pick_bodies(sessions, sizes)
    turns = [int(x) for x in _csv(args.session_turns)]
    replay, replay_source = session_bodies(sessions, turns) if turns else ({}, "")
    workdir = Path(tempfile.mkdtemp(prefix="tiergate-bodies-"))
    results: dict[str, Any] = {
        "machine": info,
        "args": {k: str(v) for k, v in vars(args).items()},
        "copy_floor_us": {str(k): v for k, v in copy_floor_us(bodies).items()},
        "targets": {},
        "session_source": replay_source,
    }
    states = _csv(args.states)
    if "redis" in states and not common.redis_available():
        print(f"Redis not reachable at {common.REDIS_URL}: redis skipped", file=sys.stderr)
        states = [s for s in states if s != "redis"]
    sim = common.start_sim(workdir, load_cpu)
    try:
        for whole in () if args.no_bare else (False, True):  # the floor, nothing read
            print(f"-> {RELAYS[whole]} ...", flush=True)
            relay = common.start_bare_proxy(sim, workdir, gw_cpu, whole)
            try:
                results["targets"][RELAYS[whole]] = measure_target(
                    relay, sim, common.MODELS["direct"], common.UPSTREAM_KEYS[0], bodies, replay,
                    args, load_cpu, False,
                )  # fmt: skip
            finally:
                relay.stop()
        for variant, state in itertools.product(_csv(args.variants), states):
            name = f"tiergate {variant}/{state}"
            prefix = common.new_prefix("bodies")
            cfg = common.gateway_config(sim.url, variant, state=state, prefix=prefix)
            print(f"-> {name} ...", flush=True)
            gw = common.start_gateway(cfg, workdir, gw_cpu, log_level="WARNING")
            try:
                results["targets"][name] = measure_target(
                    gw, sim, common.MODELS[variant], common.TOKEN, bodies, replay, args,
                    load_cpu, variant == "agent",
                )  # fmt: skip
            finally:
                gw.stop()
                if state == "redis":
                    common.redis_cleanup(prefix)
        if args.litellm:
            results["targets"].update(_litellm(args, sim, workdir, gw_cpu, load_cpu, bodies))
    finally:
        sim.stop()
    floor_session = results["targets"].get(RELAYS[True], {}).get("session")
    for res in results["targets"].values():
        if res.get("session"):
            res["growth"] = session_growth(res["session"], floor_session)
    return results


def _litellm(
    args: argparse.Namespace,
    sim: common.Proc,
    workdir: Path,
    gw_cpu: int | None,
    load_cpu: int | None,
    bodies: dict[int, tuple[dict[str, Any], str]],
) -> dict[str, Any]:
    import bench_litellm

    venv = args.litellm_venv or bench_litellm.DEFAULT_VENV
    exe, note = bench_litellm.ensure_venv(venv, install=not args.no_install)
    print(f"-> LiteLLM proxy: {note}", flush=True)
    if exe is None:
        return {}
    proc = bench_litellm.start_litellm(exe, sim.url, workdir, gw_cpu)
    try:
        res = measure_target(
            proc, sim, common.MODELS["direct"], bench_litellm.MASTER_KEY, bodies, {}, args,
            load_cpu, False,
        )  # fmt: skip
    finally:
        proc.stop()
    return {f"LiteLLM {bench_litellm.LITELLM_SPEC.split('==')[1]}": res}


def report(results: dict[str, Any]) -> None:
    floor = results["copy_floor_us"]
    heads = ["target", "body", "source", "msgs", "added p50 ms", "added p99 ms", "server CPU us"]
    rows = []
    for name, res in results["targets"].items():
        for pt in res["points"]:
            rows.append(
                [
                    name,
                    f"{pt['bytes'] / 1024:.0f} KB",
                    pt["source"],
                    pt["messages"],
                    f"{pt['added_p50_ms']:.2f}",
                    f"{pt['added_p99_ms']:.2f}",
                    f"{pt['server_cpu_us_per_req']:.0f}",
                ]
            )
    print(common.table(heads, rows))
    print()
    heads = ["target", "added p50 slope us/KB", "server CPU slope us/KB", "copy floor us/KB"]
    first = next(iter(results["targets"].values()), {"points": []})["points"]
    floor_slope = slope_us_per_kb(
        [{"bytes": p["bytes"], "floor": floor[str(p["kb"])]} for p in first], "floor"
    )
    rows = []
    for name, res in results["targets"].items():
        rows.append(
            [
                name,
                _f(slope_us_per_kb(res["points"], "added_p50_ms")),
                _f(slope_us_per_kb(res["points"], "server_cpu_us_per_req")),
                _f(floor_slope),
            ]
        )
    print(common.table(heads, rows))
    for name, res in results["targets"].items():
        sess = res.get("session")
        if not sess:
            continue
        print(f"\nwhole-session replay, {name} ({results['session_source']}):")
        print(
            common.table(
                ["turn", "body", "added p50 ms", "server CPU us"],
                [
                    [
                        p["kb"],
                        f"{p['bytes'] / 1024:.0f} KB",
                        f"{p['added_p50_ms']:.2f}",
                        f"{p['server_cpu_us_per_req']:.0f}",
                    ]
                    for p in sess
                ],
            )
        )
        growth = res.get("growth")
        if growth is not None:
            line = (
                f"turn {sess[-1]['kb']} against turn {sess[0]['kb']}: {growth['last_ms']:.2f}"
                f" / {growth['first_ms']:.2f} ms added = {growth['ratio']:.2f}x"
            )
            if "ratio_net_of_relay" in growth and name not in RELAYS.values():
                line += (
                    f"; less the store-and-forward relay's growth"
                    f" ({growth['relay_growth_ms']:+.2f} ms)"
                    f" {growth['ratio_net_of_relay']:.2f}x (issue #30's bar: 1.20x)"
                )
            print(line)


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = run(args)
    report(results)
    path = common.write_result("bodies", results)
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
