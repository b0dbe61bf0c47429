//! `[[native_tools]]` at run time: a plugin's claim on a built-in tool sets that tool's
//! `defer`, `callers` and `permission` (a claim with `permission = "ask"` on `run_code`
//! makes the agent's `run_code` calls ask the person), claims of several plugins combine
//! strictly, and a claim on a name that is no built-in tool fails when the plugin loads.

use std::path::Path;
use std::sync::{Arc, Mutex};

use clio_flow::{
    Models, Registry, RunCodeConfig, RunOutcome, Runtime, RuntimeConfig, ScriptedProvider, Tool,
    Workspace, register_basic_tools, register_plugin, register_run_code,
};
use clio_journal::Journal;
use clio_plugins::{Callers, NativeTool, Permission, Plugin, ToolOptions};
use serde_json::{Value, json};

use crate::gate::{Recorder, agent_flow, script};
use crate::support::{answer, sel};

/// The built-in tools a deployment has: the basic tools and `run_code`.
fn builtins() -> Registry {
    let registry = register_basic_tools(Registry::new(), Workspace::new(None));
    register_run_code(registry, RunCodeConfig::default())
}

fn claiming(id: &str, name: &str, options: ToolOptions) -> Plugin {
    Plugin::builder(id, "1.0.0")
        .native_tool(NativeTool { name: name.to_owned(), options })
        .build()
        .unwrap()
}

fn options(registry: &Registry, name: &str) -> ToolOptions {
    registry.get_tool(name).unwrap().options
}

fn load(registry: Registry, plugin: &Plugin) -> Result<Registry, String> {
    register_plugin(registry, plugin, true, &Workspace::new(None)).map_err(|e| e.to_string())
}

/// A plugin folder `sandbox` that claims `run_code` with `permission = "ask"` and has a
/// subagent `worker` with the plugin's tools.
fn sandbox(dir: &Path) -> Plugin {
    let clio = dir.join("sandbox/ai.iowarp.clio");
    std::fs::create_dir_all(&clio).unwrap();
    std::fs::write(
        clio.join("plugin.toml"),
        r#"id = "sandbox"
version = "0.1.0"

[[native_tools]]
name = "run_code"
permission = "ask"

[[subagents]]
id = "worker"
prompt = "You work."
"#,
    )
    .unwrap();
    clio_plugins::load_plugin(&dir.join("sandbox")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_tool_claim_with_ask_makes_the_built_in_run_code_ask() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = sandbox(dir.path());
    let unclaimed = builtins();
    assert_eq!(options(&unclaimed, "run_code").permission, None, "the built-in is allowed");
    let registry = load(unclaimed, &plugin).unwrap().flow(agent_flow());
    assert_eq!(
        options(&registry, "run_code"),
        ToolOptions {
            permission: Some(Permission::Ask),
            callers: Some(Callers::Direct),
            defer: None
        },
        "an unset option keeps the tool's own"
    );
    let text = script(&[("run_code", json!({ "code": "print(1)" }))]);
    let scripted = ScriptedProvider::from_toml(&text, Path::new("native.toml")).unwrap();
    let recorder = Arc::new(Recorder { inner: scripted.clone(), seen: Mutex::new(Vec::new()) });
    let config = RuntimeConfig {
        model: "offline/scripted".into(),
        models: Models::offline(scripted).with_provider(recorder.clone()),
        ..RuntimeConfig::default()
    };
    let journal = Journal::open_in_memory().unwrap();
    let rt = Runtime::new(journal, registry, config);
    let report = rt.run(sel("agent"), json!("go")).await.unwrap();
    assert!(recorder.listed(0).contains(&"run_code".to_owned()), "the subagent has it");
    let RunOutcome::AwaitingInput(qs) = &report.outcome else { panic!("{:?}", report.outcome) };
    assert!(qs[0].text.contains("run_code"), "{}", qs[0].text);
    rt.answer(report.run, qs[0].id, "no").await.unwrap();
    let report = rt.resume(report.run).await.unwrap();
    assert_eq!(answer(&report), "done");
    let results = recorder.tool_results();
    assert!(results[0].contains("permission_denied"), "{results:?}");
    let receipts = report.output().unwrap().outputs["receipts"].clone();
    assert_eq!(receipts[0]["decision"], "deny");
    assert_eq!(receipts[0]["layer"], "tool");
}

#[test]
fn claims_of_several_plugins_combine_strictly() {
    let set = |permission, callers, defer| ToolOptions { permission, callers, defer };
    let a = claiming("a", "write_file", set(Some(Permission::Allow), Some(Callers::Both), None));
    let b = claiming("b", "write_file", set(Some(Permission::Ask), Some(Callers::Code), None));
    let c = claiming("c", "write_file", set(None, None, Some(false)));
    let mut registry = builtins();
    for plugin in [&a, &b, &c] {
        registry = load(registry, plugin).unwrap();
    }
    assert_eq!(
        options(&registry, "write_file"),
        set(Some(Permission::Ask), Some(Callers::Code), Some(false))
    );
    let direct = claiming("d", "write_file", set(None, Some(Callers::Direct), None));
    let err = load(registry, &direct).unwrap_err();
    assert!(
        err.contains("plugin d: native tool write_file: callers \"direct\" of plugin d conflicts with callers \"code\" of plugin b"),
        "{err}"
    );
    // A plugin's `defer` is the default of its claims' own, as of its tools'.
    let mut deferring = claiming("e", "read_file", ToolOptions::default());
    deferring.defer = Some(true);
    let registry = load(builtins(), &deferring).unwrap();
    assert_eq!(options(&registry, "read_file").defer, Some(true));
}

#[test]
fn a_claim_on_a_name_that_is_no_built_in_tool_fails_at_load() {
    let shell = claiming("shell", "shell_bash", ToolOptions::default());
    let err = load(builtins(), &shell).unwrap_err();
    assert!(err.contains("plugin shell: native tool shell_bash is not a built-in tool"), "{err}");
    assert!(err.contains("list_files, read_file, read_notes, run_code, write_file"), "{err}");
    let other = builtins()
        .tool(Tool::new("write", |args: Value| async move { Ok(args) }).of_plugin("files"));
    let claim = claiming("grab", "write", ToolOptions::default());
    let err = load(other, &claim).unwrap_err();
    assert!(err.contains("native tool write is a tool of plugin files"), "{err}");
    let err = load(Registry::new(), &claim).unwrap_err();
    assert!(err.contains("(built-in tools: none)"), "{err}");
}
