//! Declarations built in Rust: the builder checks what loading checks, `describe` gives
//! the declaration as JSON, and a folder loads into the same shape.

use std::path::Path;

use clio_plugins::{
    Callers, FlowDecl, Hook, HookEventKind, LoadError, McpServer, NativeTool, Pack, Permission,
    Plugin, ProblemCode, ScriptBinding, Subagent, Tool, ToolImpl, ToolOptions, load_plugin,
};
use clio_spec::{PluginRef, Requires};
use serde_json::json;

fn data(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(path)
}

#[test]
fn the_builder_builds_a_plugin_and_describe_shows_it() {
    let plugin = Plugin::builder("pdf", "1.0.0")
        .description("PDF tools")
        .requires("document-runtime@^2")
        .model_requires(Requires { tool_calling: true, ..Requires::default() })
        .tool(
            Tool::new("render_pdf", "Render a PDF.")
                .read_only()
                .input_schema(json!({"type": "object", "properties": {"path": {"type": "string"}}}))
                .options(ToolOptions {
                    defer: Some(true),
                    callers: Some(Callers::Code),
                    permission: Some(Permission::Ask),
                }),
        )
        .native_tool(NativeTool::new("shell_bash"))
        .hook(Hook::new(HookEventKind::from_key("tool_call").unwrap(), "guard"))
        .subagent(Subagent::new("reviewer"))
        .flow(FlowDecl::host("review", "Review a PDF."))
        .binding(ScriptBinding {
            name: "stream".into(),
            host_calls: vec!["__stream_write__".into()],
        })
        .mcp_server(McpServer {
            name: "srv".into(),
            command: "pdf-mcp".into(),
            args: vec![],
            env: Default::default(),
            network: false,
        })
        .build()
        .unwrap();
    insta::assert_json_snapshot!(plugin.describe());
}

#[test]
fn the_builder_reports_every_problem() {
    let err = Plugin::builder("PDF", "1.0")
        .requires("x@latest")
        .tool(Tool::new("dup", ""))
        .tool(Tool::new("dup", ""))
        .tool(
            Tool::new("remote", "")
                .implementation(ToolImpl::Mcp { server: "none".into(), tool: "remote".into() }),
        )
        .binding(ScriptBinding { name: "io".into(), host_calls: vec!["__other_x__".into()] })
        .build()
        .unwrap_err();
    let clio_plugins::DeclarationError::Invalid { problems, .. } = &err;
    let codes: Vec<ProblemCode> = problems.iter().map(|p| p.code).collect();
    assert_eq!(
        codes,
        [
            ProblemCode::InvalidVersion,
            ProblemCode::InvalidReference,
            ProblemCode::InvalidId,
            ProblemCode::DuplicateTool,
            ProblemCode::HostCallOutsideBinding,
            ProblemCode::UnknownMcpServer,
        ]
    );
    assert!(
        err.to_string().starts_with("plugin PDF is invalid: invalid_version version: "),
        "{err}"
    );
}

#[test]
fn a_pack_is_a_plugin_that_brings_its_members() {
    let pack = Pack {
        id: "documents".into(),
        version: semver::Version::new(1, 0, 0),
        description: String::new(),
        members: ["pdf", "docx"].iter().map(|m| PluginRef::parse(m).unwrap()).collect(),
    };
    let plugin = pack.to_plugin();
    let deps: Vec<String> = plugin.dependencies().map(ToString::to_string).collect();
    assert_eq!(deps, ["pdf", "docx"]);
    assert_eq!(pack.describe()["members"], json!(["pdf", "docx"]));
}

#[test]
fn a_folder_loads_into_the_declaration() {
    let plugin = load_plugin(&data("valid/full")).unwrap();
    insta::assert_json_snapshot!(plugin.describe());
    let order: Vec<&str> =
        plugin.hook_order().unwrap().into_iter().map(|i| plugin.hooks[i].id.as_str()).collect();
    assert_eq!(order, ["guard", "audit"]);
}

#[test]
fn loading_refuses_a_broken_folder_with_every_problem() {
    match load_plugin(&data("invalid/options")) {
        Err(LoadError::Invalid { problems, .. }) => assert_eq!(problems.len(), 5),
        other => panic!("expected problems, got {other:?}"),
    }
    assert!(matches!(
        load_plugin(&data("invalid/not_a_plugin")),
        Err(LoadError::NotAPlugin { .. })
    ));
    let err = load_plugin(&data("invalid/ids_version")).unwrap_err();
    assert!(err.to_string().contains("invalid_version"), "{err}");
}
