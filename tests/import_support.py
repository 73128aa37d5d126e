"""Shared by the `tiergate replay import` tests: the samples and what every import must hold."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from tiergate.replay.importers import import_sessions
from tiergate.replay.pipeline import prepare

TRACES = Path(__file__).parent / "data" / "traces"
CODEX = TRACES / "codex" / "rollout-2026-11-20T10-00-00-0199c0de-7a11-7e55-9c2d-5a3f0e1b2c3d.jsonl"


def one(path: Path, fmt: str = "auto") -> dict[str, Any]:
    """The single session a log imports as."""
    docs = list(import_sessions([path], fmt))
    assert len(docs) == 1
    return docs[0]


def roles(turn: dict[str, Any]) -> list[str]:
    return [m["role"] for m in turn["request"]["messages"]]


def assert_cumulative(doc: dict[str, Any]) -> None:
    """Each request extends the previous one by its reply and what came back."""
    turns = doc["turns"]
    for prev, nxt in itertools.pairwise(turns):
        a, b = prev["request"]["messages"], nxt["request"]["messages"]
        assert b[: len(a)] == a
        assert b[len(a)]["role"] == "assistant"
        assert (b[len(a)].get("content") or "") == prev["response"]["content"]
    prepare([doc], "test")  # the gateway's codec, scorers and strike producers accept it
