"""Bad input never becomes a 500 or a traceback: property-based fuzzing of the
inbound APIs over real HTTP. Every refusal is a 4xx in the caller's format."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
roles = st.sampled_from(
    ["user", "assistant", "system", "developer", "tool", "function", "wizard", ""]
)
content = (
    st.text(max_size=60)
    | st.lists(
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(
                    ["text", "image_url", "image", "tool_result", "tool_use", "thinking", "bogus"]
                )
            },
            optional={
                "text": json_values,
                "image_url": json_values,
                "source": json_values,
                "tool_use_id": json_values,
                "content": json_values,
                "id": json_values,
                "name": json_values,
                "input": json_values,
            },
        ),
        max_size=3,
    )
    | json_values
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": roles, "content": content},
        optional={"tool_call_id": json_values, "tool_calls": json_values, "name": json_values},
    ),
    max_size=4,
)
models = (
    st.sampled_from(["openai/gpt-5-mini", "orcarouter/coding", "nope", "", "auto:coding"])
    | json_values
)
bodies = (
    st.fixed_dictionaries(
        {"model": models, "messages": messages},
        optional={
            "max_tokens": json_values,
            "stream": json_values,
            "tools": json_values,
            "tool_choice": json_values,
            "system": json_values,
            "temperature": json_values,
            "response_format": json_values,
            "metadata": json_values,
            "n": json_values,
            "session_tier": json_values,
            "stream_options": json_values,
        },
    )
    | json_values
)


@pytest.fixture(scope="module")
def gw() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as sim:
        cfg = parse_config(gateway_config(sim.url, server={"max_body_bytes": 65536}))
        with ServerThread(create_app(cfg)) as g:
            yield g


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30, headers={"authorization": f"Bearer {TOKEN}"}) as c:
        yield c


def _check(r: httpx.Response, path: str) -> None:
    assert r.status_code < 500, (r.status_code, r.text[:500])
    assert "Traceback" not in r.text
    if r.status_code >= 400:
        body = r.json()
        if path == "/v1/messages":
            assert body["type"] == "error" and isinstance(body["error"]["message"], str)
        else:
            assert isinstance(body["error"]["message"], str) and "type" in body["error"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=bodies)
def test_arbitrary_bodies_get_a_clean_answer(
    gw: ServerThread, client: httpx.Client, path: str, body: Any
) -> None:
    if isinstance(body, dict) and body.get("stream") is True:
        body["stream"] = False  # streamed 200s are covered elsewhere; keep this fast
    r = client.post(f"{gw.url}{path}", content=json.dumps(body))
    _check(r, path)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_including_invalid_utf8(
    gw: ServerThread, client: httpx.Client, path: str, raw: bytes
) -> None:
    _check(client.post(f"{gw.url}{path}", content=raw), path)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
def test_deeply_nested_content_is_refused_cleanly(
    gw: ServerThread, client: httpx.Client, path: str
) -> None:
    for depth in (200, 5000):  # within and beyond the JSON parser's nesting limit
        nested = "[" * depth + '"x"' + "]" * depth
        body = (
            '{"model": "openai/gpt-5-mini", "max_tokens": 5, "messages": '
            f'[{{"role": "user", "content": {nested}}}]}}'
        )
        _check(client.post(f"{gw.url}{path}", content=body), path)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
def test_huge_body_and_header(gw: ServerThread, client: httpx.Client, path: str) -> None:
    r = client.post(f"{gw.url}{path}", content=b"[" * 200_000)
    assert r.status_code == 413
    r = client.post(f"{gw.url}{path}", content=b"{}", headers={"x-session-id": "s" * 60_000})
    assert r.status_code in (400, 413, 431)


@pytest.mark.parametrize(
    "session_id",
    [
        "",
        " ",
        "\x00\x01",
        "a" * 10_000,
        "🙂" * 300,
        "../../etc/passwd",
        '{"session_id": 1}',
        "user_x_account_y_session_",
        "%s%n",
        "\\u0000",
    ],
)
def test_session_ids_of_every_shape(
    gw: ServerThread, client: httpx.Client, session_id: str
) -> None:
    body = {
        "model": "orcarouter/coding",
        "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"session_id": session_id},
        "user": session_id,
    }
    r = client.post(f"{gw.url}/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text


def test_tool_result_without_a_call_is_a_4xx(gw: ServerThread, client: httpx.Client) -> None:
    body = {
        "model": "anthropic/claude-sonnet-4-5",
        "max_tokens": 10,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}],
            }
        ],
    }
    r = client.post(f"{gw.url}/v1/messages", json=body)
    _check(r, "/v1/messages")
    assert 400 <= r.status_code < 500
