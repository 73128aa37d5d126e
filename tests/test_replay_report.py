"""The report's pure analysis: sweep margins, where the cap binds, targets, tables."""

from __future__ import annotations

from typing import Any

import pytest

from tiergate.replay.analysis import cap_binding_prevalence, sweep_summary, targets
from tiergate.replay.experiments import ENGINE_UNCAPPED, margin
from tiergate.replay.report import table


def _point(escalated: list[int], fp: int = 0, missed: int = 0) -> dict[str, Any]:
    return {
        "_signature": [(i, "difficulty") for i in escalated],
        "false_positive_sessions": fp,
        "missed_sessions": missed,
    }


def test_margin_counts_identical_neighbours_on_the_grid() -> None:
    points = {
        0.35: _point([1, 2, 3], fp=1),
        0.45: _point([1, 2]),
        0.55: _point([1, 2]),
        0.65: _point([1, 2]),
        0.75: _point([1], missed=1),
    }
    m = margin(points, 0.55)
    assert (m["identical_from"], m["identical_to"]) == (0.45, 0.65)
    assert (m["below"], m["above"]) == (0.1, 0.1) and m["met"]
    assert not margin(points, 0.65)["met"]  # identical below, not above
    assert margin(points, 0.50) == {"chosen": 0.50, "below": None, "above": None, "met": False}


def test_sweep_summary_finds_the_clean_range_and_best_point() -> None:
    points = {
        "0.40": {"false_positive_sessions": 5, "missed_sessions": 0},
        "0.50": {"false_positive_sessions": 1, "missed_sessions": 0},
        "0.60": {"false_positive_sessions": 0, "missed_sessions": 3},
        "0.70": {"false_positive_sessions": 0, "missed_sessions": 9},
    }
    s = sweep_summary(points)
    assert s["lowest_without_false_positives"] == 0.60
    assert s["highest_without_misses"] == 0.50
    assert (s["best"], s["best_errors"]) == (0.50, 1)


def test_cap_binding_prevalence_interpolates_the_crossing() -> None:
    prev = {
        "prevalences": [0.0, 0.1, 0.2],
        "policies": {
            ENGINE_UNCAPPED.name: {
                "strong_request_share": [0.0, 0.1, 0.3],
                "strong_spend_share": [0.0, 0.3, 0.5],
            }
        },
    }
    assert cap_binding_prevalence(prev) == pytest.approx(0.15)  # requests, the default basis
    assert cap_binding_prevalence(prev, basis="spend") == pytest.approx(0.1 * 0.2 / 0.3)
    assert cap_binding_prevalence(None) is None


def test_targets_state_each_goal_met_or_not() -> None:
    """Targets are measured on the shipped, capped engine; the uncapped one is beside."""
    arch = {
        "easy_short": {"sessions": 10, "false_positive_sessions": 0},
        "long_trivial": {"sessions": 5, "false_positive_sessions": 1},
        "latent_hard": {"sessions": 20, "sessions_escalated": 19},
    }
    free = {**arch, "long_trivial": {"sessions": 5, "false_positive_sessions": 3}}
    results = {
        "policies": {
            "escalation": {
                "archetypes": arch,
                "cost_per_1k_sessions": 40.0,
                "hard_turn_coverage": 0.8,
                "strong_turn_share": 0.2,
            },
            ENGINE_UNCAPPED.name: {
                "archetypes": free,
                "cost_per_1k_sessions": 60.0,
                "hard_turn_coverage": 0.9,
                "strong_turn_share": 0.3,
            },
            "always-frontier-affinity": {"cost_per_1k_sessions": 100.0},
        },
        "adversarial": {
            "cap_percent": 20.0,
            "final_share": 0.201,
            "max_deviation_after_settling_points": 0.5,
            "max_deviation_second_half_points": 0.2,
        },
    }
    got = {t["target"]: t["met"] for t in targets(results)}
    assert got == {
        "false-positive easy sessions": False,
        "latent-hard sessions escalated": True,
        "hard-turn coverage at <= 50 % of always-frontier-with-affinity cost": True,
        "adversarial share within 1 point of the cap after warm-up": True,
    }
    beside = {t["target"]: t["uncapped"] for t in targets(results)}
    assert beside["false-positive easy sessions"] == "3 of 15"
    cov = "hard-turn coverage at <= 50 % of always-frontier-with-affinity cost"
    assert beside[cov] == "90.0 % at 60.0 %"


def test_table_escapes_pipes_and_formats_numbers() -> None:
    text = table(("a", "b"), [("x|y", 0.12345), (None, 7.0), ("z", 123.456)])
    assert "x\\|y" in text and "0.123" in text
    assert "| - | 7 |" in text and "123.46" in text
