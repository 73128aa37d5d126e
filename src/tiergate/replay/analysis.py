"""Analysis of replay results: the issue's targets and the report's computed findings.

Pure functions over the results dict (tiergate.replay.pipeline.run_report), so
they are unit-tested without running a replay and hold for any corpus.
"""

from __future__ import annotations

from typing import Any

from tiergate.replay.experiments import ENGINE_UNCAPPED, MARGIN_TARGET

#: The OrcaRouter report's own numbers for each target, shown next to ours.
PAPER = {
    "false_positives": "0 of 200",
    "latent": "87 %",
    "coverage": "67 % at 45 %",
    "adversarial": "20.6 % vs 20 %",
    "margin": "0.019 (shipped T2 0.70)",
}
#: The targets (fractions; the adversarial one in percentage points), measured on
#: the engine as shipped, caps included: the report's own figures are capped.
TARGETS = {
    "latent": 0.87,
    "coverage": 0.67,
    "cost_ratio": 0.50,
    "adversarial_points": 1.0,
}
#: The policy the targets are measured on, and the one shown beside it.
SHIPPED = "escalation"


def pct(x: float | None, digits: int = 1) -> str:
    """A fraction as a percentage for prose and tables."""
    return "n/a" if x is None else f"{100 * x:.{digits}f} %"


def _false_positives(p: dict[str, Any]) -> tuple[int, int]:
    arch = p["archetypes"]
    easy = [arch.get(a, {}) for a in ("easy_short", "long_trivial")]
    return sum(a.get("false_positive_sessions", 0) for a in easy), sum(
        a.get("sessions", 0) for a in easy
    )


def _latent(p: dict[str, Any]) -> tuple[int, int] | None:
    latent = p["archetypes"].get("latent_hard")
    return (latent["sessions_escalated"], latent["sessions"]) if latent else None


def _coverage_at_cost(p: dict[str, Any], frontier: dict[str, Any]) -> tuple[float, float]:
    return p["hard_turn_coverage"] or 0.0, p["cost_per_1k_sessions"] / frontier[
        "cost_per_1k_sessions"
    ]


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target on the shipped (capped) engine, met or not, with the uncapped
    engine's value beside it for the trigger-only picture."""
    out: list[dict[str, Any]] = []
    pol = results.get("policies", {})
    esc = pol.get(SHIPPED)
    if esc is None:
        return out
    free = pol.get(ENGINE_UNCAPPED.name)

    fp, easy_n = _false_positives(esc)
    beside = "n/a" if free is None else "{} of {}".format(*_false_positives(free))
    out.append(
        _target(
            "false-positive easy sessions",
            "0",
            f"{fp} of {easy_n}",
            fp == 0,
            PAPER["false_positives"],
            beside,
        )
    )
    latent = _latent(esc)
    if latent:
        got, n = latent
        free_latent = _latent(free) if free else None
        out.append(
            _target(
                "latent-hard sessions escalated",
                f">= {TARGETS['latent'] * 100:.0f} %",
                f"{got} of {n} ({pct(got / n, 0)})",
                got / n >= TARGETS["latent"],
                PAPER["latent"],
                "n/a" if free_latent is None else "{} of {}".format(*free_latent),
            )
        )
    frontier = pol.get("always-frontier-affinity")
    if frontier:
        cov, ratio = _coverage_at_cost(esc, frontier)
        goal_cov, goal_cost = TARGETS["coverage"], TARGETS["cost_ratio"]
        free_text = "n/a"
        if free is not None:
            free_cov, free_ratio = _coverage_at_cost(free, frontier)
            free_text = f"{pct(free_cov)} at {pct(free_ratio)}"
        out.append(
            _target(
                f"hard-turn coverage at <= {goal_cost * 100:.0f} % of always-frontier-with-"
                "affinity cost",
                f">= {goal_cov * 100:.0f} % at <= {goal_cost * 100:.0f} %",
                f"{pct(cov)} at {pct(ratio)} (strong on {pct(esc['strong_turn_share'])} of turns)",
                cov >= goal_cov and ratio <= goal_cost,
                PAPER["coverage"],
                free_text,
            )
        )
    adv = results.get("adversarial")
    if adv:
        dev = adv["max_deviation_after_settling_points"]
        out.append(
            _target(
                "adversarial share within 1 point of the cap after warm-up",
                f"|share - {adv['cap_percent']:g} %| <= 1 pt",
                f"final {pct(adv['final_share'], 2)}; max deviation after settling "
                f"{'n/a' if dev is None else f'{dev:.2f}'} pt (second half of the run: "
                f"{adv['max_deviation_second_half_points']} pt)",
                dev is not None and dev <= TARGETS["adversarial_points"],
                PAPER["adversarial"],
                "-",
            )
        )
    m = results.get("sweep", {}).get("delta_margin")
    if m:
        out.append(
            _target(
                f"delta gate margin around the shipped T2 {m['chosen']}",
                f">= {MARGIN_TARGET} on both sides",
                f"below {m['below']}, above {m['above']} (identical outcome on "
                f"{m.get('identical_from')}-{m.get('identical_to')})",
                bool(m["met"]),
                PAPER["margin"],
                "(measured uncapped)",
            )
        )
    return out


def _target(
    name: str, goal: str, result: str, met: bool, paper: str, uncapped: str
) -> dict[str, Any]:
    return {
        "target": name,
        "goal": goal,
        "result": result,
        "met": met,
        "paper": paper,
        "uncapped": uncapped,
    }


def sweep_summary(points: dict[str, Any]) -> dict[str, Any]:
    """Where false positives stop and misses start on a sweep, and its best point."""
    rows = [(float(t), p) for t, p in points.items()]
    clean = [t for t, p in rows if p["false_positive_sessions"] == 0]
    complete = [t for t, p in rows if p["missed_sessions"] == 0]
    best = min(
        rows, key=lambda r: (r[1]["false_positive_sessions"] + r[1]["missed_sessions"], r[0])
    )
    return {
        "lowest_without_false_positives": min(clean) if clean else None,
        "highest_without_misses": max(complete) if complete else None,
        "best": best[0],
        "best_errors": best[1]["false_positive_sessions"] + best[1]["missed_sessions"],
    }


def cap_binding_prevalence(
    prev: dict[str, Any] | None, cap: float = 0.20, basis: str = "requests"
) -> float | None:
    """The hard-session prevalence at which the uncapped engine's strong share (of
    requests or of spend, the cap's basis) reaches `cap`."""
    if not prev or ENGINE_UNCAPPED.name not in prev["policies"]:
        return None
    xs = prev["prevalences"]
    ys = prev["policies"][ENGINE_UNCAPPED.name][
        f"strong_{'request' if basis == 'requests' else 'spend'}_share"
    ]
    for (x0, y0), (x1, y1) in zip(
        zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=False
    ):
        if y0 <= cap < y1:
            return x0 + (cap - y0) * (x1 - x0) / (y1 - y0)
    return None


def _drift_sentence(drift: dict[str, list[float]]) -> str:
    if len(drift.get("turn", [])) < 2:
        return ""
    f0, f1, d0, d1 = drift["full"][0], drift["full"][-1], drift["delta"][0], drift["delta"][-1]
    n = int(drift["turn"][-1])
    return (
        f"Length bias: over the long trivial sessions the mean full-transcript score goes from "
        f"{f0:.3f} at turn 1 to {f1:.3f} at turn {n} ({100 * (f1 / f0 - 1):+.0f} %), the delta "
        f"score from {d0:.3f} to {d1:.3f}, with no change in task difficulty."
    )


def findings(results: dict[str, Any]) -> list[str]:
    """Observations computed from this run (they hold for whatever corpus was replayed)."""
    s = results["sweep"]
    d = sweep_summary(s["delta_gate"])
    f = sweep_summary(s["full_transcript_gate"])
    sc = s["scores"]
    hard_gate = sc.get("hard_turns_outside_failure_loops") or sc["hard_turns"]
    out = [
        f"- Delta gate: no false positive from T2 = {d['lowest_without_false_positives']} up, no "
        f"missed session up to T2 = {d['highest_without_misses']}; the fewest errors "
        f"(false positives + misses = {d['best_errors']}) at T2 = {d['best']}. The full-transcript "
        f"gate's fewest errors: {f['best_errors']} at T2 = {f['best']}.",
        f"- Score overlap: the highest delta score of any turn in an easy session is "
        f"{sc['easy_session_max']}; needs-strong turns outside failure loops score from "
        f"{hard_gate.get('min')} (5th percentile {hard_gate.get('p5')}, median "
        f"{hard_gate.get('median')}). The classes overlap; the two-turn streak, not a score gap, "
        "is what keeps easy sessions base.",
    ]
    drift = _drift_sentence(s.get("_drift", {}))
    if drift:
        out.append(f"- {drift}")
    pol = results.get("policies", {})
    if "escalation" in pol and ENGINE_UNCAPPED.name in pol:
        text = (
            f"- Share caps on a stress mix: with the shipped caps the engine served "
            f"{pct(pol['escalation']['hard_turn_coverage'])} of needs-strong turns strong, "
            f"without them {pct(pol[ENGINE_UNCAPPED.name]['hard_turn_coverage'])}."
        )
        corpus = results.get("corpus", {})
        if corpus.get("hard_turns"):
            ceiling = min(1.0, 0.20 * corpus["turns"] / corpus["hard_turns"])
            text += (
                f" With {corpus['hard_turns']} of {corpus['turns']} turns needing the strong "
                f"model, a 20 % request cap admits strong service on at most {pct(ceiling)} of "
                "them even if every strong turn were a hard one: the capped coverage target "
                "(67 %) sits close to what the cap allows on this corpus at all."
            )
        basis = results.get("adversarial", {}).get("basis", "requests")
        binds = cap_binding_prevalence(results.get("prevalence"), basis=basis)
        if binds is not None:
            what = "requests" if basis == "requests" else "spend"
            text += (
                f" The uncapped engine's strong share of {what} reaches the shipped 20 % cap "
                f"at about {pct(binds)} hard sessions (section 5): above that prevalence the "
                "cap, not the triggers, decides."
            )
        out.append(text)
    return out
