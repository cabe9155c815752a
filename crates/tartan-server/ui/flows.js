// Flows: a filtered, paged list (cursor paging: each page is one indexed
// read however many flows there are), kept live by the global event
// stream, and bulk retry or cancel of what the filter matches.

import * as api from "./api.js";
import { h, fill, badge, liveOn, toast } from "./dom.js";
import { between, relative } from "./format.js";

const STATUSES = ["active", "completed", "failed", "cancelled"];
const CLASSES = ["retryable", "permanent", "timeout", "cancelled", "abandoned"];
const LIVE_TYPES = "flow_started,flow_completed,flow_failed,flow_cancelled,flow_retried,step_started,step_completed,step_failed";

/** The filter as the URL holds it (`#/flows?status=failed&step=charge`). */
function readFilter(query) {
  const p = new URLSearchParams(query || "");
  return {
    statuses: p.getAll("status").filter((s) => STATUSES.includes(s)),
    id_prefix: p.get("prefix") || "",
    label: p.get("label") || "",
    failed_step: p.get("step") || "",
    error_class: p.get("class") || "",
    created_after: p.get("after") || "",
    created_before: p.get("before") || "",
  };
}

function writeFilter(f) {
  const p = new URLSearchParams();
  for (const s of f.statuses) p.append("status", s);
  const pairs = [["prefix", f.id_prefix], ["label", f.label], ["step", f.failed_step],
    ["class", f.error_class], ["after", f.created_after], ["before", f.created_before]];
  for (const [k, v] of pairs) if (v) p.set(k, v);
  const q = p.toString();
  return q ? `#/flows?${q}` : "#/flows";
}

/** The body of `POST /engine/flow/query` (and of a bulk filter). */
function criteria(f) {
  const c = {};
  if (f.statuses.length) c.statuses = f.statuses;
  if (f.id_prefix) c.id_prefix = f.id_prefix;
  if (f.label) {
    const cut = f.label.indexOf("=");
    if (cut > 0) c.labels = { [f.label.slice(0, cut).trim()]: f.label.slice(cut + 1).trim() };
  }
  if (f.failed_step) c.failed_step = f.failed_step;
  if (f.error_class) c.error_class = f.error_class;
  if (f.created_after) c.created_after = new Date(f.created_after).toISOString();
  if (f.created_before) c.created_before = new Date(f.created_before).toISOString();
  return c;
}

function field(id, label, input) {
  input.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), input);
}

function filterForm(f) {
  const statusBoxes = STATUSES.map((s) => h("label", { class: "check" },
    h("input", { type: "checkbox", name: "status", value: s, checked: f.statuses.includes(s) }), s));
  const classSelect = h("select", {},
    h("option", { value: "" }, "any"),
    CLASSES.map((c) => h("option", { value: c, selected: f.error_class === c }, c)));
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter flows" },
    h("fieldset", { class: "statuses" }, h("legend", {}, "Status"), statusBoxes),
    field("f-prefix", "Id prefix", h("input", { name: "prefix", value: f.id_prefix, placeholder: "order-" })),
    field("f-label", "Label (key=value)", h("input", { name: "label", value: f.label, placeholder: "team=web",
      pattern: "[^=]+=.*", title: "key=value" })),
    field("f-step", "Failed step", h("input", { name: "step", value: f.failed_step })),
    field("f-class", "Error class", classSelect),
    field("f-after", "Created after", h("input", { type: "datetime-local", name: "after", value: f.created_after, step: 1 })),
    field("f-before", "Created before", h("input", { type: "datetime-local", name: "before", value: f.created_before, step: 1 })),
    h("div", { class: "buttons" },
      h("button", { type: "submit" }, "Filter"),
      h("a", { href: "#/flows", class: "button secondary" }, "Clear")));
  classSelect.name = "class";
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const data = new FormData(form);
    location.hash = writeFilter({
      statuses: data.getAll("status"),
      id_prefix: data.get("prefix").trim(),
      label: data.get("label").trim(),
      failed_step: data.get("step").trim(),
      error_class: data.get("class"),
      created_after: data.get("after"),
      created_before: data.get("before"),
    });
  });
  return form;
}

function searchForm() {
  const input = h("input", { id: "f-id", name: "id", placeholder: "flow id", required: true });
  const form = h("form", { class: "search", role: "search", "aria-label": "Open a flow by id" },
    h("label", { for: "f-id" }, "Open flow"), input, h("button", { type: "submit" }, "Open"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = `#/flow/${encodeURIComponent(input.value.trim())}`;
  });
  return form;
}

function row(flow) {
  const over = flow.status !== "active";
  return h("tr", {},
    h("td", {}, h("a", { href: `#/flow/${encodeURIComponent(flow.id)}` }, flow.id)),
    h("td", {}, badge(flow.status)),
    h("td", {}, (flow.goals || []).join(", ")),
    h("td", {}, (flow.running_steps || []).join(", ")),
    h("td", { class: "bad" }, (flow.failed_steps || []).join(", ")),
    h("td", {}, h("time", { class: "age", datetime: flow.timestamp, title: flow.timestamp }, relative(flow.timestamp))),
    h("td", { class: "num" }, between(flow.timestamp, over ? (flow.completed_at || flow.last_updated) : null)),
    h("td", { class: "error" }, flow.error || ""));
}

async function bulkAction(kind, filter, ctx) {
  const body = kind === "retry"
    ? { filter: criteria(filter), reset_attempts: true }
    : { filter: criteria(filter), compensate: true };
  try {
    const dry = await api.post(`/engine/bulk/${kind}`, { ...body, dry_run: true }, ctx.signal);
    const verb = kind === "retry" ? "Retry" : "Cancel";
    if (!confirm(`${verb} ${dry.matched} flow(s) matching this filter, as a bulk job?`)) return;
    const job = await api.post(`/engine/bulk/${kind}`, body, ctx.signal);
    toast(`Bulk ${kind} job ${job.id} created for ${job.total} flow(s)`);
    location.hash = "#/bulk";
  } catch (e) {
    ctx.refused(e);
  }
}

export async function render(main, [query], ctx) {
  const filter = readFilter(query);
  const body = h("tbody");
  const status = h("p", { class: "muted" });
  const pager = h("div", { class: "pager" });
  const live = h("span", { class: "live" }, "not live");
  const bulk = h("div", { class: "buttons" },
    h("button", { type: "button", class: "secondary", disabled: !ctx.canAct,
      onclick: () => bulkAction("retry", filter, ctx) }, "Retry matching…"),
    h("button", { type: "button", class: "secondary danger", disabled: !ctx.canAct,
      onclick: () => bulkAction("cancel", filter, ctx) }, "Cancel matching…"));
  fill(main,
    h("div", { class: "title" }, h("h1", {}, "Flows"), live, searchForm()),
    filterForm(filter),
    h("div", { class: "table-wrap" },
      h("table", { class: "list" },
        h("caption", { class: "sr" }, "Flows, newest first"),
        h("thead", {}, h("tr", {}, ["Flow", "Status", "Goals", "Running", "Failed step", "Created", "Duration", "Error"]
          .map((c) => h("th", { scope: "col" }, c)))),
        body)),
    status, pager, bulk);

  const cursors = [""];
  let page = 0;
  let loads = 0;
  const go = (to) => { page = to; load().catch(ctx.refused); };
  const newest = h("button", { type: "button", class: "secondary", onclick: () => go(0) }, "Newest");
  const newer = h("button", { type: "button", class: "secondary", onclick: () => go(page - 1) }, "← Newer");
  const older = h("button", { type: "button", class: "secondary", onclick: () => go(page + 1) }, "Older →");
  fill(pager, newest, newer, older);
  async function load() {
    // Answers may come back out of order (a double click, a live reload
    // of the first page): only the latest request's answer is shown.
    const mine = ++loads;
    const at = page;
    const q = { ...criteria(filter), limit: 50, sort: "recent_desc", total: false };
    if (cursors[at]) q.cursor = cursors[at];
    const res = await api.post("/engine/flow/query", q, ctx.signal);
    if (mine !== loads) return;
    fill(body, res.flows.length ? res.flows.map(row)
      : h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No flows match.")));
    cursors[at + 1] = res.next_cursor || null;
    fill(status, `Page ${at + 1}: ${res.count} flow(s)${res.has_more ? ", more older" : ""}.`);
    newest.disabled = at === 0;
    newer.disabled = at === 0;
    older.disabled = !res.has_more;
  }
  await load();

  // Live: the first page is read again at most once a second while events
  // of flows come; a later page stays still, as a reader paging expects.
  let pending = null;
  const path = `/engine/events/stream?type=${LIVE_TYPES}` +
    (filter.id_prefix ? `&flow_prefix=${encodeURIComponent(filter.id_prefix)}` : "");
  api.stream(path, () => {
    if (page !== 0 || pending) return;
    pending = setTimeout(() => { pending = null; load().catch(ctx.refused); }, 1000);
  }, ctx.signal, () => liveOn(live, true), () => liveOn(live, false)).catch(ctx.refused);
  ctx.signal.addEventListener("abort", () => clearTimeout(pending));
}
