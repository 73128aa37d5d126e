"""The simulated model's deterministic replies and test directives (no HTTP)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.core.tokens import count_tokens
from tiergate.sim.prompt import PromptBlock, SimCall, ToolDef, index_prompt
from tiergate.sim.responder import Reply, parse_directives, plan_reply, synthesize

READ_FILE = ToolDef(
    "read_file",
    "Read a file",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10},
            "mode": {"enum": ["text", "binary"]},
            "verbose": {"type": "boolean"},
        },
        "required": ["path", "limit", "mode"],
    },
)
SEARCH = ToolDef("search", "", {"type": "object", "properties": {"q": {"type": "string"}}})


def reply_for(text: str = "hello", **kw: Any) -> Reply:
    call = SimCall(provider="openai", model="m", blocks=[PromptBlock(text)], directive_text=text)
    for name, value in kw.items():
        setattr(call, name, value)
    return plan_reply(call, index_prompt(call.blocks, call.model).digest, 40)


def test_text_reply_is_deterministic_and_exactly_the_counted_tokens() -> None:
    first = reply_for("What is routing?")
    assert first == reply_for("What is routing?")
    assert first.text and first.finish == "stop" and not first.tool_calls
    assert first.output_tokens == count_tokens(first.text) == 40
    assert reply_for("Something else").text != first.text


@settings(max_examples=60)
@given(st.integers(min_value=1, max_value=400), st.text(max_size=30))
def test_output_directive_gives_exactly_n_tokens(n: int, prompt: str) -> None:
    reply = reply_for(f"{prompt} [[sim:output={n}]]")
    assert reply.output_tokens == count_tokens(reply.text) == n


def test_tools_on_a_user_turn_give_one_call_with_schema_shaped_arguments() -> None:
    reply = reply_for("open it", tools=[READ_FILE, SEARCH])
    assert reply.finish == "tool_calls" and reply.text == ""
    (call,) = reply.tool_calls
    args = json.loads(call.arguments)
    assert call.name == "read_file" and args == call.input
    assert set(args) == {"path", "limit", "mode"}
    assert isinstance(args["path"], str) and 1 <= args["limit"] <= 10 and args["mode"] == "text"
    assert reply.output_tokens == count_tokens("read_file") + count_tokens(call.arguments)


def test_after_a_tool_result_the_model_answers_in_text() -> None:
    reply = reply_for("[[sim:tool]] open it", tools=[READ_FILE], last_turn="tool_result")
    assert reply.finish == "stop" and reply.text and not reply.tool_calls


@pytest.mark.parametrize(
    ("directive", "kw", "expect"),
    [
        ("[[sim:text]]", {"tools": [READ_FILE]}, "text"),
        ("[[sim:tool]]", {"tools": [READ_FILE]}, "tool"),
        ("", {"tools": [READ_FILE], "tool_choice": "none"}, "text"),
        ("[[sim:text]]", {"tools": [READ_FILE, SEARCH], "tool_choice": "search"}, "tool"),
        ("", {"tools": [READ_FILE], "tool_choice": "required", "last_turn": "tool_result"}, "tool"),
    ],
)
def test_tool_or_text_choice(directive: str, kw: dict[str, Any], expect: str) -> None:
    reply = reply_for(f"go {directive}", **kw)
    assert (reply.finish == "tool_calls") == (expect == "tool")


def test_forced_tool_name_is_honoured() -> None:
    reply = reply_for("go", tools=[READ_FILE, SEARCH], tool_choice="search")
    assert [c.name for c in reply.tool_calls] == ["search"]


def test_parallel_tool_calls_and_their_opt_out() -> None:
    reply = reply_for("go [[sim:tools=3]]", tools=[READ_FILE, SEARCH])
    assert [c.name for c in reply.tool_calls] == ["read_file", "search", "read_file"]
    assert len({c.id for c in reply.tool_calls}) == 3
    single = reply_for("go [[sim:tools=3]]", tools=[READ_FILE, SEARCH], parallel_tools=False)
    assert len(single.tool_calls) == 1


def test_bad_args_are_not_json() -> None:
    reply = reply_for("go [[sim:bad_args]]", tools=[READ_FILE])
    with pytest.raises(json.JSONDecodeError):
        json.loads(reply.tool_calls[0].arguments)
    assert reply.tool_calls[0].input is None


def test_max_tokens_truncates_and_finishes_with_length() -> None:
    reply = reply_for("go [[sim:output=100]]", max_tokens=7)
    assert (reply.output_tokens, reply.finish) == (7, "length")
    assert count_tokens(reply.text) == 7
    forced = reply_for("go [[sim:length]]", max_tokens=12)
    assert (forced.output_tokens, forced.finish) == (12, "length")
    tool = reply_for("go", tools=[READ_FILE], max_tokens=4)
    assert tool.finish == "length" and tool.output_tokens <= 4


def test_empty_and_thinking() -> None:
    empty = reply_for("go [[sim:empty]]")
    assert (empty.text, empty.output_tokens, empty.finish) == ("", 0, "stop")
    no_carrier = reply_for("go [[sim:thinking]]")
    assert no_carrier.thinking == ""
    thinking = reply_for("go [[sim:thinking]]", can_think=True)
    assert thinking.thinking and thinking.signature
    assert thinking.output_tokens == thinking.thinking_tokens + count_tokens(thinking.text)


def test_json_response_format_follows_the_schema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}
    reply = reply_for("go", json_schema=schema)
    assert isinstance(json.loads(reply.text)["n"], float)
    assert "answer" in json.loads(reply_for("go", json_mode=True).text)


def test_directive_parsing() -> None:
    assert parse_directives("a [[sim:tools=2]] b [[sim:length]]") == {"tools": 2, "length": 1}
    assert parse_directives("[[sim:Nope]] [sim:x]") == {}


def test_synthesize_handles_common_schema_shapes() -> None:
    rng = random.Random(1)
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "opt": {"type": ["null", "integer"]},
            "kind": {"const": "x"},
            "any": {"anyOf": [{"type": "boolean"}, {"type": "string"}]},
            "nested": {"properties": {"url": {"type": "STRING"}}},
        },
    }
    value = synthesize(schema, rng)
    assert len(value["tags"]) == 2 and isinstance(value["opt"], int)
    assert value["kind"] == "x" and value["any"] is True
    assert value["nested"]["url"].startswith("https://")
