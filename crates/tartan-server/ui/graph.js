// The plan as a graph: steps are nodes, an attribute one step provides and
// another consumes is an edge, laid out in layers (a step sits one layer
// right of the furthest step it needs). Written here rather than vendored:
// plans are small DAGs, and a layered layout of one is forty lines.

import { svg } from "./dom.js";

const W = 168, H = 46, GX = 64, GY = 18;

/** Layers of the plan's steps: each step one right of its furthest provider. */
export function layers(plan) {
  const ids = Object.keys(plan.steps || {}).sort();
  const needs = new Map(ids.map((id) => [id, new Set()]));
  const edges = [];
  for (const [name, attr] of Object.entries(plan.attributes || {})) {
    for (const from of attr.providers || []) {
      for (const to of attr.consumers || []) {
        if (needs.has(from) && needs.has(to) && from !== to) {
          needs.get(to).add(from);
          edges.push({ from, to, name });
        }
      }
    }
  }
  const depth = new Map();
  const visiting = new Set();
  const depthOf = (id) => {
    if (depth.has(id)) return depth.get(id);
    if (visiting.has(id)) return 0; // a cycle cannot be planned; draw it anyway
    visiting.add(id);
    let d = 0;
    for (const p of needs.get(id)) d = Math.max(d, depthOf(p) + 1);
    visiting.delete(id);
    depth.set(id, d);
    return d;
  };
  const columns = [];
  for (const id of ids) (columns[depthOf(id)] ||= []).push(id);
  return { columns: columns.map((c) => c || []), edges };
}

/**
 * An SVG of the plan; `statusOf(id)` colours each node, `onPick(id)` is
 * called when a node is chosen (click, or Enter on the focused node).
 */
export function planGraph(plan, statusOf, onPick) {
  const { columns, edges } = layers(plan);
  const pos = new Map();
  columns.forEach((col, x) => col.forEach((id, y) => pos.set(id, { x: x * (W + GX), y: y * (H + GY) })));
  const width = Math.max(1, columns.length) * (W + GX) - GX + 2;
  const height = Math.max(1, ...columns.map((c) => c.length)) * (H + GY) - GY + 2;
  const goals = new Set(plan.goals || []);
  const root = svg("svg", {
    class: "plan", viewBox: `-1 -1 ${width} ${height}`, width, height, role: "group",
    "aria-label": "The plan: steps and the attributes between them",
  });
  root.append(svg("defs", {}, svg("marker", {
    id: "arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto",
  }, svg("path", { d: "M0,0 L8,4 L0,8 z", class: "arrowhead" }))));
  for (const e of edges) {
    const a = pos.get(e.from), b = pos.get(e.to);
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    root.append(svg("path", {
      class: "edge", d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 1},${y2}`, "marker-end": "url(#arrow)",
    }, svg("title", {}, `${e.from} → ${e.to}: ${e.name}`)));
  }
  for (const [id, p] of pos) {
    const status = statusOf(id) || "pending";
    const step = plan.steps[id] || {};
    const node = svg("g", {
      class: `node s-${status}${goals.has(id) ? " goal" : ""}`, transform: `translate(${p.x},${p.y})`,
      tabindex: 0, role: "button", "aria-label": `${id}: ${status}${goals.has(id) ? ", goal" : ""}`,
      onclick: () => onPick(id),
      onkeydown: (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); onPick(id); } },
    },
    svg("rect", { width: W, height: H, rx: 6 }),
    svg("text", { x: 10, y: 19, class: "name" }, clip(id, 22)),
    svg("text", { x: 10, y: 36, class: "sub" }, `${status}${step.type && step.type !== "sync" ? ` · ${step.type}` : ""}`),
    svg("title", {}, `${id} (${step.name || ""}): ${status}`));
    root.append(node);
  }
  return root;
}

function clip(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}
