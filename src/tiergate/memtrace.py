"""Memory-growth debug aid: tracemalloc snapshots at intervals, growing sites to a file.

Why: a soak shows RSS rising but not what holds the memory. With
`TIERGATE_MEMTRACE=/path/report.txt` set, a gateway process starts tracemalloc at
start-up and, every `TIERGATE_MEMTRACE_SECONDS` (default 60), rewrites that file
with the allocation sites that grew most since the first snapshot (taken one
interval after start, so warm-up is not counted); `{pid}` in the path is replaced
by the process id, for several instances. Off by default: tracemalloc
costs CPU and memory. Only file names and line numbers are written, never data.
See docs/reliability.md ("Finding what grows").
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import tracemalloc
from pathlib import Path

log = logging.getLogger("tiergate.memtrace")

ENV_PATH = "TIERGATE_MEMTRACE"
ENV_SECONDS = "TIERGATE_MEMTRACE_SECONDS"
FRAMES = 8  # stack depth kept per allocation: enough to see who called the allocator
TOP = 40  # sites per report


def _filtered(snap: tracemalloc.Snapshot) -> tracemalloc.Snapshot:
    return snap.filter_traces(
        (
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"),
            tracemalloc.Filter(False, "<unknown>"),
        )
    )


def growth_report(
    base: tracemalloc.Snapshot, now: tracemalloc.Snapshot, elapsed: float, top: int = TOP
) -> str:
    """The `top` sites that grew most from `base` to `now`, by line and by traceback."""
    lines = [f"# tracemalloc growth over {elapsed:.0f} s since the baseline snapshot"]
    total_now = sum(s.size for s in now.statistics("filename"))
    total_base = sum(s.size for s in base.statistics("filename"))
    lines.append(
        f"# traced: {total_base / 1e6:.2f} MB -> {total_now / 1e6:.2f} MB "
        f"({(total_now - total_base) / 1e6:+.2f} MB)"
    )
    lines.append("## by line")
    for stat in now.compare_to(base, "lineno")[:top]:
        frame = stat.traceback[0]
        lines.append(
            f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks  "
            f"{frame.filename}:{frame.lineno}"
        )
    lines.append("## by traceback (top 10)")
    for stat in now.compare_to(base, "traceback")[:10]:
        lines.append(f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks")
        lines.extend(f"    {f.filename}:{f.lineno}" for f in stat.traceback)
    return "\n".join(lines) + "\n"


class MemTrace:
    """A daemon thread that snapshots and rewrites the report; stop() ends it."""

    def __init__(self, path: Path, seconds: float) -> None:
        self.path = path
        self.seconds = seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tiergate-memtrace", daemon=True)

    def start(self) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(FRAMES)
        self._thread.start()
        log.info("memtrace on", extra={"path": str(self.path), "seconds": self.seconds})

    def _run(self) -> None:
        if self._stop.wait(self.seconds):
            return
        base = _filtered(tracemalloc.take_snapshot())
        t0 = time.monotonic()
        while not self._stop.wait(self.seconds):
            now = _filtered(tracemalloc.take_snapshot())
            report = growth_report(base, now, time.monotonic() - t0)
            tmp = self.path.with_suffix(self.path.suffix + ".tmp")
            with contextlib.suppress(OSError):
                tmp.write_text(report)
                tmp.replace(self.path)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def start_from_env() -> MemTrace | None:
    """Start tracing when TIERGATE_MEMTRACE names a file; None (and no cost) otherwise."""
    raw = os.environ.get(ENV_PATH, "").strip().replace("{pid}", str(os.getpid()))
    if not raw:
        return None
    seconds = float(os.environ.get(ENV_SECONDS, "60") or 60)
    tracer = MemTrace(Path(raw), max(1.0, seconds))
    tracer.start()
    return tracer
