"""Times every cycle-collector pass of the process it is imported into (Python
imports `sitecustomize` at start-up when it is on the path); on SIGUSR1 writes
`generation milliseconds ended-at-epoch-seconds` lines to $TIERGATE_BENCH_GC_LOG.
Used by bench/bench_gc_pauses.py, which puts this folder on the gateway's
PYTHONPATH, so any tree's collections are timed the same way."""

from __future__ import annotations

import gc
import os
import signal
import time
from typing import Any

_LOG = os.environ.get("TIERGATE_BENCH_GC_LOG")
_started = [0.0]
_passes: list[tuple[int, float, float]] = []


def _time(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
    else:
        _passes.append((info["generation"], time.perf_counter() - _started[0], time.time()))


def _write(*_: object) -> None:
    if _LOG:
        with open(_LOG, "w") as fh:
            fh.writelines(f"{g} {s * 1e3:.3f} {t:.3f}\n" for g, s, t in _passes)


if _LOG:
    gc.callbacks.append(_time)
    signal.signal(signal.SIGUSR1, _write)
