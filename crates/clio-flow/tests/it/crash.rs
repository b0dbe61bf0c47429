//! Crash tests with a real process: a child process (this test binary, re-executed with
//! `--exact crash::crash_child`) runs a flow on a journal file and is killed with SIGKILL at
//! pseudo-random points, then resumed by a new child until the run ends. Each side effect
//! is a line in a file and must appear exactly once, and the final answer must equal the
//! uninterrupted run's.
//!
//! The flows do what a production flow does with an effect whose fate a crash left unknown
//! (`CallInterrupted`, `TaskStateUncertain`): check the outside world in a step, and act only
//! if the effect is missing. The runtime never runs a side-effecting tool twice; the check
//! makes the effect exactly-once.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use clio_flow::{
    FlowError, FlowOutput, FnFlow, Registry, RunOutcome, Runtime, RuntimeConfig, Tool, Worker,
    WorkerReply,
};
use clio_journal::{Journal, JournalConfig, RunId};
use serde_json::{Value, json};

const DIR: &str = "CLIO_FLOW_CRASH_DIR";
const SCENARIO: &str = "CLIO_FLOW_CRASH_SCENARIO";

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// Appends `id` to the effects file.
fn append(path: &Path, id: &str) -> Result<(), FlowError> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| FlowError::CallFailed { handle: None, message: e.to_string() })?;
    // One write per line: concurrent appends (a gather) must not interleave.
    f.write_all(format!("{id}\n").as_bytes())
        .map_err(|e| FlowError::CallFailed { handle: None, message: e.to_string() })
}

/// Appends `id` unless it is there already: an idempotent effect.
fn ensure(path: &Path, id: &str) -> Result<(), FlowError> {
    if lines(path).iter().any(|l| l == id) { Ok(()) } else { append(path, id) }
}

fn registry(dir: &Path) -> Registry {
    let effects = dir.join("effects.txt");
    let e1 = effects.clone();
    let e2 = effects.clone();
    Registry::new()
        .tool(Tool::new("effect", move |args: Value| {
            let path = e1.clone();
            async move {
                let id = args["id"].as_str().unwrap_or("").to_owned();
                append(&path, &id)?;
                Ok(json!(id))
            }
        }))
        .subagent(Worker::handler("worker", move |req| {
            let path = e2.clone();
            async move {
                ensure(&path, &req.text)?;
                Ok(WorkerReply::text(format!("did {}", req.text)))
            }
        }))
        .subagent(Worker::handler("editor", |req| async move {
            if req.text.contains("\"b\"") || req.text.starts_with("b") {
                req.ctx
                    .call(
                        "workflow_add_step",
                        json!({ "step_id": "extra", "target": "worker", "input": "w-extra" }),
                    )
                    .await?;
            }
            Ok(WorkerReply::text("edited"))
        }))
        .flow(FnFlow::new("seq", move |_t: Value, ctx| {
            let effects = effects.clone();
            async move {
                let mut done = Vec::new();
                for i in 0..12 {
                    done.push(effect(&ctx, &effects, format!("s{i}")).await?);
                }
                Ok(FlowOutput::text(done.join(",")))
            }
        }))
        .flow(FnFlow::new("fan", move |_t: Value, ctx| {
            let effects = dir_effects(&ctx);
            async move {
                let calls = (0..12)
                    .map(|i| {
                        ctx.call("effect", json!({ "id": format!("g{i}") })).key(format!("g{i}"))
                    })
                    .collect();
                let settled = ctx.gather(calls).limit(4).settled().await;
                let mut done = Vec::new();
                for (i, r) in settled.into_iter().enumerate() {
                    let id = format!("g{i}");
                    match r {
                        Some(Ok(r)) => done.push(r.value.as_str().unwrap_or("").to_owned()),
                        Some(Err(
                            FlowError::CallInterrupted { .. }
                            | FlowError::TaskStateUncertain { .. },
                        )) => {
                            let (p, id2) = (effects.clone(), id.clone());
                            ctx.step(&format!("reconcile {id}"), || async move {
                                ensure(&p, &id2).map(|()| id2.clone())
                            })
                            .await?;
                            done.push(id);
                        }
                        Some(Err(e)) => return Err(e),
                        None => return Err(FlowError::stall("unsettled", id)),
                    }
                }
                Ok(FlowOutput::text(done.join(",")))
            }
        }))
}

fn dir_effects(ctx: &clio_flow::Ctx) -> PathBuf {
    ctx.workspace().root().map(|r| r.join("effects.txt")).unwrap_or_default()
}

/// Calls the side-effecting tool for `id`; when a crash left its fate unknown, checks the
/// effects file in a step and performs the effect only if it is missing.
async fn effect(ctx: &clio_flow::Ctx, effects: &Path, id: String) -> Result<String, FlowError> {
    match ctx.call("effect", json!({ "id": id })).key(id.clone()).await {
        Ok(r) => Ok(r.value.as_str().unwrap_or("").to_owned()),
        Err(FlowError::CallInterrupted { .. } | FlowError::TaskStateUncertain { .. }) => {
            let (p, id2) = (effects.to_path_buf(), id.clone());
            ctx.step(&format!("reconcile {id}"), || async move {
                ensure(&p, &id2).map(|()| id2.clone())
            })
            .await
        }
        Err(e) => Err(e),
    }
}

fn workflow_input() -> Value {
    json!({
        "workflow": { "steps": [
            {"id": "a", "target": "worker", "input": "w-a"},
            {"id": "b", "target": "worker", "input": "w-b"},
            {"id": "c", "target": "editor", "input": "b", "after": ["a", "b"]},
            {"id": "d", "target": "worker", "input": "w-d", "after": ["c"]}
        ]},
        "editors": ["editor"],
        "max_added_steps": 1
    })
}

/// A fan-out wider than the workflow's window of steps running at once (1,024): a resume
/// launches its steps within the window the run recorded, so it rebuilds the same batches.
fn wide_input() -> Value {
    let steps: Vec<Value> = (0..WIDE)
        .map(|i| json!({ "id": format!("s{i}"), "target": "worker", "input": format!("w{i}") }))
        .collect();
    json!({ "workflow": { "steps": steps } })
}

const WIDE: usize = 1_100;

fn scenario_input(scenario: &str) -> (String, Value) {
    match scenario {
        "workflow" => ("workflow".into(), workflow_input()),
        "wide" => ("workflow".into(), wide_input()),
        other => (other.into(), json!(null)),
    }
}

async fn drive(dir: &Path, scenario: &str) -> String {
    let journal = Journal::open(dir.join("journal.redb"), JournalConfig::default()).unwrap();
    let config = RuntimeConfig { workspace: Some(dir.to_path_buf()), ..RuntimeConfig::default() };
    let rt = Runtime::new(journal, registry(dir), config);
    let run_file = dir.join("run");
    let run = match std::fs::read_to_string(&run_file).ok().and_then(|s| s.trim().parse().ok()) {
        Some(id) => RunId(id),
        None => {
            let (flow, input) = scenario_input(scenario);
            let run = rt.create(clio_flow::selection(&flow, json!({})), input).await.unwrap();
            std::fs::write(&run_file, run.0.to_string()).unwrap();
            run
        }
    };
    let report = rt.resume(run).await.unwrap();
    match report.outcome {
        RunOutcome::Succeeded(out) => out.answer,
        other => panic!("run ended {other:?}"),
    }
}

/// The child: runs or resumes the scenario named in the environment, then writes the answer.
/// Without the environment (a normal test run) it does nothing.
#[test]
fn crash_child() {
    let (Ok(dir), Ok(scenario)) = (std::env::var(DIR), std::env::var(SCENARIO)) else { return };
    let dir = PathBuf::from(dir);
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let answer = rt.block_on(drive(&dir, &scenario));
    std::fs::write(dir.join("answer.txt"), answer).unwrap();
}

/// Runs `scenario` in child processes, killing the first `kills` of them after a
/// pseudo-random delay from `seed`, until one finishes; checks effects and the answer.
///
/// A first child that finished before its kill came (a build or machine faster than the
/// delays were chosen for) tested no crash: the scenario starts again in a fresh folder
/// with delays half as long, so that a kill always lands mid-run.
pub(crate) fn crash_scenario(scenario: &str, kills: usize, seed: u64) {
    let reference = tempfile::tempdir().unwrap();
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let expected = rt.block_on(drive(reference.path(), scenario));
    let expected_effects = {
        let mut l = lines(&reference.path().join("effects.txt"));
        l.sort();
        l
    };
    let mut state = seed;
    let mut max_delay = 40;
    let (dir, killed) = loop {
        let dir = tempfile::tempdir().unwrap();
        let killed = kill_until_done(dir.path(), scenario, kills, &mut state, max_delay);
        if kills == 0 || killed > 0 || max_delay == 1 {
            break (dir, killed);
        }
        max_delay /= 2;
    };
    assert!(kills == 0 || killed > 0, "{scenario}: no child was killed mid-run");
    let answer = std::fs::read_to_string(dir.path().join("answer.txt")).unwrap();
    assert_eq!(answer, expected, "{scenario}: the answer differs from the uninterrupted run's");
    let mut effects = lines(&dir.path().join("effects.txt"));
    effects.sort();
    assert_eq!(
        effects, expected_effects,
        "{scenario}: every effect exactly once (killed {killed} times)"
    );
}

/// Starts children on `dir` until one finishes the run, killing each of the first `kills`
/// after 5 ms plus up to `max_delay` ms (drawn from `state`) if it is still running;
/// returns how many were killed.
fn kill_until_done(
    dir: &Path,
    scenario: &str,
    kills: usize,
    state: &mut u64,
    max_delay: u64,
) -> usize {
    let exe = std::env::current_exe().unwrap();
    let mut killed = 0;
    for attempt in 0..kills + 50 {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash::crash_child", "--nocapture", "--test-threads", "1"])
            .env(DIR, dir)
            .env(SCENARIO, scenario)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        if killed < kills {
            *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let delay = 5 + (*state >> 33) % max_delay;
            std::thread::sleep(Duration::from_millis(delay));
            if child.try_wait().unwrap().is_none() {
                child.kill().unwrap();
                let _ = child.wait();
                killed += 1;
                continue;
            }
        }
        let status = child.wait().unwrap();
        assert!(status.success(), "{scenario}: attempt {attempt} failed: {status}");
        if dir.join("answer.txt").exists() {
            break;
        }
    }
    killed
}

#[test]
fn sequential_calls_survive_sigkill() {
    crash_scenario("seq", 3, 1);
}

#[test]
fn a_gather_survives_sigkill() {
    crash_scenario("fan", 3, 2);
}

#[test]
fn a_workflow_with_an_editor_survives_sigkill() {
    crash_scenario("workflow", 3, 3);
}

#[test]
fn a_fan_out_wider_than_the_window_survives_sigkill() {
    crash_scenario("wide", 3, 4);
}
