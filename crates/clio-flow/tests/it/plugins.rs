//! Plugin folders in the registry: the example materials plugin's executable tool runs for
//! real, its workflow file runs as a flow only once the plugin is trusted, and every way
//! an executable can fail is an error that names the plugin, the tool and the cause.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clio_flow::{
    Access, FlowError, Registry, RunOutcome, Runtime, RuntimeConfig, Sandbox, Worker, WorkerReply,
    Workspace, register_basic_tools, register_plugin, register_plugin_with_digest, run_executable,
    selection,
};
use clio_journal::Journal;
use serde_json::{Value, json};

fn materials() -> clio_plugins::Plugin {
    let folder =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/marketplace/plugins/materials");
    clio_plugins::load_plugin(&folder).unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clio-flow-plugins-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes an executable shell script and returns its path.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Calls tool `name` through the gate, as a flow does: a tool's code runs no other way.
async fn call_tool(registry: &Registry, name: &str, args: Value) -> Result<Value, FlowError> {
    crate::support::call_tool(registry.clone(), name, args).await
}

#[tokio::test]
async fn the_example_csv_tool_runs_in_the_workspace() {
    let dir = temp_dir("csv");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/f.csv"), "stress,cycles\n300,1000\n200,5000\n").unwrap();
    let workspace = Workspace::new(Some(dir.clone()));
    // Trusted: an untrusted plugin's tool asks the person first (tests/it/adversarial.rs).
    let registry = register_plugin(Registry::new(), &materials(), true, &workspace).unwrap();
    let tool = registry.get_tool("csv_stats").unwrap();
    assert!(tool.read_only);
    let value = call_tool(&registry, "csv_stats", json!({"path": "data/f.csv"})).await.unwrap();
    assert_eq!(value, json!({"rows": 2, "means": {"stress": 250.0, "cycles": 3000.0}}));

    let err = call_tool(&registry, "csv_stats", json!({"path": "missing.csv"})).await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("plugin materials: tool csv_stats: exited with code 1"), "{message}");
    assert!(message.contains("cannot read missing.csv"), "{message}");
}

#[tokio::test]
async fn executable_failures_are_named() {
    let dir = temp_dir("fail");
    let cases = [
        ("exit", "echo 'bad input' >&2; exit 3", "exited with code 3: bad input"),
        ("not-json", "echo 'hello'", "its output is not JSON"),
        ("slow", "sleep 5", "timed out after 0 s"),
    ];
    // The scripts stand for a plugin's executables: their folder is theirs to read.
    let sandbox = Sandbox::default();
    let access = Access { read: vec![dir.clone()], ..Access::default() };
    for (name, body, expected) in cases {
        let program = script(&dir, name, body);
        let err = run_executable(
            "plugin p: tool t",
            &program,
            &sandbox,
            &access,
            &json!({}),
            Duration::from_millis(300),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, FlowError::CallFailed { .. }), "{name}: {err:?}");
        assert!(err.to_string().contains(expected), "{name}: {err}");
    }
    let err = run_executable(
        "plugin p: tool t",
        &dir.join("absent"),
        &sandbox,
        &access,
        &json!({}),
        Duration::from_secs(1),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("cannot start"), "{err}");
    // Arguments arrive on stdin as JSON.
    let echo = script(&dir, "echo", "cat");
    let value = run_executable(
        "plugin p: tool t",
        &echo,
        &sandbox,
        &access,
        &json!({"a": [1, 2]}),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert_eq!(value, json!({"a": [1, 2]}));
}

/// The materials subagents answered by code, so that the workflow runs without a model.
fn with_code_subagents(mut registry: Registry) -> Registry {
    for id in [
        "evidence_researcher",
        "characterization_expert",
        "fatigue_failure_expert",
        "data_analysis_expert",
        "independent_reviewer",
    ] {
        registry = registry.subagent(Worker::handler(id, move |req| async move {
            Ok(WorkerReply::text(format!(
                "{id} on: {}",
                req.text.chars().take(40).collect::<String>()
            )))
        }));
    }
    registry
}

/// A host that hashed the plugin's folder to decide its trust hands that digest over: the
/// trust question names it, and it is the digest `register_plugin` computes itself.
#[tokio::test]
async fn a_digest_handed_over_is_the_one_the_trust_question_names() {
    let workspace = Workspace::new(None);
    let plugin = materials();
    let computed = clio_plugins::plugin_digest(&plugin).unwrap();
    let ask = |registry: Registry| async move {
        let runtime = Runtime::new(
            Journal::open_in_memory().unwrap(),
            with_code_subagents(registry),
            RuntimeConfig::default(),
        );
        let report = runtime.run(selection("batch7", json!({})), json!("batch 7")).await.unwrap();
        let RunOutcome::AwaitingInput(questions) = &report.outcome else {
            panic!("{:?}", report.outcome)
        };
        questions[0].text.clone()
    };
    let by_itself = ask(register_plugin(Registry::new(), &plugin, false, &workspace).unwrap());
    let handed =
        register_plugin_with_digest(Registry::new(), &plugin, false, computed.clone(), &workspace);
    let handed_over = ask(handed.unwrap()).await;
    assert!(handed_over.contains(&format!("(digest {computed})")), "{handed_over}");
    assert_eq!(by_itself.await, handed_over);
    // The digest is taken as handed over, not computed again.
    let other = register_plugin_with_digest(
        Registry::new(),
        &plugin,
        false,
        "sha256:0123".into(),
        &workspace,
    );
    let text = ask(other.unwrap()).await;
    assert!(text.contains("(digest sha256:0123)"), "{text}");
}

#[tokio::test]
async fn a_workflow_file_runs_as_a_flow_once_trusted() {
    let workspace = Workspace::new(None);
    let journal = Journal::open_in_memory().unwrap();
    let untrusted = with_code_subagents(
        register_plugin(Registry::new(), &materials(), false, &workspace).unwrap(),
    );
    // Untrusted: the person is asked first, shown the plugin, its digest and the flow's
    // shape; a no refuses the run before the flow starts.
    let runtime = Runtime::new(journal.clone(), untrusted.clone(), RuntimeConfig::default());
    let report =
        runtime.run(selection("batch7", json!({})), json!("Review batch 7")).await.unwrap();
    let RunOutcome::AwaitingInput(questions) = &report.outcome else {
        panic!("{:?}", report.outcome)
    };
    let text = &questions[0].text;
    assert!(text.starts_with("trust plugin materials 0.1.0 (digest sha256:"), "{text}");
    assert!(text.contains("flow batch7") && text.contains("terminal(\"survey: "), "{text}");
    assert!(text.contains("tool csv_stats (claims read_only"), "{text}");
    runtime.answer(report.run, questions[0].id, "no").await.unwrap();
    let refused = runtime.resume(report.run).await.unwrap();
    let Some(FlowError::FlowNotTrusted { plugin, .. }) = refused.error() else {
        panic!("{:?}", refused.outcome)
    };
    assert_eq!(plugin, "materials");
    // A run nobody can answer is refused at once.
    let config = RuntimeConfig { interactive: false, ..RuntimeConfig::default() };
    let runtime = Runtime::new(journal.clone(), untrusted, config);
    let report =
        runtime.run(selection("batch7", json!({})), json!("Review batch 7")).await.unwrap();
    assert!(matches!(report.error(), Some(FlowError::FlowNotTrusted { .. })), "{report:?}");

    let trusted = with_code_subagents(
        register_plugin(Registry::new(), &materials(), true, &workspace).unwrap(),
    );
    let runtime = Runtime::new(journal, trusted, RuntimeConfig::default());
    let report =
        runtime.run(selection("batch7", json!({})), json!("Review batch 7")).await.unwrap();
    let RunOutcome::Succeeded(output) = &report.outcome else { panic!("{:?}", report.outcome) };
    let answer = output.answer.clone();
    assert!(answer.contains("independent_reviewer on:"), "{answer}");
    assert!(answer.contains("evidence_researcher on: Review batch 7"), "{answer}");
}

#[tokio::test]
async fn flow_options_are_checked_by_type() {
    let registry = with_code_subagents(
        register_plugin(Registry::new(), &materials(), true, &Workspace::new(None)).unwrap(),
    );
    let runtime =
        Runtime::new(Journal::open_in_memory().unwrap(), registry, RuntimeConfig::default());
    let err = runtime
        .run(
            selection("batch7", json!({"editors": "independent_reviewer", "approve_edits": 1})),
            json!("x"),
        )
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, FlowError::OptionsInvalid { .. }), "{err:?}");
    assert!(message.contains("editors") && message.contains("approve_edits"), "{message}");
}

#[tokio::test]
async fn basic_tools_stay_in_the_workspace() {
    let dir = temp_dir("basic");
    let registry = register_basic_tools(Registry::new(), Workspace::new(Some(dir.clone())));
    call_tool(&registry, "write_file", json!({"path": "results/a.txt", "text": "42"}))
        .await
        .unwrap();
    let read = call_tool(&registry, "read_file", json!({"path": "results/a.txt"})).await.unwrap();
    assert_eq!(read["text"], "42");
    let listed = call_tool(&registry, "list_files", json!({"path": "."})).await.unwrap();
    assert_eq!(listed["files"], json!(["results/"]));
    call_tool(&registry, "write_note", json!({"note": "grain size done"})).await.unwrap();
    let notes = call_tool(&registry, "read_notes", json!({})).await.unwrap();
    assert_eq!(notes["notes"], "grain size done\n");

    let outside =
        call_tool(&registry, "read_file", json!({"path": "../etc/passwd"})).await.unwrap_err();
    assert_eq!(outside.reason(), "call_refused");
    let missing_arg = call_tool(&registry, "write_file", json!({"path": "x"})).await.unwrap_err();
    assert!(missing_arg.to_string().contains("`text` is required"), "{missing_arg}");

    let none = register_basic_tools(Registry::new(), Workspace::new(None));
    let err = call_tool(&none, "list_files", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, FlowError::CallRefused { refusal, .. } if refusal == "no_workspace"),
        "{err:?}"
    );
}

/// A subagent's declared `flow` is what runs when the subagent is called, not its react
/// loop: here `twice`, a workflow file of its plugin whose two steps call `"self"` (the
/// subagent's own react loop, on the scripted model), the second on the first's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_declared_flow_runs_with_self_as_its_react_loop() {
    let dir = tempfile::tempdir().unwrap();
    let clio = dir.path().join("reviews/ai.iowarp.clio");
    std::fs::create_dir_all(clio.join("flows")).unwrap();
    let manifest = "id = \"reviews\"\nversion = \"0.1.0\"\n\n[[subagents]]\nid = \"critic\"\n\
                    prompt = \"You criticise.\"\nflow = \"twice\"\n";
    std::fs::write(clio.join("plugin.toml"), manifest).unwrap();
    let twice = json!({ "description": "Criticise, then criticise the criticism.", "steps": [
        { "id": "first", "target": "self", "input": "$task" },
        { "id": "second", "target": "self", "after": ["first"], "input": "again: $first" }
    ]});
    std::fs::write(clio.join("flows/twice.json"), twice.to_string()).unwrap();
    let plugin = clio_plugins::load_plugin(&dir.path().join("reviews")).unwrap();
    assert!(clio_plugins::check(&dir.path().join("reviews")).ok);
    let lead = clio_flow::FnFlow::new("lead", |task: Value, ctx| async move {
        let r = ctx.call("critic", task).await?;
        Ok(clio_flow::FlowOutput::text(r.answer))
    });
    let registry =
        register_plugin(Registry::new(), &plugin, true, &Workspace::new(None)).unwrap().flow(lead);
    let script = "[[script]]\nagent = \"critic\"\n[[script.turn]]\ntext = \"too long\"\n";
    let scripted =
        clio_flow::ScriptedProvider::from_toml(script, Path::new("critic.toml")).unwrap();
    let config = RuntimeConfig {
        model: "offline/scripted".into(),
        models: clio_flow::Models::offline(scripted),
        ..RuntimeConfig::default()
    };
    let journal = Journal::open_in_memory().unwrap();
    let runtime = Runtime::new(journal.clone(), registry, config);
    let report = runtime.run(selection("lead", json!({})), json!("the essay")).await.unwrap();
    let RunOutcome::Succeeded(output) = &report.outcome else { panic!("{:?}", report.outcome) };
    assert!(output.answer.starts_with("## second") && output.answer.contains("too long"));
    let tasks = journal.tasks(report.run).unwrap();
    let critic = tasks.iter().find(|t| t.target == "critic").unwrap();
    let selves: Vec<_> = tasks.iter().filter(|t| t.target == "self").collect();
    assert_eq!(selves.len(), 2, "{tasks:?}");
    for task in selves {
        assert_eq!(task.kind, clio_journal::TaskKind::Subagent);
        assert_eq!(task.parent, Some(critic.id), "the flow's steps are the subagent's own work");
    }
    let replayed = runtime.replay(report.run).await.unwrap();
    assert_eq!(replayed.output().map(|o| o.answer.clone()), Some(output.answer.clone()));
}

/// `BASIC_TOOLS` names exactly what `register_basic_tools` adds, so the CLI's list of an
/// agent's tools cannot drift from the runtime's.
#[test]
fn basic_tools_names_what_register_basic_tools_adds() {
    let empty = Registry::new();
    let registry = register_basic_tools(Registry::new(), Workspace::new(None));
    for name in clio_flow::BASIC_TOOLS {
        assert!(empty.get_tool(name).is_none(), "{name} is not there before");
        assert!(registry.get_tool(name).is_some(), "{name} is added");
    }
    for other in ["run_code", "run_workflow", "search_tools", "flow_result"] {
        assert_eq!(
            registry.get_tool(other).is_some(),
            empty.get_tool(other).is_some(),
            "{other} is not a basic tool"
        );
    }
}
