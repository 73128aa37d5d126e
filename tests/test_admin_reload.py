"""Live reload across instances: two gateways sharing Redis (the published config
version) and one SQLite database (the stored versions). A change made on one
applies on the other within a poll interval; session state survives reloads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from admin_support import STRONG, WEAK, AdminClient, admin_config, chat, escalating_router, gateway
from servers import ServerThread
from tiergate.sim.app import create_sim_app
from tiergate.state.redis import RedisStore


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


@pytest.fixture
def fleet(
    sim: ServerThread, tmp_path: Path, redis_url: str
) -> Iterator[tuple[tuple[ServerThread, AdminClient], tuple[ServerThread, AdminClient]]]:
    prefix = f"test:{uuid4().hex}:"
    doc = admin_config(
        sim.url,
        str(tmp_path / "shared.db"),
        state={"backend": "redis", "url": redis_url, "key_prefix": prefix},
        routers=[escalating_router("esc")],
    )
    try:
        with gateway(doc) as a, gateway(doc) as b:
            yield a, b
    finally:
        store = RedisStore(redis_url, key_prefix=prefix)
        asyncio.run(_cleanup(store))


async def _cleanup(store: RedisStore) -> None:
    await store.delete_prefix()
    await store.close()


def eventually(check: Callable[[], Any], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def test_a_change_on_one_instance_applies_on_the_other(fleet: Any) -> None:
    (gw_a, admin_a), (gw_b, admin_b) = fleet
    assert admin_a.get("/config").json()["version"] == admin_b.get("/config").json()["version"]
    assert chat(gw_b, WEAK).status_code == 200

    assert admin_a.post("/channels/oa/disable").status_code == 200
    eventually(lambda: admin_b.get("/channels/oa").json()["enabled"] is False)
    assert chat(gw_b, WEAK).status_code == 503  # B routes by the new config, not just shows it

    version = admin_b.post("/channels/oa/enable").json()["version"]
    admin_b.post("/channels/oa/drain")
    eventually(lambda: admin_a.get("/config").json()["version"] == version + 1)
    oa = admin_a.get("/channels/oa").json()
    assert (oa["enabled"], oa["weight"]) == (True, 0)
    assert chat(gw_a, WEAK).status_code == 200


def test_session_tier_and_pins_survive_a_reload(fleet: Any) -> None:
    (gw_a, admin_a), (gw_b, admin_b) = fleet
    r = chat(gw_b, "orcarouter/esc", session="keep-me", headers={"X-OrcaRouter-Tier": "strong"})
    assert r.headers["x-orca-session-tier"] == "strong; reason=explicit"
    admin_a.patch("/routers/esc", json={"thresholds": {"t1": 0.3}})
    eventually(lambda: admin_b.get("/routers/esc").json()["thresholds"]["t1"] == 0.3)
    session = admin_b.get("/sessions/default/keep-me?router=esc").json()
    (router,) = session["routers"]
    assert router["tier_state"]["tier"] == "strong"
    assert router["model_pins"]["strong"] == STRONG
    r = chat(gw_a, "orcarouter/esc", session="keep-me")
    assert (r.headers["x-orca-session-tier"], r.headers["x-orca-resolved-model"]) == (
        "strong",
        STRONG,
    )


def test_concurrent_changes_on_two_instances_both_land(fleet: Any) -> None:
    (_, admin_a), (_, admin_b) = fleet
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        fa = pool.submit(admin_a.patch, "/channels/an", json={"priority": 7})
        fb = pool.submit(admin_b.patch, "/channels/ge", json={"priority": 9})
        assert fa.result().status_code == 200 and fb.result().status_code == 200
    for admin in (admin_a, admin_b):

        def caught_up(admin: AdminClient = admin) -> bool:
            return bool(admin.get("/config").json()["version"] == 3)

        eventually(caught_up)
        channels = {c["name"]: c["priority"] for c in admin.get("/channels").json()["items"]}
        assert (channels["an"], channels["ge"]) == (7, 9)
