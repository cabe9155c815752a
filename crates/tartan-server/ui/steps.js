// Steps: the catalog, each step's retry and timeout policy in words (as
// the engine words it, `effective_retry.in_words`), its endpoint and its
// health on each engine; and a plan preview for chosen goals, from which a
// flow can be started with a form of the plan's required inputs.

import * as api from "./api.js";
import { h, fill, badge, facts, toast } from "./dom.js";
import { ms } from "./format.js";
import { planGraph } from "./graph.js";

function timeoutWords(t) {
  if (!t) return "";
  const parts = [];
  if (t.attempt) parts.push(`each attempt ${ms(t.attempt)}`);
  if (t.inactivity) parts.push(`inactive ${ms(t.inactivity)}`);
  if (t.total) parts.push(`in all ${ms(t.total)}`);
  if (!parts.length) return "the engine's default attempt timeout";
  return `${parts.join(", ")}; on timeout: ${t.on_timeout || "error"}`;
}

function healthOf(id, nodes) {
  return Object.entries(nodes || {}).map(([node, n]) => {
    const hl = n.health?.[id];
    if (!hl) return null;
    return h("span", { class: "health" }, badge(hl.status), ` ${node}`, hl.error ? h("span", { class: "error" }, ` ${hl.error}`) : null);
  }).filter(Boolean);
}

function stepCard(step, nodes, n) {
  const attrs = Object.entries(step.attributes || {});
  const role = (r) => attrs.filter(([, a]) => a.role === r).map(([n]) => n).join(", ");
  return h("section", { class: "card step", id: `step-${step.id}`, "aria-labelledby": `h-${n}` },
    h("h2", { id: `h-${n}` }, step.id, step.name && step.name !== step.id ? h("span", { class: "muted" }, ` ${step.name}`) : null),
    facts([
      ["type", step.type],
      ["endpoint", step.http ? `${step.http.method || "POST"} ${step.http.endpoint}` : ""],
      ["needs", role("required")],
      ["may use", role("optional")],
      ["gives", role("output")],
      ["retries", step.effective_retry?.in_words],
      ["classes", Object.entries(step.http?.classify || {}).map(([k, v]) => `${k}: ${v}`).join(", ")],
      ["timeouts", timeoutWords(step.effective_timeouts)],
      ["parallelism", step.work_config?.parallelism],
      ["health", step.http?.health_check ? healthOf(step.id, nodes) : "no health check"],
      ["labels", Object.entries(step.labels || {}).map(([k, v]) => `${k}=${v}`).join(", ")],
    ]));
}

/** A value typed in a start form: JSON when it parses, else the text. */
function value(text) {
  try { return JSON.parse(text); } catch { return text; }
}

function preview(steps, ctx) {
  const boxes = steps.map((s) => h("label", { class: "check" },
    h("input", { type: "checkbox", name: "goal", value: s.id }), s.id));
  const out = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "card" },
    h("h2", {}, "Plan preview"),
    h("fieldset", {}, h("legend", {}, "Goals"), boxes),
    h("button", { type: "submit" }, "Preview plan"), out);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const goals = new FormData(form).getAll("goal");
    if (!goals.length) { fill(out, h("p", { class: "problem" }, "Choose at least one goal.")); return; }
    try {
      const plan = await api.post("/engine/plan", { goals }, ctx.signal);
      fill(out,
        h("div", { class: "scroll" }, planGraph(plan, () => "pending", (id) => {
          document.getElementById(`step-${id}`)?.scrollIntoView({ behavior: "smooth" });
        })),
        facts([["steps", Object.keys(plan.steps || {}).join(", ")], ["required inputs", (plan.required || []).join(", ")]]),
        startForm(goals, plan.required || [], ctx));
    } catch (e) {
      fill(out, h("p", { class: "problem", role: "alert" }, e.message));
    }
  });
  return form;
}

function startForm(goals, required, ctx) {
  const id = h("input", { id: "s-id", name: "id", required: true, value: `flow-${Date.now().toString(36)}` });
  const inputs = required.map((name, i) => h("div", { class: "field" },
    h("label", { for: `s-in-${i}` }, name),
    h("input", { id: `s-in-${i}`, name: `in:${name}`, required: true, placeholder: "text or JSON" })));
  const form = h("form", { class: "start" },
    h("h3", {}, "Start a flow"),
    h("div", { class: "field" }, h("label", { for: "s-id" }, "Flow id"), id),
    inputs,
    h("button", { type: "submit", disabled: !ctx.canAct }, "Start flow"),
    ctx.canAct ? null : h("p", { class: "muted" }, "Read-only token: starting is disabled."));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const init = {};
    for (const [k, v] of new FormData(form)) if (k.startsWith("in:")) init[k.slice(3)] = [value(v)];
    if (!confirm(`Start flow ${id.value} for ${goals.join(", ")}?`)) return;
    try {
      const res = await api.post("/engine/flow", { id: id.value.trim(), goals, init }, ctx.signal);
      toast(`Flow ${res.flow_id} started`);
      location.hash = `#/flow/${encodeURIComponent(res.flow_id)}`;
    } catch (e) {
      ctx.refused(e);
    }
  });
  return form;
}

export async function render(main, [focus], ctx) {
  const [list, health] = await Promise.all([
    api.get("/engine/step", ctx.signal),
    api.get("/engine/health", ctx.signal).catch(() => ({ nodes: {} })),
  ]);
  const steps = (list.steps || []).slice().sort((a, b) => a.id.localeCompare(b.id));
  fill(main,
    h("div", { class: "title" }, h("h1", {}, "Steps"), h("span", { class: "muted" }, `${steps.length} registered`)),
    steps.length ? preview(steps, ctx) : h("p", { class: "muted" }, "No steps are registered yet (POST /engine/step)."),
    steps.map((s, n) => stepCard(s, health.nodes, n)));
  if (focus) document.getElementById(`step-${focus}`)?.scrollIntoView();
}
