//! One test per exit class, through the built binary: 0 ok, 1 bad input, 1 a failed run
//! (its cause kept as a `caused by:` line), 2 usage, 130 interrupted by Ctrl-C, 255 an
//! internal fault (stdout that cannot be written). Library errors are classified once,
//! by the `From` impls of the CLI's error; these tests hold the classes in place.

use std::process::Command;

use crate::support::{clio, temp_home, workspace_root};

#[test]
fn exit_0_when_all_is_well() {
    let outcome = clio(&["workflow", "check", "examples/workflows/batch7.json"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
}

#[test]
fn exit_1_for_bad_input() {
    let outcome = clio(&["workflow", "check", "examples/workflows/nosuch.json"]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(outcome.stderr.starts_with("error: cannot read"), "{}", outcome.render());
    // The I/O error stays the cause, not flattened into the message.
    assert!(outcome.stderr.contains("  caused by: No such file"), "{}", outcome.render());
    // A plugin path that is not there is named as such, not checked as an empty folder.
    let outcome = clio(&["plugin", "check", "examples/nosuch"]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(outcome.stderr.starts_with("error: examples/nosuch: no such file or folder"));
}

#[test]
fn exit_1_for_a_failed_run_with_its_cause() {
    let home = temp_home("exit-failed-run");
    let h = home.to_str().unwrap();
    let plugin = "examples/marketplace/plugins/materials";
    let outcome = clio(&[
        "--home",
        h,
        "run",
        "batch7",
        "--plugin",
        plugin,
        "--models",
        "examples/models/models.toml",
        "--input",
        "x",
        "--trust",
        "--option",
        "max_model_calls=1",
        "--quiet",
    ]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(
        outcome.stderr.starts_with("error: run 1 failed\n  caused by: "),
        "{}",
        outcome.render()
    );
    assert!(outcome.stderr.contains("limit max_model_calls (1) refused"), "{}", outcome.render());
}

#[test]
fn exit_2_for_usage() {
    let outcome = clio(&["runs", "list", "--status", "bogus"]);
    assert_eq!(outcome.code, 2, "{}", outcome.render());
    let outcome = clio(&["nosuch"]);
    assert_eq!(outcome.code, 2, "{}", outcome.render());
}

#[test]
fn exit_130_when_interrupted() {
    // The side-effects plugin's test tool sends the clio process SIGINT at an exact
    // point (the `pause` step), as a person's Ctrl-C would.
    let case = crate::side_effects::case("exit-130");
    let interrupted = case.run(Some("int-at-pause"));
    assert_eq!(interrupted.code, 130, "{}", interrupted.render());
    assert!(
        interrupted.stderr.contains("error: interrupted: run 1 stopped"),
        "{}",
        interrupted.render()
    );
    assert!(interrupted.stderr.contains("hint: continue it with `clio runs resume 1`"));
}

#[test]
fn exit_255_for_an_internal_fault() {
    // Output that cannot be written (a full device) is the machine's fault, not the
    // person's input.
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else { return };
    let output = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(["workflow", "check", "examples/workflows/batch7.json"])
        .current_dir(workspace_root())
        .env("CLIO_HOME", temp_home("exit-internal"))
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(255), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
}
