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
    resolved,
    session,
    sim_server,
    sticky,
    turn,
    user,
)
from servers import TOKEN, free_port, gateway_config
from tiergate.lanes import migrate
from tiergate.sim.app import SimSettings

ADMIN = "tg-admin-lanes-process"


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    with sim_server() as s:
        yield s


@pytest.fixture(scope="module")
def paced_sim() -> Iterator[Sim]:
    """50 tokens a second: a 1,500-token answer keeps its stream open for 30 s, so a
    loaded machine cannot finish it (and release the lease) before the kill."""
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


LEASE = 2  # seconds: the in-flight lease, renewed every third of that while a turn runs

# DOOMED_AFTER: the doomed gateway's port is picked (free_port) only once the
# survivor is listening. Picked before, the survivor's own bind(0) could be handed
# the same just-freed port while the doomed process was still starting: the
# doomed would then fail to bind, the health check answer from the survivor, and
# the "killed" stream be the survivor's own. That is our reading of two CI runs
# that got a 200 where the held lease means 409 (not reproduced locally); the
# lease-owner check below now names the cause if it happens again.


def serve_doomed(
    tmp_path: Path, sim_url: str, tiers: dict[str, Any], env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str, Path]:
    """A real `tiergate serve` process that the test will kill -9."""
    config = write_config(tmp_path / "gw.yaml", sim_url, session_tiers=tiers)
    port, log = free_port(), tmp_path / "gw.log"
    with log.open("wb") as out:
        proc = tiergate(
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
    return proc, f"http://127.0.0.1:{port}", log


def kill_mid_stream(doomed: subprocess.Popen[bytes], url: str, body: dict[str, Any]) -> str:
    """Start a slow lane stream on `url`, kill -9 its gateway while output flows;
    the request id the dead gateway gave it."""
    with httpx.stream(
        "POST",
        f"{url}/v1/chat/completions",
        json=body,
        headers={"authorization": f"Bearer {TOKEN}"},
        timeout=10,
    ) as streaming:
        assert streaming.status_code == 200
        first = next(streaming.iter_raw())  # output is flowing: the lease is held
        assert b"[DONE]" not in first, "the stream ended before the kill"
        # An error event here (an upstream timeout on a starved machine) means the
        # gateway already finalized the turn and released the lease.
        assert b'"error":' not in first, f"the stream failed before the kill: {first[:300]!r}"
        doomed.kill()  # SIGKILL: no finalize, no cleanup
        doomed.wait(10)
        return streaming.headers["x-orca-request-id"]


def test_a_killed_gateways_lane_serves_again_within_the_lease(
    paced_sim: Sim, tmp_path: Path
) -> None:
    """Issue #27: the lane of a gateway killed mid-turn answered 409 on every
    instance until the 1,800 s lane TTL. Now its lease lapses within
    `lease_seconds` (the holder stopped renewing it) and another instance takes
    the lane over; the binding keeps its TTL."""
    lanes = tmp_path / "lanes.db"
    migrate(lanes)
    tiers = {"backend": "sqlite", "sqlite_path": str(lanes)}
    env = {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_LEASE_SECONDS": str(LEASE)}
    # the survivor shares the SQLite file, as a second instance or a restart would
    with gateway(paced_sim.url, env=env, session_tiers=tiers) as survivor:
        doomed, url, log = serve_doomed(tmp_path, paced_sim.url, tiers, env)  # see DOOMED_AFTER
        try:
            wait_ready(url, doomed, log)
            lane = session()
            long_turn = turn(
                "auto:coding",
                user("Tell it all [[sim:output=1500]]"),
                stream=True,
                **managed(lane, MINI),
            )
            request_id = kill_mid_stream(doomed, url, long_turn)
            killed = time.time()
            held = survivor.lane(lane)
            assert held is not None and held.lease_expires_at is not None
            assert held.lease_owner is not None
            assert held.lease_owner.endswith(f"/{request_id}")  # the dead request owns it
            assert f":{doomed.pid}:" in held.lease_owner  # on the dead instance
            assert held.expires_at >= killed + 1000  # the binding lives the 1,800 s TTL
            expires = held.lease_expires_at
            assert expires <= killed + LEASE + 0.5  # short: no more renewals

            # another turn of the lane, asking for a different model
            next_turn = turn("auto:coding", user("Short [[sim:output=2]]"), **managed(lane, GPT5))
            busy = chat(survivor.url, next_turn)
            assert time.time() < expires, "the machine was too slow to see the held lease"
            assert busy.status_code == 409 and error_code(busy) == "session_tier_busy"
            while (reply := chat(survivor.url, next_turn)).status_code == 409:
                assert time.time() < expires + 3, "the dead request's lease never lapsed"
                time.sleep(0.1)
            served_after = time.time() - killed
            assert reply.status_code == 200, reply.text
            assert served_after < LEASE + 3
            # the binding survived the takeover: the dead turn was ambiguous, so the
            # new approval waits for a safe boundary and the bound model serves
            assert reply.headers["x-orca-resolved-model"] == "openai/gpt-5-mini"
            taken = survivor.lane(lane)
            assert taken is not None and taken.tools_unknown and taken.lease_id is None
            print(f"lane served again {served_after:.2f}s after kill -9 (lease {LEASE}s)")
        finally:
            doomed.kill()
            doomed.wait(10)


def test_an_operator_releases_a_killed_gateways_lane_at_once(
    paced_sim: Sim, tmp_path: Path
) -> None:
    """The default 60 s lease, and an operator who will not wait: the admin API
    releases the dead gateway's lane, audited, and the next turn is served."""
    lanes = tmp_path / "lanes.db"
    migrate(lanes)
    tiers = {"backend": "sqlite", "sqlite_path": str(lanes)}
    env = {"SESSION_TIER_MODE": "sticky"}
    server = {"cooldown_seconds": 5, "max_attempts": 3, "admin_token": ADMIN}
    with gateway(paced_sim.url, env=env, session_tiers=tiers, server=server) as survivor:
        doomed, url, log = serve_doomed(tmp_path, paced_sim.url, tiers, env)  # see DOOMED_AFTER
        try:
            wait_ready(url, doomed, log)
            lane = session()
            long_turn = turn(
                "auto:coding",
                user("Tell it all [[sim:output=1500]]"),
                stream=True,
                **managed(lane, MINI),
            )
            request_id = kill_mid_stream(doomed, url, long_turn)
            held = survivor.lane(lane)
            assert held is not None and held.lease_owner is not None, "no lease was taken"
            assert f":{doomed.pid}:" in held.lease_owner, "the stream was not the doomed one's"
            quick = turn("auto:coding", user("Short [[sim:output=2]]"), **managed(lane, MINI))
            assert chat(survivor.url, quick).status_code == 409  # a lease of up to 60 s
            admin = {"authorization": f"Bearer {ADMIN}", "x-tiergate-actor": "oncall-amy"}
            base = f"{survivor.url}/admin/api/sessions/default/{lane}/lanes"
            (view,) = httpx.get(base, headers=admin, timeout=10).json()["lanes"]
            assert view["leased"] and view["lease_owner"].endswith(f"/{request_id}")
            released = httpx.post(f"{base}/main/release", headers=admin, timeout=10)
            assert released.status_code == 200, released.text
            (done,) = released.json()["released"]
            assert done["was_leased"] and done["lease_owner"] == view["lease_owner"]
            assert resolved(chat(survivor.url, quick)) == "openai/gpt-5-mini"  # at once
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
