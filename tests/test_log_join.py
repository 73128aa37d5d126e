"""One session joins across the access log line, the audit events and the usage
rows: all three carry the same session_hash (the session's scope, never the raw
id), through a real gateway on the simulator."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from admin_support import AdminClient, admin_config, chat, escalating_router, gateway
from servers import ServerThread
from tiergate.sim.app import create_sim_app


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, AdminClient]]:
    db = str(tmp_path_factory.mktemp("join") / "tg.db")
    with (
        ServerThread(create_sim_app()) as sim,
        gateway(admin_config(sim.url, db, routers=[escalating_router("esc")])) as pair,
    ):
        yield pair


def _rows(admin: AdminClient, path: str, want: int) -> list[dict[str, Any]]:
    """The recorder writes in batches: poll until `want` rows show."""
    deadline = time.monotonic() + 10
    while True:
        items: list[dict[str, Any]] = admin.get(path).json()["items"]
        if len(items) >= want or time.monotonic() > deadline:
            return items
        time.sleep(0.1)


def test_access_log_audit_and_usage_share_the_session_hash(
    env: tuple[ServerThread, AdminClient], caplog: pytest.LogCaptureFixture
) -> None:
    gw, admin = env
    caplog.set_level(logging.INFO, logger="tiergate.access")
    r = chat(
        gw, "orcarouter/esc", "Harder", session="join-1", headers={"X-OrcaRouter-Tier": "strong"}
    )
    assert r.status_code == 200
    rid = r.headers["x-orca-request-id"]
    [line] = [x for x in caplog.records if x.name == "tiergate.access" and x.request_id == rid]
    shash = line.session_hash
    assert isinstance(shash, str) and len(shash) == 32
    assert (line.path, line.tier, line.router) == ("/v1/chat/completions", "strong", "esc")

    [usage] = [u for u in _rows(admin, f"/usage?session={shash}", 1) if u["request_id"] == rid]
    assert usage["session_hash"] == shash and usage["tier"] == "strong"
    [event] = _rows(admin, f"/audit?session={shash}&event=escalated", 1)
    assert event["session_hash"] == shash and event["request_id"] == rid
    # the session inspector lists both under the same hash, and never the raw id
    s = admin.get("/sessions/default/join-1?router=esc").json()
    assert s["scope"] == s["session_hash"] == shash
    assert [e["request_id"] for e in s["recent_events"]] == [rid]
    assert "join-1" not in caplog.text + str(usage) + str(event)


def test_a_refused_request_logs_its_path_and_session(
    env: tuple[ServerThread, AdminClient], caplog: pytest.LogCaptureFixture
) -> None:
    gw, _ = env
    caplog.set_level(logging.INFO, logger="tiergate.access")
    r = chat(gw, "orcarouter/nowhere", session="join-2")
    assert r.status_code == 404
    rid = r.headers["x-orca-request-id"]
    [line] = [x for x in caplog.records if x.name == "tiergate.access" and x.request_id == rid]
    assert line.path == "/v1/chat/completions" and line.status == 404
