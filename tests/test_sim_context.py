"""Prompts over a model's context window (issue #28): the simulator refuses them
as each provider does, and the gateway relays the 400 in the client's own format
without cooling the channel or key (the client's mistake is nobody's outage)."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app

#: ~150,000 tokens: over gpt-4o's 128,000 and, with max_tokens, claude's 200,000.
LONG = "word " * 150_000


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


@pytest.fixture(scope="module")
def gw(sim: ServerThread) -> Iterator[ServerThread]:
    raw = gateway_config(sim.url)
    raw["channels"][0]["models"]["openai/gpt-4o"] = {"upstream": "gpt-4o"}
    with ServerThread(create_app(parse_config(raw))) as g:
        yield g


def test_the_simulator_enforces_each_models_window_in_its_wire_format(sim: ServerThread) -> None:
    user = [{"role": "user", "content": LONG}]
    r = httpx.post(
        f"{sim.url}/v1/chat/completions",
        json={"model": "gpt-4o", "messages": user},
        headers={"authorization": "Bearer sk-a"},
        timeout=30,
    )
    assert r.status_code == 400
    err = r.json()["error"]
    assert (err["type"], err["code"]) == ("invalid_request_error", "context_length_exceeded")
    assert "maximum context length is 128000 tokens" in err["message"]
    ok = {"model": "gpt-5-mini", "messages": user}  # a 400,000-token window
    assert httpx.post(
        f"{sim.url}/v1/chat/completions", json=ok, headers={"authorization": "Bearer sk-a"}
    ).is_success
    headers = {"x-api-key": "ak-a", "anthropic-version": "2023-06-01"}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": [user[0]] * 2}
    r = httpx.post(f"{sim.url}/v1/messages", json=body, headers=headers, timeout=30)
    assert r.status_code == 400
    doc = r.json()
    assert doc["type"] == "error" and doc["error"]["type"] == "invalid_request_error"
    assert doc["error"]["message"].startswith("prompt is too long: ")
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64_000, "messages": user}
    r = httpx.post(f"{sim.url}/v1/messages", json=body, headers=headers, timeout=30)
    assert r.status_code == 400 and "exceed context limit" in r.json()["error"]["message"]


def test_the_gateway_relays_it_in_the_clients_format_and_cools_nothing(
    gw: ServerThread,
) -> None:
    oai = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=TOKEN, max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(
            model="openai/gpt-4o", messages=[{"role": "user", "content": LONG}]
        )
    assert e.value.code == "context_length_exceeded"
    ant = anthropic.Anthropic(base_url=gw.url, api_key=TOKEN, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as a:
        ant.messages.create(
            model="anthropic/claude-sonnet-4-5",
            max_tokens=1024,
            messages=[{"role": "user", "content": LONG + LONG}],
        )
    assert a.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "context window" in a.value.body["error"]["message"]  # type: ignore[index]
    for stream in (True, False, True):  # refused on one key: no retry, cooldown, ejection
        with pytest.raises(openai.BadRequestError) as e:
            oai.chat.completions.create(
                model="openai/gpt-4o", messages=[{"role": "user", "content": LONG}], stream=stream
            )
        assert e.value.code == "context_length_exceeded"
    health = httpx.get(f"{gw.url}/metrics").text
    healthy = [ln for ln in health.splitlines() if ln.startswith("tiergate_upstream_key_healthy")]
    assert healthy and all(ln.endswith(" 1.0") for ln in healthy), healthy
    failing = [
        ln
        for ln in health.splitlines()
        if ln.startswith("tiergate_upstream_key_consecutive_failures") and not ln.endswith(" 0.0")
    ]
    assert failing == []
    small = ant.messages.create(
        model="anthropic/claude-sonnet-4-5",
        max_tokens=16,
        messages=[{"role": "user", "content": "hi"}],
    )
    assert small.content
