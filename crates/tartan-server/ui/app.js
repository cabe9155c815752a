// The dashboard's shell: which page the URL names, the token, and what it
// may do. Each page is a module of its own (overview, flows, flow, steps, schedules, lanes, engines, bulk); each is given the main
// element, the route's parameters and a context, and returns nothing: it
// stops its streams and timers when the context's signal aborts.

import * as api from "./api.js";
import { h, fill, toast } from "./dom.js";
import { tick } from "./format.js";
import * as overview from "./overview.js";
import * as flows from "./flows.js";
import * as flow from "./flow.js";
import * as steps from "./steps.js";
import * as bulk from "./bulk.js";
import * as schedules from "./schedules.js";
import * as lanes from "./lanes.js";
import * as engines from "./engines.js";

const routes = [
  [/^#\/overview$/, overview, "overview"],
  [/^#\/flows(?:\?(.*))?$/, flows, "flows"],
  [/^#\/flow\/([^?]+)$/, flow, "flows"],
  [/^#\/steps(?:\/([^?]+))?$/, steps, "steps"],
  [/^#\/schedules$/, schedules, "schedules"],
  [/^#\/lanes$/, lanes, "lanes"],
  [/^#\/engines$/, engines, "engines"],
  [/^#\/bulk$/, bulk, "bulk"],
];

const main = document.getElementById("main");
let current = null;
let access = null;

/** Ask the engine what the token may do; on 401 ask for a token. */
async function session() {
  try {
    const s = await api.get("/engine/session");
    access = s.access;
    showSession();
    return true;
  } catch (e) {
    if (e instanceof api.Refused && e.status === 401) {
      askToken(api.token() ? "That token is not valid." : "");
      return false;
    }
    fill(main, h("p", { class: "problem", role: "alert" }, `Cannot reach the engine: ${e.message}`));
    return false;
  }
}

function showSession() {
  const el = document.getElementById("session");
  const words = { full: "full access", read: "read only", open: "no token needed" }[access] || access;
  fill(el, h("span", { class: `access a-${access}` }, words),
    api.token() ? h("button", { type: "button", class: "link", onclick: signOut }, "Forget token") : null);
}

function signOut() {
  api.setToken("");
  access = null;
  fill(document.getElementById("session"));
  route();
}

function askToken(message) {
  if (current) current.abort();
  current = null;
  const input = h("input", { id: "token", type: "password", autocomplete: "off", required: true,
    "aria-describedby": "token-help" });
  const form = h("form", { class: "card token" },
    h("h1", {}, "Sign in"),
    h("p", { id: "token-help" }, "This engine needs a token: TARTAN_API_TOKEN for everything, " +
      "TARTAN_READ_TOKEN to look only. It is kept in this tab's session storage and sent as a " +
      "bearer header, never as a cookie."),
    message ? h("p", { class: "problem", role: "alert" }, message) : null,
    h("label", { for: "token" }, "Token"), input,
    h("button", { type: "submit" }, "Sign in"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    api.setToken(input.value.trim());
    route();
  });
  fill(main, form);
  input.focus();
}

async function route() {
  if (current) current.abort();
  current = new AbortController();
  const mine = current;
  if (!access && !(await session())) return;
  if (mine.signal.aborted) return;
  const hash = location.hash || "#/overview";
  for (const [pattern, page, nav] of routes) {
    const m = hash.match(pattern);
    if (!m) continue;
    for (const a of document.querySelectorAll("nav a")) {
      if (a.dataset.page === nav) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    const ctx = {
      signal: mine.signal,
      canAct: access === "full" || access === "open",
      access,
      refused(e) {
        if (e instanceof api.Refused && e.status === 401) { access = null; askToken("The token was refused."); return; }
        if (e.name === "AbortError") return;
        toast(e.message, true);
      },
    };
    fill(main);
    main.focus({ preventScroll: true });
    try {
      // A flow id or step is one encoded segment; the flows page's query
      // string is read by URLSearchParams, which decodes it itself.
      const params = page === flows
        ? m.slice(1)
        : m.slice(1).map((p) => (p === undefined ? p : decodeURIComponent(p)));
      await page.render(main, params, ctx);
    } catch (e) {
      if (mine.signal.aborted) return;
      ctx.refused(e);
      if (!main.childElementCount) fill(main, h("p", { class: "problem", role: "alert" }, e.message));
    }
    return;
  }
  location.hash = "#/overview";
}

// Only the dashboard's own addresses (`#/...`) change the page: the
// "Skip to content" link's `#main` does not.
window.addEventListener("hashchange", () => {
  if (location.hash === "" || location.hash.startsWith("#/")) route();
});
document.querySelector(".skip").addEventListener("click", (ev) => {
  ev.preventDefault();
  main.focus();
});
setInterval(tick, 1000);
route();
