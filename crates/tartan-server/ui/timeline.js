// A flow's timeline (a waterfall): one row per work item, in the plan's
// order, its attempts as bars and the waits between them as hatched bars,
// on one time axis from the flow's start to its end (or now, while it
// runs). Drawn again with the flow: live while the page is.

import { h } from "./dom.js";
import { ms } from "./format.js";

/** Rows drawn before "… more": a for_each of 10,000 items is a list. */
const ROWS_SHOWN = 40;

const at = (t) => (t ? new Date(t).getTime() : NaN);

/** The spans of one item: its attempts and the waits after them. */
export function spans(item, now) {
  const out = [];
  const attempts = item.attempts || [];
  attempts.forEach((a, i) => {
    const start = at(a.started_at);
    if (Number.isNaN(start)) return;
    const end = Number.isNaN(at(a.ended_at)) ? now : at(a.ended_at);
    out.push({ kind: "attempt", start, end, outcome: a.outcome || "running",
      label: `attempt ${a.number}: ${a.outcome || "running"}${a.http_status ? ` (HTTP ${a.http_status})` : ""}, ${ms(end - start)}` });
    const next = attempts[i + 1];
    const waitEnd = next ? at(next.started_at)
      : item.next_retry_at && !item.completed_at ? Math.min(at(item.next_retry_at), now) : NaN;
    if (!Number.isNaN(at(a.ended_at)) && !Number.isNaN(waitEnd) && waitEnd > end) {
      out.push({ kind: "wait", start: end, end: waitEnd, outcome: "wait",
        label: `${next ? "waited" : "waiting"} ${ms(waitEnd - end)} before attempt ${a.number + 1}` });
    }
  });
  return out;
}

/** The timeline of `flow`, its steps in `order`. */
export function timeline(flow, order, now = Date.now()) {
  const t0 = at(flow.created_at);
  const ended = at(flow.completed_at);
  const rows = [];
  for (const step of order) {
    const items = Object.entries(flow.executions?.[step]?.work_items || {});
    items.sort((a, b) => (a[1].index ?? 0) - (b[1].index ?? 0) || a[0].localeCompare(b[0]));
    for (const [token, item] of items) {
      rows.push({ label: items.length > 1 ? `${step}[${item.index ?? token.slice(0, 8)}]` : step, spans: spans(item, now) });
    }
  }
  const last = rows.flatMap((r) => r.spans.map((s) => s.end));
  const t1 = Math.max(Number.isNaN(ended) ? now : ended, ...last, t0 + 1);
  const pct = (t) => `${(((t - t0) / (t1 - t0)) * 100).toFixed(3)}%`;
  const shown = rows.slice(0, ROWS_SHOWN);
  return h("section", { class: "card timeline", "aria-labelledby": "timeline-h" },
    h("h2", { id: "timeline-h" }, "Timeline"),
    h("p", { class: "muted" }, `${ms(t1 - t0)} from the flow's start${Number.isNaN(ended) ? " to now" : " to its end"}; `,
      h("span", { class: "tl-key tl-attempt o-success" }), " attempts, ",
      h("span", { class: "tl-key tl-wait" }), " waits before a retry."),
    rows.length ? h("ol", { class: "tl-rows" }, shown.map((r) => h("li", { class: "tl-row" },
      h("span", { class: "tl-label" }, r.label),
      h("span", { class: "tl-track" }, r.spans.map((s) => {
        const bar = h("span", { class: `tl-${s.kind} o-${s.outcome}`, title: s.label }, h("span", { class: "sr" }, s.label));
        // Through the CSSOM: the page's CSP refuses style attributes.
        bar.style.left = pct(s.start);
        bar.style.width = pct(t0 + (s.end - s.start));
        return bar;
      })))))
      : h("p", { class: "muted" }, "No step has started yet."),
    rows.length > shown.length ? h("p", { class: "muted" }, `${rows.length - shown.length} more work items: see each step below.`) : null);
}
