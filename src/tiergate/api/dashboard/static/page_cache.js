// Cache & savings: prompt-cache hit rate per channel and per key index (the
// pin affinity keeps warm), and the money that saved: uncached price minus the
// billed cost, per router and channel.

import { api } from "./api.js";
import { OKABE_ITO, bars } from "./charts.js";
import { card, fill, fillOnChange, h, num, select, table } from "./dom.js";
import { DASH, int, pct, usd } from "./format.js";
import { RANGES } from "./page_overview.js";

const STATUS_TEXT = {
  ok: "ok",
  cooling_down: "cooling down",
  auth_failed: "auth failed",
  disabled: "disabled",
};

export function mount(view, ctx) {
  const toolbar = h("div", { class: "toolbar" });
  const kpis = h("div", { class: "kpis" });
  const hits = h("div");
  const saved = h("div");
  view.append(
    toolbar,
    kpis,
    h(
      "div",
      { class: "grid two" },
      card("Prompt-cache hit rate per channel and key", hits, {
        testid: "card-cache",
        note: "cache-read tokens ÷ input tokens of successful requests",
      }),
      card("Cost saved by affinity", saved, {
        testid: "card-savings",
        note: "uncached price of the same tokens − billed cost",
      }),
    ),
  );

  async function refresh() {
    const q = ctx.query();
    const rangeKey = RANGES[q.get("range")] ? q.get("range") : "24h";
    const until = Date.now() / 1000;
    const span = { since: until - RANGES[rangeKey][0], until };
    fillOnChange(toolbar, rangeKey, () => [
      select(
        "Range",
        Object.entries(RANGES).map(([k, v]) => [k, v[2]]),
        rangeKey,
        (v) => ctx.go({ range: v }),
        "range-select",
      ),
    ]);
    const [cache, savings, channels] = await Promise.all([
      api("/stats/cache", { query: span }),
      api("/stats/savings", { query: span }),
      api("/channels"),
    ]);
    drawKpis(kpis, cache, savings);
    drawHits(hits, cache, channels.items);
    drawSavings(saved, savings);
  }
  return { refresh };
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

function drawKpis(el, cache, savings) {
  const input = cache.channels.reduce((a, c) => a + c.input_tokens, 0);
  const read = cache.channels.reduce((a, c) => a + c.cache_read_tokens, 0);
  const t = savings.total;
  fill(
    el,
    kpi(
      "Cache hit rate",
      pct(input ? read / input : null),
      "kpi-hit-rate",
      `${int(read)} of ${int(input)} input tokens`,
    ),
    kpi("Saved", usd(t.saved_usd), "savings-total-saved", `${pct(t.saved_fraction)} of the uncached price`),
    kpi("Billed", usd(t.cost_usd), "savings-total-cost", "what the providers charged"),
    kpi(
      "Without the cache",
      usd(t.uncached_cost_usd),
      "savings-total-uncached",
      "same tokens, no cache reads",
    ),
  );
}

function drawHits(el, cache, channels) {
  if (!cache.channels.length) {
    fill(el, h("p", { class: "empty" }, "No successful requests in this range."));
    return;
  }
  const health = new Map();
  for (const ch of channels) for (const k of ch.keys) health.set(`${ch.name}/${k.index}`, k);
  const parts = [
    bars(
      cache.channels.map((c) => ({
        label: c.channel,
        value: c.hit_rate || 0,
        text: pct(c.hit_rate),
        colour: OKABE_ITO.green,
        testid: `cache-channel-hit-${c.channel}`,
      })),
      { max: 1 },
    ),
  ];
  const rows = [];
  for (const c of cache.channels) {
    for (const k of c.keys) {
      const id = `${c.channel}-${k.key_index}`;
      const key = health.get(`${c.channel}/${k.key_index}`);
      const status = key?.status;
      // a key a 401/403 disabled is probed in the background: say when next
      const probe =
        key?.next_probe_in_seconds != null ? ` (probe in ${Math.ceil(key.next_probe_in_seconds)} s)` : "";
      rows.push([
        c.channel,
        h(
          "td",
          { title: k.fingerprint ? `fingerprint ${k.fingerprint}` : "" },
          `#${k.key_index ?? DASH} `,
          h("code", {}, k.masked ?? "removed"),
        ),
        h("td", { class: `status ${status || ""}` }, (STATUS_TEXT[status] ?? DASH) + probe),
        num(int(k.requests), `cache-key-requests-${id}`),
        num(int(k.input_tokens), `cache-key-input-${id}`),
        num(int(k.cache_read_tokens), `cache-key-read-${id}`),
        num(pct(k.hit_rate), `cache-key-hit-${id}`),
      ]);
    }
  }
  parts.push(
    table(["Channel", "Key", "Health", "Requests", "Input tokens", "Cache read", "Hit rate"], rows, {
      testid: "cache-keys",
    }),
  );
  fill(el, ...parts);
}

function drawSavings(el, savings) {
  const items = savings.items.filter((i) => i.channel !== null);
  const rows = items.map((i) => {
    const id = `${i.router ?? "direct"}-${i.channel}`;
    return [
      i.router ?? "direct",
      i.channel,
      num(int(i.requests), `savings-requests-${id}`),
      num(usd(i.cost_usd), `savings-cost-${id}`),
      num(usd(i.uncached_cost_usd), `savings-uncached-${id}`),
      num(usd(i.saved_usd), `savings-saved-${id}`),
      num(pct(i.saved_fraction), `savings-fraction-${id}`),
    ];
  });
  fill(
    el,
    items.length
      ? bars(
          items.map((i) => ({
            label: `${i.router ?? "direct"} · ${i.channel}`,
            value: Math.max(0, i.saved_usd),
            text: usd(i.saved_usd),
            colour: OKABE_ITO.green,
          })),
        )
      : null,
    table(["Router", "Channel", "Requests", "Billed", "Uncached", "Saved", "Saved %"], rows, {
      testid: "savings-table",
    }),
  );
}
