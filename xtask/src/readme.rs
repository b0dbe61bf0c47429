//! `cargo xtask readme [--readme FILE]`: the README's quick start, run as a newcomer runs it.
//!
//! The README promises two commands, each the one line of the fenced block after its
//! sentence: "Run the main job …" and "Run the tests". This check reads both from the file
//! and runs them from the project root:
//! - the main job, in a fresh `$CLIO_HOME`, must exit 0;
//! - the test command must be one `.ci/run` runs, word for word (so CI runs what the README
//!   says), and must run: it is started with `CLIO_XTASK_SETUP_ONLY=1`, which makes
//!   `cargo xtask test` do its set-up and stop (the tiers run once, not twice).
//!
//! An edit that breaks either command fails the check, naming the command.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::project_root;

/// The sentence that introduces the main job's block.
const MAIN_JOB: &str = "Run the main job";

/// The sentence that introduces the test command's block.
const TESTS: &str = "Run the tests";

/// The two commands of the quick start.
#[derive(Debug, PartialEq)]
pub(crate) struct QuickStart {
    pub(crate) main_job: String,
    pub(crate) test: String,
}

/// `cargo xtask readme`: checks the project's README, or the file given with `--readme`.
pub(crate) fn command(args: &[String]) -> Result<(), String> {
    let readme = match args {
        [] => project_root().join("README.md"),
        [flag, file] if flag == "--readme" => Path::new(file).to_path_buf(),
        _ => return Err("usage: cargo xtask readme [--readme FILE]".to_owned()),
    };
    let summary = check(&readme)?;
    eprintln!("xtask readme: {summary}");
    Ok(())
}

/// Reads the quick start of `readme` and runs both commands; returns what ran.
pub(crate) fn check(readme: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(readme)
        .map_err(|e| format!("cannot read {}: {e}", readme.display()))?;
    let quick = quick_start(&text).map_err(|e| format!("{}: {e}", readme.display()))?;
    let root = project_root();
    let ci = std::fs::read_to_string(root.join(".ci/run"))
        .map_err(|e| format!("cannot read .ci/run: {e}"))?;
    if !ci.lines().any(|line| line.trim() == quick.test) {
        return Err(format!(
            "{}: the test command `{}` is not a line of .ci/run: CI must run what the README \
             says",
            readme.display(),
            quick.test
        ));
    }
    let test_took = run_shell(&quick.test, &[("CLIO_XTASK_SETUP_ONLY", "1")], None)
        .map_err(|e| format!("{}: the test command {e}", readme.display()))?;
    let home = std::env::temp_dir().join(format!("clio-readme-home-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).map_err(|e| format!("cannot create {home:?}: {e}"))?;
    let home_str = home.to_string_lossy().into_owned();
    let main_took = run_shell(&quick.main_job, &[("CLIO_HOME", home_str.as_str())], Some(&root));
    let _ = std::fs::remove_dir_all(&home);
    let main_took = main_took.map_err(|e| format!("{}: the main job {e}", readme.display()))?;
    Ok(format!(
        "quick start ran (the main job in {main_took:.0} s, the test command's set-up in \
         {test_took:.0} s)"
    ))
}

/// Runs `line` with `sh -c` from the project root (stdin closed), returning its seconds.
fn run_shell(line: &str, envs: &[(&str, &str)], dir: Option<&Path>) -> Result<f64, String> {
    eprintln!("$ {line}");
    let started = Instant::now();
    let status = Command::new("sh")
        .args(["-c", line])
        .envs(envs.iter().copied())
        .current_dir(dir.map_or_else(project_root, Path::to_path_buf))
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("`{line}` cannot be started: {e}"))?;
    if status.success() {
        Ok(started.elapsed().as_secs_f64())
    } else {
        Err(format!("`{line}` failed ({status})"))
    }
}

/// Finds the quick start's two commands in the README's text.
pub(crate) fn quick_start(text: &str) -> Result<QuickStart, String> {
    Ok(QuickStart { main_job: block_after(text, MAIN_JOB)?, test: block_after(text, TESTS)? })
}

/// Returns the one command of the first fenced block after the line that starts with
/// `sentence`.
fn block_after(text: &str, sentence: &str) -> Result<String, String> {
    let mut lines = text.lines().enumerate();
    lines
        .by_ref()
        .find(|(_, line)| line.starts_with(sentence))
        .ok_or_else(|| format!("no line starts with \"{sentence}\""))?;
    let (open, _) = lines
        .by_ref()
        .find(|(_, line)| line.starts_with("```"))
        .ok_or_else(|| format!("no fenced block follows \"{sentence}\""))?;
    let mut commands: Vec<&str> = Vec::new();
    for (_, line) in lines.by_ref() {
        if line.starts_with("```") {
            return match commands.as_slice() {
                [one] => Ok((*one).to_owned()),
                [] => Err(format!("the block after \"{sentence}\" (line {}) is empty", open + 1)),
                _ => Err(format!(
                    "the block after \"{sentence}\" (line {}) holds {} commands; the quick \
                     start promises one",
                    open + 1,
                    commands.len()
                )),
            };
        }
        if !line.trim().is_empty() {
            commands.push(line.trim());
        }
    }
    Err(format!("the block after \"{sentence}\" (line {}) is never closed", open + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_projects_readme_has_its_two_commands_and_ci_runs_the_test_command() {
        let root = project_root();
        let text = std::fs::read_to_string(root.join("README.md")).unwrap();
        let quick = quick_start(&text).unwrap();
        assert!(quick.main_job.contains("workflow run"), "{quick:?}");
        let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
        assert!(ci.lines().any(|l| l.trim() == quick.test), "{} not in .ci/run", quick.test);
    }

    #[test]
    fn a_quick_start_without_its_block_or_with_two_commands_is_named() {
        let text = "Run the main job:\n\n```sh\nclio a\nclio b\n```\n\nRun the tests:\n";
        let error = quick_start(text).unwrap_err();
        assert!(error.contains("holds 2 commands"), "{error}");
        let text = "Run the main job:\n\n```sh\nclio a\n```\n\nRun the tests:\n";
        let error = quick_start(text).unwrap_err();
        assert!(error.contains("no fenced block follows \"Run the tests\""), "{error}");
        let text = "Run the main job:\n```sh\nclio a\n```\nRun the tests:\n```sh\nmake test\n```\n";
        assert_eq!(
            quick_start(text).unwrap(),
            QuickStart { main_job: "clio a".into(), test: "make test".into() }
        );
    }

    #[test]
    fn a_command_that_does_not_run_fails_naming_it() {
        let error = run_shell("clio-no-such-program --version", &[], None).unwrap_err();
        assert!(error.contains("`clio-no-such-program --version` failed"), "{error}");
        assert!(run_shell("true", &[], None).is_ok());
    }
}
