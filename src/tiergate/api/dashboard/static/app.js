// Boot, login, hash routing and the auto-refresh loop. Each page module exports
// mount(view, ctx) -> {refresh()}; the loop calls refresh every REFRESH_MS
// unless paused or the tab is hidden.

import { ApiError, api, checkToken, clearToken, getToken, setToken } from "./api.js";
import { dateTime } from "./format.js";
import * as overview from "./page_overview.js";
import * as cache from "./page_cache.js";
import * as audit from "./page_audit.js";
import * as sessions from "./page_sessions.js";
import * as shadow from "./page_shadow.js";
import * as keys from "./page_keys.js";
import * as value from "./page_value.js";

const PAGES = { overview, cache, audit, sessions, shadow, value, keys };
// Auto-refresh period: 5 s, or ?refresh=SECONDS on the page URL (1-300).
const REFRESH_MS = refreshSeconds(new URLSearchParams(location.search).get("refresh")) * 1000;
const $ = (id) => document.getElementById(id);

let current = null; // {name, page, query}
let paused = false;
let timer = null;
let loading = false;
let again = false;

function refreshSeconds(raw) {
  const n = Number(raw);
  return raw && Number.isFinite(n) ? Math.min(300, Math.max(1, n)) : 5;
}

/** The hash "#/page?x=1" as {name, query}. */
function route() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [name, qs] = raw.split("?");
  return { name: PAGES[name] ? name : "overview", query: new URLSearchParams(qs || "") };
}

/** What pages may use: the live query, a way to change it, shared lookups. */
const ctx = {
  query: () => route().query,
  setQuery(changes) {
    const { name, query } = route();
    for (const [k, v] of Object.entries(changes)) {
      if (v === null || v === undefined || v === "") query.delete(k);
      else query.set(k, v);
    }
    const qs = query.toString();
    history.replaceState(null, "", `#/${name}${qs ? "?" + qs : ""}`);
  },
  refresh: () => refresh(),
  /** Change the query and redraw now. */
  go(changes) {
    ctx.setQuery(changes);
    return refresh();
  },
  routers: cached("/routers", (d) => d.items),
  workspaces: cached("/config", (d) => d.config.workspaces.map((w) => w.name)),
};

function cached(path, pick) {
  let value = null;
  let at = 0;
  return async () => {
    if (!value || Date.now() - at > 30000) {
      value = pick(await api(path));
      at = Date.now();
    }
    return value;
  };
}

function showLogin(message) {
  stop();
  $("shell").hidden = true;
  $("login").hidden = false;
  const err = $("login-error");
  err.textContent = message || "";
  err.hidden = !message;
  $("login-token").focus();
}

async function login(event) {
  event.preventDefault();
  const token = $("login-token").value.trim();
  const button = event.submitter || $("login-form").querySelector("button");
  button.disabled = true;
  try {
    await checkToken(token);
  } catch (err) {
    showLogin(loginMessage(err));
    return;
  } finally {
    button.disabled = false;
  }
  setToken(token);
  $("login-token").value = "";
  start();
}

function loginMessage(err) {
  if (!(err instanceof ApiError)) return "Sign-in failed: " + err;
  if (err.status === 401)
    return "Wrong admin token: the gateway refused it (401). Check TIERGATE_ADMIN_TOKEN.";
  if (err.code === "admin_disabled")
    return "The admin API is disabled on this gateway: set TIERGATE_ADMIN_TOKEN or server.admin_token.";
  if (err.status === 0) return "Cannot reach the gateway.";
  return `Sign-in failed: ${err.message} (${err.status})`;
}

function start() {
  $("login").hidden = true;
  $("shell").hidden = false;
  if (!location.hash) history.replaceState(null, "", "#/overview");
  open();
}

function stop() {
  clearTimeout(timer);
  timer = null;
}

/** Mount the page the hash names (a hash change from outside always remounts; the
 * pages' own query edits use replaceState, which fires no hashchange). */
function open(remount = false) {
  const { name } = route();
  for (const a of document.querySelectorAll("#nav a")) {
    a.toggleAttribute("aria-current", a.dataset.page === name);
  }
  if (remount || !current || current.name !== name) {
    const view = $("view");
    view.replaceChildren();
    view.dataset.page = name;
    delete view.dataset.loaded;
    current = { name, page: PAGES[name].mount(view, ctx) };
    document.title = `${name[0].toUpperCase() + name.slice(1)} · tiergate`;
  }
  refresh();
}

async function refresh() {
  stop();
  if (!current || !getToken()) return;
  if (loading) {
    again = true; // redraw as soon as the refresh in flight ends
    return;
  }
  loading = true;
  const page = current;
  try {
    await page.page.refresh();
    if (page === current) {
      $("view").dataset.loaded = page.name; // the page shows fresh data (tests wait on it)
      $("banner").hidden = true;
      $("updated").textContent = "Updated " + dateTime(Date.now() / 1000).slice(11);
      $("updated").dataset.ts = String(Date.now());
    }
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return; // the login screen took over
    $("banner").textContent = "Could not refresh: " + (err.message || err);
    $("banner").hidden = false;
  } finally {
    loading = false;
  }
  if (again) {
    again = false;
    return refresh();
  }
  schedule();
}

function schedule() {
  stop();
  if (!paused) timer = setTimeout(() => (document.hidden ? schedule() : refresh()), REFRESH_MS);
}

function togglePause() {
  paused = !paused;
  const b = $("pause");
  b.setAttribute("aria-pressed", String(paused));
  b.textContent = paused ? "Resume" : "Pause";
  $("updated").classList.toggle("paused", paused);
  if (paused) stop();
  else refresh();
}

function logout() {
  clearToken();
  current = null;
  $("view").replaceChildren();
  showLogin("");
}

window.addEventListener("tiergate:unauthorized", () => {
  if (!getToken()) return;
  clearToken();
  current = null;
  showLogin("The gateway no longer accepts this admin token (401). Sign in again.");
});
window.addEventListener("hashchange", () => getToken() && open(true));
$("login-form").addEventListener("submit", login);
$("pause").addEventListener("click", togglePause);
$("logout").addEventListener("click", logout);
if (getToken()) start();
else showLogin("");
