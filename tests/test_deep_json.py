"""Deep JSON is a 400 naming its field, never a 5xx (issue #27 item 5).

orjson parses 1,024 levels but encodes 255, so a body nested 254 to 1,024
levels deep used to parse and then fail with a 500 when re-encoded. Every
inbound endpoint, streamed or not, is sent nestings of 1 to 2,000 levels in
the free-form fields clients fill: tool schemas, tool_use input,
response_format / text.format schemas, embedding input."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.formats.depth import MAX_DEPTH, depth_error, field_name
from tiergate.sim.app import create_sim_app

NEST = "@@NEST@@"  # the placeholder string the deep value replaces
DEPTHS = (1, 2, 8, 32, 50, 60, 62, 63, 64, 65, 100, 200, 253, 254, 255, 256, 257, 500)
DEPTHS += (1000, 1021, 1022, 1023, 1024, 1025, 1026, 1500, 2000)
USER = {"role": "user", "content": "hi"}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": NEST}
TOOL_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
MESSAGES_WITH_TOOL_USE = [USER, {"role": "assistant", "content": [TOOL_USE]}]
MESSAGES_WITH_TOOL_USE.append({"role": "user", "content": [TOOL_RESULT]})
SCHEMA = {"type": "object", "properties": {"x": NEST}}
ANTHROPIC_TOOL = {"name": "read_file", "description": "Read", "input_schema": SCHEMA}

#: (case, path, body with NEST where the deep value goes, the field the 400 names)
CASES: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "chat tool schema",
        "/v1/chat/completions",
        {
            "model": "openai/gpt-5-mini",
            "messages": [USER],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": SCHEMA}}],
        },
        "tools[0].function.parameters",
    ),
    (
        "chat response_format",
        "/v1/chat/completions",
        {
            "model": "openai/gpt-5-mini",
            "messages": [USER],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "r", "schema": NEST},
            },
        },
        "response_format.json_schema.schema",
    ),
    (
        "messages tool schema",
        "/v1/messages",
        {
            "model": "anthropic/claude-sonnet-4-5",
            "max_tokens": 16,
            "messages": [USER],
            "tools": [ANTHROPIC_TOOL],
        },
        "tools[0].input_schema",
    ),
    (
        "messages tool_use input",
        "/v1/messages",
        {
            "model": "anthropic/claude-sonnet-4-5",
            "max_tokens": 16,
            "messages": MESSAGES_WITH_TOOL_USE,
            "tools": [{**ANTHROPIC_TOOL, "input_schema": {"type": "object"}}],
        },
        "messages[1].content[0].input",
    ),
    (
        "responses tool schema",
        "/v1/responses",
        {
            "model": "openai/gpt-5-mini",
            "input": "hi",
            "tools": [{"type": "function", "name": "f", "parameters": SCHEMA}],
        },
        "tools[0].parameters",
    ),
    (
        "responses text.format",
        "/v1/responses",
        {
            "model": "openai/gpt-5-mini",
            "input": "hi",
            "text": {"format": {"type": "json_schema", "name": "r", "schema": NEST}},
        },
        "text.format.schema",
    ),
    (
        "embeddings input",
        "/v1/embeddings",
        {"model": "emb/small", "input": NEST},
        "input",
    ),
    (
        "count_tokens tool schema",
        "/v1/messages/count_tokens",
        {"model": "anthropic/claude-sonnet-4-5", "messages": [USER], "tools": [ANTHROPIC_TOOL]},
        "tools[0].input_schema",
    ),
    (
        "count_tokens tool_use input",
        "/v1/messages/count_tokens",
        {"model": "anthropic/claude-sonnet-4-5", "messages": MESSAGES_WITH_TOOL_USE},
        "messages[1].content[0].input",
    ),
]
STREAMING = ("/v1/chat/completions", "/v1/messages", "/v1/responses")


def nested(depth: int, *, arrays: bool = False) -> str:
    """`depth` levels of objects (`{"a":{"a":{}}}`) or arrays, as JSON text (no
    encoder can write it past 255 levels)."""
    if arrays:
        return "[" * depth + "1" + "]" * depth
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def body_text(template: dict[str, Any], depth: int, *, stream: bool, arrays: bool) -> bytes:
    doc = {**template, "stream": True} if stream else template
    text = orjson.dumps(doc)
    assert text.count(b'"@@NEST@@"') == 1
    return text.replace(b'"@@NEST@@"', nested(depth, arrays=arrays).encode())


@pytest.fixture(scope="module")
def gw() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as sim:
        cfg = gateway_config(sim.url)
        cfg["channels"].append(
            {
                "name": "emb",
                "type": "openai_compatible",
                "base_url": f"{sim.url}/v1",
                "keys": ["sk-emb"],
                "models": {"emb/small": {"upstream": "text-embedding-3-small"}},
            }
        )
        with ServerThread(create_app(parse_config(cfg))) as gateway:
            yield gateway


def _message(path: str, r: httpx.Response) -> str:
    body = r.json()
    if path.startswith("/v1/messages"):
        assert body["type"] == "error"  # Anthropic's error shape
    return str(body["error"]["message"])


@pytest.mark.parametrize(("case", "path", "template", "field"), CASES, ids=[c[0] for c in CASES])
def test_no_depth_gives_a_5xx(
    case: str, path: str, template: dict[str, Any], field: str, gw: ServerThread
) -> None:
    headers = {
        "authorization": f"Bearer {TOKEN}",
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
    }
    embeddings = path == "/v1/embeddings"  # its input nests arrays
    with httpx.Client(base_url=gw.url, headers=headers, timeout=10) as client:
        for stream in (False, True) if path in STREAMING else (False,):
            for depth in DEPTHS:
                text = body_text(template, depth, stream=stream, arrays=embeddings)
                r = client.post(path, content=text)
                what = f"{case} depth {depth} stream={stream}: {r.status_code} {r.text[:200]}"
                assert r.status_code < 500, what
                if depth <= (2 if embeddings else 32):  # input: a list of token arrays
                    assert r.status_code == 200, what
                elif depth >= MAX_DEPTH:
                    assert r.status_code == 400, what
                    message = _message(path, r)
                    if depth <= 1000:  # past 1,024 levels in all, the parser refuses it
                        assert message == f"{field} nested deeper than {MAX_DEPTH} levels", what
                    else:
                        assert message in (
                            f"{field} nested deeper than {MAX_DEPTH} levels",
                            "Request body is not valid JSON",
                        ), what


def test_every_depth_that_passes_can_be_re_encoded() -> None:
    """1..2,000 levels: whatever the check lets through, orjson can encode."""
    for depth in range(1, 2001):
        text = '{"tools":[{"input_schema":' + nested(depth) + "}]}"
        try:
            body = orjson.loads(text)
        except orjson.JSONDecodeError:
            assert depth > 1000
            continue
        error = depth_error(body)
        assert (error is None) == (depth + 3 <= MAX_DEPTH), depth  # 3 levels above the schema
        if error is None:
            orjson.dumps(body)
        else:
            assert error == f"tools[0].input_schema nested deeper than {MAX_DEPTH} levels"


def test_field_names() -> None:
    assert field_name(["tools", 0, "function", "parameters", "properties", "a"]) == (
        "tools[0].function.parameters"
    )
    assert field_name(["messages", 2, "content", 0, "content", 0, "content"]) == (
        "messages[2].content[0]"
    )
    assert field_name([]) == "body"
