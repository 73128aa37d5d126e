"""Shadow labelling and the go-live gate: shadow decisions recorded with their
evidence, labelled through the API, precision computed, rollout refused until
the gate opens (or forced, audited), and precision shown next to escalation
latency."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from admin_support import (
    AdminClient,
    admin_config,
    chat,
    database,
    error_of,
    escalating_router,
    gateway,
)
from servers import ServerThread
from tiergate.sim.app import create_sim_app


def failing_turn(i: int) -> list[dict[str, Any]]:
    """A turn that reruns a failing build unchanged and gets the same error again:
    a request-side strike (repeated_failing_command)."""
    err = f"./pool/worker.go:{40 + i}:2: undefined: jobQueue\nexit status 2"
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Make the build pass."}]
    for x in "ab":
        call = {
            "id": f"c{i}{x}",
            "type": "function",
            "function": {"name": "run_command", "arguments": '{"cmd": "make"}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}{x}", "content": f"error: {err}"})
    return messages


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


@pytest.fixture
def shadowed(
    request: pytest.FixtureRequest, tmp_path: Path, sim: ServerThread
) -> Iterator[tuple[ServerThread, AdminClient]]:
    """A router in shadow (auto, rollout 0) with three shadow decisions recorded.
    SQLite unless a test asks for "postgresql" (indirect parametrization)."""
    kind = getattr(request, "param", "sqlite")
    pg = request.getfixturevalue("postgres_url") if kind == "postgresql" else None
    router = escalating_router(
        "canary", mode="auto", rollout_percent=0, strike_threshold=1, gate_min_labels=3
    )
    with database(kind, tmp_path, pg) as db:
        doc = admin_config(sim.url, db, routers=[router])
        with gateway(doc) as (gw, admin):
            for i in range(3):
                r = chat(gw, "orcarouter/canary", session=f"loop-{i}", messages=failing_turn(i))
                assert r.headers["x-orca-session-tier"] == "base"  # shadow switches nothing
            yield gw, admin


def test_shadow_decisions_carry_their_evidence(shadowed: tuple[ServerThread, AdminClient]) -> None:
    _, admin = shadowed
    items = admin.get("/shadow?router=canary").json()["items"]
    assert len(items) == 3
    for item in items:
        assert item["trigger"] == "strikes" and item["label"] is None
        ev = item["evidence"]
        assert ev["would_header"] == "strong; reason=strikes"
        assert ev["strike_count"] == 1 and ev["threshold"] == pytest.approx(0.55)
    assert admin.get("/shadow?labelled=true").json()["items"] == []
    assert admin.get("/shadow?labelled=maybe").status_code == 400


@pytest.mark.parametrize("shadowed", ["sqlite", "postgresql"], indirect=True)
def test_gate_refuses_rollout_until_precision_holds(
    shadowed: tuple[ServerThread, AdminClient],
) -> None:
    _, admin = shadowed
    ids = [i["id"] for i in admin.get("/shadow?router=canary").json()["items"]]
    go_live = {"escalation": {"rollout_percent": 10}}

    r = admin.patch("/routers/canary", json=go_live)
    assert r.status_code == 409
    err = error_of(r)
    assert err["code"] == "gate_closed" and err["type"] == "conflict_error"
    assert "0 of the 3 labelled" in err["message"] and "70%" in err["message"]

    labelled = admin.post(f"/shadow/{ids[0]}/label", json={"correct": True, "hard_turns_before": 2})
    assert labelled.status_code == 200
    assert labelled.json()["label"]["correct"] is True
    assert labelled.json()["gate"]["labels"] == 1
    admin.post(f"/shadow/{ids[1]}/label", json={"correct": True})
    gate = admin.post(f"/shadow/{ids[2]}/label", json={"correct": False}).json()["gate"]
    assert (gate["labels"], gate["correct"], gate["open"]) == (3, 2, False)  # 66.7 % < 70 %
    r = admin.patch("/routers/canary", json=go_live)
    assert r.status_code == 409 and "66.7%" in error_of(r)["message"]
    assert admin.get("/routers/canary").json()["escalation"]["rollout_percent"] == 0

    relabel = admin.post(f"/shadow/{ids[2]}/label", json={"correct": True, "note": "on reflection"})
    assert relabel.json()["gate"]["open"] is True  # the latest label wins
    r = admin.patch("/routers/canary", json=go_live)
    assert r.status_code == 200, r.text
    assert r.json()["router"]["live_percent"] == 10
    assert admin.get("/routers/canary/gate").json()["open"] is True
    # lowering needs no gate; shadow stays allowed
    assert (
        admin.patch("/routers/canary", json={"escalation": {"rollout_percent": 0}}).status_code
        == 200
    )


def test_force_overrides_a_closed_gate_and_is_audited(
    shadowed: tuple[ServerThread, AdminClient],
) -> None:
    _, admin = shadowed
    body = {"escalation": {"rollout_percent": 50}, "force": True}
    r = admin.patch("/routers/canary", json=body, headers={"X-Tiergate-Actor": "carol"})
    assert r.status_code == 200
    assert r.json()["router"]["escalation"]["rollout_percent"] == 50
    (event,) = admin.get("/audit?event=gate_forced").json()["items"]
    assert (event["router"], event["trigger"]) == ("canary", "force")
    detail = event["detail"]
    assert (detail["from_percent"], detail["to_percent"], detail["labels"]) == (0, 50, 0)
    assert detail["actor"] == "carol" and detail["version"] == r.json()["version"]
    assert admin.patch("/routers/canary", json={"force": "yes"}).status_code == 400


def test_new_auto_router_and_mode_switch_pass_the_gate(
    shadowed: tuple[ServerThread, AdminClient],
) -> None:
    _, admin = shadowed
    live = escalating_router("live", mode="auto")  # rollout 100 by default
    assert admin.post("/routers", json=live).status_code == 409
    shadow = escalating_router("quiet", mode="auto", rollout_percent=0)
    assert admin.post("/routers", json=shadow).status_code == 201
    manual = escalating_router("hands", mode="manual")
    assert admin.post("/routers", json=manual).status_code == 201
    r = admin.patch("/routers/hands", json={"escalation": {"mode": "auto"}})
    assert r.status_code == 409  # manual -> auto at rollout 100 goes live


def test_label_validation(shadowed: tuple[ServerThread, AdminClient]) -> None:
    _, admin = shadowed
    shadow_id = admin.get("/shadow").json()["items"][0]["id"]
    r = admin.post(
        f"/shadow/{shadow_id}/label", json={"correct": "yes", "hard_turns_before": -1, "extra": 1}
    )
    assert r.status_code == 400
    assert len(error_of(r)["problems"]) == 3
    assert admin.post("/shadow/999999/label", json={"correct": True}).status_code == 404
    assert admin.post("/shadow/abc/label", json={"correct": True}).status_code == 404
    config_event = admin.get("/audit?event=config_changed").json()["items"]
    non_shadow = admin.get("/audit").json()["items"]
    assert config_event == [] and non_shadow  # only shadow rows so far
    reset = admin.post("/sessions/default/loop-0/reset?router=canary").json()
    assert reset["routers"][0]["changed"] is True
    reset_id = admin.get("/audit?event=reset").json()["items"][0]["id"]
    assert admin.post(f"/shadow/{reset_id}/label", json={"correct": True}).status_code == 404


def test_quality_shows_precision_next_to_escalation_latency(
    shadowed: tuple[ServerThread, AdminClient],
) -> None:
    _, admin = shadowed
    ids = [i["id"] for i in admin.get("/shadow").json()["items"]]
    admin.post(f"/shadow/{ids[0]}/label", json={"correct": True, "hard_turns_before": 1})
    admin.post(f"/shadow/{ids[1]}/label", json={"correct": True, "hard_turns_before": 3})
    admin.post(f"/shadow/{ids[2]}/label", json={"correct": False})
    (q,) = admin.get("/stats/quality?router=canary").json()["routers"]
    assert q["precision"] == pytest.approx(2 / 3)
    assert q["gate"]["open"] is False and q["live_percent"] == 0
    assert q["escalation_latency"]["labels"] == {"labels": 2, "mean_hard_turns": 2.0}
    assert q["escalation_latency"]["feedback"] is None  # no client feedback yet


def test_a_fully_live_router_reads_live_not_a_closed_gate(
    tmp_path: Path, sim: ServerThread
) -> None:
    """Issue 28: the dashboard showed a red CLOSED gate for a router already live
    for every session. The gate only guards raising the rollout, so such a router
    reads `live`; a partial rollout and a shadow router still read their gate."""
    routers = [
        escalating_router("full", mode="auto"),  # rollout_percent 100, no labels
        escalating_router("half", mode="auto", rollout_percent=50),
        escalating_router("shadow", mode="auto", rollout_percent=0),
    ]
    with gateway(admin_config(sim.url, str(tmp_path / "tg.db"), routers=routers)) as (_, admin):
        quality = {q["router"]: q for q in admin.get("/stats/quality").json()["routers"]}
        assert quality["full"]["live_percent"] == 100
        full = quality["full"]["gate"]
        assert full["open"] is False and full["state"] == "live"  # no labels, yet live
        assert full["summary"].startswith("live for every session")
        assert quality["half"]["gate"]["state"] == "closed"
        assert quality["shadow"]["gate"]["state"] == "closed"
        gate = admin.get("/routers/full/gate").json()
        assert (gate["state"], gate["open"], gate["live_percent"]) == ("live", False, 100)
        assert admin.get("/routers/shadow/gate").json()["state"] == "closed"
