"""`tiergate replay explain`: per-session traces agree with the replay's own totals,
name the turn and the reason of each escalation, and print no prompt text."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from tiergate.cli import main
from tiergate.replay.corpus import write_corpus
from tiergate.replay.generator import generate_corpus
from tiergate.replay.pipeline import prepare, run_policies


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("explain") / "corpus.jsonl"
    with open(path, "wb") as fh:
        write_corpus(generate_corpus(20260814, 40), fh)
    return path


def _explain(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, list[dict[str, Any]]]:
    out = tmp_path / "traces.json"
    argv = ["replay", "explain", "--corpus", str(corpus), "--no-progress", "--json", str(out)]
    code = main([*argv, *extra])
    text = capsys.readouterr().out
    sessions = orjson.loads(out.read_bytes())["sessions"] if out.exists() else []
    return code, text, sessions


def test_traces_agree_with_the_replay_totals(
    corpus_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, sessions = _explain(corpus_file, tmp_path, capsys, "--all", "--limit", "1000")
    assert code == 0
    corpus = [orjson.loads(line) for line in corpus_file.read_bytes().splitlines()]
    totals = asyncio.run(run_policies(prepare(corpus, "test"), ["escalation"]))["policies"]
    escalated = [s for s in sessions if s["escalated"]]
    assert len(sessions) == 40
    assert len(escalated) == totals["escalation"]["sessions_escalated"] > 0
    assert text.startswith(f"{len(escalated)} of 40 sessions escalated")
    for s in sessions:
        strong = [t["turn"] for t in s["turns"] if t["tier"] == "strong"]
        assert s["first_strong_turn"] == (strong[0] if strong else None)


def test_each_escalation_names_its_trigger_and_reasons(
    corpus_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, text, sessions = _explain(corpus_file, tmp_path, capsys)  # escalated sessions only
    assert sessions and all(s["escalated"] for s in sessions)
    assert "escalated(" in text
    for s in sessions:
        first = next(t for t in s["turns"] if t["turn"] == s["first_strong_turn"])
        assert first["decision"].startswith("escalated(")
    by_difficulty = [
        t["decision"]
        for s in sessions
        for t in s["turns"]
        if "escalated(difficulty)" in t["decision"]
    ]
    assert by_difficulty and all("[" in d for d in by_difficulty)  # the learned score's reasons
    # the lexical engine writes no learned-score reasons
    _, _, lexical = _explain(corpus_file, tmp_path, capsys, "--policy", "escalation-lexical")
    assert lexical and not any("[" in t["decision"] for s in lexical for t in s["turns"])


def test_no_prompt_text_and_unknown_session(
    corpus_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = [orjson.loads(line) for line in corpus_file.read_bytes().splitlines()]
    first_id = corpus[0]["session_id"]
    code, text, sessions = _explain(corpus_file, tmp_path, capsys, "--session", first_id)
    assert code == 0 and [s["session_id"] for s in sessions] == [first_id]
    for doc in corpus[:5]:
        for turn in doc["turns"]:
            for m in turn["request"]["messages"]:
                content = m.get("content")
                if isinstance(content, str) and len(content) > 30:
                    assert content[:30] not in text
    out = tmp_path / "none.json"
    argv = ["replay", "explain", "--corpus", str(corpus_file), "--no-progress", "--json", str(out)]
    assert main([*argv, "--session", "no-such-session"]) == 1
    assert "no session id contains" in capsys.readouterr().err
    assert not out.exists()
