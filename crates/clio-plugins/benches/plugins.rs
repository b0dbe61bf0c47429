//! W6 (SPEC §10): resolve an agent over a generated marketplace of 1,000 plugins × 5
//! versions with ranged dependencies; prints one JSON line per measurement with the time
//! and the peak memory (`VmHWM` of `/proc/self/status`).
//!
//! Issue 41's bounds, one line each: `plugin check` of a folder whose manifest declares
//! 10,000 tools (goal 1 s), and resolution on three generated unsatisfiable marketplaces
//! of 20 plugins × 5 versions (goal 1 s each; plain backtracking took more than 30 s at 9
//! plugins). See `unsatisfiable` for the three shapes.
//!
//! The marketplace is generated from a fixed seed, so every run resolves the same
//! problem. Plugin `i` depends on two or three plugins among the next 40 with ranges
//! that all admit some `1.x`; the newest version of every tenth plugin needs a plugin
//! that does not exist, so the search has to back up to the next version there. The
//! agent needs the first ten plugins, which bring in nearly the whole marketplace.
#![allow(clippy::print_stdout)]

use std::time::Instant;

use clio_plugins::{Candidate, Index, check, digest_folder, resolve, resolve_with_stats};
use clio_spec::PluginRef;
use semver::Version;
use serde_json::json;

const PLUGINS: usize = 1_000;
const VERSIONS: [&str; 5] = ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "2.0.0"];
const RANGES: [&str; 5] = ["^1", ">=1.1.0", "*", "1.x || 2.x", "<1.3.0"];
const RUNS: usize = 5;

/// A small xorshift generator: the benchmark must not depend on a random crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % below as u64).unwrap_or(0)
    }
}

fn reference(text: &str) -> PluginRef {
    match PluginRef::parse(text) {
        Ok(r) => r,
        Err(err) => panic!("generated reference {text:?}: {err}"),
    }
}

fn marketplace() -> Index {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut index = Index::new();
    for i in 0..PLUGINS {
        for (v, version) in VERSIONS.iter().enumerate() {
            let mut requires = Vec::new();
            let n_deps = 2 + rng.next(2);
            for _ in 0..n_deps {
                let span = (PLUGINS - i - 1).min(40);
                if span == 0 {
                    break;
                }
                let dep = i + 1 + rng.next(span);
                requires.push(reference(&format!("p{dep}@{}", RANGES[rng.next(RANGES.len())])));
            }
            if i % 10 == 0 && v == VERSIONS.len() - 1 {
                requires.push(reference("missing@^9"));
            }
            index.add(Candidate {
                marketplace: "bench".to_owned(),
                id: format!("p{i}"),
                version: Version::parse(version).unwrap_or_else(|err| panic!("{version}: {err}")),
                requires,
            });
        }
    }
    index
}

fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let started = Instant::now();
    let index = marketplace();
    let generate_ms = started.elapsed().as_secs_f64() * 1e3;
    let root: Vec<PluginRef> = (0..10).map(|i| reference(&format!("p{i}@^1"))).collect();
    let mut times = Vec::new();
    let mut resolved = 0;
    for _ in 0..RUNS {
        let started = Instant::now();
        match resolve(&index, "agent bench", &root) {
            Ok(res) => resolved = res.plugins.len(),
            Err(err) => panic!("W6 should resolve: {err}"),
        }
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let round = |ms: f64| (ms * 1000.0).round() / 1000.0;
    let line = json!({
        "bench": "plugins",
        "workload": "W6",
        "includes": "resolving an agent that needs ten plugins over a generated, in-memory marketplace of 1,000 plugins x 5 versions with ranged dependencies (every tenth newest version unsatisfiable); the median of the runs, no files read",
        "plugins": PLUGINS,
        "candidates": index.len(),
        "resolved": resolved,
        "runs": RUNS,
        "generate_ms": round(generate_ms),
        "resolve_ms_median": round(times[RUNS / 2]),
        "resolve_ms_min": round(times[0]),
        "goal_ms": 50,
        "peak_rss_kb": peak_rss_kb(),
    });
    println!("{line}");
    check_many_tools();
    digest_with_git();
    for shape in ["late_wipeout", "chain_to_conflict", "pair_conflict"] {
        resolve_unsatisfiable(shape);
    }
}

const TOOLS: usize = 10_000;

/// `plugin check` of a folder whose manifest declares [`TOOLS`] tools, every one run by
/// the same executable.
fn check_many_tools() {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("a temporary folder: {err}"));
    let clio = dir.path().join("ai.iowarp.clio");
    std::fs::create_dir_all(clio.join("bin")).unwrap_or_else(|err| panic!("{err}"));
    let tool = clio.join("bin/tool");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap_or_else(|err| panic!("{err}"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|err| panic!("{err}"));
    }
    let mut manifest = String::from("id = \"many\"\nversion = \"1.0.0\"\n");
    for i in 0..TOOLS {
        manifest.push_str(&format!(
            "\n[[tools]]\nname = \"tool_{i}\"\ndescription = \"tool number {i}\"\ncommand = \"bin/tool\"\ninput_schema = {{ type = \"object\" }}\n"
        ));
    }
    std::fs::write(clio.join("plugin.toml"), &manifest).unwrap_or_else(|err| panic!("{err}"));
    let mut times = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let report = check(dir.path());
        times.push(started.elapsed().as_secs_f64() * 1e3);
        assert!(report.ok, "the generated plugin checks: {}", report.render());
    }
    times.sort_by(f64::total_cmp);
    let round = |ms: f64| (ms * 1000.0).round() / 1000.0;
    let line = json!({
        "bench": "plugins",
        "workload": "check_10000_tools",
        "includes": "clio_plugins::check of a plugin folder whose plugin.toml declares 10,000 tools (about 1 MB), reading and parsing the manifest, checking every tool's command file and the cross-plugin rules; the median of the runs",
        "tools": TOOLS,
        "manifest_bytes": manifest.len(),
        "runs": RUNS,
        "check_ms_median": round(times[RUNS / 2]),
        "check_ms_min": round(times[0]),
        "goal_ms": 1000,
        "peak_rss_kb": peak_rss_kb(),
    });
    println!("{line}");
}

/// The content digest of a plugin folder with a `.git` of 2,000 files, 32 MiB in all (a
/// repository's loose objects), which the digest covers since issue 41.
fn digest_with_git() {
    const FILES: usize = 2_000;
    const FILE_BYTES: usize = 16 * 1024;
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("a temporary folder: {err}"));
    let clio = dir.path().join("ai.iowarp.clio");
    std::fs::create_dir_all(&clio).unwrap_or_else(|err| panic!("{err}"));
    std::fs::write(clio.join("plugin.toml"), "id = \"git\"\nversion = \"1.0.0\"\n")
        .unwrap_or_else(|err| panic!("{err}"));
    let mut rng = Rng(7);
    for i in 0..FILES {
        let folder = dir.path().join(format!(".git/objects/{:02x}", i % 256));
        std::fs::create_dir_all(&folder).unwrap_or_else(|err| panic!("{err}"));
        let bytes: Vec<u8> = (0..FILE_BYTES).map(|_| rng.next(256) as u8).collect();
        std::fs::write(folder.join(format!("{i:038x}")), bytes)
            .unwrap_or_else(|err| panic!("{err}"));
    }
    let mut times = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        digest_folder(dir.path()).unwrap_or_else(|err| panic!("{err}"));
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let round = |ms: f64| (ms * 1000.0).round() / 1000.0;
    let mib = (FILES * FILE_BYTES) as f64 / (1024.0 * 1024.0);
    let line = json!({
        "bench": "plugins",
        "workload": "digest_with_git_32mib",
        "includes": "clio_plugins::digest_folder of a plugin folder whose .git holds 2,000 files of 16 KiB (32 MiB), warm page cache: the walk, a stat and a SHA-256 of every file; the median of the runs",
        "files": FILES + 1,
        "mib": mib,
        "runs": RUNS,
        "digest_ms_median": round(times[RUNS / 2]),
        "digest_ms_min": round(times[0]),
        "ms_per_mib": round(times[RUNS / 2] / mib),
    });
    println!("{line}");
}

const UNSAT_PLUGINS: usize = 20;

/// Resolves one of the unsatisfiable marketplaces `unsatisfiable` builds.
fn resolve_unsatisfiable(shape: &str) {
    let (index, root) = unsatisfiable(shape, UNSAT_PLUGINS);
    let mut times = Vec::new();
    let mut steps = 0;
    let mut message = String::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let (result, stats) = resolve_with_stats(&index, "agent bench", &root);
        times.push(started.elapsed().as_secs_f64() * 1e3);
        steps = stats.steps;
        match result {
            Ok(_) => panic!("{shape} should not resolve"),
            Err(err) => message = err.to_string(),
        }
    }
    times.sort_by(f64::total_cmp);
    let round = |ms: f64| (ms * 1000.0).round() / 1000.0;
    let line = json!({
        "bench": "plugins",
        "workload": format!("unsatisfiable_{shape}_{UNSAT_PLUGINS}"),
        "includes": "resolving an agent over a generated, in-memory unsatisfiable marketplace of 20 plugins x 5 versions (plus the plugins of the conflict) until the resolver reports why; the median of the runs",
        "plugins": UNSAT_PLUGINS,
        "candidates": index.len(),
        "steps": steps,
        "runs": RUNS,
        "resolve_ms_median": round(times[RUNS / 2]),
        "resolve_ms_min": round(times[0]),
        "goal_ms": 1000,
        "explanation_chars": message.len(),
    });
    println!("{line}");
}

/// An unsatisfiable marketplace of `n` plugins `p0..` of 5 versions each, and the agent's
/// references, in one of three shapes that make a plain backtracking search try every
/// combination of the `p` plugins' versions:
/// - `late_wipeout`: the agent needs every `p` and then `z`, whose every version needs
///   `w@^2`, of which only 1.x exists;
/// - `chain_to_conflict`: the agent needs `shared@^1` and `p0`; each `p` needs the next,
///   and the last needs `shared@^2`;
/// - `pair_conflict`: the agent needs every `p` and then `x` and `y`; every `x` needs
///   `c@^1` and every `y` needs `c@^2`.
fn unsatisfiable(shape: &str, n: usize) -> (Index, Vec<PluginRef>) {
    let mut index = Index::new();
    let mut add = |id: &str, version: &str, requires: Vec<PluginRef>| {
        index.add(Candidate {
            marketplace: "bench".to_owned(),
            id: id.to_owned(),
            version: Version::parse(version).unwrap_or_else(|err| panic!("{version}: {err}")),
            requires,
        });
    };
    let versions = ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0"];
    let mut root = Vec::new();
    match shape {
        "late_wipeout" => {
            for i in 0..n {
                for v in versions {
                    add(&format!("p{i}"), v, Vec::new());
                }
                root.push(reference(&format!("p{i}@^1")));
            }
            for v in versions {
                add("z", v, vec![reference("w@^2")]);
            }
            add("w", "1.0.0", Vec::new());
            root.push(reference("z"));
        }
        "chain_to_conflict" => {
            for i in 0..n {
                let next = if i + 1 < n {
                    reference(&format!("p{}@^1", i + 1))
                } else {
                    reference("shared@^2")
                };
                for v in versions {
                    add(&format!("p{i}"), v, vec![next.clone()]);
                }
            }
            for v in versions.iter().chain(&["2.0.0"]) {
                add("shared", v, Vec::new());
            }
            root.push(reference("shared@^1"));
            root.push(reference("p0"));
        }
        _ => {
            for i in 0..n {
                for v in versions {
                    add(&format!("p{i}"), v, Vec::new());
                }
                root.push(reference(&format!("p{i}")));
            }
            for v in versions {
                add("x", v, vec![reference("c@^1")]);
                add("y", v, vec![reference("c@^2")]);
            }
            add("c", "1.0.0", Vec::new());
            add("c", "2.0.0", Vec::new());
            root.push(reference("x"));
            root.push(reference("y"));
        }
    }
    (index, root)
}
