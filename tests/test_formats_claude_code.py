"""What current Anthropic clients send, parsed and rendered for each upstream format.

Mid-conversation system messages, adaptive thinking, context_management,
output_config, server tools, unknown block types and betas: each either works
or is dropped on purpose (docs/conversion.md), and a valid request is never
refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import tiergate.formats.anthropic as anthropic_fmt
import tiergate.formats.gemini as gemini_fmt
import tiergate.formats.openai as openai_fmt
from claude_code_support import BETAS, MID_SYSTEM, USER_ID, first_turn, tool_turn
from tiergate.core.model import ChatRequest, Message, RawBlock, TextPart, ToolCall
from tiergate.formats.errors import FormatError
from tiergate.lanes.decide import request_facts
from tiergate.routing.difficulty import delta_features
from tiergate.routing.features import agent_state
from tiergate.routing.transcript import summarize


def parse(body: dict[str, Any], betas: list[str] = BETAS) -> ChatRequest:
    req = anthropic_fmt.parse_request(body)
    req.betas = anthropic_fmt.parse_betas([",".join(betas)])
    return req


# ---- parsing ------------------------------------------------------------------


def test_first_turn_parses_with_the_system_message_in_place() -> None:
    req = parse(first_turn("m", stream=True))
    assert [m.role for m in req.messages] == ["user", "system"]
    assert req.messages[1].text() == MID_SYSTEM
    assert req.thinking == {"type": "adaptive"}
    assert req.extra["context_management"]["edits"][0]["type"] == "clear_thinking_20251015"
    assert req.extra["output_config"] == {"effort": "high"}
    assert req.metadata["user_id"] == USER_ID
    assert len(req.system) == 3


def test_tool_turn_keeps_unknown_blocks_and_server_tools() -> None:
    req = parse(tool_turn("m", stream=False))
    roles = [m.role for m in req.messages]
    assert roles == ["user", "system", "assistant", "tool", "user", "system"]
    assistant = req.messages[2]
    assert [type(p).__name__ for p in assistant.content][:2] == ["ThinkingPart", "ThinkingPart"]
    assert assistant.content[1].redacted  # type: ignore[union-attr]
    user = req.messages[4]
    assert isinstance(user.content[0], RawBlock) and user.content[0].block["type"] == "document"
    native = [t for t in req.tools if t.native is not None]
    assert [t.name for t in native] == ["web_search"]
    assert req.extra["speed"] == "standard"
    # clear_at=next_user_message: a later user message exists, so it is no longer shown
    assert req.messages[1].content == [] and req.messages[1].raw is not None


def test_a_leading_system_message_joins_the_system_prompt() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "hi"},
        ],
    }
    req = anthropic_fmt.parse_request(body)
    assert req.system == [TextPart("Be terse.")]
    assert [m.role for m in req.messages] == ["user"]


def test_a_system_message_with_only_a_per_turn_output_config() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "system", "output_config": {"effort": "low"}},
        ],
    }
    req = anthropic_fmt.parse_request(body)
    assert req.messages[1].role == "system" and req.messages[1].content == []
    rendered = anthropic_fmt.render_request(parse(body), "claude")
    assert rendered["messages"][1] == {"role": "system", "output_config": {"effort": "low"}}


def test_newer_thinking_types_and_image_sources_are_accepted() -> None:
    body = {
        "model": "m",
        "max_tokens": 2000,
        "thinking": {"type": "between_tools"},
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
                    {"type": "search_result", "source": "s", "title": "t", "content": []},
                    {"type": "text", "text": "look"},
                ],
            }
        ],
    }
    req = anthropic_fmt.parse_request(body)
    out = anthropic_fmt.render_request(req, "claude")
    assert out["thinking"] == {"type": "between_tools"}
    kinds = [b["type"] for b in out["messages"][0]["content"]]
    assert kinds == ["image", "search_result", "text"]
    assert out["messages"][0]["content"][0]["source"]["type"] == "file"
    oa = openai_fmt.render_request(req, "gpt")
    assert oa["messages"] == [{"role": "user", "content": "look"}]


def test_a_block_without_a_type_is_still_refused() -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{}]}]}
    with pytest.raises(FormatError) as err:
        anthropic_fmt.parse_request(body)
    assert err.value.param == "messages[0].content[0].type"


def test_betas_parse_and_the_client_auth_beta_is_not_forwarded() -> None:
    assert anthropic_fmt.parse_betas(["a, b", "b,c", " "]) == ("a", "b", "c")
    req = parse(first_turn("m", stream=False))
    forwarded = anthropic_fmt.upstream_betas(req)
    assert "oauth-2025-04-20" not in forwarded
    assert "mid-conversation-system-2026-04-07" in forwarded


# ---- rendering per upstream ----------------------------------------------------


def test_anthropic_upstream_with_the_beta_gets_everything_as_sent() -> None:
    body = tool_turn("m", stream=False)
    out = anthropic_fmt.render_request(parse(body), "claude-opus")
    assert [m["role"] for m in out["messages"]] == ["user", "system", "assistant", "user", "system"]
    assert out["messages"][1] == body["messages"][1]  # clear_at kept: Anthropic applies it
    assert out["messages"][4] == body["messages"][4]
    assert out["context_management"] == body["context_management"]
    assert out["output_config"] == {"effort": "high"}
    assert out["thinking"] == {"type": "adaptive"}
    assert out["speed"] == "standard"
    assert {"type": "web_search_20250305", "name": "web_search", "max_uses": 3} in out["tools"]
    assistant = out["messages"][2]["content"]
    assert [b["type"] for b in assistant] == ["thinking", "redacted_thinking", "text", "tool_use"]
    user = out["messages"][3]["content"]
    assert [b["type"] for b in user] == ["tool_result", "document", "text"]
    assert out["metadata"] == {"user_id": USER_ID}


def test_anthropic_upstream_without_the_beta_gets_the_system_message_folded() -> None:
    out = anthropic_fmt.render_request(parse(first_turn("m", False), betas=[]), "claude")
    assert [m["role"] for m in out["messages"]] == ["user"]
    texts = [b["text"] for b in out["messages"][0]["content"]]
    assert texts[-1] == f"<system>\n{MID_SYSTEM}\n</system>"


def test_openai_upstream_gets_a_system_message_in_place_and_no_anthropic_fields() -> None:
    out = openai_fmt.render_request(parse(tool_turn("m", stream=True)), "gpt-5")
    roles = [m["role"] for m in out["messages"]]
    # 3 system prompt blocks, the conversation; the cleared system message is gone
    assert roles == ["system"] * 3 + ["user", "assistant", "tool", "user", "system"]
    assert out["messages"][-1] == {"role": "system", "content": MID_SYSTEM}
    assert out["messages"][-2] == {"role": "user", "content": "Now summarise"}  # no document
    assert [t["function"]["name"] for t in out["tools"]] == ["Bash", "Read"]  # no web_search
    for field in ("context_management", "output_config", "thinking", "speed", "metadata"):
        assert field not in out


def test_folding_keeps_tool_results_first_and_uses_the_previous_turn_last() -> None:
    req = ChatRequest(
        model="m",
        messages=[
            Message("user", [TextPart("go")]),
            Message("assistant", tool_calls=[ToolCall("t1", "Bash", "{}")]),
            Message("tool", [TextPart("ok")], tool_call_id="t1"),
            Message("system", [TextPart("careful")]),
            Message("user", [TextPart("next")]),
            Message("assistant", [TextPart("done")]),
            Message("user", [TextPart("last")]),
            Message("system", [TextPart("final note")]),
        ],
    )
    out = anthropic_fmt.render_request(req, "claude")["messages"]
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant", "user"]
    assert [b["type"] for b in out[2]["content"]] == ["tool_result", "text", "text"]
    assert out[2]["content"][1]["text"] == "<system>\ncareful\n</system>"
    assert out[4]["content"][-1]["text"] == "<system>\nfinal note\n</system>"


def test_gemini_upstream_gets_the_system_message_as_marked_user_text() -> None:
    out = gemini_fmt.render_request(parse(first_turn("m", stream=False)), "gemini-2.5-flash")
    assert [c["role"] for c in out["contents"]] == ["user"]
    assert out["contents"][0]["parts"][-1] == {"text": f"<system>\n{MID_SYSTEM}\n</system>"}
    declared = [d["name"] for d in out["tools"][0]["functionDeclarations"]]
    assert declared == ["Bash", "Read"]


def test_output_config_format_becomes_a_json_schema_elsewhere() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    body = {
        "model": "m",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "answer"}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    }
    req = anthropic_fmt.parse_request(body)
    oa = openai_fmt.render_request(req, "gpt")
    assert oa["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema},
    }
    assert anthropic_fmt.render_request(req, "claude")["output_config"] == body["output_config"]


def test_openai_clients_mid_conversation_system_messages_stay_in_place() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "top"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "developer", "content": "now be formal"},
            {"role": "user", "content": "and?"},
        ],
    }
    req = openai_fmt.parse_request(body)
    assert req.system == [TextPart("top")]
    out = openai_fmt.render_request(req, "gpt")
    assert [m["role"] for m in out["messages"]] == ["system", "user", "assistant", "system", "user"]
    folded = anthropic_fmt.render_request(req, "claude")  # no beta from an OpenAI client
    assert [m["role"] for m in folded["messages"]] == ["user", "assistant", "user"]
    assert [b["text"] for b in folded["messages"][2]["content"]] == [
        "<system>\nnow be formal\n</system>",
        "and?",
    ]


# ---- scorers: a system message is not a user ask --------------------------------


def _turn(*messages: Message) -> ChatRequest:
    return ChatRequest(model="m", messages=list(messages))


def test_the_delta_scorer_ignores_an_injected_system_message() -> None:
    ask = Message("user", [TextPart("rename a variable")])
    heavy = Message("system", [TextPart("prove the theorem step by step " * 200)])
    assert delta_features(_turn(ask, heavy)) == delta_features(_turn(ask))


def test_turn_counts_and_lane_boundaries_skip_system_messages() -> None:
    msgs = [
        Message("user", [TextPart("a")]),
        Message("system", [TextPart("note")]),
        Message("user", [TextPart("b")]),
        Message("assistant", [TextPart("c")]),
        Message("user", [TextPart("d")]),
        Message("system", [TextPart("reminder")]),
    ]
    req = _turn(*msgs)
    assert agent_state(req).turns == 2
    assert summarize(req).agent_state(req).turns == 2  # the session summary agrees
    facts = request_facts(msgs, "scope")
    assert facts.ends_with_user and facts.user_turns == 3


# ---- server tool blocks in answers (Claude Code's WebSearch) ---------------------

SEARCH_USE = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "url": "https://example.com", "title": "Example"}],
}


def _sse(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], json.dumps(e)) for e in events]


def test_server_tool_blocks_are_relayed_to_anthropic_clients_streamed() -> None:
    upstream = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {**SEARCH_USE, "input": {}}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"query": "tier'},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": 'gate"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": SEARCH_RESULT},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "text_delta", "text": "Found it."},
        },
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    parser = anthropic_fmt.StreamParser()
    events = [ev for kind, data in _sse(upstream) for ev in parser.feed(kind, data)]
    renderer = anthropic_fmt.StreamRenderer("claude-code-model")
    wire = b"".join(renderer.render(ev) for ev in events).decode()
    starts = [
        json.loads(line[6:])["content_block"]
        for line in wire.splitlines()
        if line.startswith("data: ") and '"content_block_start"' in line
    ]
    assert starts[0] == {**SEARCH_USE, "input": {"query": "tiergate"}}
    assert starts[1] == SEARCH_RESULT
    assert starts[2]["type"] == "text"
    # an OpenAI client gets the text only
    oa = openai_fmt.StreamRenderer("m", False)
    relayed = b"".join(oa.render(ev) for ev in events).decode()
    assert "Found it." in relayed and "web_search" not in relayed


def test_server_tool_blocks_are_relayed_to_anthropic_clients_whole() -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "model": "claude",
        "content": [
            {**SEARCH_USE, "input": {"query": "tiergate"}},
            SEARCH_RESULT,
            {"type": "text", "text": "Found it."},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }
    resp = anthropic_fmt.parse_response(body)
    out = anthropic_fmt.render_response(resp, "m")
    assert out["content"] == body["content"]
    assert openai_fmt.render_response(resp, "m")["choices"][0]["message"]["content"] == "Found it."
