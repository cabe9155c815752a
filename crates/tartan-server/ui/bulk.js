// Bulk jobs: each job's filter and progress, read again every two seconds
// while one is still queued or running (a job has no stream of its own).

import * as api from "./api.js";
import { h, fill, badge, toast } from "./dom.js";
import { between, relative } from "./format.js";

function progress(job) {
  const done = job.done + job.skipped + job.failed;
  return h("progress", { max: Math.max(job.total, 1), value: done, "aria-label": `${done} of ${job.total} flows` });
}

function row(job, ctx, reload) {
  const unfinished = job.status === "queued" || job.status === "running";
  return h("tr", {},
    h("td", {}, h("code", {}, job.id)),
    h("td", {}, job.kind),
    h("td", {}, badge(job.status)),
    h("td", {}, progress(job), ` ${job.done + job.skipped + job.failed} / ${job.total}`),
    h("td", { class: "num" }, `${job.done} done, ${job.skipped} skipped, ${job.failed} failed`),
    h("td", {}, h("code", {}, JSON.stringify(job.filter))),
    h("td", {}, h("time", { class: "age", datetime: job.created_at }, relative(job.created_at))),
    h("td", { class: "num" }, job.started_at ? between(job.started_at, job.finished_at) : ""),
    h("td", {}, unfinished ? h("button", { type: "button", class: "secondary danger", disabled: !ctx.canAct,
      onclick: async () => {
        if (!confirm(`Stop bulk job ${job.id}? It acts on no more flows.`)) return;
        try { await api.post(`/engine/bulk/${api.seg(job.id)}/cancel`, {}, ctx.signal); toast("Job stopped"); reload(); } catch (e) { ctx.refused(e); }
      } }, "Stop") : null));
}

export async function render(main, _params, ctx) {
  const body = h("tbody");
  fill(main,
    h("div", { class: "title" }, h("h1", {}, "Bulk jobs")),
    h("p", { class: "muted" }, "Start one from the Flows page: filter, then “Retry matching…” or “Cancel matching…”."),
    h("div", { class: "table-wrap" }, h("table", { class: "list" },
      h("caption", { class: "sr" }, "Bulk jobs, newest first"),
      h("thead", {}, h("tr", {}, ["Job", "Kind", "Status", "Progress", "Flows", "Filter", "Created", "Ran for", ""]
        .map((c) => h("th", { scope: "col" }, c)))),
      body)));
  let timer = null;
  let busy = false;
  async function load() {
    const res = await api.get("/engine/bulk?limit=100", ctx.signal);
    fill(body, res.jobs.length ? res.jobs.map((j) => row(j, ctx, load))
      : h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No bulk jobs.")));
    busy = res.jobs.some((j) => j.status === "queued" || j.status === "running");
  }
  // Read again while a job is unfinished, whether the last read worked or not.
  async function poll() {
    try {
      await load();
    } catch (e) {
      ctx.refused(e);
    }
    if (busy && !ctx.signal.aborted) timer = setTimeout(poll, 2000);
  }
  ctx.signal.addEventListener("abort", () => clearTimeout(timer));
  await load();
  if (busy) timer = setTimeout(poll, 2000);
}
