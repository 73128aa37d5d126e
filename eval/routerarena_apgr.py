"""RouterArena sub_10 scored like RouteLLM: APGR and CPT of each request score.

RouterArena's own metric (eval.routerarena) scores one operating point per router.
To compare *scores* (does this request need the better model?) on data none of
them was trained on, this sweeps each score's threshold over its deciles, as
eval.routellm_mmlu does, and computes APGR / CPT(50 %) / CPT(80 %). Roles for the
gap are by accuracy: "strong" is the model with the higher mean score on sub_10
(gemini-2.0-flash-001, which is also the cheaper one), so a high score should mean
"send this to the better model". Per-query scores are RouterArena's 0..1 scores.

Scores: the learned request scorer, the lexical difficulty score, prompt length,
random (10 seeds), and linucb prequential over 3 stream orders with the reward
RouterArena's score minus a cost term swept as on MMLU. linucb learns from
RouterArena's labels while it is scored, so its row is a diagnostic, never a
submission; nothing else here reads a label before routing.

    .venv/bin/python -m eval.routerarena_apgr [--data DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import numpy as np

from eval import common
from eval.requestlevel_metrics import inference_cost
from eval.routellm_mmlu import DEFAULT_COST_WEIGHTS
from eval.routerarena import ArenaData, load_arena
from eval.train_request_scorer import score_metrics
from tiergate.routing import learned, linucb
from tiergate.routing.difficulty import full_transcript_features, score
from tiergate.routing.strategies import StrategyContext


def linucb_sweep(
    data: ArenaData, better: str, other: str, contexts: list[np.ndarray], seed: int
) -> dict[str, Any]:
    """Prequential linucb at every cost weight; the curve's APGR and CPT."""
    weak_c = common.candidate(other, 0.6, *data.prices[other])
    strong_c = common.candidate(better, 0.86, *data.prices[better])
    router = common.two_model_router("linucb", weak_c.name, strong_c.name)
    order = np.random.default_rng(seed).permutation(len(data.queries))
    shares, accs = [], []
    for cw in DEFAULT_COST_WEIGHTS:
        arms = {c.name: linucb.LinUCBArm.fresh() for c in (weak_c, strong_c)}
        acc = 0.0
        strong_calls = 0
        for i in order:
            q, x = data.queries[i], contexts[i]
            req = common.user_request(q.prompt)
            ctx = StrategyContext(request=req, router=router, bandit_arms=arms, bandit_x=x)
            pick = common.first_choice("linucb", [weak_c, strong_c], ctx)
            r = q.results[pick]
            cost = inference_cost(data.prices[pick], r.input_tokens, r.output_tokens)
            tokens = r.input_tokens + r.output_tokens  # priced per token, as the gateway
            reward = linucb.reward(True, cost, r.score, tokens=tokens, cost_weight=cw)
            arms[pick] = linucb.update(arms[pick], x, reward)
            acc += r.score
            strong_calls += pick == better
        shares.append(strong_calls / len(order))
        accs.append(acc / len(order))
    return {"shares": shares, "accuracies": accs}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.routerarena_apgr",
        description="APGR / CPT of tiergate's request scores on RouterArena sub_10.",
    )
    common.add_common_arguments(parser, common.REPO_ROOT / "eval" / "out" / "routerarena_apgr")
    args = parser.parse_args(argv)
    from eval.requestlevel_metrics import CurvePoint, apgr, cpt, with_endpoints

    data = load_arena(args.data)
    accuracy = {m: float(np.mean([q.results[m].score for q in data.queries])) for m in data.models}
    better, other = sorted(data.models, key=lambda m: -accuracy[m])
    strong = np.array([q.results[better].score for q in data.queries])
    weak = np.array([q.results[other].score for q in data.queries])
    scorer = learned.load_scorer()
    requests = [common.user_request(q.prompt) for q in data.queries]
    feats = [full_transcript_features(r) for r in requests]
    learned_scores = np.array([scorer.score(r) for r in requests])
    scores = {
        "learned": learned_scores,
        "gated_adaptive (lexical)": np.array([score(f) for f in feats]),
        "prompt_length": np.array([len(q.prompt) for q in data.queries], dtype=np.float64),
    }
    rows = {name: score_metrics(s, weak, strong) for name, s in scores.items()}
    rng_runs = [score_metrics(np.random.default_rng(s).random(len(weak)), weak, strong)
                for s in range(10)]  # fmt: skip
    rows["random (10 seeds)"] = {
        k: float(np.mean([r[k] for r in rng_runs])) for k in ("apgr", "cpt50", "cpt80")
    }
    contexts = [
        linucb.context_vector_for(r, f, learned_score=float(s))
        for r, f, s in zip(requests, feats, learned_scores, strict=True)
    ]
    runs = []
    for seed in common.progress(range(3), "linucb stream orders", 3, not args.quiet):
        sweep = linucb_sweep(data, better, other, contexts, seed)
        wa, sa = float(weak.mean()), float(strong.mean())
        pts = [CurvePoint(s, a) for s, a in zip(sweep["shares"], sweep["accuracies"], strict=True)]
        curve = with_endpoints(pts, wa, sa)
        runs.append({"apgr": apgr(curve, wa, sa), "cpt50": cpt(curve, wa, sa, 0.5),
                     "cpt80": cpt(curve, wa, sa, 0.8), **sweep})  # fmt: skip
    rows["linucb prequential (diagnostic: learns from labels)"] = {
        "apgr": float(np.mean([r["apgr"] for r in runs])),
        "apgr_runs": [r["apgr"] for r in runs],
        "cpt50": common_mean([r["cpt50"] for r in runs]),
        "cpt80": common_mean([r["cpt80"] for r in runs]),
    }
    results = {"dataset": "routerarena-sub10", "queries": len(weak), "better": better,
               "other": other, "accuracy": accuracy, "rows": rows, "linucb_runs": runs,
               "code": common.code_version()}  # fmt: skip
    common.write_json(args.out / "results.json", results)
    table = [[name, f"{r['apgr']:.3f}", pct(r.get("cpt50")), pct(r.get("cpt80"))]
             for name, r in rows.items()]  # fmt: skip
    print(
        f"RouterArena sub_10, {len(weak)} queries; 'strong' = {better} "
        f"({100 * accuracy[better]:.2f}%), 'weak' = {other} ({100 * accuracy[other]:.2f}%)"
    )
    print(common.markdown_table(["Score", "APGR", "CPT(50%)", "CPT(80%)"], table))
    return 0


def common_mean(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(np.mean(values))  # type: ignore[arg-type]


def pct(value: float | None) -> str:
    return "not reached" if value is None else f"{100 * value:.1f}%"


if __name__ == "__main__":
    common.run_cli(main)
