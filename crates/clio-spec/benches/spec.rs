//! The spec benchmark (`cargo bench -p clio-spec --bench spec`): freezes an agent
//! definition with 5,000 plugin references (`clio agent spec` of such a file: the TOML
//! read, the layers flattened, every reference parsed, the checksum), and prints one JSON
//! line per workload with its time.
#![allow(clippy::print_stdout)]

use std::time::Instant;

use clio_spec::AgentDef;
use serde_json::json;

/// A definition of `n` plugin references in a base layer, `n` more in the agent, half of
/// them narrowing a base one.
fn definition(n: usize) -> String {
    let mut text = String::from("id = \"big\"\nextends = \"base\"\nplugins = [\"core\"");
    for i in 0..n / 2 {
        text.push_str(&format!(", \"p{i}@^1.{}\"", i % 7));
    }
    for i in n..n + n / 2 {
        text.push_str(&format!(", \"clio/p{i}\""));
    }
    text.push_str("]\n[[layer]]\nid = \"base\"\nplugins = [\"memory\"");
    for i in 0..n {
        text.push_str(&format!(", \"m/p{i}@>=1 <3\""));
    }
    text.push_str("]\n");
    text
}

fn measure(workload: &str, n: usize) {
    let text = definition(n);
    let started = Instant::now();
    let def = match AgentDef::from_toml(&text, "big.toml") {
        Ok(def) => def,
        Err(error) => panic!("{workload}: {error}"),
    };
    let parsed_ms = started.elapsed().as_secs_f64() * 1e3;
    let spec = match def.spec() {
        Ok(spec) => spec,
        Err(error) => panic!("{workload}: {error}"),
    };
    let _json = spec.to_json().to_string();
    let total_ms = started.elapsed().as_secs_f64() * 1e3;
    let line = json!({
        "bench": "spec",
        "workload": workload,
        "includes": "AgentDef::from_toml of the definition text, AgentDef::spec (layers flattened, every plugin reference parsed, the checksum) and the spec's JSON, as `clio agent spec` does; no file read",
        "n": n * 2,
        "references": n * 2,
        "plugins": spec.plugins().len(),
        "bytes": text.len(),
        "parse_ms": (parsed_ms * 1000.0).round() / 1000.0,
        "total_ms": (total_ms * 1000.0).round() / 1000.0,
        "per_op_us": (total_ms * 1000.0 / (n * 2) as f64 * 10.0).round() / 10.0,
        "goal_ms": 1000,
    });
    println!("{line}");
}

fn main() {
    measure("agent_spec_5000_references", 2_500);
    measure("agent_spec_50000_references", 25_000);
}
