"""Virtual keys: issued, listed and revoked through the admin API, hashed at rest,
with per-key rate limits and daily/monthly budgets on top of the workspace's,
followed by every instance; the YAML tokens keep working (docs/virtual-keys.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from admin_support import AdminClient, admin_config, chat, gateway
from servers import TOKEN, ServerThread
from tiergate.config_load import parse_config
from tiergate.gateway.auth import TokenTable
from tiergate.gateway.limits import seconds_to_next_month
from tiergate.sim.app import create_sim_app
from tiergate.virtual_keys_store import (
    MemoryKeyRepository,
    VirtualKey,
    VirtualKeys,
    token_digest,
)


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


@pytest.fixture
def env(sim: ServerThread, tmp_path: Path) -> Iterator[dict[str, Any]]:
    db = tmp_path / "tg.db"
    with gateway(admin_config(sim.url, str(db))) as (gw, admin):
        yield {"gw": gw, "admin": admin, "db": db, "doc": admin_config(sim.url, str(db))}


def create(admin: AdminClient, **body: Any) -> dict[str, Any]:
    r = admin.post("/virtual-keys", json={"workspace": "default", **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


def served(gw: ServerThread, token: str) -> int:
    return chat(gw, "openai/gpt-5-mini", token=token).status_code


def until(cond: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


# ---- pure ---------------------------------------------------------------------------------


async def test_a_key_authenticates_as_its_workspace_with_its_own_limits() -> None:
    cfg = parse_config(
        {"workspaces": [{"name": "team", "tokens": ["tg-yaml-token"], "rate_limit_rpm": 100}]}
    )
    secret = b"k" * 32
    keys = VirtualKeys(MemoryKeyRepository(), secret)
    for i, revoked in ((1, None), (2, 1.0)):
        token = f"tgk-test-{i}"
        await keys.create(
            VirtualKey(
                id=f"vk_{i}" + "0" * 15,
                workspace="team",
                token_hash=token_digest(secret, token),
                budget_usd_per_month=5,
                revoked=revoked,
            )
        )
    table = TokenTable(cfg.workspaces, keys)
    yaml_ws = table.lookup("tg-yaml-token")
    assert yaml_ws is not None and yaml_ws.key_id is None  # the YAML list keeps working
    ws = table.lookup("tgk-test-1")
    assert ws is not None and ws.name == "team" and ws.key_id == "vk_1" + "0" * 15
    assert ws.limits.rate_limit_rpm == 100 and ws.key_limits.budget_usd_per_month == 5
    assert table.lookup("tgk-test-2") is None  # revoked
    # a config reload keeps the live keys
    assert table.with_workspaces(cfg.workspaces).lookup("tgk-test-1") is not None


def test_the_month_resets_on_the_first() -> None:
    dec_31 = 1798761600.0 - 3600  # 2026-12-31 23:00 UTC (2027-01-01 is 1798761600)
    assert seconds_to_next_month(dec_31) == 3600


# ---- over HTTP ----------------------------------------------------------------------------


def test_create_use_list_and_revoke(env: dict[str, Any]) -> None:
    gw, admin = env["gw"], env["admin"]
    made = create(admin, name="ci bot")
    token, key = made["token"], made["key"]
    assert token.startswith("tgk-") and key["prefix"] == token[:10] and key["active"]
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=token, max_retries=0)
    reply = client.chat.completions.create(
        model="openai/gpt-5-mini", messages=[{"role": "user", "content": "Hi"}]
    )
    assert reply.choices[0].message.content
    assert served(gw, TOKEN) == 200  # the workspace's YAML token still works

    listed = admin.get("/virtual-keys").json()["items"]
    assert [k["id"] for k in listed] == [key["id"]] and token not in str(listed)
    config = admin.get("/config").json()
    assert token not in str(config) and "sha256" not in str(config)
    # at rest: the database holds the key's hash, never the token
    assert token.encode() not in env["db"].read_bytes()

    revoked = admin.post(f"/virtual-keys/{key['id']}/revoke")
    assert revoked.status_code == 200 and revoked.json()["key"]["active"] is False
    assert served(gw, token) == 401
    assert admin.get("/virtual-keys").json()["items"][0]["revoked"] is not None
    assert admin.post("/virtual-keys/vk_0000000000000000/revoke").status_code == 404


def test_the_access_log_names_the_key_never_the_token(
    env: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tiergate.access")
    made = create(env["admin"], name="logged")
    r = chat(env["gw"], "openai/gpt-5-mini", token=made["token"])
    assert r.status_code == 200

    def line() -> list[logging.LogRecord]:
        rid = r.headers["x-orca-request-id"]
        return [x for x in caplog.records if getattr(x, "request_id", None) == rid]

    until(lambda: bool(line()))
    assert line()[0].virtual_key == made["key"]["id"]
    assert made["token"] not in caplog.text


def test_bad_requests_are_refused_with_every_problem(env: dict[str, Any]) -> None:
    admin = env["admin"]
    assert admin.post("/virtual-keys", json={"workspace": "nope"}).status_code == 404
    bad = admin.post("/virtual-keys", json={"workspace": "default", "rate_limit_rpm": 0})
    assert bad.status_code == 400 and "rate_limit_rpm" in bad.text
    assert admin.post("/virtual-keys", json={"workspace": "default", "x": 1}).status_code == 400


def test_a_keys_rate_limit_binds_the_key_not_its_workspace(env: dict[str, Any]) -> None:
    gw, admin = env["gw"], env["admin"]
    token = create(admin, rate_limit_rpm=2)["token"]
    if time.time() % 60 > 55:  # keep the three requests in one minute window
        time.sleep(6)
    assert [served(gw, token) for _ in range(3)] == [200, 200, 429]
    refused = chat(gw, "openai/gpt-5-mini", token=token)
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert int(refused.headers["retry-after"]) >= 1
    assert served(gw, TOKEN) == 200  # the workspace's other tokens are not limited


@pytest.mark.parametrize("budget", ["budget_usd_per_day", "budget_usd_per_month"])
def test_a_keys_budget_refuses_once_spent(env: dict[str, Any], budget: str) -> None:
    gw, admin = env["gw"], env["admin"]
    made = create(admin, **{budget: 0.000001})
    token, key_id = made["token"], made["key"]["id"]
    assert served(gw, token) == 200  # spend is checked before, charged after a reply
    spend = "spend_today_usd" if budget.endswith("day") else "spend_month_usd"

    def charged() -> bool:
        items = admin.get("/virtual-keys").json()["items"]
        return any(k["id"] == key_id and (k[spend] or 0) > 0 for k in items)

    until(charged)
    refused = chat(gw, "openai/gpt-5-mini", token=token)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "budget_exceeded"
    period = "Monthly" if budget.endswith("month") else "Daily"
    assert period in refused.json()["error"]["message"]
    assert served(gw, TOKEN) == 200


def test_a_keys_limits_bind_embeddings_too(sim: ServerThread, tmp_path: Path) -> None:
    doc = admin_config(sim.url, str(tmp_path / "tg.db"))
    doc["channels"].append(
        {
            "name": "emb",
            "type": "openai_compatible",
            "base_url": f"{sim.url}/v1",
            "keys": ["sk-emb"],
            "models": {"emb/small": {"upstream": "text-embedding-3-small"}},
        }
    )
    with gateway(doc) as (gw, admin):
        made = create(admin, rate_limit_rpm=1)
        token = made["token"]
        if time.time() % 60 > 55:  # keep both requests in one minute window
            time.sleep(6)

        def embed() -> int:
            r = httpx.post(
                f"{gw.url}/v1/embeddings",
                headers={"authorization": f"Bearer {token}"},
                json={"model": "emb/small", "input": "alpha"},
                timeout=10,
            )
            return r.status_code

        assert [embed(), embed()] == [200, 429]
        rows = admin.get("/usage", params={"virtual_key": made["key"]["id"]}).json()["items"]
        assert sorted(r["status"] for r in rows) == [200, 429]  # both name the key


def test_every_instance_follows_a_key_created_or_revoked_on_one(
    sim: ServerThread, tmp_path: Path
) -> None:
    doc = admin_config(sim.url, str(tmp_path / "shared.db"))
    with gateway(doc) as (_, admin_a), gateway(doc) as (b, _):
        made = create(admin_a, name="fleet")
        token = made["token"]
        until(lambda: served(b, token) == 200)
        admin_a.post(f"/virtual-keys/{made['key']['id']}/revoke")
        until(lambda: served(b, token) == 401)
