"""eval.realtraffic.threshold_sweep on a small generated corpus: what truly holds as
`delta_t2` rises, the sweep's 0.55 point is the shipped policy, and the outputs.

Verified before asserting (400-session default corpus, thresholds 0.30-0.95):
with the share caps lifted, every session escalated at a higher threshold is
escalated at each lower one (the difficulty gate only fires on fewer turns;
strikes do not depend on the threshold). Under the shipped caps this does NOT
hold: the caps are shared by all sessions, so fewer escalations elsewhere can
free a session that was denied at a lower threshold (0.55 -> 0.60 adds three
sessions there), and even per-class counts can rise. So the nesting is asserted
uncapped only.
"""

from __future__ import annotations

import asyncio
import itertools
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from eval.common import replace_section
from eval.realtraffic import independent
from eval.realtraffic import threshold_sweep as sw

from tiergate.replay.features import CorpusFacts
from tiergate.replay.generator import generate_corpus
from tiergate.replay.harness import STANDARD_POLICIES, run_policy
from tiergate.replay.metrics import outcomes
from tiergate.replay.pipeline import prepare

THRESHOLDS = (0.30, 0.45, 0.55, 0.70, 0.95)


@pytest.fixture(scope="module")
def facts() -> CorpusFacts:
    corpus = generate_corpus(20260814, 40) + independent.generate(16)
    return prepare(corpus, "test").facts


@pytest.fixture(scope="module")
def uncapped(facts: CorpusFacts) -> dict[str, Any]:
    return asyncio.run(sw.sweep_facts(facts, THRESHOLDS, sw.SCORERS, capped=False))


@pytest.mark.parametrize("scorer", sw.SCORERS)
def test_uncapped_escalated_sessions_are_nested(uncapped: dict[str, Any], scorer: str) -> None:
    points = uncapped[scorer]
    assert [p["threshold"] for p in points] == list(THRESHOLDS)
    for low, high in itertools.pairwise(points):
        assert set(high["_escalated_sessions"]) <= set(low["_escalated_sessions"])
        for name, c in high["classes"].items():
            assert c["escalated"] <= low["classes"][name]["escalated"]
    assert sw.monotone(points) == {"counts_non_increasing": True, "sessions_nested": True}
    # not vacuous: the sweep moves something, and the highest point is strikes only
    assert points[0]["escalated"] > points[-1]["escalated"]
    assert set(points[-1]["triggers"]) <= {"strikes"}


def test_capped_point_at_055_is_the_shipped_policy(facts: CorpusFacts) -> None:
    swept = asyncio.run(sw.sweep_facts(facts, (0.55,), ("learned",), capped=True))
    shipped = asyncio.run(run_policy(facts, STANDARD_POLICIES["escalation"]))
    expected = sorted(o.index for o in outcomes(shipped) if o.escalated)
    assert swept["learned"][0]["_escalated_sessions"] == expected
    assert swept["learned"][0]["cost_vs_frontier_affinity"] < 1


def test_meets_needs_both_sides() -> None:
    def p(t: float, easy: float, hard: float) -> dict[str, Any]:
        return {"threshold": t, "classes": {"easy": {"rate": easy}, "hard": {"rate": hard}}}

    points = [p(0.5, 0.2, 0.7), p(0.6, 0.1, 0.6), p(0.7, 0.05, 0.5)]
    assert sw.meets(points, "real") == [0.6]
    assert sw.meets(points, "synthetic") == []


def test_run_labels_merge_coinciding_points() -> None:
    xy = [(1.0, 2.0), (0.0, 1.0), (0.0, 1.0), (0.0, 1.0)]
    assert sw.run_labels(xy, [0.5, 0.6, 0.7, 0.8]) == ["0.50", "0.60-0.80", None, None]


def test_markdown_and_svg(uncapped: dict[str, Any], tmp_path: Path) -> None:
    result = {
        "corpus": "synthetic default (tiergate replay)",
        "held_out": False,
        "protocol": "mixed",
        "kind": "synthetic",
        "learned_scores": "shipped",
        **{
            s: {
                "points": sw._public(uncapped[s]),
                "monotone": sw.monotone(uncapped[s]),
                "meets_target_at": sw.meets(uncapped[s], "synthetic"),
            }
            for s in sw.SCORERS
        },
    }
    text = sw.markdown([result], "now", "figures/x.svg", "cmd")
    assert text.startswith(sw.BEGIN) and text.endswith(sw.END)
    assert text.count("\n| synthetic default / mixed |") == len(THRESHOLDS) * len(sw.SCORERS)
    assert "| **0.55** |" in text
    out = tmp_path / "sweep.svg"
    sw.plot([result], out, "now")
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == len(sw.SCORERS)
    doc = replace_section(
        f"intro\n\n{sw.BEGIN}\nSTALE-ROWS\n{sw.END}\ntail\n", text, sw.BEGIN, sw.END
    )
    assert "STALE-ROWS" not in doc and doc.startswith("intro") and doc.endswith("tail\n")
