//! The workflow benchmark (`cargo bench -p clio-workflow --bench workflow`): validates and
//! schedules to completion a 1,000-step DAG (10 layers × 100, each step waiting on 2 of the
//! layer before) and a 100,000-step random DAG, with no-op work inside steps, and prints
//! one JSON line per workload with times and the process's peak memory (VmHWM). The
//! `check_*` workloads are what `clio workflow check` and `show` do with a dense 2,000-step
//! DAG's JSON text (every step waiting on every earlier one, or on the 50 before it): read
//! it (duplicate keys refused), check it, lay it out and draw it (goal: 1 s each).
#![allow(clippy::print_stdout)]

use std::time::Instant;

use clio_workflow::{
    Action, Event, RunConfig, Scheduler, Step, Workflow, render_dot, render_mermaid, render_text,
};
use serde_json::{Value, json};

/// A small deterministic generator (64-bit LCG), so every run builds the same DAG.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

fn layered(layers: usize, width: usize) -> Vec<Step> {
    let mut steps = Vec::with_capacity(layers * width);
    for layer in 0..layers {
        for i in 0..width {
            let mut step = Step::new(format!("l{layer}-{i}"), "noop");
            if layer > 0 {
                step = step.after([
                    format!("l{}-{}", layer - 1, i),
                    format!("l{}-{}", layer - 1, (i + 1) % width),
                ]);
            }
            steps.push(step);
        }
    }
    steps
}

fn random_dag(n: usize, seed: u64) -> Vec<Step> {
    let mut rng = Lcg(seed);
    (0..n)
        .map(|i| {
            let mut step = Step::new(format!("s{i}"), "noop");
            if i > 0 {
                let n_deps = rng.below(4);
                let mut after: Vec<String> =
                    (0..n_deps).map(|_| format!("s{}", rng.below(i))).collect();
                after.dedup();
                step = step.after(after);
            }
            step
        })
        .collect()
}

/// Runs a workflow to completion, finishing started steps in the order they started.
fn schedule(workflow: Workflow) -> usize {
    let mut sched =
        Scheduler::new(workflow, RunConfig { task: json!("bench"), ..RunConfig::default() });
    let mut queue = std::collections::VecDeque::new();
    let mut events = 0;
    loop {
        for action in sched.take_actions() {
            if let Action::Start(start) = action {
                queue.push_back(start.step);
            }
        }
        let Some(step) = queue.pop_front() else { break };
        let handle = format!("h-{step}");
        let _ = sched.apply(Event::Started { step: step.clone(), handle });
        let _ =
            sched.apply(Event::Finished { step, answer: Value::Null, model: None, state: None });
        events += 2;
    }
    assert!(sched.is_done(), "the run did not finish");
    events
}

fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Returns the process's user plus system CPU time in milliseconds, from /proc/self/stat
/// (in clock ticks of 10 ms, Linux's USER_HZ), so that a loaded machine can be told apart
/// from a slow run.
fn cpu_ms() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which is in parentheses) start at field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |at: usize| fields.get(at).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) + ticks(12)) * 10
}

fn measure(workload: &str, steps: Vec<Step>) {
    let n_steps = steps.len();
    let cpu_start = cpu_ms();
    let started = Instant::now();
    let workflow = match Workflow::new(steps) {
        Ok(workflow) => workflow,
        Err(err) => panic!("{workload}: {err}"),
    };
    let validate_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let events = schedule(workflow);
    let schedule_ms = started.elapsed().as_secs_f64() * 1e3;
    let total_ms = validate_ms + schedule_ms;
    let line = json!({
        "bench": "workflow",
        "workload": workload,
        "includes": "Workflow::new (checking the steps: ids, references, cycles) and a Scheduler driving every step to done in memory, each started then finished (two events); no journal, no tools",
        "n": n_steps,
        "per_op_us": (total_ms * 1000.0 / n_steps.max(1) as f64 * 10.0).round() / 10.0,
        "steps": n_steps,
        "events": events,
        "validate_ms": (validate_ms * 1000.0).round() / 1000.0,
        "schedule_ms": (schedule_ms * 1000.0).round() / 1000.0,
        "total_ms": (total_ms * 1000.0).round() / 1000.0,
        "cpu_ms": cpu_ms() - cpu_start,
        "peak_rss_kb": peak_rss_kb(),
    });
    println!("{line}");
}

/// The JSON text of `n` steps, each waiting on the `window` steps before it (all of them
/// when `window >= n`) and referencing the one before it and the first.
fn dense_text(n: usize, window: usize) -> String {
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let after: Vec<String> =
                (i.saturating_sub(window)..i).map(|j| format!("s{j}")).collect();
            let input = if i == 0 { "$task".to_owned() } else { format!("$s{} and $s0", i - 1) };
            json!({"id": format!("s{i}"), "target": "noop", "input": input, "after": after})
        })
        .collect();
    json!({ "steps": steps }).to_string()
}

fn measure_check(workload: &str, text: &str) {
    let cpu_start = cpu_ms();
    let started = Instant::now();
    let workflow = match Workflow::from_json(text) {
        Ok(workflow) => workflow,
        Err(err) => panic!("{workload}: {err}"),
    };
    let layers = workflow.layers().len();
    let finals = workflow.final_steps().len();
    let check_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let drawn = render_text(&workflow).len()
        + render_mermaid(&workflow).len()
        + render_dot(&workflow).len();
    let draw_ms = started.elapsed().as_secs_f64() * 1e3;
    let steps = workflow.steps();
    let edges: usize = steps.iter().map(|s| s.after.len()).sum();
    let line = json!({
        "bench": "workflow",
        "workload": workload,
        "includes": "Workflow::from_json of the text (duplicate keys refused, steps checked, cycles, references), layers and final steps as `clio workflow check` prints them; then the text, Mermaid and DOT drawings (`clio workflow show`); no file read",
        "n": steps.len(),
        "per_op_us": (check_ms * 1000.0 / steps.len().max(1) as f64 * 10.0).round() / 10.0,
        "steps": steps.len(),
        "edges": edges,
        "bytes": text.len(),
        "layers": layers,
        "final": finals,
        "drawn_bytes": drawn,
        "check_ms": (check_ms * 1000.0).round() / 1000.0,
        "draw_ms": (draw_ms * 1000.0).round() / 1000.0,
        "total_ms": ((check_ms + draw_ms) * 1000.0).round() / 1000.0,
        "goal_ms": 1000,
        "cpu_ms": cpu_ms() - cpu_start,
        "peak_rss_kb": peak_rss_kb(),
    });
    println!("{line}");
}

fn main() {
    measure("dag_1000_layers", layered(10, 100));
    measure("dag_100000_random", random_dag(100_000, 7));
    // Last, so that their peak memory does not show in the lines above.
    measure_check("check_2000_dense_window_50", &dense_text(2_000, 50));
    measure_check("check_2000_dense_all_earlier", &dense_text(2_000, 2_000));
}
