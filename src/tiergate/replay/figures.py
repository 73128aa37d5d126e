"""One PNG figure per experiment (matplotlib, headless), each paired with a report table.

Colours are Okabe & Ito's colour-blind-safe palette, and series also differ
by marker and line style, so no series is told apart by colour alone. Figures
are rendered at a modest DPI to stay well under 200 KB each.

matplotlib is an optional dependency (the `eval` extra); importing this module
without it raises a clear error.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError("the replay report needs matplotlib: pip install 'tiergate[eval]'") from err

OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#999999",
}
SERIES = ("blue", "orange", "green", "vermillion", "purple", "sky", "black", "yellow")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINES = ("-", "--", "-.", ":", "-", "--", "-.", ":")
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")
DPI = 110


def _color(i: int) -> str:
    return OKABE_ITO[SERIES[i % len(SERIES)]]


def _style(ax: Any) -> None:
    ax.grid(True, alpha=0.3, linewidth=0.6)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def fig_main(main: dict[str, Any], path: Path) -> Path:
    """Left: sessions per archetype by outcome. Right: first escalation turn by trigger."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    rows = main["archetypes"]
    names = list(rows)
    parts = (
        ("by difficulty", [rows[n]["by_difficulty"] for n in names]),
        ("by strikes", [rows[n]["by_strikes"] for n in names]),
        ("missed", [rows[n]["missed"] for n in names]),
        (
            "not escalated (easy)",
            [rows[n]["sessions"] - rows[n]["escalated"] - rows[n]["missed"] for n in names],
        ),
    )
    bottom = [0] * len(names)
    for i, (label, values) in enumerate(parts):
        a.bar(
            names,
            values,
            bottom=bottom,
            label=label,
            color=_color(i),
            hatch=HATCHES[i],
            edgecolor="white",
        )
        bottom = [x + y for x, y in zip(bottom, values, strict=True)]
    a.set_ylabel("sessions")
    a.set_title("Outcome per archetype")
    a.tick_params(axis="x", rotation=20)
    a.legend(fontsize=8, frameon=False)
    _style(a)
    firsts = main["_first_turns"]
    hi = max((max(v) for v in firsts.values() if v), default=1)
    bins = list(range(1, hi + 2))
    for i, (trig, values) in enumerate(sorted(firsts.items())):
        b.hist(
            values,
            bins=bins,
            alpha=0.75,
            label=trig,
            color=_color(i),
            hatch=HATCHES[i],
            edgecolor="white",
            align="left",
        )
    b.set_xlabel("billed turn of the first strong turn")
    b.set_ylabel("sessions")
    b.set_title("When sessions escalate, by trigger")
    b.legend(fontsize=8, frameon=False)
    _style(b)
    return _save(fig, path)


def fig_policies(policies: dict[str, Any], path: Path) -> Path:
    names = list(policies)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    cost = [policies[n]["cost_per_1k_sessions"] for n in names]
    cov = [100 * (policies[n]["hard_turn_coverage"] or 0) for n in names]
    for i, n in enumerate(names):
        a.barh(n, cost[i], color=_color(i), hatch=HATCHES[i], edgecolor="white")
        b.barh(n, cov[i], color=_color(i), hatch=HATCHES[i], edgecolor="white")
        a.text(cost[i], i, f" {cost[i]:.1f}", va="center", fontsize=8)
        b.text(cov[i], i, f" {cov[i]:.0f}%", va="center", fontsize=8)
    a.set_xscale("log")
    a.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    a.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    a.set_xlabel("USD per 1,000 sessions (log)")
    a.set_title("Cost")
    b.set_xlabel("% of needs-strong turns served strong")
    b.set_xlim(0, 115)
    b.set_title("Hard-turn coverage")
    b.set_yticklabels([])
    a.invert_yaxis()
    b.invert_yaxis()
    _style(a)
    _style(b)
    return _save(fig, path)


def fig_sweep(sweep: dict[str, Any], chosen: float, path: Path) -> Path:
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(13, 3.9))
    for j, (key, label) in enumerate(
        (("delta_gate", "delta gate"), ("full_transcript_gate", "full-transcript gate"))
    ):
        pts = sweep[key]
        xs = [float(t) for t in pts]
        for k, (metric, mlabel) in enumerate(
            (("false_positive_sessions", "false positives"), ("missed_sessions", "missed"))
        ):
            i = 2 * j + k
            a.plot(
                xs,
                [pts[t][metric] for t in pts],
                LINES[i],
                marker=MARKERS[i],
                color=_color(i),
                label=f"{label}: {mlabel}",
            )
    a.axvline(chosen, color=OKABE_ITO["grey"], linestyle=":", label=f"shipped delta T2 {chosen}")
    a.set_xlabel("threshold T2")
    a.set_ylabel("sessions")
    a.set_title("Threshold sweep")
    a.legend(fontsize=7, frameon=False)
    _style(a)
    hard, other = sweep["_delta_hard"], sweep["_delta_other"]
    bins = [i / 50 for i in range(0, 51)]
    b.hist(other, bins=bins, alpha=0.7, color=_color(0), label="other turns", density=True)
    b.hist(
        hard,
        bins=bins,
        alpha=0.7,
        color=_color(1),
        label="needs-strong turns",
        density=True,
        hatch="//",
        edgecolor="white",
    )
    b.axvline(chosen, color=OKABE_ITO["black"], linestyle=":", label=f"T2 {chosen}")
    b.set_xlabel("latest-turn delta score")
    b.set_ylabel("density")
    b.set_title("Delta score distribution")
    b.legend(fontsize=8, frameon=False)
    _style(b)
    drift = sweep["_drift"]
    if drift["turn"]:
        c.plot(
            drift["turn"], drift["full"], "-", marker="o", color=_color(3), label="full transcript"
        )
        c.plot(
            drift["turn"],
            drift["delta"],
            "--",
            marker="s",
            color=_color(0),
            label="delta (latest turn)",
        )
    c.set_xlabel("turn (long trivial sessions)")
    c.set_ylabel("mean score")
    c.set_title("Length bias")
    _style(c)
    return _save(fig, path)


def fig_adversarial(adv: dict[str, Any], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 3.8))
    xs = list(range(1, len(adv["_share"]) + 1))
    nan = float("nan")  # no share before the first request
    basis = [100 * s if s is not None else nan for s in adv["_share"]]
    req = [100 * s if s is not None else nan for s in adv["_request_share"]]
    ax.plot(xs, basis, "-", color=_color(0), label=f"strong share ({adv['basis']} basis, capped)")
    if adv["basis"] != "requests":
        ax.plot(xs, req, "--", color=_color(1), label="strong share (requests)")
    ax.axhline(
        adv["cap_percent"],
        color=OKABE_ITO["vermillion"],
        linestyle=":",
        label=f"cap {adv['cap_percent']:g}%",
    )
    ax.axvspan(0, adv["warmup_requests"], color=OKABE_ITO["grey"], alpha=0.25, label="warm-up")
    if adv.get("settled_at_request") is not None:
        ax.axvline(
            adv["settled_at_request"],
            color=OKABE_ITO["grey"],
            linestyle="-.",
            label="share back at the cap",
        )
    ax.set_ylim(0, 105)
    ax.set_xlabel("request (every one asks X-OrcaRouter-Tier: strong)")
    ax.set_ylabel("% of router traffic served strong")
    ax.set_title("Adversarial header abuse against the share cap")
    ax.legend(fontsize=8, frameon=False, loc="upper right")
    _style(ax)
    return _save(fig, path)


def fig_prevalence(prev: dict[str, Any], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 3.9))
    xs = [100 * p for p in prev["prevalences"]]
    for i, (name, row) in enumerate(prev["policies"].items()):
        ax.plot(
            xs,
            row["cost_per_1k_sessions"],
            LINES[i],
            marker=MARKERS[i],
            color=_color(i),
            label=name,
        )
    ax.set_yscale("log")
    ax.set_xlabel("% of sessions that need the strong model")
    ax.set_ylabel("USD per 1,000 sessions (log)")
    ax.set_title("Prevalence sensitivity")
    ax.legend(fontsize=8, frameon=False)
    _style(ax)
    return _save(fig, path)


def fig_latency(lat: dict[str, Any], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 3.6))
    rows = lat["by_trigger"]
    hi = max((max(int(k) for k in r["histogram"]) for r in rows.values()), default=1)
    width = 0.8 / max(1, len(rows))
    for i, (trig, r) in enumerate(rows.items()):
        xs = [x + i * width for x in range(0, hi + 1)]
        ys = [r["histogram"].get(x, r["histogram"].get(str(x), 0)) for x in range(0, hi + 1)]
        ax.bar(
            xs,
            ys,
            width=width,
            color=_color(i),
            hatch=HATCHES[i],
            edgecolor="white",
            label=f"{trig} (mean {r['mean']:.2f})",
        )
    ax.set_xticks(
        [x + 0.4 - width / 2 for x in range(0, hi + 1)], [str(x) for x in range(0, hi + 1)]
    )
    ax.set_xlabel("needs-strong turns served on base before the first strong turn")
    ax.set_ylabel("sessions")
    ax.set_title("Escalation latency by trigger")
    ax.legend(fontsize=8, frameon=False)
    _style(ax)
    return _save(fig, path)


def fig_e2e(e2e: dict[str, Any], path: Path) -> Path:
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    labels = ("input", "output", "total")
    billed = [e2e["billed_usd"][k] for k in labels]
    model = [e2e["model_usd"][k] for k in labels]
    xs = range(len(labels))
    a.bar([x - 0.2 for x in xs], billed, 0.4, color=_color(0), label="billed by the simulator")
    a.bar(
        [x + 0.2 for x in xs],
        model,
        0.4,
        color=_color(1),
        hatch="//",
        edgecolor="white",
        label="cost model estimate",
    )
    a.set_xticks(list(xs), labels)
    a.set_ylabel("USD")
    a.set_title("Cost of the replayed sessions")
    a.legend(fontsize=8, frameon=False)
    _style(a)
    rates = (
        ("billed", 100 * e2e["cache_hit_rate"]["billed"]),
        ("cost model", 100 * e2e["cache_hit_rate"]["model"]),
    )
    for i, (label, v) in enumerate(rates):
        b.bar(label, v, color=_color(i), hatch=HATCHES[i], edgecolor="white")
        b.text(i, v, f"{v:.1f}%", ha="center", va="bottom", fontsize=8)
    b.set_ylabel("% of prompt tokens read from cache")
    b.set_ylim(0, 105)
    b.set_title("Cache hit rate")
    _style(b)
    return _save(fig, path)


def write_all(results: dict[str, Any], out: Path, prefix: str = "replay-") -> dict[str, str]:
    """Render every available figure into `out`; returns experiment -> file name."""
    out.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    jobs: Sequence[tuple[str, Any]] = (
        ("main", lambda p: fig_main(results["main"], p)),
        ("policies", lambda p: fig_policies(results["policies"], p)),
        ("sweep", lambda p: fig_sweep(results["sweep"], results["sweep"]["threshold"], p)),
        ("adversarial", lambda p: fig_adversarial(results["adversarial"], p)),
        ("prevalence", lambda p: fig_prevalence(results["prevalence"], p)),
        ("latency", lambda p: fig_latency(results["latency"], p)),
        ("e2e", lambda p: fig_e2e(results["e2e"], p)),
    )
    for name, draw in jobs:
        if name not in results or results[name] is None:
            continue
        if name == "e2e" and "billed_usd" not in results[name]:
            continue
        path = out / f"{prefix}{name}.png"
        draw(path)
        made[name] = path.name
    return made
