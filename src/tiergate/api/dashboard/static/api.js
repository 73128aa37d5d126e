// The admin API client: every call carries the admin token as a Bearer header.
// The token lives in sessionStorage (this tab only, gone when it closes) and
// never in a URL, so it cannot leak through history, logs or Referer.

const TOKEN_KEY = "tiergate.adminToken";
const PREFIX = "/admin/api";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

function url(path, query) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") params.set(k, String(v));
  }
  const qs = params.toString();
  return PREFIX + path + (qs ? "?" + qs : "");
}

async function send(path, { method = "GET", query, body, token } = {}) {
  const headers = { Authorization: "Bearer " + (token ?? getToken() ?? "") };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(url(path, query), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
  } catch {
    throw new ApiError(0, "network", "Cannot reach the gateway");
  }
  if (!res.ok) {
    let code = "http_" + res.status;
    let message = res.statusText || "Request failed";
    try {
      const err = (await res.json()).error;
      code = err.code || code;
      message = err.message || message;
    } catch {
      /* not JSON: keep the status line */
    }
    if (res.status === 401) window.dispatchEvent(new CustomEvent("tiergate:unauthorized"));
    throw new ApiError(res.status, code, message);
  }
  return res;
}

/** GET/POST a JSON endpoint below /admin/api; throws ApiError. */
export async function api(path, options = {}) {
  const res = await send(path, options);
  return res.json();
}

/** A CSV export as {blob, filename}, fetched with the token (a plain link could not send it). */
export async function download(path, query) {
  const res = await send(path, { query: { ...query, format: "csv" } });
  const disposition = res.headers.get("content-disposition") || "";
  const match = /filename="([^"]+)"/.exec(disposition);
  return { blob: await res.blob(), filename: match ? match[1] : "tiergate.csv" };
}

/** Check a token before keeping it: one cheap admin call. */
export async function checkToken(token) {
  await send("/routers", { token });
}
