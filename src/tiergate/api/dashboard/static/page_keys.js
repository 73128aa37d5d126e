// Virtual keys: the workspace tokens issued through the admin API, with their
// limits and the spend their budgets count; issue a new one (its token is shown
// here once and never again) or revoke one on every instance; a key's usage per
// UTC day over the last 30 days (from the usage table's virtual_key column).

import { api } from "./api.js";
import { card, fill, h, num, select, table } from "./dom.js";
import { DASH, dateTime, int, usd } from "./format.js";

export function mount(view, ctx) {
  const form = h("form", { class: "toolbar", testid: "vk-form" });
  const issued = h("p", { class: "notice", testid: "vk-issued", role: "status", hidden: true });
  const list = h("div");
  const usage = h("div", { testid: "vk-usage" });
  view.append(
    card("Issue a virtual key", h("div", {}, form, issued), {
      testid: "card-vk-new",
      note: "The token is shown once, here: copy it now. Only its hash is stored.",
    }),
    card("Virtual keys", list, {
      testid: "card-vk-list",
      wide: true,
      note: "Spend is counted where a budget is set (the limiter's own counters).",
    }),
    card("Key usage", usage, {
      testid: "card-vk-usage",
      wide: true,
      note: "Per UTC day, the last 30 days: every request the key authenticated, refused ones included.",
    }),
  );
  let drawnForm = false;

  async function create(event) {
    event.preventDefault();
    const data = new FormData(form);
    const body = { workspace: data.get("workspace"), name: data.get("name") || "" };
    for (const field of ["rate_limit_rpm", "budget_usd_per_day", "budget_usd_per_month"]) {
      if (data.get(field) !== "") body[field] = Number(data.get(field));
    }
    try {
      const res = await api("/virtual-keys", { method: "POST", body });
      fill(issued, `Key ${res.key.id} for ${res.key.workspace}: `, h("code", { testid: "vk-token" }, res.token));
    } catch (err) {
      fill(issued, `Not issued: ${err.message}`);
    }
    issued.hidden = false;
    form.reset();
    await ctx.refresh();
  }

  async function revoke(item) {
    await api(`/virtual-keys/${item.id}/revoke`, { method: "POST" });
    fill(issued, `Key ${item.id} revoked.`);
    issued.hidden = false;
    await ctx.refresh();
  }

  async function refresh() {
    const [workspaces, keys] = await Promise.all([ctx.workspaces(), api("/virtual-keys")]);
    if (!drawnForm) {
      drawnForm = true;
      form.onsubmit = create;
      fill(
        form,
        select("Workspace", workspaces.map((w) => [w, w]), workspaces[0], () => {}, "vk-workspace"),
        field("Name", "name", "text", "vk-name"),
        field("Requests / min", "rate_limit_rpm", "number", "vk-rpm"),
        field("USD / day", "budget_usd_per_day", "number", "vk-day"),
        field("USD / month", "budget_usd_per_month", "number", "vk-month"),
        h("button", { type: "submit", class: "good", testid: "vk-create" }, "Issue key"),
      );
      form.querySelector("select").name = "workspace";
    }
    const rows = keys.items.map((k) => [
      h("td", { testid: `vk-id-${k.id}` }, k.id),
      k.workspace,
      k.name || DASH,
      h("td", {}, h("code", {}, `${k.prefix}…`)),
      dateTime(k.created),
      h("td", { class: `status ${k.active ? "ok" : "disabled"}`, testid: `vk-status-${k.id}` },
        k.active ? "active" : `revoked ${dateTime(k.revoked)}`),
      num(k.rate_limit_rpm === null ? DASH : int(k.rate_limit_rpm)),
      num(limit(k.spend_today_usd, k.budget_usd_per_day), `vk-day-${k.id}`),
      num(limit(k.spend_month_usd, k.budget_usd_per_month), `vk-month-${k.id}`),
      h("td", {},
        h("button", { testid: `vk-usage-${k.id}`, onclick: () => ctx.go({ key: k.id }) }, "Usage"),
        k.active
          ? h("button", { class: "danger", testid: `vk-revoke-${k.id}`, onclick: () => revoke(k) }, "Revoke")
          : null),
    ]);
    fill(
      list,
      table(
        ["Id", "Workspace", "Name", "Token", "Created", "Status", "Req/min", "Today", "This month", ""],
        rows,
        { testid: "vk-table", empty: "No virtual keys yet." },
      ),
    );
    await drawUsage(usage, ctx.query().get("key"), keys.items);
  }
  return { refresh };
}

/** One key's requests, tokens and cost per day, newest first, with the total. */
async function drawUsage(el, keyId, items) {
  if (!keyId || !items.some((k) => k.id === keyId)) {
    fill(el, h("p", { class: "empty" }, "Choose a key's Usage button to see its history."));
    return;
  }
  const res = await api(`/virtual-keys/${keyId}/usage`, { query: { bucket: "day" } });
  const row = (label, p, testid) => [
    h("td", { testid }, label),
    num(int(p.requests)),
    num(int(p.errors)),
    num(int(p.input_tokens)),
    num(int(p.cache_read_tokens)),
    num(int(p.output_tokens)),
    num(usd(p.cost_usd), testid && `${testid}-cost`),
  ];
  const rows = [...res.points].reverse().map((p) => row(utcDay(p.t), p));
  if (rows.length) rows.push(row("Total", res.total, "vk-usage-total"));
  fill(
    el,
    h("p", {}, "Key ", h("code", { testid: "vk-usage-key" }, res.key.id), res.key.name ? ` (${res.key.name})` : ""),
    table(
      ["Day (UTC)", "Requests", "Errors", "Input tokens", "Cached", "Output tokens", "Cost"],
      rows,
      { testid: "vk-usage-table", empty: "No requests with this key in the last 30 days." },
    ),
  );
}

function utcDay(ts) {
  return new Date(ts * 1000).toISOString().slice(0, 10);
}

function field(label, name, type, testid) {
  const attrs = { name, type, testid };
  if (type === "number") Object.assign(attrs, { min: "0", step: "any" });
  return h("label", { class: "field" }, h("span", {}, label), h("input", attrs));
}

/** "spent of budget", or the budget alone, or a dash. */
function limit(spent, budget) {
  if (budget === null) return DASH;
  return `${usd(spent ?? 0)} of ${usd(budget)}`;
}
