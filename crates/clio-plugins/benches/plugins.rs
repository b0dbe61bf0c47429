//! W6 (SPEC §10): resolve an agent over a generated marketplace of 1,000 plugins × 5
//! versions with ranged dependencies; prints one JSON line per measurement with the time
//! and the peak memory (`VmHWM` of `/proc/self/status`).
//!
//! The marketplace is generated from a fixed seed, so every run resolves the same
//! problem. Plugin `i` depends on two or three plugins among the next 40 with ranges
//! that all admit some `1.x`; the newest version of every tenth plugin needs a plugin
//! that does not exist, so the search has to back up to the next version there. The
//! agent needs the first ten plugins, which bring in nearly the whole marketplace.
#![allow(clippy::print_stdout)]

use std::time::Instant;

use clio_plugins::{Candidate, Index, resolve};
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
}
