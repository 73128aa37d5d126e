"""opencode sessions (`~/.local/share/opencode/opencode.db`, SQLite).

opencode 1.x keeps its sessions in one SQLite database: `session` rows (a
sub-agent's session names its `parent_id`), `message` rows (JSON `data`: role,
model, times) and their `part` rows (JSON `data`: `text`, `reasoning`,
`tool` with `callID`, `state.input` and `state.output` or `state.error`,
`step-start` / `step-finish` around each model call, `patch` and `snapshot`
bookkeeping). Each step of an assistant message is one model call: its text
and tool calls are one assistant message, each finished tool a `tool`
message answering its call, as opencode sends them over chat completions.

Not stored, so not imported: the system prompt and tool schemas opencode
builds per request, and its side requests (the session-title call). The
database is opened read-only; opencode may keep running.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tiergate.replay.importers.transcript import Transcript

FRAMEWORK = "opencode"
DB_NAME = "opencode.db"
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _rows(db: sqlite3.Connection, sql: str, *args: str) -> list[tuple[str, int, dict[str, Any]]]:
    out = []
    for row_id, created, data in db.execute(sql, args):
        try:
            doc = json.loads(data)
        except (TypeError, ValueError):
            continue
        if isinstance(doc, dict):
            out.append((str(row_id), int(created or 0), doc))
    return out


def _arguments(raw: Any) -> str:
    """Tool input as opencode serialises it on the wire: compact JSON."""
    return json.dumps(raw if raw is not None else {}, ensure_ascii=False, separators=(",", ":"))


def _tool_result(part: dict[str, Any]) -> str:
    state = part.get("state") or {}
    if state.get("status") == "error":
        return str(state.get("error") or "")
    return str(state.get("output") or "")


def _steps(parts: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The parts of an assistant message, split at `step-start` (one model call each)."""
    steps: list[list[dict[str, Any]]] = []
    for p in parts:
        if p.get("type") == "step-start" or not steps:
            steps.append([])
        if p.get("type") != "step-start":
            steps[-1].append(p)
    return [s for s in steps if any(p.get("type") in ("text", "tool") for p in s)]


def _add_assistant(t: Transcript, parts: list[dict[str, Any]], at: float | None) -> None:
    for step in _steps(parts):
        text = "".join(str(p.get("text") or "") for p in step if p.get("type") == "text")
        tools = [p for p in step if p.get("type") == "tool" and p.get("callID")]
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if tools:
            message["tool_calls"] = [
                {
                    "id": str(p["callID"]),
                    "type": "function",
                    "function": {
                        "name": str(p.get("tool") or ""),
                        "arguments": _arguments((p.get("state") or {}).get("input")),
                    },
                }
                for p in tools
            ]
        t.add(message, at=at)
        for p in tools:
            t.add({"role": "tool", "tool_call_id": str(p["callID"]), "content": _tool_result(p)})
        at = None  # later steps of one message: no time of their own is logged


def _session(db: sqlite3.Connection, session_id: str, source: str) -> Transcript | None:
    messages = _rows(
        db,
        "SELECT id, time_created, data FROM message WHERE session_id = ? ORDER BY time_created, id",
        session_id,
    )
    t = Transcript(session_id, session_id, FRAMEWORK, source)
    for message_id, created, doc in messages:
        parts = [
            p
            for _, _, p in _rows(
                db,
                "SELECT id, time_created, data FROM part WHERE message_id = ? ORDER BY id",
                message_id,
            )
        ]
        if doc.get("role") == "user":
            text = "".join(str(p.get("text") or "") for p in parts if p.get("type") == "text")
            t.add({"role": "user", "content": text})
        elif doc.get("role") == "assistant":
            t.model = t.model or doc.get("modelID")
            _add_assistant(t, parts, created / 1000 if created else None)
    return t if any(m["role"] == "assistant" for _, m in t.messages) else None


def load(path: Path) -> list[Transcript]:
    db_path = path / DB_NAME if path.is_dir() else path
    try:
        db = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as err:
        raise ValueError(f"{db_path}: cannot open ({err})") from err
    try:
        sessions = [
            str(r[0]) for r in db.execute("SELECT id FROM session ORDER BY time_created, id")
        ]
        out = [_session(db, sid, str(db_path)) for sid in sessions]
    except sqlite3.Error as err:
        raise ValueError(f"{db_path}: not an opencode database ({err})") from err
    finally:
        db.close()
    return [t for t in out if t is not None]


def sniff(path: Path, head: bytes) -> bool:
    return path.name == DB_NAME and head.startswith(_SQLITE_MAGIC)
