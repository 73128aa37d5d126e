"""The value study's invariant-feature filter (eval/value_study.py): a feature is
kept only when its correlation with the target has one sign, of at least the
floor, within every training framework taken alone."""

from __future__ import annotations

import numpy as np
from eval import value_study


def _corpus(x: np.ndarray, frameworks: list[str]) -> value_study.Corpus:
    n = len(x)
    return value_study.Corpus(
        x=x,
        turn=np.ones(n),
        session=np.arange(n),
        r=np.zeros(n),
        p=np.zeros(n),
        n=np.ones(n),
        framework=np.array(frameworks),
        corpus=np.array(["c"] * n),
        instance=np.array([str(i) for i in range(n)]),
        session_id=np.array([str(i) for i in range(n)]),
    )


def test_a_feature_whose_sign_flips_between_frameworks_is_dropped() -> None:
    rng = np.random.default_rng(1)
    y = rng.normal(size=200)
    frameworks = ["a"] * 100 + ["b"] * 100
    same = y + rng.normal(scale=0.5, size=200)  # rises with y in both
    flips = np.concatenate([y[:100], -y[100:]])  # rises in a, falls in b
    noise = rng.normal(size=200)
    x = np.column_stack([same, flips, noise, np.zeros(200)])
    c = _corpus(x, frameworks)
    keep = value_study.invariant_columns(c, x, y, np.ones(200, dtype=bool), floor=0.2)
    assert keep.tolist() == [True, False, False, False]


def test_the_floor_of_zero_keeps_every_column_of_one_sign() -> None:
    y = np.array([0.0, 1.0, 2.0, 3.0])
    x = np.column_stack([y, -y])
    c = _corpus(x, ["a", "a", "b", "b"])
    keep = value_study.invariant_columns(c, x, y, np.ones(4, dtype=bool), floor=0.0)
    assert keep.tolist() == [True, True]
