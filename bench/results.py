"""What every benchmark records and prints: the machine and code a figure belongs
to, percentiles, markdown tables, and the JSON files in bench/out/.
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = Path(os.environ.get("TIERGATE_BENCH_OUT") or ROOT / "bench" / "out")


# ---- machine ------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    """What the figures were measured on: date, cores, CPU model, RAM, versions."""
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = int(line.split()[1]) * 1024
    versions = {}
    for mod in ("uvicorn", "uvloop", "httptools", "starlette", "aiohttp", "orjson", "redis"):
        with contextlib.suppress(Exception):
            versions[mod] = __import__(mod).__version__
    return {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_1m_5m": [round(x, 2) for x in os.getloadavg()[:2]],
        "commit": _git("rev-parse", "--short", "HEAD"),
        "src_modified": bool(_git("status", "--porcelain", "--", "src")),
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "ram_gib": round(ram / 2**30, 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "versions": versions,
    }


def _git(*args: str) -> str:
    """The code the figures belong to (the gateway processes run this tree)."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.decode().strip() if done.returncode == 0 else ""


# ---- statistics and output ---------------------------------------------------------


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return float(sorted_values[k])


def summarize_us(samples: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/max/mean of microsecond samples (milliseconds out)."""
    s = sorted(samples)
    if not s:
        return {"n": 0}
    return {
        "n": len(s),
        "p50_ms": percentile(s, 50) / 1000,
        "p90_ms": percentile(s, 90) / 1000,
        "p99_ms": percentile(s, 99) / 1000,
        "max_ms": s[-1] / 1000,
        "mean_ms": sum(s) / len(s) / 1000,
    }


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-markdown table (readable in a terminal too)."""
    cells = [[_cell(v) for v in row] for row in rows]
    numeric = [
        all(isinstance(r[i], int | float) or r[i] is None for r in rows)
        for i in range(len(headers))
    ]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = [
        "| "
        + " | ".join(
            c.rjust(w) if num else c.ljust(w) for c, w, num in zip(r, widths, numeric, strict=True)
        )
        + " |"
        for r in cells
    ]
    return "\n".join([line, sep, *body])


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:  # NaN
            return "-"
        if abs(v) < 10:
            return f"{v:.3g}"  # three significant digits: 0.412, 2.41, 7.5
        return f"{v:,.1f}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def write_result(name: str, payload: dict[str, Any]) -> Path:
    """bench/out/<name>-<utc stamp>.json and bench/out/<name>-latest.json."""
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = OUT_DIR / f"{name}-{stamp}.json"
    data = orjson.dumps(
        payload, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
    )
    path.write_bytes(data)
    (OUT_DIR / f"{name}-latest.json").write_bytes(data)
    return path


def print_machine(info: dict[str, Any]) -> None:
    dirty = " (src modified)" if info.get("src_modified") else ""
    print(
        f"# {info['date_utc']}  {info['nproc']} cores  {info['cpu_model']}  "
        f"{info['ram_gib']} GiB  Python {info['python']}  commit {info.get('commit')}{dirty}  "
        f"load average {info['load_average_1m_5m']}"
    )
