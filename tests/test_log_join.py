"""One session joins across the access log line, the audit events and the usage
rows: all three carry the same session_hash (the session's scope, never the raw
id), through a real gateway on the simulator."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from admin_support import (
    STRONG,
    WEAK,
    AdminClient,
    admin_config,
    chat,
    database,
    escalating_router,
    gateway,
    poll_items,
)
from servers import ServerThread
from tiergate.routing.tier_state import session_hash
from tiergate.sim.app import create_sim_app


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerThread, AdminClient]]:
    """One gateway on the simulator, on SQLite and on PostgreSQL."""
    pg = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    folder = tmp_path_factory.mktemp("join")
    with (
        database(request.param, folder, pg) as db,
        ServerThread(create_sim_app()) as sim,
        gateway(admin_config(sim.url, db, routers=[escalating_router("esc")])) as pair,
    ):
        yield pair


def _access_line(caplog: pytest.LogCaptureFixture, rid: str) -> logging.LogRecord:
    """The request's access log line. A served 200 is logged once its reply is sent
    (gateway/served.py), so the client may hold the reply a moment before it."""
    deadline = time.monotonic() + 5
    while True:
        lines = [x for x in caplog.records if x.name == "tiergate.access" and x.request_id == rid]
        if lines or time.monotonic() > deadline:
            [line] = lines
            return line
        time.sleep(0.01)


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
    line = _access_line(caplog, rid)
    shash = line.session_hash
    assert isinstance(shash, str) and len(shash) == 32
    assert (line.path, line.tier, line.router) == ("/v1/chat/completions", "strong", "esc")

    [usage] = [u for u in poll_items(admin, f"/usage?session={shash}", 1) if u["request_id"] == rid]
    assert usage["session_hash"] == shash and usage["tier"] == "strong"
    [event] = poll_items(admin, f"/audit?session={shash}&event=escalated", 1)
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


def test_recent_sessions_name_workspace_routers_models_tiers_and_counts(
    env: tuple[ServerThread, AdminClient],
) -> None:
    gw, admin = env
    for _ in range(2):
        assert chat(gw, "orcarouter/esc", "Hi", session="recent-1").status_code == 200
    strong = chat(
        gw, "orcarouter/esc", "Hard", session="recent-1", headers={"X-OrcaRouter-Tier": "strong"}
    )
    assert strong.status_code == 200
    assert chat(gw, "openai/gpt-5-mini", "Hi", session="recent-2").status_code == 200
    scope = admin.get("/sessions/default/recent-1?router=esc").json()["scope"]
    items = admin.get("/session-scopes?limit=50").json()["items"]
    assert items[0]["last_seen"] >= items[-1]["last_seen"]  # newest session first
    by_hash = {s["session_hash"]: s for s in items}
    s = by_hash[scope]
    assert (s["workspace"], s["routers"], s["requests"], s["strong_requests"]) == (
        "default",
        ["esc"],
        3,
        1,
    )
    assert (s["last_router"], s["last_tier"], s["last_model"]) == ("esc", "strong", STRONG)
    assert set(s["models"]) == {WEAK, STRONG} and s["errors"] == 0
    assert s["first_seen"] < s["last_seen"] and s["cost_usd"] > 0
    direct = admin.get("/sessions/default/recent-2").json()["scope"]
    assert by_hash[direct]["routers"] == [] and by_hash[direct]["last_model"] == WEAK
    # filters and bounds
    only = admin.get("/session-scopes?router=esc&limit=50").json()["items"]
    assert direct not in {x["session_hash"] for x in only} and scope in {
        x["session_hash"] for x in only
    }
    assert admin.get("/session-scopes?limit=1").json()["items"][0]["session_hash"] == direct
    assert admin.get("/session-scopes?workspace=other").json()["items"] == []
    assert admin.get("/session-scopes?limit=0").status_code == 400
    assert "recent-1" not in str(items)


def test_audit_rows_written_before_the_join_still_show_in_the_inspector(
    env: tuple[ServerThread, AdminClient],
) -> None:
    """Older audit rows carry session_hash(scope), a 24-hex hash of the scope."""
    gw, admin = env
    assert chat(gw, "orcarouter/esc", "Hi", session="legacy-1").status_code == 200
    scope = admin.get("/sessions/default/legacy-1?router=esc").json()["scope"]
    old = {
        "ts": time.time(),
        "event": "reset",
        "workspace": None,
        "router": "esc",
        "session_hash": session_hash(scope),
        "request_id": None,
        "trigger": "admin",
        "detail": {},
    }
    assert gw.loop is not None
    gw.loop.call_soon_threadsafe(gw.app.state.tiergate.recorder.record, "audit", old)
    deadline = time.monotonic() + 10
    while True:
        s = admin.get("/sessions/default/legacy-1?router=esc").json()
        if s["recent_events"] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert [e["session_hash"] for e in s["recent_events"]] == [session_hash(scope)]
