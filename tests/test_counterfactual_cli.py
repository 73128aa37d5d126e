"""`tiergate replay counterfactual`: outcomes and odds join from fields or files, each
framework is scored on its own, and the figures agree with the replay's own tiers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from tiergate.cli import main
from tiergate.replay.corpus import write_corpus
from tiergate.replay.counterfactual import parse_outcome
from tiergate.replay.counterfactual_run import join
from tiergate.replay.generator import generate_corpus
from tiergate.replay.pipeline import prepare, run_policies

HARD = {"latent_hard", "explicit_hard", "failure_loop"}


def _sessions() -> list[dict[str, Any]]:
    docs = generate_corpus(20260814, 36)
    for i, d in enumerate(docs):
        d["source"] = {"framework": "alpha" if i % 2 else "beta", "key": f"task-{i % 12}"}
        d["resolved"] = d["archetype"] not in HARD
        d["strong_odds"] = 0.6
    return docs


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cf") / "corpus.jsonl"
    with open(path, "wb") as fh:
        write_corpus(_sessions(), fh)
    return path


def _run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path / "cf.json"
    code = main(["replay", "counterfactual", "--no-progress", "--json", str(out), *argv])
    text = capsys.readouterr().out
    return code, text, orjson.loads(out.read_bytes()) if out.exists() else {}


def test_scores_each_framework_against_the_ladder(
    corpus_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plot = tmp_path / "cf.svg"
    code, text, doc = _run(
        tmp_path,
        capsys,
        "--corpus",
        str(corpus_file),
        "--policy",
        "escalation",
        "escalation-uncapped",
        "--resamples",
        "100",
        "--plot",
        str(plot),
    )
    assert code == 0
    assert sorted(doc["groups"]) == ["alpha", "beta"]
    assert plot.read_text().lstrip().startswith("<?xml")
    corpus = [orjson.loads(line) for line in corpus_file.read_bytes().splitlines()]
    for name, group in doc["groups"].items():
        docs = [d for d in corpus if d["source"]["framework"] == name]
        # the framework replayed alone gives the same strong-turn share as the score
        totals = asyncio.run(run_policies(prepare(docs, "t"), ["escalation"]))["policies"]
        row = group["policies"]["escalation"]
        assert row["strong_share"] == pytest.approx(
            totals["escalation"]["strong_turn_share"], abs=1e-4
        )
        assert row["sessions"] == 18 and row["instances"] == 6
        assert row["resolved"] == sum(d["archetype"] not in HARD for d in docs)
        assert row["random"] == pytest.approx(row["strong_share"])
        assert row["pgr"] is not None and row["pgr"] <= row["oracle"] + 1e-9
        assert row["interval"]["pgr"][0] <= row["pgr"] <= row["interval"]["pgr"][1]
        assert f"| {name} | escalation | 18 (6) |" in text
        assert len(group["curves"]["oracle"]) == len(group["curves"]["share"])


def test_outcome_and_odds_files_override_the_fields(
    corpus_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CI log keyed by instance: every task passed, so nothing is left to rescue."""
    outcomes = tmp_path / "ci.csv"
    outcomes.write_text(
        "instance,ci\n" + "".join(f"task-{i},pass\n" for i in range(12)), encoding="utf-8"
    )
    odds = tmp_path / "odds.csv"
    odds.write_text(
        "instance_id,solve_rate,frontier_solve_rate\n"
        + "".join(f"task-{i},0.9,{i / 20}\n" for i in range(12)),
        encoding="utf-8",
    )
    common = ("--corpus", str(corpus_file), "--policy", "escalation", "--resamples", "0")
    code, _, doc = _run(tmp_path, capsys, *common, "--outcomes", str(outcomes), "--by", "all")
    assert code == 0
    row = doc["groups"]["all"]["policies"]["escalation"]
    assert row["resolved"] == 36 and row["pgr"] is None
    code, _, doc = _run(tmp_path, capsys, *common, "--odds", str(odds), "--by", "all")
    row = doc["groups"]["all"]["policies"]["escalation"]
    expect = [(i % 12) / 20 for i, d in enumerate(_sessions()) if d["archetype"] in HARD]
    assert row["q_strong"] - row["q_base"] == pytest.approx(sum(expect) / 36)


def test_sessions_without_an_outcome_are_left_out_and_counted() -> None:
    docs = _sessions()[:4]
    del docs[0]["resolved"]
    docs[1]["resolved"] = "maybe"
    docs[2]["strong_odds"] = 1.5
    joined = join(docs)
    assert (len(joined.sessions), joined.no_outcome, joined.no_odds) == (1, 2, 1)
    merged = join(docs, outcomes={docs[0]["source"]["key"]: "merged"})
    assert merged.r[docs[0]["session_id"]] == 1.0


@pytest.mark.parametrize(
    ("word", "r"),
    [("pass", 1.0), ("FAILED", 0.0), ("merged", 1.0), ("closed", 0.0), (True, 1.0), ("0", 0.0)],
)
def test_outcome_words(word: object, r: float) -> None:
    assert parse_outcome(word) == r


def test_nothing_to_score_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bare.jsonl"
    with open(path, "wb") as fh:
        write_corpus(generate_corpus(1, 3), fh)
    code = main(["replay", "counterfactual", "--no-progress", "--corpus", str(path)])
    assert code == 1
    assert "no session has both an outcome and odds" in capsys.readouterr().err


def test_split_scores_subsets_of_one_replay(
    corpus_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--split archetype`: the subsets' sessions add up to the group, the share too."""
    argv = ("--corpus", str(corpus_file), "--policy", "escalation", "--resamples", "0")
    code, _, doc = _run(tmp_path, capsys, *argv, "--by", "all", "--split", "archetype")
    assert code == 0
    whole = doc["groups"]["all"]["policies"]["escalation"]
    parts = [g["policies"]["escalation"] for k, g in doc["groups"].items() if k != "all"]
    assert len(parts) >= 3 and all(k.startswith("all / ") for k in doc["groups"] if k != "all")
    assert sum(p["sessions"] for p in parts) == whole["sessions"] == 36
    strong = sum(p["strong_share"] * p["turns"] for p in parts)
    assert strong == pytest.approx(whole["strong_share"] * whole["turns"])
