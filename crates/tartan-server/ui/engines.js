// Engines (docs/operating.md, "Health checks and the cluster"): each live
// engine on the database with its start, its last heartbeat and the calls
// it holds; every step that is not healthy, with why and which engine
// checked it. Read again every five seconds while the page is open.

import * as api from "./api.js";
import { h, fill, badge } from "./dom.js";
import { relative, time } from "./format.js";

function nodeRow(id, n, here) {
  return h("tr", { id: `engine-${id}` },
    h("td", {}, h("code", {}, id), id === here ? h("span", { class: "muted" }, " (answering)") : null),
    h("td", {}, h("time", { datetime: n.started_at, title: time(n.started_at) }, time(n.started_at))),
    h("td", {}, h("time", { class: "age", datetime: n.last_seen }, relative(n.last_seen))),
    h("td", { class: "num" }, n.calls_held ?? 0));
}

/** How many steps have each health: `3 healthy, 2 unknown`. */
function healthCounts(health) {
  const counts = {};
  for (const s of Object.values(health || {})) counts[s.status] = (counts[s.status] || 0) + 1;
  const words = Object.entries(counts).sort().map(([s, n]) => `${n} ${s}`);
  return words.length ? `Steps: ${words.join(", ")} (unknown: no health check, or not checked yet).` : "No steps.";
}

function healthRows(health) {
  const bad = Object.entries(health || {}).filter(([, s]) => s.status === "unhealthy")
    .sort((a, b) => a[0].localeCompare(b[0]));
  if (!bad.length) return h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No step is unhealthy."));
  return bad.map(([step, s]) => h("tr", {},
    h("td", {}, h("a", { href: `#/steps/${encodeURIComponent(step)}` }, step)),
    h("td", {}, badge(s.status)),
    h("td", { class: "error" }, s.error || ""),
    h("td", {}, s.checked_by ? h("code", {}, s.checked_by) : ""),
    h("td", {}, s.since ? h("time", { class: "age", datetime: s.since }, relative(s.since)) : "")));
}

export async function render(main, _params, ctx) {
  const nodes = h("tbody");
  const steps = h("tbody");
  const summary = h("p", { class: "muted" });
  const counts = h("p", { class: "muted" });
  fill(main,
    h("div", { class: "title" }, h("h1", {}, "Engines")),
    summary,
    h("section", { class: "card" }, h("h2", {}, "Live engines"),
      h("div", { class: "table-wrap" }, h("table", { class: "list" },
        h("caption", { class: "sr" }, "Engines on the database, by id"),
        h("thead", {}, h("tr", {}, ["Engine", "Started", "Last heartbeat", "Calls held"]
          .map((c) => h("th", { scope: "col" }, c)))),
        nodes))),
    h("section", { class: "card" }, h("h2", {}, "Unhealthy steps"), counts,
      h("div", { class: "table-wrap" }, h("table", { class: "list" },
        h("caption", { class: "sr" }, "Steps whose health check fails"),
        h("thead", {}, h("tr", {}, ["Step", "Health", "Why", "Checked by", "Since"]
          .map((c) => h("th", { scope: "col" }, c)))),
        steps))));
  async function load() {
    const [cluster, health] = await Promise.all([
      api.get("/engine/cluster", ctx.signal),
      api.get("/health", ctx.signal),
    ]);
    const here = health.details?.node_id;
    const entries = Object.entries(cluster.nodes || {});
    fill(summary, `${entries.length} engine(s) with a recent heartbeat. Calls held: work items under the engine's lease, ` +
      "in flight or waiting for a call slot. The engines share the health checks out, so they agree on each step's health.");
    fill(nodes, entries.length ? entries.map(([id, n]) => nodeRow(id, n, here))
      : h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No engine has sent a heartbeat yet.")));
    // Every node holds the same view of the steps' health.
    const health0 = entries.length ? entries[0][1].health : {};
    fill(counts, healthCounts(health0));
    fill(steps, healthRows(health0));
  }
  await api.every(5000, load, ctx);
}
