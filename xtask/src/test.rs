//! `cargo xtask test`: the README's test command. On a fresh machine it prepares what the
//! tests need, then runs every test tier and ends with one summary line.
//!
//! The set-up, in order, each step skipped when what it makes is already there (so a second
//! run installs nothing):
//! 1. The Debian packages the tiers use ([`PACKAGES`]): checked first, before anything is
//!    built. The missing ones are installed with `apt-get` as root, or with `sudo -n`; where
//!    neither is possible the command stops at once with the one command a person must run.
//! 2. The viewer test's npm packages (`npm ci` in `crates/clio-cli/tests/e2e`, when
//!    `node_modules` is missing or older than `package-lock.json`).
//! 3. A throwaway PostgreSQL cluster (`.ci/postgres`) in the target folder, unless
//!    `$CLIO_TEST_POSTGRES` names a server; it is stopped when the command ends.
//!
//! Then the tiers ([`TIERS`]): the Rust tests of the workspace (the PostgreSQL journal's
//! and the examples among them), the viewer in headless Chromium, and the README's quick
//! start ([`crate::readme`]).
//!
//! Two variables make the fallback paths testable: `CLIO_XTASK_ASSUME_MISSING` (a comma-
//! separated list of package names to treat as missing) and `CLIO_XTASK_NO_INSTALL=1`
//! (behave as a user who can neither be root nor use `sudo -n`).
//! `CLIO_XTASK_SETUP_ONLY=1` stops after the set-up: the README check uses it to show the
//! test command runs without running the tiers a second time.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::project_root;

/// A Debian package a tier needs, with how to tell it is present.
struct Package {
    /// The package's name for `apt-get install`.
    name: &'static str,
    /// What it is for, said when it is missing.
    why: &'static str,
    present: fn() -> bool,
}

/// The packages the tiers need, in the order they are named.
const PACKAGES: &[Package] = &[
    Package {
        name: "bubblewrap",
        why: "the sandbox of run_code scripts and plugin tools",
        present: || on_path("bwrap"),
    },
    Package {
        name: "chromium",
        why: "the viewer's browser test (headless)",
        present: || Path::new("/usr/bin/chromium").exists(),
    },
    Package {
        name: "python3-venv",
        why: "the venvs of the real-model tier and the Python tests",
        present: || {
            Command::new("python3")
                .args(["-c", "import ensurepip, venv"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        },
    },
    Package {
        name: "postgresql",
        why: "the PostgreSQL journal's tests (a throwaway cluster)",
        present: || std::env::var_os("CLIO_TEST_POSTGRES").is_some() || postgres_bin().is_some(),
    },
    Package {
        name: "nodejs",
        why: "the viewer's browser test (playwright-core)",
        present: || on_path("node"),
    },
    Package { name: "npm", why: "the viewer test's packages", present: || on_path("npm") },
];

/// One test tier: a cargo command and what it is called in the summary.
struct Tier {
    name: &'static str,
    args: &'static [&'static str],
}

/// The viewer's test, run as its own tier (it needs Chromium and node).
const VIEWER_FILTER: &str = "viewer_e2e::";

/// The cargo tiers, run in order with one build between them. The layers' examples are
/// tests of the first (`test = true`, docs/decisions.md "Examples run as tests").
const TIERS: &[Tier] = &[
    Tier {
        name: "rust",
        args: &["test", "--workspace", "--no-fail-fast", "--", "--skip", VIEWER_FILTER],
    },
    // `--test it` of every package: the viewer's test is in clio-cli's; no doctest is built
    // again.
    Tier { name: "viewer", args: &["test", "--workspace", "--test", "it", "--", VIEWER_FILTER] },
];

/// Runs the set-up and every tier; see the module's documentation.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    const ALL: &[&str] = &["rust", "viewer", "python", "readme"];
    for name in args {
        if !ALL.contains(&name.as_str()) {
            return Err(format!("no tier `{name}`: the tiers are {}", ALL.join(", ")));
        }
    }
    let wanted = |name: &str| args.is_empty() || args.iter().any(|a| a == name);
    let started = Instant::now();
    let root = project_root();
    let assumed = std::env::var("CLIO_XTASK_ASSUME_MISSING").unwrap_or_default();
    let assumed: Vec<&str> = assumed.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let may_install = std::env::var_os("CLIO_XTASK_NO_INSTALL").is_none();
    install_missing_packages(&assumed, may_install)?;
    npm_packages(&root)?;
    if std::env::var_os("CLIO_XTASK_SETUP_ONLY").is_some() {
        eprintln!("xtask test: set-up done (CLIO_XTASK_SETUP_ONLY is set: no tier was run)");
        return Ok(());
    }
    let mut passed = Vec::new();
    if TIERS.iter().any(|t| wanted(t.name)) {
        let cluster = Cluster::start(&root)?;
        for tier in TIERS.iter().filter(|t| wanted(t.name)) {
            let counts = cargo_tier(tier, &cluster.url)?;
            if counts.passed == 0 {
                return Err(format!(
                    "the {} tier ran no test: `cargo {}` found nothing to run",
                    tier.name,
                    tier.args.join(" ")
                ));
            }
            passed.push(format!("{} {}", tier.name, counts));
        }
    }
    if wanted("python")
        && let Some(counts) = python_tier(&root)?
    {
        passed.push(format!("python {counts}"));
    }
    if wanted("readme") {
        let readme = crate::readme::check(&root.join("README.md"))?;
        passed.push(format!("readme {readme}"));
    }
    eprintln!(
        "xtask test: all {} passed in {:.0} s: {}",
        if args.is_empty() { "tiers" } else { "tiers asked for" },
        started.elapsed().as_secs_f64(),
        passed.join(", ")
    );
    Ok(())
}

/// Installs the missing packages of [`PACKAGES`] (and those named in `assumed`), or says
/// what to run when this user cannot (or `may_install` is false). Nothing is built before
/// this.
fn install_missing_packages(assumed: &[&str], may_install: bool) -> Result<(), String> {
    let missing: Vec<&Package> =
        PACKAGES.iter().filter(|p| assumed.contains(&p.name) || !(p.present)()).collect();
    if missing.is_empty() {
        eprintln!("xtask test: Debian packages present (nothing to install)");
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|p| p.name).collect();
    let reasons: Vec<String> = missing.iter().map(|p| format!("{} ({})", p.name, p.why)).collect();
    let sudo: &[&str] = match installer(may_install) {
        Some(prefix) => prefix,
        None => {
            let each: Vec<String> = missing
                .iter()
                .map(|p| format!("  {}: {} (apt-get install {})", p.name, p.why, p.name))
                .collect();
            return Err(format!(
                "missing Debian packages, which this user cannot install (not root, and \
                 `sudo -n` is not allowed):\n{}\nRun:\n\n    sudo apt-get install {}\n\n\
                 then `cargo xtask test` again.",
                each.join("\n"),
                names.join(" ")
            ));
        }
    };
    eprintln!("xtask test: installing {}", reasons.join(", "));
    for apt in [
        &["apt-get", "update", "-q"][..],
        &[&["apt-get", "install", "-y", "-q"][..], &names].concat(),
    ] {
        let command: Vec<&str> = sudo.iter().chain(apt.iter()).copied().collect();
        let status = Command::new(command[0])
            .args(&command[1..])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| format!("cannot run `{}`: {e}", command.join(" ")))?;
        if !status.success() {
            return Err(format!(
                "`{}` failed ({status}); install the packages yourself: sudo apt-get install {}",
                command.join(" "),
                names.join(" ")
            ));
        }
    }
    let still: Vec<&str> = missing.iter().filter(|p| !(p.present)()).map(|p| p.name).collect();
    if !still.is_empty() {
        return Err(format!("apt-get ran, yet still missing: {}", still.join(", ")));
    }
    Ok(())
}

/// The prefix that runs a command as root: none as root, `sudo -n` where it is allowed,
/// `None` where neither (or `CLIO_XTASK_NO_INSTALL` is set).
fn installer(may_install: bool) -> Option<&'static [&'static str]> {
    if !may_install {
        return None;
    }
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() == "0" {
        return Some(&[]);
    }
    let sudo = Command::new("sudo")
        .args(["-n", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    sudo.then_some(&["sudo", "-n"][..])
}

/// Runs `npm ci` in the viewer test's folder unless its `node_modules` is newer than its
/// lock file (npm writes `node_modules/.package-lock.json` when it installs).
fn npm_packages(root: &Path) -> Result<(), String> {
    let dir = root.join("crates/clio-cli/tests/e2e");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let lock = modified(&dir.join("package-lock.json"));
    let installed = modified(&dir.join("node_modules/.package-lock.json"));
    if let (Some(lock), Some(installed)) = (lock, installed)
        && installed >= lock
        && dir.join("node_modules/playwright-core").is_dir()
    {
        eprintln!("xtask test: npm packages of {} up to date", dir.display());
        return Ok(());
    }
    eprintln!("$ npm ci (in {})", dir.display());
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .status()
        .map_err(|e| format!("cannot run npm (apt-get install npm): {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`npm ci` failed in {} ({status})", dir.display()))
    }
}

/// The tools of the Python tier, pinned (from PyPI): the tests, the lint and format checks,
/// and maturin, which builds the `clio-agent` wheel from `crates/clio-py`.
const PYTHON_TOOLS: &[&str] = &["pytest==9.2.0", "ruff==0.17.6", "maturin==1.16.0"];

/// The Python tier: the `clio-agent` wheel built by maturin (the native module
/// `clio_agent._native` from `crates/clio-py`, with the pure-Python package) and installed
/// into a venv kept in the target folder (made again only when the pins change), then the
/// package's tests (pytest, against the installed wheel, with `CLIO_BIN` the debug `clio`
/// for the agreement tests) and its lint and format checks (ruff). `None` when the
/// repository has no Python package.
fn python_tier(root: &Path) -> Result<Option<Counts>, String> {
    let package = root.join("python");
    if !package.join("pyproject.toml").is_file() {
        return Ok(None);
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let venv = target.join("python-venv");
    let python = venv.join("bin/python");
    let stamp = venv.join("clio-tools.txt");
    let wanted = PYTHON_TOOLS.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        let _ = std::fs::remove_dir_all(&venv);
        run_checked(Command::new("python3").args(["-m", "venv"]).arg(&venv), "python3 -m venv")?;
        run_checked(
            Command::new(&python).args(["-m", "pip", "install", "-q"]).args(PYTHON_TOOLS),
            "pip install (the Python tier's tools)",
        )?;
        std::fs::write(&stamp, &wanted).map_err(|e| format!("cannot write {stamp:?}: {e}"))?;
    } else {
        eprintln!("xtask test: Python venv {} up to date", venv.display());
    }
    let ruff = venv.join("bin/ruff");
    run_checked(Command::new(&ruff).args(["check", "."]).current_dir(&package), "ruff check")?;
    run_checked(
        Command::new(&ruff).args(["format", "--check", "."]).current_dir(&package),
        "ruff format --check",
    )?;
    // The wheel, as `pip install ./python` builds it but in the dev profile (the Rust tier
    // has built its crates already); installed over the last one.
    let wheels = target.join("python-wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    run_checked(
        Command::new(venv.join("bin/maturin"))
            .args(["build", "--quiet", "--out"])
            .arg(&wheels)
            .current_dir(&package),
        "maturin build (the clio-agent wheel)",
    )?;
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|e| format!("cannot read {wheels:?}: {e}"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| format!("maturin built no wheel in {}", wheels.display()))?;
    run_checked(
        Command::new(&python)
            .args(["-m", "pip", "install", "-q", "--force-reinstall", "--no-deps"])
            .arg(&wheel),
        "pip install (the clio-agent wheel)",
    )?;
    // The agreement tests run the CLI on what Python froze.
    run_checked(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
            .args(["build", "--quiet", "-p", "clio-cli", "--bin", "clio"])
            .current_dir(root),
        "cargo build -p clio-cli (the clio binary of the agreement tests)",
    )?;
    // pytest's own script, not `python -m pytest`, so that the clone's folder is not put
    // first on sys.path: the tests import the installed wheel, native module included.
    eprintln!("$ pytest -q (in {})", package.display());
    let output = Command::new(venv.join("bin/pytest"))
        .args(["-q", "-p", "no:cacheprovider"])
        .current_dir(&package)
        .env("CLIO_BIN", target.join("debug/clio"))
        .env_remove("PYTHONPATH")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run pytest: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!("{stdout}");
    if !output.status.success() {
        return Err(format!(
            "the python tier failed: pytest in {} ({})",
            package.display(),
            output.status
        ));
    }
    let passed = stdout
        .lines()
        .rev()
        .find_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words
                .windows(2)
                .find(|w| w[1].trim_end_matches(',') == "passed")
                .and_then(|w| w[0].parse().ok())
        })
        .unwrap_or(0);
    if passed == 0 {
        return Err(format!("the python tier ran no test in {}", package.display()));
    }
    Ok(Some(Counts { passed, ignored: 0 }))
}

/// Runs `command`, failing with `what` when it fails.
fn run_checked(command: &mut Command, what: &str) -> Result<(), String> {
    eprintln!("$ {what}");
    let status = command.status().map_err(|e| format!("cannot run {what}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{what} failed ({status})")) }
}

/// The PostgreSQL server the tests use: `$CLIO_TEST_POSTGRES`, else a throwaway cluster
/// started here and stopped on drop.
struct Cluster {
    url: String,
    dir: Option<PathBuf>,
}

impl Cluster {
    fn start(root: &Path) -> Result<Cluster, String> {
        if let Ok(url) = std::env::var("CLIO_TEST_POSTGRES") {
            eprintln!("xtask test: PostgreSQL from $CLIO_TEST_POSTGRES: {url}");
            return Ok(Cluster { url, dir: None });
        }
        let base = std::env::temp_dir().join(format!("clio-xtask-pg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {base:?}: {e}"))?;
        // The cluster belongs to the postgres user when this runs as root: it must reach it.
        let _ = Command::new("chmod").arg("755").arg(&base).status();
        let dir = base.join("cluster");
        let output = Command::new("bash")
            .arg(root.join(".ci/postgres"))
            .arg("start")
            .arg(&dir)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run .ci/postgres: {e}"))?;
        if !output.status.success() {
            return Err(format!("cannot start a PostgreSQL cluster in {}", dir.display()));
        }
        let url = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        eprintln!("xtask test: PostgreSQL for the tests: {url}");
        Ok(Cluster { url, dir: Some(base) })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(base) = &self.dir {
            let _ = Command::new("bash")
                .arg(project_root().join(".ci/postgres"))
                .arg("stop")
                .arg(base.join("cluster"))
                .status();
            let _ = std::fs::remove_dir_all(base);
        }
    }
}

/// What one tier's test harnesses reported.
#[derive(Default, Debug, PartialEq)]
struct Counts {
    passed: u64,
    ignored: u64,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} passed", self.passed)?;
        if self.ignored > 0 {
            write!(f, " ({} ignored)", self.ignored)?;
        }
        Ok(())
    }
}

/// Runs one tier, its output passed through, and sums its `test result:` lines.
fn cargo_tier(tier: &Tier, postgres: &str) -> Result<Counts, String> {
    eprintln!("$ cargo {}", tier.args.join(" "));
    let mut child = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(tier.args)
        .env("CLIO_TEST_POSTGRES", postgres)
        .current_dir(project_root())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let mut counts = Counts::default();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            add_result_line(&line, &mut counts);
        }
    }
    let status = child.wait().map_err(|e| format!("cannot wait for cargo: {e}"))?;
    if status.success() {
        Ok(counts)
    } else {
        Err(format!("the {} tier failed: `cargo {}` ({status})", tier.name, tier.args.join(" ")))
    }
}

/// Adds a harness's `test result: ok. 12 passed; 0 failed; 1 ignored; …` line to `counts`.
fn add_result_line(line: &str, counts: &mut Counts) {
    let Some(rest) = line.trim().strip_prefix("test result: ") else { return };
    for part in rest.split(';') {
        let mut words = part.split_whitespace().rev();
        let (Some(kind), Some(number)) = (words.next(), words.next()) else { continue };
        let Ok(number) = number.parse::<u64>() else { continue };
        match kind {
            "passed" => counts.passed += number,
            "ignored" => counts.ignored += number,
            _ => {}
        }
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// The newest PostgreSQL server's `bin` folder of Debian's packages, or `initdb`'s on the
/// `PATH` (as `.ci/postgres` looks for it).
fn postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    found.sort();
    found.pop().or_else(|| on_path("initdb").then(|| PathBuf::from("initdb")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_are_summed() {
        let mut counts = Counts::default();
        for line in [
            "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 3 filtered out; finished in 0.20s",
            "running 3 tests",
            "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
            "test result: ok. 5 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
        ] {
            add_result_line(line, &mut counts);
        }
        assert_eq!(counts, Counts { passed: 17, ignored: 1 });
        assert_eq!(counts.to_string(), "17 passed (1 ignored)");
    }

    #[test]
    fn a_missing_package_that_cannot_be_installed_names_the_command_to_run() {
        let error = install_missing_packages(&["chromium"], false).unwrap_err();
        assert!(error.contains("apt-get install chromium"), "{error}");
        assert!(error.contains("viewer's browser test"), "{error}");
    }
}
