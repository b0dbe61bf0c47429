// The workflow's DAG as SVG, laid out by hand: each step in the column of its longest
// path from a first step, columns left to right, steps in a column in workflow order,
// edges as curves from a step to the steps that wait on it. Steps are coloured by status;
// an edit waiting for the person's decision is drawn dashed, where it would go.

const NS = "http://www.w3.org/2000/svg";
const W = 178, H = 50, GAP_X = 64, GAP_Y = 20, PAD = 16;

const COLOURS = {
  pending: ["#f3f4f6", "#9aa0a8"], queued: ["#eaf1fd", "#2f6fdf"], starting: ["#eaf1fd", "#2f6fdf"],
  running: ["#dbe8ff", "#2f6fdf"], finished: ["#e5f5ec", "#1f8a4c"], failed: ["#fde8e8", "#c93b3b"],
  cancelled: ["#efe9f7", "#7a5aa8"], skipped: ["#efe9f7", "#7a5aa8"], proposed: ["#fffaf0", "#c98a12"],
};

function el(name, attrs, parent) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

/** Returns the steps to draw: the workflow's, then each edit waiting for a decision. */
export function nodesOf(workflow) {
  const steps = workflow.steps.map((s) => ({ ...s, after: s.after || [], ghost: false }));
  const known = new Set(steps.map((s) => s.id));
  for (const edit of workflow.edits || []) {
    const p = edit.proposal;
    if (p.kind !== "add_step" || known.has(p.step_id)) continue;
    if (edit.status !== "awaiting_decision" && edit.status !== "proposed") continue;
    const after = p.after || (edit.from && edit.from.step ? [edit.from.step] : []);
    steps.push({ id: p.step_id, target: p.target, status: "proposed", after, ghost: true });
  }
  return steps;
}

/** Draws `workflow` (as GET /api/v1/runs/{id} gives it) into `container`. */
export function drawDag(container, workflow) {
  const steps = nodesOf(workflow);
  const byId = new Map(steps.map((s) => [s.id, s]));
  const depth = new Map();
  const depthOf = (s, seen = new Set()) => {
    if (depth.has(s.id)) return depth.get(s.id);
    if (seen.has(s.id)) return 0;
    seen.add(s.id);
    const parents = s.after.map((a) => byId.get(a)).filter(Boolean);
    const d = parents.length ? 1 + Math.max(...parents.map((p) => depthOf(p, seen))) : 0;
    depth.set(s.id, d);
    return d;
  };
  const columns = [];
  for (const s of steps) {
    const d = depthOf(s);
    (columns[d] ||= []).push(s);
  }
  const pos = new Map();
  const rows = Math.max(1, ...columns.map((c) => (c ? c.length : 0)));
  const height = PAD * 2 + rows * H + (rows - 1) * GAP_Y;
  columns.forEach((column, x) => {
    const offset = (height - PAD * 2 - (column.length * H + (column.length - 1) * GAP_Y)) / 2;
    column.forEach((s, y) => pos.set(s.id, { x: PAD + x * (W + GAP_X), y: PAD + offset + y * (H + GAP_Y) }));
  });
  const width = PAD * 2 + columns.length * W + Math.max(0, columns.length - 1) * GAP_X;
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "workflow" });
  const defs = el("defs", {}, svg);
  const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
  el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#9aa0a8" }, marker);
  for (const s of steps) {
    const to = pos.get(s.id);
    for (const a of s.after) {
      const from = pos.get(a);
      if (!from) continue;
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x, y2 = to.y + H / 2, mid = (x1 + x2) / 2;
      el("path", { class: s.ghost ? "edge ghost" : "edge", d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2 - 2} ${y2}`, "marker-end": "url(#arrow)" }, svg);
    }
  }
  for (const s of steps) {
    const p = pos.get(s.id);
    const [fill, stroke] = COLOURS[s.status] || COLOURS.pending;
    const g = el("g", { class: `node${s.ghost ? " ghost" : ""} st-${s.status}`, "data-step": s.id, "data-status": s.status, transform: `translate(${p.x},${p.y})` }, svg);
    el("title", {}, g).textContent = `${s.id}: ${s.status}${s.note ? ` — ${s.note}` : ""}`;
    el("rect", { width: W, height: H, fill, stroke }, g);
    const name = el("text", { x: 10, y: 20 }, g);
    name.textContent = s.id.length > 22 ? `${s.id.slice(0, 21)}…` : s.id;
    const target = el("text", { x: 10, y: 38, class: "target" }, g);
    const what = s.ghost ? `proposed · ${s.target}` : `${s.status} · ${s.target}`;
    target.textContent = what.length > 30 ? `${what.slice(0, 29)}…` : what;
    if (s.editor) el("text", { x: W - 10, y: 20, "text-anchor": "end", class: "target" }, g).textContent = "editor";
  }
  container.replaceChildren(svg);
}
