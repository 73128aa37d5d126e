"""From an agent's logged conversation to replay-corpus turns.

Every importer reduces its log format to a `Transcript`: the chat messages in
the order the agent produced them, in clean OpenAI chat-completions form, each
tagged with the conversation ("stream") it belongs to. Most agents keep one
stream; a multi-agent system (CodeR's manager, reproducer, programmer...) keeps
one per sub-agent, and each sub-agent's calls carry only its own history.

A turn is one model call, so `session_doc` emits a turn at every assistant
message: its `request` is the stream's messages before it (the cumulative
history the agent sent), its `response` is the assistant message itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from tiergate.replay.corpus import ROUTER_MODEL

#: Protocols a session can speak, decided from its own messages.
TEXT_PROTOCOL = "text"
TOOL_CALL_PROTOCOL = "tool-call"


@dataclass
class Transcript:
    """One agent session as logged: messages in order, tagged with their stream."""

    session_id: str
    key: str
    """What a labels file joins on (an instance id where the log names one)."""
    framework: str
    source: str
    model: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    messages: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    times: list[float | None] = field(default_factory=list)
    """Unix time of each message where the log records it (None where not)."""
    prefilled: set[int] = field(default_factory=set)
    """Indexes of assistant messages copied into a stream's history, not model calls."""

    def add(
        self,
        message: dict[str, Any] | None,
        stream: str = "main",
        at: float | None = None,
        *,
        call: bool = True,
    ) -> None:
        """Append a message; `call=False` for an assistant message the agent pasted in
        as history (a conversation seeded with another's), which was never a call."""
        if message is not None:
            if not call:
                self.prefilled.add(len(self.messages))
            self.messages.append((stream, message))
            self.times.append(at)

    def protocol(self) -> str:
        """`tool-call` when any assistant message calls a tool, else `text`."""
        for _, m in self.messages:
            if m["role"] == "assistant" and m.get("tool_calls"):
                return TOOL_CALL_PROTOCOL
        return TEXT_PROTOCOL


def text_of(content: Any) -> str:
    """The text of an OpenAI or Anthropic content value (string or list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for p in content:
            if isinstance(p, str):
                out.append(p)
            elif isinstance(p, Mapping):
                if isinstance(p.get("text"), str):
                    out.append(p["text"])
                elif p.get("type") == "tool_result":
                    out.append(text_of(p.get("content")))
        return "\n".join(out)
    return str(content)


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """One OpenAI tool call; object arguments are serialised as the wire carries them."""
    if not isinstance(arguments, str):
        arguments = orjson.dumps(arguments).decode()
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def clean_tool_calls(raw: Any) -> list[dict[str, Any]]:
    """OpenAI-shaped tool calls from a logged list (LiteLLM objects, dicts)."""
    calls = []
    for i, c in enumerate(raw or ()):
        if not isinstance(c, Mapping):
            continue
        fn = c.get("function") or {}
        name = fn.get("name") or c.get("name")
        if not name:
            continue
        args = fn.get("arguments", c.get("arguments", ""))
        calls.append(tool_call(str(c.get("id") or f"call_{i}"), str(name), args or ""))
    return calls


def clean_message(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    """An OpenAI message with only the keys the wire carries; None for unknown roles.

    Logged messages carry framework extras (`extra`, `agent`, `thought`,
    `provider_specific_fields`...) that an agent never sends; they are dropped.
    """
    role = raw.get("role")
    if role in ("system", "developer", "user"):
        return {"role": role, "content": text_of(raw.get("content"))}
    if role == "assistant":
        m: dict[str, Any] = {"role": "assistant", "content": text_of(raw.get("content"))}
        calls = clean_tool_calls(raw.get("tool_calls"))
        if calls:
            m["tool_calls"] = calls
            m["content"] = m["content"] or None
        return m
    if role == "tool":
        # SWE-agent 1.x logs the answered calls as a list, `tool_call_ids`.
        ids = raw.get("tool_call_ids")
        call_id = raw.get("tool_call_id") or (ids[0] if isinstance(ids, list) and ids else None)
        return {
            "role": "tool",
            "tool_call_id": str(call_id or "call_0"),
            "content": text_of(raw.get("content")),
        }
    return None


def _response(m: Mapping[str, Any]) -> dict[str, Any]:
    calls = m.get("tool_calls") or []
    out: dict[str, Any] = {"content": m.get("content") or ""}
    if calls:
        out["tool_calls"] = calls
    out["finish_reason"] = "tool_calls" if calls else "stop"
    return out


def _close_tool_calls(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Answer tool calls the log left unanswered, so every request is well formed.

    An agent whose tool call had no logged result (a crash, a step limit)
    would still have had to send a result before calling the model again.
    """
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for m in history:
        if m["role"] != "tool" and pending:
            out.extend({"role": "tool", "tool_call_id": cid, "content": ""} for cid in pending)
            pending = []
        if m["role"] == "tool" and m["tool_call_id"] in pending:
            pending.remove(m["tool_call_id"])
        out.append(m)
        if m["role"] == "assistant":
            pending = [c["id"] for c in m.get("tool_calls") or ()]
    if pending:
        out.extend({"role": "tool", "tool_call_id": cid, "content": ""} for cid in pending)
    return out


def session_doc(
    t: Transcript,
    *,
    label: str | None = None,
    archetype: str | None = None,
    needs_strong: bool = False,
) -> dict[str, Any] | None:
    """The replay-corpus session of a transcript; None when it has no model call.

    `needs_strong` marks every turn (session-level ground truth, from a label).
    """
    streams: dict[str, list[dict[str, Any]]] = {}
    last_call: dict[str, float] = {}
    turns: list[dict[str, Any]] = []
    for i, ((stream, m), at) in enumerate(zip(t.messages, t.times, strict=True)):
        history = streams.setdefault(stream, [])
        called = i not in t.prefilled
        if called and m["role"] == "assistant" and any(h["role"] != "system" for h in history):
            request: dict[str, Any] = {
                "model": ROUTER_MODEL,
                "messages": _close_tool_calls(history),
            }
            if t.tools:
                request["tools"] = t.tools
            turn: dict[str, Any] = {
                "request": request,
                "response": _response(m),
                "needs_strong": needs_strong,
            }
            if at is not None:
                prev = last_call.get(stream)
                turn["idle_seconds_before"] = round(max(0.0, at - prev), 3) if prev else 0.0
                last_call[stream] = at
            turns.append(turn)
        history.append(m)
    if not turns:
        return None
    doc: dict[str, Any] = {"session_id": t.session_id}
    if archetype:
        doc["archetype"] = archetype
    if label is not None:
        doc["label"] = label
    doc["source"] = {
        "framework": t.framework,
        "protocol": t.protocol(),
        "model": t.model,
        "file": t.source,
        "key": t.key,
    }
    doc["turns"] = turns
    return doc


def iso_time(raw: Any) -> float | None:
    """Unix time of an ISO-8601 timestamp as logs write it (`...Z` included)."""
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def json_line_objects(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL log, one per line (other lines skipped)."""
    with open(path, "rb") as fh:
        return [d for d in iter_json_lines(fh) if isinstance(d, dict)]


def add_rendered(
    t: Transcript, messages: Iterable[dict[str, Any]], reply_times: Iterable[float | None]
) -> None:
    """Append chat messages rendered by a codec, giving each assistant message (a
    model call) the next of `reply_times`."""
    at = iter(reply_times)
    for m in messages:
        t.add(m, at=next(at, None) if m["role"] == "assistant" else None)


def iter_json_lines(lines: Iterable[bytes]) -> Iterable[Any]:
    """Parsed non-blank lines; a malformed line is skipped (logs end mid-write)."""
    for line in lines:
        if line.strip():
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
