"""Session inspector and reset, audit and usage listings with CSV export, and the
dashboard's stats endpoints, over real traffic through the simulator."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator
from typing import Any

import pytest

from admin_support import (
    KEYS,
    STRONG,
    WEAK,
    AdminClient,
    admin_config,
    chat,
    database,
    error_of,
    escalating_router,
    gateway,
)
from servers import ServerThread
from tiergate.routing.affinity import key_fingerprint
from tiergate.sim.app import create_sim_app

LONG_SYSTEM = "You are a careful coding agent. " + " ".join(
    f"Rule {i}: keep functions small, name things clearly and test behaviour." for i in range(300)
)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """One gateway with traffic: an escalated-then-reset session, a capped
    router's denial, and a warm prompt-cache conversation. Every query runs on
    SQLite and on PostgreSQL."""
    pg = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    folder = tmp_path_factory.mktemp("records")
    with database(request.param, folder, pg) as db, ServerThread(create_sim_app()) as sim:
        routers = [
            escalating_router("esc"),
            escalating_router("capped", share_cap_percent=0),
            {"name": "coding", "allowed_models": ["openai/*"], "strategy": "cheapest"},
        ]
        with gateway(admin_config(sim.url, db, routers=routers)) as (gw, admin):
            started = time.time()
            r1 = chat(gw, "orcarouter/esc", "First", session="sess-1")
            r2 = chat(
                gw,
                "orcarouter/esc",
                "Harder",
                session="sess-1",
                headers={"X-OrcaRouter-Tier": "strong"},
            )
            assert r2.headers["x-orca-session-tier"] == "strong; reason=explicit"
            denied = chat(
                gw,
                "orcarouter/capped",
                "Please",
                session="sess-2",
                headers={"X-OrcaRouter-Tier": "strong"},
            )
            assert denied.headers["x-orca-session-tier"] == "base; reason=denied:share_cap"
            convo = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "Hi"}]
            warm = [chat(gw, "orcarouter/coding", session="warm", messages=convo) for _ in range(2)]
            assert warm[1].json()["usage"]["prompt_tokens_details"]["cached_tokens"] > 1000
            yield {
                "gw": gw,
                "admin": admin,
                "started": started,
                "ids": [r1.headers["x-orca-request-id"], r2.headers["x-orca-request-id"]],
            }


# ---- sessions -------------------------------------------------------------------------------


def test_session_inspector_shows_tier_state_pins_and_decisions(env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    r = admin.get("/sessions/default/sess-1?router=esc")
    assert r.status_code == 200
    s = r.json()
    assert (s["workspace"], s["session_id"]) == ("default", "sess-1")
    assert len(s["scope"]) == 32 and s["session_hash"] == s["scope"]  # the usage rows' hash
    (router,) = s["routers"]
    state = router["tier_state"]
    assert (router["router"], router["escalation_mode"]) == ("esc", "manual")
    assert (state["tier"], state["trigger"], state["escalations_used"]) == ("strong", "explicit", 1)
    assert state["ratchets_left"] == 0 and "seen_turns" not in state
    assert router["model_pins"] == {"base": WEAK, "strong": STRONG}
    assert set(s["channel_pins"]) == {WEAK, STRONG}
    assert [e["event"] for e in s["recent_events"]] == ["escalated"]
    assert {q["request_id"] for q in s["recent_requests"]} == set(env["ids"])
    by_scope = admin.get(f"/session-scopes/{s['scope']}?router=esc").json()
    assert by_scope["routers"] == s["routers"]
    # every router when none is named; the raw id never appears in stored rows
    assert len(admin.get("/sessions/default/sess-1").json()["routers"]) == 3
    assert "sess-1" not in str(s["recent_events"]) + str(s["recent_requests"])


def test_session_lookup_errors(env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    assert error_of(admin.get("/sessions/nowhere/sess-1"))["code"] == "not_found"
    assert admin.get("/sessions/default/sess-1?router=ghost").status_code == 404
    assert admin.get("/session-scopes/not-hex").status_code == 400
    unknown = admin.get("/sessions/default/never-seen?router=esc").json()
    assert unknown["routers"][0]["tier_state"] is None


def test_reset_is_audited_and_does_not_refund_the_session_cap(env: dict[str, Any]) -> None:
    gw, admin = env["gw"], env["admin"]
    r = admin.post("/sessions/default/sess-1/reset?router=esc", headers={"X-Tiergate-Actor": "bob"})
    assert r.status_code == 200
    assert r.json()["routers"] == [
        {
            "router": "esc",
            "changed": True,
            "tier_before": "strong",
            "tier_after": "base",
            "escalations_used": 1,
        }
    ]
    r = chat(gw, "orcarouter/esc", "Again", session="sess-1")
    assert (r.headers["x-orca-session-tier"], r.headers["x-orca-resolved-model"]) == ("base", WEAK)
    r = chat(
        gw,
        "orcarouter/esc",
        "Strong please",
        session="sess-1",
        headers={"X-OrcaRouter-Tier": "strong"},
    )
    assert r.headers["x-orca-session-tier"] == "base; reason=denied:session_cap"
    resets = admin.get("/audit?event=reset&router=esc").json()["items"]
    assert len(resets) == 1
    assert (resets[0]["trigger"], resets[0]["detail"]["actor"]) == ("admin", "bob")
    assert resets[0]["detail"]["tier_before"] == "strong"
    nothing = admin.post("/sessions/default/never-seen/reset?router=esc").json()
    assert nothing["routers"][0]["changed"] is False
    assert admin.post("/sessions/default/sess-1/reset?router=coding").status_code == 409


def test_quality_gate_and_shadow_queries_on_a_router_without_labels(env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    (q,) = admin.get("/stats/quality?router=esc").json()["routers"]
    assert q["precision"] is None and q["gate"]["labels"] == 0
    assert q["escalation_latency"]["feedback"]["sessions_escalated"] == 1
    assert q["escalation_latency"]["feedback"]["sessions_measured"] == 0  # nobody rated
    assert admin.get("/shadow").json()["items"] == []
    gate = admin.get("/routers/esc/gate").json()
    assert gate["open"] is False and gate["live_percent"] == 0  # manual: nothing auto


# ---- audit and usage -----------------------------------------------------------------------------


def test_audit_filters(env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    esc = admin.get("/audit?router=esc&event=escalated").json()["items"]
    assert len(esc) == 1 and esc[0]["trigger"] == "explicit"
    assert esc[0]["detail"]["header"] == "strong; reason=explicit"
    both = admin.get("/audit?event=escalated,denied_cap").json()["items"]
    assert {e["event"] for e in both} >= {"escalated", "denied_cap"}
    assert all(e["event"] in ("escalated", "denied_cap") for e in both)
    assert admin.get("/audit?workspace=default&event=escalated").json()["items"] == esc
    assert esc[0]["workspace_name"] == "default"  # the row itself holds the workspace id
    assert admin.get("/audit?workspace=other&event=escalated").json()["items"] == []
    assert admin.get(f"/audit?until={env['started']}").json()["items"] == []
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(env["started"] - 1))
    assert admin.get(f"/audit?since={iso}Z&event=escalated").json()["items"] == esc
    assert len(admin.get("/audit?limit=1").json()["items"]) == 1
    assert admin.get("/audit?since=yesterday").status_code == 400
    assert admin.get("/audit?limit=0").status_code == 400
    assert admin.get("/audit?format=xml").status_code == 400


def test_usage_filters_and_csv_export(env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    rows = admin.get("/usage?router=esc&tier=strong").json()["items"]
    assert [r["model"] for r in rows] == [STRONG]
    assert admin.get("/usage?status=200&model=openai/gpt-5-mini").json()["items"]
    assert admin.get("/usage?status=abc").status_code == 400
    r = admin.get("/usage?router=esc&format=csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert r.headers["content-disposition"].startswith('attachment; filename="tiergate-usage-')
    table = list(csv.DictReader(io.StringIO(r.text)))
    assert len(table) == len(admin.get("/usage?router=esc").json()["items"]) >= 3
    assert {"request_id", "cost_usd", "cache_read_tokens", "tier"} <= set(table[0])
    audit_csv = admin.get("/audit?format=csv&event=escalated").text
    (row,) = list(csv.DictReader(io.StringIO(audit_csv)))
    assert '"header": "strong; reason=explicit"' in row["detail"].replace('":"', '": "')


# ---- stats ----------------------------------------------------------------------------------


def test_traffic_by_router_and_tier(env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    stats = admin.get("/stats/traffic?router=esc&bucket=minute").json()
    assert stats["bucket_seconds"] == 60
    by_tier = {s["tier"]: s for s in stats["series"]}
    assert by_tier["strong"]["requests"] == 1 and by_tier["base"]["requests"] >= 2
    assert by_tier["strong"]["spend_usd"] > 0
    point = by_tier["strong"]["points"][0]
    assert point["t"] % 60 == 0 and point["t"] <= time.time()
    assert admin.get("/stats/traffic?bucket=week").status_code == 400
    assert admin.get("/stats/traffic?bucket=minute&since=0").status_code == 400  # too many points
    assert admin.get("/stats/traffic?since=10&until=5").status_code == 400


def test_share_against_cap(env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    routers = {r["router"]: r for r in admin.get("/stats/share").json()["routers"]}
    esc = routers["esc"]
    assert esc["strong_requests"] == 1 and esc["requests"] >= 2
    assert esc["cap_percent"] == 20 and esc["basis"] == "requests"
    assert esc["utilisation"] == pytest.approx(esc["share"] * 100 / 20)
    assert esc["warming_up"] is True and esc["capped"] is False  # below 20 requests
    assert routers["capped"]["capped"] is True  # a cap of 0 disables escalation
    assert "coding" not in routers  # escalation off


def test_escalations_by_trigger_and_denials_by_reason(env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    stats = admin.get("/stats/escalations").json()
    items = {(i["router"], i["event"], i["trigger"]): i["count"] for i in stats["items"]}
    assert items[("esc", "escalated", "explicit")] == 1
    assert items[("capped", "denied_cap", "explicit")] == 1
    assert {"router": "capped", "reason": "share_cap", "count": 1} in stats["denials"]


def test_cache_hit_rate_per_key_and_savings(env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    channels = {c["channel"]: c for c in admin.get("/stats/cache").json()["channels"]}
    oa = channels["oa"]
    assert 0 < oa["hit_rate"] < 1
    warm_key = max(oa["keys"], key=lambda k: k["cache_read_tokens"])
    assert warm_key["hit_rate"] > 0.3
    assert warm_key["fingerprint"] == key_fingerprint(KEYS["oa"][warm_key["key_index"]])
    assert warm_key["masked"].startswith("sk-…")
    savings = admin.get("/stats/savings").json()
    assert savings["total"]["saved_usd"] > 0
    coding = next(i for i in savings["items"] if i["router"] == "coding")
    assert coding["saved_usd"] == pytest.approx(coding["uncached_cost_usd"] - coding["cost_usd"])
    assert 0 < coding["saved_fraction"] < 1
