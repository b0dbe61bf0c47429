//! What a sandboxed plugin tool gets of the machine (issue 41, item 5), through the gate
//! as a flow calls it: none of `clio`'s environment but the sandbox's short list, unless
//! `config.toml`'s `[tools] env` names a variable for that tool (then exactly that); a
//! tool that allocates 1 GiB or forks 40 times fails, naming the limit; under Landlock a
//! tool without network sends no UDP to a loopback listener. An MCP server likewise gets
//! the key only where `[tools] env` names `plugin/mcp:server`.

use std::path::{Path, PathBuf};

use clio_flow::{
    EnvRule, FlowError, Registry, Sandbox, SandboxLimits, SandboxMode, Workspace, register_plugin,
};
use serde_json::{Value, json};

/// The modes tested: both mechanisms by name (`.ci/run` installs bubblewrap), and `off`.
const MODES: [SandboxMode; 3] = [SandboxMode::Bwrap, SandboxMode::Landlock, SandboxMode::Off];

/// A workspace and a folder of plugins.
struct Place {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    plugins: PathBuf,
}

impl Place {
    fn new() -> Place {
        let root = tempfile::tempdir().unwrap();
        let (workspace, plugins) = (root.path().join("workspace"), root.path().join("plugins"));
        for dir in [&workspace, &plugins] {
            std::fs::create_dir_all(dir).unwrap();
        }
        Place { workspace, plugins, _root: root }
    }

    /// Writes plugin `id` with one executable tool `id`, a Python program `body`, with
    /// the extra `[[tools]]` lines `decl`.
    fn plugin(&self, id: &str, decl: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let clio = self.plugins.join(id).join("ai.iowarp.clio");
        std::fs::create_dir_all(clio.join("bin")).unwrap();
        let manifest = format!(
            "id = \"{id}\"\nversion = \"0.1.0\"\n\n[[tools]]\nname = \"{id}\"\n\
             command = \"bin/{id}\"\npermission = \"allow\"\n{decl}\n"
        );
        std::fs::write(clio.join("plugin.toml"), manifest).unwrap();
        let program = clio.join("bin").join(id);
        std::fs::write(&program, format!("#!/usr/bin/env python3\n{body}")).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn registry(&self, sandbox: &Sandbox, ids: &[&str]) -> Registry {
        let workspace = Workspace::new(Some(self.workspace.clone())).with_sandbox(sandbox.clone());
        let mut registry = Registry::new();
        for id in ids {
            let plugin = clio_plugins::load_plugin(&self.plugins.join(id)).unwrap();
            registry = register_plugin(registry, &plugin, true, &workspace).unwrap();
        }
        registry
    }
}

async fn call(registry: &Registry, name: &str) -> Result<Value, FlowError> {
    crate::support::call_tool(registry.clone(), name, json!({})).await
}

/// Prints the tool's whole environment.
const DUMP: &str = "import json, os\nprint(json.dumps(dict(os.environ)))\n";

/// The variable the child test run gets, standing for a model key in `clio`'s environment.
const KEY: &str = "OPENAI_API_KEY";
/// Marks the child run.
const CHILD: &str = "CLIO_SANDBOX_ENV_CHILD";

#[test]
fn sandbox_env_a_plugin_tool_sees_the_key_only_where_config_allows_it() {
    // The key is set on a child run of this test binary (this process cannot change its
    // own environment safely); the child does the checks.
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["sandbox_bounds::env_child", "--exact", "--nocapture"])
        .env(KEY, "sk-test-not-a-key")
        .env(CHILD, "1")
        .output()
        .unwrap();
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("1 passed"), "the child ran its test: {said}");
}

/// The checks of [`sandbox_env_a_plugin_tool_sees_the_key_only_where_config_allows_it`],
/// in the child run it starts (with the key in the environment); a no-op in any other run.
#[tokio::test]
async fn env_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    assert_eq!(std::env::var(KEY).unwrap(), "sk-test-not-a-key");
    let place = Place::new();
    place.plugin("dump", "", DUMP);
    place.plugin("other", "", DUMP);
    for mode in MODES {
        let plain = Sandbox { mode, ..Sandbox::default() };
        let env = call(&place.registry(&plain, &["dump"]), "dump").await.unwrap();
        assert!(env.get(KEY).is_none(), "{mode:?}: {env}");
        assert!(env.get(CHILD).is_none(), "{mode:?}: {env}");
        let mut names: Vec<&str> = env.as_object().unwrap().keys().map(String::as_str).collect();
        names.retain(|n| !clio_flow::is_locale(n) && !["PWD", "CLIO_CALL"].contains(n));
        names.sort_unstable();
        if mode == SandboxMode::Off {
            // With clio's own `PATH` the program's start may add its own (a pyenv shim
            // sets `PYENV_*`); none of clio's other variables is there.
            assert!(!names.iter().any(|n| n.starts_with("CARGO")), "{mode:?}: {env}");
        } else {
            assert_eq!(names, ["HOME", "PATH", "TMPDIR"], "{mode:?}: {env}");
        }
        // `[tools] env = { "dump/dump" = ["OPENAI_API_KEY"] }`: that tool gets it, exactly;
        // another plugin's tool does not.
        let rules = vec![EnvRule { tool: "dump/dump".into(), names: vec![KEY.into()] }];
        let allowed = Sandbox { env: rules, ..plain };
        let registry = place.registry(&allowed, &["dump", "other"]);
        let env = call(&registry, "dump").await.unwrap();
        assert_eq!(env[KEY], "sk-test-not-a-key", "{mode:?}");
        assert!(env.get(CHILD).is_none(), "{mode:?}: {env}");
        let env = call(&registry, "other").await.unwrap();
        assert!(env.get(KEY).is_none(), "{mode:?}: {env}");
    }
    mcp_server_sees_the_key_only_where_allowed().await;
}

/// Writes plugin `calculator` in `root` with the test's MCP server `calc` (this test
/// binary, `mcp/server.rs`), which notes what it sees in `scratch`, and its tool `sum`.
fn mcp_plugin(root: &Path, scratch: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let clio = root.join("ai.iowarp.clio");
    std::fs::create_dir_all(clio.join("bin")).unwrap();
    let server = clio.join("bin/server");
    let exe = std::env::current_exe().unwrap();
    std::fs::write(&server, format!("#!/bin/sh\nexec {:?} \"$@\"\n", exe.display().to_string()))
        .unwrap();
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    let args: Vec<String> =
        crate::mcp::server::server_args().iter().map(|a| format!("{a:?}")).collect();
    let manifest = format!(
        "id = \"calculator\"\nversion = \"1.0.0\"\n\n[[mcp_servers]]\nname = \"calc\"\n\
         command = \"bin/server\"\nargs = [{}]\nenv = {{ {} = {:?} }}\n\n[[tools]]\n\
         name = \"sum\"\nread_only = true\nmcp = \"calc\"\nmcp_tool = \"add\"\n",
        args.join(", "),
        crate::mcp::server::SERVER_ENV,
        scratch.display().to_string()
    );
    std::fs::write(clio.join("plugin.toml"), manifest).unwrap();
    root.to_path_buf()
}

/// The MCP server of plugin `calculator` gets the key only where `[tools] env` names
/// `calculator/mcp:calc`: what its last start saw.
async fn mcp_server_sees_the_key_only_where_allowed() {
    let root = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    for mode in [SandboxMode::Bwrap, SandboxMode::Landlock] {
        for allowed in [false, true] {
            let scratch = tempfile::tempdir().unwrap();
            let folder = mcp_plugin(root.path(), scratch.path());
            let plugin = clio_plugins::load_plugin(&folder).unwrap();
            let env = if allowed {
                vec![EnvRule { tool: "calculator/mcp:calc".into(), names: vec![KEY.into()] }]
            } else {
                Vec::new()
            };
            let sandbox = Sandbox {
                mode,
                read: vec![exe.parent().unwrap().to_path_buf()],
                env,
                ..Sandbox::default()
            };
            let workspace =
                Workspace::new(Some(scratch.path().to_path_buf())).with_sandbox(sandbox);
            let registry = register_plugin(Registry::new(), &plugin, true, &workspace).unwrap();
            let sum = crate::support::call_tool(registry, "sum", json!({"a": 1, "b": 2})).await;
            assert_eq!(sum.unwrap(), json!(3.0), "{mode:?}");
            let seen = std::fs::read_to_string(scratch.path().join("env")).unwrap();
            let names: Vec<&str> = seen.split_whitespace().collect();
            assert_eq!(names.contains(&KEY), allowed, "{mode:?}: {seen}");
            assert!(!names.contains(&CHILD), "{mode:?}: {seen}");
            assert!(!names.iter().any(|n| n.starts_with("CARGO")), "{mode:?}: {seen}");
            // Its plugin's own `env` table is still set.
            assert!(names.contains(&crate::mcp::server::SERVER_ENV), "{mode:?}: {seen}");
        }
    }
}

#[tokio::test]
async fn sandbox_limits_a_tool_that_allocates_1_gib_or_forks_40_times_fails_naming_the_limit() {
    let place = Place::new();
    place.plugin(
        "hog",
        "",
        "import json\nblock = bytearray(1 << 30)\nprint(json.dumps(len(block)))\n",
    );
    place.plugin(
        "forker",
        "",
        r#"import json, os, time
children = []
try:
    for i in range(40):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
finally:
    for pid in children:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
print(json.dumps(len(children)))
"#,
    );
    for mode in MODES {
        let sandbox = Sandbox { mode, ..Sandbox::default() };
        let registry = place.registry(&sandbox, &["hog", "forker"]);
        let err = call(&registry, "hog").await.unwrap_err().to_string();
        assert!(err.contains("stopped by the sandbox's memory limit (512 MiB"), "{mode:?}: {err}");
        let err = call(&registry, "forker").await.unwrap_err().to_string();
        assert!(err.contains("stopped by the sandbox's process limit (32"), "{mode:?}: {err}");
        // Raised in config, both run.
        let roomy = Sandbox {
            limits: SandboxLimits {
                memory: Some(2 << 30),
                processes: Some(100),
                ..SandboxLimits::default()
            },
            ..sandbox
        };
        let registry = place.registry(&roomy, &["hog", "forker"]);
        assert_eq!(call(&registry, "hog").await.unwrap(), json!(1 << 30), "{mode:?}");
        assert_eq!(call(&registry, "forker").await.unwrap(), json!(40), "{mode:?}");
    }
}

#[tokio::test]
async fn sandbox_udp_under_landlock_a_tool_without_network_sends_nothing_to_loopback() {
    let listener = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let place = Place::new();
    let body = format!(
        r#"import json, socket
said = {{}}
for name, family, host in [("v4", socket.AF_INET, "127.0.0.1"), ("v6", socket.AF_INET6, "::1")]:
    try:
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.sendto(b"escaped", (host, {port}))
        said[name] = "sent"
    except OSError as e:
        said[name] = "refused: %s" % e
print(json.dumps(said))
"#
    );
    place.plugin("udp", "", &body);
    let sandbox = Sandbox { mode: SandboxMode::Landlock, ..Sandbox::default() };
    let said = call(&place.registry(&sandbox, &["udp"]), "udp").await.unwrap();
    assert!(said["v4"].as_str().unwrap().starts_with("refused: [Errno 13]"), "{said}");
    assert!(said["v6"].as_str().unwrap().starts_with("refused: [Errno 13]"), "{said}");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let mut buf = [0u8; 64];
    assert!(listener.recv_from(&mut buf).is_err(), "a datagram got through");
    // Declared and allowed, the same tool reaches the listener: the check can fail.
    place.plugin("udpnet", "network = true", &body);
    let open = Sandbox { network: true, ..sandbox };
    let said = call(&place.registry(&open, &["udpnet"]), "udpnet").await.unwrap();
    assert_eq!(said["v4"], "sent", "{said}");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(listener.recv_from(&mut buf).is_ok(), "the allowed datagram arrived");
}
