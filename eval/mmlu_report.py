"""The MMLU benchmark's report: the markdown tables and the figure (accuracy vs
strong-call share, one line per router, RouteLLM's figure), with the linucb runs and
the prequential references drawn per stream order. Split from eval.routellm_mmlu,
which computes what they show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval import common
from eval.requestlevel_metrics import CurvePoint, pgr, verdict, with_endpoints
from tiergate.routing import linucb


def displayed_curves(r: dict[str, Any]) -> list[tuple[str, list[dict[str, float]]]]:
    """What a table or figure shows of a router: its mean curve when its runs are
    exchangeable (random) or single, otherwise every run's own curve."""
    if r["averaged"] or r["runs"] == 1:
        return [("", r["mean_points"])]
    return [(f"run {i}", pts) for i, pts in enumerate(r["run_points"])]


def _pct(value: float | None) -> str:
    return "not reached" if value is None else f"{100 * value:.1f}%"


def render_markdown(results: dict[str, Any], figure: str | None = None) -> str:
    """The headline table, the curve table behind the figure, and the diagnostics."""
    weak, strong = results["weak_accuracy"], results["strong_accuracy"]
    lines = [
        f"MMLU ({results['prompts']} prompts after dropping "
        f"{results['excluded_contaminated']} contaminated): weak {results['weak_model']} "
        f"{100 * weak:.2f}%, strong {results['strong_model']} {100 * strong:.2f}%.",
        "",
    ]
    rows = []
    for r in results["routers"]:
        lo, hi = r["apgr_ci95"]
        runs = f" (mean of {r['runs']} runs)" if r["runs"] > 1 else ""
        spread = f"{min(r['apgr_runs']):.3f} to {max(r['apgr_runs']):.3f}" if runs else "-"
        rows.append(
            [
                f"{r['name']}{runs}",
                f"{r['apgr']:.3f} [{lo:.3f}, {hi:.3f}]",
                spread,
                _pct(r["cpt50"]),
                _pct(r["cpt80"]),
                "baseline" if r["name"] == "random" else verdict((lo, hi)),
            ]
        )
    opt = results["optimal"]
    rows.append(
        ["optimal (oracle, uses labels)", f"{opt['apgr']:.3f}", "-", _pct(opt["cpt50"]),
         _pct(opt["cpt80"]), "upper bound"]
    )  # fmt: skip
    headers = ["Router", "APGR [95% CI]", "APGR runs", "CPT(50%)", "CPT(80%)", "vs random"]
    lines += [common.markdown_table(headers, rows), ""]
    if figure:
        lines += [f"![accuracy vs strong-model calls]({figure})", ""]
    curve_rows = []
    for r in results["routers"]:
        for run, points in displayed_curves(r):
            what = f"mean of {r['runs']} runs" if r["runs"] > 1 and not run else run or "-"
            for p in points:
                curve_rows.append(
                    [r["name"], what, f"{r['knob']} = {p['param']:.4g}",
                     f"{100 * p['share']:.1f}", f"{100 * p['accuracy']:.2f}",
                     f"{pgr(p['accuracy'], weak, strong):.3f}"]
                )  # fmt: skip
    headers = ["Router", "Run", "Setting", "Strong calls (%)", "Accuracy (%)", "PGR"]
    lines += [common.markdown_table(headers, curve_rows), ""]
    d = results["diagnostics"]
    q = d["score_quantiles"]
    t1, t2 = d["default_thresholds"]
    lines += [
        f"- Difficulty score: min {q['0']:.3f}, median {q['0.5']:.3f}, p90 {q['0.9']:.3f}, "
        f"p99 {q['0.99']:.3f}, max {q['1']:.3f}; {100 * d['share_at_default_t2']:.2f}% of "
        f"prompts reach the default t2 = {t2:.2f}, {100 * d['share_at_default_t1']:.2f}% reach "
        f"t1 = {t1:.2f}.",
        f"- Only the strong model is right on {100 * d['strong_only_correct']:.1f}% of prompts "
        f"(only the weak one on {100 * d['weak_only_correct']:.1f}%). AUROC of the score for "
        f'those prompts: {d["auroc_strong_only"]:.3f}; for "weak model wrong": '
        f"{d['auroc_weak_wrong']:.3f} (0.5 = no information). Within one subject the "
        f"score's AUROC averages {d['auroc_within_domain']:.3f}; across subjects, the mean "
        f"score and the strong-only rate correlate at {d['subject_correlation']:.2f}.",
        "- linucb strong share per stream order at the default cost weight "
        f"{linucb.DEFAULT_COST_WEIGHT}: "
        + ", ".join(f"{100 * v:.1f}%" for v in d["linucb_strong_share_at_default_cost_weight"])
        + ".",
        "- AUROC of each bandit context feature for the strong-only prompts: "
        + ", ".join(f"{k} {v:.3f}" for k, v in d["feature_auroc"].items())
        + ".",
        common.provenance(results["code"]),
    ]
    return "\n".join(lines) + "\n"


_STYLE: dict[str, tuple[str, str, str]] = {
    "gated_adaptive": (common.OKABE_ITO["blue"], "o", "-"),
    "linucb": (common.OKABE_ITO["vermillion"], "s", "--"),
    "random": (common.OKABE_ITO["black"], "^", ":"),
    "learned": (common.OKABE_ITO["orange"], "D", "-"),
    "prompt_length": (common.OKABE_ITO["purple"], "v", "--"),
    "linear_fit_in_sample": (common.OKABE_ITO["grey"], "P", ":"),
    "linear_fit_cross_fitted": (common.OKABE_ITO["yellow"], "X", ":"),
    "linear_fit_prequential": (common.OKABE_ITO["sky_blue"], "*", "-."),
    "greedy_bandit": (common.OKABE_ITO["green"], "1", ":"),
    "linear_fit_bandit_coin_direct": (common.OKABE_ITO["blue"], "2", ":"),
    "linear_fit_bandit_coin_ipw": (common.OKABE_ITO["purple"], "3", ":"),
    "linear_fit_linucb_log_direct": (common.OKABE_ITO["vermillion"], "4", ":"),
    "optimal": (common.OKABE_ITO["green"], "x", "-."),
}


def plot_curves(results: dict[str, Any], path: Path) -> None:
    """Accuracy vs strong-call share, RouteLLM's figure, one line per router."""
    plt = common.pyplot()
    weak, strong = results["weak_accuracy"], results["strong_accuracy"]
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    series = [(r["name"], r["name"], displayed_curves(r)) for r in results["routers"]]
    series.append(("optimal", "optimal (oracle)", [("", results["optimal"]["points"])]))
    for name, label, curves in series:
        colour, marker, style = _STYLE[name]
        if len(curves) > 1:
            label = f"{label} ({len(curves)} stream orders)"
        for k, (_, points) in enumerate(curves):
            pts = [CurvePoint(p["share"], p["accuracy"]) for p in points]
            # the oracle's own sweep already spans 0..100 % (and beats the strong model)
            line = pts if name == "optimal" else with_endpoints(pts, weak, strong)
            line = sorted(line, key=lambda p: p.share)
            ax.plot([100 * p.share for p in line], [100 * p.accuracy for p in line],
                    color=colour, linestyle=style, linewidth=1.2,
                    label=label if k == 0 else None)  # fmt: skip
            ax.scatter([100 * p.share for p in pts], [100 * p.accuracy for p in pts],
                       color=colour, marker=marker, s=20, zorder=3)  # fmt: skip
    grey = common.OKABE_ITO["grey"]
    labels = ((weak, "weak model only (Mixtral-8x7B)", 25, "left"),
              (strong, "strong model only (GPT-4)", 1, "left"))  # fmt: skip
    for acc, text, x, align in labels:  # placed where no curve runs
        ax.axhline(100 * acc, color=grey, linestyle=(0, (4, 2)), linewidth=1)
        ax.annotate(text, (x, 100 * acc), xytext=(0, 3), textcoords="offset points",
                    ha=align, fontsize=8, color="#555555")  # fmt: skip
    ax.set_xlabel("Strong model calls (%)")
    ax.set_ylabel("MMLU accuracy (%)")
    ax.set_title(f"Request-level routing on MMLU ({results['prompts']} prompts)")
    ax.set_xlim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    common.save_figure(fig, path)
