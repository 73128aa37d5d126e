"""Admin API over real HTTP: auth, channels, keys, routers, pools, config, and
validation errors. Every admin response is scanned for raw secrets
(admin_support.AdminClient)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from admin_support import (
    ADMIN,
    KEYS,
    STRONG,
    WEAK,
    AdminClient,
    admin_config,
    chat,
    check_no_secrets,
    error_of,
    gateway,
)
from servers import TOKEN, ServerThread
from tiergate.routing.affinity import key_fingerprint
from tiergate.sim.app import create_sim_app


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


@pytest.fixture
def gw(sim: ServerThread, tmp_path: Path) -> Iterator[tuple[ServerThread, AdminClient]]:
    with gateway(admin_config(sim.url, str(tmp_path / "tg.db"))) as pair:
        yield pair


# ---- auth -------------------------------------------------------------------------------


def test_admin_api_is_closed_without_a_configured_token(sim: ServerThread, tmp_path: Path) -> None:
    from servers import ServerThread as Server
    from tiergate.app import create_app
    from tiergate.config_load import parse_config

    app = create_app(parse_config(admin_config(sim.url, str(tmp_path / "x.db"))), env={})
    with Server(app) as g:
        for token in (None, "anything", TOKEN):
            r = AdminClient(g.url, token).get("/channels")
            assert r.status_code == 503
            err = error_of(r)
            assert err["code"] == "admin_disabled"
            assert "TIERGATE_ADMIN_TOKEN" in err["message"]


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (None, "Missing admin token"),
        ("wrong", "Invalid admin token"),
        (TOKEN, "Invalid admin token"),
    ],
)
def test_missing_wrong_and_workspace_tokens_are_refused(
    gw: tuple[ServerThread, AdminClient], token: str | None, message: str
) -> None:
    g, _ = gw
    client = AdminClient(g.url, token)
    for method, path in [("GET", "/channels"), ("POST", "/channels/oa/drain"), ("GET", "/audit")]:
        r = client.request(method, path)
        assert r.status_code == 401
        err = error_of(r)
        assert err == {
            "message": message,
            "type": "authentication_error",
            "code": "invalid_admin_token",
        }
    # nothing changed
    assert AdminClient(g.url).get("/channels/oa").json()["weight"] == 1.0


def test_x_api_key_header_carries_the_admin_token_too(gw: tuple[ServerThread, AdminClient]) -> None:
    g, _ = gw
    r = AdminClient(g.url, None).get("/routers", headers={"x-api-key": ADMIN})
    assert r.status_code == 200


def test_environment_token_wins_over_the_file(sim: ServerThread, tmp_path: Path) -> None:
    doc = admin_config(sim.url, str(tmp_path / "x.db"))
    doc["server"]["admin_token"] = "tg-file-token-1234567890"
    with gateway(doc) as (g, admin):  # gateway() passes TIERGATE_ADMIN_TOKEN=ADMIN
        assert admin.get("/channels").status_code == 200
        assert AdminClient(g.url, "tg-file-token-1234567890").get("/channels").status_code == 401


# ---- channels ----------------------------------------------------------------------------


def test_channels_show_masked_keys_with_stable_fingerprints(
    gw: tuple[ServerThread, AdminClient],
) -> None:
    _, admin = gw
    channels = {c["name"]: c for c in admin.get("/channels").json()["items"]}
    assert set(channels) == {"oa", "an", "ge"}
    keys = channels["oa"]["keys"]
    assert [k["index"] for k in keys] == [0, 1, 2]
    for k, raw in zip(keys, KEYS["oa"], strict=True):
        assert k["masked"] == f"sk-…{raw[-4:]}"
        assert k["fingerprint"] == key_fingerprint(raw)
        assert k["status"] == "ok" and k["enabled"] is True and k["source"] == "literal"
    assert channels["oa"]["healthy"] is True and channels["oa"]["drained"] is False
    assert admin.get("/channels/oa").json()["keys"] == keys
    assert error_of(admin.get("/channels/nope"))["code"] == "not_found"


def _new_channel(sim_url: str, name: str = "oa2") -> dict[str, Any]:
    return {
        "name": name,
        "type": "openai",
        "base_url": f"{sim_url}/v1",
        "keys": [f"sk-proj-{name}-secret-0000000000000000"],
        "models": {"openai/gpt-5-nano": {"upstream": "gpt-5-nano", "price": {"input": 0.05}}},
    }


def test_create_channel_serves_at_once_and_rejects_duplicates(
    sim: ServerThread, gw: tuple[ServerThread, AdminClient]
) -> None:
    g, admin = gw
    body = _new_channel(sim.url)
    r = admin.post("/channels", json=body)
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["version"] == 2
    assert (
        "sk-proj-oa2-secret" not in r.text and created["channel"]["keys"][0]["masked"] == "sk-…0000"
    )
    served = chat(g, "openai/gpt-5-nano")
    assert served.status_code == 200
    assert served.headers["x-orca-resolved-model"] == "openai/gpt-5-nano"
    assert admin.post("/channels", json=body).status_code == 409
    listed = httpx.get(f"{g.url}/v1/models", headers={"Authorization": f"Bearer {TOKEN}"})
    assert "openai/gpt-5-nano" in {m["id"] for m in listed.json()["data"]}


def test_invalid_channel_lists_every_problem_and_changes_nothing(
    gw: tuple[ServerThread, AdminClient],
) -> None:
    _, admin = gw
    bad = {"name": "bad", "type": "carrier-pigeon", "weight": -1, "keys": ["k"], "models": {}}
    r = admin.post("/channels", json=bad)
    assert r.status_code == 400
    err = error_of(r)
    assert err["type"] == "invalid_request_error"
    problems = " | ".join(err["problems"])
    assert "channels.3.type" in problems and "channels.3.weight" in problems
    assert len(err["problems"]) >= 2
    assert [c["name"] for c in admin.get("/channels").json()["items"]] == ["oa", "an", "ge"]
    assert admin.get("/config").json()["version"] == 1  # nothing stored
    # semantic problems are listed the same way
    r = admin.post(
        "/channels", json={"name": "empty", "type": "openai", "keys": ["k"], "models": {}}
    )
    assert r.status_code == 400
    assert any("at least one model" in p for p in error_of(r)["problems"])
    assert admin.post("/channels", json={"type": "openai"}).status_code == 400
    r = admin.post("/channels", content=b"{not json")
    assert r.status_code == 400 and "not valid JSON" in error_of(r)["message"]
    assert admin.post("/channels", json=[1, 2]).status_code == 400


@pytest.mark.parametrize("weight", [1e308, 1000.5, -1, "heavy"])
def test_a_channel_weight_out_of_bounds_is_a_400_naming_the_field(
    gw: tuple[ServerThread, AdminClient], weight: Any
) -> None:
    """A weight is a relative share of a weighted pick: finite, 0 to 1000."""
    _, admin = gw
    for r in (
        admin.patch("/channels/oa", json={"weight": weight}),
        admin.post(
            "/channels",
            json={
                "name": "w",
                "type": "openai",
                "keys": ["k"],
                "weight": weight,
                "models": {WEAK: {}},
            },
        ),
    ):
        assert r.status_code == 400
        err = error_of(r)
        assert any(p.startswith("channels.") and ".weight: " in p for p in err["problems"]), err
    assert admin.get("/config").json()["version"] == 1  # nothing stored
    assert admin.patch("/channels/oa", json={"weight": 1000}).json()["channel"]["weight"] == 1000


def test_a_key_over_4096_characters_is_a_400_naming_the_field(
    gw: tuple[ServerThread, AdminClient],
) -> None:
    """A 100,000-character "key" is a paste mistake; the error never echoes it."""
    _, admin = gw
    long_key = "sk-" + "x" * 100_000
    for r in (
        admin.post("/channels/oa/keys", json={"key": long_key}),
        admin.put("/channels/oa/keys/0", json={"key": long_key}),
    ):
        assert r.status_code == 400
        assert error_of(r)["message"] == "key: at most 4096 characters"
        assert "x" * 100 not in r.text
    r = admin.post(
        "/channels",
        json={"name": "k", "type": "openai", "keys": [long_key], "models": {WEAK: {}}},
    )
    assert r.status_code == 400
    assert any(".keys.0: " in p and "4096" in p for p in error_of(r)["problems"])
    assert "x" * 100 not in r.text
    assert admin.get("/config").json()["version"] == 1  # nothing stored
    ok = admin.post("/channels/oa/keys", json={"key": "sk-" + "y" * 4093})
    assert ok.status_code == 201


def test_patch_channel_and_its_forbidden_fields(gw: tuple[ServerThread, AdminClient]) -> None:
    _, admin = gw
    r = admin.patch("/channels/oa", json={"priority": 5, "cache_window_seconds": 120})
    assert r.status_code == 200
    assert r.json()["channel"]["priority"] == 5
    r = admin.patch("/channels/oa", json={"name": "x", "keys": ["k"], "disabled_keys": [0]})
    assert r.status_code == 400
    assert len(error_of(r)["problems"]) == 3
    assert admin.patch("/channels/zz", json={"priority": 1}).status_code == 404
    assert admin.patch("/channels/oa", json={"priority": "high"}).status_code == 400


def test_disable_enable_and_drain_apply_live(gw: tuple[ServerThread, AdminClient]) -> None:
    g, admin = gw
    assert chat(g, WEAK).status_code == 200
    r = admin.post("/channels/oa/disable")
    assert r.status_code == 200 and r.json()["channel"]["enabled"] is False
    refused = chat(g, WEAK)
    assert refused.status_code == 503
    r = admin.post("/channels/oa/enable")
    assert r.json()["channel"]["enabled"] is True
    assert chat(g, WEAK).status_code == 200
    r = admin.post("/channels/oa/drain")
    assert r.json()["channel"]["weight"] == 0 and r.json()["channel"]["drained"] is True
    assert chat(g, WEAK).status_code == 200  # the only channel: drained still serves
    assert admin.post("/channels/oa/explode").status_code in (404, 405)
    assert admin.post("/channels/nope/drain").status_code == 404


def test_delete_channel_still_referenced_is_refused(gw: tuple[ServerThread, AdminClient]) -> None:
    _, admin = gw
    r = admin.delete("/channels/oa")  # router coding's default model lives only here
    assert r.status_code == 400
    assert any("default_model" in p for p in error_of(r)["problems"])
    assert admin.delete("/channels/ge").json()["deleted"] == "ge"
    assert admin.get("/channels/ge").status_code == 404


# ---- keys -----------------------------------------------------------------------------------


def test_keys_are_write_only_and_managed_by_index(gw: tuple[ServerThread, AdminClient]) -> None:
    g, admin = gw
    new_key = "sk-proj-added-" + "9" * 24 + "wxyz"
    r = admin.post("/channels/oa/keys", json={"key": new_key})
    assert r.status_code == 201
    assert new_key not in r.text
    assert r.json()["key"] == {
        **r.json()["key"],
        "index": 3,
        "masked": "sk-…wxyz",
        "fingerprint": key_fingerprint(new_key),
    }
    # disable key 1, then delete key 0: key 1 becomes key 0 and stays disabled
    assert admin.post("/channels/oa/keys/1/disable").json()["key"]["status"] == "disabled"
    deleted = admin.delete("/channels/oa/keys/0").json()["deleted"]
    assert deleted == {"index": 0, "fingerprint": key_fingerprint(KEYS["oa"][0])}
    keys = admin.get("/channels/oa/keys").json()["items"]
    assert [k["fingerprint"] for k in keys] == [
        key_fingerprint(KEYS["oa"][1]),
        key_fingerprint(KEYS["oa"][2]),
        key_fingerprint(new_key),
    ]
    assert [k["enabled"] for k in keys] == [False, True, True]
    assert admin.post("/channels/oa/keys/0/enable").json()["key"]["status"] == "ok"
    rotated = "sk-proj-rotated-" + "1" * 24 + "rot8"
    r = admin.put("/channels/oa/keys/2", json={"key": rotated})
    assert r.json()["key"]["fingerprint"] == key_fingerprint(rotated)
    assert chat(g, WEAK).status_code == 200
    # validation and unknown indices
    assert admin.post("/channels/oa/keys", json={"key": ""}).status_code == 400
    assert admin.post("/channels/oa/keys", json={"key": " padded "}).status_code == 400
    assert admin.post("/channels/oa/keys", json={}).status_code == 400
    assert admin.delete("/channels/oa/keys/9").status_code == 404
    assert admin.post("/channels/oa/keys/9/enable").status_code == 404
    assert admin.put("/channels/oa/keys/-1", json={"key": rotated}).status_code == 400
    assert admin.put("/channels/oa/keys/abc", json={"key": rotated}).status_code == 400


def test_key_given_as_environment_reference_stays_a_reference(
    sim: ServerThread, tmp_path: Path
) -> None:
    secret = "sk-proj-from-env-" + "7" * 24 + "envk"
    with gateway(
        admin_config(sim.url, str(tmp_path / "tg.db")), env={"TG_TEST_OA_KEY": secret}
    ) as (_g, admin):
        r = admin.post("/channels/oa/keys", json={"key": "${TG_TEST_OA_KEY}"})
        assert r.status_code == 201
        key = r.json()["key"]
        assert key["source"] == "env:TG_TEST_OA_KEY"
        assert key["fingerprint"] == key_fingerprint(secret)
        versions = admin.get("/config/versions").json()["items"]
        assert versions[0]["change"] == {"op": "add_key", "target": "oa"}
        # the stored document keeps the reference, not the secret
        import sqlite3

        with sqlite3.connect(tmp_path / "tg.db") as db:
            (doc,) = db.execute(
                "SELECT document FROM config_versions ORDER BY version DESC"
            ).fetchone()
        assert "${TG_TEST_OA_KEY}" in doc and secret not in doc


# ---- routers and pools ---------------------------------------------------------------------


def test_router_lifecycle(gw: tuple[ServerThread, AdminClient]) -> None:
    g, admin = gw
    body = {"name": "fast", "allowed_models": ["openai/*"], "strategy": "cheapest"}
    r = admin.post("/routers", json=body)
    assert r.status_code == 201
    assert r.json()["router"]["tiers"] == {"base": [WEAK, "openai/gpt-5"], "strong": []}
    assert chat(g, "orcarouter/fast").status_code == 200
    r = admin.patch("/routers/fast", json={"thresholds": {"t1": 0.2}})
    thresholds = r.json()["router"]["thresholds"]
    assert (thresholds["t1"], thresholds["t2"]) == (0.2, 0.7)  # merged, not replaced
    r = admin.patch("/routers/fast", json={"thresholds": {"t1": 0.9, "t2": 0.1}})
    assert r.status_code == 400
    assert any("t1 must be <= t2" in p for p in error_of(r)["problems"])
    assert admin.patch("/routers/fast", json={"name": "slow"}).status_code == 400
    assert admin.patch("/routers/fast", json={"strategy": "vibes"}).status_code == 400
    assert admin.post("/routers", json=body).status_code == 409

    assert admin.post("/routers/fast/disable").json()["router"]["enabled"] is False
    refused = chat(g, "orcarouter/fast")
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "router_disabled"
    listed = httpx.get(f"{g.url}/v1/models", headers={"Authorization": f"Bearer {TOKEN}"})
    assert "orcarouter/fast" not in {m["id"] for m in listed.json()["data"]}
    admin.post("/routers/fast/enable")
    assert chat(g, "orcarouter/fast").status_code == 200

    assert admin.delete("/routers/fast").json()["deleted"] == "fast"
    assert chat(g, "orcarouter/fast").status_code == 404
    assert admin.get("/routers/fast").status_code == 404
    assert admin.delete("/routers/fast").status_code == 404


def test_pools(gw: tuple[ServerThread, AdminClient]) -> None:
    _, admin = gw
    r = admin.put("/routers/coding/pools/premium", json={"models": [STRONG]})
    assert r.status_code == 200 and r.json()["models"] == [STRONG]
    assert admin.get("/routers/coding/pools").json()["pools"] == {"premium": [STRONG]}
    r = admin.patch(
        "/routers/coding", json={"escalation": {"mode": "manual", "pool": ["@pool:premium"]}}
    )
    assert r.status_code == 200, r.text
    assert r.json()["router"]["tiers"]["strong"] == [STRONG]
    r = admin.delete("/routers/coding/pools/premium")  # still referenced
    assert r.status_code == 400 and any("premium" in p for p in error_of(r)["problems"])
    assert (
        admin.put("/routers/coding/pools/ghost", json={"models": ["nobody/*"]}).status_code == 200
    )
    r = admin.patch("/routers/coding", json={"escalation": {"pool": ["@pool:ghost"]}})
    assert r.status_code == 400  # a strong tier that resolves to no model
    assert admin.put("/routers/coding/pools/x", json={"models": "gpt"}).status_code == 400
    assert admin.delete("/routers/coding/pools/never").status_code == 404


# ---- config and persistence --------------------------------------------------------------------


def test_config_view_is_masked_and_versions_are_listed(
    gw: tuple[ServerThread, AdminClient],
) -> None:
    _, admin = gw
    admin.post("/channels/oa/drain", headers={"X-Tiergate-Actor": "alice"})
    view = admin.get("/config").json()
    assert view["version"] == 2 and view["persisted"] is True
    assert view["config"]["workspaces"][0]["tokens"] == ["…"]
    assert view["config"]["channels"][0]["weight"] == 0
    versions = admin.get("/config/versions").json()
    assert versions["live_version"] == 2
    assert [(v["version"], v["source"], v["actor"]) for v in versions["items"]] == [
        (2, "admin", "alice"),
        (1, "seed", None),
    ]
    assert admin.get("/config/versions?limit=0").status_code == 400


def test_admin_changes_survive_a_restart_and_a_new_file_wins(
    sim: ServerThread, tmp_path: Path
) -> None:
    db = str(tmp_path / "tg.db")
    doc = admin_config(sim.url, db)
    with gateway(doc) as (_, admin):
        admin.post("/channels/oa/drain")
    with gateway(doc) as (_, admin):  # the same file again: the database is newer
        assert admin.get("/channels/oa").json()["weight"] == 0
        assert admin.get("/config").json()["version"] == 2
    edited = admin_config(sim.url, db)
    edited["channels"][0]["priority"] = 3  # the operator edited the file: it is newer
    with gateway(edited) as (_, admin):
        oa = admin.get("/channels/oa").json()
        assert (oa["weight"], oa["priority"]) == (1.0, 3)
        assert admin.get("/config").json()["version"] == 3
    with gateway(doc) as (_, admin):  # an older file (seeded before) does not roll back
        assert admin.get("/channels/oa").json()["priority"] == 3


def test_without_a_database_changes_apply_to_this_instance(
    sim: ServerThread,
) -> None:
    with gateway(admin_config(sim.url, None)) as (g, admin):
        r = admin.post("/channels/oa/disable")
        assert r.status_code == 200
        assert admin.get("/config").json()["persisted"] is False
        assert chat(g, WEAK).status_code == 503
        assert admin.get("/audit").status_code == 503


def test_unknown_admin_paths_and_methods(gw: tuple[ServerThread, AdminClient]) -> None:
    _, admin = gw
    assert admin.get("/nothing-here").status_code == 404
    assert admin.request("PATCH", "/config").status_code == 405
    check_no_secrets(httpx.get(f"{gw[0].url}/openapi.json").text)
