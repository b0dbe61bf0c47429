//! The conventions a command-line tool keeps: shell completions, a man page and a Markdown
//! reference made from the command line's definition, the commit in `--version`, a closing summary line after
//! a run's progress, coloured only when asked (`--color always`) or on a terminal without
//! `NO_COLOR`, and logs on stderr only when asked (`-v`, `RUST_LOG`).

use std::process::Command;

use crate::support::{clio, temp_home, workspace_root};

#[test]
fn completions_and_the_man_page_print_on_stdout() {
    let bash = clio(&["completions", "bash"]);
    assert_eq!(bash.code, 0, "{}", bash.render());
    assert!(bash.stdout.contains("_clio()"), "{}", bash.stdout);
    assert!(bash.stdout.contains("workflow"), "subcommands complete");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let script = clio(&["completions", shell]);
        assert_eq!(script.code, 0, "{shell}: {}", script.render());
        assert!(!script.stdout.is_empty(), "{shell}");
    }
    let unknown = clio(&["completions", "tcsh"]);
    assert_eq!(unknown.code, 2, "{}", unknown.render());

    let man = clio(&["man"]);
    assert_eq!(man.code, 0, "{}", man.render());
    assert!(man.stdout.contains(".TH clio 1"), "{}", man.stdout);
    assert!(man.stdout.contains("Durable orchestration for AI agents"), "{}", man.stdout);
}

#[test]
fn the_markdown_reference_holds_every_command_help() {
    let page = clio(&["man", "--markdown"]);
    assert_eq!(page.code, 0, "{}", page.render());
    let text = &page.stdout;
    assert!(text.starts_with("# Command-line reference\n"), "{text}");
    // Each command is listed, linked to its heading, and its help shows its full usage.
    for command in ["clio runs show", "clio workflow run", "clio man"] {
        let anchor = command.replace(' ', "-");
        assert!(text.contains(&format!("[`{command}`](#{anchor})")), "{command} not listed");
        assert!(text.contains(&format!("`{command}`\n\n```text\n")), "{command}: no heading");
        assert!(text.contains(&format!("Usage: {command} ")), "{command}: no usage");
    }
    assert!(text.contains("Examples:\n  clio man > clio.1"), "after_help is part of the help");
    assert!(!text.contains("clio help"), "clap's own help subcommand is left out");
    assert_eq!(text.matches("```").count() % 2, 0, "every code block is closed");
}

#[test]
fn the_version_names_the_commit_when_the_build_knew_it() {
    let version = clio(&["--version"]);
    assert_eq!(version.code, 0, "{}", version.render());
    let text = version.stdout.trim();
    let expected = format!("clio {}", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&expected), "{text}");
    // Built from a git work tree, the short commit follows in parentheses.
    if let Some(rest) = text.strip_prefix(&format!("{expected} (")) {
        let commit = rest.trim_end_matches(')');
        assert!(commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit()), "{text}");
    } else {
        assert_eq!(text, expected);
    }
}

/// Runs the README's main job in a fresh home with `extra` arguments and `env`, returning
/// its stderr.
fn main_job(name: &str, extra: &[&str], env: &[(&str, &str)]) -> String {
    let home = temp_home(name);
    let h = home.to_str().unwrap();
    let plugin = "examples/marketplace/plugins/materials";
    let trusted = clio(&["--home", h, "plugin", "trust", plugin]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    let mut command = Command::new(env!("CARGO_BIN_EXE_clio"));
    command
        .args(["--home", h, "workflow", "run", "examples/workflows/batch7.json"])
        .args(["--task", "Review batch 7", "--plugin", plugin])
        .args(["--models", "examples/models/models.toml", "--workspace", "examples/workspace"])
        .args(["--editor", "independent_reviewer"])
        .args(extra)
        .current_dir(workspace_root())
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    stderr
}

#[test]
fn a_run_ends_with_a_summary_line_coloured_only_when_asked() {
    let plain = main_job("summary-plain", &[], &[]);
    let last = plain.lines().last().unwrap_or_default();
    assert!(last.starts_with("run 1 succeeded after "), "{plain}");
    assert!(last.ends_with("9 tasks (9 succeeded), 4778 tokens"), "{plain}");
    assert!(!plain.contains('\u{1b}'), "no colour off a terminal: {plain}");

    let coloured = main_job("summary-colour", &["--color", "always"], &[]);
    assert!(coloured.contains("run 1 \u{1b}[32msucceeded\u{1b}[0m after "), "{coloured}");

    let never = main_job("summary-never", &["--color", "never"], &[("NO_COLOR", "1")]);
    assert!(!never.contains('\u{1b}'), "{never}");

    // --quiet prints no progress, and so no summary.
    let quiet = main_job("summary-quiet", &["--quiet"], &[]);
    assert!(!quiet.contains("succeeded after"), "{quiet}");
}

/// Logging is off by default (warnings only); `-v` prints a run's start and end as log
/// lines on stderr, inside the run's span, `-vv` each call too, and `RUST_LOG` chooses
/// crate by crate; `-q` and `-v` together are a usage error.
#[test]
fn logs_go_to_stderr_only_when_asked() {
    let is_log = |line: &str, what: &str| line.contains("clio_flow") && line.contains(what);
    let plain = main_job("log-default", &[], &[]);
    assert!(!plain.lines().any(|l| l.contains("clio_flow")), "no log lines by default: {plain}");

    let verbose = main_job("log-v", &["-v"], &[]);
    let started = verbose.lines().find(|l| is_log(l, "run started")).unwrap_or_default();
    assert!(started.contains(" INFO run{run=1}: "), "{verbose}");
    assert!(started.contains("flow=workflow"), "{verbose}");
    let ended = verbose.lines().find(|l| is_log(l, "run ended")).unwrap_or_default();
    assert!(ended.contains("run{run=1}: ") && ended.contains("outcome=\"succeeded\""), "{verbose}");
    assert!(!verbose.contains("call started"), "calls are debug: {verbose}");
    // The progress and the summary are still there, after the log lines.
    assert!(verbose.lines().last().unwrap_or_default().starts_with("run 1 succeeded"), "{verbose}");

    let debug = main_job("log-vv", &["-vv"], &[]);
    let call = debug.lines().find(|l| is_log(l, "call started")).unwrap_or_default();
    assert!(call.contains(" DEBUG run{run=1}: "), "in the run's span: {debug}");
    assert!(call.contains("task=") && call.contains("target="), "{debug}");

    let chosen = main_job("log-rust-log", &[], &[("RUST_LOG", "clio_flow=debug")]);
    assert!(chosen.lines().any(|l| is_log(l, "call started")), "{chosen}");
    assert!(!chosen.contains("clio_journal"), "only clio_flow was asked for: {chosen}");

    let bad = main_job("log-bad", &[], &[("RUST_LOG", "clio_flow=loud")]);
    assert!(bad.starts_with("warning: RUST_LOG=clio_flow=loud: "), "{bad}");

    let both = crate::support::clio(&["-q", "-v", "models", "list"]);
    assert_eq!(both.code, 2, "{}", both.render());
}
