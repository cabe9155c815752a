// Overview: what an operator looks at first, from the engine's own
// counters (GET /metrics, read every five seconds while the page is open):
// completions and failures per minute, retries pending, calls in flight,
// the slowest and the most failing steps; and from the database, as the
// Flows page counts them, the active flows (those waiting for a retry or
// their turn too, on every engine) and the latest failed flows.

import * as api from "./api.js";
import { h, fill, badge } from "./dom.js";
import { ms, relative } from "./format.js";

const EVERY_MS = 5000;

/** OpenMetrics text as [{name, labels, value}]. */
export function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, "$1");
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

function sum(metrics, name, match = () => true) {
  return metrics.filter((m) => m.name === name && match(m.labels)).reduce((a, m) => a + m.value, 0);
}

function byStep(metrics, name, match = () => true) {
  const out = {};
  for (const m of metrics) {
    if (m.name !== name || !match(m.labels) || !m.labels.step) continue;
    out[m.labels.step] = (out[m.labels.step] || 0) + m.value;
  }
  return out;
}

function tile(label, value, note) {
  return h("div", { class: "tile" }, h("div", { class: "value" }, value), h("div", { class: "label" }, label),
    note ? h("div", { class: "note" }, note) : null);
}

export async function render(main, _params, ctx) {
  const tiles = h("div", { class: "tiles" });
  const slow = h("tbody");
  const failing = h("tbody");
  const failed = h("ul", { class: "plain" });
  fill(main,
    h("div", { class: "title" }, h("h1", {}, "Overview"), h("span", { class: "muted" }, "this engine process's counters; active flows from the database")),
    tiles,
    h("div", { class: "two" },
      h("section", { class: "card" }, h("h2", {}, "Slowest steps"),
        h("table", { class: "list" }, h("thead", {}, h("tr", {}, ["Step", "Mean call", "Calls"].map((c) => h("th", { scope: "col" }, c)))), slow)),
      h("section", { class: "card" }, h("h2", {}, "Most failing steps"),
        h("table", { class: "list" }, h("thead", {}, h("tr", {}, ["Step", "Retryable", "Permanent", "Timeout"].map((c) => h("th", { scope: "col" }, c)))), failing))),
    h("section", { class: "card" }, h("h2", {}, "Latest failed flows"), failed));

  // Samples of the finished counters over the last minute: a rate is
  // the change from the oldest to now. A counter that went down (the
  // engine restarted) starts the window again.
  let samples = [];
  async function load() {
    const now = Date.now();
    const metrics = parseMetrics(await api.text("/metrics", ctx.signal));
    const finished = (status) => sum(metrics, "tartan_flows_finished_total", (l) => l.status === status);
    const sample = { at: now, completed: finished("completed"), failed: finished("failed") + finished("cancelled") };
    if (samples.length && (sample.completed < samples.at(-1).completed || sample.failed < samples.at(-1).failed)) samples = [];
    samples = samples.filter((s) => now - s.at <= 60000);
    const oldest = samples[0];
    samples.push(sample);
    const perMinute = (k) => oldest && now > oldest.at
      ? ((sample[k] - oldest[k]) * 60000 / (now - oldest.at)).toFixed(1) : "…";
    // As the Flows page counts them: the metric holds only the flows this
    // process has in memory, not those waiting for a retry.
    const active = await api.post("/engine/flow/query", { statuses: ["active"], limit: 1, total: true }, ctx.signal);
    fill(tiles,
      tile("active flows", active.total ?? "…", `${sum(metrics, "tartan_flows_active")} in this process's memory`),
      tile("completed / min", perMinute("completed"), `${sample.completed} since start`),
      tile("failed or cancelled / min", perMinute("failed"), `${sample.failed} since start`),
      tile("retries pending", sum(metrics, "tartan_retries_pending")),
      tile("calls in flight", sum(metrics, "tartan_calls_in_flight"), `${sum(metrics, "tartan_calls_queued")} queued`),
      tile("calls deferred for health", sum(metrics, "tartan_dispatch_deferred_total"), "since start: their step was unhealthy"));

    const work = (l) => l.call !== "compensation";
    const total = byStep(metrics, "tartan_attempt_duration_seconds_sum", work);
    const count = byStep(metrics, "tartan_attempt_duration_seconds_count", work);
    const means = Object.keys(count).filter((s) => count[s] > 0)
      .map((s) => [s, (total[s] * 1000) / count[s], count[s]]).sort((a, b) => b[1] - a[1]).slice(0, 10);
    fill(slow, means.length ? means.map(([s, mean, n]) => h("tr", {},
      h("td", {}, h("a", { href: `#/steps/${encodeURIComponent(s)}` }, s)), h("td", { class: "num" }, ms(mean)), h("td", { class: "num" }, n)))
      : h("tr", {}, h("td", { colspan: 3, class: "muted" }, "No calls yet.")));
    const outcome = (o) => byStep(metrics, "tartan_attempts_total", (l) => work(l) && l.outcome === o);
    const [r, p, t] = [outcome("retryable"), outcome("permanent"), outcome("timeout")];
    const bad = [...new Set([...Object.keys(r), ...Object.keys(p), ...Object.keys(t)])]
      .map((s) => [s, r[s] || 0, p[s] || 0, t[s] || 0]).filter((x) => x[1] + x[2] + x[3] > 0)
      .sort((a, b) => (b[1] + b[2] + b[3]) - (a[1] + a[2] + a[3])).slice(0, 10);
    fill(failing, bad.length ? bad.map(([s, a, b, c]) => h("tr", {},
      h("td", {}, h("a", { href: `#/flows?status=failed&step=${encodeURIComponent(s)}` }, s)),
      h("td", { class: "num" }, a), h("td", { class: "num" }, b), h("td", { class: "num" }, c)))
      : h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No failed calls.")));

    const latest = await api.post("/engine/flow/query", { statuses: ["failed"], limit: 10, sort: "recent_desc", total: false }, ctx.signal);
    fill(failed, latest.flows.length ? latest.flows.map((f) => h("li", {},
      badge(f.status), " ", h("a", { href: `#/flow/${encodeURIComponent(f.id)}` }, f.id), " ",
      h("time", { class: "age", datetime: f.timestamp }, relative(f.timestamp)),
      f.error ? h("span", { class: "error" }, ` ${f.error}`) : null))
      : h("li", { class: "muted" }, "None."));
  }
  await api.every(EVERY_MS, load, ctx);
}
