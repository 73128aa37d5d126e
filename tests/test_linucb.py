"""LinUCB: the math, the reward, learning, and arm persistence in the state stores."""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_difficulty_samples import hard_turn_text, request, user
from tiergate.routing import difficulty, linucb
from tiergate.routing.linucb import BanditStore, LinUCBArm, choose, reward, update
from tiergate.state.base import StateUnavailable, Write
from tiergate.state.memory import MemoryStore
from tiergate.state.redis import RedisStore

# ---- math ---------------------------------------------------------------------------------


def test_sherman_morrison_matches_the_direct_ridge_inverse() -> None:
    rng = np.random.default_rng(1)
    arm = LinUCBArm.fresh(dim=5, ridge=2.0)
    a = 2.0 * np.eye(5)
    b = np.zeros(5)
    for _ in range(200):
        x, r = rng.random(5), float(rng.random())
        arm = update(arm, x, r)
        a += np.outer(x, x)
        b += r * x
    np.testing.assert_allclose(arm.a_inv, np.linalg.inv(a), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(arm.theta, np.linalg.solve(a, b), rtol=1e-8, atol=1e-12)
    assert arm.pulls == 200


def test_update_returns_a_new_arm() -> None:
    arm = LinUCBArm.fresh(dim=3)
    new = update(arm, np.ones(3), 1.0)
    assert arm.pulls == 0 and not arm.b.any()
    assert new.pulls == 1


def test_ucb_is_prediction_plus_exploration_width() -> None:
    arm = update(LinUCBArm.fresh(dim=2), np.array([1.0, 0.0]), 0.8)
    x = np.array([1.0, 1.0])
    width = math.sqrt(x @ arm.a_inv @ x)
    assert arm.ucb(x, 0.5) == pytest.approx(float(arm.theta @ x) + 0.5 * width)


def test_choose_takes_the_highest_ucb_and_breaks_ties_by_order() -> None:
    x = np.ones(3)
    fresh = {"a": LinUCBArm.fresh(3), "b": LinUCBArm.fresh(3)}
    assert choose(fresh, x, 1.0) == "a"
    fresh["b"] = update(fresh["b"], x, 5.0)
    assert choose(fresh, x, 0.0) == "b"
    with pytest.raises(ValueError):
        choose({}, x, 1.0)


def test_learns_a_separable_problem_in_a_few_hundred_rounds() -> None:
    """Hard requests pay off on the strong arm, easy ones on the cheap arm."""
    rng = random.Random(7)
    easy = difficulty.full_transcript_features(request([user("Rename the variable.")]))
    hard = difficulty.full_transcript_features(request([user(hard_turn_text(0))]))
    contexts = {
        "easy": linucb.context_vector(easy, delta=0.2),
        "hard": linucb.context_vector(hard, delta=0.7),
    }
    payoff = {("easy", "cheap"): 0.85, ("easy", "strong"): 0.6}
    payoff |= {("hard", "cheap"): 0.2, ("hard", "strong"): 0.9}
    arms = {"cheap": LinUCBArm.fresh(), "strong": LinUCBArm.fresh()}
    correct = []
    for t in range(400):
        kind = rng.choice(["easy", "hard"])
        x = contexts[kind]
        arm = choose(arms, x, alpha=0.5)
        arms[arm] = update(arms[arm], x, payoff[(kind, arm)] + rng.gauss(0, 0.05))
        if t >= 300:
            correct.append(arm == ("strong" if kind == "hard" else "cheap"))
    assert sum(correct) / len(correct) >= 0.9


# ---- context and reward -------------------------------------------------------------------


def test_context_vector_layout() -> None:
    req = request([user(hard_turn_text(2))])
    x = linucb.context_vector_for(req)
    assert x.shape == (linucb.DIM,) == (len(linucb.FEATURE_NAMES),)
    assert x[0] == 1.0
    assert ((x >= 0) & (x <= 1)).all()
    names = dict(zip(linucb.FEATURE_NAMES, x, strict=True))
    assert names["delta_score"] == pytest.approx(difficulty.delta_score(req))
    assert names["has_tools"] == 1.0 and names["has_images"] == 0.0
    turns = linucb.context_vector(difficulty.full_transcript_features(req), turns=50)
    assert turns[linucb.FEATURE_NAMES.index("log_turns")] == pytest.approx(1.0)


def test_reward() -> None:
    assert reward(True, 0.0) == 1.0
    assert reward(False, 0.0) == 0.0
    assert reward(True, 0.01) == pytest.approx(1.0 - 0.3 * 0.5)  # cost == cost_ref
    assert reward(True, 0.01) > reward(True, 0.05) > reward(True, 5.0) > 1.0 - 0.3
    assert reward(False, 10.0) >= -0.3
    assert reward(True, 0.0, feedback=0.25) == 0.25  # a verdict replaces the 200-OK proxy
    assert reward(False, 0.0, feedback=3.0) == 1.0  # clamped
    assert reward(True, 0.02, cost_weight=0.0) == 1.0


# ---- serialisation and persistence --------------------------------------------------------


def trained_arm(n: int = 5) -> LinUCBArm:
    arm = LinUCBArm.fresh()
    rng = np.random.default_rng(3)
    for _ in range(n):
        arm = update(arm, rng.random(linucb.DIM), 0.7)
    return arm


def test_arm_roundtrips_exactly_through_bytes() -> None:
    arm = trained_arm()
    back = LinUCBArm.from_bytes(arm.to_bytes())
    np.testing.assert_array_equal(back.a_inv, arm.a_inv)
    np.testing.assert_array_equal(back.b, arm.b)
    assert back.pulls == arm.pulls
    assert back.ridge == arm.ridge == linucb.PRIOR_PRECISION


def test_a_v1_arm_decodes_with_the_ridge_it_was_built_on() -> None:
    """Arms stored before the ridge was (format v1) were built on a ridge of 1; they
    keep it, so their prior mean is weighted as it was when they were trained."""
    arm = LinUCBArm.fresh(ridge=1.0)
    for k in range(5):
        arm = update(arm, np.full(linucb.DIM, 0.1 * (k + 1)), 0.7)
    v1 = orjson.dumps(
        {"v": 1, "a_inv": arm.a_inv, "b": arm.b, "pulls": arm.pulls},
        option=orjson.OPT_SERIALIZE_NUMPY,
    )
    back = LinUCBArm.from_bytes(v1)
    assert back.ridge == 1.0 and back.pulls == 5
    x, prior = np.full(linucb.DIM, 0.4), linucb.arm_prior(1.0)
    assert back.ucb(x, 0.5, prior) == pytest.approx(arm.ucb(x, 0.5, prior))
    assert orjson.loads(update(back, x, 1.0).to_bytes())["ridge"] == 1.0  # stays v1-built


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"{}",
        b'{"a_inv": [[1]], "b": [0]}',
        b'{"a_inv": "x", "b": []}',
        b'{"v": 2, "a_inv": [[1]], "b": [0], "ridge": 0}',
    ],
)
def test_corrupt_or_foreign_arms_are_rejected(raw: bytes) -> None:
    with pytest.raises(ValueError):
        LinUCBArm.from_bytes(raw)


async def exercise_store(bandits: BanditStore, peer: BanditStore | None = None) -> None:
    """Load, update, reload, and race 20 concurrent updates (half from a peer)."""
    x = np.full(linucb.DIM, 0.5)
    arms = await bandits.load("coding", ["m1", "m2"])
    assert arms["m1"].pulls == 0
    np.testing.assert_array_equal(arms["m1"].a_inv, np.eye(linucb.DIM) / linucb.PRIOR_PRECISION)
    updated = await bandits.update("coding", "m1", x, 1.0)
    assert updated is not None and updated.pulls == 1
    again = await bandits.load("coding", ["m1", "m2"])
    np.testing.assert_allclose(again["m1"].a_inv, updated.a_inv)
    assert again["m2"].pulls == 0
    peer = peer or bandits
    await asyncio.gather(
        *(
            (bandits if i % 2 else peer).update("coding", "m2", x * (1 + i % 3), 0.5)
            for i in range(20)
        )
    )
    final = (await bandits.load("coding", ["m2"]))["m2"]
    assert final.pulls == 20  # no update lost
    expected = LinUCBArm.fresh()
    for i in range(20):
        expected = update(expected, x * (1 + i % 3), 0.5)
    np.testing.assert_allclose(final.a_inv, expected.a_inv, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(final.b, expected.b, rtol=1e-9)


async def exercise_feedback(bandits: BanditStore, peer: BanditStore) -> None:
    """Late client feedback credits the serving arm exactly once, from any instance."""
    x = np.linspace(0, 1, linucb.DIM)
    await bandits.remember("req-1", "coding", "m3", x)
    assert await bandits.feedback("unknown", 1.0) is None
    results = await asyncio.gather(bandits.feedback("req-1", 0.2), peer.feedback("req-1", 0.9))
    applied = [r for r in results if r is not None]
    assert len(applied) == 1 and applied[0].pulls == 1
    arm = (await peer.load("coding", ["m3"]))["m3"]
    assert arm.pulls == 1
    assert arm.b == pytest.approx(x * (0.2 if results[0] is not None else 0.9))
    assert await peer.feedback("req-1", 1.0) is None


async def test_bandit_store_on_memory() -> None:
    bandits = BanditStore(MemoryStore())
    await exercise_store(bandits)
    await exercise_feedback(bandits, bandits)


async def test_bandit_store_on_redis_shared_by_two_instances(redis_store: RedisStore) -> None:
    peer_store = RedisStore(redis_store.url, key_prefix=redis_store.prefix)
    try:
        bandits, peer = BanditStore(redis_store), BanditStore(peer_store)
        await exercise_store(bandits, peer)
        await exercise_feedback(bandits, peer)
    finally:
        await peer_store.close()


async def test_corrupt_stored_arm_restarts_fresh(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    bandits = BanditStore(store)
    await store.set(bandits.key("coding", "m1"), b"garbage")
    with caplog.at_level(logging.WARNING):
        arms = await bandits.load("coding", ["m1"])
    assert arms["m1"].pulls == 0
    assert "reset" in caplog.text and "garbage" not in caplog.text


class DownStore:
    """A store whose backend is unreachable: every call raises StateUnavailable."""

    name = "down"

    async def get(self, key: str) -> bytes | None:
        raise StateUnavailable("down")

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        raise StateUnavailable("down")

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        raise StateUnavailable("down")

    async def transact(self, keys: Sequence[str], fn: Any, retries: int = 16) -> Any:
        raise StateUnavailable("down")


async def test_unavailable_store_degrades_to_fresh_arms_and_dropped_updates() -> None:
    bandits = BanditStore(DownStore())  # type: ignore[arg-type]
    arms = await bandits.load("coding", ["m1"])
    assert arms["m1"].pulls == 0
    assert await bandits.update("coding", "m1", np.ones(linucb.DIM), 1.0) is None
    await bandits.remember("r", "coding", "m1", np.ones(linucb.DIM))  # does not raise
    assert await bandits.feedback("r", 1.0) is None


async def test_ttl_is_applied_to_arm_writes() -> None:
    writes: list[Write] = []
    store = MemoryStore()
    real = store.transact

    async def spy(keys: Sequence[str], fn: Any, retries: int = 16) -> Any:
        def wrapped(current: list[bytes | None]) -> Any:
            out, result = fn(current)
            writes.extend(out)
            return out, result

        return await real(keys, wrapped, retries)

    store.transact = spy  # type: ignore[method-assign]
    await BanditStore(store, ttl=3600).update("coding", "m1", np.ones(linucb.DIM), 1.0)
    assert writes and writes[0].ttl == 3600


@settings(max_examples=25, deadline=None)
@given(
    v1_pulls=st.integers(0, 8),
    steps=st.lists(
        st.tuples(st.sampled_from(["old", "new"]), st.floats(-0.5, 1.0), st.integers(0, 99)),
        max_size=12,
    ),
)
def test_stored_v1_and_new_arms_learn_side_by_side(
    v1_pulls: int, steps: list[tuple[str, float, int]]
) -> None:
    """A router whose store holds a v1 arm and gains a new one: every update through the
    store equals the direct math, the v1 arm keeps ridge 1 and the new one starts from
    PRIOR_PRECISION, whatever the order of updates."""
    rng = np.random.default_rng(v1_pulls)
    old = LinUCBArm.fresh(ridge=1.0)
    for _ in range(v1_pulls):
        old = update(old, rng.random(linucb.DIM), 0.5)
    v1 = orjson.dumps(
        {"v": 1, "a_inv": old.a_inv, "b": old.b, "pulls": old.pulls},
        option=orjson.OPT_SERIALIZE_NUMPY,
    )

    async def run() -> None:
        store = MemoryStore()
        bandits = BanditStore(store)
        await store.set(bandits.key("r", "old"), v1)
        expected = {"old": old, "new": LinUCBArm.fresh()}
        for arm, r, seed in steps:
            x = np.random.default_rng(seed).random(linucb.DIM)
            await bandits.update("r", arm, x, r)
            expected[arm] = update(expected[arm], x, r)
        got = await bandits.load("r", ["old", "new"])
        assert got["old"].ridge == 1.0 and got["new"].ridge == linucb.PRIOR_PRECISION
        for name in ("old", "new"):
            np.testing.assert_allclose(got[name].a_inv, expected[name].a_inv, rtol=1e-9)
            np.testing.assert_allclose(got[name].b, expected[name].b, rtol=1e-9, atol=1e-12)
            assert got[name].pulls == expected[name].pulls

    asyncio.run(run())
