"""SWE-agent trajectories (`<instance>.traj`), and systems built on its format.

A `.traj` is `{"environment", "trajectory": [steps], "history": [messages],
"info"}`. `history` is what the model saw, in order: system prompt,
demonstrations, the issue, then assistant replies (a DISCUSSION and one
command in a code block) and observations as `user` messages: the text
protocol. Function-calling configs log `tool_calls` and `tool` messages.

Multi-agent descendants (CodeR) tag each history message with its `agent`;
each agent keeps its own conversation, so each is its own stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tiergate.replay.importers.transcript import Transcript, clean_message

FRAMEWORK = "swe-agent"
SUFFIX = ".traj"


def _model(doc: dict[str, Any]) -> str | None:
    info = doc.get("info") or {}
    for key in ("model_name", "model"):
        if isinstance(info.get(key), str):
            return str(info[key])
    return None


def load(path: Path) -> list[Transcript]:
    doc = orjson.loads(path.read_bytes())
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        raise ValueError(f"{path}: no history list (not a SWE-agent trajectory)")
    key = path.stem
    agents = {m.get("agent") for m in doc["history"] if isinstance(m, dict)}
    framework = "swe-agent (multi-agent)" if len(agents - {None}) > 1 else FRAMEWORK
    t = Transcript(key, key, framework, str(path), model=_model(doc))
    for raw in doc["history"]:
        if isinstance(raw, dict):
            t.add(clean_message(raw), stream=str(raw.get("agent") or "main"))
    return [t]


def sniff(path: Path, head: bytes) -> bool:
    return path.suffix == SUFFIX or (b'"environment"' in head and b'"trajectory"' in head)
