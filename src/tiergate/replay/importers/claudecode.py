"""Claude Code session logs (`~/.claude/projects/<project>/<session>.jsonl`).

Each line is an event: `{"type": "user"|"assistant"|"summary"|..., "message":
{"role", "content": [Anthropic blocks]}, "sessionId", "timestamp",
"isSidechain", ...}`. Claude Code writes one line per content block of a
streamed reply, all with the same `message.id`; those are joined into one
assistant message. Tool results come back inside `user` lines as
`tool_result` blocks. The Anthropic messages are converted to chat
completions with tiergate's own codecs (the Anthropic parser, then the OpenAI
renderer), as the gateway does for an Anthropic client. Sub-agent
(`isSidechain`) lines inside a main session and meta lines (slash-command
echoes) are left out: they are separate conversations. A file holding only
sub-agent lines (newer versions write each sub-agent to its own
`agent-*.jsonl`) is imported as the session it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tiergate.formats.anthropic.request import parse_request as parse_anthropic
from tiergate.formats.openai.request import render_request
from tiergate.replay.corpus import ROUTER_MODEL
from tiergate.replay.importers.transcript import (
    Transcript,
    add_rendered,
    iso_time,
    json_line_objects,
)

FRAMEWORK = "claude-code"


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in content or () if isinstance(b, dict)]


def _conversation_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """User and assistant lines of the file's own conversation."""
    talk = [d for d in lines if d.get("type") in ("user", "assistant") and not d.get("isMeta")]
    main = [d for d in talk if not d.get("isSidechain")]
    return main or talk


def _anthropic_messages(
    lines: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[float | None], str | None]:
    """Anthropic messages with one time per assistant message, and the model."""
    messages: list[dict[str, Any]] = []
    times: list[float | None] = []
    model = None
    last_id = None
    for line in lines:
        kind = line.get("type")
        msg = line.get("message")
        if kind not in ("user", "assistant") or not isinstance(msg, dict):
            continue
        blocks = [
            b
            for b in _blocks(msg.get("content"))
            if b.get("type") != "thinking" or b.get("signature")
        ]
        blocks = [
            b
            for b in blocks
            if b.get("type") in ("text", "tool_use", "tool_result", "thinking", "image")
        ]
        if not blocks:
            continue
        role = "assistant" if kind == "assistant" else "user"
        if role == "assistant":
            model = msg.get("model") or model
        mid = msg.get("id") if role == "assistant" else None
        if messages and messages[-1]["role"] == role and (role == "user" or mid == last_id):
            messages[-1]["content"].extend(blocks)  # one streamed reply, or a user turn in pieces
        else:
            messages.append({"role": role, "content": blocks})
            if role == "assistant":
                times.append(iso_time(line.get("timestamp")))
        last_id = mid
    return messages, times, model


def _transcript(lines: list[dict[str, Any]], key: str, source: str) -> Transcript | None:
    messages, times, model = _anthropic_messages(_conversation_lines(lines))
    if not any(m["role"] == "assistant" for m in messages):
        return None
    while messages and messages[0]["role"] != "user":
        messages.pop(0)
        times.pop(0)
    req = parse_anthropic({"model": model or "claude", "max_tokens": 1, "messages": messages})
    body = render_request(req, ROUTER_MODEL)
    t = Transcript(key, key, FRAMEWORK, source, model=model)
    add_rendered(t, body["messages"], times)
    return t


def load(path: Path) -> list[Transcript]:
    lines = json_line_objects(path)
    key = next((str(d["sessionId"]) for d in lines if d.get("sessionId")), path.stem)
    t = _transcript(lines, key, str(path))
    return [t] if t is not None else []


def sniff(path: Path, head: bytes) -> bool:
    return path.suffix == ".jsonl" and b'"sessionId"' in head and b'"parentUuid"' in head
