"""Session tiers across processes: a gateway killed mid-stream, and `tiergate db
migrate` as an operator runs it. Both start real `python -m tiergate` processes,
so they live apart from the faster in-process tests of test_lanes_http.py.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lanes_http_support import (
    GPT5,
    MINI,
    Sim,
    chat,
    error_code,
    gateway,
    managed,
    session,
    sim_server,
    sticky,
    turn,
    user,
)
from servers import TOKEN, free_port, gateway_config
from tiergate.lanes import migrate
from tiergate.sim.app import SimSettings

TTL = 2  # seconds: the lane TTL, and so the lease's


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    with sim_server() as s:
        yield s


@pytest.fixture(scope="module")
def paced_sim() -> Iterator[Sim]:
    """50 tokens a second: a 100-token answer keeps its stream open for 2 s."""
    with sim_server(SimSettings(tokens_per_second=50)) as s:
        yield s


def write_config(path: Path, sim_url: str, **overrides: Any) -> Path:
    path.write_text(json.dumps(gateway_config(sim_url, **overrides)))  # JSON is YAML
    return path


def tiergate(*args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[bytes]:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("SESSION_TIER_")}
    child_env.update(env or {})
    return subprocess.Popen([sys.executable, "-m", "tiergate", *args], env=child_env, **kw)


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"gateway exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    pytest.fail(f"gateway did not start:\n{log.read_text()}")


def test_lease_of_a_killed_gateway_expires_with_the_lane_ttl(
    paced_sim: Sim, tmp_path: Path
) -> None:
    lanes = tmp_path / "lanes.db"
    migrate(lanes)
    tiers = {"backend": "sqlite", "sqlite_path": str(lanes)}
    env = {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": str(TTL)}
    config = write_config(tmp_path / "gw.yaml", paced_sim.url, session_tiers=tiers)
    port, log = free_port(), tmp_path / "gw.log"
    with log.open("wb") as out:
        doomed = tiergate(
            "serve",
            "--config",
            str(config),
            "--port",
            str(port),
            "--log-level",
            "WARNING",
            "--spool",
            str(tmp_path / "spool.jsonl"),
            env=env,
            stdout=out,
            stderr=out,
        )
    try:
        # the survivor shares the SQLite file, as a second instance or a restart would
        with gateway(paced_sim.url, env=env, session_tiers=tiers) as survivor:
            wait_ready(f"http://127.0.0.1:{port}", doomed, log)
            lane = session()
            long_turn = turn(
                "auto:coding",
                user("Tell it all [[sim:output=100]]"),
                stream=True,
                **managed(lane, MINI),
            )
            with httpx.stream(
                "POST",
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json=long_turn,
                headers={"authorization": f"Bearer {TOKEN}"},
                timeout=10,
            ) as streaming:
                assert streaming.status_code == 200
                next(streaming.iter_raw())  # output is flowing: the lease is held
                doomed.kill()  # no finalize, no cleanup
                doomed.wait(10)
            held = survivor.lane(lane)
            assert held is not None and held.lease_expires_at is not None
            expires = held.lease_expires_at

            # another turn of the lane, asking for a different model
            next_turn = turn("auto:coding", user("Short [[sim:output=2]]"), **managed(lane, GPT5))
            busy = chat(survivor.url, next_turn)
            assert time.time() < expires, "the machine was too slow to see the held lease"
            assert busy.status_code == 409 and error_code(busy) == "session_tier_busy"
            while (reply := chat(survivor.url, next_turn)).status_code == 409:
                assert time.time() < expires + 3, "the dead request's lease never expired"
                time.sleep(0.1)
            assert time.time() >= expires
            # a fresh lane: the new approval applies at once
            assert reply.status_code == 200, reply.text
            assert reply.headers["x-orca-resolved-model"] == "openai/gpt-5"
    finally:
        doomed.kill()
        doomed.wait(10)


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}


def test_db_migrate_creates_the_session_tiers_table(sim: Sim, tmp_path: Path) -> None:
    lanes = tmp_path / "lanes.db"
    tiers = {"backend": "sqlite", "sqlite_path": str(lanes)}
    config = write_config(tmp_path / "gw.yaml", sim.url, session_tiers=tiers)
    first = turn("auto:coding", user("Hi"), **managed("m", MINI))
    with sticky(sim.url, **tiers) as g:
        before = chat(g.url, first)
        assert before.status_code == 503
        assert error_code(before) == "session_tier_storage_unavailable"
        migrated = tiergate(
            "db",
            "migrate",
            "--config",
            str(config),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        output = migrated.communicate(timeout=30)[0].decode()
        assert migrated.returncode == 0, output
        assert "session_tiers" in output
        # the running gateway picks the table up: no restart needed
        assert chat(g.url, first).status_code == 200
        assert g.lane("m") is not None
    assert list(tmp_path.glob("*.db")) == [lanes]  # database.url "" migrated no usage db

    # the explicit flag, next to the usage database; running it twice is harmless
    other, usage = tmp_path / "other.db", tmp_path / "usage.db"
    for _ in range(2):
        flagged = tiergate(
            "db",
            "migrate",
            "--url",
            f"sqlite:///{usage}",
            "--session-tiers-sqlite",
            str(other),
            cwd=tmp_path,
        )
        assert flagged.wait(30) == 0
    assert "session_tiers" in _tables(other)
    assert "session_tiers" not in _tables(usage) and _tables(usage)
