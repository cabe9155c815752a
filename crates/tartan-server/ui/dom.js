// Building the page. Every piece of text from the API goes in through
// textContent or an attribute, never parsed as markup, so a step id or an
// error message holding markup is shown as the text it is (docs/ui.md,
// "Security").

/** An element: h("a", {href: "#/x", class: "c"}, "text", child, ...). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/** An SVG element, built the same way. */
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace what `el` holds. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A definition list from [term, value] pairs, skipping empty values. */
export function facts(pairs) {
  return h("dl", { class: "facts" },
    pairs.filter(([, v]) => v !== undefined && v !== null && v !== "")
      .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

/** A status as a coloured badge. */
export function badge(status) {
  return h("span", { class: `badge s-${String(status).replace(/[^a-z_]/g, "")}` }, status);
}

/**
 * JSON, collapsible, as text; written out only when opened. `key` names it
 * so that a page drawn again can open it again (`keepOpen`).
 */
export function json(value, summary, key) {
  const pre = h("pre");
  const el = h("details", { class: "json", dataset: key ? { key } : undefined },
    h("summary", {}, summary), pre);
  el.addEventListener("toggle", () => {
    if (el.open && !pre.textContent) pre.textContent = JSON.stringify(value, null, 2);
  });
  return el;
}

/** The keys of the open `details` under `root`, to open them again after drawing. */
export function openKeys(root) {
  return new Set([...root.querySelectorAll("details[open][data-key]")].map((d) => d.dataset.key));
}

export function reopen(root, keys) {
  for (const d of root.querySelectorAll("details[data-key]")) if (keys.has(d.dataset.key)) d.open = true;
}

let toastTimer;
/** A short message at the bottom of the page. */
export function toast(text, bad) {
  const el = document.getElementById("toast");
  el.textContent = text;
  el.className = bad ? "toast bad shown" : "toast shown";
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.className = "toast"; }, bad ? 8000 : 4000);
}

/** The "live" mark of a page following a stream: in words, not colour alone. */
export function liveOn(el, on) {
  el.classList.toggle("on", on);
  el.textContent = on ? "live" : "not live";
}
