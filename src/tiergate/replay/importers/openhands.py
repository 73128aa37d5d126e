"""OpenHands trajectories: evaluation `output.jsonl` rows and session event folders.

OpenHands logs an event stream, not messages. The messages its CodeAct agent
sent are rebuilt from it: the `system` action (prompt and tool schemas), the
user's `message`, then for each model call the assistant message recorded in
the actions' `tool_call_metadata.model_response` (one response may carry
several tool calls, so it is taken once per response id) and each
observation answering a call as a `tool` message. An `error` observation
that answers no call (a malformed call) goes back to the model as user text.
Bookkeeping events (state changes, recalls) are not model traffic.

Logs from before function calling (2024 CodeAct: events with no `source`
and no `tool_call_metadata`) were a text protocol: the model answered with
its thought and an `<execute_bash>` / `<execute_ipython>` block, and each
observation went back as a user message. Their replies are rebuilt in that
shape from the action's `thought` and command (the exact prompt template of
the time is not in the log, so wording around the command is approximate).

Inputs: an evaluation `output.jsonl` (one row per instance: `instance_id`,
`history` of events, `metadata.llm_config.model`), or a session folder
holding `events/<n>.json` (the file store of a running server).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from tiergate.replay.importers.transcript import (
    Transcript,
    clean_message,
    iter_json_lines,
    text_of,
)

FRAMEWORK = "openhands"
_SKIP_OBSERVATIONS = frozenset({"agent_state_changed", "recall", "null", "agent_condensation"})


def _time(event: Mapping[str, Any]) -> float | None:
    raw = event.get("timestamp")
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw).timestamp()
    except ValueError:
        return None


def _flatten(history: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    """Events in order; older outputs logged `[action, observation]` pairs."""
    for item in history:
        if isinstance(item, list):
            yield from (e for e in item if isinstance(e, Mapping))
        elif isinstance(item, Mapping):
            yield item


_LEGACY_BLOCKS = {"run": ("execute_bash", "command"), "run_ipython": ("execute_ipython", "code")}


def _legacy_reply(e: Mapping[str, Any]) -> dict[str, Any]:
    """A pre-function-calling CodeAct reply: the thought, then the command block."""
    thought = text_of(e.get("thought"))
    block = _LEGACY_BLOCKS.get(str(e.get("action")))
    if block is not None and e.get(block[1]):
        tag, key = block
        thought = f"{thought}\n<{tag}>\n{text_of(e[key])}\n</{tag}>".lstrip()
    elif e.get("action") == "message":
        thought = text_of(e.get("content")) or thought
    return {"role": "assistant", "content": thought}


def _legacy(t: Transcript, e: Mapping[str, Any], at: float | None) -> None:
    if e.get("action") is not None:
        if e.get("action") == "message" and not any(m["role"] == "user" for _, m in t.messages):
            t.add({"role": "user", "content": text_of(e.get("content"))}, at=at)
        else:
            t.add(_legacy_reply(e), at=at)
    elif e.get("observation") not in (None, *_SKIP_OBSERVATIONS):
        t.add({"role": "user", "content": f"OBSERVATION:\n{text_of(e.get('content'))}"})


def transcript(
    events: Iterable[Mapping[str, Any]], key: str, source: str, model: str | None
) -> Transcript:
    t = Transcript(key, key, FRAMEWORK, source, model=model)
    seen_responses: set[str] = set()
    for e in _flatten(events):
        at = _time(e)
        meta = e.get("tool_call_metadata") or {}
        args = e.get("args") or {}
        action, observation = e.get("action"), e.get("observation")
        if "source" not in e and not meta:
            _legacy(t, e, at)
        elif action == "system":
            t.add({"role": "system", "content": text_of(args.get("content") or e.get("message"))})
            if isinstance(args.get("tools"), list) and not t.tools:
                t.tools = args["tools"]
        elif action == "message" and e.get("source") == "user":
            t.add(
                {"role": "user", "content": text_of(args.get("content") or e.get("message"))}, at=at
            )
        elif action is not None and e.get("source") == "agent":
            response = meta.get("model_response") or {}
            rid = str(response.get("id") or "")
            choices = response.get("choices") or []
            if rid and choices and rid not in seen_responses:
                seen_responses.add(rid)
                t.add(clean_message(choices[0].get("message") or {}), at=at)
                model = model or response.get("model")
            elif not meta and action == "message":
                t.add({"role": "assistant", "content": text_of(args.get("content"))}, at=at)
        elif observation is not None and observation not in _SKIP_OBSERVATIONS:
            content = text_of(e.get("content"))
            if meta.get("tool_call_id"):
                t.add(
                    {"role": "tool", "tool_call_id": str(meta["tool_call_id"]), "content": content}
                )
            elif observation == "error":
                t.add({"role": "user", "content": content})
    t.model = model
    return t


def load(path: Path) -> list[Transcript]:
    if path.is_dir():
        files = sorted(
            (path / "events").glob("*.json"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0
        )
        events = [orjson.loads(f.read_bytes()) for f in files]
        return [transcript(events, path.name, str(path), None)]
    out: list[Transcript] = []
    with open(path, "rb") as fh:
        for row in iter_json_lines(fh):
            if not isinstance(row, dict) or not isinstance(row.get("history"), list):
                continue
            meta = row.get("metadata") or {}
            llm = (meta.get("llm_config") or {}).get("model") or meta.get("model_name")
            key = str(row.get("instance_id") or f"{path.stem}-{len(out)}")
            out.append(
                transcript(row["history"], key, str(path), llm if isinstance(llm, str) else None)
            )
    return out


def sniff(path: Path, head: bytes) -> bool:
    if path.is_dir():
        return (path / "events").is_dir()
    return b'"history"' in head and (b'"instance_id"' in head or b'"tool_call_metadata"' in head)
