// The run viewer of `clio serve`: the runs list, and a run's page (its workflow's DAG,
// questions, task tree and event log), kept live from the run's event stream. Plain ES
// modules, no build; everything it shows comes from /api/v1 (docs/http-api.md).

import { drawDag } from "/assets/dag.js";

const API = "/api/v1";

// The token comes in the address clio serve printed (`#token=…`); it is kept for this
// tab only and taken out of the address bar.
const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromHash) {
  sessionStorage.setItem("clio-token", fromHash);
  history.replaceState(null, "", location.pathname + location.search);
}
const token = sessionStorage.getItem("clio-token");

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const badge = (status) => h("span", { class: `badge s-${status}`, "data-status": status }, status.replace("_", " "));

function age(ms) {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

const took = (ms) => (ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`);

async function get(path) {
  const response = await fetch(API + path, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
  return body;
}

async function post(path, body) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(API + path, { method: "POST", headers, body: body ? JSON.stringify(body) : "" });
  const value = await response.json();
  if (!response.ok) {
    const e = value.error || {};
    throw new Error([e.message, ...(e.causes || []), ...(e.hints || []).map((x) => `hint: ${x}`)].join("\n"));
  }
  return value;
}

const main = document.getElementById("main");
document.getElementById("auth").textContent = token
  ? "token set: answers and cancels allowed"
  : "read only: open the address clio serve printed (with #token=) to answer or cancel";

// ---- The runs list ----

async function listPage() {
  document.getElementById("where").textContent = "runs";
  const body = h("tbody");
  const table = h("table", { id: "runs" },
    h("thead", {}, h("tr", {}, ["run", "status", "flow", "task", "agent", "models", "tokens", "took", "changed"].map((t) => h("th", {}, t)))),
    body);
  main.replaceChildren(h("div", { class: "panel" }, h("h2", {}, "Runs"), table));
  const refresh = async () => {
    try {
      const runs = await get("/runs?limit=200");
      body.replaceChildren(...runs.map((r) => h("tr", { class: "run-row", "data-run": r.id, onclick: () => { location.href = `/runs/${r.id}`; } },
        h("td", {}, h("a", { href: `/runs/${r.id}` }, `#${r.id}`)),
        h("td", {}, badge(r.status)),
        h("td", {}, r.flow_name),
        h("td", {}, (r.task || "").slice(0, 90)),
        h("td", {}, r.agent ? r.agent.file.split("/").pop() : "—"),
        h("td", {}, (r.models || []).join(", ")),
        h("td", {}, r.tokens),
        h("td", {}, took(r.duration_ms)),
        h("td", { class: "muted" }, age(r.age_ms)))));
      if (!runs.length) body.replaceChildren(h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No runs yet: submit one with `clio workflow run … --detach`.")));
    } catch (e) {
      body.replaceChildren(h("tr", {}, h("td", { colspan: 9, class: "error" }, e.message)));
    }
  };
  await refresh();
  setInterval(refresh, 2000);
}

// ---- A run's page ----

function taskTree(tasks) {
  const children = new Map();
  const ids = new Set(tasks.map((t) => t.id));
  for (const t of tasks) {
    const parent = t.parent !== null && ids.has(t.parent) ? t.parent : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(t);
  }
  const rows = [];
  const walk = (parent, depth) => {
    for (const t of children.get(parent) || []) {
      const span = t.updated_at_ms - t.created_at_ms;
      const name = t.step ? `step ${t.step}` : `${t.kind} ${t.target}`;
      const what = t.step ? `${t.kind} ${t.target}` : "";
      rows.push(h("div", { class: "row", "data-task": t.number },
        "  ".repeat(depth), depth ? "└ " : "", h("b", {}, name), " ", what, " ", badge(t.status),
        t.model ? ` ${t.model}` : "",
        t.input_tokens + t.output_tokens ? ` · ${t.input_tokens}+${t.output_tokens} tokens` : "",
        ` · ${took(span)}`));
      if (t.error) rows.push(h("div", { class: "err" }, errorText(t.error)));
      walk(t.id, depth + 1);
    }
  };
  walk(null, 0);
  return rows.length ? rows : [h("div", { class: "muted" }, "no tasks yet")];
}

function errorText(error) {
  if (typeof error === "string") return error;
  return error.message || JSON.stringify(error);
}

function questionForm(run, q, done) {
  const editorAsks = q.question.startsWith("An editor proposes");
  const send = async (answer, buttons) => {
    buttons.forEach((b) => { b.disabled = true; });
    try {
      await post(`/runs/${run}/answer`, { question: q.id, answer });
      done();
    } catch (e) {
      alert(e.message);
      buttons.forEach((b) => { b.disabled = false; });
    }
  };
  const form = h("form", { onsubmit: (e) => e.preventDefault() });
  if (q.schema === "bool") {
    const yes = h("button", { type: "button", class: "go", "data-answer": "yes" }, editorAsks ? "Approve edit" : "Yes");
    const no = h("button", { type: "button", "data-answer": "no" }, editorAsks ? "Reject edit" : "No");
    yes.addEventListener("click", () => send("yes", [yes, no]));
    no.addEventListener("click", () => send("no", [yes, no]));
    form.append(yes, no);
  } else if (q.schema === "options" && q.options.length) {
    const buttons = q.options.map((o) => h("button", { type: "button", "data-answer": o }, o));
    buttons.forEach((b, i) => b.addEventListener("click", () => send(q.options[i], buttons)));
    form.append(...buttons);
  } else {
    const input = h("input", { type: "text", placeholder: "your answer" });
    const go = h("button", { type: "submit", class: "go" }, "Answer");
    form.addEventListener("submit", () => send(input.value, [go]));
    form.append(input, go);
  }
  return h("div", { class: "question", "data-question": q.id },
    h("div", {}, h("b", {}, `Question ${q.id}: `), q.question),
    q.reason ? h("div", { class: "why" }, `why: ${q.reason}`) : null,
    form);
}

// The names of the run's tasks by journal id (`step review`, `tool csv_stats`), so that
// the log names what each entry is about.
const taskNames = new Map();

function entryText(e) {
  const p = e.payload || {};
  const c = p.command;
  if (e.kind === "question") return p.question;
  if (e.kind === "answer") return `answer to question ${p.question}: ${JSON.stringify(p.value)}`;
  if (e.kind === "view") return "workflow: " + ((c && c.view && c.view.workflow) || []).map((s) => `${s.id} ${s.status}`).join(", ");
  if (p.accepted !== undefined) return p.accepted ? "call accepted" : "call refused";
  if (c === "call" || c === "spawn") return `${c} ${p.target}${p.key ? ` (${p.key})` : ""}`;
  if (c && c.command === "step") return `${c.name}${p.result && p.result.model ? ` on ${p.result.model}` : ""}`;
  if (c && c.command === "event") {
    if (typeof c.event === "string") return c.event;
    const events = (p.result && p.result.events) || [];
    if (events.length) return "workflow: " + events.map((x) => `${x.event.event} ${x.event.step || (x.event.proposal && x.event.proposal.step_id) || ""}`).join(", ");
    return JSON.stringify(c.event);
  }
  if (p.event) return `${p.event}${p.message ? `: ${p.message}` : ""}`;
  return JSON.stringify(p);
}

function entryLine(e) {
  const about = e.task ? `${taskNames.get(e.task) || `task ${e.task}`} · ` : "";
  return h("div", { "data-seq": e.seq, title: JSON.stringify(e.payload || {}).slice(0, 2000) },
    h("span", { class: "seq" }, e.seq), h("span", { class: "kind" }, e.kind), about, entryText(e));
}

async function runPage(run) {
  document.getElementById("where").textContent = `run ${run}`;
  const head = h("h1", {});
  const facts = h("div", { class: "facts" });
  const notice = h("div", {});
  const error = h("div", {});
  const questions = h("div", { id: "questions" });
  const dag = h("div", { class: "dag", id: "dag" });
  const tree = h("div", { class: "tree", id: "tree" });
  const log = h("div", { class: "log", id: "log" });
  const legend = h("div", { class: "legend" }, ["pending", "running", "finished", "failed", "cancelled", "proposed"].map((s) =>
    h("span", {}, h("i", { class: `s-${s}` }), s)));
  main.replaceChildren(
    h("div", {}, h("a", { href: "/" }, "← all runs")),
    head, facts, notice, error,
    h("div", { class: "panel" }, h("h2", {}, "Workflow"), dag, legend),
    h("div", { class: "grid" },
      h("div", {},
        h("div", { class: "panel" }, h("h2", {}, "Questions"), questions),
        h("div", { class: "panel" }, h("h2", {}, "Tasks"), tree)),
      h("div", {}, h("div", { class: "panel" }, h("h2", {}, "Events"), log))));

  let state = null;
  const act = (label, path, cls) => {
    const button = h("button", { type: "button", class: cls, "data-action": label.toLowerCase() }, label);
    button.addEventListener("click", async () => {
      button.disabled = true;
      try { await post(`/runs/${run}/${path}`); } catch (e) { alert(e.message); }
      button.disabled = false;
      refresh();
    });
    return button;
  };

  const refresh = async () => {
    const [shown, tasks] = await Promise.all([get(`/runs/${run}`), get(`/runs/${run}/tasks`)]);
    state = shown;
    const r = shown.run, s = shown.summary;
    const ended = ["succeeded", "failed", "cancelled"].includes(r.status);
    // Stop ends the model's current turn (its call fails with call_stopped); started
    // flows keep running. Offered while an agent's or subagent's turn runs.
    const turning = tasks.tasks.some((t) => (t.kind === "agent" || t.kind === "subagent") && t.status === "running");
    head.replaceChildren(`Run ${r.id} · ${s.flow_name}`, badge(r.status),
      h("span", { class: "actions" },
        !ended && turning ? act("Stop", "stop", "stop") : null,
        !ended ? act("Cancel", "cancel", "stop") : null,
        r.status === "interrupted" ? act("Resume", "resume", "go") : null));
    facts.replaceChildren(...[
      h("div", {}, h("span", {}, "task"), s.task),
      s.agent ? h("div", {}, h("span", {}, "agent"), `${s.agent.file} (${s.agent.checksum || "not pinned"})`) : null,
      h("div", {}, h("span", {}, "models"), s.models.join(", ") || "—"),
      h("div", {}, h("span", {}, "tokens"), s.tokens),
      h("div", {}, h("span", {}, "took"), took(s.duration_ms)),
      h("div", {}, h("span", {}, "tasks"), s.n_tasks)].filter(Boolean));
    for (const t of tasks.tasks) taskNames.set(t.id, t.step ? `step ${t.step}` : `${t.kind} ${t.target}`);
    notice.replaceChildren(r.status === "succeeded" && r.answer
      ? h("div", { class: "notice", id: "answer" }, h("b", {}, "Answer: "), typeof r.answer === "string" ? r.answer : (r.answer.answer || JSON.stringify(r.answer)).slice(0, 600))
      : "");
    error.replaceChildren(shown.error
      ? h("div", { class: "panel error", id: "error" }, h("b", {}, shown.error.message), ...shown.error.causes.map((c) => h("div", { class: "cause" }, `caused by: ${c}`)))
      : "");
    if (shown.workflow) drawDag(dag, shown.workflow);
    else dag.replaceChildren(h("div", { class: "muted" }, "not a workflow run"));
    questions.replaceChildren(...(shown.questions.length
      ? shown.questions.map((q) => questionForm(run, q, refresh))
      : [h("div", { class: "muted" }, "none waiting")]));
    tree.replaceChildren(...taskTree(tasks.tasks));
  };

  let pending = null;
  const soon = () => {
    if (pending) return;
    pending = setTimeout(async () => { pending = null; try { await refresh(); } catch (e) { error.replaceChildren(h("div", { class: "panel error" }, e.message)); } }, 150);
  };
  try {
    await refresh();
  } catch (e) {
    main.replaceChildren(h("div", { class: "panel error" }, e.message));
    return;
  }
  const query = token ? `?token=${encodeURIComponent(token)}` : "";
  const stream = new EventSource(`${API}/runs/${run}/events/stream${query}`);
  stream.addEventListener("entry", (m) => {
    log.append(entryLine(JSON.parse(m.data)));
    log.scrollTop = log.scrollHeight;
    soon();
  });
  stream.addEventListener("end", () => { stream.close(); soon(); document.body.dataset.ended = "true"; });
  stream.addEventListener("error", () => soon());
}

const m = location.pathname.match(/^\/runs\/(\d+)$/);
if (m) runPage(Number(m[1]));
else listPage();
