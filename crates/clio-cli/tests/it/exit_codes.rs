//! One test per exit class, through the built binary: 0 ok, 1 bad input, 1 a failed run
//! (its cause kept as a `caused by:` line), 2 usage, 130 interrupted by Ctrl-C, 255 an
//! internal fault (stdout that cannot be written). Library errors are classified once,
//! by the `From` impls of the CLI's error; these tests hold the classes in place.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};

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
        "--no-input",
        "--quiet",
    ]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(outcome.stderr.contains("error: run 1 failed\n  caused by: "), "{}", outcome.render());
    assert!(outcome.stderr.contains("which is not trusted"), "{}", outcome.render());
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
    // A model server that takes connections and never answers: the run waits on its
    // first model call until Ctrl-C.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let home = temp_home("exit-interrupted");
    let config = format!(
        "[[provider]]\nname = \"local\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\n\
         [[model]]\naccount = \"local\"\nid = \"m\"\nprovider = \"local\"\n"
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(["--home", home.to_str().unwrap(), "run", "examples/agents/minimal.toml"])
        .args(["--input", "x"])
        .current_dir(workspace_root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    assert!(first.starts_with("run 1 started"), "{first}");
    // The model call is under way once the server has a connection.
    let (_connection, _) = listener.accept().unwrap();
    let pid = child.id().to_string();
    let sent = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(sent.success());
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("error: interrupted: run 1 stopped"), "{rest}");
    assert!(rest.contains("hint: continue it with `clio runs resume 1`"), "{rest}");
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
