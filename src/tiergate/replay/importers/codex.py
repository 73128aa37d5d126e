"""Codex CLI session rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`).

Each line is `{"timestamp", "type", "payload"}`. The conversation is in the
`response_item` lines, whose payloads are Responses API items exactly as
Codex keeps them for its next request: `message` (developer, user,
assistant), `function_call` / `function_call_output`, `custom_tool_call` /
`custom_tool_call_output`, `reasoning`. `session_meta` names the session and
carries the base instructions Codex sends as `instructions`; `turn_context`
names the model; `token_usage_record` closes each model call. Everything
else (`event_msg` progress, `world_state`) is the CLI's own bookkeeping.

The items are read as one Responses request with tiergate's own codec (the
parser the gateway's `/v1/responses` endpoint uses), then rendered as chat
completions, as the gateway does for a Codex client: each model call's output
items (text, tool calls) become one assistant message, each call output a
`tool` message. Tool schemas are not in the rollout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tiergate.formats.errors import FormatError
from tiergate.formats.openai.request import render_request
from tiergate.formats.responses.request import parse_request as parse_responses
from tiergate.replay.corpus import ROUTER_MODEL
from tiergate.replay.importers.transcript import (
    Transcript,
    add_rendered,
    iso_time,
    json_line_objects,
)

FRAMEWORK = "codex"
#: Item types a model call returns (the rest are inputs the client sends).
_OUTPUT_TYPES = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "reasoning", "web_search_call"}
)
#: Internal fields Codex adds to items; the Responses API never sees them.
_PRIVATE_KEYS = ("internal_chat_message_metadata_passthrough",)


def _is_output(item: dict[str, Any]) -> bool:
    if item.get("type") == "message":
        return item.get("role") == "assistant"
    return item.get("type") in _OUTPUT_TYPES


def _clean(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in _PRIVATE_KEYS}


def _instructions(meta: dict[str, Any]) -> str | None:
    raw = meta.get("base_instructions") or meta.get("instructions")
    if isinstance(raw, dict):
        raw = raw.get("text")
    return raw if isinstance(raw, str) and raw else None


def _read(
    lines: list[dict[str, Any]],
) -> tuple[dict[str, Any], list[dict[str, Any]], list[float | None]]:
    """(session meta, Responses items, the time each model call began)."""
    meta: dict[str, Any] = {}
    items: list[dict[str, Any]] = []
    call_times: list[float | None] = []
    in_call = False
    for line in lines:
        kind, payload = line.get("type"), line.get("payload")
        if not isinstance(payload, dict):
            continue
        if kind == "session_meta" and not meta:
            meta = payload
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            meta.setdefault("model", payload["model"])
        elif kind == "token_usage_record":
            in_call = False  # the call's output is complete
        elif kind == "response_item":
            output = _is_output(payload)
            if output and not in_call:
                call_times.append(iso_time(line.get("timestamp")))
            in_call = output
            items.append(_clean(payload))
    return meta, items, call_times


def _transcript(lines: list[dict[str, Any]], source: str, fallback_key: str) -> Transcript | None:
    meta, items, call_times = _read(lines)
    if not any(_is_output(i) for i in items):
        return None
    key = str(meta.get("id") or meta.get("session_id") or fallback_key)
    model = meta.get("model") if isinstance(meta.get("model"), str) else None
    body: dict[str, Any] = {"model": model or "codex", "input": items}
    if (instructions := _instructions(meta)) is not None:
        body["instructions"] = instructions
    try:
        chat = render_request(parse_responses(body), ROUTER_MODEL)
    except FormatError as err:
        raise ValueError(f"{source}: not a Responses conversation ({err})") from err
    t = Transcript(key, key, FRAMEWORK, source, model=model)
    add_rendered(t, chat["messages"], call_times)
    return t


def load(path: Path) -> list[Transcript]:
    t = _transcript(json_line_objects(path), str(path), path.stem)
    return [t] if t is not None else []


def sniff(path: Path, head: bytes) -> bool:
    return (
        path.suffix == ".jsonl"
        and b'"type":"session_meta"' in head.replace(b'": "', b'":"')
        and b'"payload"' in head
    )
