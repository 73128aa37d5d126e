// Hand-written charts: a stacked area chart and a 0-1 x-y plane in SVG,
// horizontal bars and a meter in HTML. Colours are the Okabe-Ito palette (safe
// for colour-blind readers); every chart also states its numbers in text
// (tooltip, labels or a table).

import { h, s } from "./dom.js";

export const OKABE_ITO = {
  orange: "#E69F00",
  sky: "#56B4E9",
  green: "#009E73",
  yellow: "#F0E442",
  blue: "#0072B2",
  vermillion: "#D55E00",
  purple: "#CC79A7",
  grey: "#999999",
};

export const TIER_COLOURS = { base: OKABE_ITO.blue, strong: OKABE_ITO.orange, direct: OKABE_ITO.grey };

export const EVENT_COLOURS = {
  escalated: OKABE_ITO.orange,
  shadow: OKABE_ITO.purple,
  denied_cap: OKABE_ITO.vermillion,
  de_escalated: OKABE_ITO.sky,
  reset: OKABE_ITO.green,
  strong_served: OKABE_ITO.yellow,
};

/** The smallest 1/2/2.5/5 x 10^k at or above v (an axis maximum). */
export function niceMax(v) {
  if (!(v > 0)) return 1;
  const exp = 10 ** Math.floor(Math.log10(v));
  const f = v / exp;
  const step = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
  return step * exp;
}

/** Colour keys; an item's `value` (with its `testid`) states the series' total. */
export function legend(items) {
  return h(
    "ul",
    { class: "legend" },
    items.map(({ label, colour, value, testid }) => {
      const sw = h("span", { class: "swatch", "aria-hidden": "true" });
      sw.style.background = colour;
      return h("li", {}, sw, label, value !== undefined ? h("strong", { testid }, value) : null);
    }),
  );
}

/**
 * Stacked areas over time. xs: bucket starts (unix s); series: [{label, colour,
 * values}] bottom to top. A hover column per bucket shows every value.
 */
export function stackedArea({ xs, series, yFormat, xFormat, label, testid, height = 180 }) {
  const W = 600;
  const H = height;
  const m = { l: 58, r: 14, t: 10, b: 24 };
  const iw = W - m.l - m.r;
  const ih = H - m.t - m.b;
  const n = xs.length;
  const totals = xs.map((_, i) => series.reduce((a, sr) => a + sr.values[i], 0));
  const max = niceMax(Math.max(0, ...totals));
  const x = (i) => m.l + (n < 2 ? iw / 2 : (i * iw) / (n - 1));
  const y = (v) => m.t + ih - (v / max) * ih;

  const svg = s("svg", {
    viewBox: `0 0 ${W} ${H}`,
    class: "chart",
    role: "img",
    "aria-label": label,
    testid,
  });
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4;
    svg.append(
      s("line", { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v), class: k ? "grid" : "axis" }),
      s("text", { x: m.l - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, yFormat(v)),
    );
  }
  const ticks = Math.min(6, n);
  for (let k = 0; k < ticks; k++) {
    const i = ticks < 2 ? 0 : Math.round((k * (n - 1)) / (ticks - 1));
    const anchor = k === 0 ? "start" : k === ticks - 1 ? "end" : "middle";
    svg.append(s("text", { x: x(i), y: H - 6, class: "tick", "text-anchor": anchor }, xFormat(xs[i])));
  }
  let lower = xs.map(() => 0);
  for (const sr of series) {
    const upper = lower.map((v, i) => v + sr.values[i]);
    const top = upper.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`);
    const bottom = lower.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).reverse();
    svg.append(
      s("path", { d: `M${top.join("L")}L${bottom.join("L")}Z`, fill: sr.colour, "fill-opacity": 0.78 }),
      s("path", { d: `M${top.join("L")}`, fill: "none", stroke: sr.colour, "stroke-width": 1.5 }),
    );
    lower = upper;
  }
  const guide = s("line", { x1: 0, x2: 0, y1: m.t, y2: m.t + ih, class: "guide", visibility: "hidden" });
  svg.append(guide);
  const tip = h("div", { class: "tip", role: "tooltip", hidden: true, testid: testid && `${testid}-tip` });
  const step = n < 2 ? iw : iw / (n - 1);
  xs.forEach((t, i) => {
    const col = s("rect", {
      x: x(i) - step / 2,
      y: m.t,
      width: step,
      height: ih,
      class: "hover",
      "data-t": t,
    });
    col.addEventListener("mouseenter", () => {
      guide.setAttribute("x1", x(i));
      guide.setAttribute("x2", x(i));
      guide.setAttribute("visibility", "visible");
      tip.replaceChildren(
        h("strong", {}, xFormat(t, true)),
        ...series.map((sr) => h("div", {}, `${sr.label}: ${yFormat(sr.values[i], true)}`)),
        series.length > 1 ? h("div", {}, `total: ${yFormat(totals[i], true)}`) : null,
      );
      tip.hidden = false;
      tip.style.left = `${(x(i) / W) * 100}%`;
    });
    col.addEventListener("mouseleave", () => {
      guide.setAttribute("visibility", "hidden");
      tip.hidden = true;
    });
    svg.append(col);
  });
  return h("div", { class: "chart-box" }, svg, tip);
}

/** Horizontal bars: items [{label, value, text, colour, testid}], scaled to the largest. */
export function bars(items, { max } = {}) {
  const top = max ?? Math.max(0, ...items.map((i) => i.value));
  return h(
    "div",
    { class: "bars" },
    items.map((it) => {
      const fillEl = h("span", { class: "bar-fill" });
      fillEl.style.width = `${top > 0 && it.value > 0 ? Math.max(0.5, (it.value / top) * 100) : 0}%`;
      fillEl.style.background = it.colour;
      return h(
        "div",
        { class: "bar-row" },
        h("span", { class: "bar-label", title: it.label }, it.label),
        h("span", { class: "bar-track" }, fillEl),
        h("span", { class: "bar-value", testid: it.testid }, it.text),
      );
    }),
  );
}

/**
 * A meter for a 0-1 share against a 0-1 cap: the fill turns vermillion (and the
 * text says so) at the cap; a marker shows where the cap sits.
 */
export function meter({ value, cap, label, testid }) {
  const scale = Math.max(cap * 1.25, (value || 0) * 1.05, 0.05);
  const over = value !== null && cap !== null && value >= cap;
  const fillEl = h("span", { class: "meter-fill" });
  fillEl.style.width = `${Math.min(100, ((value || 0) / scale) * 100)}%`;
  fillEl.style.background = over ? OKABE_ITO.vermillion : OKABE_ITO.blue;
  const mark = h("span", { class: "meter-cap", title: "cap" });
  mark.style.left = `${(cap / scale) * 100}%`;
  return h(
    "div",
    {
      class: "meter",
      role: "meter",
      "aria-label": label,
      "aria-valuenow": value ?? 0,
      "aria-valuemax": scale,
      testid,
    },
    h("span", { class: "meter-track" }, fillEl, mark),
  );
}

/**
 * Lines and points on a square 0-1 by 0-1 plane (e.g. PGR against strong-turn
 * share). lines: [{label, colour, xs, ys, dash}]; points: [{label, colour, x, y,
 * lo, hi, testid}], lo/hi drawn as a vertical whisker when both are numbers.
 * Each point carries its values as data-x/data-y and a <title> tooltip.
 */
export function xyChart({ lines, points, xLabel, yLabel, xFormat, yFormat, label, testid }) {
  const W = 460;
  const H = 340;
  const m = { l: 58, r: 22, t: 12, b: 40 };
  const iw = W - m.l - m.r;
  const ih = H - m.t - m.b;
  const clamp = (v) => Math.min(1, Math.max(0, v));
  const x = (v) => m.l + clamp(v) * iw;
  const y = (v) => m.t + ih - clamp(v) * ih;
  const svg = s("svg", {
    viewBox: `0 0 ${W} ${H}`,
    class: "chart xy",
    role: "img",
    "aria-label": label,
    testid,
  });
  for (let k = 0; k <= 4; k++) {
    const v = k / 4;
    svg.append(
      s("line", { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v), class: k ? "grid" : "axis" }),
      s("line", { x1: x(v), x2: x(v), y1: m.t, y2: m.t + ih, class: k ? "grid" : "axis" }),
      s("text", { x: m.l - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, yFormat(v)),
      s("text", { x: x(v), y: m.t + ih + 15, class: "tick", "text-anchor": "middle" }, xFormat(v)),
    );
  }
  svg.append(
    s("text", { x: m.l + iw / 2, y: H - 4, class: "tick axis-label", "text-anchor": "middle" }, xLabel),
    s(
      "text",
      {
        x: -(m.t + ih / 2),
        y: 14,
        transform: "rotate(-90)",
        class: "tick axis-label",
        "text-anchor": "middle",
      },
      yLabel,
    ),
  );
  for (const ln of lines) {
    if (!ln.xs.length || ln.xs.length !== ln.ys.length) continue;
    const d = ln.xs.map((v, i) => `${x(v).toFixed(1)},${y(ln.ys[i]).toFixed(1)}`);
    svg.append(
      s(
        "path",
        {
          d: `M${d.join("L")}`,
          fill: "none",
          stroke: ln.colour,
          "stroke-width": 2,
          "stroke-dasharray": ln.dash,
          testid: ln.testid,
        },
        s("title", {}, ln.label),
      ),
    );
  }
  for (const p of points) {
    if (p.x === null || p.x === undefined || p.y === null || p.y === undefined) continue;
    const g = s("g", { testid: p.testid, "data-x": p.x, "data-y": p.y });
    const whisker = Number.isFinite(p.lo) && Number.isFinite(p.hi);
    if (whisker) {
      for (const [y1, y2] of [
        [p.lo, p.hi],
        [p.lo, p.lo],
        [p.hi, p.hi],
      ]) {
        const cap = y1 === y2 ? 5 : 0;
        g.append(
          s("line", {
            x1: x(p.x) - cap,
            x2: x(p.x) + cap,
            y1: y(y1),
            y2: y(y2),
            stroke: p.colour,
            "stroke-width": 2,
          }),
        );
      }
    }
    g.append(
      s("circle", { cx: x(p.x), cy: y(p.y), r: 6, fill: p.colour, stroke: "#1c2430", "stroke-width": 1 }),
      s(
        "title",
        {},
        `${p.label}: ${yFormat(p.y, true)} at ${xFormat(p.x, true)}` +
          (whisker ? ` (95 % interval ${yFormat(p.lo, true)}–${yFormat(p.hi, true)})` : ""),
      ),
    );
    svg.append(g);
  }
  return h("div", { class: "chart-box" }, svg);
}
