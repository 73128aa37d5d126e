"""What schemathesis and the secrets scan found, pinned as plain regression
tests (each failed before its fix): exact refusals, integral floats, the Allow
header, empty parameters, usage rows of failed requests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from admin_support import ADMIN, admin_config, chat
from servers import TOKEN, ServerThread
from tiergate.api.admin_config import MAX_VERSIONS
from tiergate.api.openapi import openapi_document
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.formats.errors import FormatError
from tiergate.formats.openai.request import parse_request as parse_openai
from tiergate.sim.app import create_sim_app

ADMIN_AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db: Path = tmp_path_factory.mktemp("regressions") / "tg.db"
    cfg = parse_config(admin_config("http://127.0.0.1:9", str(db)))
    with TestClient(create_app(cfg, env={"TIERGATE_ADMIN_TOKEN": ADMIN})) as c:
        yield c


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "openai/gpt-5-mini", "messages": [{"role": "user", "content": "hi"}], **extra}


def test_malformed_max_tokens_is_refused_even_beside_max_completion_tokens() -> None:
    with pytest.raises(FormatError) as err:
        parse_openai(_chat(max_tokens=0, max_completion_tokens=5))
    assert err.value.param == "max_tokens"
    assert parse_openai(_chat(max_tokens=7, max_completion_tokens=5)).max_tokens == 5


def test_integral_float_is_an_integer_and_a_fraction_is_not() -> None:
    req = parse_openai(_chat(max_tokens=512.0))
    assert req.max_tokens == 512 and isinstance(req.max_tokens, int)
    with pytest.raises(FormatError):
        parse_openai(_chat(max_tokens=512.5))


def test_tool_call_of_another_type_is_refused() -> None:
    call = {"id": "c1", "type": "custom", "custom": {"name": "x", "input": "y"}}
    body = _chat(messages=[{"role": "assistant", "content": None, "tool_calls": [call]}])
    with pytest.raises(FormatError) as err:
        parse_openai(body)
    assert "custom" in err.value.message
    call = {"id": "c1", "function": {"name": "x", "arguments": "{}"}}  # type may be left out
    body = _chat(messages=[{"role": "assistant", "content": None, "tool_calls": [call]}])
    assert parse_openai(body).messages[0].tool_calls[0].name == "x"


def test_405_names_every_method_of_the_path(client: TestClient) -> None:
    r = client.options("/admin/api/channels/oa", headers=ADMIN_AUTH)
    assert r.status_code == 405
    assert set(r.headers["allow"].replace(" ", "").split(",")) >= {"GET", "PATCH", "DELETE"}
    r = client.get("/v1/chat/completions", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert set(r.json()) == {"error"}


def test_a_write_without_a_body_is_refused(client: TestClient) -> None:
    before = client.get("/admin/api/config", headers=ADMIN_AUTH).json()["version"]
    r = client.patch("/admin/api/channels/oa", headers=ADMIN_AUTH)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"
    assert client.get("/admin/api/config", headers=ADMIN_AUTH).json()["version"] == before


@pytest.mark.parametrize(
    "query",
    ["tier=medium", "tier=", "since=", "until=", "limit=", "offset=", "status=", "limit=10001"],
)
def test_typed_query_values_are_checked_not_ignored(client: TestClient, query: str) -> None:
    r = client.get(f"/admin/api/usage?{query}", headers=ADMIN_AUTH)
    assert r.status_code == 400, (query, r.text)


def test_csv_limit_and_versions_limit_match_the_document(client: TestClient) -> None:
    assert client.get("/admin/api/usage?format=csv&limit=50000", headers=ADMIN_AUTH).is_success
    paths = openapi_document()["paths"]
    (limit,) = [
        p["schema"]
        for p in paths["/admin/api/config/versions"]["get"]["parameters"]
        if p["name"] == "limit"
    ]
    assert limit["maximum"] == MAX_VERSIONS
    r = client.get(f"/admin/api/config/versions?limit={MAX_VERSIONS + 1}", headers=ADMIN_AUTH)
    assert r.status_code == 400
    r = client.get(f"/admin/api/config/versions?limit={MAX_VERSIONS}", headers=ADMIN_AUTH)
    assert r.status_code == 200


def test_until_zero_is_the_epoch_not_now(client: TestClient) -> None:
    r = client.get("/admin/api/stats/savings?until=0", headers=ADMIN_AUTH)
    assert r.status_code == 200 and r.json()["until"] == 0


def test_label_takes_an_integral_float(client: TestClient) -> None:
    path = "/admin/api/shadow/999999/label"
    r = client.post(path, headers=ADMIN_AUTH, json={"correct": True, "hard_turns_before": 2.0})
    assert r.status_code == 404  # valid label; the decision does not exist
    r = client.post(path, headers=ADMIN_AUTH, json={"correct": True, "hard_turns_before": 2.5})
    assert r.status_code == 400


def test_failed_and_served_requests_are_recorded_together(tmp_path: Path) -> None:
    """A failed request's usage row once lacked columns; in one insert batch with
    served rows it failed the whole batch, and every later one with it."""
    with ServerThread(create_sim_app()) as sim:
        doc = admin_config(sim.url, str(tmp_path / "tg.db"))
        app = create_app(parse_config(doc), env={"TIERGATE_ADMIN_TOKEN": ADMIN})
        with ServerThread(app) as gw:
            fault = {"kind": "status", "status": 500, "count": 3, "model": "claude-sonnet-4-5"}
            assert httpx.post(f"{sim.url}/_sim/faults", json=fault).is_success
            # One flush batch: served, failed, served (the recorder flushes on read).
            assert chat(gw, "openai/gpt-5-mini").status_code == 200
            assert chat(gw, "anthropic/claude-sonnet-4-5").status_code == 502
            assert chat(gw, "openai/gpt-5-mini").status_code == 200
            rows = httpx.get(f"{gw.url}/admin/api/usage", headers=ADMIN_AUTH).json()["items"]
            assert sorted(row["status"] for row in rows) == [200, 200, 502]
            served = [row for row in rows if row["status"] == 200]
            assert all(row["channel"] == "oa" and row["output_tokens"] > 0 for row in served)
            assert chat(gw, "openai/gpt-5-mini").status_code == 200  # later batches too
            rows = httpx.get(f"{gw.url}/admin/api/usage", headers=ADMIN_AUTH).json()["items"]
            assert len(rows) == 4
