"""A provider outage is reported as what it is (issue #16): every refused request
gets a usage row and an access log line, the client is told the upstream is
unavailable (with Retry-After), and the provider's own error text stays in the log."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from servers import TOKEN, ServerThread, free_port, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


def post(gw: ServerThread, path: str, model: str) -> httpx.Response:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    if path == MESSAGES:
        body["max_tokens"] = 16
    return httpx.post(
        f"{gw.url}{path}", json=body, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30
    )


def usage_rows(db: Path, want: int, timeout: float = 10.0) -> list[tuple[Any, ...]]:
    """The usage rows once `want` of them are flushed (the recorder batches)."""
    deadline = time.monotonic() + timeout
    rows: list[tuple[Any, ...]] = []
    while time.monotonic() < deadline:
        if db.exists():
            with sqlite3.connect(db) as conn:
                try:
                    rows = conn.execute(
                        "SELECT request_id, status, error_type, router FROM usage ORDER BY ts"
                    ).fetchall()
                except sqlite3.OperationalError:
                    rows = []
            if len(rows) >= want:
                return rows
        time.sleep(0.1)
    return rows


def test_provider_down_is_upstream_unavailable_with_rows_and_log_lines(
    sim: ServerThread, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "usage.db"
    raw = gateway_config(
        sim.url,
        database={"url": f"sqlite:///{db}"},
        server={
            "cooldown_seconds": 30,
            "max_attempts": 3,
            "request_timeout_seconds": 2,
            # eject on the first failure, even the last key: the old one-strike cooldown
            # (the default never takes a model's last key out: tests/test_provider_blip.py)
            "outlier": {
                "consecutive_failures": 1,
                "max_ejection_percent": 100,
                "base_ejection_seconds": 30,
            },
        },
        routers=[
            {
                "name": "coding",
                "allowed_models": ["openai/*"],
                "strategy": "cheapest",
                "default_model": "openai/gpt-5-mini",
            }
        ],
    )
    raw["channels"][0]["base_url"] = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens
    caplog.set_level(logging.INFO, logger="tiergate.access")
    with ServerThread(create_app(parse_config(raw))) as gw:
        first = post(gw, CHAT, "orcarouter/coding")
        assert first.status_code == 502, first.text  # every key tried and refused
        answers = [post(gw, path, "orcarouter/coding") for path in (CHAT, MESSAGES) * 3]
        answers.append(post(gw, CHAT, "openai/gpt-5-mini"))  # a concrete model too
        for r in answers:
            assert r.status_code == 503, r.text
            assert 1 <= int(r.headers["retry-after"]) <= 30
            doc = r.json()
            if r.request.url.path == MESSAGES:
                assert doc["error"]["type"] == "overloaded_error"
                assert "unavailable" in doc["error"]["message"]
            else:
                assert doc["error"]["code"] == "upstream_unavailable"
        ids = {first.headers["x-orca-request-id"]} | {
            r.headers["x-orca-request-id"] for r in answers
        }
        rows = usage_rows(db, len(ids))
    assert {row[0] for row in rows} == ids  # one row per refused request, none missing
    assert {row[1] for row in rows} == {502, 503}
    assert {row[2] for row in rows} >= {"connect", "upstream_unavailable"}
    lines = [r for r in caplog.records if r.name == "tiergate.access" and r.msg == "request"]
    assert {getattr(r, "request_id", None) for r in lines} >= ids
    assert all(r.levelno == logging.INFO for r in lines)


def test_client_mistakes_and_refusals_get_a_row_too(sim: ServerThread, tmp_path: Path) -> None:
    db = tmp_path / "usage.db"
    cfg = parse_config(gateway_config(sim.url, database={"url": f"sqlite:///{db}"}))
    with ServerThread(create_app(cfg)) as gw:
        bad = httpx.post(
            f"{gw.url}{CHAT}",
            json={"model": "openai/gpt-5-mini", "messages": []},
            headers={"authorization": f"Bearer {TOKEN}"},
        )
        missing = post(gw, CHAT, "orcarouter/nope")
        unauthenticated = httpx.post(f"{gw.url}{CHAT}", json={})
        assert (bad.status_code, missing.status_code, unauthenticated.status_code) == (
            400,
            404,
            401,
        )
        rows = usage_rows(db, 2)
    refused = sorted((r[1], r[2]) for r in rows)
    assert refused == [(400, "invalid_request"), (404, "model_not_found")]


def test_provider_error_text_stays_in_the_log(
    sim: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    secret_text = "backend db-7.corp.internal:5432 refused key sk-a for account 4411"
    cfg = parse_config(gateway_config(sim.url))
    caplog.set_level(logging.INFO)
    with ServerThread(create_app(cfg)) as gw:
        httpx.post(
            f"{sim.url}/_sim/faults",
            json={
                "kind": "status",
                "status": 400,
                "count": 2,
                "model": "gpt-5-mini",
                "message": secret_text,
            },
        )
        for path in (CHAT, MESSAGES):
            r = post(gw, path, "openai/gpt-5-mini")
            assert r.status_code == 400
            assert "corp.internal" not in r.text and "4411" not in r.text and "sk-a" not in r.text
            assert "rejected the request" in r.text
    httpx.delete(f"{sim.url}/_sim/faults")
    logged = [getattr(rec, "provider_message", "") for rec in caplog.records]
    assert any("db-7.corp.internal" in m for m in logged)
    assert not any("sk-a" in m for m in logged)
