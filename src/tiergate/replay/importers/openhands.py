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

OpenHands V1 (the software-agent-sdk, as OpenHands/benchmarks writes it)
logs events tagged by `kind`: `SystemPromptEvent` (prompt and tools),
`MessageEvent` (`llm_message`), `ActionEvent` (one `tool_call` each; the
calls of one response share `llm_response_id` and are sent back as one
assistant message whose text is the first call's `thought`),
`ObservationEvent`, `AgentErrorEvent` and `UserRejectObservation` (tool
results by `tool_call_id`), and `CondensationSummaryEvent` (user text).
Everything else (state updates, condensation markers, token and log
events) is not model traffic. Since Dec 2025 the SDK logs tools as its own
definitions, without parameter schemas; those are rebuilt by name with an
empty schema.

Inputs: an evaluation `output.jsonl` (one row per instance: `instance_id`,
`history` of V0 or V1 events, `metadata.llm_config.model` or
`metadata.llm.model`), a single-file `<instance>.json` holding one such row
or a bare list of events, or a session folder holding `events/<n>.json` (the
file store of a running server).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from tiergate.replay.importers.transcript import (
    Transcript,
    clean_message,
    iso_time,
    iter_json_lines,
    text_of,
    tool_call,
)

FRAMEWORK = "openhands"
_SKIP_OBSERVATIONS = frozenset({"agent_state_changed", "recall", "null", "agent_condensation"})


def _time(event: Mapping[str, Any]) -> float | None:
    return iso_time(event.get("timestamp"))


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


_ERROR_HEADER = "[An error occurred during execution.]\n"


def _v1_tool(raw: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI tool from a SystemPromptEvent tool.

    Before Dec 2025 the SDK logged tools in OpenAI form; since then it logs
    its ToolDefinition (`kind`, `title`, `description`, no parameter schema).
    """
    if isinstance(raw.get("function"), Mapping):
        return dict(raw)
    kind = str(raw.get("kind") or "")
    name = raw.get("title") or raw.get("name")
    if not name:
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower().removesuffix("_tool")
    return {
        "type": "function",
        "function": {
            "name": str(name),
            "description": text_of(raw.get("description")),
            "parameters": {"type": "object", "properties": {}},
        },
    }


def _observation_text(obs: Mapping[str, Any]) -> str:
    """A tool result as the SDK sends it: `content` parts (older tools: `output`)."""
    text = text_of(obs.get("content")) if obs.get("content") else text_of(obs.get("output"))
    return f"{_ERROR_HEADER}{text}" if obs.get("is_error") else text


def _add_user(t: Transcript, content: str, at: float | None) -> None:
    """The SDK coalesces adjacent plain user messages into one turn."""
    if t.messages and set(t.messages[-1][1]) == {"role", "content"}:
        last = t.messages[-1][1]
        if last["role"] == "user":
            last["content"] = f"{last['content']}\n{content}"
            return
    t.add({"role": "user", "content": content}, at=at)


def _v1(t: Transcript, events: Iterable[Mapping[str, Any]]) -> None:
    """Messages from V1 events, as `LLMConvertibleEvent.events_to_messages` builds them."""
    reply: dict[str, Any] | None = None  # the assistant message of the last ActionEvent
    reply_id: object = None
    for e in events:
        kind, at = e.get("kind"), _time(e)
        if kind == "ActionEvent":
            raw = e.get("tool_call") or {}
            call = tool_call(
                str(raw.get("id") or e.get("tool_call_id") or ""),
                str(raw.get("name") or e.get("tool_name") or ""),
                raw.get("arguments", ""),
            )
            rid = e.get("llm_response_id")
            if reply is not None and rid is not None and rid == reply_id:
                reply["tool_calls"].append(call)
                reply["content"] = reply["content"] or text_of(e.get("thought")) or None
                continue
            reply = {
                "role": "assistant",
                "content": text_of(e.get("thought")) or None,
                "tool_calls": [call],
            }
            reply_id = rid
            t.add(reply, at=at)
            continue
        if kind == "SystemPromptEvent":
            parts = [e.get("system_prompt"), e.get("dynamic_context")]
            t.add({"role": "system", "content": text_of([p for p in parts if p])})
            if isinstance(e.get("tools"), list) and not t.tools:
                t.tools = [_v1_tool(x) for x in e["tools"] if isinstance(x, Mapping)]
        elif kind == "MessageEvent":
            llm = dict(e.get("llm_message") or {})
            extra = e.get("extended_content") or []
            llm["content"] = [*(llm.get("content") or []), *extra]
            m = clean_message(llm)
            if m is not None and m["role"] == "user":
                _add_user(t, m["content"], at)
            else:
                t.add(m, at=at)
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            if not e.get("tool_call_id"):
                continue  # an error that answers no call is not sent to the model
            if kind == "ObservationEvent":
                content = _observation_text(e.get("observation") or {})
            elif kind == "AgentErrorEvent":
                content = text_of(e.get("error"))
            else:
                content = f"Action rejected: {text_of(e.get('rejection_reason'))}"
            t.add({"role": "tool", "tool_call_id": str(e["tool_call_id"]), "content": content})
            continue  # results of one response's calls do not end its batch
        elif kind == "CondensationSummaryEvent":
            _add_user(t, text_of(e.get("summary")), at)
        else:
            continue  # state updates, condensation markers, tokens, logs: no traffic
        reply, reply_id = None, None


def transcript(
    events: Iterable[Mapping[str, Any]], key: str, source: str, model: str | None
) -> Transcript:
    t = Transcript(key, key, FRAMEWORK, source, model=model)
    events = list(_flatten(events))
    if any("kind" in e for e in events):
        _v1(t, events)
        return t
    seen_responses: set[str] = set()
    for e in events:
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


def _model(row: Mapping[str, Any]) -> str | None:
    """The row's model: V0 `metadata.llm_config.model`, V1 `metadata.llm.model`."""
    meta = row.get("metadata") or {}
    for llm in (meta.get("llm_config"), meta.get("llm")):
        if isinstance(llm, Mapping) and isinstance(llm.get("model"), str):
            return str(llm["model"])
    name = meta.get("model_name")
    return name if isinstance(name, str) else None


def _rows(path: Path) -> Iterable[Any]:
    """Evaluation rows: one per line, or one pretty-printed `.json` file.

    A single-file trajectory holds one row, or a bare list of events (then
    the file is named after its instance).
    """
    if path.suffix == ".json":
        data = orjson.loads(path.read_bytes())
        yield {"instance_id": path.stem, "history": data} if isinstance(data, list) else data
        return
    with open(path, "rb") as fh:
        yield from iter_json_lines(fh)


def load(path: Path) -> list[Transcript]:
    if path.is_dir():
        files = sorted(
            (path / "events").glob("*.json"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0
        )
        events = [orjson.loads(f.read_bytes()) for f in files]
        return [transcript(events, path.name, str(path), None)]
    out: list[Transcript] = []
    for row in _rows(path):
        if not isinstance(row, dict) or not isinstance(row.get("history"), list):
            continue
        if not row["history"]:
            continue  # a row with no events is no session
        key = str(row.get("instance_id") or f"{path.stem}-{len(out)}")
        out.append(transcript(row["history"], key, str(path), _model(row)))
    if not out:
        # A file read as OpenHands that holds no events is a wrong or broken
        # input, not an empty session: say so rather than import nothing.
        raise ValueError("no OpenHands event history in the file")
    return out


#: The first key of an evaluation row (V0 and V1 write `instance_id` first).
_ROW_START = re.compile(rb'\A\s*\{\s*"instance_id"\s*:')
#: A V1 event's discriminator, as the SDK's event classes name themselves.
_V1_KIND = re.compile(rb'"kind"\s*:\s*"\w+(Event|Observation)"')
_LIST_START = re.compile(rb"\A\s*\[\s*\{")


def sniff(path: Path, head: bytes) -> bool:
    if path.is_dir():
        return (path / "events").is_dir()
    if b'"history"' in head and (b'"instance_id"' in head or b'"tool_call_metadata"' in head):
        return True
    if path.suffix not in (".json", ".jsonl"):
        return False
    if _ROW_START.match(head):
        return True  # its history may start past the head (long instructions, patches)
    if path.suffix == ".json" and _LIST_START.match(head):
        v0 = all(k in head for k in (b'"source"', b'"timestamp"')) and (
            b'"action"' in head or b'"observation"' in head
        )
        return v0 or _V1_KIND.search(head) is not None
    return False
