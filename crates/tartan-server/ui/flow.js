// One flow: its plan as a graph, each step with its work items, each item
// with the timeline of its attempts and the delay that followed each (its
// parts: the formula, the cap, jitter, Retry-After), a countdown to the
// next retry or deadline, the event log, live, and the actions.

import * as api from "./api.js";
import { h, fill, badge, facts, json, liveOn, openKeys, reopen, toast } from "./dom.js";
import { between, clock, countdown, ms, time } from "./format.js";
import { layers, planGraph } from "./graph.js";
import { timeline } from "./timeline.js";

/** Events shown before "show all": a flow of 10,000 items has many more. */
const LOG_SHOWN = 200;
/** Work items listed per step before "show all". */
const ITEMS_SHOWN = 1000;
/** A step with at most this many items shows their timelines at once. */
const FEW_ITEMS = 5;

/** The parts of the wait after an attempt, in words: `waits` while it
 * runs (`until`, the retry's time), `waited` once the next attempt began;
 * `hastened`: when a request cut it short ("Retry now"), after `ended`. */
export function delayWords(d, until, hastened, ended) {
  if (!d) return "";
  const parts = [`formula ${ms(d.computed_ms)}`];
  if (d.cap_applied) parts.push(`capped to ${ms(d.capped_ms)}`);
  if (d.jitter_ms) parts.push(`jitter ${d.jitter_ms > 0 ? "+" : ""}${ms(d.jitter_ms)}`);
  if (d.retry_after_ms !== undefined && d.retry_after_ms !== null) {
    parts.push(`Retry-After ${ms(d.retry_after_ms)}${d.retry_after_applied ? " (applied)" : ""}`);
  }
  const head = until ? `waits ${ms(d.delay_ms)} (until ${clock(until)})`
    : hastened ? `waited ${between(ended, hastened)} of ${ms(d.delay_ms)}, retried now by request at ${clock(hastened)}`
      : `waited ${ms(d.delay_ms)}`;
  return `${head}: ${parts.join(", ")}`;
}

/** `attempts` as a table; `until`: when the wait after the last one ends,
 * while it runs. */
function attemptsTable(attempts, kind, until) {
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
      h("td", { class: "delay" },
        delayWords(a.delay, a === attempts.at(-1) ? until : null, a.hastened_at, a.ended_at))))));
}

/** One work item; `canRetry`: its flow is active and this token may act. */
function itemView(token, item, open, canRetry) {
  // Its retry's wait runs: no attempt started since the last one ended.
  const waiting = item.next_retry_at && !item.completed_at && item.status !== "succeeded"
    && (item.attempts || []).at(-1)?.ended_at;
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
      waiting && canRetry ? h("button", { type: "button", class: "secondary", dataset: { retryNow: token },
        title: "Start its next attempt now instead of when its retry is due" }, "Retry now") : null,
      (item.children || []).map((c) => h("a", { href: `#/flow/${encodeURIComponent(c)}` }, `sub-flow ${c}`)),
      item.error ? h("span", { class: "error" }, item.error) : null),
    body);
  // The timeline is built when the item is opened: a for_each of 10,000
  // items costs one summary line each until then.
  const build = () => {
    if (body.childElementCount) return;
    fill(body,
      attemptsTable(item.attempts, "attempts", waiting ? item.next_retry_at : null),
      item.compensation && item.compensation.length
        ? [h("h5", {}, "Compensation"), attemptsTable(item.compensation, "compensation calls")] : null,
      facts([["retry state", item.retry_state], ["late results", (item.late_results || []).join(", ")],
        ["waited for health", item.deferred_ms ? ms(item.deferred_ms) : ""]]),
      Object.keys(item.inputs || {}).length ? json(item.inputs, "item inputs", `${token}:inputs`) : null,
      item.outputs ? json(item.outputs, "item outputs", `${token}:outputs`) : null,
      item.problem ? json(item.problem, "problem", `${token}:problem`) : null);
  };
  details.addEventListener("toggle", () => { if (details.open) build(); });
  if (open) build();
  return details;
}

function stepView(n, id, step, exec, words, view, childPlan) {
  const items = Object.entries(exec.work_items || {});
  items.sort((a, b) => (a[1].index ?? 0) - (b[1].index ?? 0) || a[0].localeCompare(b[0]));
  const counts = {};
  for (const [, it] of items) counts[it.status] = (counts[it.status] || 0) + 1;
  const shown = view.showAll.has(id) ? items : items.slice(0, ITEMS_SHOWN);
  // A step of a few items shows their timelines at once (unless closed);
  // a for_each's items open one by one.
  const few = items.length <= FEW_ITEMS;
  const isOpen = (t) => (few ? !view.closed.has(t) : view.opened.has(t));
  const heading = `step-h-${n}`;
  return h("section", { class: "step card", id: `step-${id}`, "aria-labelledby": heading },
    h("h3", { id: heading, tabindex: -1 }, badge(exec.status || "pending"), " ", id,
      step.name && step.name !== id ? h("span", { class: "muted" }, ` ${step.name}`) : null),
    facts([
      ["type", step.type],
      ["endpoint", step.http ? `${step.http.method || "POST"} ${step.http.endpoint}` : ""],
      ["retries", words],
      ["started", time(exec.started_at)],
      exec.status === "active" ? ["running for", between(exec.started_at, null)]
        : ["took", exec.started_at ? between(exec.started_at, exec.completed_at) : ""],
      ["items", Object.entries(counts).map(([s, c]) => `${c} ${s}`).join(", ")],
      ["error", exec.error],
      ["reason", exec.reason],
    ]),
    Object.keys(exec.inputs || {}).length ? json(exec.inputs, "inputs", `${id}:inputs`) : null,
    exec.outputs ? json(exec.outputs, "outputs", `${id}:outputs`) : null,
    childPlan ? h("details", { class: "subplan", dataset: { key: `${id}:subplan` } },
      h("summary", {}, `sub-flow plan (goals: ${(childPlan.goals || []).join(", ")})`),
      h("div", { class: "scroll" }, planGraph(childPlan, () => "pending", () => {}))) : null,
    h("div", { class: "items" }, shown.map(([t, it]) => itemView(t, it, isOpen(t), view.canRetry))),
    items.length > shown.length
      ? h("button", { type: "button", class: "secondary", dataset: { more: id } }, `Show all ${items.length} work items`)
      : null);
}

function eventLine(ev) {
  const d = ev.data || {};
  const what = [d.step_id, d.error || d.reason, d.next_retry_at ? `retry at ${time(d.next_retry_at)}` : "",
    d.http_status ? `HTTP ${d.http_status}` : "", d.attempt ? `attempt ${d.attempt}` : ""].filter(Boolean).join(" · ");
  const pre = h("pre");
  const details = h("details", {},
    h("summary", { "aria-label": `event ${ev.sequence}, ${ev.type}: ${what || "data"}` }, what || "data"), pre);
  details.addEventListener("toggle", () => {
    if (details.open && !pre.textContent) pre.textContent = JSON.stringify(d, null, 2);
  });
  return h("li", { class: `event t-${ev.type}` },
    h("span", { class: "seq num" }, ev.sequence),
    h("time", { datetime: ev.timestamp, title: time(ev.timestamp) }, clock(ev.timestamp)),
    h("code", {}, ev.type),
    details);
}

/** Cancel, retry and resume; their options live in `view`, so a redraw keeps them. */
function actions(flow, ctx, view, after) {
  const act = async (path, body, question, done) => {
    if (!confirm(question)) return;
    try {
      await api.post(path, body, ctx.signal);
      toast(done);
      after();
    } catch (e) {
      ctx.refused(e);
    }
  };
  const base = `/engine/flow/${api.seg(flow.id)}`;
  const compensate = h("input", { type: "checkbox", id: "a-comp", checked: view.compensate,
    onchange: (ev) => { view.compensate = ev.target.checked; } });
  const reset = h("input", { type: "checkbox", id: "a-reset", checked: view.reset,
    onchange: (ev) => { view.reset = ev.target.checked; } });
  const active = flow.status === "active";
  const retryable = flow.status === "failed" || flow.status === "cancelled";
  const parked = Object.values(flow.executions || {})
    .flatMap((e) => Object.values(e.work_items || {}))
    .filter((w) => w.status === "parked").length;
  const off = !ctx.canAct;
  return h("div", { class: "actions card", role: "group", "aria-label": "Actions" },
    h("div", {},
      h("button", { type: "button", class: "danger", disabled: off || !active,
        onclick: () => act(`${base}/cancel?compensate=${view.compensate}`, {},
          `Cancel flow ${flow.id}${view.compensate ? ", compensating what succeeded" : " without compensation"}?`,
          "Flow cancelled") }, "Cancel flow"),
      h("label", { class: "check", for: "a-comp" }, compensate, "compensate")),
    h("div", {},
      h("button", { type: "button", disabled: off || !retryable,
        onclick: () => act(`${base}/retry`, { reset_attempts: view.reset },
          `Retry flow ${flow.id}${view.reset ? ", counting attempts from 1 again" : ""}?`, "Flow retried") }, "Retry flow"),
      h("label", { class: "check", for: "a-reset" }, reset, "reset attempts")),
    h("div", {},
      h("button", { type: "button", disabled: off || !active || parked === 0,
        title: "Parked work items (their retries ran out under on_exhausted: park) run again",
        onclick: () => act(`${base}/resume`, { reset_attempts: view.reset },
          `Resume the ${parked} parked work item(s) of flow ${flow.id}${view.reset ? ", counting attempts from 1 again" : ""}?`,
          "Flow resumed") }, parked ? `Resume ${parked} parked` : "Resume parked")),
    off ? h("p", { class: "muted" }, ctx.access === "read" ? "Read-only token: actions are disabled." : "") : null);
}

export async function render(main, [id], ctx) {
  const base = `/engine/flow/${api.seg(id)}`;
  let flow = await api.get(base, ctx.signal);
  // Its place in its concurrency key's line while it waits for its turn
  // (docs/concurrency.md); none otherwise.
  let turn = null;
  async function readTurn() {
    turn = null;
    if (!flow.queued || flow.status !== "active") return;
    try {
      turn = await api.get(`${base}/turn`, ctx.signal);
    } catch (e) {
      if (e.name === "AbortError") throw e;
    }
  }
  await readTurn();
  const catalog = {};
  try {
    const steps = await api.get("/engine/step", ctx.signal);
    for (const s of steps.steps || []) catalog[s.id] = s;
  } catch (e) {
    if (e.name === "AbortError") return;
  }
  const head = h("div");
  const graph = h("div", { class: "graph card" });
  const timelineEl = h("div");
  const stepsEl = h("div", { class: "steps" });
  const log = h("ol", { class: "log" });
  const logMore = h("div");
  const liveEl = h("span", { class: "live" }, "not live");
  const events = [];
  // What the user chose, kept across redraws.
  const view = { opened: new Set(), closed: new Set(), showAll: new Set(), compensate: true, reset: true, logAll: false };

  stepsEl.addEventListener("toggle", (ev) => {
    const t = ev.target.dataset && ev.target.dataset.token;
    if (!t) return;
    if (ev.target.open) { view.opened.add(t); view.closed.delete(t); } else { view.opened.delete(t); view.closed.add(t); }
  }, true);
  stepsEl.addEventListener("click", async (ev) => {
    const more = ev.target.dataset && ev.target.dataset.more;
    if (more) { view.showAll.add(more); draw(); }
    const token = ev.target.dataset && ev.target.dataset.retryNow;
    if (!token) return;
    // A button in a summary would also open or close its item.
    ev.preventDefault();
    if (!confirm(`Start the next attempt of work item ${token.slice(0, 8)} now, instead of when its retry is due?`)) return;
    try {
      const done = await api.post(`${base}/work/${api.seg(token)}/retry`, {}, ctx.signal);
      toast(done.attempt ? `Attempt ${done.attempt} of ${done.step_id} started` : `Retry of ${done.step_id}: ${done.status}`);
      later();
    } catch (e) {
      ctx.refused(e);
    }
  });

  const pick = (stepId) => {
    const el = document.getElementById(`step-${stepId}`);
    if (!el) return;
    el.scrollIntoView({ behavior: "smooth", block: "start" });
    el.querySelector("h3").focus({ preventScroll: true });
  };

  function draw() {
    const keep = openKeys(main);
    const focused = document.activeElement && main.contains(document.activeElement) ? document.activeElement.id : "";
    const statusOf = (s) => (flow.executions?.[s]?.status) || "pending";
    const deadline = flow.deadline_at && flow.status === "active" ? countdown(h, flow.deadline_at, "deadline") : null;
    // A delayed start (docs/schedules.md): nothing runs before it.
    const starts = flow.starts_at && flow.status === "active" ? countdown(h, flow.starts_at, "starts") : null;
    const waits = flow.queued && flow.status === "active"
      ? h("span", { class: "badge s-queued", title: "No step starts until its concurrency key lets it in" },
        turn && turn.state === "waiting" ? `waiting for its turn: ${turn.place} of ${turn.waiting}` : "waiting for its turn")
      : null;
    const key = flow.concurrency
      ? `${flow.concurrency.key} (limit ${flow.concurrency.limit}${turn ? `; ${turn.running} running, ${turn.waiting} waiting` : ""})`
      : "";
    fill(head,
      h("div", { class: "title" }, h("h1", {}, "Flow ", h("code", {}, flow.id)), badge(flow.status), liveEl, waits, starts, deadline),
      facts([
        ["goals", (flow.plan?.goals || []).join(", ")],
        ["created", time(flow.created_at)],
        ["starts", flow.starts_at ? time(flow.starts_at) : ""],
        ["concurrency key", key],
        ["priority", flow.priority || ""],
        flow.status === "active" ? ["running for", between(flow.created_at, null)]
          : ["took", between(flow.created_at, flow.completed_at)],
        ["labels", Object.entries(flow.labels || {}).map(([k, v]) => `${k}=${v}`).join(", ")],
        ["parent", flow.metadata?.parent_flow_id
          ? h("a", { href: `#/flow/${encodeURIComponent(flow.metadata.parent_flow_id)}` }, flow.metadata.parent_flow_id) : ""],
        ["error", flow.error],
        ["attempt cap", flow.max_step_attempts],
      ]),
      actions(flow, ctx, view, restart),
      json(flow.attributes || {}, "attributes (inputs and outputs)", "attributes"));
    const plan = flow.plan || { steps: {} };
    fill(graph, h("h2", {}, "Plan"), h("div", { class: "scroll" }, planGraph(plan, statusOf, pick)));
    view.canRetry = ctx.canAct && flow.status === "active";
    // Steps (and so the items waiting) in the plan's order: its layers.
    const order = layers(plan).columns.flat();
    fill(timelineEl, timeline(flow, order));
    fill(stepsEl, h("h2", {}, "Steps"), order.map((s, n) => stepView(n, s, plan.steps[s] || {},
      flow.executions?.[s] || {}, catalog[s]?.effective_retry?.in_words, view, plan.children?.[s])));
    reopen(main, keep);
    if (focused) document.getElementById(focused)?.focus({ preventScroll: true });
  }

  // The log grows by appending; only "Show all" draws it whole.
  let drawn = 0;
  function drawLog() {
    if (view.logAll && log.childElementCount < drawn) fill(log, events.slice(0, drawn).map(eventLine));
    const start = view.logAll ? drawn : Math.max(drawn, events.length - LOG_SHOWN);
    log.append(...events.slice(start).map(eventLine));
    drawn = events.length;
    if (!view.logAll) while (log.childElementCount > LOG_SHOWN) log.firstElementChild.remove();
    fill(logMore, !view.logAll && events.length > LOG_SHOWN
      ? h("button", { type: "button", class: "secondary", onclick: () => { view.logAll = true; drawLog(); } },
        `Show all ${events.length} events`)
      : null);
  }

  // Reads of the state may answer out of order: only the latest is drawn,
  // and none after the stream's final state.
  let pending = null;
  let reads = 0;
  let logFrame = 0;
  async function refresh() {
    const mine = ++reads;
    try {
      const answer = await api.get(base, ctx.signal);
      if (mine !== reads) return;
      flow = answer;
      await readTurn();
      if (mine !== reads) return;
      draw();
    } catch (e) {
      ctx.refused(e);
    }
  }
  const later = () => {
    if (!pending) pending = setTimeout(() => { pending = null; refresh(); }, 250);
  };
  // A place in a line moves as other flows end, which this flow's events
  // do not tell: read it again every few seconds while it waits.
  let turnTimer = 0;
  const watchTurn = () => {
    clearTimeout(turnTimer);
    if (flow.queued && flow.status === "active") turnTimer = setTimeout(() => { refresh().then(watchTurn); }, 3000);
  };
  // After a retry the flow runs again, and its stream must start again.
  function restart() {
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  }

  fill(main, head, graph, timelineEl, stepsEl,
    h("section", { class: "card", "aria-labelledby": "events-h" }, h("h2", { id: "events-h" }, "Events"), log, logMore));
  draw();
  watchTurn();
  ctx.signal.addEventListener("abort", () => { clearTimeout(pending); clearTimeout(turnTimer); cancelAnimationFrame(logFrame); });
  const known = new Date(flow.last_updated || 0).getTime();
  api.stream(`${base}/stream`, (m) => {
    if (m.event === "state") {
      clearTimeout(pending);
      pending = null;
      reads += 1;
      flow = m.data;
      liveOn(liveEl, false);
      liveEl.textContent = "final";
      draw();
      return;
    }
    events.push(m.data);
    // A flow's history arrives as a burst: draw once per frame, not per event.
    if (!logFrame) logFrame = requestAnimationFrame(() => { logFrame = 0; drawLog(); });
    // The history up to the state already drawn changes nothing.
    if (new Date(m.data.timestamp).getTime() > known) later();
  }, ctx.signal, () => liveOn(liveEl, true), () => liveOn(liveEl, false)).catch(ctx.refused);
}
