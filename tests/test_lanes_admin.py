"""The lane admin endpoints (#27): list a session's lanes, release one, 404 and
400 as the admin API answers them, and the `lane_released` audit event."""

from __future__ import annotations

from pathlib import Path

from admin_support import admin_config, gateway
from lanes_http_support import MINI, chat, managed, session, sim_server, turn, user


def test_release_lists_audits_and_refuses_what_is_absent(tmp_path: Path) -> None:
    with sim_server() as sim:
        doc = admin_config(sim.url, str(tmp_path / "tg.db"))
        doc["session_tiers"] = {"mode": "sticky"}
        with gateway(doc) as (gw, admin):
            lane = session()
            ok = chat(
                gw.url, turn("auto:coding", user("Hi [[sim:output=2]]"), **managed(lane, MINI))
            )
            assert ok.status_code == 200, ok.text
            base = f"/sessions/default/{lane}/lanes"
            listed = admin.get(base).json()
            assert listed["enabled"] and listed["lease_seconds"] == 60
            (view,) = listed["lanes"]
            assert (view["lane"], view["kind"], view["leased"]) == ("main", "managed", False)
            assert view["approved_model"] == MINI[0]
            r = admin.post(f"{base}/main/release?forget=true", headers={"X-Tiergate-Actor": "amy"})
            assert r.status_code == 200, r.text
            (done,) = r.json()["released"]
            assert done["forgot"] and not done["was_leased"]
            assert admin.get(base).json()["lanes"] == []
            assert admin.post(f"{base}/main/release").status_code == 404  # gone now
            assert admin.post(f"{base}/aux/release").status_code == 404
            assert admin.post(f"/sessions/nobody/{lane}/lanes/main/release").status_code == 404
            assert admin.post(f"{base}/sideways/release").status_code == 400
            assert admin.post(f"{base}/main/release?kind=other").status_code == 400
            assert admin.post(f"{base}/main/release?forget=maybe").status_code == 400
            (event,) = admin.get("/audit?event=lane_released").json()["items"]
            assert event["trigger"] == "admin" and event["detail"]["actor"] == "amy"
            assert event["detail"]["lane"] == "main" and event["detail"]["forget"]
            assert lane not in str(event)  # the raw session id is not stored


def test_with_session_tiers_off_there_is_no_lane(tmp_path: Path) -> None:
    with sim_server() as sim, gateway(admin_config(sim.url, None)) as (_, admin):
        assert admin.get("/sessions/default/s1/lanes").json() == {
            "workspace": "default",
            "session_id": "s1",
            "enabled": False,
            "lanes": [],
        }
        assert admin.post("/sessions/default/s1/lanes/main/release").status_code == 404
