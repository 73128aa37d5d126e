// Overview, per router: requests and spend over time by tier; escalated share
// against its cap; escalations by trigger; shadow precision and the go-live
// gate next to escalation latency.

import { api } from "./api.js";
import { EVENT_COLOURS, OKABE_ITO, TIER_COLOURS, bars, legend, meter, stackedArea } from "./charts.js";
import { card, fill, fillOnChange, h, select } from "./dom.js";
import { eventLabel } from "./page_audit.js";
import { DASH, axisTime, compact, dateTime, dec, gateBadge, int, pct, pct100, usd } from "./format.js";

/** Range name -> [seconds, bucket]. */
export const RANGES = {
  "15m": [900, "minute", "Last 15 minutes"],
  "1h": [3600, "minute", "Last hour"],
  "24h": [86400, "hour", "Last 24 hours"],
  "7d": [7 * 86400, "hour", "Last 7 days"],
  "30d": [30 * 86400, "day", "Last 30 days"],
};
const BUCKET_SECONDS = { minute: 60, hour: 3600, day: 86400 };
const TIER_ORDER = ["base", "strong", null];
const EVENT_ORDER = ["escalated", "denied_cap", "shadow", "de_escalated", "reset", "strong_served"];

export function tierName(tier) {
  return tier ?? "direct";
}

export function mount(view, ctx) {
  const toolbar = h("div", { class: "toolbar" });
  const kpis = h("div", { class: "kpis", testid: "kpis" });
  const requests = h("div");
  const spend = h("div");
  const share = h("div");
  const escalations = h("div");
  const quality = h("div");
  view.append(
    toolbar,
    kpis,
    h(
      "div",
      { class: "grid two" },
      card("Requests by tier", requests, { testid: "card-requests" }),
      card("Spend by tier", spend, { testid: "card-spend" }),
    ),
    h(
      "div",
      { class: "grid three" },
      card("Escalated share vs cap", share, { testid: "card-share" }),
      card("Escalations by trigger", escalations, { testid: "card-escalations" }),
      card("Shadow precision, gate & escalation latency", quality, { testid: "card-quality" }),
    ),
  );

  async function refresh() {
    const routers = await ctx.routers();
    const q = ctx.query();
    const name = routers.some((r) => r.name === q.get("router")) ? q.get("router") : routers[0]?.name;
    const rangeKey = RANGES[q.get("range")] ? q.get("range") : "1h";
    const [seconds, bucket] = RANGES[rangeKey];
    const until = Date.now() / 1000;
    const since = until - seconds;
    const router = routers.find((r) => r.name === name);
    drawToolbar(toolbar, ctx, routers, name, rangeKey, router);
    if (!router) {
      fill(kpis, h("p", { class: "empty" }, "No router is configured yet."));
      return;
    }
    const span = { since, until };
    const [traffic, shareData, escData, qualityData, savings] = await Promise.all([
      api("/stats/traffic", { query: { router: name, bucket, ...span } }),
      api("/stats/share"),
      api("/stats/escalations", { query: { router: name, ...span } }),
      api("/stats/quality", { query: { router: name } }),
      api("/stats/savings", { query: span }),
    ]);
    const xs = bucketStarts(since, until, BUCKET_SECONDS[bucket]);
    const series = tierSeries(traffic.series, xs);
    drawKpis(
      kpis,
      series,
      savings.items.filter((i) => i.router === name),
    );
    drawTraffic(requests, series, xs, bucket, "requests");
    drawTraffic(spend, series, xs, bucket, "spend_usd");
    drawShare(
      share,
      shareData.routers.find((r) => r.router === name),
    );
    drawEscalations(escalations, escData);
    drawQuality(
      quality,
      qualityData.routers.find((r) => r.router === name),
    );
  }
  return { refresh };
}

function drawToolbar(toolbar, ctx, routers, name, rangeKey, router) {
  const esc = router?.escalation;
  const mode = !router
    ? ""
    : esc.mode === "off"
      ? "escalation off"
      : `escalation ${esc.mode} · rollout ${pct100(esc.rollout_percent)} · live ${pct100(router.live_percent)}`;
  const options = routers.map((r) => [r.name, r.name + (r.enabled ? "" : " (disabled)")]);
  const key = JSON.stringify([options, name, rangeKey, mode]);
  fillOnChange(toolbar, key, () => [
    select("Router", options, name, (v) => ctx.go({ router: v }), "router-select"),
    select(
      "Range",
      Object.entries(RANGES).map(([k, v]) => [k, v[2]]),
      rangeKey,
      (v) => ctx.go({ range: v }),
      "range-select",
    ),
    h("span", { class: "muted", testid: "router-mode" }, mode),
  ]);
}

/** Every bucket start in the window, so quiet buckets draw as zero. */
export function bucketStarts(since, until, step) {
  const xs = [];
  for (let t = Math.floor(since / step) * step; t < until; t += step) xs.push(t);
  return xs;
}

function tierSeries(apiSeries, xs) {
  const index = new Map(xs.map((t, i) => [t, i]));
  return TIER_ORDER.map((tier) => apiSeries.find((sr) => sr.tier === tier))
    .filter(Boolean)
    .map((sr) => {
      const requests = xs.map(() => 0);
      const spend = xs.map(() => 0);
      for (const p of sr.points) {
        const i = index.get(p.t);
        if (i === undefined) continue;
        requests[i] += p.requests;
        spend[i] += p.spend_usd;
      }
      const errors = sr.points.reduce((a, p) => a + p.errors, 0);
      return {
        tier: tierName(sr.tier),
        total: sr.requests,
        spendTotal: sr.spend_usd,
        errors,
        requests,
        spend_usd: spend,
      };
    });
}

function kpi(label, value, testid, sub) {
  return h(
    "div",
    { class: "kpi" },
    h("span", { class: "kpi-label" }, label),
    h("span", { class: "kpi-value", testid }, value),
    sub ? h("span", { class: "kpi-sub" }, sub) : null,
  );
}

function drawKpis(el, series, savingsItems) {
  const requests = series.reduce((a, sr) => a + sr.total, 0);
  const spend = series.reduce((a, sr) => a + sr.spendTotal, 0);
  const errors = series.reduce((a, sr) => a + sr.errors, 0);
  const strong = series.find((sr) => sr.tier === "strong");
  // Served requests only, as the share-cap card counts them: a failed request
  // never commits a tier, so counting it here made the two figures disagree.
  const served = series.reduce((a, sr) => a + sr.total - sr.errors, 0);
  const strongServed = strong ? strong.total - strong.errors : 0;
  const saved = savingsItems.reduce((a, i) => a + i.saved_usd, 0);
  const uncached = savingsItems.reduce((a, i) => a + i.uncached_cost_usd, 0);
  fill(
    el,
    kpi("Requests", int(requests), "kpi-requests", `${int(errors)} errors`),
    kpi("Spend", usd(spend), "kpi-spend", "billed, cache-aware"),
    kpi(
      "Strong tier",
      pct(served ? strongServed / served : null),
      "kpi-strong-share",
      `of served requests in this range · ${pct(spend ? (strong?.spendTotal || 0) / spend : null)} of spend`,
    ),
    kpi(
      "Saved by cache affinity",
      usd(saved),
      "kpi-saved",
      `${pct(uncached ? saved / uncached : null)} of uncached price`,
    ),
  );
}

function drawTraffic(el, series, xs, bucket, field) {
  const money = field === "spend_usd";
  const fmt = money
    ? (v, exact) => (exact ? usd(v) : compact(v, true))
    : (v, exact) => (exact ? int(v) : compact(v));
  const step = BUCKET_SECONDS[bucket];
  const chart = stackedArea({
    xs,
    series: series.map((sr) => ({ label: sr.tier, colour: TIER_COLOURS[sr.tier], values: sr[field] })),
    yFormat: fmt,
    xFormat: (t, long) => (long ? dateTime(t).slice(0, step >= 86400 ? 10 : 16) : axisTime(t, step)),
    label: money ? "Spend by tier over time" : "Requests by tier over time",
    testid: money ? "chart-spend" : "chart-requests",
  });
  const what = money ? "spend" : "requests";
  fill(
    el,
    legend(
      series.map((sr) => ({
        label: sr.tier,
        colour: TIER_COLOURS[sr.tier],
        value: money ? usd(sr.spendTotal) : int(sr.total),
        testid: `traffic-${what}-${sr.tier}`,
      })),
    ),
    series.length ? chart : h("p", { class: "empty" }, "No requests in this range."),
  );
}

function badge(text, kind, testid) {
  return h("span", { class: `badge ${kind}`, testid }, text);
}

function drawShare(el, share) {
  if (!share) {
    fill(el, h("p", { class: "empty", testid: "share-off" }, "Escalation is off for this router."));
    return;
  }
  const cap = share.cap_percent / 100;
  const status = share.warming_up
    ? badge("warming up", "neutral", "share-status")
    : share.capped
      ? badge("at cap: escalations denied", "bad", "share-status")
      : badge("under cap", "good", "share-status");
  fill(
    el,
    h(
      "div",
      { class: "big-number" },
      h("span", { testid: "share-value" }, pct(share.share)),
      h("span", { class: "muted" }, ` of ${share.basis} · cap `),
      h("span", { testid: "share-cap" }, pct100(share.cap_percent)),
    ),
    meter({ value: share.share, cap, label: "escalated share against its cap", testid: "share-meter" }),
    h("p", {}, status, " utilisation ", h("strong", { testid: "share-utilisation" }, pct(share.utilisation))),
    h(
      "dl",
      { class: "facts" },
      // the cap counts turns: a resent identical turn (a retry) is one turn, two requests
      h("dt", {}, "Strong turns"),
      h("dd", { testid: "share-strong-requests" }, `${int(share.strong_requests)} of ${int(share.requests)} counted turns`),
      h("dt", {}, "Turn share"),
      h("dd", { testid: "share-request-share" }, pct(share.request_share)),
      h("dt", {}, "Spend share"),
      h("dd", { testid: "share-spend-share" }, pct(share.spend_share)),
      h("dt", {}, "Window"),
      h("dd", {}, `${share.window_days} days, fleet-wide`),
    ),
  );
}

function drawEscalations(el, data) {
  const items = [...data.items].sort(
    (a, b) => EVENT_ORDER.indexOf(a.event) - EVENT_ORDER.indexOf(b.event) || b.count - a.count,
  );
  const rows = items.map((i) => ({
    label: `${eventLabel(i.event)} · ${i.trigger ?? DASH}`,
    value: i.count,
    text: int(i.count),
    colour: EVENT_COLOURS[i.event] || OKABE_ITO.grey,
    testid: `esc-${i.event}-${i.trigger}`,
  }));
  const denials = data.denials.map((d) => ({
    label: `denied · ${d.reason.replace("_", " ")}`,
    value: d.count,
    text: int(d.count),
    colour: OKABE_ITO.vermillion,
    testid: `denial-${d.reason}`,
  }));
  fill(
    el,
    rows.length
      ? bars(rows)
      : h("p", { class: "empty", testid: "esc-empty" }, "No escalation events in this range."),
    denials.length ? h("h3", {}, "Cap denials by reason") : null,
    denials.length ? bars(denials) : null,
    legend(
      EVENT_ORDER.filter((e) => items.some((i) => i.event === e)).map((e) => ({
        label: eventLabel(e),
        colour: EVENT_COLOURS[e],
      })),
    ),
  );
}

function drawQuality(el, q) {
  if (!q) {
    fill(el, h("p", { class: "empty", testid: "quality-off" }, "Escalation is off for this router."));
    return;
  }
  const gate = q.gate;
  const fb = q.escalation_latency.feedback;
  const lb = q.escalation_latency.labels;
  const dist = fb
    ? ["0", "1", "2", "3+"].map((k) => ({
        label: `${k} hard turn${k === "1" ? "" : "s"}`,
        value: fb.distribution[k] || 0,
        text: int(fb.distribution[k] || 0),
        colour: OKABE_ITO.sky,
        testid: `latency-dist-${k.replace("+", "plus")}`,
      }))
    : [];
  fill(
    el,
    h(
      "div",
      { class: "split" },
      h(
        "div",
        {},
        h("h3", {}, "Go-live gate"),
        h("p", {}, badge(...gateBadge(gate), "gate-state")),
        h("p", {}, "Labelled precision ", h("strong", { testid: "gate-precision" }, pct(gate.precision))),
        h(
          "p",
          { class: "small", testid: "gate-labels" },
          `${int(gate.correct)} correct of ${int(gate.labels)} labels`,
        ),
        h(
          "p",
          { class: "small muted" },
          `needs ${int(gate.min_labels)} labels at ≥ ${pct(gate.min_precision)} (${gate.window_days} days)`,
        ),
        h("p", { class: "small muted", testid: "gate-reason" }, gate.summary || gate.reason),
      ),
      h(
        "div",
        {},
        h("h3", {}, "Escalation latency"),
        h("p", { class: "small muted" }, "hard turns on base before the ratchet"),
        h(
          "dl",
          { class: "facts" },
          h("dt", {}, "From feedback"),
          h("dd", { testid: "latency-feedback-mean" }, fb ? dec(fb.mean_hard_turns) : DASH),
          h("dt", {}, "Sessions measured"),
          h(
            "dd",
            { testid: "latency-feedback-measured" },
            fb ? `${int(fb.sessions_measured)} of ${int(fb.sessions_escalated)}` : DASH,
          ),
          h("dt", {}, "Hard, not escalated"),
          h("dd", { testid: "latency-feedback-missed" }, fb ? int(fb.hard_sessions_not_escalated) : DASH),
          h("dt", {}, "From labels"),
          h(
            "dd",
            { testid: "latency-labels-mean" },
            lb ? `${dec(lb.mean_hard_turns)} (${int(lb.labels)} labels)` : DASH,
          ),
        ),
      ),
    ),
    dist.length ? bars(dist) : null,
  );
}
