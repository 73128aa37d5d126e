// Number and time formats. The browser tests format the admin API's JSON with
// the same rules (tests/test_dashboard_browser.py) to compare what is shown.

export const DASH = "—";
const grouped = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

function missing(v) {
  return v === null || v === undefined || Number.isNaN(v);
}

/** USD: 2 decimals from $1 up, else three significant digits (at most 8 decimals). */
export function usd(v) {
  if (missing(v)) return DASH;
  const a = Math.abs(v);
  if (a === 0) return "$0.00";
  const sign = v < 0 ? "-" : "";
  if (a >= 1) {
    const [whole, frac] = a.toFixed(2).split(".");
    return sign + "$" + grouped.format(Number(whole)) + "." + frac;
  }
  const decimals = Math.min(8, Math.max(2, 2 - Math.floor(Math.log10(a))));
  return sign + "$" + a.toFixed(decimals);
}

/** A 0-1 ratio as a percentage with one decimal. */
export function pct(v) {
  return missing(v) ? DASH : (v * 100).toFixed(1) + "%";
}

/** A percentage that is already 0-100 (config values such as cap_percent). */
export function pct100(v) {
  return missing(v) ? DASH : Number(v).toFixed(1) + "%";
}

/** Whole numbers (requests, tokens) with thousands separators. */
export function int(v) {
  return missing(v) ? DASH : grouped.format(Math.round(v));
}

/** A mean or a score with two decimals. */
export function dec(v, digits = 2) {
  return missing(v) ? DASH : Number(v).toFixed(digits);
}

/** Compact axis labels: 1.2k, 3.4M, $0.012. */
export function compact(v, money = false) {
  if (money) return "$" + String(Number(v.toPrecision(3)));
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (Math.abs(v) >= 1e4) return (v / 1e3).toFixed(0) + "k";
  if (Math.abs(v) >= 1e3) return (v / 1e3).toFixed(1) + "k";
  return String(Math.round(v * 100) / 100);
}

const pad = (n) => String(n).padStart(2, "0");

/** Unix seconds as local "YYYY-MM-DD HH:MM:SS". */
export function dateTime(ts) {
  if (missing(ts)) return DASH;
  const d = new Date(ts * 1000);
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

/** Unix seconds as local "MM-DD HH:MM:SS" (tables of recent rows). */
export function monthDayTime(ts) {
  return missing(ts) ? DASH : dateTime(ts).slice(5);
}

/** Unix seconds as local "HH:MM" (or "MM-DD" for day buckets). */
export function axisTime(ts, bucketSeconds) {
  const d = new Date(ts * 1000);
  if (bucketSeconds >= 86400) return `${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** Seconds from now as "in 3h 59m" / "2m ago". */
export function relative(ts) {
  if (missing(ts)) return DASH;
  const diff = ts - Date.now() / 1000;
  const a = Math.abs(diff);
  const text =
    a < 60
      ? `${Math.round(a)}s`
      : a < 3600
        ? `${Math.floor(a / 60)}m`
        : `${Math.floor(a / 3600)}h ${Math.floor((a % 3600) / 60)}m`;
  return diff >= 0 ? `in ${text}` : `${text} ago`;
}

/** A long hash shortened for tables; the full value goes in the title. */
export function short(hash, n = 10) {
  if (!hash) return DASH;
  return hash.length > n ? hash.slice(0, n) + "…" : hash;
}

/** A go-live gate's badge, [text, kind], from the API's `state`: a router already live
 *  for every session reads LIVE (good), not a red CLOSED gate it no longer needs. */
export function gateBadge(gate) {
  const state = gate.state || (gate.open ? "open" : "closed");
  return { live: ["LIVE", "good"], open: ["OPEN", "good"] }[state] || ["CLOSED", "bad"];
}
