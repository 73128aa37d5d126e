"""The headline table for the README, from the latest JSON of each benchmark.

Reads bench/out/{litellm,overhead,engine,scale,memory}-latest.json (whichever
exist) and prints one markdown table with the date, machine and commit of each
source, so the README's figures can be refreshed with one command after the
benchmarks have run.

Run: .venv/bin/python bench/report.py
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import common

KEY_TARGETS = ("tiergate agent/memory", "tiergate agent/redis", "tiergate plain/memory")
"""The rows the README shows; the benchmark's own output has every variant."""


def _load(name: str) -> dict[str, Any] | None:
    path = common.OUT_DIR / f"{name}-latest.json"
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _point(t: dict[str, Any] | None, mode: str, conc: int) -> dict[str, Any] | None:
    points: list[dict[str, Any]] = (t or {}).get("points", [])
    return next((p for p in points if p["mode"] == mode and p["concurrency"] == conc), None)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} ms"


def headline() -> tuple[list[list[str]], list[str]]:
    rows: list[list[str]] = []
    sources: list[str] = []
    over = _load("litellm") or _load("overhead")
    if over:
        m = over["machine"]
        sources.append(f"overhead: {m['date_utc']}, commit {m.get('commit', '?')}")
        targets = over["targets"]
        for name in KEY_TARGETS:
            p = _point(targets.get(name), "nonstream", 1)
            if p:
                rows.append(
                    [
                        f"added latency p50 / p99, c=1, {name[9:]}",
                        f"{_ms(p['added_p50_ms'])} / {_ms(p['added_p99_ms'])}",
                        "<= 1 ms / <= 5 ms (agent)",
                    ]
                )
        peer = next((n for n in targets if n.startswith("LiteLLM")), None)
        pp = _point(targets.get(peer or ""), "nonstream", 1)
        if pp:
            rows.append(
                [
                    f"added latency p50 / p99, c=1, {peer}",
                    f"{_ms(pp['added_p50_ms'])} / {_ms(pp['added_p99_ms'])}",
                    "peer, same run",
                ]
            )
        for target in [*KEY_TARGETS, peer]:
            p = _point(targets.get(target or ""), "nonstream", 1)
            if p:
                cpu = f"{p['server_cpu_us_per_req']:,.0f} us"
                rows.append([f"server CPU per request, c=1, {target}", cpu, "same run"])
        for name, t in targets.items():
            if t.get("sweep") and (name in KEY_TARGETS or not name.startswith("tiergate")):
                s = t["sweep"]
                rows.append(
                    [
                        f"max sustained req/s per process, {name}",
                        f"{s['max_rps']:,.0f} (server CPU {s['at']['server_cpu_pct']:.0f}%)",
                        ">= 10x LiteLLM" if name.startswith("tiergate") else "peer, same run",
                    ]
                )
        for name, ratio in (over.get("ratios") or {}).items():
            if name in KEY_TARGETS:
                rows.append([f"throughput vs LiteLLM, {name[9:]}", f"{ratio:.1f}x", ">= 10x"])
    eng = _load("engine")
    if eng:
        sources.append(
            f"engine: {eng['machine']['date_utc']}, commit {eng['machine'].get('commit', '?')}"
        )
        for r in eng["per_turn"]:
            rows.append(
                [f"plan + commit per turn, {r['state']}", f"{r['total_us_p50']:,.0f} us", "-"]
            )
            if r.get("wire_round_trips_plan") is not None:
                total = r["wire_round_trips_plan"] + r["wire_round_trips_commit"]
                rows.append(
                    [
                        "Redis round trips per request",
                        f"{total:g} ({r['wire_round_trips_plan']:g} plan + "
                        f"{r['wire_round_trips_commit']:g} commit)",
                        "<= 2",
                    ]
                )
        rows.append(
            ["planning cost turn 200 / turn 2", f"{eng['depth']['plan_ratio']:.2f}x", "<= 1.5x"]
        )
        for r in eng["replay"]:
            rows.append(
                [f"replay throughput, {r['state']}", f"{r['turns_per_s']:,.0f} turns/s", "-"]
            )
    scale = _load("scale")
    if scale:
        sources.append(
            f"scale: {scale['machine']['date_utc']}, commit {scale['machine'].get('commit', '?')}"
        )
        for f in scale["fleets"]:
            rows.append(
                [
                    f"fleet of {f['processes']} on Redis (c={scale['args']['concurrency']})",
                    f"{f['rps']:,.0f} req/s; cap {'holds' if f['share_cap_holds'] else 'BROKEN'} "
                    f"({f['strong_share_after_warmup_pct']:.1f}%); pins "
                    f"{'hold' if f['pins_hold'] else 'BROKEN'}",
                    f"cap {scale['cap_percent']:g}%",
                ]
            )
    mem = _load("memory")
    if mem:
        sources.append(
            f"memory: {mem['machine']['date_utc']}, commit {mem['machine'].get('commit', '?')}"
        )
        m = mem["memory"]
        rows.append(
            [
                "RSS idle / after N sessions (memory state)",
                f"{m['rss_idle_mb']:.0f} MB / {m['rss_after_sessions_mb']:,.0f} MB "
                f"(N={m['sessions']:,}; {m['bytes_per_session']:,.0f} B/session)",
                "-",
            ]
        )
        if "redis" in mem:
            rows.append(
                [
                    "Redis bytes per session",
                    f"{mem['redis']['bytes_per_session']:,.0f} B "
                    f"({mem['redis']['keys_per_session']:.1f} keys)",
                    "-",
                ]
            )
    return rows, sources


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args(argv)
    rows, sources = headline()
    if not rows:
        print(f"no benchmark results in {common.OUT_DIR}; run the benchmarks first")
        return 1
    info = common.machine_info()
    print(
        f"Machine: {info['nproc']} cores, {info['cpu_model']}, {info['ram_gib']} GiB RAM, "
        f"Python {info['python']}."
    )
    print("Sources: " + "; ".join(sources) + ".\n")
    print(common.table(["measure", "tiergate", "target / note"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
