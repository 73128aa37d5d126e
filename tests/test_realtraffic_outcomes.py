"""The development corpora with outcomes (eval/realtraffic/outcomes.py): results files,
leave-out odds, the held-out split, and a smoke check of a built corpus when cached."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
from eval.realtraffic import outcomes

CACHE = Path(os.environ.get("TIERGATE_OUTCOMES_CACHE", "/work/cache/cfscore/corpus"))


def test_resolved_ids_read_every_report_layout() -> None:
    # CodeR's results.json has trailing commas; SWE-bench reports list `resolved`
    coder = '{"generated": ["a__b-1", "a__b-2",],\n "resolved": ["a__b-2",\n],}'
    assert outcomes.resolved_ids(coder) == {"a__b-2"}
    msb = '{"total_instances": 3, "resolved_ids": ["x__y-1"], "unresolved_ids": ["x__y-2"]}'
    assert outcomes.resolved_ids(msb) == {"x__y-1"}
    with pytest.raises(ValueError):
        outcomes.resolved_ids('{"resolved": 3}')


def test_leave_out_odds_never_count_the_runs_own_outcome() -> None:
    resolved = {"m1": {"t1", "t2"}, "m2": {"t1"}, "m3": set()}
    odds = outcomes.leave_out_odds(resolved, ["t1", "t2", "t3"])
    assert odds["m1"] == {"t1": 0.5, "t2": 0.0, "t3": 0.0}
    assert odds["m2"] == {"t1": 0.5, "t2": 0.5, "t3": 0.0}
    assert odds["m3"]["t1"] == 1.0


def test_terminal_bench_odds_come_from_the_best_other_runs() -> None:
    big = outcomes.TB_MIN_TRIALS
    runs = {
        "mini": {"a": [True] * big, "b": [False]},
        "best1": {"a": [True] * (big - 1), "b": [True]},
        "best2": {"a": [False] * (big - 1), "b": [True]},
        "best3": {"a": [True] * (big // 2) + [False] * (big // 2), "b": [False]},
        "worst": {"a": [False] * big, "b": [False]},
        "tiny": {"a": [True], "b": [True]},  # too few trials to rank
    }
    odds = outcomes.tb_odds(runs, "mini")
    # the three best runs with enough trials, not the scored one, not the tiny one
    flat = runs["best1"]["a"] + runs["best2"]["a"] + runs["best3"]["a"]
    assert odds["a"] == pytest.approx(sum(flat) / len(flat))
    assert odds["b"] == pytest.approx(2 / 3)
    # scoring best1 itself takes its own trials out of p
    assert outcomes.tb_odds(runs, "best1")["b"] == pytest.approx(1 / 3)


def test_lite_labels_are_the_lite_rows_of_the_solve_rates(tmp_path: Path) -> None:
    """instances.csv holds no Verified row; the join keeps Lite rows only, fix time if known."""
    rates = tmp_path / "instances.csv"
    rates.write_text(
        "instance_id,in_lite,systems_solved,systems,solve_rate,frontier_solved,"
        "frontier_systems,frontier_solve_rate\n"
        "a__a-1,true,1,24,0.04,1,5,0.2\n"
        "a__a-2,false,0,24,0.0,0,5,0.0\n"
        "a__a-3,true,3,24,0.12,3,5,0.6\n",
        encoding="utf-8",
    )
    fix = tmp_path / "difficulty.csv"
    fix.write_text(
        "instance_id,difficulty,in_verified\na__a-1,1-4 hours,false\na__a-9,<15 min fix,true\n",
        encoding="utf-8",
    )
    labels, odds = outcomes.lite_labels(rates, fix)
    assert odds == {"a__a-1": 0.2, "a__a-3": 0.6}
    assert labels.get("a__a-1") == "1-4 hours" and labels.is_hard("1-4 hours")
    assert labels.get("a__a-3") == outcomes.NO_FIX_TIME
    assert labels.get("a__a-9") is None


@pytest.mark.skipif(
    not (CACHE / "outcomes-manifest.csv").exists(), reason="built corpus not cached"
)
def test_built_corpus_has_outcomes_and_no_verified_instance() -> None:
    """Smoke check of a real build (python -m eval.realtraffic.outcomes)."""
    verified = set()
    difficulty = Path("/work/shared/data/swebench-difficulty/difficulty.csv")
    if difficulty.exists():
        with open(difficulty, newline="", encoding="utf-8") as fh:
            verified = {r["instance_id"] for r in csv.DictReader(fh) if r["in_verified"] == "true"}
    with open(CACHE / "outcomes-manifest.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert rows
    assert not {r["instance_id"] for r in rows} & verified
    for r in rows:
        assert r["resolved"] in ("0", "1")
        assert 0.0 <= float(r["strong_odds"]) <= 1.0
