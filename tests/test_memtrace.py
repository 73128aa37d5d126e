"""tiergate.memtrace, the soak's leak-hunting aid: off unless asked, and when on it
names the line whose allocations grew."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from tiergate import memtrace


def test_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(memtrace.ENV_PATH, raising=False)
    assert memtrace.start_from_env() is None


def test_the_report_names_the_growing_line(tmp_path: Path) -> None:
    out = tmp_path / "gw.txt"
    was_tracing = tracemalloc.is_tracing()
    tracer = memtrace.MemTrace(out, 0.2)
    tracer.start()
    held: list[bytes] = []
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            held.extend(bytes(1000) + str(i).encode() for i in range(500))  # the leak
            if out.exists() and "test_memtrace.py" in out.read_text():
                break
            time.sleep(0.05)
    finally:
        tracer.stop()
        if not was_tracing:
            tracemalloc.stop()
    report = out.read_text()
    assert report.startswith("# tracemalloc growth over")
    top = report.split("## by line\n")[1].splitlines()[0]
    assert "test_memtrace.py" in top and top.split()[0].startswith("+"), report[:800]
