"""The replay corpus: a deterministic, varied generator and a validated JSONL format."""

from __future__ import annotations

import io
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from tiergate.formats.openai import parse_request
from tiergate.replay.corpus import CorpusError, corpus_summary, load_corpus, write_corpus
from tiergate.replay.generator import MIX, generate_corpus, scaled_mix
from tiergate.routing.strikes import looks_like_error, looks_like_test_failure


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, Any]]:
    return generate_corpus()


def _served(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in doc["turns"] if t.get("upstream_status", 200) == 200]


def _latest_user(turn: dict[str, Any]) -> str | None:
    last = turn["request"]["messages"][-1]
    return last["content"] if last["role"] == "user" else None


def test_generator_is_deterministic_per_seed() -> None:
    a = orjson.dumps(generate_corpus(seed=7, sessions=30))
    assert a == orjson.dumps(generate_corpus(seed=7, sessions=30))
    assert a != orjson.dumps(generate_corpus(seed=8, sessions=30))


def test_default_mix_and_size(corpus: list[dict[str, Any]]) -> None:
    assert Counter(d["archetype"] for d in corpus) == MIX
    summary = corpus_summary(corpus)
    assert summary["sessions"] == 400
    assert 3600 <= summary["turns"] <= 4600  # about 4,000 turns, ~10 per session
    assert 0.2 < summary["hard_turns"] / summary["turns"] < 0.4
    long = [len(_served(d)) for d in corpus if d["archetype"] == "long_trivial"]
    assert min(long) >= 20 and statistics.mean(long) >= 23
    assert len({d["session_id"] for d in corpus}) == 400


def test_scaled_mix_keeps_the_total() -> None:
    for n in (1, 7, 33, 400, 1000):
        assert sum(scaled_mix(n).values()) == n


def test_every_turn_is_a_full_agent_request(corpus: list[dict[str, Any]]) -> None:
    for doc in corpus[:60]:
        prev: list[dict[str, Any]] = []
        for turn in doc["turns"]:
            body = turn["request"]
            msgs = body["messages"]
            assert msgs[0]["role"] == "system" and len(msgs[0]["content"]) > 700
            assert len(body["tools"]) == 2
            assert msgs[: len(prev)] == prev  # cumulative history
            parse_request(body)  # the real codec accepts it
            if turn.get("upstream_status", 200) == 200:
                prev = [*msgs, {"role": "assistant", **_assistant(turn["response"])}]


def _assistant(resp: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"content": resp["content"]}
    if resp["tool_calls"]:
        out["tool_calls"] = resp["tool_calls"]
    return out


def test_hard_turns_carry_3_to_8_kb_pastes(corpus: list[dict[str, Any]]) -> None:
    sizes = []
    for doc in corpus:
        if doc["archetype"] in ("latent_hard", "hard_start"):
            for turn in _served(doc):
                if turn["needs_strong"]:
                    text = _latest_user(turn)
                    assert text is not None
                    sizes.append(len(text))
    assert min(sizes) >= 3000
    assert max(sizes) <= 11000  # 3-8 KB paste plus the prose around it


def test_latent_hard_onset_varies_and_turn_one_is_trivial(corpus: list[dict[str, Any]]) -> None:
    onsets = []
    for doc in corpus:
        if doc["archetype"] != "latent_hard":
            continue
        served = _served(doc)
        assert not served[0]["needs_strong"] and len(_latest_user(served[0]) or "") < 300
        onsets.append(next(i for i, t in enumerate(served, 1) if t["needs_strong"]))
    assert min(onsets) >= 2 and max(onsets) <= 20
    assert len(set(onsets)) >= 8


def test_failure_loops_repeat_one_prompt_with_new_errors(corpus: list[dict[str, Any]]) -> None:
    shaped = total = 0
    for doc in [d for d in corpus if d["archetype"] == "failure_loop"]:
        loop = [t for t in _served(doc) if t["needs_strong"]]
        assert len(loop) >= 4
        assert len({_latest_user(t) for t in loop}) == 1  # the same short prompt
        outputs = []
        for t in loop:
            latest = [m["content"] for m in t["request"]["messages"] if m["role"] == "tool"][-3:]
            total += 1
            shaped += any(looks_like_error(x) or looks_like_test_failure(x) for x in latest)
            outputs.append("".join(latest))
        assert len(set(outputs)) == len(outputs)  # a new failure output every turn
    # Every loop turn carries a recognisable failure (Go compile errors with no exit
    # code included, since the detector knows path:line:col diagnostics).
    assert shaped / total >= 0.95


def test_texts_are_varied_across_languages(corpus: list[dict[str, Any]]) -> None:
    users = [u for d in corpus for t in _served(d) if (u := _latest_user(t)) is not None]
    assert len(set(users)) / len(users) > 0.8
    blob = "\n".join(u for u in users if len(u) > 3000)
    for marker in (
        "goroutine ",
        "Traceback (most recent call last)",
        "\tat com.",
        "panicked at",
        "    at ",
    ):
        assert marker in blob
    easy = [
        u
        for d in corpus
        if d["archetype"] == "long_trivial"
        for t in _served(d)
        if (u := _latest_user(t))
    ]
    assert len(set(easy)) / len(easy) > 0.95


def test_jsonl_round_trip(tmp_path: Path) -> None:
    sessions = generate_corpus(sessions=5)
    path = tmp_path / "c.jsonl"
    with path.open("wb") as fh:
        assert write_corpus(sessions, fh) == 5
    assert load_corpus(path) == sessions


def test_validation_names_every_bad_line(tmp_path: Path) -> None:
    good = {"session_id": "a", "turns": [{"request": {"model": "m", "messages": []}}]}
    lines = [
        orjson.dumps(good),
        b"{not json",
        orjson.dumps({"session_id": "b", "turns": [{"headers": {}}]}),
        orjson.dumps(good),  # duplicate id
        orjson.dumps(
            {"session_id": "c", "turns": [{"request": {"messages": []}, "needs_strong": "yes"}]}
        ),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorpusError) as err:
        load_corpus(path)
    text = "\n".join(err.value.problems)
    assert "line 2" in text and "line 3.turns[0].request" in text
    assert "duplicate session id" in text and "line 5.turns[0].needs_strong" in text


def test_write_corpus_writes_one_line_per_session() -> None:
    buf = io.BytesIO()
    write_corpus(generate_corpus(sessions=3), buf)
    assert buf.getvalue().count(b"\n") == 3
