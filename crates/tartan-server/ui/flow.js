// One flow: its plan as a graph, each step with its work items, each item
// with the timeline of its attempts and the delay that followed each (its
// parts: the formula, the cap, jitter, Retry-After), a countdown to the
// next retry or deadline, the event log, live, and the actions.

import * as api from "./api.js";
import { h, fill, badge, facts, json, toast } from "./dom.js";
import { between, clock, countdown, ms, time } from "./format.js";
import { layers, planGraph } from "./graph.js";

/** Events shown before "show all": a flow of 10,000 items has many more. */
const LOG_SHOWN = 200;
/** Work items listed per step before "show all". */
const ITEMS_SHOWN = 1000;

/** The parts of the wait after an attempt, in words. */
export function delayWords(d) {
  if (!d) return "";
  const parts = [`formula ${ms(d.computed_ms)}`];
  if (d.cap_applied) parts.push(`capped to ${ms(d.capped_ms)}`);
  if (d.jitter_ms) parts.push(`jitter ${d.jitter_ms > 0 ? "+" : ""}${ms(d.jitter_ms)}`);
  if (d.retry_after_ms !== undefined && d.retry_after_ms !== null) {
    parts.push(`Retry-After ${ms(d.retry_after_ms)}${d.retry_after_applied ? " (applied)" : ""}`);
  }
  return `waited ${ms(d.delay_ms)}: ${parts.join(", ")}`;
}

function attemptsTable(attempts, kind) {
  if (!attempts || !attempts.length) return h("p", { class: "muted" }, `No ${kind} yet.`);
  return h("table", { class: "attempts" },
    h("caption", { class: "sr" }, kind),
    h("thead", {}, h("tr", {}, ["#", "Started", "Took", "Outcome", "HTTP", "Error", "Then"]
      .map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, attempts.map((a) => h("tr", { class: `o-${a.outcome || "running"}` },
      h("td", { class: "num" }, a.number),
      h("td", {}, h("time", { datetime: a.started_at, title: time(a.started_at) }, clock(a.started_at))),
      h("td", { class: "num" }, a.ended_at ? between(a.started_at, a.ended_at) : "running"),
      h("td", {}, a.outcome ? badge(a.outcome) : badge("active")),
      h("td", { class: "num http" }, a.http_status ?? ""),
      h("td", { class: "error" }, a.error || ""),
      h("td", { class: "delay" }, delayWords(a.delay))))));
}

function itemView(token, item, open) {
  const when = [];
  if (item.next_retry_at && item.status !== "succeeded") when.push(countdown(h, item.next_retry_at, "retry"));
  if (item.deadline_at && !item.completed_at) when.push(countdown(h, item.deadline_at, "deadline"));
  if (item.inactive_until && !item.completed_at) when.push(countdown(h, item.inactive_until, "inactive"));
  const body = h("div", { class: "item-body" });
  const details = h("details", { class: "item", open: open || undefined, dataset: { token } },
    h("summary", {},
      badge(item.status),
      h("code", { class: "token", title: token }, token.slice(0, 8)),
      item.index !== undefined ? h("span", { class: "muted" }, `#${item.index}`) : null,
      h("span", {}, `${(item.attempts || []).length} attempt(s)`),
      when,
      item.deferred_since ? h("span", { class: "warn" }, "waiting: its step is unhealthy") : null,
      (item.children || []).map((c) => h("a", { href: `#/flow/${encodeURIComponent(c)}` }, `sub-flow ${c}`)),
      item.error ? h("span", { class: "error" }, item.error) : null),
    body);
  // The timeline is built when the item is opened: a for_each of 10,000
  // items costs one summary line each until then.
  const build = () => {
    if (body.childElementCount) return;
    fill(body,
      attemptsTable(item.attempts, "attempts"),
      item.compensation && item.compensation.length ? [h("h5", {}, "Compensation"), attemptsTable(item.compensation, "compensation calls")] : null,
      facts([["retry state", item.retry_state], ["late results", (item.late_results || []).join(", ")],
        ["waited for health", item.deferred_ms ? ms(item.deferred_ms) : ""]]),
      Object.keys(item.inputs || {}).length ? json(item.inputs, "item inputs") : null,
      item.outputs ? json(item.outputs, "item outputs") : null,
      item.problem ? json(item.problem, "problem") : null);
  };
  details.addEventListener("toggle", () => { if (details.open) build(); });
  if (open) build();
  return details;
}

function stepView(id, step, exec, words, openItems, showAll, childPlan) {
  const items = Object.entries(exec.work_items || {});
  items.sort((a, b) => (a[1].index ?? 0) - (b[1].index ?? 0) || a[0].localeCompare(b[0]));
  const counts = {};
  for (const [, it] of items) counts[it.status] = (counts[it.status] || 0) + 1;
  const shown = showAll.has(id) ? items : items.slice(0, ITEMS_SHOWN);
  // A step of a few items shows their timelines at once; a for_each's
  // items open one by one.
  const few = items.length <= 5;
  const list = h("div", { class: "items" }, shown.map(([t, it]) => itemView(t, it, few || openItems.has(t))));
  const section = h("section", { class: "step card", id: `step-${id}`, "aria-labelledby": `step-h-${id}` },
    h("h3", { id: `step-h-${id}` }, badge(exec.status || "pending"), " ", id,
      step.name && step.name !== id ? h("span", { class: "muted" }, ` ${step.name}`) : null),
    facts([
      ["type", step.type],
      ["endpoint", step.http ? `${step.http.method || "POST"} ${step.http.endpoint}` : ""],
      ["retries", words],
      ["started", time(exec.started_at)],
      ["took", exec.started_at ? between(exec.started_at, exec.completed_at) : ""],
      ["items", Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ")],
      ["error", exec.error],
      ["reason", exec.reason],
    ]),
    Object.keys(exec.inputs || {}).length ? json(exec.inputs, "inputs") : null,
    exec.outputs ? json(exec.outputs, "outputs") : null,
    childPlan ? h("details", { class: "subplan" }, h("summary", {}, `sub-flow plan (goals: ${(childPlan.goals || []).join(", ")})`),
      h("div", { class: "scroll" }, planGraph(childPlan, () => "pending", () => {}))) : null,
    list,
    items.length > shown.length
      ? h("button", { type: "button", class: "secondary", dataset: { more: id } }, `Show all ${items.length} work items`)
      : null);
  return section;
}

function eventLine(ev) {
  const d = ev.data || {};
  const what = [d.step_id, d.error || d.reason, d.next_retry_at ? `retry at ${time(d.next_retry_at)}` : "",
    d.http_status ? `HTTP ${d.http_status}` : "", d.attempt ? `attempt ${d.attempt}` : ""].filter(Boolean).join(" · ");
  return h("li", { class: `event t-${ev.type}` },
    h("span", { class: "seq num" }, ev.sequence),
    h("time", { datetime: ev.timestamp, title: time(ev.timestamp) }, clock(ev.timestamp)),
    h("code", {}, ev.type),
    h("details", {}, h("summary", { "aria-label": `event ${ev.sequence}, ${ev.type}: ${what || "data"}` }, what || "data"),
      h("pre", {}, JSON.stringify(d, null, 2))));
}

function actions(flow, ctx, reload) {
  const act = async (path, body, question, done) => {
    if (!confirm(question)) return;
    try {
      await api.post(path, body, ctx.signal);
      toast(done);
      reload();
    } catch (e) {
      ctx.refused(e);
    }
  };
  const base = `/engine/flow/${api.seg(flow.id)}`;
  const compensate = h("input", { type: "checkbox", id: "a-comp", checked: true });
  const reset = h("input", { type: "checkbox", id: "a-reset", checked: true });
  const active = flow.status === "active";
  const retryable = flow.status === "failed" || flow.status === "cancelled";
  const off = !ctx.canAct;
  return h("div", { class: "actions card", role: "group", "aria-label": "Actions" },
    h("div", {},
      h("button", { type: "button", class: "danger", disabled: off || !active,
        onclick: () => act(`${base}/cancel?compensate=${compensate.checked}`, {},
          `Cancel flow ${flow.id}${compensate.checked ? ", compensating what succeeded" : " without compensation"}?`,
          "Flow cancelled") }, "Cancel flow"),
      h("label", { class: "check", for: "a-comp" }, compensate, "compensate")),
    h("div", {},
      h("button", { type: "button", disabled: off || !retryable,
        onclick: () => act(`${base}/retry`, { reset_attempts: reset.checked },
          `Retry flow ${flow.id}${reset.checked ? ", counting attempts from 1 again" : ""}?`, "Flow retried") }, "Retry flow"),
      h("label", { class: "check", for: "a-reset" }, reset, "reset attempts")),
    off ? h("p", { class: "muted" }, ctx.access === "read" ? "Read-only token: actions are disabled." : "") : null);
}

export async function render(main, [id], ctx) {
  const base = `/engine/flow/${api.seg(id)}`;
  let flow = await api.get(base, ctx.signal);
  let catalog = {};
  try {
    const steps = await api.get("/engine/step", ctx.signal);
    for (const s of steps.steps || []) catalog[s.id] = s;
  } catch (e) {
    if (e.name === "AbortError") return;
  }
  const head = h("div");
  const graph = h("div", { class: "graph card" });
  const stepsEl = h("div", { class: "steps" });
  const log = h("ol", { class: "log" });
  const logMore = h("div");
  const liveEl = h("span", { class: "live" }, "live");
  const events = [];
  const openItems = new Set();
  const showAll = new Set();
  let logAll = false;

  stepsEl.addEventListener("toggle", (ev) => {
    const t = ev.target.dataset && ev.target.dataset.token;
    if (!t) return;
    if (ev.target.open) openItems.add(t); else openItems.delete(t);
  }, true);
  stepsEl.addEventListener("click", (ev) => {
    const more = ev.target.dataset && ev.target.dataset.more;
    if (more) { showAll.add(more); draw(); }
  });

  const pick = (stepId) => {
    const el = document.getElementById(`step-${stepId}`);
    if (el) { el.scrollIntoView({ behavior: "smooth", block: "start" }); el.querySelector("h3").focus?.(); }
  };

  function draw() {
    const statusOf = (s) => (flow.executions?.[s]?.status) || "pending";
    const deadline = flow.deadline_at && flow.status === "active" ? countdown(h, flow.deadline_at, "deadline") : null;
    fill(head,
      h("div", { class: "title" }, h("h1", {}, "Flow ", h("code", {}, flow.id)), badge(flow.status), liveEl, deadline),
      facts([
        ["goals", (flow.plan?.goals || []).join(", ")],
        ["created", time(flow.created_at)],
        ["took", between(flow.created_at, flow.completed_at)],
        ["labels", Object.entries(flow.labels || {}).map(([k, v]) => `${k}=${v}`).join(", ")],
        ["parent", flow.metadata?.parent_flow_id
          ? h("a", { href: `#/flow/${encodeURIComponent(flow.metadata.parent_flow_id)}` }, flow.metadata.parent_flow_id) : ""],
        ["error", flow.error],
        ["attempt cap", flow.max_step_attempts],
      ]),
      actions(flow, ctx, refresh),
      json(flow.attributes || {}, "attributes (inputs and outputs)"));
    fill(graph, h("h2", {}, "Plan"), h("div", { class: "scroll" }, planGraph(flow.plan || { steps: {} }, statusOf, pick)));
    const order = layers(flow.plan || { steps: {} }).columns.flat();
    fill(stepsEl, h("h2", {}, "Steps"), order.map((s) => stepView(s, flow.plan.steps[s] || {},
      flow.executions?.[s] || {}, catalog[s]?.effective_retry?.in_words, openItems, showAll,
      flow.plan.children?.[s])));
  }

  function drawLog() {
    const shown = logAll ? events : events.slice(-LOG_SHOWN);
    fill(log, shown.map(eventLine));
    fill(logMore, events.length > shown.length
      ? h("button", { type: "button", class: "secondary", onclick: () => { logAll = true; drawLog(); } },
        `Show all ${events.length} events`)
      : null);
  }

  let pending = null;
  let logFrame = 0;
  async function refresh() {
    try {
      flow = await api.get(base, ctx.signal);
      draw();
    } catch (e) {
      ctx.refused(e);
    }
  }
  const later = () => {
    if (!pending) pending = setTimeout(() => { pending = null; refresh(); }, 250);
  };

  fill(main, head, graph, stepsEl,
    h("section", { class: "card" }, h("h2", {}, "Events"), log, logMore));
  draw();
  ctx.signal.addEventListener("abort", () => { clearTimeout(pending); cancelAnimationFrame(logFrame); });
  api.stream(`${base}/stream`, (m) => {
    if (m.event === "state") {
      flow = m.data;
      draw();
      liveEl.classList.remove("on");
      return;
    }
    events.push(m.data);
    // A flow's history arrives as a burst: draw once per frame, not per event.
    if (!logFrame) logFrame = requestAnimationFrame(() => { logFrame = 0; drawLog(); });
    later();
  }, ctx.signal, () => liveEl.classList.add("on")).catch(ctx.refused);
}
