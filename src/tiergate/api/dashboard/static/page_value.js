// Value: does escalation pay off on this gateway's own traffic? Per router, the
// counterfactual escalation value (DESIGN.md) of the sessions whose outcome the
// operator posted: PGR against the share of turns served strong, beside random
// escalation, the length rule and the oracle at the same share. The live
// counterpart of `tiergate replay counterfactual` (docs/replay.md).

import { api } from "./api.js";
import { OKABE_ITO, legend, xyChart } from "./charts.js";
import { card, fill, fillOnChange, h, num, select } from "./dom.js";
import { DASH, dec, int, pct } from "./format.js";
import { RANGES } from "./page_overview.js";

/** Outcomes come from CI after the sessions: a week by default, as the endpoint. */
const DEFAULT_RANGE = "7d";
const X_LABEL = "strong-turn share";
const Y_LABEL = "PGR (share of the gap to all-strong closed)";

export function mount(view, ctx) {
  const toolbar = h("form", { class: "toolbar", testid: "value-filters" });
  toolbar.addEventListener("submit", (e) => e.preventDefault());
  const summary = h("p", { class: "muted", testid: "value-summary" });
  const body = h("div");
  view.append(
    toolbar,
    card("What this measures", explanation(), { testid: "card-value-explained" }),
    summary,
    body,
  );

  async function refresh() {
    const [routers, workspaces] = await Promise.all([ctx.routers(), ctx.workspaces()]);
    const q = ctx.query();
    const names = routers.map((r) => r.name);
    const router = names.includes(q.get("router")) ? q.get("router") : "";
    const workspace = workspaces.includes(q.get("workspace")) ? q.get("workspace") : "";
    const rangeKey = RANGES[q.get("range")] ? q.get("range") : DEFAULT_RANGE;
    const odds = parseOdds(q.get("odds"));
    drawToolbar(toolbar, ctx, { names, router, workspaces, workspace, rangeKey, odds });
    const until = Date.now() / 1000;
    const doc = await api("/stats/escalation-value", {
      query: { router, workspace, since: until - RANGES[rangeKey][0], until, odds },
    });
    drawSummary(summary, doc);
    if (!doc.routers.length) {
      fill(body, emptyState(doc, router));
      return;
    }
    fill(body, h("div", { class: "grid two" }, doc.routers.map(routerCard)));
  }
  return { refresh };
}

/** The default odds from the URL: a number in [0, 1], else none (the API's 1.0). */
function parseOdds(raw) {
  if (raw === null || raw === "") return null;
  const p = Number(raw);
  return Number.isFinite(p) && p >= 0 && p <= 1 ? p : null;
}

function drawToolbar(toolbar, ctx, { names, router, workspaces, workspace, rangeKey, odds }) {
  const key = JSON.stringify([names, router, workspaces, workspace, rangeKey, odds]);
  fillOnChange(toolbar, key, () => {
    const input = h("input", {
      type: "number",
      min: 0,
      max: 1,
      step: 0.05,
      value: odds ?? 1,
      testid: "value-odds",
      title: "the strong model's chance on a task, for sessions whose outcome carries no strong_odds",
      onchange: (e) => {
        const p = parseOdds(e.target.value);
        if (p === null) {
          e.target.reportValidity();
          return;
        }
        ctx.go({ odds: p === 1 ? null : p });
      },
    });
    return [
      select(
        "Router",
        [["", "all"], ...names.map((n) => [n, n])],
        router,
        (v) => ctx.go({ router: v }),
        "value-router",
      ),
      select(
        "Workspace",
        [["", "all"], ...workspaces.map((w) => [w, w])],
        workspace,
        (v) => ctx.go({ workspace: v }),
        "value-workspace",
      ),
      select(
        "Range",
        Object.entries(RANGES).map(([k, v]) => [k, v[2]]),
        rangeKey,
        (v) => ctx.go({ range: v }),
        "value-range",
      ),
      h("label", { class: "field" }, h("span", {}, "Default strong odds p"), input),
    ];
  });
}

function explanation() {
  return h(
    "p",
    {},
    "A session that served s of its n turns strong earns the credit ",
    h("code", {}, "q = r + (1 - r) p s / n"),
    ", where r is its outcome (1: resolved) and p the strong model's odds on its task. ",
    "Over a router's sessions ",
    h("code", {}, "PGR = (Q - Q_base) / (Q_strong - Q_base)"),
    ": the share of the gap between all-base and all-strong that its escalations closed. ",
    "Random escalation at the same share scores that share (the dashed diagonal); the length rule ",
    "(escalate every session at turn N) and the oracle (the best possible at that budget) are the ",
    "curves. A policy adds value only where its point sits above both random and the length rule at ",
    "its own share. Sessions posted without strong_odds take the default odds; at 1.0 PGR reads as ",
    "“how much of the failing sessions' turns were served strong”. Intervals resample tasks (95 %).",
  );
}

function drawSummary(el, doc) {
  fill(
    el,
    h("strong", { testid: "value-scored" }, int(doc.routers.reduce((a, r) => a + r.sessions, 0))),
    " sessions with an outcome scored · ",
    h("strong", { testid: "value-without-outcome" }, int(doc.sessions_without_outcome)),
    " served in this range without one · default odds ",
    h("strong", { testid: "value-default-odds" }, dec(doc.default_odds)),
  );
}

function emptyState(doc, router) {
  const example = JSON.stringify({
    session_id: "<the X-OrcaRouter-Session-Id the agent sent>",
    resolved: true,
  });
  return card(
    router ? `No outcomes for ${router} yet` : "No outcomes yet",
    h(
      "div",
      {},
      h(
        "p",
        {},
        "PGR needs to know how each session ended, and only you know that. ",
        doc.sessions_without_outcome
          ? `${int(doc.sessions_without_outcome)} sessions were served in this range without an outcome. `
          : "",
        "Post one per session to ",
        h("code", {}, "POST /v1/outcomes"),
        " with the workspace's token, e.g. from CI once the agent's branch passes or fails (a rerun's ",
        "post replaces the first):",
      ),
      h(
        "pre",
        { class: "example", testid: "value-empty-example" },
        h(
          "code",
          {},
          "curl -X POST $GATEWAY/v1/outcomes \\\n" +
            '  -H "Authorization: Bearer $WORKSPACE_TOKEN" \\\n' +
            '  -H "Content-Type: application/json" \\\n' +
            `  -d '${example}'`,
        ),
      ),
      h(
        "p",
        { class: "muted small" },
        "Add ",
        h("code", {}, '"strong_odds": 0.4'),
        " when you know the strong model's chance on the task, and ",
        h("code", {}, '"task": "PROJ-123"'),
        " so reruns of one task resample together. A session without odds takes the default odds above.",
      ),
    ),
    { testid: "value-empty" },
  );
}

/** A number pair as "lo–hi" in one format; a dash when there is no interval. */
function interval(pair, format) {
  return Array.isArray(pair) && pair.length === 2 ? `${format(pair[0])}–${format(pair[1])}` : DASH;
}

/**
 * Above both baselines at its share, or which one it does not beat: words, not colour
 * alone. "Above" is claimed only when the lower 95 % bound of each gain is above 0; a
 * point estimate above both with an interval reaching 0 is "not yet clear".
 */
function verdict(r) {
  if (r.pgr === null || r.pgr === undefined) return ["nothing to rescue", "neutral"];
  if (r.pgr_minus_random !== null && r.pgr_minus_random <= 0) return ["not above random", "bad"];
  if (r.pgr_minus_length_rule !== null && r.pgr_minus_length_rule <= 0)
    return ["not above the length rule", "bad"];
  const low = (key) => {
    const pair = r.interval && r.interval[key];
    return Array.isArray(pair) && pair.length === 2 ? pair[0] : null;
  };
  const lows = [low("pgr_minus_random"), low("pgr_minus_length_rule")];
  if (lows.some((x) => x === null || x <= 0))
    return ["above both baselines on the point, not yet clear (95 %)", "neutral"];
  return ["above random and the length rule (95 %)", "good"];
}

/** One row of a router's table: a label (its hint as a tooltip), the value, its interval. */
function factRow(label, value, testid, { pair, format, hint } = {}) {
  return h(
    "tr",
    {},
    h("th", { scope: "row", title: hint }, label),
    num(value, testid),
    format ? num(interval(pair, format), `${testid}-interval`) : h("td", {}),
  );
}

function routerCard(r) {
  const id = `value-${r.router}`;
  const iv = r.interval || {};
  const c = r.curves || { share: [], length_rule: [], oracle: [] };
  const [text, kind] = verdict(r);
  const chart = xyChart({
    lines: [
      { label: "random", colour: OKABE_ITO.grey, xs: [0, 1], ys: [0, 1], dash: "5 4" },
      {
        label: "length rule",
        colour: OKABE_ITO.sky,
        xs: c.share,
        ys: c.length_rule,
        testid: `${id}-curve-length`,
      },
      { label: "oracle", colour: OKABE_ITO.green, xs: c.share, ys: c.oracle, testid: `${id}-curve-oracle` },
    ],
    points: [
      {
        label: r.router,
        colour: OKABE_ITO.orange,
        x: r.strong_share,
        y: r.pgr,
        lo: iv.pgr?.[0],
        hi: iv.pgr?.[1],
        testid: `${id}-point`,
      },
    ],
    xLabel: X_LABEL,
    yLabel: Y_LABEL,
    // axis ticks in whole percent; the tooltip (exact) as the table has it
    xFormat: (v, exact) => (exact ? pct(v) : `${Math.round(v * 100)}%`),
    yFormat: (v) => dec(v),
    label: `${r.router}: PGR ${dec(r.pgr)} at a strong-turn share of ${pct(r.strong_share)}`,
    testid: `${id}-chart`,
  });
  const rows = [
    factRow("Sessions", int(r.sessions), `${id}-sessions`, { hint: "sessions with an outcome" }),
    factRow("Tasks", int(r.instances), `${id}-tasks`, { hint: "resampled together in the intervals" }),
    factRow("Resolved", int(r.resolved), `${id}-resolved`, { hint: "r = 1: resolved on their own" }),
    factRow("Escalated", int(r.escalated), `${id}-escalated`, { hint: "sessions with a strong turn" }),
    factRow("Turns", int(r.turns), `${id}-turns`),
    factRow("Strong turns (share)", pct(r.strong_share), `${id}-share`, {
      pair: iv.strong_share,
      format: pct,
    }),
    factRow("PGR", dec(r.pgr), `${id}-pgr`, { pair: iv.pgr, format: dec }),
    factRow("Random at this share", dec(r.random), `${id}-random`, { pair: iv.random, format: dec }),
    factRow("Length rule at this share", dec(r.length_rule), `${id}-length`, {
      pair: iv.length_rule,
      format: dec,
    }),
    factRow("Oracle at this share", dec(r.oracle), `${id}-oracle`, { pair: iv.oracle, format: dec }),
    factRow("PGR − random", dec(r.pgr_minus_random), `${id}-vs-random`, {
      pair: iv.pgr_minus_random,
      format: dec,
    }),
    factRow("PGR − length rule", dec(r.pgr_minus_length_rule), `${id}-vs-length`, {
      pair: iv.pgr_minus_length_rule,
      format: dec,
    }),
    factRow("Waste", pct(r.waste), `${id}-waste`, {
      pair: iv.waste,
      format: pct,
      hint: "share of resolved sessions escalated anyway",
    }),
    factRow("Cut off partway", pct(r.cut_off), `${id}-cutoff`, {
      pair: iv.cut_off,
      format: pct,
      hint: "share of escalated sessions whose strong serve stopped before the end",
    }),
    factRow("Sessions at the default odds", int(r.default_odds_sessions), `${id}-default-odds`, {
      hint: "posted without strong_odds",
    }),
  ];
  return card(
    `${r.router} · ${int(r.sessions)} sessions`,
    h(
      "div",
      {},
      h("p", {}, h("span", { class: `badge ${kind}`, testid: `${id}-verdict` }, text)),
      legend([
        { label: "random (dashed)", colour: OKABE_ITO.grey },
        { label: "length rule", colour: OKABE_ITO.sky },
        { label: "oracle", colour: OKABE_ITO.green },
        { label: `${r.router} (95 % interval)`, colour: OKABE_ITO.orange },
      ]),
      chart,
      c.length_rule?.length
        ? null
        : h("p", { class: "note", testid: `${id}-nothing-to-gain` }, "No session can be rescued: no curves."),
      h(
        "table",
        { testid: `${id}-table` },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["", "Value", "95 % interval"].map((x) => h("th", { scope: "col" }, x)),
          ),
        ),
        h("tbody", {}, rows),
      ),
    ),
    { testid: `card-${id}`, note: "PGR against the share of turns served strong; baselines at that share" },
  );
}
