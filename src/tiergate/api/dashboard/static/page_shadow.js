// Shadow labelling: the would-escalate decisions auto escalation recorded in
// shadow, with their evidence; an operator marks each correct or incorrect
// (optionally with how many hard turns the session had already served on base),
// which moves the router's labelled precision and its go-live gate.

import { api } from "./api.js";
import { fill, fillOnChange, h, num, select, table } from "./dom.js";
import { DASH, dateTime, dec, gateBadge, int, monthDayTime, pct, short } from "./format.js";

const LIMIT = 100;

export function mount(view, ctx) {
  const gates = h("div", { class: "kpis", testid: "shadow-gates" });
  const toolbar = h("div", { class: "toolbar" });
  const body = h("div", { class: "card wide" });
  const message = h("p", { class: "notice", testid: "shadow-message", role: "status", hidden: true });
  const hint = h(
    "p",
    { class: "note" },
    "Correct: the session really needed the strong tier at that point. Optionally give how many ",
    "hard turns it had already served on base (escalation latency). The gate opens at the ",
    "router's minimum labels and precision.",
  );
  view.append(gates, toolbar, hint, message, body);

  async function label(item, correct, hardInput) {
    const payload = { correct };
    if (correct && hardInput.value !== "") payload.hard_turns_before = Number(hardInput.value);
    const res = await api(`/shadow/${item.id}/label`, { method: "POST", body: payload });
    const g = res.gate;
    message.textContent =
      `Decision ${item.id} marked ${correct ? "correct" : "incorrect"}. ` +
      `${g.router}: ${g.correct} of ${g.labels} correct (${pct(g.precision)}), gate ${g.open ? "open" : "closed"}.`;
    message.hidden = false;
    await ctx.refresh();
  }

  async function refresh() {
    const routers = (await ctx.routers()).filter((r) => r.escalation.mode === "auto");
    const q = ctx.query();
    const router = routers.some((r) => r.name === q.get("router")) ? q.get("router") : "";
    const labelled = ["true", "false"].includes(q.get("labelled")) ? q.get("labelled") : "";
    const choices = [["", "all auto routers"], ...routers.map((r) => [r.name, r.name])];
    fillOnChange(toolbar, JSON.stringify([choices, router, labelled]), () => [
      select("Router", choices, router, (v) => ctx.go({ router: v }), "shadow-router"),
      select(
        "Show",
        [
          ["", "all decisions"],
          ["false", "unlabelled only"],
          ["true", "labelled only"],
        ],
        labelled,
        (v) => ctx.go({ labelled: v }),
        "shadow-labelled",
      ),
    ]);
    const [quality, shadow] = await Promise.all([
      api("/stats/quality", { query: { router } }),
      api("/shadow", { query: { router, labelled, limit: LIMIT } }),
    ]);
    drawGates(
      gates,
      quality.routers.filter((r) => r.mode === "auto"),
    );
    const typing = body.contains(document.activeElement) && document.activeElement.tagName === "INPUT";
    if (!typing) drawTable(body, shadow.items, label);
  }
  return { refresh };
}

function drawGates(el, routers) {
  fill(
    el,
    routers.length
      ? routers.map((r) =>
          h(
            "div",
            { class: "kpi", testid: `shadow-gate-${r.router}` },
            h("span", { class: "kpi-label" }, `${r.router} · live ${r.live_percent}%`),
            h(
              "span",
              { class: "kpi-value" },
              h(
                "span",
                { class: `badge ${gateBadge(r.gate)[1]}`, testid: `shadow-gate-state-${r.router}` },
                gateBadge(r.gate)[0],
              ),
              h("span", { class: "kpi-sub" }, " precision "),
              h("span", { testid: `shadow-precision-${r.router}` }, pct(r.gate.precision)),
            ),
            h(
              "span",
              { class: "kpi-sub", testid: `shadow-labels-${r.router}` },
              `${int(r.gate.correct)} correct of ${int(r.gate.labels)} labels · needs ${int(r.gate.min_labels)} at ≥ ${pct(r.gate.min_precision)}`,
            ),
          ),
        )
      : h("p", { class: "empty" }, "No router runs auto escalation: nothing is decided in shadow."),
  );
}

function drawTable(el, items, label) {
  const rows = items.map((it) => {
    const ev = it.evidence || {};
    const hard = h("input", {
      type: "number",
      min: 0,
      max: 1000,
      placeholder: "turns",
      title: "hard turns already served on base before this decision (optional)",
      testid: `shadow-hard-${it.id}`,
      value: it.label?.hard_turns_before ?? "",
    });
    const state = it.label
      ? h(
          "span",
          { class: `badge ${it.label.correct ? "good" : "bad"}`, testid: `shadow-label-state-${it.id}` },
          it.label.correct ? "correct" : "incorrect",
        )
      : h("span", { class: "badge neutral", testid: `shadow-label-state-${it.id}` }, "unlabelled");
    return h(
      "tr",
      { testid: "shadow-row", dataset: { id: it.id } },
      h("td", { class: "nowrap", title: dateTime(it.ts) }, monthDayTime(it.ts)),
      h("td", {}, it.router),
      h("td", { title: it.session_hash || "" }, h("code", {}, short(it.session_hash))),
      h("td", {}, it.trigger ?? DASH),
      h("td", { class: "nowrap" }, h("code", {}, ev.would_header ?? DASH)),
      num(`${dec(ev.delta_score)} / ${dec(ev.threshold)}`),
      num(int(ev.strike_count)),
      num(int(ev.difficulty_streak)),
      num(pct(ev.router_share)),
      h(
        "td",
        {},
        h(
          "div",
          { class: "label-cell" },
          state,
          hard,
          h(
            "button",
            {
              type: "button",
              class: "good",
              testid: `shadow-correct-${it.id}`,
              onclick: () => label(it, true, hard),
            },
            "✓ Correct",
          ),
          h(
            "button",
            {
              type: "button",
              class: "bad",
              testid: `shadow-incorrect-${it.id}`,
              onclick: () => label(it, false, hard),
            },
            "✗ Incorrect",
          ),
        ),
      ),
    );
  });
  fill(
    el,
    table(
      [
        "Time",
        "Router",
        "Session",
        "Trigger",
        "Would send",
        "Delta / threshold",
        "Strikes",
        "Streak",
        "Router share",
        "Label",
      ],
      rows,
      {
        testid: "shadow-table",
        empty: "No shadow decisions match.",
      },
    ),
  );
}
