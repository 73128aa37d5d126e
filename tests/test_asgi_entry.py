"""The completion endpoints bypass Starlette's routing (gateway/asgi.py): they must
still answer everything the routed app did, in the client's own format."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app

HEADERS = {"authorization": f"Bearer {TOKEN}", "anthropic-version": "2023-06-01"}
CHAT = {"model": "openai/gpt-5-mini", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {**CHAT, "max_tokens": 16}


@pytest.fixture(scope="module")
def gw() -> Iterator[tuple[ServerThread, Any]]:
    with ServerThread(create_sim_app()) as sim:
        app = create_app(parse_config(gateway_config(sim.url)))
        with ServerThread(app) as g:
            yield g, app


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/chat/completions", "/v1/messages"])
def test_completion_paths_are_served(gw: tuple[ServerThread, Any], path: str) -> None:
    server, _ = gw
    body = MESSAGES if path == "/v1/messages" else CHAT
    reply = httpx.post(server.url + path, json=body, headers=HEADERS, timeout=10)
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-orca-resolved-model"] == "openai/gpt-5-mini"


def test_other_methods_and_paths_still_go_through_starlette(gw: tuple[ServerThread, Any]) -> None:
    server, _ = gw
    wrong_method = httpx.get(server.url + "/v1/chat/completions", headers=HEADERS, timeout=10)
    assert wrong_method.status_code == 405 and "allow" in wrong_method.headers
    assert wrong_method.json()["error"]["message"] == "Method not allowed"
    models = httpx.get(server.url + "/v1/models", headers=HEADERS, timeout=10)
    assert models.status_code == 200


@pytest.mark.parametrize(
    ("path", "body", "error_type"),
    [("/v1/chat/completions", CHAT, None), ("/v1/messages", MESSAGES, "error")],
)
def test_a_pipeline_bug_is_a_500_in_the_clients_format(
    gw: tuple[ServerThread, Any],
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    body: dict[str, Any],
    error_type: str | None,
) -> None:
    server, app = gw

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr(app.gateway.planner, "plan", broken)
    reply = httpx.post(server.url + path, json=body, headers=HEADERS, timeout=10)
    assert reply.status_code == 500
    doc = reply.json()
    assert doc["error"]["message"] == "Internal gateway error"
    if error_type is not None:  # Anthropic's shape: {"type": "error", "error": {...}}
        assert doc["type"] == error_type
