"""The soak test's report: latency per minute and its drift, RSS growth, errors by
class, usage rows against requests served, and the pass/fail verdict."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from soak_load import Load, Options, Result


def checkout_commit() -> str:
    """The checkout the gateways ran from (with "+dirty" when the tree had changes)."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "src"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000 if values else float("nan")


def latency_report(
    results: list[Result], seconds: float, warmup: float, machine_load: list[tuple[float, float]]
) -> dict[str, Any]:
    """p50/p99 per minute, and drift: p99 of the last 10% of the run (after warm-up)
    against the first 10%. Only good answers count: an error's latency is not load."""
    good = sorted((r for r in results if r.error is None), key=lambda r: r.t)
    minutes: dict[int, list[float]] = {}
    for r in good:
        minutes.setdefault(int(r.t // 60), []).append(r.latency)
    span = seconds - warmup
    first = [r.latency for r in good if warmup <= r.t < warmup + span * 0.1]
    last = [r.latency for r in good if r.t >= seconds - span * 0.1]
    p99_first, p99_last = _pct(first, 99), _pct(last, 99)
    return {
        "p50_ms": _pct([r.latency for r in good], 50),
        "p99_ms": _pct([r.latency for r in good], 99),
        "per_minute": [
            {
                "minute": m,
                "n": len(v),
                "p50_ms": _pct(v, 50),
                "p99_ms": _pct(v, 99),
                "loadavg": _mean([x for t, x in machine_load if int(t // 60) == m]),
            }
            for m, v in sorted(minutes.items())
        ],
        "p99_first_10pct_ms": p99_first,
        "p99_last_10pct_ms": p99_last,
        "p99_drift_ratio": p99_last / p99_first if first and last else float("nan"),
        "p50_drift_ratio": _pct(last, 50) / _pct(first, 50) if first and last else float("nan"),
    }


def rss_report(
    samples: list[tuple[float, list[float]]], warmup: float, opts: Options
) -> dict[str, Any]:
    """Growth = last sample minus the first one after warm-up; slope by least squares."""
    after = [(t, mb) for t, mb in samples if t >= warmup] or samples[-2:]
    per_minute: dict[int, list[float]] = {}
    for t, mbs in samples:  # the last sample of each minute: the curve, for a plot
        per_minute[int(t // 60)] = mbs
    out: dict[str, Any] = {
        "warmup_seconds": warmup,
        "samples": len(samples),
        "per_minute_mb": [[m, *mbs] for m, mbs in sorted(per_minute.items())],
        "gateways": [],
    }
    for i in range(len(samples[0][1])):
        ts = np.array([t for t, _ in after])
        mb = np.array([m[i] for _, m in after])
        growth = float(mb[-1] - mb[0])
        limit = max(opts.rss_limit_mb, float(mb[0]) * opts.rss_limit_percent / 100)
        slope = float(np.polyfit(ts, mb, 1)[0]) * 3600 if len(ts) > 2 else float("nan")
        out["gateways"].append(
            {
                "start_mb": float(samples[0][1][i]),
                "after_warmup_mb": float(mb[0]),
                "end_mb": float(mb[-1]),
                "max_mb": float(max(m[i] for _, m in samples)),
                "growth_mb": growth,
                "limit_mb": limit,
                "slope_mb_per_hour": slope,
                "flat": growth <= limit,
            }
        )
    return out


def log_report(tmp: Path) -> dict[str, int]:
    """Gateway log lines by level and message (warning and above)."""
    found: Counter[str] = Counter()
    for i in range(2):
        for line in (tmp / f"gw{i}.log").read_bytes().splitlines():
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                if b"Traceback" in line:
                    found["error: traceback"] += 1
                continue
            if isinstance(rec, dict) and rec.get("level") in ("warning", "error", "critical"):
                found[f"{rec['level']}: {rec.get('msg')}"] += 1
    return dict(found)


@dataclass
class RunFacts:
    """What the run left behind, gathered after the gateways exited."""

    load: Load
    rss: list[tuple[float, list[float]]]
    sim: dict[str, Any]  # the simulator's /_sim/stats totals
    rows: list[str]  # request_id of every usage row in the database
    exit_codes: list[int | None]
    redis_keys: int
    logs: dict[str, int]
    cpu_seconds: dict[str, float]
    commit: str  # taken before the gateways started: the tree may change meanwhile


def build_report(opts: Options, f: RunFacts) -> dict[str, Any]:
    load, rss, sim, rows, exit_codes, logs = f.load, f.rss, f.sim, f.rows, f.exit_codes, f.logs
    seconds = opts.minutes * 60
    warmup = min(180.0, max(20.0, seconds * 0.1))
    res = load.results
    errors = [r for r in res if r.error is not None]
    non_injected = Counter(r.error for r in errors if not r.injected)
    expected: Counter[str] = Counter(r.request_id or "?" for r in res if r.row_expected)
    got: Counter[str] = Counter(rows)
    served = sum(expected.values())
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": f.commit,
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "options": {k: v for k, v in vars(opts).items() if k not in ("out", "progress")},
        "requests": {
            "sent": len(res),
            "achieved_rate": len(res) / seconds,
            "streamed": sum(r.stream for r in res),
            "by_kind": dict(Counter(r.kind for r in res)),
            # per wire format: requests, streamed, tool turns, errors the soak did not
            # inject itself (soak_wire.py); injected faults are counted under "errors"
            "by_wire": {
                w: {
                    "sent": sum(r.wire == w for r in res),
                    "streamed": sum(r.wire == w and r.stream for r in res),
                    "tool_result": sum(
                        r.wire == w and r.kind.endswith(":tool_result") for r in res
                    ),
                    "errors": sum(
                        r.wire == w and r.error is not None and not r.injected for r in res
                    ),
                }
                for w in sorted({r.wire for r in res})
            },
            "by_instance": dict(Counter(f"gw{r.instance}" for r in res)),
            "tier_headers": dict(Counter(r.tier for r in res if r.tier)),
        },
        "errors": {
            "non_injected": dict(non_injected),
            "injected": dict(Counter(r.error for r in errors if r.injected)),
            "faults_armed": load.faults_armed,
            "faults_fired_upstream": sim.get("faults", 0),
        },
        "latency": latency_report(res, seconds, warmup, load.machine_load),
        "rss": rss_report(rss, warmup, opts),
        "usage_rows": {
            "served": served,
            "rows": len(rows),
            "missing": sum((expected - got).values()),
            "unexpected": sum((got - expected).values()),
            "upstream_calls": sim.get("requests", 0) + sim.get("faults", 0),
        },
        "cpu_seconds": f.cpu_seconds,
        "gateway_exit_codes": exit_codes,
        "redis_keys_at_end": f.redis_keys,
        "gateway_log": logs,
    }
    failures = []
    if non_injected:
        failures.append(f"{sum(non_injected.values())} non-injected errors")
    injected = sum(r.injected for r in errors)
    if injected > sim.get("faults", 0):
        failures.append(f"{injected} upstream errors but only {sim.get('faults', 0)} faults fired")
    u = report["usage_rows"]
    if u["rows"] != served or u["missing"] or u["unexpected"]:
        failures.append(f"usage rows {u['rows']} != served {served}")
    for i, g in enumerate(report["rss"]["gateways"]):
        if not g["flat"]:
            failures.append(f"gw{i} RSS grew {g['growth_mb']:.1f} MB > {g['limit_mb']:.1f} MB")
    logged = sum(n for k, n in logs.items() if k.startswith(("error", "critical")))
    if logged:
        failures.append(f"gateways logged {logged} errors")
    if any(c not in (0, -signal.SIGTERM) for c in exit_codes):
        failures.append(f"gateway exit codes {exit_codes}")
    report["verdict"] = {"ok": not failures, "failures": failures}
    return report


def print_summary(rep: dict[str, Any]) -> None:
    lat, rq, u, err = rep["latency"], rep["requests"], rep["usage_rows"], rep["errors"]
    rows = [
        ("duration", f"{rep['options']['minutes']:g} min at {rep['options']['rate']:g} req/s"),
        ("requests", f"{rq['sent']} ({rq['achieved_rate']:.1f}/s, {rq['streamed']} streamed)"),
        ("non-injected errors", f"{sum(err['non_injected'].values())} {err['non_injected'] or ''}"),
        ("injected", f"{err['faults_fired_upstream']} upstream faults -> {err['injected'] or 0}"),
        ("latency p50 / p99", f"{lat['p50_ms']:.0f} / {lat['p99_ms']:.0f} ms"),
        (
            "p99 drift",
            f"{lat['p99_first_10pct_ms']:.0f} -> {lat['p99_last_10pct_ms']:.0f} ms "
            f"(x{lat['p99_drift_ratio']:.2f}; p50 x{lat['p50_drift_ratio']:.2f})",
        ),
        (
            "machine load",
            "1-min loadavg, start to end: "
            + " ".join(
                f"{m['loadavg']:.1f}"
                for m in lat["per_minute"][:: max(1, len(lat["per_minute"]) // 10)]
            ),
        ),
    ]
    for i, g in enumerate(rep["rss"]["gateways"]):
        rows.append(
            (
                f"gw{i} RSS",
                f"{g['after_warmup_mb']:.1f} -> {g['end_mb']:.1f} MB "
                f"({g['growth_mb']:+.1f}, limit {g['limit_mb']:.0f}; "
                f"{g['slope_mb_per_hour']:+.1f} MB/h)",
            )
        )
    cpu = ", ".join(f"{k} {v:.0f} s" for k, v in rep["cpu_seconds"].items())
    rows.append(("CPU time", cpu))
    rows.append(("usage rows / served", f"{u['rows']} / {u['served']} (missing {u['missing']})"))
    rows.append(("tier headers", ", ".join(f"{k}: {v}" for k, v in rq["tier_headers"].items())))
    rows.append(
        (
            "verdict",
            "PASS" if rep["verdict"]["ok"] else "FAIL: " + "; ".join(rep["verdict"]["failures"]),
        )
    )
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
