"""The task-difficulty model: its features, its shipped artifact, its bounds and cost,
and its place in the session scorer's task-text statistics."""

from __future__ import annotations

import json
import math
import time
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.routing import session_scorer, task_difficulty
from tiergate.routing.session_scorer import FEATURE_NAMES, task_text
from tiergate.routing.task_difficulty import (
    CHAR_LIMIT,
    SHAPE_NAMES,
    TaskDifficulty,
    hashed,
    shape,
    tokens,
)

ISSUE = (
    "Pickling a QuerySet with values() crashes\n"
    "```python\nimport pickle\nqs = Toy.objects.values('material')\n```\n"
    "Traceback (most recent call last):\n"
    '  File "django/db/models/query.py", line 12, in __iter__\n'
    "AttributeError: 'NoneType' object has no attribute 'attname'\n"
    "See https://docs.djangoproject.com/en/dev/ref/models/querysets/\n"
)


def _doc(**over: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "version": "t",
        "buckets": 16,
        "bigrams": True,
        "shape": list(SHAPE_NAMES),
        "mean": [0.0] * len(SHAPE_NAMES),
        "scale": [1.0] * len(SHAPE_NAMES),
        "shape_weights": [0.0] * len(SHAPE_NAMES),
        "ngrams": {"index": [], "weights": []},
        "bias": 0.0,
    }
    doc.update(over)
    return doc


def test_tokens_are_lowercased_words_without_digits_or_single_letters() -> None:
    assert tokens("Fix QuerySet.values() in a 2nd call, x = 12") == [
        "fix",
        "queryset",
        "values",
        "in",
        "nd",
        "call",
    ]


def test_hashed_vector_is_unit_length_and_in_range() -> None:
    v = hashed(ISSUE, 64)
    assert v and all(0 <= i < 64 for i in v)
    assert math.isclose(sum(x * x for x in v.values()), 1.0)
    assert hashed("", 64) == {} and hashed("a b c", 64) == {}
    # bigrams add buckets, never remove them
    assert set(hashed(ISSUE, 4096, bigrams=False)) <= set(hashed(ISSUE, 4096))


def test_shape_counts_the_issue_parts() -> None:
    s = dict(zip(SHAPE_NAMES, shape(ISSUE), strict=True))
    assert s["traceback"] == 1.0 and shape("plain words")[SHAPE_NAMES.index("traceback")] == 0.0
    assert s["log_code_fences"] == pytest.approx(math.log1p(1))
    assert s["log_file_paths"] == pytest.approx(math.log1p(1))  # django/db/models/query.py
    assert s["log_urls"] == pytest.approx(math.log1p(1))
    assert s["log_error_names"] == pytest.approx(math.log1p(1))
    assert 0.0 < s["code_line_share"] < 1.0


def test_score_is_the_logistic_of_shape_and_ngram_terms() -> None:
    text = "pickle crash"
    (i, v), *_ = hashed(text, 16).items()
    weights = [0.0] * len(SHAPE_NAMES)
    weights[0] = 2.0  # log_chars
    model = TaskDifficulty.from_artifact(
        _doc(shape_weights=weights, ngrams={"index": [i], "weights": [3.0]}, bias=-1.0)
    )
    z = -1.0 + 2.0 * math.log1p(len(text)) + 3.0 * v
    assert model.score(text) == pytest.approx(1 / (1 + math.exp(-z)))


def test_bad_artifacts_are_refused() -> None:
    with pytest.raises(ValueError):
        TaskDifficulty.from_artifact(_doc(shape=["log_chars"]))
    with pytest.raises(ValueError):
        TaskDifficulty.from_artifact(_doc(ngrams={"index": [16], "weights": [1.0]}))
    with pytest.raises(ValueError):
        TaskDifficulty.from_artifact(_doc(ngrams={"index": [1, 2], "weights": [1.0]}))


def test_shipped_artifact_is_small_versioned_and_sourced() -> None:
    path = resources.files("tiergate.routing").joinpath("artifacts", task_difficulty.ARTIFACT)
    raw = path.read_text("utf-8")
    assert len(raw.encode()) < 200_000
    doc = json.loads(raw)
    assert doc["version"] == "task-difficulty-v1" and doc["shape"] == list(SHAPE_NAMES)
    assert "Verified" in doc["training"]["held_out"]
    assert any("MIT" in s["licence"] for s in doc["sources"])
    model = task_difficulty.load()
    assert 0.0 < model.score(ISSUE) < 1.0


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=3000))
def test_any_text_scores_inside_the_unit_interval(text: str) -> None:
    s = task_difficulty.task_difficulty(text)
    assert 0.0 <= s <= 1.0 and math.isfinite(s)
    assert s == task_difficulty.task_difficulty(text)  # deterministic


@settings(max_examples=20, deadline=None)
@given(st.text(min_size=1, max_size=200))
def test_text_past_the_char_limit_is_never_read(tail: str) -> None:
    head = (ISSUE * (CHAR_LIMIT // len(ISSUE) + 1))[:CHAR_LIMIT]
    assert task_difficulty.task_difficulty(head + tail) == task_difficulty.task_difficulty(head)


def test_scoring_a_long_task_text_is_cheap() -> None:
    text = (ISSUE * 400)[:CHAR_LIMIT]
    task_difficulty.task_difficulty(text)  # load the artifact first
    start = time.perf_counter()
    for _ in range(5):
        task_difficulty.task_difficulty(text)
    assert (time.perf_counter() - start) / 5 < 0.05


def test_the_session_scorer_reads_it_once_per_task_text(monkeypatch: pytest.MonkeyPatch) -> None:
    assert FEATURE_NAMES[-1] == "task_difficulty"
    # the shipped v2 artifact does not read it, so the gateway does not compute it
    assert "task_difficulty" not in session_scorer.shipped().names
    monkeypatch.setattr(session_scorer, "COMPUTE_TASK_DIFFICULTY", False)
    assert task_text(ISSUE).difficulty == 0.0
    monkeypatch.setattr(session_scorer, "COMPUTE_TASK_DIFFICULTY", True)
    t = task_text(ISSUE)
    assert t.difficulty > 0.0
    assert t.difficulty == pytest.approx(task_difficulty.task_difficulty(ISSUE))
    assert task_text("").difficulty == 0.0
    # the earlier artifacts read a prefix of the features and still load
    for name in ("session_scorer_v1.json", "session_scorer_v2.json"):
        scorer = session_scorer.load(name)
        assert "task_difficulty" not in scorer.names


def test_offline_extraction_computes_it_and_leaves_the_gateway_setting_alone() -> None:
    from eval.session_scorer_data import extract

    from tiergate.replay.generator import generate_corpus

    before = session_scorer.COMPUTE_TASK_DIFFICULTY
    data = extract(generate_corpus(3, 4), real=False)
    assert before == session_scorer.COMPUTE_TASK_DIFFICULTY
    col = data.x[:, FEATURE_NAMES.index("task_difficulty")]
    assert (col > 0.0).all() and (col < 1.0).all()
