"""The soak's three client wire formats: OpenAI Chat Completions, Anthropic Messages
and OpenAI Responses. No I/O here: bench/soak_load.py sends and reads.

Why: a gateway serves each inbound format through its own parser and renderer
(and, streaming, its own SSE state machine); a soak that speaks only Chat
Completions cannot see a leak or an error in the other two. A session keeps its
conversation in the Chat Completions shape (soak_sessions.py); these functions
render one step's body in the session's wire format and turn that format's
answer, whole or streamed, back into one Chat Completions assistant message, so
the session's checks are the same whatever the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

CHAT = "chat"
ANTHROPIC = "anthropic"
RESPONSES = "responses"
PATHS = {CHAT: "/v1/chat/completions", ANTHROPIC: "/v1/messages", RESPONSES: "/v1/responses"}
ANTHROPIC_MAX_TOKENS = 1024  # required by Messages; the simulator answers ~40 tokens


def render(wire: str, body: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions body (messages, tools, stream, model, extras) in `wire`."""
    if wire == ANTHROPIC:
        return _anthropic_body(body)
    if wire == RESPONSES:
        return _responses_body(body)
    return body


def _args(raw: str) -> Any:
    try:
        return orjson.loads(raw or "{}")
    except orjson.JSONDecodeError:
        return {}


def _extras(body: dict[str, Any]) -> dict[str, Any]:
    """Fields passed through unchanged (model, stream, session_tier)."""
    skip = {"messages", "tools", "stream_options"}
    return {k: v for k, v in body.items() if k not in skip}


# ---- Anthropic Messages ---------------------------------------------------------------


def _anthropic_body(body: dict[str, Any]) -> dict[str, Any]:
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:  # tool results of one reply: one user turn
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for m in body["messages"]:
        role = m["role"]
        if role == "system":
            system.append(m["content"])
        elif role == "user":
            add("user", [{"type": "text", "text": m["content"]}])
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"]}
            add("user", [{**block, "content": m["content"]}])
        else:
            blocks: list[dict[str, Any]] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": m["content"]})
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                use = {"type": "tool_use", "id": call["id"], "name": fn["name"]}
                blocks.append({**use, "input": _args(fn["arguments"])})
            add("assistant", blocks)
    out = {**_extras(body), "messages": turns, "max_tokens": ANTHROPIC_MAX_TOKENS}
    if system:
        out["system"] = "\n\n".join(system)
    if body.get("tools"):
        out["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"]["description"],
                "input_schema": t["function"]["parameters"],
            }
            for t in body["tools"]
        ]
    return out


def anthropic_message(answer: dict[str, Any]) -> dict[str, Any]:
    """A Messages response's content blocks as one assistant message."""
    text = "".join(b.get("text", "") for b in answer["content"] if b["type"] == "text")
    calls = [
        _call(b["id"], b["name"], orjson.dumps(b.get("input") or {}).decode())
        for b in answer["content"]
        if b["type"] == "tool_use"
    ]
    return _message(text, calls)


@dataclass
class AnthropicStream:
    """Folds Messages SSE events; `done` on message_stop, `error` on an error event."""

    text: list[str] = field(default_factory=list)
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    done: bool = False
    error: bool = False

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "content_block_start":
            block = event["content_block"]
            if block["type"] == "tool_use":
                self.blocks[event["index"]] = {"id": block["id"], "name": block["name"], "json": ""}
        elif kind == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                self.text.append(delta["text"])
            elif delta["type"] == "input_json_delta":
                self.blocks[event["index"]]["json"] += delta["partial_json"]
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.error = True

    def message(self) -> dict[str, Any]:
        calls = [_call(b["id"], b["name"], b["json"]) for _, b in sorted(self.blocks.items())]
        return _message("".join(self.text), calls)


# ---- OpenAI Responses -----------------------------------------------------------------


def _responses_body(body: dict[str, Any]) -> dict[str, Any]:
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for m in body["messages"]:
        role = m["role"]
        if role == "system":
            instructions.append(m["content"])
        elif role == "user":
            items.append({"type": "message", "role": "user", "content": m["content"]})
        elif role == "tool":
            out = {"type": "function_call_output", "call_id": m["tool_call_id"]}
            items.append({**out, "output": m["content"]})
        else:
            if m.get("content"):
                text = [{"type": "output_text", "text": m["content"]}]
                items.append({"type": "message", "role": "assistant", "content": text})
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                item = {"type": "function_call", "call_id": call["id"], "name": fn["name"]}
                items.append({**item, "arguments": fn["arguments"]})
    out = {**_extras(body), "input": items, "store": False}
    if instructions:
        out["instructions"] = "\n\n".join(instructions)
    if body.get("tools"):
        out["tools"] = [{"type": "function", **t["function"]} for t in body["tools"]]
    return out


def responses_message(output: list[dict[str, Any]]) -> dict[str, Any]:
    """A response's output items as one assistant message."""
    text = "".join(
        part.get("text", "")
        for item in output
        if item.get("type") == "message"
        for part in item.get("content") or []
        if part.get("type") == "output_text"
    )
    calls = [
        _call(item["call_id"], item["name"], item.get("arguments") or "")
        for item in output
        if item.get("type") == "function_call"
    ]
    return _message(text, calls)


@dataclass
class ResponsesStream:
    """Folds Responses SSE events: finished items from `response.output_item.done`,
    `done` on response.completed, `error` on response.failed / incomplete / error."""

    items: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    error: bool = False

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response.output_item.done":
            self.items.append(event["item"])
        elif kind == "response.completed":
            self.done = True
        elif kind in ("response.failed", "response.incomplete", "error"):
            self.error = True

    def message(self) -> dict[str, Any]:
        return responses_message(self.items)


# ---- shared -----------------------------------------------------------------------------


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _message(text: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "assistant", "content": text or None, "tool_calls": calls}


def error_code(wire: str, body: dict[str, Any]) -> str | None:
    """The error code (OpenAI shapes) or type (Anthropic shape) of an error body."""
    err = body.get("error") or {}
    if wire == ANTHROPIC:
        return err.get("code") or err.get("type")
    return err.get("code")
