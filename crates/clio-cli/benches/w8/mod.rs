//! What the CLI benches share (`cli`, `cli_in_process`): the test plugin and its workflow
//! files, a home of its own per run, a timed `clio workflow run`, and the report line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

/// Set in the plugin's server: the bench binary answers MCP on stdin and stdout.
pub(crate) const SERVER: &str = "CLIO_CLI_BENCH_MCP_SERVER";

/// How many times each workflow line runs; the line reports the median.
pub(crate) const RUNS: usize = 5;

/// The release `clio` binary this bench was built with, colourless, reading nothing.
pub(crate) fn clio() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_clio"));
    command.env("NO_COLOR", "1").stdin(Stdio::null());
    command
}

/// Rounds to two decimals.
pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Prints one bench line: `bench`, `n`, `total_ms`, `per_op_us` and the fields of `extra`.
pub(crate) fn report(bench: &str, n: u64, ms: f64, extra: Value) {
    let mut line = json!({
        "bench": bench,
        "n": n,
        "total_ms": (ms * 1000.0).round() / 1000.0,
        "per_op_us": ((ms * 1000.0 / n.max(1) as f64) * 10.0).round() / 10.0,
    });
    if let (Some(obj), Value::Object(more)) = (line.as_object_mut(), extra) {
        obj.extend(more);
    }
    println!("{line}");
}

/// Returns the median of `values` (the later of the two middle ones for an even count).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// Writes the test plugin under `dir`, its MCP server a copy of `server` (the `cli` bench's
/// binary, which answers as the server when [`SERVER`] is set); returns the plugin's folder.
pub(crate) fn write_plugin(dir: &Path, server: &Path) -> PathBuf {
    let plugin = dir.join("noop-plugin");
    let meta = plugin.join("ai.iowarp.clio");
    std::fs::create_dir_all(meta.join("bin")).expect("plugin folder");
    std::fs::copy(server, meta.join("bin/noop-server")).expect("the server binary");
    let manifest = format!(
        r#"# The no-op tool of the W8 bench (crates/clio-cli/benches/cli.rs).
id = "bench-noop"
version = "0.1.0"
description = "A read-only no-op tool on an MCP server, for the CLI bench."

[[mcp_servers]]
name = "noop"
command = "bin/noop-server"
env = {{ {SERVER} = "1" }}

[[tools]]
name = "noop"
description = "Return the arguments."
read_only = true
mcp = "noop"
input_schema = {{ type = "object", properties = {{ i = {{ type = "integer" }} }} }}
"#
    );
    std::fs::write(meta.join("plugin.toml"), manifest).expect("plugin manifest");
    plugin
}

/// Returns a workflow file's text: `n` steps of `noop`, a chain or a fan-out.
pub(crate) fn shaped(n: usize, chain: bool) -> String {
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let mut step = json!({ "id": format!("s{i}"), "target": "noop", "input": { "i": i } });
            if chain && i > 0 {
                step["after"] = json!([format!("s{}", i - 1)]);
            }
            step
        })
        .collect();
    json!({ "steps": steps }).to_string()
}

/// Returns the flow bench's 10 × 100 DAG as a workflow file's text.
pub(crate) fn dag() -> String {
    let mut steps = Vec::new();
    for layer in 0..10 {
        for i in 0..100 {
            let mut step =
                json!({ "id": format!("s{layer}_{i}"), "target": "noop", "input": { "i": i } });
            if layer > 0 {
                step["after"] = json!([
                    format!("s{}_{}", layer - 1, i),
                    format!("s{}_{}", layer - 1, (i + 1) % 100)
                ]);
            }
            steps.push(step);
        }
    }
    json!({ "steps": steps }).to_string()
}

/// A home of its own with the plugin trusted in it, and a workspace.
pub(crate) struct Case {
    pub(crate) home: PathBuf,
    pub(crate) workspace: PathBuf,
    plugin: PathBuf,
    /// The user's cache folder every run shares (`XDG_CACHE_HOME`), where the sandbox
    /// check's pass is kept: the bench's own, not the person's.
    cache: PathBuf,
}

impl Case {
    pub(crate) fn new(dir: &Path, name: &str, plugin: &Path) -> Case {
        let home = dir.join(name);
        let workspace = home.join("workspace");
        std::fs::create_dir_all(&workspace).expect("workspace");
        let case = Case { home, workspace, plugin: plugin.to_path_buf(), cache: dir.join("cache") };
        let out = case.clio(&["plugin", "trust", path_str(plugin)]).output().expect("clio");
        assert!(out.status.success(), "trust: {}", String::from_utf8_lossy(&out.stderr));
        case
    }

    pub(crate) fn clio(&self, args: &[&str]) -> Command {
        let mut command = clio();
        command.current_dir(&self.workspace).arg("--home").arg(&self.home).args(args);
        command.env("XDG_CACHE_HOME", &self.cache);
        command
    }

    /// The command that runs workflow file `file`.
    pub(crate) fn workflow(&self, file: &Path) -> Command {
        let mut command = self.clio(&["workflow", "run", path_str(file), "--task", "bench"]);
        command.arg("--plugin").arg(&self.plugin).arg("--workspace").arg(&self.workspace).args([
            "--no-input",
            "--quiet",
            "--json",
        ]);
        command
    }

    /// Returns run 1's journal entries, counted with `runs show`.
    pub(crate) fn entries(&self) -> usize {
        let out = self.clio(&["runs", "show", "1", "--entries", "--json"]).output().expect("clio");
        let shown: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        shown["entries"].as_array().map_or(0, Vec::len)
    }
}

pub(crate) fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Runs `command` to its exit; returns its milliseconds, asserting that the run succeeded.
pub(crate) fn timed(mut command: Command, what: &str) -> f64 {
    let t = Instant::now();
    let out = command.output().expect("clio");
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(
        out.status.success() && outcome["status"] == "succeeded",
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ms
}
