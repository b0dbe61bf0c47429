//! W8's workloads run in this process, each run alternated with a `clio workflow run` of
//! the same workflow (issue 24): what the process around a run costs, apart from what its
//! tool calls cost.
//!
//! The `cli` bench compares the binary with the flow bench, whose steps call closures;
//! the binary's steps are MCP calls to a server process, so that ratio mixes the two. Here
//! both sides run the same workflow file, the same plugin and its MCP server (a copy of
//! the `cli` bench's binary, which this bench asks cargo for, so that the plugin the CLI
//! reads and digests is the one the `cli` bench measures) under the same sandbox (the
//! check's pass kept from an untimed warm-up run, as there):
//!
//! - the CLI side is the `cli` bench's run: the release binary from process start to exit,
//!   a home of its own (the plugin trusted first, untimed);
//! - the in-process side is clio-flow's `Runtime` on a fresh journal, the plugin
//!   registered as the binary registers it, on a tokio runtime built as the binary's
//!   foreground one (one worker that spins for awaited journal writes, the run a task on
//!   it), timed from the run's start to its end and the server's shutdown.
//!
//! Each workload runs 5 rounds, a CLI run then an in-process run. Each line reports the
//! in-process run of median time (`runs_ms` lists them), the CLI's (`cli_ms`,
//! `cli_runs_ms`), and `cli_ratio`, the median of each round's CLI time over its
//! in-process time (`cli_ratios`): the process's start, the journal's creation and open,
//! the plugin's read, digest and trust, the closing reports and the exit. The lines:
//! `W8_one_step_in_process`, `W8_W1_in_process_chain_1000`, `W8_W2_in_process_fanout_1000`
//! and `W8_W3_in_process_dag_10x100`. `CLIO_CLI_BENCH_ONLY=one,W2` runs only the
//! workloads named, as in the `cli` bench.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clio_flow::{
    FlowSelection, McpConfig, McpServers, Registry, RunOutcome, Runtime, RuntimeConfig, Sandbox,
    WorkflowRun, Workspace, register_plugin_with_mcp,
};
use clio_journal::{Journal, JournalConfig};
use serde_json::{Value, json};

mod w8;

use w8::{Case, RUNS, dag, median, report, round2, shaped, timed, write_plugin};

/// The in-process runs allocate as the `clio` binary does (`.cargo/config.toml`: jemalloc
/// with one arena).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn want(name: &str) -> bool {
    std::env::var("CLIO_CLI_BENCH_ONLY").map_or(true, |only| only.split(',').any(|w| w == name))
}

/// Returns the `cli` bench's binary, built if it is not: the plugin's MCP server. This
/// bench's own binary links the whole runtime, and a plugin that brings a bigger server
/// costs the CLI a longer digest on every run.
fn cli_bench_binary() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_owned());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["bench", "-q", "-p", "clio-cli", "--bench", "cli", "--no-run"])
        .arg("--message-format=json")
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "building the cli bench failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "cli")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo names the cli bench's executable")
}

/// The in-process side: the plugin as loaded from its folder, the sandbox the CLI's runs
/// get, and a tokio runtime built as the CLI's foreground one.
struct InProcess {
    tokio: tokio::runtime::Runtime,
    plugin: clio_plugins::Plugin,
    sandbox: Sandbox,
}

impl InProcess {
    fn new(plugin: &Path, cache: &Path) -> InProcess {
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .on_thread_park(|| clio_journal::spin_for_awaited_write(Duration::from_micros(500)))
            .enable_all()
            .build()
            .expect("tokio runtime");
        let plugin = clio_plugins::load_plugin(plugin).expect("the bench plugin loads");
        let sandbox = Sandbox {
            temp: std::env::temp_dir(),
            kept_check: Some(cache.join("clio").join("sandbox-check.json")),
            ..Sandbox::default()
        };
        InProcess { tokio, plugin, sandbox }
    }

    /// Runs workflow `file` on a fresh journal in `dir`; returns its milliseconds and the
    /// run's entries.
    fn run(&self, dir: &Path, file: &Path) -> (f64, usize) {
        let workspace_dir = dir.join("workspace");
        std::fs::create_dir_all(&workspace_dir).expect("workspace");
        let text = std::fs::read_to_string(file).expect("workflow file");
        let workflow = clio_workflow::Workflow::from_json(&text).expect("workflow parses");
        let journal = Journal::open(dir.join("journal.redb"), JournalConfig::default())
            .expect("journal opens");
        let workspace =
            Workspace::new(Some(workspace_dir.clone())).with_sandbox(self.sandbox.clone());
        let mcp = McpServers::new(McpConfig::default());
        let registry =
            register_plugin_with_mcp(Registry::new(), &self.plugin, true, &workspace, &mcp)
                .expect("the plugin registers");
        let config = RuntimeConfig {
            workspace: Some(workspace_dir),
            sandbox: self.sandbox.clone(),
            interactive: false,
            ..RuntimeConfig::default()
        };
        let runtime = Runtime::new(journal.clone(), registry, config);
        let input = WorkflowRun::new(workflow, "bench").input();
        let (ms, report) = self.tokio.block_on(async {
            let t = Instant::now();
            // On the worker, as the CLI drives its run: a task there spins for its awaited
            // journal writes before it sleeps, where `block_on`'s own thread would sleep
            // (driven from `block_on`, the 1,000-step chain took about 320 ms against 200).
            let run =
                tokio::spawn(
                    async move { runtime.run(FlowSelection::new("workflow"), input).await },
                );
            let report = run.await.expect("the in-process run's task");
            mcp.shutdown().await;
            (t.elapsed().as_secs_f64() * 1000.0, report)
        });
        let report = report.expect("the in-process run");
        assert!(
            matches!(report.outcome, RunOutcome::Succeeded(_)),
            "the in-process run of {}: {:?}",
            file.display(),
            report.outcome
        );
        let entries = journal.entries(report.run).expect("entries").len();
        (ms, entries)
    }
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let plugin = write_plugin(dir, &cli_bench_binary());
    let files = dir.join("workflows");
    std::fs::create_dir_all(&files).expect("workflows folder");
    let write = |name: &str, text: String| {
        let path = files.join(name);
        std::fs::write(&path, text).expect("workflow file");
        path
    };
    let one = write("one.json", shaped(1, true));
    // Untimed, as in the `cli` bench: the binaries into the page cache, the sandbox check
    // kept, and the in-process side's first run behind it.
    let warm = Case::new(dir, "warm-up", &plugin);
    timed(warm.workflow(&one), "warm-up");
    let twin = InProcess::new(&plugin, &dir.join("cache"));
    twin.run(&dir.join("warm-up-in-process"), &one);

    let workloads = [
        ("one", "W8_one_step_in_process", one, "a 1-step workflow", 1, None),
        (
            "W1",
            "W8_W1_in_process_chain_1000",
            write("chain.json", shaped(1_000, true)),
            "a 1,000-step chain workflow",
            1_000,
            Some(1.3),
        ),
        (
            "W2",
            "W8_W2_in_process_fanout_1000",
            write("fanout.json", shaped(1_000, false)),
            "a 1,000-way fan-out workflow",
            1_000,
            Some(1.5),
        ),
        (
            "W3",
            "W8_W3_in_process_dag_10x100",
            write("dag.json", dag()),
            "the 10x100 DAG workflow",
            1_000,
            Some(1.5),
        ),
    ];
    for (name, bench, file, what, n, goal) in workloads {
        if !want(name) {
            continue;
        }
        let (mut cli, mut in_process, mut entries, mut cli_entries) =
            (Vec::new(), Vec::new(), 0, 0);
        for i in 0..RUNS {
            let case = Case::new(dir, &format!("{name}-{i}"), &plugin);
            cli.push(round2(timed(case.workflow(&file), name)));
            cli_entries = case.entries();
            let (ms, counted) = twin.run(&dir.join(format!("{name}-in-process-{i}")), &file);
            in_process.push(round2(ms));
            entries = counted;
        }
        let ratios: Vec<f64> =
            cli.iter().zip(&in_process).map(|(cli, base)| round2(cli / base)).collect();
        let in_process_ms = median(&in_process);
        let mut extra = json!({
            "includes": format!("{what} of read-only no-op MCP tool targets run in this process by clio-flow's Runtime: the cli bench's plugin, MCP server and sandbox, a fresh journal, a tokio runtime built as the clio binary's (the run a task on its one worker); from the run's start to its end and the server's shutdown; the median of {RUNS} runs, each after a clio workflow run of the same file (cli_runs_ms), whose time over it is cli_ratio (the median of each round's, cli_ratios)"),
            "entries": entries,
            "cli_entries": cli_entries,
            "runs_ms": in_process,
            "cli_ms": median(&cli),
            "cli_runs_ms": cli,
            "cli_ratio": median(&ratios),
            "cli_ratios": ratios,
        });
        if let Some(goal) = goal {
            extra["goal_cli_ratio"] = json!(goal);
        }
        report(bench, n, in_process_ms, extra);
    }
}
