//! W3's workflow, shared by the flow crate's bench targets (each includes this file with
//! `#[path]`), so that the embedded and the PostgreSQL benches run the same DAG.

use serde_json::{Value, json};

/// The 1,000-step workflow DAG of `target` steps: 10 layers of 100, each step after 2 of
/// the layer before.
pub(crate) fn dag_of(target: &str) -> Value {
    let mut steps = Vec::new();
    for layer in 0..10 {
        for i in 0..100 {
            let mut step =
                json!({ "id": format!("s{layer}_{i}"), "target": target, "input": { "i": i } });
            if layer > 0 {
                step["after"] = json!([
                    format!("s{}_{}", layer - 1, i),
                    format!("s{}_{}", layer - 1, (i + 1) % 100)
                ]);
            }
            steps.push(step);
        }
    }
    json!({ "workflow": { "steps": steps } })
}
