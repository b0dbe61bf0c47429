//! No process of a tool outlives its call (issue 41), through the runtime: a `run_code`
//! script and a plugin's executable tool that leave a forked child and a `setsid` daemon
//! behind (each to write `late` in the workspace a second later) leave nothing running once
//! their call has ended, and nothing of theirs writes later; under bubblewrap, Landlock
//! and mode `off`. And every process of a tool call carries the call's tag, made of what
//! the journal records of the call (its task's owner, run and number), by which a resume
//! finds what a dead process's call left.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clio_flow::{
    FlowOutput, FnFlow, Registry, RunCodeConfig, Runtime, RuntimeConfig, Sandbox, SandboxMode,
    Workspace, register_plugin, register_run_code,
};
use clio_journal::{Journal, TaskKind};
use serde_json::{Value, json};

use crate::support::{answer, sel};

const MODES: [SandboxMode; 3] = [SandboxMode::Bwrap, SandboxMode::Landlock, SandboxMode::Off];

/// A workspace, and a plugin `leave` whose tool leaves processes behind and prints the
/// `CLIO_CALL` it was started with.
struct Place {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    plugin: PathBuf,
}

impl Place {
    fn new() -> Place {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let workspace = root.path().join("workspace");
        let plugin = root.path().join("leave");
        let clio = plugin.join("ai.iowarp.clio");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(clio.join("bin")).unwrap();
        std::fs::write(
            clio.join("plugin.toml"),
            "id = \"leave\"\nversion = \"0.1.0\"\n\n[[tools]]\nname = \"leave\"\n\
             command = \"bin/leave\"\nread_only = false\npermission = \"allow\"\n",
        )
        .unwrap();
        let program = clio.join("bin/leave");
        let script = "#!/bin/sh\ncat > /dev/null\n\
            ( sleep 1; echo child >> late ) < /dev/null > /dev/null 2>&1 &\n\
            setsid sh -c 'sleep 1; echo daemon >> late' < /dev/null > /dev/null 2>&1 &\n\
            printf '{\"call\": \"%s\"}\\n' \"$CLIO_CALL\"\n";
        std::fs::write(&program, script).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        Place { workspace, plugin, _root: root }
    }

    fn runtime(&self, journal: &Journal, mode: SandboxMode) -> Runtime {
        let sandbox = Sandbox { mode, ..Sandbox::default() };
        let workspace = Workspace::new(Some(self.workspace.clone())).with_sandbox(sandbox.clone());
        let code = FnFlow::new("code", |task: Value, ctx| async move {
            let res = ctx.call("run_code", task).await?;
            Ok(FlowOutput::text(res.value["stdout"].as_str().unwrap_or_default()))
        });
        let tool = FnFlow::new("tool", |_task: Value, ctx| async move {
            let res = ctx.call("leave", json!({})).await?;
            Ok(FlowOutput::text(res.value["call"].as_str().unwrap_or_default()))
        });
        let registry =
            register_run_code(Registry::new(), RunCodeConfig::default()).flow(code).flow(tool);
        let plugin = clio_plugins::load_plugin(&self.plugin).unwrap();
        let registry = register_plugin(registry, &plugin, true, &workspace).unwrap();
        let config = RuntimeConfig {
            workspace: Some(self.workspace.clone()),
            sandbox,
            ..RuntimeConfig::default()
        };
        Runtime::new(journal.clone(), registry, config)
    }

    /// The processes working in the workspace that still run.
    fn running(&self) -> Vec<String> {
        running_in(&self.workspace)
    }

    fn assert_nothing_left(&self, what: &str) {
        assert_eq!(self.running(), Vec::<String>::new(), "{what}: still running");
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!self.workspace.join("late").exists(), "{what}: an effect after the call");
    }
}

/// Returns the processes whose working folder is `dir` and that are not zombies.
fn running_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.parse::<u32>().is_ok()))
        .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd == dir))
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let state = stat.rsplit_once(')').and_then(|(_, r)| r.trim_start().chars().next());
            !matches!(state, Some('Z' | 'X') | None)
        })
        .map(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            format!("{} {}", e.file_name().to_string_lossy(), String::from_utf8_lossy(&cmd))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_run_code_script_leaves_ends_with_its_call() {
    let script = r#"
import subprocess
subprocess.Popen(["sh", "-c", "sleep 1; echo child >> late"], stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.Popen(["sh", "-c", "sleep 1; echo daemon >> late"], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("left")
"#;
    for mode in MODES {
        let place = Place::new();
        let journal = Journal::open_in_memory().unwrap();
        let rt = place.runtime(&journal, mode);
        let report = rt.run(sel("code"), json!({ "code": script })).await.unwrap();
        assert_eq!(answer(&report).trim(), "left", "{mode:?}: {report:?}");
        place.assert_nothing_left(&format!("{mode:?}: run_code"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_plugin_tool_leaves_ends_with_its_call_and_its_tag_is_the_journals() {
    for mode in MODES {
        let place = Place::new();
        let journal = Journal::open_in_memory().unwrap();
        let rt = place.runtime(&journal, mode);
        let report = rt.run(sel("tool"), json!({})).await.unwrap();
        let tag = answer(&report);
        place.assert_nothing_left(&format!("{mode:?}: tool"));
        // The tag names the call by what the journal holds: the journal, its task's owner,
        // run and number.
        let tasks = journal.tasks(report.run).unwrap();
        let task = tasks.iter().find(|t| t.kind == TaskKind::Tool && t.target == "leave");
        let task = task.unwrap_or_else(|| panic!("{mode:?}: no task of the call: {tasks:?}"));
        let owner = format!("{}:{}", journal.instance_tag(), task.owner);
        let expected = clio_tools::call_tag(&owner, report.run.0, &task.id.0.to_string());
        assert!(tag.starts_with(&format!("{expected}#")), "{mode:?}: {tag} for {expected}");
    }
}
