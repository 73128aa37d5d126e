"""The outcome-only ContextGraph corpus (eval/realtraffic/contextgraph.py) and the value
study's failure AUROC (eval/value_study.py), on small hand-made inputs."""

from __future__ import annotations

import numpy as np
from eval import value_study
from eval.realtraffic import contextgraph
from hypothesis import given
from hypothesis import strategies as st


def _traj(instance: str, target: bool) -> dict[str, object]:
    entry = {"cutoff_date": "None", "mask": "False", "system_prompt": "None", "text": "None"}
    return {
        "instance_id": instance,
        "model_name": "swe-agent-llama-70b",
        "target": target,
        "trajectory": [
            {**entry, "role": "system", "system_prompt": "SETTING: a shell"},
            {**entry, "role": "user", "text": "ISSUE: the button does not click"},
            {**entry, "role": "ai", "text": "let me look\n```\nls\n```"},
            {**entry, "role": "user", "text": "a.py b.py"},
            {**entry, "role": "ai", "text": "```\nsubmit\n```"},
        ],
    }


def test_each_agent_reply_is_one_turn_whose_request_is_everything_before_it() -> None:
    doc = contextgraph.session_doc(_traj("owner__pkg-12", True), "x.json")
    assert doc is not None and doc["resolved"] is True and doc["strong_odds"] is None
    assert doc["source"]["framework"] == "swe-agent" and doc["source"]["key"] == "owner__pkg-12"
    first, second = (t["request"]["messages"] for t in doc["turns"])
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[0]["content"] == "SETTING: a shell"  # the system text is its own field
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"].startswith("let me look")


def test_swe_bench_repositories_are_dropped() -> None:
    # the held-out Verified split lives in these repositories
    assert contextgraph.session_doc(_traj("django__django-11019", False), "x.json") is None
    assert contextgraph.session_doc(_traj("sympy__sympy-20590", False), "x.json") is None


@given(st.lists(st.tuples(st.floats(-5, 5), st.booleans()), min_size=2, max_size=40))
def test_losing_auroc_is_the_pairwise_rate_of_losing_sessions_ranked_higher(
    rows: list[tuple[float, bool]],
) -> None:
    scores = np.array([s for s, _ in rows])
    resolved = np.array([0.0 if losing else 1.0 for _, losing in rows])
    n = len(rows)
    c = value_study.Corpus(
        x=np.zeros((n, 1)),
        turn=np.ones(n),
        session=np.arange(n),
        r=resolved,
        p=np.zeros(n),
        n=np.ones(n),
        framework=np.array(["f"] * n),
        corpus=np.array(["c"] * n),
        instance=np.array([str(i) for i in range(n)]),
        session_id=np.array([str(i) for i in range(n)]),
    )
    got = value_study.losing_auroc(c, np.arange(n), np.ones(n, dtype=bool), scores)
    pos = [s for s, losing in rows if losing]
    neg = [s for s, losing in rows if not losing]
    if not pos or not neg:
        assert np.isnan(got)
        return
    pairs = [(a > b) + 0.5 * (a == b) for a in pos for b in neg]
    # ties are ranked by position (a stable sort), so allow half a pair per tie
    ties = sum(a == b for a in pos for b in neg)
    assert abs(got - sum(pairs) / len(pairs)) <= 0.5 * ties / len(pairs) + 1e-9
