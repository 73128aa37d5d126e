"""A plain JSONL of OpenAI chat-completions requests, as a proxy or SDK hook logs them.

Each line is a request body (`{"model", "messages", ...}`), or an object
holding one under `request` or `body` with the reply under `response`
(a chat-completion object or just its message). Lines are grouped into
sessions by an explicit id when the line has one (`session_id`, or the
`x-orcarouter-session-id` / `x-session-id` header, or `metadata.session_id`),
otherwise by conversation: a request whose messages extend an earlier
request's messages continues that session. Requests are kept as logged:
this is already the corpus' turn shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from tiergate.replay.corpus import ROUTER_MODEL
from tiergate.replay.importers.transcript import clean_message, clean_tool_calls, iter_json_lines

FRAMEWORK = "openai-requests"
_SESSION_HEADERS = ("x-orcarouter-session-id", "x-session-id")


def _explicit_id(line: Mapping[str, Any], body: Mapping[str, Any]) -> str | None:
    if isinstance(line.get("session_id"), str):
        return str(line["session_id"])
    headers = {str(k).lower(): v for k, v in (line.get("headers") or {}).items()}
    for h in _SESSION_HEADERS:
        if isinstance(headers.get(h), str):
            return str(headers[h])
    meta = body.get("metadata") or {}
    return str(meta["session_id"]) if isinstance(meta.get("session_id"), str) else None


def _response(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, Mapping):
        return None
    choice = (raw.get("choices") or [None])[0]
    msg = choice.get("message") if isinstance(choice, Mapping) else raw
    if not isinstance(msg, Mapping):
        return None
    m = clean_message({"role": "assistant", **msg}) or {}
    out: dict[str, Any] = {"content": m.get("content") or ""}
    calls = clean_tool_calls(msg.get("tool_calls"))
    if calls:
        out["tool_calls"] = calls
    finish = choice.get("finish_reason") if isinstance(choice, Mapping) else None
    out["finish_reason"] = finish or ("tool_calls" if calls else "stop")
    return out


def _fingerprint(messages: list[Any]) -> bytes:
    return orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)


def _continued(tips: Mapping[str, tuple[int, bytes]], messages: list[Any]) -> str | None:
    """The latest session whose last request these messages extend."""
    prefixes: dict[int, bytes] = {}
    for sid in reversed(list(tips)):
        length, fp = tips[sid]
        if length < len(messages):
            if length not in prefixes:
                prefixes[length] = _fingerprint(messages[:length])
            if prefixes[length] == fp:
                return sid
    return None


def load_sessions(path: Path) -> list[dict[str, Any]]:
    """Corpus sessions (not transcripts: the requests need no rebuilding)."""
    sessions: dict[str, dict[str, Any]] = {}
    tips: dict[str, tuple[int, bytes]] = {}  # each session's last request: length, fingerprint
    with open(path, "rb") as fh:
        for n, line in enumerate(iter_json_lines(fh)):
            if not isinstance(line, dict):
                continue
            body = line.get("request") or line.get("body") or line
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                continue
            messages = body["messages"]
            sid = _explicit_id(line, body)
            if sid is None:
                sid = _continued(tips, messages) or f"{path.stem}-{n + 1}"
            tips[sid] = (len(messages), _fingerprint(messages))
            turn: dict[str, Any] = {"request": {**body, "model": ROUTER_MODEL}}
            resp = _response(line.get("response"))
            if resp is not None:
                turn["response"] = resp
            doc = sessions.setdefault(
                sid,
                {
                    "session_id": sid,
                    "source": {
                        "framework": FRAMEWORK,
                        "model": body.get("model"),
                        "file": str(path),
                        "key": sid,
                    },
                    "turns": [],
                },
            )
            doc["turns"].append(turn)
    for doc in sessions.values():
        calls = any(
            m.get("tool_calls")
            for t in doc["turns"]
            for m in t["request"]["messages"]
            if isinstance(m, dict)
        )
        doc["source"]["protocol"] = "tool-call" if calls else "text"
    return list(sessions.values())


def sniff(path: Path, head: bytes) -> bool:
    return path.suffix == ".jsonl" and b'"messages"' in head
