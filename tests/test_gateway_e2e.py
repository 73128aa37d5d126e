"""The gateway over real HTTP, driven by the official openai and anthropic SDKs,
in front of the provider simulator (also real HTTP)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from servers import ANTHROPIC_TOOLS, TOKEN, TOOLS, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.billing import request_cost
from tiergate.config_load import parse_config
from tiergate.core.model import Usage
from tiergate.sim.app import create_sim_app

LONG_SYSTEM = "You are a careful coding agent. " + " ".join(
    f"Rule {i}: keep functions small, name things clearly and test behaviour." for i in range(300)
)


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


def _gateway(sim_url: str, **overrides: Any) -> ServerThread:
    cfg = parse_config(gateway_config(sim_url, **overrides))
    return ServerThread(create_app(cfg))


@pytest.fixture(scope="module")
def gw(sim: ServerThread) -> Iterator[ServerThread]:
    with _gateway(sim.url) as g:
        yield g


@pytest.fixture(autouse=True)
def _clear_faults(sim: ServerThread) -> Iterator[None]:
    yield
    httpx.delete(f"{sim.url}/_sim/faults")


def oai(gw: ServerThread, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=TOKEN, max_retries=0, **kw)


def ant(gw: ServerThread, **kw: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key=TOKEN, max_retries=0, **kw)


# ---- OpenAI in ---------------------------------------------------------------


@pytest.mark.parametrize(
    "model", ["openai/gpt-5-mini", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash"]
)
def test_openai_sdk_non_streaming(gw: ServerThread, model: str) -> None:
    raw = oai(gw).chat.completions.with_raw_response.create(
        model=model,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    )
    resp = raw.parse()
    assert resp.choices[0].message.content
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None and resp.usage.prompt_tokens > 0
    assert resp.usage.completion_tokens > 0
    assert raw.headers["x-orca-resolved-model"] == model
    assert len(raw.headers["x-orca-request-id"]) >= 16
    assert "x-orca-router" not in raw.headers


@pytest.mark.parametrize(
    "model", ["openai/gpt-5-mini", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash"]
)
def test_openai_sdk_streaming_with_usage(gw: ServerThread, model: str) -> None:
    stream = oai(gw).chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Tell me something"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage, finish = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:
                text.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    assert "".join(text)
    assert finish == "stop"
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0


@pytest.mark.parametrize("model", ["openai/gpt-5-mini", "anthropic/claude-sonnet-4-5"])
@pytest.mark.parametrize("stream", [False, True])
def test_openai_sdk_tool_loop(gw: ServerThread, model: str, stream: bool) -> None:
    client = oai(gw)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Open the README please"}]
    if stream:
        calls: dict[int, dict[str, str]] = {}
        for chunk in client.chat.completions.create(
            model=model,
            messages=messages,
            tools=TOOLS,
            stream=True,  # type: ignore[arg-type]
        ):
            for c in chunk.choices:
                for tc in c.delta.tool_calls or []:
                    slot = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                    slot["id"] += tc.id or ""
                    if tc.function:
                        slot["name"] += tc.function.name or ""
                        slot["args"] += tc.function.arguments or ""
        call = calls[0]
        call_id, name, args = call["id"], call["name"], call["args"]
    else:
        first = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        assert first.choices[0].finish_reason == "tool_calls"
        tc = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        call_id, name, args = tc.id, tc.function.name, tc.function.arguments  # type: ignore[union-attr]
    assert name == "read_file"
    assert "path" in json.loads(args)
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call_id, "content": "# README\nhello"})
    second = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content


# ---- Anthropic in ------------------------------------------------------------


@pytest.mark.parametrize(
    "model", ["anthropic/claude-sonnet-4-5", "openai/gpt-5-mini", "gemini/gemini-2.5-flash"]
)
def test_anthropic_sdk_non_streaming(gw: ServerThread, model: str) -> None:
    raw = ant(gw).messages.with_raw_response.create(
        model=model,
        max_tokens=256,
        system="Be brief.",
        messages=[{"role": "user", "content": "Hi"}],
    )
    msg = raw.parse()
    assert msg.type == "message" and msg.role == "assistant"
    assert msg.content[0].type == "text" and msg.content[0].text
    assert msg.stop_reason == "end_turn"
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    assert raw.headers["x-orca-resolved-model"] == model


@pytest.mark.parametrize(
    "model", ["anthropic/claude-sonnet-4-5", "openai/gpt-5-mini", "gemini/gemini-2.5-flash"]
)
def test_anthropic_sdk_streaming(gw: ServerThread, model: str) -> None:
    with ant(gw).messages.stream(
        model=model, max_tokens=256, messages=[{"role": "user", "content": "Tell me more"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.content[0].text == text  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4-5", "openai/gpt-5-mini"])
@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_sdk_tool_loop(gw: ServerThread, model: str, stream: bool) -> None:
    client = ant(gw)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Open the README please"}]
    kw: dict[str, Any] = {"model": model, "max_tokens": 512, "tools": ANTHROPIC_TOOLS}
    if stream:
        with client.messages.stream(messages=messages, **kw) as s:  # type: ignore[arg-type]
            first = s.get_final_message()
    else:
        first = client.messages.create(messages=messages, **kw)  # type: ignore[arg-type]
    assert first.stop_reason == "tool_use"
    use = next(b for b in first.content if b.type == "tool_use")
    assert use.name == "read_file" and "path" in use.input  # type: ignore[union-attr,operator]
    messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": "# README\nhello"}
            ],
        }
    )  # type: ignore[union-attr]
    second = client.messages.create(messages=messages, **kw)  # type: ignore[arg-type]
    assert second.stop_reason == "end_turn"
    assert second.content[0].type == "text"


# ---- usage, cost, cache ------------------------------------------------------


def test_cost_header_matches_usage_and_price(gw: ServerThread) -> None:
    raw = oai(gw).chat.completions.with_raw_response.create(
        model="openai/gpt-5",
        messages=[{"role": "user", "content": "price me"}],
        extra_headers={"X-OrcaRouter-Include-Cost": "true"},
    )
    resp = raw.parse()
    assert resp.usage is not None
    cfg = parse_config(gateway_config("http://x"))
    model_cfg = cfg.channels[0].models["openai/gpt-5"]
    usage = Usage(resp.usage.prompt_tokens, resp.usage.completion_tokens)
    assert float(raw.headers["x-orca-cost"]) == pytest.approx(
        request_cost(usage, model_cfg, "openai"), rel=1e-6
    )


def test_no_cost_header_unless_asked(gw: ServerThread) -> None:
    raw = oai(gw).chat.completions.with_raw_response.create(
        model="openai/gpt-5-mini", messages=[{"role": "user", "content": "x"}]
    )
    assert "x-orca-cost" not in raw.headers


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash"])
def test_cache_hit_on_second_turn_same_key(gw: ServerThread, model: str) -> None:
    """One-key channels: turn 2 of a conversation reads turn 1's prefix from cache."""
    client = oai(gw)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": LONG_SYSTEM},
        {"role": "user", "content": f"First question for {model}"},
    ]
    first = client.chat.completions.create(model=model, messages=messages)
    assert first.usage is not None
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "And a follow-up"},
    ]
    second = client.chat.completions.create(model=model, messages=messages)
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details.cached_tokens >= 1024


def test_anthropic_cache_fields_reported(gw: ServerThread) -> None:
    client = ant(gw)
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    first = client.messages.create(
        model="anthropic/claude-sonnet-4-5",
        max_tokens=100,
        system=system,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": "cache test one"}],
    )
    second = client.messages.create(
        model="anthropic/claude-sonnet-4-5",
        max_tokens=100,
        system=system,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": "cache test two"}],
    )
    assert (first.usage.cache_creation_input_tokens or 0) + (
        first.usage.cache_read_input_tokens or 0
    ) >= 1024
    assert (second.usage.cache_read_input_tokens or 0) >= 1024


# ---- errors, in the caller's format -----------------------------------------


def _post(gw: ServerThread, path: str, body: bytes, **headers: str) -> httpx.Response:
    h = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    h.update(headers)
    return httpx.post(f"{gw.url}{path}", content=body, headers=h, timeout=30)


def test_malformed_json_is_400_in_each_format(gw: ServerThread) -> None:
    r = _post(gw, "/v1/chat/completions", b"{not json")
    assert r.status_code == 400
    assert set(r.json()["error"]) >= {"message", "type", "code"}
    r = _post(gw, "/v1/messages", b"{not json")
    assert r.status_code == 400
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error"


def test_schema_error_is_400(gw: ServerThread) -> None:
    with pytest.raises(openai.BadRequestError):
        oai(gw).chat.completions.create(model="openai/gpt-5-mini", messages="nope")  # type: ignore[arg-type]
    r = _post(
        gw, "/v1/messages", json.dumps({"model": "openai/gpt-5-mini", "messages": []}).encode()
    )
    assert r.status_code == 400


def test_auth_errors_are_401(gw: ServerThread) -> None:
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(
            base_url=f"{gw.url}/v1", api_key="wrong", max_retries=0
        ).chat.completions.create(
            model="openai/gpt-5-mini", messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=gw.url, api_key="wrong", max_retries=0).messages.create(
            model="openai/gpt-5-mini", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    r = httpx.post(f"{gw.url}/v1/chat/completions", json={})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"


def test_unknown_model_is_404(gw: ServerThread) -> None:
    with pytest.raises(openai.NotFoundError):
        oai(gw).chat.completions.create(
            model="nope/nope", messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(anthropic.NotFoundError):
        ant(gw).messages.create(
            model="orcarouter/missing", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )


def test_body_over_limit_is_413(sim: ServerThread) -> None:
    with _gateway(sim.url, server={"max_body_bytes": 4096}) as g:
        big = json.dumps(
            {"model": "openai/gpt-5-mini", "messages": [{"role": "user", "content": "x" * 10_000}]}
        ).encode()
        r = _post(g, "/v1/chat/completions", big)
        assert r.status_code == 413 and r.json()["error"]["type"]
        r = _post(g, "/v1/messages", big)
        assert r.status_code == 413 and r.json()["type"] == "error"


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"kind": "status", "status": 429}, 429),
        ({"kind": "status", "status": 500}, 502),
        ({"kind": "status", "status": 503}, 503),
        ({"kind": "timeout"}, 504),
    ],
)
def test_upstream_failures_map_after_retries(
    sim: ServerThread, fault: dict[str, Any], expected: int
) -> None:
    server = {"request_timeout_seconds": 0.5, "max_attempts": 3, "cooldown_seconds": 0}
    with _gateway(sim.url, server=server) as g:
        httpx.post(f"{sim.url}/_sim/faults", json={**fault, "count": 100, "model": "gpt-5-mini"})
        r = _post(
            g,
            "/v1/chat/completions",
            json.dumps(
                {"model": "openai/gpt-5-mini", "messages": [{"role": "user", "content": "x"}]}
            ).encode(),
        )
        assert r.status_code == expected, r.text
        assert "error" in r.json()
        if expected == 429:
            assert "retry-after" in r.headers
        r = _post(
            g,
            "/v1/messages",
            json.dumps(
                {
                    "model": "openai/gpt-5-mini",
                    "max_tokens": 5,
                    "messages": [{"role": "user", "content": "x"}],
                }
            ).encode(),
        )
        assert r.status_code == expected
        assert r.json()["type"] == "error"


def test_retry_moves_to_another_key(sim: ServerThread) -> None:
    with _gateway(sim.url) as g:
        httpx.post(
            f"{sim.url}/_sim/faults",
            json={"kind": "status", "status": 500, "count": 1, "model": "gpt-5-mini"},
        )
        r = oai(g).chat.completions.create(
            model="openai/gpt-5-mini", messages=[{"role": "user", "content": "retry me"}]
        )
        assert r.choices[0].message.content


def test_models_health_ready(gw: ServerThread) -> None:
    r = httpx.get(f"{gw.url}/v1/models", headers={"authorization": f"Bearer {TOKEN}"})
    ids = {m["id"] for m in r.json()["data"]}
    assert {"openai/gpt-5-mini", "anthropic/claude-sonnet-4-5", "orcarouter/coding"} <= ids
    assert httpx.get(f"{gw.url}/healthz").json()["status"] == "ok"
    assert httpx.get(f"{gw.url}/readyz").status_code == 200


def test_named_router_sets_router_header(gw: ServerThread) -> None:
    raw = oai(gw).chat.completions.with_raw_response.create(
        model="orcarouter/coding", messages=[{"role": "user", "content": "hello"}]
    )
    assert raw.headers["x-orca-router"] == "coding"
    assert raw.headers["x-orca-resolved-model"].startswith(("openai/", "anthropic/"))


def test_example_config_is_valid() -> None:
    from pathlib import Path

    from tiergate.config_load import load_config

    cfg = load_config(Path(__file__).parents[1] / "examples" / "tiergate.yaml", env={})
    assert cfg.router("coding") is not None
