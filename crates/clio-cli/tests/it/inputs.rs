//! Every input file `clio` reads is bounded and read only when it is a regular file
//! (issue 41): a device, a named pipe and a folder are refused at once, named as such;
//! invalid UTF-8 and a BOM are placed; a key named twice is refused by name; a control
//! character in a step's target is refused naming the step and field; a shared journal's
//! URL in config.toml that cannot be used exits 1 naming the file and field.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{Outcome, clio, temp_home};

fn folder(name: &str) -> PathBuf {
    temp_home(&format!("inputs-{name}"))
}

fn run(args: &[&str]) -> Outcome {
    clio(args)
}

/// Runs `clio` on a path that would block or never end if it were read (a FIFO nobody
/// writes to, `/dev/zero`): it must end on its own, long before the guard kills it.
fn run_guarded(args: &[&str]) -> Outcome {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(args)
        .env("CLIO_HOME", folder("guarded-home"))
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("clio {args:?} did not end: it blocked on or kept reading its input");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    Outcome {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn mkfifo(path: &Path) -> bool {
    let _ = std::fs::remove_file(path);
    std::process::Command::new("mkfifo").arg(path).status().is_ok_and(|s| s.success())
}

#[test]
fn a_device_is_refused_at_once_and_named() {
    if !Path::new("/dev/zero").exists() {
        return;
    }
    for args in [
        &["workflow", "check", "/dev/zero"][..],
        &["workflow", "show", "/dev/zero"],
        &["agent", "spec", "/dev/zero"],
        &["agent", "verify", "/dev/zero"],
        &["models", "list", "--models", "/dev/zero"],
    ] {
        let outcome = run_guarded(args);
        assert_eq!(outcome.code, 1, "{args:?}: {}", outcome.render());
        assert!(
            outcome.stderr.contains("/dev/zero: it is a character device, not a regular file"),
            "{args:?}: {}",
            outcome.render()
        );
    }
}

#[test]
fn a_named_pipe_does_not_block() {
    let dir = folder("fifo");
    let fifo = dir.join("workflow.json");
    if !mkfifo(&fifo) {
        return;
    }
    let path = fifo.to_str().unwrap();
    for args in
        [&["workflow", "check", path][..], &["workflow", "show", path], &["agent", "spec", path]]
    {
        let outcome = run_guarded(args);
        assert_eq!(outcome.code, 1, "{args:?}: {}", outcome.render());
        assert!(outcome.stderr.contains("it is a named pipe (FIFO)"), "{}", outcome.render());
        assert!(outcome.stderr.contains(path), "{}", outcome.render());
    }
    // config.toml as a FIFO: every command of the home reads it first.
    let home = folder("fifo-home");
    if mkfifo(&home.join("config.toml")) {
        let outcome = run_guarded(&["--home", home.to_str().unwrap(), "runs", "list"]);
        assert_eq!(outcome.code, 1, "{}", outcome.render());
        assert!(outcome.stderr.contains("config.toml: it is a named pipe"), "{}", outcome.render());
    }
}

#[test]
fn a_folder_is_named_as_such() {
    let dir = folder("dir");
    let outcome = run(&["workflow", "check", dir.to_str().unwrap()]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(
        outcome.stderr.contains("it is a directory, not a regular file"),
        "{}",
        outcome.render()
    );
    let home = folder("dir-home");
    std::fs::create_dir_all(home.join("config.toml")).unwrap();
    let outcome = run(&["--home", home.to_str().unwrap(), "models", "list"]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(outcome.stderr.contains("config.toml: it is a directory"), "{}", outcome.render());
}

#[test]
fn invalid_utf8_and_a_bom_are_placed() {
    let dir = folder("utf8");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, b"{\"steps\": [\n  {\"id\": \"a\", \"target\": \"t\xff\"}\n]}").unwrap();
    let outcome = run(&["workflow", "check", bad.to_str().unwrap()]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    let place =
        format!("{}:2:27: invalid UTF-8 at byte offset 38 (line 2, column 27)", bad.display());
    assert!(outcome.stderr.contains(&place), "{}", outcome.render());

    let bom = dir.join("agent.toml");
    std::fs::write(&bom, b"\xEF\xBB\xBFid = \"a\"\n").unwrap();
    let outcome = run(&["agent", "spec", bom.to_str().unwrap()]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    let place = format!("{}:1:1: the file starts with a UTF-8 byte order mark", bom.display());
    assert!(outcome.stderr.contains(&place), "{}", outcome.render());

    let home = folder("bom-home");
    std::fs::write(home.join("config.toml"), b"\xEF\xBB\xBF[limits]\nmax_depth = 3\n").unwrap();
    let outcome = run(&["--home", home.to_str().unwrap(), "models", "list"]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(outcome.stderr.contains("config.toml:1:1: "), "{}", outcome.render());
}

#[test]
fn a_key_named_twice_is_refused_by_name() {
    let dir = folder("dup");
    let workflow = dir.join("w.json");
    std::fs::write(&workflow, r#"{"steps": [{"id": "a", "target": "safe", "target": "rm"}]}"#)
        .unwrap();
    let outcome = run(&["workflow", "check", workflow.to_str().unwrap(), "--json"]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(
        outcome.stderr.contains("duplicate key `target` at line 1, column 42"),
        "{}",
        outcome.render()
    );
    let agent = dir.join("a.json");
    std::fs::write(&agent, r#"{"id": "a", "plugins": ["core"], "id": "b"}"#).unwrap();
    let outcome = run(&["agent", "spec", agent.to_str().unwrap()]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(outcome.stderr.contains(":1:34: duplicate key `id`"), "{}", outcome.render());
    // TOML refuses a key twice itself, with its place.
    let toml = dir.join("a.toml");
    std::fs::write(&toml, "id = \"a\"\nid = \"b\"\n").unwrap();
    let outcome = run(&["agent", "spec", toml.to_str().unwrap()]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(outcome.stderr.contains("a.toml:2:1: duplicate key `id`"), "{}", outcome.render());
    // config.toml and a models file too, by name.
    let home = folder("dup-home");
    std::fs::write(home.join("config.toml"), "[limits]\nmax_depth = 3\nmax_depth = 4\n").unwrap();
    let outcome = run(&["--home", home.to_str().unwrap(), "models", "list"]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(
        outcome.stderr.contains("config.toml:3:1: duplicate key `max_depth`"),
        "{}",
        outcome.render()
    );
    std::fs::remove_file(home.join("config.toml")).unwrap();
    let models = dir.join("models.toml");
    std::fs::write(&models, "[[provider]]\nname = \"x\"\nname = \"y\"\n").unwrap();
    let outcome = run(&[
        "--home",
        home.to_str().unwrap(),
        "models",
        "list",
        "--models",
        models.to_str().unwrap(),
    ]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(
        outcome.stderr.contains("models.toml:3:1: duplicate key `name`"),
        "{}",
        outcome.render()
    );
}

#[test]
fn a_nul_in_a_target_fails_the_check_naming_step_and_field() {
    let dir = folder("nul");
    let workflow = dir.join("w.json");
    std::fs::write(
        &workflow,
        r#"[{"id": "first", "target": "self"}, {"id": "b", "target": "to\u0000ol"}]"#,
    )
    .unwrap();
    let outcome = run(&["workflow", "check", workflow.to_str().unwrap()]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(
        outcome.stderr.contains("step `b` field `target` holds control character U+0000"),
        "{}",
        outcome.render()
    );
}

/// A dense 2,000-step DAG (every step waits on the 200 before it) checks and draws; the
/// old check was cubic in the edges of a step (see clio-workflow's bounds tests for the
/// sizes that time it).
#[test]
fn a_dense_dag_checks_and_shows() {
    let dir = folder("dense");
    let steps: Vec<serde_json::Value> = (0..2000)
        .map(|i: usize| {
            let after: Vec<String> = (i.saturating_sub(200)..i).map(|j| format!("s{j}")).collect();
            serde_json::json!({"id": format!("s{i}"), "target": "self", "after": after})
        })
        .collect();
    let path = dir.join("dense.json");
    std::fs::write(&path, serde_json::json!({ "steps": steps }).to_string()).unwrap();
    let outcome = run(&["workflow", "check", path.to_str().unwrap()]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert!(
        outcome.stdout.contains("2000 steps in 2000 layers; final: s1999"),
        "{}",
        outcome.stdout
    );
    let outcome = run(&["workflow", "show", path.to_str().unwrap(), "--format", "mermaid"]);
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
}

#[test]
fn an_unusable_journal_url_in_config_exits_1_naming_file_and_field() {
    for (setting, problem) in [
        ("journal = \"postgres://\"", "postgres://\" names no host"),
        ("journal = \"mysql://db/clio\"", "is not a PostgreSQL URL"),
        ("journal = \"postgres://ann@db:notaport/clio\"", "does not parse as a PostgreSQL URL"),
        ("journal = 5", "journal: expected a string"),
    ] {
        let home = folder("journal-url");
        std::fs::write(home.join("config.toml"), format!("{setting}\n")).unwrap();
        for args in
            [&["runs", "list"][..], &["workflow", "check", "examples/workflows/batch7.json"]]
        {
            let mut full = vec!["--home", home.to_str().unwrap()];
            full.extend_from_slice(args);
            let outcome = run(&full);
            assert_eq!(outcome.code, 1, "{setting}: {}", outcome.render());
            let config = home.join("config.toml");
            assert!(
                outcome.stderr.starts_with(&format!("error: {}: journal", config.display())),
                "{setting}: {}",
                outcome.render()
            );
            assert!(outcome.stderr.contains(problem), "{setting}: {}", outcome.render());
            assert!(outcome.stderr.contains("hint: "), "{setting}: {}", outcome.render());
        }
    }
    // The same URL given with --journal is a usage error (exit 2), named as the flag's.
    let outcome = run(&["--journal", "postgres://", "runs", "list"]);
    assert_eq!(outcome.code, 2, "{}", outcome.render());
    assert!(outcome.stderr.contains("journal \"postgres://\" names no host"));
}

/// A shared journal whose server is up but refuses what config.toml asks for (a database
/// that does not exist, a user it does not know) is the setting's mistake: exit 1, naming
/// the file and field, not 255.
#[test]
fn a_journal_url_the_server_refuses_exits_1_naming_the_setting() {
    let url = clio_postgres::test_server::fresh_database();
    let (base, _) = url.rsplit_once('/').unwrap();
    let home = folder("journal-refused");
    for wrong in
        [format!("{base}/no_such_database_41"), url.replacen("://clio@", "://nosuchuser41@", 1)]
    {
        std::fs::write(home.join("config.toml"), format!("journal = {wrong:?}\n")).unwrap();
        let outcome = run(&["--home", home.to_str().unwrap(), "runs", "list"]);
        assert_eq!(outcome.code, 1, "{wrong}: {}", outcome.render());
        let config = home.join("config.toml");
        assert!(
            outcome.stderr.contains(&format!("`journal` in {}", config.display())),
            "{wrong}: {}",
            outcome.render()
        );
    }
}

/// A file over the cap (64 MiB; a sparse file here, so the test writes nothing) is refused
/// from its size, naming the file and the limit, before a byte of it is read.
#[test]
fn a_file_over_the_cap_is_refused_with_its_size() {
    let dir = folder("cap");
    let path = dir.join("huge.json");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(clio_spec::MAX_INPUT_BYTES + 1).unwrap();
    drop(file);
    let outcome = run(&["workflow", "check", path.to_str().unwrap()]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    let size = clio_spec::MAX_INPUT_BYTES + 1;
    assert!(
        outcome.stderr.contains(&format!(
            "{}: it is {size} bytes or more, over the limit of 67108864 bytes (64 MiB)",
            path.display()
        )),
        "{}",
        outcome.render()
    );
    let _ = std::fs::remove_file(&path);
}
