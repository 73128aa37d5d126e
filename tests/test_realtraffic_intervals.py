"""eval.realtraffic.intervals: per-session outcomes agree with the replay's own
totals, and the instance-clustered bootstrap widens when runs of one task agree."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from eval.realtraffic import intervals as iv
from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.replay.generator import generate_corpus
from tiergate.replay.pipeline import prepare, run_policies


def _rows(per_instance: list[tuple[int, int]], bucket: str = "hard") -> list[iv.SessionRow]:
    """(escalated, sessions) per instance -> rows."""
    out = []
    for i, (esc, n) in enumerate(per_instance):
        out += [iv.SessionRow("text", bucket, f"inst-{i}", k < esc) for k in range(n)]
    return out


def test_replay_rows_match_the_replays_totals() -> None:
    corpus = generate_corpus(20260814, 30)
    for i, doc in enumerate(corpus):
        doc["source"] = {"key": f"task-{i // 3}"}
    rows = iv.replay_rows(corpus, "tool-call", None)
    totals = asyncio.run(run_policies(prepare(corpus, "test"), list(iv.POLICIES)))["policies"]
    for policy in iv.POLICIES:
        assert len(rows[policy]) == len(corpus)
        assert sum(r.escalated for r in rows[policy]) == totals[policy]["sessions_escalated"]
        assert {r.instance for r in rows[policy]} == {f"task-{i // 3}" for i in range(len(corpus))}
    assert sum(r.escalated for r in rows["escalation"]) > 0  # not vacuous


def test_clustered_interval_is_wider_than_independent_sessions() -> None:
    # 10 tasks of 10 runs each, every run of a task agrees: 10 effective samples
    agreeing = iv.cluster_bootstrap(_rows([(10, 10)] * 5 + [(0, 10)] * 5), 4000)
    # same 50 % rate, but runs split evenly inside every task: no clustering
    mixed = iv.cluster_bootstrap(_rows([(5, 10)] * 10), 4000)
    assert agreeing["rate"] == mixed["rate"] == 0.5
    lo, hi = agreeing["ci95"]
    assert hi - lo > 0.4  # about +-0.3 with 10 effective samples
    assert mixed["ci95"] == [0.5, 0.5]  # no between-task spread to resample
    assert agreeing["design_effect"] == pytest.approx(10, rel=0.2)
    assert agreeing["instances_with_any_escalation"] == 5
    # a 50/50 split of tasks (sample variance 0.25 * 10 / 9) needs
    # 0.278 * (1.96 / 0.1)^2 = 107 tasks for +-10 points
    assert agreeing["instances_for_10pt"] == 107
    # without spread, the independent-sessions floor: 97 sessions / 10 per task
    assert mixed["instances_for_10pt"] == 10


def test_instance_rate_weighs_tasks_not_runs() -> None:
    b = iv.cluster_bootstrap(_rows([(9, 9), (0, 1)]), 500)
    assert b["rate"] == 0.9
    assert b["instance_rate"] == 0.5


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.integers(1, 8).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
        min_size=1,
        max_size=12,
    )
)
def test_interval_brackets_the_rate(per_instance: list[tuple[int, int]]) -> None:
    b = iv.cluster_bootstrap(_rows(per_instance), 300)
    lo, hi = b["ci95"]
    assert 0.0 <= lo <= b["rate"] + 1e-9 and b["rate"] - 1e-9 <= hi <= 1.0
    assert b["sessions"] == sum(n for _, n in per_instance)
    assert b["escalated"] == sum(e for e, _ in per_instance)


@pytest.mark.parametrize(
    ("bucket", "ci", "verdict"),
    [
        ("hard", [0.62, 0.9], "met"),
        ("hard", [0.2, 0.5], "missed"),
        ("hard", [0.4, 0.7], "undecided"),
        ("easy", [0.01, 0.09], "met"),
        ("easy", [0.2, 0.4], "missed"),
        ("easy", [0.05, 0.15], "undecided"),
        ("medium", [0.1, 0.2], "-"),
    ],
)
def test_verdict(bucket: str, ci: list[float], verdict: str) -> None:
    assert iv._verdict(bucket, {"ci95": ci}) == verdict


def test_markdown_has_one_row_per_bucket() -> None:
    b: dict[str, Any] = iv.cluster_bootstrap(_rows([(1, 2), (0, 3)]), 100)
    results = [
        {
            "protocol": "text",
            "policy": "escalation",
            "learned_scores": "fold-out",
            "buckets": {"easy": b, "hard": b},
        },
    ]
    md = iv.markdown(results, "2026-12-02", 100)
    assert md.startswith(iv.BEGIN) and md.endswith(iv.END)
    assert md.count("| text | `escalation` (fold-out) |") == 2


def test_main_redraws_from_json(tmp_path: Path) -> None:
    b = iv.cluster_bootstrap(_rows([(1, 2), (0, 3)]), 100)
    results = [
        {
            "protocol": p,
            "policy": pol,
            "learned_scores": "shipped",
            "buckets": dict.fromkeys(iv.CLASSES, b),
        }
        for p in ("text", "tool-call")
        for pol in iv.POLICIES
    ]
    saved = tmp_path / "in.json"
    saved.write_bytes(orjson.dumps({"generated": "now", "resamples": 100, "results": results}))
    figure, out = tmp_path / "f.png", tmp_path / "never.json"
    argv = ["--from-json", str(saved), "--no-doc", "--figure", str(figure), "--json", str(out)]
    assert iv.main(argv) == 0
    assert figure.read_bytes().startswith(b"\x89PNG") and not out.exists()
