"""The second held-out corpus (eval/heldout2): deterministic, loadable, labelled by its rule."""

from __future__ import annotations

from pathlib import Path

from eval.heldout2.generate import generate, sample, write_jsonl

from tiergate.formats.openai import parse_request
from tiergate.replay.corpus import load_corpus
from tiergate.replay_cli import SCORER_POLICY_NAMES

SAMPLE = Path(__file__).resolve().parents[1] / "eval" / "heldout2" / "sample.jsonl"
SMALL = {"easy": 6, "medium": 4, "hard": 6}


def test_generator_is_deterministic() -> None:
    for protocol in ("text", "tools"):
        assert generate(protocol, 7, SMALL) == generate(protocol, 7, SMALL)
        assert generate(protocol, 7, SMALL) != generate(protocol, 8, SMALL)


def test_output_loads_with_the_replay_loader_and_codec(tmp_path: Path) -> None:
    for protocol in ("text", "tools"):
        path = tmp_path / f"{protocol}.jsonl"
        write_jsonl(generate(protocol, 11, SMALL), path)
        sessions = load_corpus(path)
        assert len(sessions) == sum(SMALL.values())
        assert {s["archetype"] for s in sessions} == set(SMALL)
        for s in sessions:
            for turn in s["turns"]:
                req = parse_request(turn["request"])  # the gateway's own codec accepts it
                assert req.messages


def test_labels_follow_the_rule() -> None:
    for protocol in ("text", "tools"):
        for s in generate(protocol, 3, {"easy": 20, "medium": 10, "hard": 20}):
            flags = [t["needs_strong"] for t in s["turns"]]
            n = len(flags)
            if s["archetype"] == "hard":
                assert 15 <= n <= 60
                first = flags.index(True)  # hard sessions need strong from a point on
                assert all(flags[first:]) and not any(flags[:first])
                assert s["label"]["hard_from_turn"] == first + 1
            else:
                assert not any(flags)
                if s["archetype"] == "easy":
                    assert 4 <= n <= 20
            tools = protocol == "tools"
            assert all(("tools" in t["request"]) == tools for t in s["turns"])


def test_committed_sample_is_current_and_loads() -> None:
    assert load_corpus(SAMPLE) == sample()


def test_cli_accepts_the_scorer_policies() -> None:
    from tiergate.replay.experiments import SCORER_POLICIES

    assert set(SCORER_POLICY_NAMES) == set(SCORER_POLICIES)
