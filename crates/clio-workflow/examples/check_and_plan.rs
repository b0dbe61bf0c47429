//! Checks a workflow and prints its shape and its plan, with `clio-workflow` alone: what a
//! service that validates and draws workflows before anyone runs them needs.
//!
//! The workflow is the batch7 review of the repository's `examples/workflows/batch7.json`.
//! It is checked twice: its structure when it is read (ids, dependencies, cycles, input
//! references), then its targets against the agents a deployment has. The plan comes from
//! the crate's own `Scheduler`, stepped with made-up events as a driver would step it (a
//! slow survey, every other step quick), so it shows which steps start together and that a
//! ready step starts at once, without running any of them. Two
//! broken workflows show the errors a person gets.
//!
//! Run it with `cargo run -p clio-workflow --example check_and_plan`.

#![allow(clippy::print_stdout, reason = "an example program: its output is the point")]

use std::error::Error;

use clio_workflow::{
    Action, Event, RunConfig, Scheduler, TargetKind, Workflow, render_mermaid, render_text,
};
use serde_json::json;

const BATCH7: &str = r#"{"steps": [
    {"id": "survey", "target": "evidence_researcher", "input": "$task"},
    {"id": "images", "target": "characterization_expert",
     "input": "Measure grain size and porosity in data/batch7/micrographs/"},
    {"id": "tests", "target": "fatigue_failure_expert",
     "input": "Fit S-N curves to data/batch7/fatigue.csv"},
    {"id": "relate", "target": "data_analysis_expert", "after": ["images", "tests"]},
    {"id": "review", "target": "independent_reviewer", "after": ["survey", "relate"]}
]}"#;

/// The agents this deployment has (a real service would read its catalog).
const AGENTS: &[&str] = &[
    "evidence_researcher",
    "characterization_expert",
    "fatigue_failure_expert",
    "data_analysis_expert",
    "independent_reviewer",
];

fn main() -> Result<(), Box<dyn Error>> {
    let workflow = Workflow::from_json(BATCH7)?;
    workflow.check_targets(kind_of)?;
    println!("batch7: {} steps, checked\n", workflow.steps().len());
    print!("{}", render_text(&workflow));

    // Ready steps start at once: `relate` does not wait for the slow survey.
    println!("\nplan (the survey takes 3 hours, every other step 1):");
    let timeline = plan(&workflow)?;
    for hour in &timeline {
        let mut line = format!("  hour {}:", hour.at);
        if !hour.finished.is_empty() {
            line += &format!(" {} done;", hour.finished.join(", "));
        }
        if hour.started.is_empty() {
            line += " nothing to start";
        } else {
            line += &format!(" start {}", hour.started.join(", "));
        }
        println!("{line}");
    }
    let relate_starts = timeline.iter().find(|hour| hour.started.iter().any(|s| s == "relate"));
    assert_eq!(relate_starts.map(|hour| hour.at), Some(1));
    let end = timeline.last().ok_or("an empty plan")?.at;
    println!("  the run ends after {end} hours");

    println!("\nas Mermaid:\n{}", render_mermaid(&workflow));

    // Mistakes are refused, naming the first problem.
    let cycle = r#"[{"id": "a", "target": "t", "after": ["b"]},
                    {"id": "b", "target": "t", "after": ["a"]}]"#;
    let typo = BATCH7.replace("independent_reviewer", "independant_reviewer");
    for (what, text) in [("a cycle", cycle), ("a target typo", typo.as_str())] {
        let error = Workflow::from_json(text)
            .and_then(|workflow| workflow.check_targets(kind_of))
            .err()
            .ok_or_else(|| format!("{what} was not refused"))?;
        println!("{what}: refused: {error}");
    }
    Ok(())
}

/// Says whether `target` is one of the deployment's agents.
fn kind_of(target: &str) -> TargetKind {
    if AGENTS.contains(&target) { TargetKind::Other } else { TargetKind::Unknown }
}

/// How long each step takes, in hours, for the plan: the literature survey is slow.
fn hours(step: &str) -> u64 {
    if step == "survey" { 3 } else { 1 }
}

/// What happens in one hour of the plan.
struct Hour {
    at: u64,
    finished: Vec<String>,
    started: Vec<String>,
}

/// Steps a scheduler through `workflow` as a driver would, each step finishing
/// `hours(step)` after it starts, and returns each hour in which something happened.
fn plan(workflow: &Workflow) -> Result<Vec<Hour>, Box<dyn Error>> {
    let config = RunConfig { task: json!("Review batch 7"), ..RunConfig::default() };
    let mut scheduler = Scheduler::new(workflow.clone(), config);
    // The running steps, each with the hour it ends.
    let mut running: Vec<(String, u64)> = Vec::new();
    let mut timeline = Vec::new();
    let mut now = 0;
    let mut finished = Vec::new();
    loop {
        let mut started = Vec::new();
        for action in scheduler.take_actions() {
            if let Action::Start(start) = action {
                let handle = format!("task-{}", start.step);
                scheduler.apply(Event::Started { step: start.step.clone(), handle })?;
                running.push((start.step.clone(), now + hours(&start.step)));
                started.push(start.step);
            }
        }
        timeline.push(Hour { at: now, finished: std::mem::take(&mut finished), started });
        if scheduler.is_done() {
            return Ok(timeline);
        }
        now = running.iter().map(|(_, ends)| *ends).min().ok_or_else(|| stalled(&scheduler))?;
        let (ended, still): (Vec<_>, Vec<_>) = running.drain(..).partition(|(_, e)| *e == now);
        running = still;
        for (step, _) in ended {
            let answer = json!(format!("findings of {step}"));
            scheduler.apply(Event::Finished {
                step: step.clone(),
                answer,
                model: None,
                state: None,
            })?;
            finished.push(step);
        }
    }
}

/// Describes a scheduler that started nothing but is not done.
fn stalled(scheduler: &Scheduler) -> String {
    let waiting: Vec<&str> =
        scheduler.statuses().filter(|s| !s.status.is_settled()).map(|s| s.id).collect();
    format!("the scheduler started nothing while {} wait", waiting.join(", "))
}
