//! `clio agent spec` and `clio agent verify` on the built binary: outputs a person reads
//! are snapshots, and every error path has its exit code and message.

use insta::assert_snapshot;

use crate::support::{clio, clio_in};

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("clio-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn spec_of_the_example_agent() {
    assert_snapshot!(clio(&["agent", "spec", "examples/agents/reviewer.toml"]).render());
}

#[test]
fn spec_json_of_the_minimal_agent() {
    assert_snapshot!(clio(&["agent", "spec", "examples/agents/minimal.toml", "--json"]).render());
}

#[test]
fn spec_then_verify_round_trips_and_tampering_is_caught() {
    let dir = temp_dir("verify");
    let frozen = clio(&["agent", "spec", "examples/agents/reviewer.toml", "--json"]);
    assert_eq!(frozen.code, 0, "{}", frozen.render());
    std::fs::write(dir.join("reviewer.spec.json"), &frozen.stdout).unwrap();

    let ok = clio_in(&dir, &["agent", "verify", "reviewer.spec.json"]);
    assert_eq!(ok.code, 0, "{}", ok.render());
    assert!(ok.stdout.starts_with("ok: reviewer 1.0.0 checksum "), "{}", ok.stdout);

    let tampered = frozen.stdout.replace("\"Paper reviewer\"", "\"Paper reviewer!\"");
    std::fs::write(dir.join("tampered.json"), tampered).unwrap();
    let bad = clio_in(&dir, &["agent", "verify", "tampered.json"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(bad.code, 1, "{}", bad.render());
    let checksum = frozen.stdout.split("\"checksum\": \"").nth(1).unwrap()[..64].to_owned();
    let rendered = bad.render().replace(&checksum, "[frozen checksum]");
    let rendered = regex_free_redact_hex(&rendered);
    assert_snapshot!(rendered);
}

/// Replaces any remaining 64-digit hex run with a placeholder.
fn regex_free_redact_hex(text: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    for c in text.chars() {
        if c.is_ascii_hexdigit() && !c.is_ascii_uppercase() {
            run.push(c);
            continue;
        }
        out.push_str(if run.len() == 64 { "[checksum]" } else { &run });
        run.clear();
        out.push(c);
    }
    out.push_str(if run.len() == 64 { "[checksum]" } else { &run });
    out
}

#[test]
fn errors_name_the_file_and_layer() {
    let dir = temp_dir("errors");
    let cases = [
        ("syntax.toml", "id = \"a\"\nplugins = [\"core\"\n"),
        ("unknown-field.toml", "id = \"a\"\nplugin = [\"core\"]\n"),
        ("no-core.toml", "id = \"a\"\nplugins = [\"memory\"]\n"),
        ("bad-ref.toml", "id = \"a\"\nplugins = [\"core\", \"pdf@latest\"]\n"),
        ("cycle.toml", "id = \"a\"\nextends = \"b\"\n[[layer]]\nid = \"b\"\nextends = \"a\"\n"),
    ];
    let mut all = String::new();
    for (name, text) in cases {
        std::fs::write(dir.join(name), text).unwrap();
        let outcome = clio_in(&dir, &["agent", "spec", name]);
        assert_eq!(outcome.code, 1, "{name}: {}", outcome.render());
        all.push_str(&format!("## {name}\n{}", outcome.render()));
    }
    let missing = clio_in(&dir, &["agent", "spec", "missing.toml"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(missing.code, 1);
    all.push_str(&format!("## missing.toml\n{}", missing.render()));
    assert_snapshot!(all);
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let usage = clio(&["agent", "spec"]);
    assert_eq!(usage.code, 2, "{}", usage.render());
    assert!(usage.stderr.contains("FILE"), "{}", usage.stderr);
    let unknown = clio(&["frobnicate"]);
    assert_eq!(unknown.code, 2);
    let help = clio(&["agent", "spec", "--help"]);
    assert_eq!(help.code, 0);
    assert_snapshot!(help.stdout);
}

#[test]
fn in_process_run_matches_the_binary() {
    let path = crate::support::workspace_root().join("examples/agents/minimal.toml");
    let path = path.to_str().unwrap().to_owned();
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = clio_cli::run(["clio", "agent", "spec", &path], &mut out, &mut err);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    let binary = clio(&["agent", "spec", &path]);
    assert_eq!(String::from_utf8(out).unwrap(), binary.stdout);

    let missing = format!("{path}.missing");
    let code = clio_cli::run(["clio", "agent", "spec", &missing], &mut Vec::new(), &mut err);
    assert_eq!(code, 1);
    assert!(String::from_utf8_lossy(&err).contains(&format!("cannot read {missing}")));
}
