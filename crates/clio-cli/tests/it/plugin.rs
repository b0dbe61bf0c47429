//! `clio plugin check|install|list|trust|remove` on the example marketplace: the check
//! passes, an install resolves the agent's plugins, and trust follows the content.

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
