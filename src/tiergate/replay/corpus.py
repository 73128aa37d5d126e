"""The replay corpus format (JSONL, one session per line) and its validation.

Stable interface (DESIGN.md):

    {"session_id": "s-0001", "archetype": "latent_hard",
     "turns": [{"request": {...chat-completions body, cumulative history...},
                "headers": {"X-OrcaRouter-Tier": "strong"},
                "needs_strong": false,
                "idle_seconds_before": 20,
                "response": {"content": "...", "tool_calls": [...], "finish_reason": "stop"},
                "upstream_status": 200}]}

`request` is required; `headers`, `response`, `upstream_status` and
`idle_seconds_before` are optional; `needs_strong` is ground truth used only
for scoring (absent counts as false). `archetype` is optional too: logged
traffic has none and is reported as "unlabelled".

Validation is deliberately shallow (shapes and types, with line numbers):
the request body itself is checked by the real codec when it is replayed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

ARCHETYPES = ("easy_short", "long_trivial", "latent_hard", "hard_start", "failure_loop")
HARD_ARCHETYPES = ("latent_hard", "hard_start", "failure_loop")
UNLABELLED = "unlabelled"
ROUTER_MODEL = "orcarouter/coding"
#: Used when a turn does not say how long the session was idle before it.
DEFAULT_IDLE_SECONDS = 30.0


class CorpusError(ValueError):
    """The corpus file is malformed; `problems` lists each problem with its line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems[:20]))


def _turn_problems(turn: Any, where: str) -> list[str]:
    if not isinstance(turn, dict):
        return [f"{where}: a turn must be an object"]
    problems = []
    if not isinstance(turn.get("request"), dict):
        problems.append(f"{where}.request: required, a chat-completions body object")
    elif not isinstance(turn["request"].get("messages"), list):
        problems.append(f"{where}.request.messages: required, a list")
    for key, kind in (("headers", dict), ("response", dict)):
        if key in turn and turn[key] is not None and not isinstance(turn[key], kind):
            problems.append(f"{where}.{key}: must be an object")
    status = turn.get("upstream_status", 200)
    if not isinstance(status, int) or isinstance(status, bool):
        problems.append(f"{where}.upstream_status: must be an integer HTTP status")
    idle = turn.get("idle_seconds_before", 0)
    if not isinstance(idle, int | float) or isinstance(idle, bool) or idle < 0:
        problems.append(f"{where}.idle_seconds_before: must be a number >= 0")
    if not isinstance(turn.get("needs_strong", False), bool):
        problems.append(f"{where}.needs_strong: must be true or false")
    return problems


def session_problems(doc: Any, where: str) -> list[str]:
    """Every shape problem of one parsed session line."""
    if not isinstance(doc, dict):
        return [f"{where}: a session must be a JSON object"]
    problems = []
    if not isinstance(doc.get("session_id"), str) or not doc["session_id"]:
        problems.append(f"{where}.session_id: required, a non-empty string")
    if (
        "archetype" in doc
        and doc["archetype"] is not None
        and not isinstance(doc["archetype"], str)
    ):
        problems.append(f"{where}.archetype: must be a string")
    turns = doc.get("turns")
    if not isinstance(turns, list) or not turns:
        problems.append(f"{where}.turns: required, a non-empty list")
        return problems
    for i, turn in enumerate(turns):
        problems.extend(_turn_problems(turn, f"{where}.turns[{i}]"))
    return problems


def iter_corpus(path: str | Path) -> Iterator[dict[str, Any]]:
    """Sessions of a JSONL file, validated; raises CorpusError listing every problem."""
    problems: list[str] = []
    sessions: list[dict[str, Any]] = []
    seen: set[str] = set()
    with open(path, "rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                doc = orjson.loads(line)
            except orjson.JSONDecodeError as err:
                problems.append(f"line {n}: not valid JSON ({err})")
                continue
            found = session_problems(doc, f"line {n}")
            if not found and doc["session_id"] in seen:
                found = [f"line {n}.session_id: duplicate session id {doc['session_id']!r}"]
            problems.extend(found)
            if not found:
                seen.add(doc["session_id"])
                sessions.append(doc)
    if problems:
        raise CorpusError(problems)
    if not sessions:
        raise CorpusError([f"{path}: no sessions"])
    yield from sessions


def load_corpus(path: str | Path) -> list[dict[str, Any]]:
    return list(iter_corpus(path))


def write_corpus(sessions: Iterable[dict[str, Any]], out: IO[bytes]) -> int:
    """Write sessions as JSONL; returns the number written."""
    n = 0
    for doc in sessions:
        out.write(orjson.dumps(doc))
        out.write(b"\n")
        n += 1
    return n


def archetype_of(doc: dict[str, Any]) -> str:
    value = doc.get("archetype")
    return value if isinstance(value, str) and value else UNLABELLED


def corpus_summary(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts for the report header: sessions, turns and hard turns per archetype."""
    per: dict[str, dict[str, int]] = {}
    for doc in sessions:
        row = per.setdefault(archetype_of(doc), {"sessions": 0, "turns": 0, "hard_turns": 0})
        row["sessions"] += 1
        for t in doc["turns"]:
            if t.get("upstream_status", 200) != 200:
                continue
            row["turns"] += 1
            row["hard_turns"] += bool(t.get("needs_strong", False))
    return {
        "sessions": len(sessions),
        "turns": sum(r["turns"] for r in per.values()),
        "hard_turns": sum(r["hard_turns"] for r in per.values()),
        "failed_attempts": sum(
            1 for d in sessions for t in d["turns"] if t.get("upstream_status", 200) != 200
        ),
        "archetypes": dict(sorted(per.items(), key=lambda kv: archetype_rank(kv[0]))),
    }


def archetype_rank(archetype: str) -> int:
    """Report order: the five archetypes as in §5.1, then anything else."""
    return ARCHETYPES.index(archetype) if archetype in ARCHETYPES else len(ARCHETYPES)
