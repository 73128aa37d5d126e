"""Where state lives (issue #27): admin-made state survives restarts and edited
seeds, key changes reach every instance at once, a failed start writes nothing.

Each test fails on the tree before the change: there virtual keys lived inside the
config document, an edited seed replaced it whole, a second instance learned of a
revocation only at its next config poll, and a busy port printed a traceback.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from admin_support import AdminClient, admin_config, chat, database, gateway
from servers import ServerThread
from tiergate.sim.app import create_sim_app


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


def issue_key(admin: AdminClient) -> dict[str, Any]:
    r = admin.post("/virtual-keys", json={"workspace": "default", "name": "ci bot"})
    assert r.status_code == 201, r.text
    return dict(r.json())


def served(gw: ServerThread, token: str) -> int:
    return chat(gw, "openai/gpt-5-mini", token=token).status_code


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_virtual_keys_and_admin_channels_survive_a_restart_with_an_edited_yaml(
    sim: ServerThread, tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    pg = request.getfixturevalue("postgres_url") if kind == "postgresql" else None
    with database(kind, tmp_path, pg) as db:
        doc = admin_config(sim.url, db)
        with gateway(doc) as (gw, admin):
            made = issue_key(admin)
            assert served(gw, made["token"]) == 200
            extra = dict(doc["channels"][0], name="admin-made")
            r = admin.post("/channels", json=extra)
            assert r.status_code in (200, 201), r.text
        edited = admin_config(sim.url, db)
        edited["workspaces"][0]["rate_limit_rpm"] = 5000  # the operator edits the file
        with gateway(edited) as (gw, admin):
            assert served(gw, made["token"]) == 200
            listed = admin.get("/virtual-keys", params={"workspace": "default"}).json()
            assert [k["id"] for k in listed["items"]] == [made["key"]["id"]]
            names = [c["name"] for c in admin.get("/config").json()["config"]["channels"]]
            assert "admin-made" in names
            live = admin.get("/config").json()["config"]["workspaces"][0]
            assert live["rate_limit_rpm"] == 5000  # the file's own edit wins


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_revoked_key_is_refused_by_another_instance_within_100_ms(
    sim: ServerThread, tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    pg = request.getfixturevalue("postgres_url") if kind == "postgresql" else None
    with database(kind, tmp_path, pg) as db:
        doc = admin_config(sim.url, db)
        doc["server"]["config_poll_seconds"] = 5.0  # key changes must not wait for this
        with gateway(doc) as (_, admin_a), gateway(doc) as (b, _):
            made = issue_key(admin_a)
            deadline = time.monotonic() + 2.0
            while served(b, made["token"]) != 200:
                assert time.monotonic() < deadline, "a new key never reached instance B"
            r = admin_a.post(f"/virtual-keys/{made['key']['id']}/revoke")
            assert r.status_code == 200, r.text
            revoked_at = time.monotonic()
            while served(b, made["token"]) != 401:
                assert time.monotonic() - revoked_at < 2.0, "B kept serving a revoked key"
            elapsed = time.monotonic() - revoked_at
            # 50 ms poll + one request round trip; margin for a loaded 2-core CI box
            assert elapsed < 0.25, f"refused {elapsed * 1000:.0f} ms after the revocation"


def test_a_busy_port_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "tiergate", "serve", "--port", str(port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": ":".join(sys.path)},
        )
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert f"port {port}" in lines[-1] and "already in use" in lines[-1]
    assert "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("*.db")), "a process that never bound its port wrote a db"


def _serve(folder: Path, port: int, token: str, admin: str) -> subprocess.Popen[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(folder),
        "PYTHONPATH": ":".join(sys.path),
        "TIERGATE_TOKEN": token,
        "TIERGATE_ADMIN_TOKEN": admin,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tiergate", "serve", "--port", str(port)],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_demo_started_twice_in_one_folder_leaves_the_first_one_whole(tmp_path: Path) -> None:
    """The issue's `make run` twice: the second start used to seed its own config
    (new token, its own simulator) into the shared demo database, and the running
    demo applied it within a second. Now it fails on the port and touches nothing."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    token, admin = "tg-demo-first-" + "a" * 16, "tga-demo-first-" + "b" * 16
    first = _serve(tmp_path, port, token, admin)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the first demo never answered"
            time.sleep(0.1)
        keys = AdminClient(base, admin)
        made = issue_key(keys)
        body = {"model": "orcarouter/auto", "messages": [{"role": "user", "content": "hi"}]}

        def status(bearer: str) -> int:
            headers = {"authorization": f"Bearer {bearer}"}
            return httpx.post(f"{base}/v1/chat/completions", json=body, headers=headers).status_code

        assert status(token) == 200 and status(made["token"]) == 200
        second = _serve(tmp_path, port, "tg-demo-second-" + "c" * 16, "tga-demo-x" + "d" * 16)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 1 and "already in use" in err
        time.sleep(2.0)  # well past the config poll that used to apply the second seed
        assert status(token) == 200, "the first demo's printed token stopped working"
        assert status(made["token"]) == 200, "the admin-made key was lost"
        listed = keys.get("/virtual-keys", params={"workspace": "default"}).json()
        assert [k["id"] for k in listed["items"]] == [made["key"]["id"]]
    finally:
        first.terminate()
        first.wait(timeout=30)
