//! Issue 41, item 5, from the command line: a plugin tool run by `clio workflow run` sees
//! none of `clio`'s environment (`OPENAI_API_KEY` among it) unless config.toml's
//! `[tools] env` names the variable for that tool, and then exactly that one; `[sandbox]`
//! limits are read from config.toml, a bad one refused with its field.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{temp_home, workspace_root};

/// A home with a trusted plugin `envdump` whose tool `dump` prints its environment, a
/// workspace and a one-step workflow calling it.
struct Place {
    home: PathBuf,
    plugin: PathBuf,
    workflow: PathBuf,
}

impl Place {
    fn new(name: &str) -> Place {
        use std::os::unix::fs::PermissionsExt;
        let home = temp_home(name);
        let plugin = home.join("envdump");
        std::fs::create_dir_all(plugin.join("ai.iowarp.clio/bin")).unwrap();
        std::fs::create_dir_all(home.join("ws")).unwrap();
        std::fs::write(
            plugin.join("ai.iowarp.clio/plugin.toml"),
            "id = \"envdump\"\nversion = \"0.1.0\"\n\n[[tools]]\nname = \"dump\"\n\
             permission = \"allow\"\ncommand = \"bin/dump\"\n",
        )
        .unwrap();
        let tool = plugin.join("ai.iowarp.clio/bin/dump");
        std::fs::write(
            &tool,
            "#!/usr/bin/env python3\nimport json, os\nprint(json.dumps({\"names\": sorted(os.environ), \"key\": os.environ.get(\"OPENAI_API_KEY\")}))\n",
        )
        .unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let workflow = home.join("one.json");
        std::fs::write(&workflow, r#"{"steps": [{"id": "one", "target": "dump", "input": {}}]}"#)
            .unwrap();
        let place = Place { home, plugin, workflow };
        let trusted = place.clio(&["plugin", "trust", path(&place.plugin)]);
        assert!(trusted.status.success(), "{}", said(&trusted));
        place
    }

    /// Runs `clio --home <home> args` with a model key in its environment.
    fn clio(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_clio"))
            .arg("--home")
            .arg(&self.home)
            .args(args)
            .current_dir(workspace_root())
            .env("OPENAI_API_KEY", "sk-test-not-a-key")
            .env("CLIO_TEST_OTHER_SECRET", "hunter2")
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    }

    /// Runs the workflow under `config` (config.toml's text); what it printed.
    fn run(&self, config: &str) -> std::process::Output {
        std::fs::write(self.home.join("config.toml"), config).unwrap();
        let ws = self.home.join("ws");
        let (workflow, plugin) = (path(&self.workflow), path(&self.plugin));
        self.clio(&[
            "workflow",
            "run",
            workflow,
            "--task",
            "t",
            "--plugin",
            plugin,
            "--workspace",
            path(&ws),
            "--json",
            "--no-input",
        ])
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn said(out: &std::process::Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn a_plugin_tool_gets_the_model_key_only_where_config_toml_allows_it() {
    let place = Place::new("sandbox-env");
    for mode in ["bwrap", "landlock"] {
        let out = place.run(&format!("[sandbox]\nmode = \"{mode}\"\n"));
        let text = said(&out);
        assert!(out.status.success(), "{mode}: {text}");
        assert!(!text.contains("sk-test-not-a-key"), "{mode}: {text}");
        assert!(!text.contains("CLIO_TEST_OTHER_SECRET"), "{mode}: {text}");
        assert!(!text.contains("CLIO_HOME"), "{mode}: {text}");
        assert!(text.contains("\"TMPDIR\""), "{mode}: the tool ran: {text}");

        let allowed = format!(
            "[tools]\nenv = {{ \"envdump/dump\" = [\"OPENAI_API_KEY\"] }}\n\n[sandbox]\nmode = \"{mode}\"\n"
        );
        let out = place.run(&allowed);
        let text = said(&out);
        assert!(out.status.success(), "{mode}: {text}");
        assert!(text.contains("sk-test-not-a-key"), "{mode}: {text}");
        assert!(!text.contains("CLIO_TEST_OTHER_SECRET"), "{mode}: {text}");
    }
}

#[test]
fn sandbox_limits_and_tool_env_in_config_toml_are_checked() {
    let place = Place::new("sandbox-limits-config");
    let cases = [
        ("[sandbox]\nmemory = \"lots\"\n", "sandbox.memory = \"lots\": expected a number of bytes"),
        ("[sandbox]\nprocesses = \"many\"\n", "sandbox.processes = \"many\": expected a number"),
        ("[sandbox]\ncpu_seconds = 0\n", "sandbox.cpu_seconds = 0: expected a number above 0"),
        ("[tools]\nenv = { \"x\" = [\"NOT A NAME\"] }\n", "tools.env.\"x\" = \"NOT A NAME\""),
    ];
    for (config, expected) in cases {
        let out = place.run(config);
        assert_eq!(out.status.code(), Some(1), "{config}: {}", said(&out));
        assert!(said(&out).contains(expected), "{config}: {}", said(&out));
    }
    // Limits that parse: a tool still runs under them.
    let config = "[sandbox]\nmode = \"bwrap\"\nmemory = \"1GiB\"\nprocesses = 64\ncpu_seconds = \"unlimited\"\nfile_size = 1048576\n";
    let out = place.run(config);
    assert!(out.status.success(), "{}", said(&out));
}
