"""A client's mistake is the client's 4xx, never a 5xx, and never anyone else's
outage (issue #16): huge integers, prompts over every context window, malformed
`response_format`, and one bad body retried on every key of a channel."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


@pytest.fixture(scope="module")
def gw(sim: ServerThread) -> Iterator[ServerThread]:
    cfg = parse_config(gateway_config(sim.url, server={"cooldown_seconds": 30, "max_attempts": 3}))
    with ServerThread(create_app(cfg)) as g:
        yield g


@pytest.fixture(autouse=True)
def _clear_faults(sim: ServerThread) -> Iterator[None]:
    yield
    httpx.delete(f"{sim.url}/_sim/faults")


def post(gw: ServerThread, path: str, body: dict[str, Any], token: str = TOKEN) -> httpx.Response:
    return httpx.post(
        f"{gw.url}{path}", json=body, headers={"authorization": f"Bearer {token}"}, timeout=30
    )


def body(path: str, model: str, **extra: Any) -> dict[str, Any]:
    b: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    if path == MESSAGES:
        b["max_tokens"] = 16
    b.update(extra)
    return b


def assert_client_error(r: httpx.Response, path: str, status: int = 400) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text[:300])
    doc: dict[str, Any] = r.json()
    if path == MESSAGES:
        assert doc["type"] == "error" and doc["error"]["type"] == "invalid_request_error"
    else:
        assert doc["error"]["type"] == "invalid_request_error"
    return doc


@pytest.mark.parametrize("path", [CHAT, MESSAGES])
@pytest.mark.parametrize("model", ["openai/gpt-5-mini", "orcarouter/coding"])
@pytest.mark.parametrize("raw", ["18446744073709551616", "1e30", "2147483648"])
def test_out_of_range_max_tokens_is_a_400(
    gw: ServerThread, path: str, model: str, raw: str
) -> None:
    text = (
        f'{{"model": "{model}", "max_tokens": {raw}, '
        '"messages": [{"role": "user", "content": "hi"}]}'
    )
    r = httpx.post(
        f"{gw.url}{path}",
        content=text,
        headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
    )
    doc = assert_client_error(r, path)
    assert "at most" in doc["error"]["message"]


@pytest.mark.parametrize("path", [CHAT, MESSAGES])
def test_prompt_over_every_context_window_is_context_length_exceeded(
    gw: ServerThread, path: str
) -> None:
    # gateway_config's models have the default 128,000-token window
    r = post(gw, path, body(path, "orcarouter/coding", max_tokens=200_000))
    doc = assert_client_error(r, path)
    if path == CHAT:
        assert doc["error"]["code"] == "context_length_exceeded"
    # the same request that fits is served
    assert post(gw, path, body(path, "orcarouter/coding", max_tokens=64)).status_code == 200


@pytest.mark.parametrize(
    "response_format",
    [
        {"type": "json_schema", "json_schema": "x"},
        {"type": "json_schema", "json_schema": {"schema": {}}},
        {"type": "json_schema", "json_schema": {"name": "has space"}},
        {"type": "json_schema", "json_schema": {"name": "ok", "schema": []}},
    ],
)
def test_malformed_json_schema_is_refused_before_dispatch(
    gw: ServerThread, sim: ServerThread, response_format: dict[str, Any]
) -> None:
    before = httpx.get(f"{sim.url}/_sim/stats").json()["totals"]["requests"]
    r = post(gw, CHAT, body(CHAT, "openai/gpt-5-mini", response_format=response_format))
    assert_client_error(r, CHAT)
    assert httpx.get(f"{sim.url}/_sim/stats").json()["totals"]["requests"] == before


def test_simulator_answers_a_malformed_json_schema_with_a_400(sim: ServerThread) -> None:
    r = httpx.post(
        f"{sim.url}/v1/chat/completions",
        json={
            "model": "gpt-5-mini",
            "messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "json_schema", "json_schema": "x"},
        },
        headers={"authorization": "Bearer sk-a"},
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_one_bad_body_does_not_take_the_channel_from_other_tenants(
    sim: ServerThread,
) -> None:
    """The provider answers one body with a 500 on every key it is retried on: the
    failure is counted once, so the channel's other keys stay in service."""
    cfg = parse_config(gateway_config(sim.url, server={"cooldown_seconds": 60, "max_attempts": 3}))
    with ServerThread(create_app(cfg)) as gw:
        httpx.post(
            f"{sim.url}/_sim/faults",
            json={"kind": "status", "status": 500, "count": 3, "model": "gpt-5-mini"},
        )
        r = post(gw, CHAT, body(CHAT, "openai/gpt-5-mini"))
        assert r.status_code == 502
        # another workspace's requests, right after, on the same channel
        for _ in range(4):
            r = post(gw, CHAT, body(CHAT, "openai/gpt-5-mini"), token="tg-other-token")
            assert r.status_code == 200, r.text
            r = post(gw, CHAT, body(CHAT, "orcarouter/coding"), token="tg-other-token")
            assert r.status_code == 200, r.text


def test_the_same_answer_on_every_key_never_cools_the_last_usable_key(
    sim: ServerThread,
) -> None:
    """A channel with two keys: the body is refused with a 500 on both. One key is
    cooled (counted once), never both, so the channel stays in service."""
    raw = gateway_config(sim.url, server={"cooldown_seconds": 60, "max_attempts": 2})
    raw["channels"][0]["keys"] = ["sk-a", "sk-b"]
    with ServerThread(create_app(parse_config(raw))) as gw:
        httpx.post(
            f"{sim.url}/_sim/faults",
            json={"kind": "status", "status": 500, "count": 2, "model": "gpt-5-mini"},
        )
        assert post(gw, CHAT, body(CHAT, "openai/gpt-5-mini")).status_code == 502
        for _ in range(3):
            r = post(gw, CHAT, body(CHAT, "openai/gpt-5-mini"), token="tg-other-token")
            assert r.status_code == 200, r.text
