"""Request-level benchmark harnesses (eval/): metrics on hand-computed examples, the
RouterArena prediction-file format, the wiring to the real router on tiny generated
data sets, and one smoke run per real data set when it is present."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # eval/ lives at the repository root, beside src/
    sys.path.insert(0, str(REPO_ROOT))

from eval import common, routellm_mmlu, routerarena  # noqa: E402
from eval.requestlevel_metrics import (  # noqa: E402
    CurvePoint,
    apgr,
    arena_score,
    auroc,
    cpt,
    inference_cost,
    iso_accuracy,
    optimal_accuracy,
    router_metrics,
    subject_correlation,
    threshold_grid,
    verdict,
    with_endpoints,
    within_domain_auroc,
)

from tiergate.routing import linucb  # noqa: E402
from tiergate.routing.difficulty import full_score  # noqa: E402

# ---- RouteLLM metrics -------------------------------------------------------------------


def test_apgr_and_cpt_on_a_hand_computed_curve() -> None:
    # weak 0.60, strong 0.80; AUC = 0.5 * (0.60 + 0.75) / 2 + 0.5 * (0.75 + 0.80) / 2 = 0.725
    points = [CurvePoint(0.0, 0.60), CurvePoint(0.5, 0.75), CurvePoint(1.0, 0.80)]
    assert apgr(points, 0.60, 0.80) == pytest.approx((0.725 - 0.60) / 0.20)  # 0.625
    # PGR 50 % = accuracy 0.70: on the first segment at 0.5 * 0.10 / 0.15 = 1/3
    assert cpt(points, 0.60, 0.80, 0.5) == pytest.approx(1 / 3)
    # PGR 80 % = accuracy 0.76: on the second segment at 0.5 + 0.5 * 0.01 / 0.05 = 0.6
    assert cpt(points, 0.60, 0.80, 0.8) == pytest.approx(0.6)


def test_apgr_is_order_free_and_half_for_the_random_line() -> None:
    line = [CurvePoint(1.0, 0.8), CurvePoint(0.25, 0.65), CurvePoint(0.0, 0.6)]
    assert apgr(line, 0.6, 0.8) == pytest.approx(0.5)
    assert cpt(line, 0.6, 0.8, 0.5) == pytest.approx(0.5)
    below = [CurvePoint(0.0, 0.6), CurvePoint(0.5, 0.6), CurvePoint(1.0, 0.8)]
    assert apgr(below, 0.6, 0.8) == pytest.approx(0.25)


def test_cpt_takes_the_first_crossing_of_a_non_monotone_curve() -> None:
    wiggle = [CurvePoint(0.0, 0.6), CurvePoint(0.2, 0.72), CurvePoint(0.4, 0.65)]
    assert cpt(wiggle, 0.6, 0.8, 0.5) == pytest.approx(0.2 * 0.10 / 0.12)
    assert cpt(wiggle, 0.6, 0.8, 0.8) is None  # 0.76 is never reached
    assert cpt(with_endpoints(wiggle, 0.6, 0.8), 0.6, 0.8, 0.8) == pytest.approx(
        0.4 + 0.6 * 0.11 / 0.15
    )


def test_optimal_accuracy_spends_strong_calls_on_strong_only_prompts() -> None:
    weak = np.array([True, False, False, False])
    strong = np.array([True, True, False, True])
    assert optimal_accuracy(weak, strong, 0.0) == 0.25
    assert optimal_accuracy(weak, strong, 0.25) == 0.5
    assert optimal_accuracy(weak, strong, 1.0) == 0.75  # only two prompts can gain


def test_auroc_counts_ties_half_and_is_half_without_information() -> None:
    assert auroc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([False, False, True, True])) == 0.75
    assert auroc(np.array([1.0, 1.0, 1.0, 1.0]), np.array([True, False, True, False])) == 0.5
    assert math.isnan(auroc(np.array([0.2, 0.3]), np.array([True, True])))


def test_a_score_that_only_ranks_subjects_has_no_within_subject_auroc() -> None:
    # subject "a": low scores, half need the strong model; subject "b": high scores,
    # all need it. Overall the score looks informative; inside a subject it is flat.
    scores = np.array([0.1, 0.1, 0.1, 0.1, 0.9, 0.9, 0.9])
    labels = np.array([True, False, True, False, True, True, True])
    domains = ["a"] * 4 + ["b"] * 3
    assert auroc(scores, labels) > 0.7
    assert within_domain_auroc(scores, labels, domains) == 0.5  # "b" has no negatives
    assert math.isnan(subject_correlation(scores, labels, domains))  # two subjects only
    three = [*domains, "c"]
    # subject means (0.1, 0.9, 0.5), rates (0.5, 1, 0): r = 0.2 / sqrt(0.32 x 0.5) = 0.5
    corr = subject_correlation(np.append(scores, 0.5), np.append(labels, False), three)
    assert corr == pytest.approx(0.5)


def test_threshold_grid_spans_all_strong_to_none_strong() -> None:
    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    grid = threshold_grid(scores, 4)
    assert len(grid) == 5 and grid[0] == 0.1
    assert np.mean(scores >= grid[0]) == 1.0 and np.mean(scores >= grid[-1]) == 0.0


def test_verdict_compares_the_interval_with_one_half() -> None:
    assert verdict((0.51, 0.56)) == "better than random"
    assert "worse" in verdict((0.45, 0.49))
    assert "no better" in verdict((0.48, 0.53))


# ---- RouterArena scoring ----------------------------------------------------------------


def test_arena_score_on_hand_computed_points() -> None:
    # cost at c_min: C = 1, S = 1.1 A / (0.1 A + 1)
    assert arena_score(0.0044, 0.5) == pytest.approx(0.55 / 1.05)
    assert arena_score(1e-9, 0.5) == pytest.approx(0.55 / 1.05)  # clamped to c_min
    assert arena_score(200.0, 0.9) == 0.0  # cost at c_max: C = 0
    # geometric mean of the bounds: C = 0.5; A = 1: 1.1 * 0.5 / (0.1 + 0.5)
    assert arena_score(math.sqrt(200 * 0.0044), 1.0) == pytest.approx(0.55 / 0.6)
    # RouterArena's leaderboard: Azure, accuracy 68.09 %, $0.54 per 1k -> 66.66
    assert arena_score(0.54, 0.6809) == pytest.approx(0.6666, abs=2e-4)
    with pytest.raises(ValueError):
        arena_score(0.0, 0.5)


def test_iso_accuracy_inverts_the_arena_score() -> None:
    costs = np.array([0.01, 0.1, 1.0])
    for cost, acc in zip(costs, iso_accuracy(0.7, costs), strict=True):
        assert arena_score(float(cost), float(acc)) == pytest.approx(0.7)


def test_inference_cost_uses_per_million_prices() -> None:
    # claude-3-haiku's first sub_10 row: 349 in, 120 out at $0.25 / $1.25 per 1M
    assert inference_cost((0.25, 1.25), 349, 120) == pytest.approx(0.00023725)


# ---- tiny generated data sets -------------------------------------------------------------

HARD = "Prove by induction that the sum of $\\frac{1}{k^2}$ is bounded: " * 3 + "why? explain."


def write_mmlu(folder: Path, rows: list[tuple[str, bool, bool]], contaminated: list[str]) -> None:
    folder.mkdir(parents=True)
    with (folder / "mmlu_toy.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["prompt", routellm_mmlu.WEAK_COLUMN, routellm_mmlu.STRONG_COLUMN])
        w.writerows([(p, str(a), str(b)) for p, a, b in rows])
    lines = [json.dumps({"train_prompt": "x", "eval_prompt": p}) for p in contaminated]
    (folder / "contaminated_prompts.jsonl").write_text("\n".join(lines) + "\n")


def test_mmlu_loader_drops_contaminated_prompts(tmp_path: Path) -> None:
    rows = [("What is 2+2?\nA. 4\nAnswer:", True, True), ("leaked", False, True)]
    write_mmlu(tmp_path / "routellm-mmlu", rows, ["leaked"])
    data = routellm_mmlu.load_mmlu(tmp_path)
    assert data.prompts == ["What is 2+2?\nA. 4\nAnswer:"] and data.excluded == 1
    assert data.domains == ["toy"] and data.weak.tolist() == [True]


def test_gated_adaptive_sends_only_prompts_at_or_above_t2_to_strong(tmp_path: Path) -> None:
    easy = [f"Name the capital of country {i}.\nA. X\nB. Y\nAnswer:" for i in range(6)]
    rows = [(p, True, True) for p in easy] + [(HARD, False, True)]
    write_mmlu(tmp_path / "routellm-mmlu", rows, [])
    data = routellm_mmlu.load_mmlu(tmp_path)
    scored = routellm_mmlu.score_prompts(data.prompts, show=False)
    hard_score = full_score(common.user_request(HARD))
    assert scored.scores[-1] == pytest.approx(hard_score) and hard_score > scored.scores[:-1].max()
    t2 = (hard_score + scored.scores[:-1].max()) / 2
    decisions = routellm_mmlu.gated_decisions(scored, [0.0, t2, 1.0], show=False)
    assert decisions[:, 0].all() and not decisions[:, 2].any()
    assert decisions[:, 1].tolist() == [False] * 6 + [True]


def test_linucb_chooses_before_it_sees_the_outcome(tmp_path: Path) -> None:
    n, forced = 160, 2 * linucb.MIN_PULLS
    prompts = [f"Question {i}: pick one.\nA. a\nB. b\nAnswer:" for i in range(n)]
    weak, strong = np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
    scored = routellm_mmlu.score_prompts(prompts, show=False)
    order = np.arange(n)
    free = routellm_mmlu.linucb_prequential(scored, weak, strong, order, 0.0, 0.5)
    # forced exploration: each arm is served MIN_PULLS times whatever the outcomes
    assert free[:forced].sum() == linucb.MIN_PULLS
    # then it learns that only the strong model is right (but for EXPLORE_SHARE)
    assert free[forced + 20 :].mean() >= 1 - 2 * linucb.EXPLORE_SHARE
    equal = np.ones(n, dtype=bool)
    priced = routellm_mmlu.linucb_prequential(scored, equal, equal, order, 10.0, 0.5)
    assert priced[forced + 20 :].mean() <= 2 * linucb.EXPLORE_SHARE  # equal, priced: weak


def test_mmlu_run_on_generated_data_has_the_report_shape(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    rows = [
        (f"Item {i}: {'why ' * (i % 5)}which is right?\nA. a\nAnswer:", bool(w), bool(s))
        for i, (w, s) in enumerate(zip(rng.random(40) < 0.5, rng.random(40) < 0.8, strict=True))
    ]
    write_mmlu(tmp_path / "routellm-mmlu", rows, [])
    data = routellm_mmlu.load_mmlu(tmp_path)
    results = routellm_mmlu.run(
        data, bins=4, seeds=2, random_iters=2, cost_weights=(0.0, 10.0), draws=40, show=False
    )
    names = [r["name"] for r in results["routers"]]
    assert names == [
        "learned", "gated_adaptive", "linucb", "linear_fit_in_sample",
        "linear_fit_cross_fitted", "linear_fit_prequential", "linear_fit_bandit_coin_direct",
        "linear_fit_bandit_coin_ipw", "linear_fit_linucb_log_direct", "greedy_bandit",
        "prompt_length", "random",
    ]  # fmt: skip
    by_name = {r["name"]: r for r in results["routers"]}
    for name in ("learned", "gated_adaptive", "prompt_length", "linear_fit_cross_fitted"):
        points = by_name[name]["mean_points"]
        assert points[0]["share"] == 1.0 and points[-1]["share"] == 0.0
    for name in ("linear_fit_prequential", "linear_fit_bandit_coin_direct",
                 "linear_fit_linucb_log_direct"):  # fmt: skip
        assert by_name[name]["runs"] == 2  # one per stream order
    assert by_name["random"]["mean_points"][0]["accuracy"] == pytest.approx(data.weak.mean())
    shares = results["diagnostics"]["linucb_strong_share_at_default_cost_weight"]
    assert len(shares) == 2 and all(0.0 <= v <= 1.0 for v in shares)
    markdown = routellm_mmlu.render_markdown(results, figure="f.png")
    assert (
        "| gated_adaptive |" in markdown and "![accuracy vs strong-model calls](f.png)" in markdown
    )
    routellm_mmlu.plot_curves(results, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 1000


def write_arena(folder: Path) -> None:
    """Two models on four queries; 'cheap' costs $0.1/$0.4 per 1M, 'pricey' $1/$2."""
    folder.mkdir(parents=True)
    (folder / "cost.json").write_text(json.dumps({
        "cheap": {"input_token_price_per_million": 0.1, "output_token_price_per_million": 0.4},
        "pricey": {"input_token_price_per_million": 1.0, "output_token_price_per_million": 2.0},
    }))  # fmt: skip
    scores = {"cheap": [1.0, 0.0, 1.0, 0.0], "pricey": [1.0, 1.0, 0.0, 0.5]}
    for model, values in scores.items():
        with (folder / f"{model}.jsonl").open("w") as fh:
            for i, s in enumerate(values):
                fh.write(json.dumps({
                    "global_index": f"Toy_{i}", "question": f"Question {i}?",
                    "generated_answer": f"answer {i}", "success": True, "error": None,
                    "token_usage": {"input_tokens": 1000, "output_tokens": 500},
                    "evaluation_result": {"score": s, "inference_cost": 0.0},
                }) + "\n")  # fmt: skip


def test_routerarena_prediction_files_and_scores(tmp_path: Path) -> None:
    write_arena(tmp_path / "data" / "routerarena-sub10")
    data = routerarena.load_arena(tmp_path / "data")
    results = routerarena.run(data, tmp_path / "out", show=False)
    by_name = {r["name"]: r for r in results["routers"]}
    assert results["weak_model"] == "cheap" and results["strong_model"] == "pricey"

    entries = json.loads(
        (tmp_path / "out" / "predictions" / "tiergate-always-pricey.json").read_text()
    )
    assert isinstance(entries, list) and len(entries) == 4
    assert set(entries[0]) == {"global index", "prompt", "prediction", "generated_result",
                               "cost", "accuracy", "for_optimality"}  # fmt: skip
    assert entries[0]["global index"] == "Toy_0" and entries[0]["prediction"] == "pricey"
    assert entries[0]["generated_result"] == {
        "generated_answer": "answer 0", "success": True, "error": None,
        "token_usage": {"input_tokens": 1000, "output_tokens": 500, "total_tokens": 1500},
    }  # fmt: skip
    assert entries[0]["for_optimality"] is False
    # pricey: 1000 x $1/1M + 500 x $2/1M = $0.002 a query, so $2 per 1k queries
    assert entries[0]["cost"] == pytest.approx(0.002)
    pricey = by_name["always pricey"]
    assert pricey["accuracy"] == pytest.approx(2.5 / 4) and pricey["cost_per_1k"] == pytest.approx(
        2.0
    )
    assert pricey["arena_score"] == pytest.approx(arena_score(2.0, 0.625))
    cheap = by_name["always cheap"]  # 1000 x 0.1 + 500 x 0.4 = $0.0003 a query
    assert cheap["accuracy"] == 0.5 and cheap["cost_per_1k"] == pytest.approx(0.3)
    assert by_name["cheapest"]["picks"] == {"cheap": 4}
    oracle = by_name["oracle"]  # best score per query, cheaper on the tie of query 0
    assert oracle["reference"] and oracle["picks"] == {"cheap": 2, "pricey": 2}
    assert oracle["accuracy"] == pytest.approx((1 + 1 + 1 + 0.5) / 4)

    config = json.loads((tmp_path / "out" / "config" / "tiergate-balanced.json").read_text())
    assert config == {"pipeline_params": {"router_name": "tiergate-balanced",
                                          "models": ["cheap", "pricey"]}}  # fmt: skip
    assert "| always pricey |" in routerarena.render_markdown(results)


def test_router_metrics_follow_routerarena_rules() -> None:
    entries = [
        {"prediction": "a", "accuracy": 1.0, "cost": 0.001, "for_optimality": False},
        {"prediction": "b", "accuracy": 0.0, "cost": 0.003},
        {"prediction": "b", "accuracy": 1.0, "cost": 0.5, "for_optimality": True},  # ignored
    ]
    m = router_metrics(entries)
    assert m.accuracy == 0.5 and m.queries == 2 and m.picks == {"a": 1, "b": 1}
    assert m.cost_per_1k == pytest.approx(0.004 / 2 * 1000)


# ---- missing data and the real data sets ------------------------------------------------------


@pytest.mark.parametrize("module", [routellm_mmlu, routerarena])
def test_missing_data_is_one_clear_error(
    module: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        common.run_cli(lambda: module.main(["--data", str(tmp_path), "--quiet"]))
    assert stop.value.code == 2
    assert "benchmark data not found" in capsys.readouterr().err


def test_default_data_dir_is_shared_data_beside_the_repository() -> None:
    assert common.default_data_dir() == REPO_ROOT.parent / "shared" / "data"


REAL = common.default_data_dir()


def _require(name: str) -> None:
    if not (REAL / name).is_dir():
        pytest.skip(f"real benchmark data absent: {REAL / name} (copy shared/data beside the repo)")


def test_real_mmlu_smoke() -> None:
    _require("routellm-mmlu")
    data = routellm_mmlu.load_mmlu(REAL)
    assert len(data) == 14037 and data.excluded == 5
    assert data.weak.mean() == pytest.approx(0.6809, abs=1e-4)
    assert data.strong.mean() == pytest.approx(0.8059, abs=1e-4)
    pick = np.sort(np.random.default_rng(0).choice(len(data), 300, replace=False))
    results = routellm_mmlu.run(
        data.subset(pick), bins=5, seeds=1, random_iters=2, cost_weights=(0.0, 10.0),
        draws=40, show=False,
    )  # fmt: skip
    for r in results["routers"]:
        assert 0.0 < r["apgr"] < 1.0


def test_real_routerarena_smoke(tmp_path: Path) -> None:
    _require("routerarena-sub10")
    data = routerarena.load_arena(REAL)
    assert len(data.queries) == 809
    results = routerarena.run(data, tmp_path, show=False)
    assert results["diagnostics"]["cost_mismatches_vs_cache"] == 0
    by_name = {r["name"]: r for r in results["routers"]}
    for model in data.models:  # single-model rows reproduce the cached results exactly
        cached = [q.results[model] for q in data.queries]
        row = by_name[f"always {model}"]
        assert row["accuracy"] == pytest.approx(sum(r.score for r in cached) / 809)
        assert row["cost_per_1k"] == pytest.approx(sum(r.cached_cost for r in cached) / 809 * 1000)
    assert len(list((tmp_path / "predictions").glob("tiergate-*.json"))) == len(by_name)


def test_out_of_fold_learned_scores_come_from_folds_that_never_saw_the_subject() -> None:
    """The development set: each training subject scored by the grouped cross-validation
    fold that held it out, so its score does not move when its own labels change."""
    from eval.train_request_scorer import out_of_fold_scores

    rng = np.random.default_rng(4)
    prompts, domains = [], []
    for s in range(16):  # every fold trains on >= 10 subjects, the feature floor
        for i in range(25):
            words = " ".join(rng.choice(["why", "how", "not", "sum", "list", "prove"], 4))
            prompts.append(f"Q{i} {words}?\nA. x\nB. y\nAnswer:")
            domains.append(f"subject_{s:02d}")
    weak = rng.random(len(prompts)) < 0.6
    strong = rng.random(len(prompts)) < 0.8
    data = routellm_mmlu.MMLUData(prompts, domains, weak, strong, 0)
    scores = out_of_fold_scores(data)
    assert scores.shape == (len(prompts),) and ((scores >= 0) & (scores <= 1)).all()
    # flip every label of subject_00: its own scores stay put (its fold never saw them)
    own = np.array([d == "subject_00" for d in domains])
    flipped = routellm_mmlu.MMLUData(prompts, domains, np.where(own, ~weak, weak), strong, 0)
    assert len(set(scores[own].tolist())) > 5  # a real fit ranked them
    np.testing.assert_array_equal(out_of_fold_scores(flipped)[own], scores[own])


def test_linucb_diagnostics_start_from_the_gateways_rule() -> None:
    """The first row is the rule the real strategy runs (tests/test_linucb_sim.py checks
    the replica against it); every other row changes that rule or is a reference."""
    from eval.linucb_diagnostics import rules
    from eval.linucb_sim import Rule

    rng = np.random.default_rng(0)
    x = rng.random((50, linucb.DIM))
    weak, strong = rng.random(50) < 0.6, rng.random(50) < 0.8
    listed = rules(x, weak, strong)
    first, gateway = listed[0][1], Rule.gateway()
    assert first.explore == gateway.explore and first.alpha == gateway.alpha
    np.testing.assert_array_equal(first.prior_precision, gateway.prior_precision)
    assert len({label for label, _ in listed}) == len(listed)
