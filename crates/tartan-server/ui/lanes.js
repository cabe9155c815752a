// Lanes (docs/lanes.md): each lane's limits, the slots the engines hold
// and want, its pause and breaker, and its calls in this engine; pause
// (for a while, or until resumed) and resume. Read again every five
// seconds while the page is open: lanes have no stream of their own.

import * as api from "./api.js";
import { h, fill, badge, toast } from "./dom.js";
import { countdown, ms } from "./format.js";

/** A lane's limits in words: `concurrency 4, rate 10/s (burst 10), breaker after 5 failures, 30 s cool-down`. */
export function limitWords(limits) {
  const out = [];
  if (limits.concurrency !== undefined) out.push(`concurrency ${limits.concurrency}`);
  if (limits.rate !== undefined) out.push(`rate ${limits.rate} (burst ${limits.burst})`);
  if (limits.breaker) out.push(`breaker after ${limits.breaker.failures} failures, ${ms(limits.breaker.cool_down)} cool-down`);
  return out.join(", ") || "no limit";
}

function state(l) {
  const out = [];
  if (l.paused) {
    out.push(badge("paused"), " ",
      l.paused_until ? countdown(h, l.paused_until, "resumes") : h("span", {}, "until resumed"));
    if (l.pause_reason) out.push(h("div", { class: "muted" }, l.pause_reason));
  }
  if (l.breaker) {
    out.push(h("div", {}, badge(`breaker ${l.breaker.state.replace("_", " ")}`),
      l.breaker.failures ? ` ${l.breaker.failures} failure(s) in a row` : "",
      l.breaker.until && l.breaker.state === "open" ? [" ", countdown(h, l.breaker.until, "half-open")] : null));
  }
  return out.length ? out : badge("open");
}

function here(l) {
  if (!l.here) return h("span", { class: "muted" }, "no call here yet");
  const w = l.here;
  return `${w.in_flight} in flight, ${w.waiting} waiting${w.waiting_ms ? ` (oldest ${ms(w.waiting_ms)})` : ""}`;
}

async function act(path, body, ctx, reload, done) {
  try {
    await api.post(`/engine/lanes/${api.seg(path[0])}/${path[1]}`, body, ctx.signal);
    toast(done);
    reload();
  } catch (e) { ctx.refused(e); }
}

function actions(l, ctx, reload) {
  const pause = h("button", { type: "button", class: "secondary", disabled: !ctx.canAct,
    onclick: () => {
      const answer = prompt(`Pause lane ${l.id} in every engine for how long? (e.g. 30s, 5m; empty: until resumed)`, "");
      if (answer === null) return;
      const body = answer.trim() ? { for: answer.trim() } : {};
      act([l.id, "pause"], body, ctx, reload, `Paused ${l.id}${answer.trim() ? ` for ${answer.trim()}` : " until resumed"}`);
    } }, "Pause");
  const resume = h("button", { type: "button", class: "secondary", disabled: !ctx.canAct,
    onclick: () => {
      if (!confirm(`Resume lane ${l.id} in every engine? Its pause ends and its breaker closes.`)) return;
      act([l.id, "resume"], {}, ctx, reload, `Resumed ${l.id}`);
    } }, "Resume");
  const broken = l.breaker && l.breaker.state !== "closed";
  return [l.paused ? null : pause, " ", l.paused || broken ? resume : null];
}

function row(l, ctx, reload) {
  return h("tr", { id: `lane-${l.id}` },
    h("td", {}, h("code", {}, l.id)),
    h("td", {}, limitWords(l.limits || {})),
    h("td", { class: "num" }, l.limits && l.limits.concurrency !== undefined ? `${l.slots_held} / ${l.slots_wanted}` : ""),
    h("td", {}, state(l)),
    h("td", {}, here(l)),
    h("td", {}, actions(l, ctx, reload)));
}

export async function render(main, _params, ctx) {
  const body = h("tbody");
  fill(main,
    h("div", { class: "title" }, h("h1", {}, "Lanes")),
    h("p", { class: "muted" }, "Limits that the calls of a step or a host share across flows and engines (docs/lanes.md): " +
      "a step's limits, or TARTAN_LANES for a host. Slots: held by the engines / wanted by their calls."),
    h("div", { class: "table-wrap" }, h("table", { class: "list" },
      h("caption", { class: "sr" }, "Lanes, by id"),
      h("thead", {}, h("tr", {}, ["Lane", "Limits", "Slots", "State", "In this engine", ""]
        .map((c) => h("th", { scope: "col" }, c)))),
      body)));
  async function load() {
    const res = await api.get("/engine/lanes", ctx.signal);
    fill(body, res.lanes.length ? res.lanes.map((l) => row(l, ctx, load))
      : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No lanes: no step declares limits and TARTAN_LANES is unset.")));
  }
  await api.every(5000, load, ctx);
}
