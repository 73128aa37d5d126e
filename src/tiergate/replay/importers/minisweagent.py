"""mini-swe-agent trajectories (`<instance>.traj.json`).

Two layouts are read: the current object, `{"info": {...}, "messages": [...],
"trajectory_format": "mini-swe-agent-1[.1]", "instance_id": ...}`, and the
older bare list of messages. Text-protocol runs (v1, and v2's text mode) put
one bash block in each assistant reply and the command output in a `user`
message; v2's tool-call mode answers with `tool_calls` and `tool` messages.
The closing `exit` message (the submitted patch) is not a model call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tiergate.replay.importers.transcript import Transcript, clean_message

FRAMEWORK = "mini-swe-agent"
SUFFIX = ".traj.json"


def _instance(path: Path, doc: Any) -> str:
    if isinstance(doc, dict) and isinstance(doc.get("instance_id"), str):
        return str(doc["instance_id"])
    name = path.name
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) else path.stem


def _model(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return None
    model = ((doc.get("info") or {}).get("config") or {}).get("model") or {}
    name = model.get("model_name") if isinstance(model, dict) else None
    return name if isinstance(name, str) else None


def _time(raw: dict[str, Any]) -> float | None:
    extra = raw.get("extra") or {}
    if not isinstance(extra, dict):
        return None
    at = extra.get("timestamp")
    if at is None and isinstance(extra.get("response"), dict):
        at = extra["response"].get("created")
    return float(at) if isinstance(at, int | float) else None


def load(path: Path) -> list[Transcript]:
    doc = orjson.loads(path.read_bytes())
    raw_messages = doc.get("messages") if isinstance(doc, dict) else doc
    if not isinstance(raw_messages, list):
        raise ValueError(f"{path}: no messages list (not a mini-swe-agent trajectory)")
    key = _instance(path, doc)
    t = Transcript(key, key, FRAMEWORK, str(path), model=_model(doc))
    for raw in raw_messages:
        if isinstance(raw, dict):
            t.add(clean_message(raw), at=_time(raw))
    return [t]


def sniff(path: Path, head: bytes) -> bool:
    return path.name.endswith(SUFFIX) or b'"trajectory_format": "mini-swe-agent' in head
