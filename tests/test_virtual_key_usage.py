"""Per-key usage through the real HTTP server: every request a virtual key
authenticates (served or refused, any inbound format) has a usage row naming the
key's public id, and GET /admin/api/virtual-keys/{id}/usage sums them per day.
The gateway starts on a database an older release created (no virtual_key
column) and migrates it at start-up, keeping the old rows. No response, and no
usage row, holds a token or its hash (docs/virtual-keys.md)."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from admin_support import WEAK, AdminClient, admin_config, chat, gateway
from db_support import OLD_ROWS, create_old_database
from servers import TOKEN, ServerThread
from tiergate.sim.app import create_sim_app

DAY = 86400


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


@pytest.fixture
def env(sim: ServerThread, tmp_path: Path) -> Iterator[dict[str, Any]]:
    db = tmp_path / "old.db"
    create_old_database(f"sqlite:///{db}")  # what the previous release left behind
    with gateway(admin_config(sim.url, str(db))) as (gw, admin):
        yield {"gw": gw, "admin": admin, "db": db}


def issue(admin: AdminClient, name: str) -> tuple[str, str]:
    r = admin.post("/virtual-keys", json={"workspace": "default", "name": name})
    assert r.status_code == 201, r.text
    return r.json()["token"], r.json()["key"]["id"]


def usage_rows(admin: AdminClient, **query: str) -> list[dict[str, Any]]:
    r = admin.get("/usage", params=query)
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


def test_rows_name_the_key_and_the_endpoint_sums_them(env: dict[str, Any]) -> None:
    gw, admin = env["gw"], env["admin"]
    token_a, key_a = issue(admin, "ci bot")
    token_b, key_b = issue(admin, "laptop")

    sdk = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=token_a, max_retries=0)
    for text in ("Hello there", "And again, a little longer this time"):
        reply = sdk.chat.completions.create(
            model=WEAK, messages=[{"role": "user", "content": text}]
        )
        assert reply.choices[0].message.content
    with sdk.chat.completions.create(
        model=WEAK, messages=[{"role": "user", "content": "Stream it"}], stream=True
    ) as stream:
        assert [c for c in stream]
    with pytest.raises(openai.APIStatusError) as refused:  # after authentication
        sdk.chat.completions.create(
            model="no-such/model", messages=[{"role": "user", "content": "x"}]
        )
    refused_status = refused.value.status_code
    assert 400 <= refused_status < 500

    claude = anthropic.Anthropic(base_url=gw.url, api_key=token_b, max_retries=0)
    message = claude.messages.create(
        model=WEAK, max_tokens=32, messages=[{"role": "user", "content": "Hi from B"}]
    )
    assert message.content
    assert chat(gw, WEAK, token=TOKEN).status_code == 200  # a YAML token: no key

    rows_a = usage_rows(admin, virtual_key=key_a)
    assert len(rows_a) == 4 and {r["virtual_key"] for r in rows_a} == {key_a}
    assert sorted(r["status"] for r in rows_a) == [200, 200, 200, refused_status]
    assert sum(r["stream"] for r in rows_a) == 1
    rows_b = usage_rows(admin, virtual_key=key_b)
    assert len(rows_b) == 1 and rows_b[0]["status"] == 200
    everything = usage_rows(admin, limit="100")
    yaml_rows = [r for r in everything if r["virtual_key"] is None and r["ts"] > OLD_ROWS[-1]["ts"]]
    assert len(yaml_rows) == 1  # the YAML token's request
    old = [r for r in everything if r["request_id"].startswith("old-")]
    assert len(old) == len(OLD_ROWS)  # the older release's rows survived the migration

    r = admin.get(f"/virtual-keys/{key_a}/usage")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["key"] == {
        "id": key_a,
        "workspace": "default",
        "name": "ci bot",
        "prefix": token_a[:10],
        "active": True,
    }
    assert body["bucket_seconds"] == DAY and len(body["points"]) == 1
    point = body["points"][0]
    assert point["t"] == int(time.time()) // DAY * DAY
    assert point["requests"] == 4 and point["errors"] == 1
    for name in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"):
        assert point[name] == sum(row[name] for row in rows_a), name
    assert point["input_tokens"] > 0 and point["output_tokens"] > 0
    assert point["cost_usd"] == pytest.approx(sum(row["cost_usd"] for row in rows_a))
    assert point["cost_usd"] > 0
    total = body["total"]
    assert total["requests"] == 4 and total["cost_usd"] == pytest.approx(point["cost_usd"])

    hourly = admin.get(f"/virtual-keys/{key_b}/usage", params={"bucket": "hour"}).json()
    assert hourly["bucket_seconds"] == 3600 and hourly["total"]["requests"] == 1
    past = admin.get(
        f"/virtual-keys/{key_a}/usage", params={"since": "2020-01-01", "until": "2020-01-02"}
    ).json()
    assert past["points"] == [] and past["total"]["requests"] == 0

    # never a secret: not the tokens, not their hashes, in any answer or usage row
    secrets = [token_a, token_b]
    secrets += [hashlib.sha256(t.encode()).hexdigest() for t in secrets]
    answers = [r.text, admin.get("/usage", params={"format": "csv"}).text, str(everything)]
    assert not [s for s in secrets for a in answers if s in a]
    with sqlite3.connect(env["db"]) as conn:
        stored = str(conn.execute("SELECT * FROM usage").fetchall())
    assert not [s for s in secrets if s in stored]


def test_refusals_and_bad_queries(env: dict[str, Any]) -> None:
    gw, admin = env["gw"], env["admin"]
    token, key = issue(admin, "limited")
    assert admin.get("/virtual-keys/vk_0000000000000000/usage").status_code == 404
    assert admin.get(f"/virtual-keys/{key}/usage", params={"bucket": "week"}).status_code == 400
    bad_window = admin.get(f"/virtual-keys/{key}/usage", params={"since": "9", "until": "1"})
    assert bad_window.status_code == 400
    assert httpx.get(f"{gw.url}/admin/api/virtual-keys/{key}/usage").status_code == 401
    # a revoked key's history stays readable; its refused attempts are not its rows
    assert chat(gw, WEAK, token=token).status_code == 200
    admin.post(f"/virtual-keys/{key}/revoke")
    assert chat(gw, WEAK, token=token).status_code == 401  # unauthenticated: no key known
    body = admin.get(f"/virtual-keys/{key}/usage").json()
    assert body["key"]["active"] is False and body["total"]["requests"] == 1


def test_the_endpoint_is_in_the_openapi_document(env: dict[str, Any]) -> None:
    doc = httpx.get(f"{env['gw'].url}/openapi.json").json()
    op = doc["paths"]["/admin/api/virtual-keys/{id}/usage"]["get"]
    assert {p["name"] for p in op["parameters"]} == {"id", "bucket", "since", "until"}
    assert next(p for p in op["parameters"] if p["name"] == "id")["schema"]["type"] == "string"
    usage_list = doc["paths"]["/admin/api/usage"]["get"]
    assert "virtual_key" in {p["name"] for p in usage_list["parameters"]}


def test_a_keys_own_limit_refusals_are_its_rows(env: dict[str, Any]) -> None:
    """A 429 from the key's rate limit (gateway/failures.py record_failure) is a row
    naming the key, counted as an error in its history."""
    gw, admin = env["gw"], env["admin"]
    r = admin.post("/virtual-keys", json={"workspace": "default", "rate_limit_rpm": 1})
    token, key = r.json()["token"], r.json()["key"]["id"]
    if time.time() % 60 > 55:  # keep both requests in one minute window
        time.sleep(6)
    assert [chat(gw, WEAK, token=token).status_code for _ in range(2)] == [200, 429]
    rows = usage_rows(admin, virtual_key=key)
    assert sorted((row["status"], row["error_type"]) for row in rows) == [
        (200, None),
        (429, "rate_limit_exceeded"),
    ]
    total = admin.get(f"/virtual-keys/{key}/usage").json()["total"]
    assert (total["requests"], total["errors"]) == (2, 1)
