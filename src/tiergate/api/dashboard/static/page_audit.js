// Audit log: escalation decisions and admin changes, filtered by router,
// workspace, event kind and time range, newest first; the same filters export
// as CSV (fetched with the token, then saved from a blob URL).

import { api, download } from "./api.js";
import { EVENT_COLOURS, OKABE_ITO } from "./charts.js";
import { fill, h, table } from "./dom.js";
import { DASH, dateTime, dec, pct, short } from "./format.js";

export const EVENTS = [
  "escalated",
  "denied_cap",
  "shadow",
  "de_escalated",
  "reset",
  "strong_served",
  "config_changed",
  "gate_forced",
  "lane_released",
];
const PAGE_SIZE = 50;

/** The admin API's filter query from the page's hash query. */
export function filters(q) {
  const out = {};
  for (const k of ["router", "workspace", "event", "since", "until"]) if (q.get(k)) out[k] = q.get(k);
  return out;
}

function toLocalInput(ts) {
  if (!ts) return "";
  const d = new Date(Number(ts) * 1000 - new Date().getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}

function fromLocalInput(value) {
  return value ? String(Math.floor(new Date(value).getTime() / 1000)) : "";
}

export function mount(view, ctx) {
  const form = h("form", { class: "toolbar filters", testid: "audit-filters" });
  const summary = h("p", { class: "muted", testid: "audit-summary" });
  const body = h("div", { class: "card wide" });
  view.append(form, summary, body);
  let built = false;

  async function buildForm() {
    const [routers, workspaces] = await Promise.all([ctx.routers(), ctx.workspaces()]);
    const q = ctx.query();
    const chosen = new Set((q.get("event") || "").split(",").filter(Boolean));
    const change = (key, value) => {
      ctx.go({ [key]: value, offset: null });
    };
    const pick = (label, key, options, testid) =>
      h(
        "label",
        { class: "field" },
        h("span", {}, label),
        h(
          "select",
          { testid, onchange: (e) => change(key, e.target.value) },
          h("option", { value: "" }, "all"),
          options.map((o) => h("option", { value: o, selected: q.get(key) === o }, o)),
        ),
      );
    const events = h(
      "fieldset",
      { class: "events" },
      h("legend", {}, "Events"),
      EVENTS.map((e) =>
        h(
          "label",
          { class: "check" },
          h("input", {
            type: "checkbox",
            value: e,
            checked: chosen.has(e),
            testid: `audit-event-${e}`,
            onchange: () => {
              const on = [...events.querySelectorAll("input:checked")].map((i) => i.value);
              change("event", on.join(","));
            },
          }),
          eventLabel(e),
        ),
      ),
    );
    const time = (label, key) =>
      h(
        "label",
        { class: "field" },
        h("span", {}, label),
        h("input", {
          type: "datetime-local",
          value: toLocalInput(q.get(key)),
          testid: `audit-${key}`,
          onchange: (e) => change(key, fromLocalInput(e.target.value)),
        }),
      );
    const csv = h("a", { href: "#", class: "button", testid: "audit-csv", onclick: exportCsv }, "Export CSV");
    fill(
      form,
      pick(
        "Router",
        "router",
        routers.map((r) => r.name),
        "audit-router",
      ),
      pick("Workspace", "workspace", workspaces, "audit-workspace"),
      time("From", "since"),
      time("Until", "until"),
      events,
      csv,
    );
    form.addEventListener("submit", (e) => e.preventDefault());
  }

  async function exportCsv(event) {
    event.preventDefault();
    const { blob, filename } = await download("/audit", filters(ctx.query()));
    const href = URL.createObjectURL(blob);
    const a = h("a", { href, download: filename, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(href), 10000);
  }

  async function refresh() {
    if (!built) {
      await buildForm();
      built = true;
    }
    const q = ctx.query();
    const offset = Math.max(0, Number(q.get("offset")) || 0);
    const data = await api("/audit", { query: { ...filters(q), limit: PAGE_SIZE, offset } });
    const rows = data.items.map((e) =>
      h(
        "tr",
        { testid: "audit-row", dataset: { id: e.id, event: e.event } },
        h("td", { class: "nowrap" }, dateTime(e.ts)),
        h("td", {}, eventBadge(e.event)),
        h("td", {}, e.router ?? DASH),
        h("td", {}, e.workspace_name ?? DASH),
        h("td", {}, e.trigger ?? DASH),
        h("td", { title: e.session_hash || "" }, h("code", {}, short(e.session_hash))),
        h("td", { title: e.request_id || "" }, h("code", {}, short(e.request_id, 8))),
        h("td", { class: "detail" }, describe(e)),
      ),
    );
    const shown = data.items.length;
    fill(
      summary,
      shown ? `Events ${offset + 1}–${offset + shown}, newest first` : "No events match these filters.",
      h("span", { testid: "audit-count", class: "sr-count" }, ` (${shown} shown)`),
    );
    const pager = h(
      "div",
      { class: "pager" },
      h(
        "button",
        {
          type: "button",
          class: "ghost",
          disabled: offset === 0,
          testid: "audit-newer",
          onclick: () => ctx.go({ offset: Math.max(0, offset - PAGE_SIZE) || null }),
        },
        "← Newer",
      ),
      h(
        "button",
        {
          type: "button",
          class: "ghost",
          disabled: shown < PAGE_SIZE,
          testid: "audit-older",
          onclick: () => ctx.go({ offset: offset + PAGE_SIZE }),
        },
        "Older →",
      ),
    );
    fill(
      body,
      table(["Time", "Event", "Router", "Workspace", "Trigger", "Session", "Request", "Detail"], rows, {
        testid: "audit-table",
        empty: "No events match these filters.",
      }),
      pager,
    );
  }
  return { refresh };
}

const EVENT_LABELS = {
  denied_cap: "denied (cap)",
  de_escalated: "de-escalated",
  strong_served: "strong served",
  config_changed: "config changed",
  gate_forced: "gate forced",
  lane_released: "lane released",
};

export function eventLabel(event) {
  return EVENT_LABELS[event] || event;
}

export function eventBadge(event) {
  const b = h("span", { class: "event" }, eventLabel(event));
  b.style.borderColor = EVENT_COLOURS[event] || OKABE_ITO.grey;
  return b;
}

/** One line of what an event's detail says that matters to an operator. */
export function describe(e) {
  const d = e.detail || {};
  if (e.event === "config_changed") {
    return [
      d.op,
      d.target,
      d.version !== undefined ? `v${d.version}` : null,
      d.actor ? `by ${d.actor}` : null,
    ]
      .filter(Boolean)
      .join(" · ");
  }
  if (e.event === "lane_released") {
    return [
      `${d.lane} · ${d.kind}`,
      d.was_leased ? `lease of ${d.lease_owner}` : "no lease held",
      d.forget ? "binding deleted" : null,
      d.actor ? `by ${d.actor}` : null,
    ]
      .filter(Boolean)
      .join(" · ");
  }
  if (e.event === "gate_forced") {
    return `rollout ${d.from_percent}% → ${d.to_percent}% · ${d.labels} labels · by ${d.actor ?? DASH}`;
  }
  const parts = [];
  if (d.header) parts.push(d.header);
  if (d.tier_before && d.tier_after && d.tier_before !== d.tier_after)
    parts.push(`${d.tier_before} → ${d.tier_after}`);
  if (d.delta_score !== undefined && d.delta_score !== null)
    parts.push(`delta ${dec(d.delta_score)} / ${dec(d.threshold)}`);
  if (d.strike_count) parts.push(`${d.strike_count} strike${d.strike_count === 1 ? "" : "s"}`);
  if (d.router_share !== undefined && d.router_share !== null)
    parts.push(`router share ${pct(d.router_share)}`);
  if (d.actor) parts.push(`by ${d.actor}`);
  return parts.join(" · ");
}
