"""`tiergate replay`: export, replay of an exported corpus with --json, the report,
and a small end-to-end run over HTTP through a real gateway to the simulator."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tiergate.cli import main
from tiergate.replay import experiments as ex
from tiergate.replay.e2e import pick_sessions, run_e2e
from tiergate.replay.features import extract
from tiergate.replay.generator import generate_corpus
from tiergate.replay.harness import run_policy
from tiergate.replay.metrics import METRIC_KEYS


def test_export_then_replay_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus, metrics = tmp_path / "corpus.jsonl", tmp_path / "metrics.json"
    assert main(["replay", "export", "--sessions", "10", "--seed", "3", "--out", str(corpus)]) == 0
    lines = corpus.read_bytes().splitlines()
    assert len(lines) == 10
    assert [orjson.loads(x) for x in lines] == generate_corpus(seed=3, sessions=10)
    args = ["replay", "--corpus", str(corpus), "--json", str(metrics), "--no-progress"]
    assert main([*args, "--policy", "always-cheap", "escalation-uncapped", "--e2e"]) == 0
    doc = orjson.loads(metrics.read_bytes())
    assert set(doc["policies"]) == {"always-cheap", "escalation-uncapped"}
    assert doc["e2e"]["errors"] == 0 and doc["e2e"]["tier_agreement"] == 1.0
    assert set(METRIC_KEYS) <= set(doc["policies"]["escalation-uncapped"])
    assert doc["corpus"]["sessions"] == 10
    assert "escalation-uncapped" in capsys.readouterr().out


def test_bad_corpus_is_reported_not_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"session_id": "a"}\n')
    assert main(["replay", "--corpus", str(bad), "--no-progress"]) == 2
    assert "turns: required" in capsys.readouterr().err


def test_request_the_codec_rejects_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    body = {"model": "orcarouter/coding", "messages": [{"role": "wizard", "content": "hi"}]}
    bad.write_bytes(orjson.dumps({"session_id": "a", "turns": [{"request": body}]}) + b"\n")
    assert main(["replay", "--corpus", str(bad), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "session a turn 1" in err and "wizard" in err


def test_help_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["replay", "--help"],
        ["replay", "export", "--help"],
        ["replay", "report", "--help"],
        ["replay", "counterfactual", "--help"],
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 0
    assert "--corpus" in capsys.readouterr().out


def test_report_writes_markdown_figures_and_json(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "report"
    argv = ["replay", "report", "--sessions", "12", "--no-e2e", "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    md = (out / "replay.md").read_text()
    for section in (
        "## Targets",
        "## 1. Main replay",
        "## 3. Threshold sweep",
        "## 6. Escalation latency",
    ):
        assert section in md
    pngs = sorted((out / "figures").glob("replay-*.png"))
    assert len(pngs) == 6  # one per experiment; e2e skipped
    assert all(p.stat().st_size < 200_000 for p in pngs)
    assert all(f"figures/{p.name}" in md for p in pngs)
    doc = orjson.loads((out / "replay-metrics.json").read_bytes())
    assert {"corpus", "cost_model", "policies", "targets", "experiments"} <= set(doc)
    assert len(doc["experiments"]["sweep"]["delta_gate"]) >= 9


async def test_e2e_over_http_agrees_with_the_in_process_replay() -> None:
    corpus = generate_corpus(seed=11, sessions=6)
    facts = extract(corpus)
    run = await run_policy(facts, ex.ENGINE_UNCAPPED)
    res = await run_e2e(corpus, facts, pick_sessions(facts, 6), in_process=run)
    served = sum(1 for r in run.records if r.tier is not None)
    assert res["requests"] == served and res["errors"] == 0
    assert res["tier_agreement"] == 1.0
    assert res["billed_usd"]["total"] > 0
    assert res["gateway_reported_usd"] == pytest.approx(res["billed_usd"]["total"], rel=1e-3)
    assert 0.5 < res["model_vs_billed"] < 1.5
    assert 0 < res["cache_hit_rate"]["billed"] < 1


def test_report_only_some_experiments(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "r"
    argv = ["replay", "report", "--sessions", "8", "--no-progress", "--out", str(out)]
    assert main([*argv, "--only", "adversarial", "latency"]) == 0
    md = (out / "replay.md").read_text()
    assert "## 4. Adversarial cap run" in md and "## 6. Escalation latency" in md
    assert "## 3. Threshold sweep" not in md and "## 7. End to end" not in md
    assert "## Counterfactual value on your own logs" in md  # the operator's guide stays
    assert sorted(p.name for p in (out / "figures").glob("*.png")) == [
        "replay-adversarial.png",
        "replay-latency.png",
    ]


def test_pick_sessions_spreads_over_the_corpus() -> None:
    facts = extract(generate_corpus(sessions=20))
    assert pick_sessions(facts, None) == list(range(20))
    assert pick_sessions(facts, 5) == [0, 4, 8, 12, 16]


def test_cli_accepts_the_cap_mode_policies() -> None:
    from tiergate.replay.experiments import CAP_MODE_POLICIES
    from tiergate.replay_cli import CAP_MODE_POLICY_NAMES

    assert set(CAP_MODE_POLICY_NAMES) == set(CAP_MODE_POLICIES)
