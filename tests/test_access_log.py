"""The access log shows every request, refused and failed ones too, and an error
reply carries no X-Orca-Resolved-Model (no model served it: README)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


@pytest.fixture(scope="module")
def gw(sim: ServerThread) -> Iterator[ServerThread]:
    cfg = parse_config(gateway_config(sim.url, server={"max_attempts": 1, "cooldown_seconds": 0}))
    with ServerThread(create_app(cfg)) as g:
        yield g


def _access(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "tiergate.access"]


def _chat(gw: ServerThread, token: str, model: str) -> httpx.Response:
    return httpx.post(
        f"{gw.url}/v1/chat/completions",
        headers={"authorization": f"Bearer {token}"},
        json={"model": model, "messages": [{"role": "user", "content": "Hello"}]},
        timeout=10,
    )


def test_a_refused_request_is_logged_with_its_status(
    gw: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tiergate.access")
    r = _chat(gw, "tg-wrong", "openai/gpt-5-mini")
    assert r.status_code == 401
    [line] = [x for x in _access(caplog) if x.request_id == r.headers["x-orca-request-id"]]
    assert line.status == 401 and line.error_type == "invalid_api_key"
    assert "tg-wrong" not in caplog.text  # never the token


def test_an_upstream_failure_is_logged_and_names_the_model_tried(
    sim: ServerThread, gw: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tiergate.access")
    fault = {"kind": "status", "status": 500, "count": None, "model": "gpt-5-mini"}
    httpx.post(f"{sim.url}/_sim/faults", json=fault).raise_for_status()
    try:
        r = _chat(gw, TOKEN, "openai/gpt-5-mini")
    finally:
        httpx.delete(f"{sim.url}/_sim/faults")
    assert r.status_code == 502
    assert "x-orca-resolved-model" not in r.headers
    [line] = [x for x in _access(caplog) if x.request_id == r.headers["x-orca-request-id"]]
    assert line.status == 502 and line.model == "openai/gpt-5-mini"
    assert line.error_type == "status"
