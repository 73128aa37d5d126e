// Session inspector: one session's tier state, model and channel pins and its
// recent decisions and requests, by workspace + session id or by scope (usage
// rows' session_hash, which also reaches fingerprinted sessions); a reset
// button puts its tier back to base (audited; ratchets used are not refunded).
// By workspace + session id it also lists the session's sticky-tier lanes, each
// with a release button that frees a lane a crashed gateway left held (audited
// as lane_released).

import { api } from "./api.js";
import { card, fill, h, num, table } from "./dom.js";
import { DASH, dateTime, int, relative, short, usd } from "./format.js";
import { describe, eventBadge } from "./page_audit.js";

const RECENT_SESSIONS = 20;

/** The API path of the session the query names, or null. */
export function sessionPath(q) {
  if (q.get("scope")) return `/session-scopes/${encodeURIComponent(q.get("scope"))}`;
  if (q.get("workspace") && q.get("session")) {
    return `/sessions/${encodeURIComponent(q.get("workspace"))}/${encodeURIComponent(q.get("session"))}`;
  }
  return null;
}

export function mount(view, ctx) {
  const finder = h("form", { class: "finder", testid: "session-form" });
  const recent = h("div", { class: "recent" });
  const detail = h("div", { class: "session-detail", testid: "session-detail" });
  const message = h("p", { class: "notice", testid: "session-reset-result", role: "status", hidden: true });
  view.append(
    h(
      "div",
      { class: "grid sidebar" },
      h(
        "div",
        {},
        card("Find a session", finder),
        card("Recent sessions", recent, { note: "from usage rows, last 7 days" }),
      ),
      h("div", {}, message, detail),
    ),
  );
  let built = false;

  async function buildFinder() {
    const workspaces = await ctx.workspaces();
    const q = ctx.query();
    const ws = h(
      "select",
      { testid: "session-workspace", name: "workspace" },
      workspaces.map((w) => h("option", { value: w, selected: q.get("workspace") === w }, w)),
    );
    const sid = h("input", {
      type: "text",
      name: "session",
      value: q.get("session") || "",
      placeholder: "X-OrcaRouter-Session-Id",
      testid: "session-id",
      required: true,
      spellcheck: "false",
    });
    fill(
      finder,
      h("label", { class: "field" }, h("span", {}, "Workspace"), ws),
      h("label", { class: "field" }, h("span", {}, "Session id"), sid),
      h("button", { type: "submit", testid: "session-inspect" }, "Inspect"),
    );
    finder.onsubmit = (e) => {
      e.preventDefault();
      message.hidden = true;
      ctx.go({ workspace: ws.value, session: sid.value.trim(), scope: null });
    };
  }

  async function refresh() {
    if (!built) {
      await buildFinder();
      built = true;
    }
    const q = ctx.query();
    const path = sessionPath(q);
    const byId = path && !q.get("scope");
    const [recentSessions, session, lanes] = await Promise.all([
      api("/session-scopes", { query: { limit: RECENT_SESSIONS } }),
      path
        ? api(path).catch((err) =>
            err.status === 404 || err.status === 400 ? { error: err } : Promise.reject(err),
          )
        : null,
      // the lane store may be down while the rest of the session reads fine
      byId ? api(`${path}/lanes`).catch((err) => ({ error: err })) : null,
    ]);
    drawRecent(recent, recentSessions.items, session && !session.error ? session.scope : null, ctx);
    if (!session) {
      fill(
        detail,
        h("p", { class: "empty card" }, "Pick a recent session, or type a workspace and session id."),
      );
    } else if (session.error) {
      fill(detail, h("p", { class: "error card", testid: "session-error" }, session.error.message));
    } else {
      drawSession(detail, session, path, ctx, message, lanes);
    }
  }
  return { refresh };
}

function drawRecent(el, items, selected, ctx) {
  fill(
    el,
    items.length
      ? h(
          "ul",
          { class: "session-list", testid: "recent-sessions" },
          items.map((s) =>
            h(
              "li",
              {},
              h(
                "button",
                {
                  type: "button",
                  class: s.session_hash === selected ? "link current" : "link",
                  testid: "recent-session",
                  dataset: { scope: s.session_hash },
                  title: s.session_hash,
                  onclick: () => ctx.go({ scope: s.session_hash, workspace: null, session: null }),
                },
                h("code", {}, short(s.session_hash, 16)),
                s.workspace ? h("span", { class: "muted small" }, ` ${s.workspace}`) : "",
                h(
                  "span",
                  { class: "small block", testid: "recent-session-route" },
                  `${s.routers.join(", ") || "direct"} · ${s.last_tier ?? DASH} · ${s.last_model ?? DASH}`,
                ),
                h(
                  "span",
                  { class: "muted small block", testid: "recent-session-counts" },
                  `${int(s.requests)} req` +
                    (s.strong_requests ? ` (${int(s.strong_requests)} strong)` : "") +
                    (s.errors ? ` · ${int(s.errors)} failed` : "") +
                    ` · ${usd(s.cost_usd)} · last ${relative(s.last_seen)}`,
                ),
              ),
            ),
          ),
        )
      : h("p", { class: "empty" }, "No requests recorded yet."),
  );
}

function tierBadge(state, testid) {
  const tier = state ? state.tier : "base";
  return h(
    "span",
    { class: `badge ${tier === "strong" ? "strong" : "base"}`, testid },
    state ? tier : "base (no state)",
  );
}

function routerCard(r, path, ctx, message) {
  const st = r.tier_state;
  const canReset = r.escalation_mode !== "off" && st;
  const reset = async () => {
    if (!confirm(`Reset this session's tier on ${r.router} to base? Ratchets already used are not refunded.`))
      return;
    const res = await api(`${path}/reset`, { method: "POST", query: { router: r.router } });
    const change = res.routers[0];
    message.textContent = change?.changed
      ? `${change.router}: ${change.tier_before} → ${change.tier_after} (ratchets used stay ${change.escalations_used}).`
      : `${r.router}: nothing to reset.`;
    message.hidden = false;
    ctx.refresh();
  };
  const fact = (label, value, testid) => [h("dt", {}, label), h("dd", { testid }, value)];
  return h(
    "section",
    { class: "card", testid: `session-router-${r.router}` },
    h("h2", {}, r.router, " ", h("span", { class: "muted small" }, `escalation ${r.escalation_mode}`)),
    h("p", {}, tierBadge(st, `session-tier-${r.router}`), st?.trigger ? ` reason: ${st.trigger}` : ""),
    h(
      "dl",
      { class: "facts" },
      fact("Escalations used", st ? int(st.escalations_used) : DASH, `session-used-${r.router}`),
      fact("Ratchets left", st ? int(st.ratchets_left) : DASH, `session-ratchets-${r.router}`),
      fact("Live strikes", st ? int(st.live_strikes) : DASH),
      fact("Difficulty streak", st ? int(st.difficulty_streak) : DASH),
      fact("Clean turns", st ? int(st.clean_turns) : DASH),
      fact("Escalated at", st?.escalated_at ? dateTime(st.escalated_at) : DASH),
      fact("Expires", st ? relative(st.expires_at) : DASH),
      fact("Base model pin", r.model_pins.base ?? DASH, `session-pin-${r.router}-base`),
      fact("Strong model pin", r.model_pins.strong ?? DASH, `session-pin-${r.router}-strong`),
    ),
    canReset
      ? h(
          "button",
          { type: "button", class: "danger", testid: `session-reset-${r.router}`, onclick: reset },
          "Reset tier to base",
        )
      : null,
  );
}

/** The session's lanes: binding, lease holder and a release button each. */
function lanesCard(data, path, ctx, message) {
  if (data.error) {
    return card("Sticky-tier lanes", h("p", { class: "error", testid: "session-lanes-error" }, data.error.message));
  }
  if (!data.enabled) {
    return card("Sticky-tier lanes", h("p", { class: "empty", testid: "session-lanes-off" }, "Session tiers are off."));
  }
  const release = (lane) => async () => {
    const what = `${lane.lane} (${lane.kind})`;
    if (!confirm(`Release lane ${what}? A request still running on it loses its lease.`)) return;
    const res = await api(`${path}/lanes/${encodeURIComponent(lane.lane)}/release`, {
      method: "POST",
      query: { kind: lane.kind },
    });
    const done = res.released[0];
    message.textContent = done.was_leased
      ? `Lane ${what} released (lease of ${done.lease_owner}).`
      : `Lane ${what}: no lease was held.`;
    message.hidden = false;
    ctx.refresh();
  };
  const rows = data.lanes.map((l) => [
    h("td", {}, `${l.lane} · ${l.kind}`),
    `${l.approved_model} (tier ${l.approved_tier})`,
    l.actual_route ?? DASH,
    h(
      "td",
      { testid: `session-lane-${l.kind}-${l.lane}-lease` },
      l.leased ? `held by ${l.lease_owner} · lapses ${relative(l.lease_expires_at)}` : l.lease_lapsed ? "lapsed" : "free",
    ),
    l.tools_unknown ? "unknown" : int(l.outstanding_tool_calls),
    relative(l.expires_at),
    h(
      "td",
      {},
      l.leased || l.lease_lapsed
        ? h(
            "button",
            { type: "button", class: "danger", testid: `session-lane-${l.kind}-${l.lane}-release`, onclick: release(l) },
            "Release",
          )
        : null,
    ),
  ]);
  return card(
    "Sticky-tier lanes",
    table(["Lane", "Approved", "Actual route", "Lease", "Open tool calls", "Expires", ""], rows, {
      testid: "session-lanes",
      empty: "No live lanes for this session id.",
    }),
    { note: `lease ${data.lease_seconds} s, renewed while a turn runs`, wide: true },
  );
}

function drawSession(el, data, path, ctx, message, lanes) {
  const active = data.routers.filter((r) => r.tier_state || r.model_pins.base || r.model_pins.strong);
  const idle = data.routers.filter((r) => !active.includes(r)).map((r) => r.router);
  const title = data.session_id ? `${data.workspace} / ${data.session_id}` : `scope ${data.scope}`;
  const pins = Object.entries(data.channel_pins).map(([model, p]) => [
    model,
    h("td", { testid: `session-channel-pin-${model}` }, `${p.channel} #${p.key_index}`),
  ]);
  const events = data.recent_events.map((e) => [
    h("td", { class: "nowrap" }, dateTime(e.ts)),
    e.router ?? DASH,
    h("td", {}, eventBadge(e.event)),
    e.trigger ?? DASH,
    h("td", { class: "detail" }, describe(e)),
  ]);
  const requests = data.recent_requests.map((r) => [
    h("td", { class: "nowrap" }, dateTime(r.ts)),
    r.router ?? DASH,
    r.model ?? DASH,
    r.tier ?? DASH,
    r.channel ? `${r.channel} #${r.key_index}` : DASH,
    num(String(r.status)),
    num(`${int(r.input_tokens)} / ${int(r.cache_read_tokens)}`),
    num(int(r.output_tokens)),
    num(usd(r.cost_usd)),
  ]);
  fill(
    el,
    h(
      "div",
      { class: "session-head" },
      h("h2", { testid: "session-title" }, title),
      h(
        "p",
        { class: "muted small" },
        "scope ",
        h("code", {}, data.scope),
        " · audit hash ",
        h("code", {}, data.session_hash),
      ),
    ),
    h(
      "div",
      { class: "grid two" },
      active.map((r) => routerCard(r, path, ctx, message)),
    ),
    idle.length ? h("p", { class: "muted small" }, `No tier state or pins on: ${idle.join(", ")}`) : null,
    lanes ? lanesCard(lanes, path, ctx, message) : null,
    card(
      "Channel pins",
      table(["Model", "Channel and key"], pins, {
        testid: "session-channel-pins",
        empty: "No channel pins.",
      }),
    ),
    card(
      "Recent decisions",
      table(["Time", "Router", "Event", "Trigger", "Detail"], events, {
        testid: "session-events",
        empty: "No audit events for this session.",
      }),
      { wide: true },
    ),
    card(
      "Recent requests",
      table(
        ["Time", "Router", "Model", "Tier", "Channel", "Status", "Input / cached", "Output", "Cost"],
        requests,
        {
          testid: "session-requests",
          empty: "No requests recorded.",
        },
      ),
      { wide: true },
    ),
  );
}
