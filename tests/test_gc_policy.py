"""The served process freezes its start-up heap and times every collection
(gc_policy.py): full collections then skip what start-up built, and /metrics
shows the pauses an operator chasing p99 needs to see."""

from __future__ import annotations

import gc
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx

from servers import demo_serve, free_port
from tiergate.gc_policy import freeze_startup_heap, time_pauses
from tiergate.metrics import GC_PAUSE_SECONDS


def _count(generation: str) -> float:
    return next(
        s.value
        for m in GC_PAUSE_SECONDS.collect()
        for s in m.samples
        if s.name.endswith("_count") and s.labels["generation"] == generation
    )


def test_freeze_moves_the_heap_out_of_every_collection() -> None:
    try:
        frozen = freeze_startup_heap()
        assert frozen == gc.get_freeze_count() > 1000
        assert len(gc.get_objects()) < frozen  # collections no longer see them
    finally:
        gc.unfreeze()


def test_every_collection_is_timed_by_generation() -> None:
    timer = time_pauses()
    automatic = gc.isenabled()
    gc.disable()  # only the two passes asked for below: none triggered by allocation
    try:
        before = [_count(g) for g in "012"]
        gc.collect(0)
        gc.collect(2)
        after = [_count(g) for g in "012"]
    finally:
        gc.callbacks.remove(timer)
        if automatic:
            gc.enable()
    assert after[0] == before[0] + 1
    assert after[2] == before[2] + 1
    assert after[1] == before[1]


def test_served_gateway_freezes_at_start_and_exports_pauses(tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "stderr").open("w")
    with demo_serve(tmp_path, port, stderr=log) as (_, banner):
        token = re.search(r"Token:\s+(\S+)", banner)
        assert token is not None, banner
        with httpx.Client(timeout=10) as client:
            for i in range(200):  # enough allocation for young collections
                r = client.post(
                    f"http://127.0.0.1:{port}/v1/chat/completions",
                    headers={"authorization": f"Bearer {token.group(1)}"},
                    json={
                        "model": "orcarouter/auto",
                        "messages": [{"role": "user", "content": f"hi {i}"}],
                    },
                )
                assert r.status_code == 200, r.text
            metrics = client.get(f"http://127.0.0.1:{port}/metrics").text
    log.close()
    young = re.search(r'^tiergate_gc_pause_seconds_count\{generation="0"\} (\S+)$', metrics, re.M)
    assert young is not None, metrics[:2000]
    assert float(young.group(1)) >= 1
    assert re.search(r'^tiergate_gc_pause_seconds_count\{generation="2"\} ', metrics, re.M)
    logged = (tmp_path / "stderr").read_text().splitlines()
    lines = [json.loads(x) for x in logged if x.startswith("{")]
    (frozen,) = [x for x in lines if x["msg"] == "start-up heap frozen"]
    assert frozen["objects"] > 10_000


def test_simulator_freezes_its_start_up_heap_too(tmp_path: Path) -> None:
    """Benches time the gateway against `tiergate sim`: unfrozen, its own full
    passes (up to 55 ms) showed up as the gateway's slowest requests."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tiergate", "sim", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/_sim/health", timeout=1).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the simulator did not start"
                time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert health["status"] == "ok" and health["gc_frozen"] > 10_000
