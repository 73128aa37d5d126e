"""AutoCodeRover task folders (`<instance>_<date>_<time>/`, AutoCodeRover 1.0 results).

A task folder holds the agent's two conversations as cumulative message
lists, rewritten after every round:

- `conversation_round_<n>.json`: the context-retrieval conversation. The
  model answers in prose naming search API calls (`search_class(...)`), the
  results come back as `user` messages: a text protocol.
- `debug_agent_write_patch_<n>.json`: the patch-writing conversation, a new
  system prompt seeded with the retrieval conversation's messages, then one
  reply per patch attempt (with validation, test feedback as `user` text).

The highest-numbered file of each kind is the whole conversation. The
retrieval messages pasted into the patch conversation were never calls of it
(they are its history), so only the patch attempts are turns there. The
proxy agent's calls (`agent_proxy_<n>.json`, one call each that reformats a
reply as JSON) are not read: the folder records no order for them. The logs
carry no per-message times. `cost.json` names the model.

The importer is pointed at `conversation_round_0.json` (one per folder) and
reads its siblings; the folder name, less the timestamp, is the instance.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from tiergate.replay.importers.transcript import Transcript, clean_message

FRAMEWORK = "autocoderover"
ENTRY = "conversation_round_0.json"
_NUMBERED = re.compile(r"^(conversation_round|debug_agent_write_patch)_(\d+)\.json$")
_STAMP = re.compile(r"_\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}$")


def _latest(folder: Path, kind: str) -> list[dict[str, Any]]:
    """The messages of the highest-numbered `<kind>_<n>.json` in folder ([] if none)."""
    best: tuple[int, Path] | None = None
    for p in folder.iterdir():
        m = _NUMBERED.match(p.name)
        if m and m.group(1) == kind and (best is None or int(m.group(2)) > best[0]):
            best = (int(m.group(2)), p)
    if best is None:
        return []
    doc = orjson.loads(best[1].read_bytes())
    if not isinstance(doc, list):
        raise ValueError(f"{best[1]}: not a message list (not an AutoCodeRover conversation)")
    return [m for m in doc if isinstance(m, dict)]


def _model(folder: Path) -> str | None:
    cost = folder / "cost.json"
    if not cost.is_file():
        return None
    doc = orjson.loads(cost.read_bytes())
    model = doc.get("model") if isinstance(doc, dict) else None
    return model if isinstance(model, str) else None


def _seeded(patch: list[dict[str, Any]], search: list[dict[str, Any]]) -> int:
    """How many leading messages of the patch conversation (after its system
    prompt) repeat the retrieval conversation (after its own)."""
    n = 0
    for a, b in zip(patch[1:], search[1:], strict=False):
        if a.get("role") != b.get("role") or a.get("content") != b.get("content"):
            break
        n += 1
    return n


def load(path: Path) -> list[Transcript]:
    folder = path.parent
    key = _STAMP.sub("", folder.name)
    search = _latest(folder, "conversation_round")
    patch = _latest(folder, "debug_agent_write_patch")
    t = Transcript(key, key, FRAMEWORK, str(folder), model=_model(folder))
    for raw in search:
        t.add(clean_message(raw), stream="search")
    seeded = _seeded(patch, search) if patch and patch[0].get("role") == "system" else 0
    for i, raw in enumerate(patch):
        t.add(clean_message(raw), stream="patch", call=not 1 <= i <= seeded)
    return [t]


def sniff(path: Path, head: bytes) -> bool:
    return path.name == ENTRY
