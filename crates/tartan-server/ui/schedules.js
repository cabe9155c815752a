// Schedules (docs/schedules.md): when each fires next, its last fire and
// that fire's flow, its latest fires on demand; pause, resume and fire now.
// Read again every five seconds while the page is open: fires have no
// stream of their own.

import * as api from "./api.js";
import { h, fill, badge, toast } from "./dom.js";
import { countdown, relative, time } from "./format.js";

function when(spec) {
  if (spec.cron) return `cron ${spec.cron}${spec.timezone ? ` (${spec.timezone})` : ""}`;
  if (spec.every !== undefined) return `every ${typeof spec.every === "string" ? spec.every : JSON.stringify(spec.every)}`;
  if (spec.at) return `at ${time(spec.at)}`;
  return "";
}

function flowLink(id) {
  return h("a", { href: `#/flow/${encodeURIComponent(id)}` }, h("code", {}, id));
}

// The latest fires of one schedule, read when its row is opened.
function history(s, ctx) {
  const list = h("tbody");
  const details = h("details", { class: "fires" },
    h("summary", {}, "Latest fires"),
    h("table", { class: "list" },
      h("caption", { class: "sr" }, `Latest fires of ${s.id}`),
      h("thead", {}, h("tr", {}, ["Fire", "Outcome", "Flow", "Why", "Made"].map((c) => h("th", { scope: "col" }, c)))),
      list));
  details.addEventListener("toggle", async () => {
    if (!details.open) return;
    try {
      const one = await api.get(`/engine/schedule/${api.seg(s.id)}`, ctx.signal);
      fill(list, (one.fires || []).length ? one.fires.map((f) => h("tr", {},
        h("td", {}, time(f.at)),
        h("td", {}, badge(f.outcome)),
        h("td", {}, f.flow_id ? flowLink(f.flow_id) : ""),
        h("td", {}, f.detail || ""),
        h("td", {}, h("time", { class: "age", datetime: f.made_at }, relative(f.made_at)))))
        : h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No fire yet.")));
    } catch (e) { ctx.refused(e); }
  });
  return details;
}

function action(label, path, s, ctx, reload, done, ask) {
  return h("button", { type: "button", class: "secondary", disabled: !ctx.canAct,
    onclick: async () => {
      if (!confirm(ask)) return;
      try {
        const answer = await api.post(`/engine/schedule/${api.seg(s.id)}/${path}`, {}, ctx.signal);
        toast(done(answer));
        reload();
      } catch (e) { ctx.refused(e); }
    } }, label);
}

function row(s, ctx, reload) {
  const last = s.last;
  return h("tr", { id: `schedule-${s.id}` },
    h("td", {}, h("code", {}, s.id), history(s, ctx)),
    h("td", {}, when(s.spec)),
    h("td", {}, s.paused ? badge("paused")
      : s.next.length ? [time(s.next[0]), " ", countdown(h, s.next[0], "fires")] : h("span", { class: "muted" }, "no more fires")),
    h("td", {}, last ? [badge(last.outcome), " ", h("time", { class: "age", datetime: last.at }, relative(last.at))] : h("span", { class: "muted" }, "none yet")),
    h("td", {}, last && last.flow_id ? [flowLink(last.flow_id), " ", badge(last.flow_status || "deleted")] : ""),
    h("td", {},
      s.paused ? action("Resume", "resume", s, ctx, reload, () => `Resumed ${s.id}`,
        `Resume schedule ${s.id}? It fires from its next time; the times passed while paused are not made up for.`)
        : action("Pause", "pause", s, ctx, reload, () => `Paused ${s.id}`, `Pause schedule ${s.id} in every engine?`),
      " ",
      action("Fire now", "trigger", s, ctx, reload, (a) => `${s.id}: ${a.outcome}${a.flow_id ? ` (${a.flow_id})` : ""}`,
        `Fire schedule ${s.id} now? Its overlap rule applies.`)));
}

export async function render(main, _params, ctx) {
  const body = h("tbody");
  fill(main,
    h("div", { class: "title" }, h("h1", {}, "Schedules")),
    h("p", { class: "muted" }, "Flows started on a clock. Make one with POST /engine/schedule or tartan schedule apply."),
    h("div", { class: "table-wrap" }, h("table", { class: "list" },
      h("caption", { class: "sr" }, "Schedules, by id"),
      h("thead", {}, h("tr", {}, ["Schedule", "When", "Next fire", "Last fire", "Its flow", ""]
        .map((c) => h("th", { scope: "col" }, c)))),
      body)));
  async function load() {
    const res = await api.get("/engine/schedule", ctx.signal);
    // Keep open histories open across a reload.
    const open = new Set([...body.querySelectorAll("details[open]")].map((d) => d.closest("tr")?.id));
    fill(body, res.schedules.length ? res.schedules.map((s) => row(s, ctx, load))
      : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No schedules.")));
    for (const id of open) {
      const d = id && document.getElementById(id)?.querySelector("details");
      if (d) d.open = true;
    }
  }
  await api.every(5000, load, ctx);
}
