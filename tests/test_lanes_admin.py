"""The lane admin endpoints (#27): list a session's lanes, release one, 404 and
400 as the admin API answers them, and the `lane_released` audit event; lane
turns during admin config edits (#28)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from admin_support import admin_config, gateway
from lanes_http_support import MINI, chat, managed, session, sim_server, turn, user
from tiergate.lanes import MemoryLaneStore


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


class SlowStore(MemoryLaneStore):
    """Lane writes take 50 ms, so a release that lags the reply shows as a 409."""

    async def swap(self, *args: Any, **kwargs: Any) -> bool:
        await asyncio.sleep(0.05)
        return await super().swap(*args, **kwargs)


def test_lane_turns_during_config_edits_never_get_409(tmp_path: Path) -> None:
    """Issue #28: a lane request made during an admin config edit must succeed.
    Sequential turns of one lane (streamed and not, some cut mid-stream, as an
    edit that breaks a channel would) run while another client keeps editing the
    config, the lane's own router included (a new lane revision)."""
    with sim_server() as sim:
        doc = admin_config(sim.url, str(tmp_path / "tg.db"))
        doc["session_tiers"] = {"mode": "sticky"}
        doc["server"].update(cooldown_seconds=0, max_attempts=1)
        with gateway(doc) as (gw, admin):
            gw.app.state.tiergate.gateway.lanes.tiers.store = SlowStore()
            stop = threading.Event()
            edits: list[int] = []

            def edit() -> None:
                i = 0
                while not stop.is_set():
                    if i % 2:
                        t1 = 0.2 + (i % 4) * 0.01
                        r = admin.patch("/routers/coding", json={"thresholds": {"t1": t1}})
                    else:
                        r = admin.patch("/channels/oa", json={"priority": i % 3})
                    edits.append(r.status_code)
                    i += 1

            editor = threading.Thread(target=edit)
            editor.start()
            lane, codes, cuts = session(), [], 0
            try:
                for i in range(24):
                    if i % 6 == 4:  # a streamed turn cut mid-reply
                        sim.fault(kind="stream_error", status=500, after_chunks=2, count=1)
                    text = user(f"Turn {i} [[sim:output=20]]")
                    body = turn("auto:coding", text, stream=i % 2 == 0, **managed(lane, MINI))
                    r = chat(gw.url, body)
                    codes.append(r.status_code)
                    cuts += b'"error"' in r.content
            finally:
                stop.set()
                editor.join()
            assert len(edits) >= 4 and set(edits) == {200}
            assert set(codes) == {200}, codes
            assert cuts == 4
