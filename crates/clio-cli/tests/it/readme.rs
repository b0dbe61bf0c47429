//! Every command in the README's `sh` blocks, run as written, must succeed: the front
//! door stays true.

use std::process::Command;

use crate::support::{clio, workspace_root};

/// Returns the lines of the README's `sh` code blocks.
fn readme_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let mut commands = Vec::new();
    let mut in_sh = false;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line.trim() == "```sh";
            continue;
        }
        if in_sh && !line.trim().is_empty() {
            commands.push(line.trim().to_owned());
        }
    }
    commands
}

#[test]
fn readme_has_the_two_commands() {
    let commands = readme_commands();
    assert!(commands.iter().any(|c| c == "cargo xtask test"), "{commands:?}");
    // CI runs what the README says: the test command is a line of `.ci/run`.
    let ci = std::fs::read_to_string(workspace_root().join(".ci/run")).unwrap();
    assert!(ci.lines().any(|l| l.trim() == "cargo xtask test"), ".ci/run does not run the tests");
    assert!(
        commands.iter().any(|c| c.starts_with("cargo run -q -p clio-cli -- ")),
        "the main job is missing: {commands:?}"
    );
}

#[test]
fn every_readme_command_runs() {
    const CLIO: &str = "cargo run -q -p clio-cli -- ";
    // `clio serve` runs until stopped: it is started in the background (on a free port)
    // for the commands after it, and stopped at the end.
    let mut serve: Option<std::process::Child> = None;
    for command in readme_commands() {
        if command == format!("{CLIO}serve") {
            let home =
                std::env::temp_dir().join(format!("clio-cli-default-home-{}", std::process::id()));
            let mut child = Command::new(env!("CARGO_BIN_EXE_clio"))
                .args(["serve", "--port", "0"])
                .current_dir(workspace_root())
                .env("CLIO_HOME", home)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let mut line = String::new();
            let stdout = child.stdout.take().unwrap();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
            assert!(line.starts_with("http://127.0.0.1:"), "`{command}` printed {line:?}");
            serve = Some(child);
        } else if let Some(rest) = command.strip_prefix(CLIO) {
            // The built binary stands in for `cargo run`, which would contend for the build lock.
            let args = shell_words(rest);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let outcome = clio(&args);
            assert_eq!(outcome.code, 0, "`{command}` failed:\n{}", outcome.render());
            assert!(!outcome.stdout.is_empty(), "`{command}` printed nothing");
        } else if command == "cargo xtask test" || command == "cargo xtask ci" {
            // These run the tests themselves (this one among them); CI runs the first, and
            // `cargo xtask readme` checks it runs.
        } else if let Some(target) = command.strip_prefix("cargo xtask ") {
            panic!("README command `{command}` ({target}) is not checked by this test; add it");
        } else {
            // Any other shell command must at least run successfully.
            let status =
                Command::new("sh").arg("-c").arg(&command).current_dir(workspace_root()).status();
            assert!(status.unwrap().success(), "`{command}` failed");
        }
    }
    if let Some(mut serve) = serve {
        let pid = serve.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let status = serve.wait().unwrap();
        assert!(status.success(), "`clio serve` did not stop cleanly: {status}");
    }
}

/// Splits a command line into words, honouring double quotes (all the README uses).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

#[test]
fn shell_words_split_like_a_shell() {
    assert_eq!(
        shell_words(r#"run a --input "Say hello"  x"#),
        ["run", "a", "--input", "Say hello", "x"]
    );
}
