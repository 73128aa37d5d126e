"""The MMLU benchmark's figure: accuracy vs strong-call share, one line per router
(RouteLLM's figure), with the linucb runs and the linear-fit references drawn per
stream order. Split from eval.routellm_mmlu, which computes what it draws.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval import common
from eval.requestlevel_metrics import CurvePoint, with_endpoints


def displayed_curves(r: dict[str, Any]) -> list[tuple[str, list[dict[str, float]]]]:
    """What a table or figure shows of a router: its mean curve when its runs are
    exchangeable (random) or single, otherwise every run's own curve."""
    if r["averaged"] or r["runs"] == 1:
        return [("", r["mean_points"])]
    return [(f"run {i}", pts) for i, pts in enumerate(r["run_points"])]


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
