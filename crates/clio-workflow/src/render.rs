//! Renderings of a workflow's DAG for people: layered text, Mermaid (`flowchart TD`) and
//! Graphviz DOT. The CLI prints them; they are deterministic, so tests snapshot them.

use std::fmt::Write as _;

use crate::reference::text_of;
use crate::step::Step;
use crate::workflow::Workflow;

/// Returns the DAG as text: the steps layer by layer, each with its target, what it waits
/// on and what it receives, then the final steps.
pub fn render_text(workflow: &Workflow) -> String {
    let mut out = String::new();
    for (at, layer) in workflow.layers().iter().enumerate() {
        let _ = writeln!(out, "layer {}", at + 1);
        for id in layer {
            let Some(step) = workflow.step(id) else { continue };
            let _ = write!(out, "  {} → {}", step.id, step.target);
            if let Some(model) = &step.model {
                let _ = write!(out, " [model {model}]");
            }
            if let Some(options) = &step.options {
                let _ = write!(out, " [options {}]", serde_json::Value::Object(options.clone()));
            }
            if !step.after.is_empty() {
                let _ = write!(out, " (after {})", step.after.join(", "));
            }
            let _ = writeln!(out);
            let _ = writeln!(out, "      receives {}", receives(step));
        }
    }
    let _ = writeln!(out, "final: {}", workflow.final_steps().join(", "));
    out
}

/// Describes what a step receives, per the input rules.
fn receives(step: &Step) -> String {
    match (&step.input, &step.description, step.after.is_empty()) {
        (Some(input), _, _) => format!("input {}", shorten(&text_of(input), 72)),
        (None, None, true) => "the task".to_owned(),
        (None, description, _) => {
            let mut parts = vec!["task"];
            if description.is_some() {
                parts.push("instructions");
            }
            parts.push("inputs");
            format!("{{{}}}", parts.join(", "))
        }
    }
}

fn shorten(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ");
    if flat.chars().count() <= max {
        return format!("{flat:?}");
    }
    let cut: String = flat.chars().take(max).collect();
    format!("{cut:?}…")
}

/// Returns the DAG as a Mermaid `flowchart TD`; node names are `s0`, `s1`, … in step order
/// and labels show the step id and target.
pub fn render_mermaid(workflow: &Workflow) -> String {
    let mut out = String::from("flowchart TD\n");
    for (idx, step) in workflow.steps().iter().enumerate() {
        let label = format!("{}<br/>{}", mermaid_escape(&step.id), mermaid_escape(&step.target));
        let _ = writeln!(out, "  s{idx}[\"{label}\"]");
    }
    for (idx, deps) in workflow.deps().iter().enumerate() {
        for dep in deps {
            let _ = writeln!(out, "  s{dep} --> s{idx}");
        }
    }
    out
}

fn mermaid_escape(text: &str) -> String {
    text.replace('&', "#amp;").replace('"', "#quot;").replace('<', "#lt;").replace('>', "#gt;")
}

/// Returns the DAG as a Graphviz `digraph`, edges pointing from a step to those waiting on it.
pub fn render_dot(workflow: &Workflow) -> String {
    let mut out = String::from("digraph workflow {\n  rankdir=TB;\n  node [shape=box];\n");
    for step in workflow.steps() {
        let label = format!("{}\\n{}", dot_escape(&step.id), dot_escape(&step.target));
        let _ = writeln!(out, "  \"{}\" [label=\"{label}\"];", step.id);
    }
    for step in workflow.steps() {
        for after in &step.after {
            let _ = writeln!(out, "  \"{after}\" -> \"{}\";", step.id);
        }
    }
    out.push_str("}\n");
    out
}

fn dot_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}
