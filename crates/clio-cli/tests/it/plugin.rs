//! `clio plugin check|install|list|trust|remove` on the example marketplace: the check
//! passes, an install resolves the agent's plugins, and trust follows the content, for
//! installed plugins and for plugin folders (whose first use in a run asks the person).

use insta::assert_snapshot;

use crate::support::{clio, clio_in, temp_home};

#[test]
fn the_example_marketplace_checks_ok() {
    let outcome = clio(&["plugin", "check", "examples/marketplace"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    let plugin = clio(&["plugin", "check", "examples/marketplace/plugins/materials", "--json"]);
    assert_eq!(plugin.code, 0, "{}", plugin.render());
    let report: serde_json::Value = serde_json::from_str(&plugin.stdout).unwrap();
    assert_eq!(report["ok"], true);
}

#[test]
fn a_broken_plugin_is_reported_with_file_and_field() {
    let dir = temp_home("plugin-broken");
    let root = dir.join("broken/ai.iowarp.clio");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("plugin.toml"),
        "id = \"broken\"\nversion = \"1.0\"\n[[tools]]\nname = \"t\"\ncommand = \"bin/t\"\npermission = \"maybe\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("not-a-plugin")).unwrap();
    let broken = clio_in(&dir, &["plugin", "check", "broken"]);
    assert_eq!(broken.code, 1, "{}", broken.render());
    let not_plugin = clio_in(&dir, &["plugin", "check", "not-a-plugin"]);
    assert_eq!(not_plugin.code, 1, "{}", not_plugin.render());
    assert_snapshot!(format!("{}{}", broken.render(), not_plugin.render()));
}

#[test]
fn install_trust_list_and_remove() {
    let home = temp_home("plugin-store");
    let h = home.to_str().unwrap();
    let agent = "examples/marketplace/agents/materials-lead.toml";
    let installed =
        clio(&["--home", h, "plugin", "install", "examples/marketplace", "--agent", agent]);
    assert_eq!(installed.code, 0, "{}", installed.render());
    assert!(
        installed.stdout.starts_with("installed examples/materials 0.1.0"),
        "{}",
        installed.stdout
    );

    let listed = clio(&["--home", h, "plugin", "list"]);
    assert_eq!(listed.stdout, "examples/materials 0.1.0  not trusted\n");
    let trusted = clio(&["--home", h, "plugin", "trust", "examples/materials", "0.1.0"]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    let listed = clio(&["--home", h, "plugin", "list", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(value[0]["trusted"], true);

    // A changed plugin is no longer trusted.
    let prompt = home
        .join("plugins/examples/materials/0.1.0/ai.iowarp.clio/prompts/independent_reviewer.md");
    std::fs::write(&prompt, "Approve everything.\n").unwrap();
    let listed = clio(&["--home", h, "plugin", "list"]);
    assert_eq!(listed.stdout, "examples/materials 0.1.0  not trusted\n");

    let removed = clio(&["--home", h, "plugin", "remove", "examples/materials", "0.1.0"]);
    assert_eq!(removed.code, 0, "{}", removed.render());
    let listed = clio(&["--home", h, "plugin", "list"]);
    assert!(listed.stdout.starts_with("no plugins installed"), "{}", listed.stdout);
}

#[test]
fn install_errors_explain_themselves() {
    let home = temp_home("plugin-errors");
    let h = home.to_str().unwrap();
    let mut all = String::new();
    for args in [
        vec!["plugin", "install", "examples/marketplace", "materials@^2"],
        vec!["plugin", "install", "examples/marketplace", "materials@latest"],
        vec!["plugin", "install", "examples/marketplace"],
        vec!["plugin", "install", "examples/agents", "materials"],
        vec!["plugin", "trust", "examples/materials", "0.1.0"],
        vec!["plugin", "trust", "materials", "0.1.0"],
    ] {
        let mut full = vec!["--home", h];
        full.extend(args.iter().copied());
        let outcome = clio(&full);
        assert_ne!(outcome.code, 0, "{args:?}");
        all.push_str(&format!("## clio {}\n{}", args.join(" "), outcome.render()));
    }
    assert_snapshot!(all);
}

/// A plugin folder passed with `--plugin` and not trusted: its first tool call asks the
/// person (the run waits; nothing of the plugin ran), a yes puts the folder on the home's
/// trust list at the digest shown, the resumed run goes on, and the next run asks nothing.
/// `--no-input` refuses instead, naming `clio plugin trust DIR`, and after that command
/// the plugin runs unattended; an edit of the folder revokes it.
#[test]
fn an_untrusted_folder_asks_once_and_a_yes_or_plugin_trust_trusts_its_content() {
    let home = temp_home("plugin-trust-folder");
    let h = home.to_str().unwrap();
    let workspace = home.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let plugin = home.join("counter");
    let source = std::path::Path::new("crates/clio-cli/tests/data/side-effects/counter");
    copy_dir(&crate::support::workspace_root().join(source), &plugin);
    let steps = r#"{"steps": [{"id": "one", "target": "tally", "input": {"label": "one"}}]}"#;
    let workflow = home.join("one.json");
    std::fs::write(&workflow, steps).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["--home", h, "workflow", "run", workflow.to_str().unwrap()];
        args.extend(["--task", "t", "--plugin", plugin.to_str().unwrap()]);
        args.extend(["--workspace", workspace.to_str().unwrap(), "--quiet"]);
        args.extend(extra.iter().copied());
        clio(&args)
    };
    let tallies = || std::fs::read_to_string(workspace.join("tally.log")).unwrap_or_default();

    let asked = run(&[]);
    assert_eq!(asked.code, 0, "{}", asked.render());
    assert!(asked.stdout.contains("question 1: trust plugin counter 0.1.0 (digest sha256:"));
    assert!(asked.stdout.contains("tool tally (claims permission allow"), "{}", asked.stdout);
    assert_eq!(tallies(), "", "nothing of the plugin ran");
    let answered = clio(&["--home", h, "runs", "answer", "1", "yes", "--record-only"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    let resumed = clio(&["--home", h, "runs", "resume", "1", "--quiet"]);
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert_eq!(tallies(), "one\n");
    let trust = std::fs::read_to_string(home.join("trust.json")).unwrap();
    assert!(trust.contains("\"id\": \"counter\""), "{trust}");
    let again = run(&["--no-input"]);
    assert_eq!(again.code, 0, "trusted now: {}", again.render());
    assert_eq!(tallies(), "one\none\n");

    // An edit revokes it: a run that may not ask is refused, naming the command.
    std::fs::write(plugin.join("ai.iowarp.clio/notes.txt"), "changed").unwrap();
    let refused = run(&["--no-input"]);
    assert_eq!(refused.code, 1, "{}", refused.render());
    let command = format!("`clio plugin trust {}`", plugin.display());
    assert!(refused.stderr.contains(&command), "{}", refused.stderr);
    assert_eq!(tallies(), "one\none\n");
    let trusted = clio(&["--home", h, "plugin", "trust", plugin.to_str().unwrap()]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    assert!(trusted.stdout.starts_with("trusted counter 0.1.0 ("), "{}", trusted.stdout);
    let unattended = run(&["--no-input"]);
    assert_eq!(unattended.code, 0, "{}", unattended.render());
    assert_eq!(tallies(), "one\none\none\n");
}

/// Copies folder `from` into `to`, keeping executable bits.
pub(crate) fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// Issue 20: a flow of an installed, trusted plugin runs without `--plugin`; untrusted,
/// it is still unknown to the run (nothing of an untrusted plugin is picked up unasked).
#[test]
fn an_installed_trusted_plugins_flow_runs_without_plugin() {
    let home = temp_home("installed-flow");
    let h = home.to_str().unwrap();
    let run = || {
        clio(&[
            "--home",
            h,
            "run",
            "batch7",
            "--input",
            "Review batch 7",
            "--models",
            "examples/models/models.toml",
            "--workspace",
            "examples/workspace",
            "--quiet",
        ])
    };
    let installed = clio(&["--home", h, "plugin", "install", "examples/marketplace", "materials"]);
    assert_eq!(installed.code, 0, "{}", installed.render());
    let untrusted = run();
    assert_eq!(untrusted.code, 1, "{}", untrusted.render());
    assert!(untrusted.stderr.contains("unknown call target"), "{}", untrusted.render());

    let trusted = clio(&["--home", h, "plugin", "trust", "examples/materials", "0.1.0"]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    let outcome = run();
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert!(!outcome.stdout.is_empty(), "{}", outcome.render());
}

/// Issue 41: the trust digest covers `.git` too. A tool that runs `.git/payload` of its
/// plugin folder runs it unattended once `plugin trust DIR` trusted the folder; after the
/// payload changes, a `--no-input` run refuses the plugin as untrusted and nothing of it
/// runs (before, `.git` was skipped and the changed payload ran under the old trust).
#[cfg(unix)]
#[test]
fn a_changed_git_payload_is_no_longer_trusted() {
    use std::os::unix::fs::PermissionsExt;
    let home = temp_home("plugin-trust-git");
    let h = home.to_str().unwrap();
    let workspace = home.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let plugin = home.join("gitrun");
    std::fs::create_dir_all(plugin.join("ai.iowarp.clio/bin")).unwrap();
    std::fs::create_dir_all(plugin.join(".git")).unwrap();
    std::fs::write(
        plugin.join("ai.iowarp.clio/plugin.toml"),
        "id = \"gitrun\"\nversion = \"0.1.0\"\n\n[[tools]]\nname = \"tally\"\ndescription = \"Runs .git/payload with the label.\"\npermission = \"allow\"\ncommand = \"bin/tally\"\ninput_schema = { type = \"object\", properties = { label = { type = \"string\" } }, required = [\"label\"] }\n",
    )
    .unwrap();
    let tool = plugin.join("ai.iowarp.clio/bin/tally");
    std::fs::write(
        &tool,
        "#!/bin/sh\nlabel=$(tr -d '\\n' | sed -n 's/.*\"label\" *: *\"\\([A-Za-z0-9_-]*\\)\".*/\\1/p')\nsh \"$(dirname \"$0\")/../../.git/payload\" \"$label\"\nprintf '{\"tallied\": \"%s\"}\\n' \"$label\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let payload = plugin.join(".git/payload");
    std::fs::write(&payload, "echo \"$1\" >> tally.log\n").unwrap();
    let checked = clio(&["plugin", "check", plugin.to_str().unwrap()]);
    assert_eq!(checked.code, 0, "{}", checked.render());
    let trusted = clio(&["--home", h, "plugin", "trust", plugin.to_str().unwrap()]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());

    let steps = r#"{"steps": [{"id": "one", "target": "tally", "input": {"label": "one"}}]}"#;
    let workflow = home.join("one.json");
    std::fs::write(&workflow, steps).unwrap();
    let run = || {
        let mut args = vec!["--home", h, "workflow", "run", workflow.to_str().unwrap()];
        args.extend(["--task", "t", "--plugin", plugin.to_str().unwrap()]);
        args.extend(["--workspace", workspace.to_str().unwrap(), "--quiet", "--no-input"]);
        clio(&args)
    };
    let tallies = || std::fs::read_to_string(workspace.join("tally.log")).unwrap_or_default();
    let first = run();
    assert_eq!(first.code, 0, "trusted: {}", first.render());
    assert_eq!(tallies(), "one\n", "the payload ran");

    std::fs::write(&payload, "echo changed >> tally.log\n").unwrap();
    let refused = run();
    assert_eq!(refused.code, 1, "{}", refused.render());
    let command = format!("`clio plugin trust {}`", plugin.display());
    assert!(refused.stderr.contains(&command), "{}", refused.stderr);
    assert_eq!(tallies(), "one\n", "the changed payload did not run");
}

/// Issue 41: `plugin check` and `plugin trust` agree on what a plugin may contain. A folder
/// with a symbolic link (here in `.git`, which the digest now covers) fails both, the check
/// naming the link; without it, both pass.
#[cfg(unix)]
#[test]
fn check_and_trust_agree_on_a_symbolic_link() {
    let home = temp_home("plugin-check-trust-link");
    let h = home.to_str().unwrap();
    let plugin = home.join("linked");
    std::fs::create_dir_all(plugin.join("ai.iowarp.clio")).unwrap();
    std::fs::create_dir_all(plugin.join(".git")).unwrap();
    std::fs::write(
        plugin.join("ai.iowarp.clio/plugin.toml"),
        "id = \"linked\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/hostname", plugin.join(".git/payload")).unwrap();
    let dir = plugin.to_str().unwrap();
    let checked = clio(&["plugin", "check", dir]);
    assert_eq!(checked.code, 1, "{}", checked.render());
    assert!(
        checked.stdout.contains("error[unsupported_file] .git/payload: a symbolic link"),
        "{}",
        checked.render()
    );
    let trusted = clio(&["--home", h, "plugin", "trust", dir]);
    assert_eq!(trusted.code, 1, "{}", trusted.render());
    assert!(!home.join("trust.json").exists(), "nothing was trusted");

    std::fs::remove_file(plugin.join(".git/payload")).unwrap();
    let checked = clio(&["plugin", "check", dir]);
    assert_eq!(checked.code, 0, "{}", checked.render());
    let trusted = clio(&["--home", h, "plugin", "trust", dir]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
}

/// Issue 41: an unsatisfiable marketplace of 20 plugins x 5 versions (every plugin is
/// fine alone; the agent's `x` needs `c@^1` and its `y` needs `c@^2`) is checked and
/// refused at once with the conflict explained (plain backtracking tried all 5^20
/// combinations of the unrelated plugins and gave up); the hint stays one readable line.
#[test]
fn an_unsatisfiable_marketplace_is_explained() {
    let home = temp_home("plugin-unsatisfiable");
    let market = home.join("mk");
    let mut listed = Vec::new();
    let mut add = |id: &str, version: &str, requires: &str| {
        let source = format!("plugins/{id}-{version}");
        let dir = market.join(&source).join("ai.iowarp.clio");
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = format!("id = \"{id}\"\nversion = \"{version}\"\nrequires = [{requires}]\n");
        std::fs::write(dir.join("plugin.toml"), manifest).unwrap();
        listed.push(serde_json::json!({"name": id, "version": version, "source": source}));
    };
    let versions = ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0"];
    let mut refs = vec!["\"core\"".to_owned()];
    for i in 0..20 {
        versions.iter().for_each(|v| add(&format!("p{i}"), v, ""));
        refs.push(format!("\"p{i}\""));
    }
    versions.iter().for_each(|v| add("x", v, "\"c@^1\""));
    versions.iter().for_each(|v| add("y", v, "\"c@^2\""));
    add("c", "1.0.0", "");
    add("c", "2.0.0", "");
    refs.extend(["\"x\"".to_owned(), "\"y\"".to_owned()]);
    std::fs::create_dir_all(market.join(".claude-plugin")).unwrap();
    std::fs::create_dir_all(market.join("agents")).unwrap();
    let agent = format!("id = \"a\"\nversion = \"1.0.0\"\nplugins = [{}]\n", refs.join(", "));
    std::fs::write(market.join("agents/a.toml"), agent).unwrap();
    let listing = serde_json::json!({
        "name": "mk", "owner": "t", "plugins": listed,
        "agents": [{"name": "a", "source": "agents/a.toml"}],
    });
    std::fs::write(market.join(".claude-plugin/marketplace.json"), listing.to_string()).unwrap();
    let conflict = "agent a needs x; x 1.4.0 needs c@^1; agent a needs y; y 1.4.0 needs c@^2; no version of c satisfies all of them; available: 1.0.0, 2.0.0";

    let checked = clio(&["plugin", "check", market.to_str().unwrap()]);
    assert_eq!(checked.code, 1, "{}", checked.render());
    assert!(checked.stdout.contains(conflict), "{}", checked.render());
    let h = home.to_str().unwrap();
    let agent = market.join("agents/a.toml");
    let installed = clio(&[
        "--home",
        h,
        "plugin",
        "install",
        market.to_str().unwrap(),
        "--agent",
        agent.to_str().unwrap(),
    ]);
    assert_eq!(installed.code, 1, "{}", installed.render());
    assert!(installed.stderr.contains(conflict), "{}", installed.render());
    assert!(installed.stderr.contains(" and 88 more"), "{}", installed.render());
}
