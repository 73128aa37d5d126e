"""Per-turn session-scorer features of a corpus, extracted once and cached.

Each turn's request goes through what the gateway runs before deciding: the
OpenAI codec (`parse_request`) and the planner's per-request inputs
(tiergate.replay.planner_inputs, shared with the replay and the agent-CLI
check): the conversation's own running transcript summary, extended as the
planner's TranscriptCache extends it, one per conversation of the session (a
sub-agent interleaved with the main thread keeps its own), with the corpus
`session_id` sent as the session header. The feature vector is
`tiergate.routing.session_scorer.features(summary, delta)`, the same function
the gateway calls; the lexical `delta_score` of the turn is kept beside it so
the two scorers are compared on the same turns, and `strike` is whether the
planner's request strikes (on the summary's fold) fire. The 1 GB real corpora
are read a line at a time; the cache (.npz) is a few MB and holds numbers only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tiergate.formats.openai import parse_request
from tiergate.replay.planner_inputs import SessionPlanner, lower_headers
from tiergate.routing import session_scorer
from tiergate.routing.session_scorer import FEATURE_NAMES

BUCKET_TARGET = {"easy": 0.0, "medium": 0.5, "hard": 1.0}
"""Training target per real-traffic bucket (an ordinal target on the logistic scale)."""


@dataclass
class Extracted:
    """Turn rows (x, delta, needs_strong, session) and per-session columns."""

    x: np.ndarray  # (turns, features)
    delta: np.ndarray  # (turns,)
    needs_strong: np.ndarray  # (turns,) bool
    strike: np.ndarray  # (turns,) bool: the turn raises a request-side strike
    session: np.ndarray  # (turns,) session index
    session_id: np.ndarray  # (sessions,) str
    bucket: np.ndarray  # (sessions,) str: easy/medium/hard or the synthetic archetype
    group: np.ndarray  # (sessions,) str: SWE-bench repository, or the archetype
    instance: np.ndarray  # (sessions,) str: SWE-bench instance, or the session id
    protocol: np.ndarray  # (sessions,) str
    framework: np.ndarray  # (sessions,) str

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(path, names=np.array(FEATURE_NAMES), **self.__dict__)

    @classmethod
    def load(cls, path: Path) -> Extracted:
        with np.load(path, allow_pickle=False) as z:
            if tuple(z["names"]) != FEATURE_NAMES:
                raise ValueError(f"{path}: features changed since it was cached; delete it")
            return cls(**{k: z[k] for k in cls.__dataclass_fields__})


def stream_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Sessions of a corpus file, one line in memory at a time."""
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                yield orjson.loads(line)


def instance(doc: dict[str, Any]) -> str:
    """The SWE-bench instance of a session (`django__django-11019`): the CV group, so
    one task's runs by different agents never sit on both sides of a fold."""
    return str((doc.get("source") or {}).get("key") or doc["session_id"].split("/")[-1])


def repository(doc: dict[str, Any]) -> str:
    """The SWE-bench repository of a session (`django__django-11019` -> `django__django`)."""
    return instance(doc).rsplit("-", 1)[0]


def protocol_of(doc: dict[str, Any]) -> str:
    source = doc.get("source") or {}
    if isinstance(source.get("protocol"), str):
        return str(source["protocol"])
    for turn in doc["turns"]:
        if any(m.get("role") == "tool" for m in turn["request"]["messages"]):
            return "tool-call"
    return "text"


def extract(sessions: Iterable[dict[str, Any]], real: bool, tick: Any = None) -> Extracted:
    """Features of every turn; `real` sessions are grouped by repository, synthetic by archetype.
    Every feature is computed, the task-difficulty score too (feature set v3), which the
    gateway skips while the shipped artifact does not read it."""
    before = session_scorer.COMPUTE_TASK_DIFFICULTY
    session_scorer.COMPUTE_TASK_DIFFICULTY = True
    try:
        return _extract(sessions, real, tick)
    finally:
        session_scorer.COMPUTE_TASK_DIFFICULTY = before


def _extract(sessions: Iterable[dict[str, Any]], real: bool, tick: Any) -> Extracted:
    rows: list[tuple[float, ...]] = []
    delta: list[float] = []
    strong: list[bool] = []
    struck: list[bool] = []
    owner: list[int] = []
    names = ("sid", "bucket", "group", "instance", "proto", "fw")
    cols: dict[str, list[str]] = {k: [] for k in names}
    for s, doc in enumerate(sessions):
        planner = SessionPlanner(str(doc["session_id"]))
        for turn in doc["turns"]:
            body = turn["request"]
            inp = planner.step(parse_request(body), body, lower_headers(turn.get("headers")))
            rows.append(inp.features())
            delta.append(inp.lexical)
            strong.append(bool(turn.get("needs_strong", False)))
            struck.append(bool(inp.strikes))
            owner.append(s)
        archetype = str(doc.get("archetype", ""))
        cols["sid"].append(str(doc["session_id"]))
        cols["bucket"].append(archetype)
        cols["group"].append(repository(doc) if real else archetype)
        cols["instance"].append(instance(doc) if real else str(doc["session_id"]))
        cols["proto"].append(protocol_of(doc))
        cols["fw"].append(str((doc.get("source") or {}).get("framework", "synthetic")))
        if tick is not None:
            tick(1)
    return Extracted(
        x=np.array(rows, dtype=np.float64).reshape(-1, len(FEATURE_NAMES)),
        delta=np.array(delta),
        needs_strong=np.array(strong, dtype=bool),
        strike=np.array(struck, dtype=bool),
        session=np.array(owner, dtype=np.int64),
        session_id=np.array(cols["sid"]),
        bucket=np.array(cols["bucket"]),
        group=np.array(cols["group"]),
        instance=np.array(cols["instance"]),
        protocol=np.array(cols["proto"]),
        framework=np.array(cols["fw"]),
    )
