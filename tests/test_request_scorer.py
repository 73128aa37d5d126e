"""The learned request scorer, the bands it drives, and linucb's exploration (issue 17)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from servers import gateway_config
from test_round_trips import Counting
from tiergate.config import ModelConfig, Price, RouterConfig
from tiergate.config_load import parse_config
from tiergate.core.model import ChatRequest, ChatResponse, Message, TextPart, Usage
from tiergate.formats.openai import parse_request
from tiergate.gateway.auth import TokenTable
from tiergate.gateway.planner import Outcome, Planner
from tiergate.gateway.state_read import plan_read
from tiergate.routing import bands, learned, linucb
from tiergate.routing.difficulty import full_transcript_features
from tiergate.routing.distributor import Distributor
from tiergate.routing.percentile import BUCKETS, ScoreHistogram, bucket_of, histogram_from_values
from tiergate.routing.strategies import Candidate, StrategyContext, rank
from tiergate.state.redis import RedisStore

WEAK = Candidate("weak/m", ModelConfig(quality=0.6, price=Price(input=0.5, output=1.0)))
STRONG = Candidate("strong/m", ModelConfig(quality=0.9, price=Price(input=5.0, output=15.0)))
EASY = "What is the capital of France?\nA. Paris\nB. Rome\nC. Madrid\nD. Berlin\nAnswer:"


def req(text: str) -> ChatRequest:
    return ChatRequest(model="router/r", messages=[Message("user", [TextPart(text)])])


def router(**kw: Any) -> RouterConfig:
    base: dict[str, Any] = {
        "name": "r",
        "strategy": "learned",
        "weak_pool": [WEAK.name],
        "mid_pool": [WEAK.name],
        "strong_pool": [STRONG.name],
    }
    base.update(kw)
    return RouterConfig(**base)


def hist(scores: list[float]) -> ScoreHistogram:
    counts = [0.0] * BUCKETS
    for s in scores:
        counts[bucket_of(s)] += 1
    return ScoreHistogram(tuple(counts))


# ---- the scorer -----------------------------------------------------------------------------


def test_shipped_artifact_loads_and_scores_in_the_unit_interval() -> None:
    scorer = learned.load_scorer()
    assert scorer.version and len(scorer.weights) > 100
    assert list(scorer.quantiles) == sorted(scorer.quantiles)
    for text in (EASY, "", "x" * 20_000, "Solve 3x^2 + 2x = 7 for x.\n" * 40):
        assert 0.0 <= scorer.score(req(text)) <= 1.0


def test_calibration_is_the_training_quantile() -> None:
    scorer = learned.RequestScorer("t", 0.0, {"w:hard": 2.0}, (-1.0, 0.0, 1.0, 3.0))
    assert scorer.calibrate(-5.0) == 0.0 and scorer.calibrate(9.0) == 1.0
    assert scorer.calibrate(0.0) == pytest.approx(1 / 3)
    assert scorer.calibrate(2.0) == pytest.approx(2.5 / 3)
    assert scorer.score_text("a hard one") > scorer.score_text("an easy one")


def test_features_read_structure_maths_and_code_by_shape() -> None:
    f = learned.ask_features(EASY)
    assert "opts:4" in f and "first:what" in f and "w:paris" in f and "b:the capital" in f
    maths = learned.ask_features("Find x if 2 * 3 = x and y = 4^2, with $\\frac{1}{2}$.")
    assert "latex" in maths and "arith:0" not in maths and "eq:0" not in maths
    code = learned.ask_features("Fix this:\n    if x:\n        return f(x);\n}\n")
    assert "code:0" not in code
    assert "C:NOT" in learned.ask_features("Which of these is NOT a prime?")


def test_the_ask_is_read_up_to_a_bound() -> None:
    long = "word " * 50_000
    assert learned.ask_features(long) == learned.ask_features(long + "word " * 1000)


def test_a_foreign_feature_version_is_refused(tmp_path: Path) -> None:
    data = learned.load_scorer().to_json() | {"feature_version": 999}
    path = tmp_path / "a.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="rebuild"):
        learned.load_scorer(path)


# ---- bands ------------------------------------------------------------------------------


def test_learned_strategy_defaults_send_a_stated_share_to_strong() -> None:
    r = router()
    assert bands.static_thresholds(r) == bands.LEARNED_THRESHOLDS
    hard = StrategyContext(request=req(EASY), router=r, score=0.85)
    easy = StrategyContext(request=req(EASY), router=r, score=0.2)
    assert rank("learned", [WEAK, STRONG], hard)[0] == STRONG.name
    assert rank("learned", [WEAK, STRONG], easy)[0] == WEAK.name


def test_learned_strategy_scores_with_the_learned_scorer() -> None:
    ctx = StrategyContext(request=req(EASY), router=router())
    assert ctx.gate_score() == pytest.approx(learned.load_scorer().score(req(EASY)))
    lexical = StrategyContext(request=req(EASY), router=router(strategy="gated_adaptive"))
    assert lexical.gate_score() != ctx.gate_score()


def test_explicit_edges_win_over_the_learned_defaults() -> None:
    r = router(thresholds={"t2": 0.95})
    t = bands.static_thresholds(r)
    assert (t.t1, t.t2) == (bands.LEARNED_THRESHOLDS.t1, 0.95)


def test_percentile_edges_follow_recent_traffic_after_warmup() -> None:
    r = router(
        strategy="gated_adaptive", thresholds={"t2_percentile": 90, "percentile_warmup": 100}
    )
    assert bands.uses_percentile_bands(r)
    traffic = hist([0.05 + 0.2 * i / 1000 for i in range(1000)])  # lexical-like: 0.05-0.25
    t = bands.band_thresholds(r, traffic)
    assert 0.22 <= t.t2 <= 0.24 and t.t1 <= t.t2
    assert bands.band_thresholds(r, hist([0.1] * 50)).t2 == 0.70  # warming up: absolute edge
    read = plan_read(r, None, "ws", [WEAK.name], now=0.0, escalation_on=False,
                     pin_router=None, affinity_on=False)  # fmt: skip
    assert len(read.band_keys) == 2 * BUCKETS and read.band_keys[0].startswith("band:pct:r:")
    decoded = read.decode([b"3"] + [None] * (len(read.band_keys) - 1))
    assert decoded.band_scores is not None and decoded.band_scores.total == 3


def test_warnings_for_edges_the_lexical_score_cannot_reach() -> None:
    assert bands.threshold_warnings(router(strategy="gated_adaptive"), "routers.0") == []
    high = router(strategy="gated_adaptive", thresholds={"t1": 0.5, "t2": 0.8})
    (warning,) = bands.threshold_warnings(high, "routers.0")
    assert "routers.0.thresholds.t2 = 0.8" in warning and "0.75" in warning
    assert bands.threshold_warnings(router(thresholds={"t2": 0.9}), "routers.0") == []


def test_config_check_prints_the_warning(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "channels:\n  - {name: a, type: openai, keys: ['k'], models: {m/x: {}, m/y: {}}}\n"
        "routers:\n  - {name: r, strategy: gated_adaptive, weak_pool: [m/x], strong_pool: [m/y],"
        " thresholds: {t1: 0.3, t2: 0.8}}\n"
    )
    out = subprocess.run([sys.executable, "-m", "tiergate", "config", "check", str(cfg)],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "warning: routers.0.thresholds.t2 = 0.8 is above 0.75" in out.stdout


# ---- linucb ------------------------------------------------------------------------------


def stream(seed: int, n: int = 1500) -> tuple[np.ndarray, np.ndarray]:
    """Learned score s ~ U(0, 1); the strong model is needed (weak wrong) when s is high."""
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    weak_right = rng.random(n) > 0.15 + 0.6 * s
    return s, weak_right


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_linucb_explores_and_routes_by_the_learned_score(seed: int) -> None:
    """No stream order locks it onto one arm: hard requests go strong, easy ones weak."""
    r = router(strategy="linucb")
    arms = {c.name: linucb.LinUCBArm.fresh() for c in (WEAK, STRONG)}
    s, weak_right = stream(seed)
    picks = []
    full = full_transcript_features(req(EASY))
    for score_value, ok in zip(s, weak_right, strict=True):
        x = linucb.context_vector(full, learned_score=score_value)
        ctx = StrategyContext(request=req(EASY), router=r, bandit_arms=arms, bandit_x=x)
        pick = rank("linucb", [WEAK, STRONG], ctx)[0]
        reward = linucb.reward(True if pick == STRONG.name else bool(ok), 0.0) - (
            0.35 if pick == STRONG.name else 0.0
        )
        arms[pick] = linucb.update(arms[pick], x, reward)
        picks.append(pick == STRONG.name)
    late = np.array(picks[500:])
    assert min(a.pulls for a in arms.values()) >= linucb.MIN_PULLS
    assert 0.1 < late.mean() < 0.9
    assert s[500:][late].mean() > s[500:][~late].mean() + 0.2


def test_fresh_arms_rank_the_untried_arm_first() -> None:
    r = router(strategy="linucb")
    tried = linucb.LinUCBArm.fresh()
    for _ in range(3):
        tried = linucb.update(tried, np.ones(linucb.DIM) / 4, 1.0)
    ctx = StrategyContext(request=req(EASY), router=r, bandit_arms={STRONG.name: tried})
    assert rank("linucb", [STRONG, WEAK], ctx)[0] == WEAK.name


# ---- through the planner, on real Redis ---------------------------------------------------


LEARNED_ROUTER = {
    "name": "asks",
    "allowed_models": ["openai/*"],
    "strategy": "learned",
    "weak_pool": ["openai/gpt-5-mini"],
    "strong_pool": ["openai/gpt-5"],
    "thresholds": {"t2_percentile": 80, "percentile_warmup": 3},
    "default_model": "openai/gpt-5-mini",
    "session_aware": False,  # independent questions: no pin decides before the score
}


async def test_percentile_bands_learn_from_traffic_in_the_same_round_trips(
    redis_store: RedisStore,
) -> None:
    """Each served request adds its learned score to the router's histogram in the
    commit's one round trip; once warmed up, the edge is that histogram's p80, so
    the hardest-looking ask goes strong and a trivial one stays weak."""
    cfg = parse_config(gateway_config("http://x", routers=[LEARNED_ROUTER]))
    distributor = Distributor.from_config(cfg)
    store = Counting(redis_store)
    planner = Planner(cfg, distributor, store)  # type: ignore[arg-type]
    ws = TokenTable(cfg.workspaces).lookup("tg-test-token")
    assert ws is not None
    easy = EASY
    hard = "Write a Python function that merges two sorted lists in O(n) time and prove it."
    scorer = learned.load_scorer()
    assert scorer.score(req(hard)) > scorer.score(req(easy))

    async def serve(text: str) -> str:
        store.calls.clear()
        body = {"model": "orcarouter/asks", "messages": [{"role": "user", "content": text}]}
        plan = await planner.plan(parse_request(body), body, {}, ws, "r")
        target = next(distributor.attempts(plan.models, plan.channel_pin))
        resp = ChatResponse("id", target.model, [TextPart("ok")], usage=Usage(10, 1))
        await plan.commit(Outcome(True, target, resp, cost=0.0001))
        assert store.calls == {"get_many": 1, "apply_batch": 1}  # the hot path's budget
        return plan.models[0]

    for _ in range(4):
        await serve(easy)
    keys = bands.band_histogram_keys(planner.routers["asks"], time.time())
    assert histogram_from_values(await redis_store.get_many(keys)).total == 4
    assert await serve(hard) == "openai/gpt-5"  # above the p80 of four trivial asks
    assert await serve(easy) == "openai/gpt-5-mini"
