// A tiny DOM builder. Text always goes in as text nodes (markup is never parsed), so
// nothing the API returns can inject markup.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "testid") el.setAttribute("data-testid", v);
    else if (k === "class") el.setAttribute("class", v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "value" && "value" in el) el.value = v;
    else if (k === "checked" && "checked" in el) el.checked = Boolean(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** h("div", {class: "card", testid: "x"}, "text", h("span", {}, "more")) */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** The same for SVG elements. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Replace a node's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return build(el, {}, children);
}

/** Redraw controls only when what they show changed: replacing a select every
 * refresh would close it under the user's pointer. */
export function fillOnChange(el, key, make) {
  if (el.dataset.key === key) return el;
  el.dataset.key = key;
  return fill(el, ...make());
}

/** A card: title, optional note, body. */
export function card(title, body, { note, testid, wide } = {}) {
  return h(
    "section",
    { class: wide ? "card wide" : "card", testid },
    h("h2", {}, title),
    note ? h("p", { class: "note" }, note) : null,
    body,
  );
}

/** A table from column heads and rows of cells (cells may be nodes). */
export function table(heads, rows, { testid, empty = "Nothing in this range yet." } = {}) {
  if (!rows.length) return h("p", { class: "empty", testid: testid && testid + "-empty" }, empty);
  return h(
    "table",
    { testid },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        heads.map((x) => h("th", { scope: "col" }, x)),
      ),
    ),
    h(
      "tbody",
      {},
      rows.map((r) => (r instanceof Node ? r : h("tr", {}, r.map(cell)))),
    ),
  );
}

function cell(x) {
  return x instanceof Node && x.nodeName === "TD" ? x : h("td", {}, x);
}

/** A numeric table cell with a test id (right-aligned). */
export function num(text, testid) {
  return h("td", { class: "num", testid }, text);
}

/** A labelled select; options are [value, label] pairs. */
export function select(label, options, value, onchange, testid) {
  return h(
    "label",
    { class: "field" },
    h("span", {}, label),
    h(
      "select",
      { testid, onchange: (e) => onchange(e.target.value) },
      options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)),
    ),
  );
}
