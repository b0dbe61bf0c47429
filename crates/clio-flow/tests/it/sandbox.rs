//! The sandbox of the code that runs on the person's machine, for real, under bubblewrap
//! and under Landlock: a `run_code` script and a plugin's executable tool read and write
//! their workspace, and nothing else outside it (a secret file beside the workspace,
//! `/etc/hostname`, a folder to drop files in); they reach no network unless the tool
//! declares it and the deployment allows it (a TCP listener the test opens on 127.0.0.1
//! sees no connection); a script cannot run another plugin's executable by its path (the
//! bypass of issue 18), nor launder a read through a symbolic link it leaves for the
//! unconfined basic tools; mode `off` records a `sandbox_off` event in the run; and a missing
//! bubblewrap under mode `bwrap` is an error that says how to install it or opt out.
//!
//! These tests ask for bubblewrap by name (mode `bwrap`), so they fail where it is
//! missing: `.ci/run` installs it.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use clio_flow::{
    FlowError, FlowOutput, FnFlow, Registry, RunCodeConfig, RunReport, Runtime, RuntimeConfig,
    Sandbox, SandboxMode, Workspace, register_basic_tools, register_plugin, register_run_code,
};
use clio_journal::{EntryKind, Journal};
use serde_json::{Value, json};

use crate::support::sel;

/// The two mechanisms, each asked for by name.
const MODES: [SandboxMode; 2] = [SandboxMode::Bwrap, SandboxMode::Landlock];

/// A workspace with `data.txt`, and beside it (outside it) a secret, a folder to try to
/// write to, and plugin folders.
struct Place {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    secret: PathBuf,
    outside: PathBuf,
    plugins: PathBuf,
}

impl Place {
    fn new() -> Place {
        let root = tempfile::tempdir().unwrap();
        let workspace = root.path().join("workspace");
        let outside = root.path().join("outside");
        let plugins = root.path().join("plugins");
        for dir in [&workspace, &outside, &plugins] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(workspace.join("data.txt"), "inside").unwrap();
        let secret = outside.join("secret.txt");
        std::fs::write(&secret, "hunter2").unwrap();
        Place { workspace, secret, outside, plugins, _root: root }
    }

    /// Writes plugin `id` with one executable tool `id` (a Python program, `body`), with
    /// the extra `[[tools]]` lines `decl`; returns the program's path.
    fn plugin(&self, id: &str, decl: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let clio = self.plugins.join(id).join("ai.iowarp.clio");
        std::fs::create_dir_all(clio.join("bin")).unwrap();
        std::fs::write(
            clio.join("plugin.toml"),
            format!(
                "id = \"{id}\"\nversion = \"0.1.0\"\n\n[[tools]]\nname = \"{id}\"\n\
                 command = \"bin/{id}\"\n{decl}\n"
            ),
        )
        .unwrap();
        let program = clio.join("bin").join(id);
        std::fs::write(&program, format!("#!/usr/bin/env python3\n{body}")).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        program
    }

    /// Returns the registry with the basic tools, `run_code`, the flow `code` (runs its
    /// task as a script and answers what it printed) and the plugins `ids`, on this
    /// workspace under `sandbox`.
    fn registry(&self, sandbox: &Sandbox, ids: &[&str]) -> Registry {
        let workspace = self.workspace_with(sandbox);
        let code = FnFlow::new("code", |task: Value, ctx| async move {
            let res = ctx.call("run_code", task).await?;
            Ok(FlowOutput::text(res.value["stdout"].as_str().unwrap_or_default()))
        });
        let basic = register_basic_tools(Registry::new(), workspace.clone());
        let mut registry = register_run_code(basic, RunCodeConfig::default()).flow(code);
        for id in ids {
            let plugin = clio_plugins::load_plugin(&self.plugins.join(id)).unwrap();
            registry = register_plugin(registry, &plugin, true, &workspace).unwrap();
        }
        registry
    }

    fn workspace_with(&self, sandbox: &Sandbox) -> Workspace {
        Workspace::new(Some(self.workspace.clone())).with_sandbox(sandbox.clone())
    }

    fn runtime(&self, journal: &Journal, sandbox: &Sandbox, ids: &[&str]) -> Runtime {
        let config = RuntimeConfig {
            workspace: Some(self.workspace.clone()),
            sandbox: sandbox.clone(),
            ..RuntimeConfig::default()
        };
        Runtime::new(journal.clone(), self.registry(sandbox, ids), config)
    }

    /// Runs `code` with `run_code` under `sandbox`; returns the run's report.
    async fn script(&self, journal: &Journal, sandbox: &Sandbox, code: &str) -> RunReport {
        let rt = self.runtime(journal, sandbox, &[]);
        rt.run(sel("code"), json!({ "code": code })).await.unwrap()
    }
}

fn sandbox(mode: SandboxMode) -> Sandbox {
    Sandbox { mode, ..Sandbox::default() }
}

/// Calls tool `name` of `registry` with `args`, through the gate as a flow does.
async fn call_tool(registry: &Registry, name: &str, args: Value) -> Result<Value, FlowError> {
    crate::support::call_tool(registry.clone(), name, args).await
}

/// A script that tries each file access and prints `<what> ok` or `<what> refused`.
fn file_probe(place: &Place) -> String {
    format!(
        r#"
import os, tempfile
def attempt(what, act):
    try:
        act()
        print(what, "ok")
    except OSError:
        print(what, "refused")
def write(path, text):
    with open(path, "w") as f:
        f.write(text)
attempt("read inside", lambda: open("data.txt").read())
attempt("write inside", lambda: write("out.txt", "written"))
attempt("read secret", lambda: open({secret:?}).read())
attempt("read hostname", lambda: open("/etc/hostname").read())
attempt("write outside", lambda: write({outside:?}, "dropped"))
attempt("write temp", lambda: write(os.path.join(tempfile.gettempdir(), "t.txt"), "temp"))
"#,
        secret = place.secret.to_str().unwrap(),
        outside = place.outside.join("dropped.txt").to_str().unwrap(),
    )
}

const CONFINED: &str = "read inside ok\nwrite inside ok\nread secret refused\n\
                        read hostname refused\nwrite outside refused\nwrite temp ok\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_reads_and_writes_its_workspace_and_nothing_outside() {
    for mode in MODES {
        let place = Place::new();
        let journal = Journal::open_in_memory().unwrap();
        let report = place.script(&journal, &sandbox(mode), &file_probe(&place)).await;
        assert_eq!(crate::support::answer(&report), CONFINED, "{mode:?}");
        let written = std::fs::read_to_string(place.workspace.join("out.txt")).unwrap();
        assert_eq!(written, "written", "{mode:?}");
        assert!(!place.outside.join("dropped.txt").exists(), "{mode:?}");
    }
}

/// Python defining `reach(args, name)`: what a plugin's program (an executable tool, an
/// MCP server) can reach from its working folder, trying each access in turn, with `name`
/// the file it writes in the workspace. Needs `sys`.
const REACH: &str = r#"
def attempt(act):
    try:
        return act()
    except OSError:
        return "refused"
def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return "ok"
def reach(args, name):
    return {
        "inside": attempt(lambda: open("data.txt").read()),
        "own": attempt(lambda: open(sys.argv[0]).read()[:2]),
        "write": attempt(lambda: write(name, "from the plugin")),
        "secret": attempt(lambda: open(args["secret"]).read()),
        "hostname": attempt(lambda: open("/etc/hostname").read()),
        "outside": attempt(lambda: write(args["outside"], "dropped")),
    }
"#;

/// What `reach` says of a confined program: its workspace and its own file, nothing else.
fn confined_reach() -> Value {
    json!({
        "inside": "inside",
        "own": "#!",
        "write": "ok",
        "secret": "refused",
        "hostname": "refused",
        "outside": "refused",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executable_tool_reads_and_writes_its_workspace_and_nothing_outside() {
    let body = format!(
        "import json, sys\n{REACH}\nprint(json.dumps(reach(json.load(sys.stdin), \"tool.txt\")))\n"
    );
    for mode in MODES {
        let place = Place::new();
        // Allowed: the gate asks about a side-effecting tool that declares nothing, and
        // these tests are about what the tool can reach once it runs.
        place.plugin("probe", "permission = \"allow\"", &body);
        let registry = place.registry(&sandbox(mode), &["probe"]);
        let args = json!({
            "secret": place.secret,
            "outside": place.outside.join("dropped.txt"),
        });
        let value = call_tool(&registry, "probe", args).await.unwrap();
        assert_eq!(value, confined_reach(), "{mode:?}");
        let written = std::fs::read_to_string(place.workspace.join("tool.txt")).unwrap();
        assert_eq!(written, "from the plugin", "{mode:?}");
        assert!(!place.outside.join("dropped.txt").exists(), "{mode:?}");
    }
}

/// A listener on 127.0.0.1 that tells whether anything connected to it.
struct Listener(TcpListener);

impl Listener {
    fn open() -> Listener {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        Listener(listener)
    }

    fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }

    /// Returns what the connection made so far sent, `None` when nothing connected (the
    /// kernel accepts a connection before the program that made it goes on, so one made
    /// by a program that has ended is waiting here).
    fn received(&self) -> Option<String> {
        match self.0.accept() {
            Ok((mut stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                let mut text = String::new();
                stream.read_to_string(&mut text).unwrap();
                Some(text)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Python that connects to 127.0.0.1:`port`, sends `hello` and says `connected`, or says
/// `no network` when it cannot.
fn connect(port: u16) -> String {
    format!(
        r#"
import socket
try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=10) as s:
        s.sendall(b"hello")
    said = "connected"
except OSError:
    said = "no network"
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_has_no_network() {
    for mode in MODES {
        let place = Place::new();
        let listener = Listener::open();
        let code = format!("{}print(said)\n", connect(listener.port()));
        // Even a deployment that allows the network gives none to a script: it declares
        // none.
        let allowing = Sandbox { network: true, ..sandbox(mode) };
        let journal = Journal::open_in_memory().unwrap();
        let report = place.script(&journal, &allowing, &code).await;
        assert_eq!(crate::support::answer(&report), "no network\n", "{mode:?}");
        assert_eq!(listener.received(), None, "{mode:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_has_the_network_only_when_it_declares_it_and_the_deployment_allows_it() {
    for mode in MODES {
        let place = Place::new();
        let listener = Listener::open();
        let body = format!(
            "import json, sys\njson.load(sys.stdin)\n{}print(json.dumps(said))\n",
            connect(listener.port())
        );
        place.plugin("online", "network = true\npermission = \"allow\"", &body);
        place.plugin("offline", "permission = \"allow\"", &body);
        let cases = [
            ("online", true, "connected"),
            ("online", false, "no network"),
            ("offline", true, "no network"),
            ("offline", false, "no network"),
        ];
        for (tool, allowed, expected) in cases {
            let deployment = Sandbox { network: allowed, ..sandbox(mode) };
            let registry = place.registry(&deployment, &["online", "offline"]);
            let value = call_tool(&registry, tool, json!({})).await.unwrap();
            let what = format!("{mode:?}: {tool}, deployment allows network: {allowed}");
            assert_eq!(value, json!(expected), "{what}");
            let sent = (expected == "connected").then(|| "hello".to_owned());
            assert_eq!(listener.received(), sent, "{what}");
        }
    }
}

/// Python that runs `program` (a `tally` tool: appends to `tally.log` in its folder) by
/// its path and says how that went.
fn run_by_path(program: &Path) -> String {
    format!(
        r#"
import subprocess
try:
    done = subprocess.run([{program:?}], input=b'{{"label": "x"}}', capture_output=True)
    print("ran", done.returncode)
except OSError:
    print("unreachable")
"#,
        program = program.to_str().unwrap()
    )
}

const TALLY: &str = r#"
import json, sys
label = json.load(sys.stdin)["label"]
with open("tally.log", "a") as log:
    log.write(label + "\n")
print(json.dumps({"tallied": label}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_cannot_run_a_plugins_executable_by_its_path() {
    for mode in MODES {
        let place = Place::new();
        // The tool is denied: the gate would refuse the call, and the script tries to go
        // around it.
        let tally = place.plugin("counter", "permission = \"deny\"", TALLY);
        let journal = Journal::open_in_memory().unwrap();
        let rt = place.runtime(&journal, &sandbox(mode), &["counter"]);
        let report = rt.run(sel("code"), json!({ "code": run_by_path(&tally) })).await.unwrap();
        assert_eq!(crate::support::answer(&report), "unreachable\n", "{mode:?}");
        assert!(!place.workspace.join("tally.log").exists(), "{mode:?}: nothing tallied");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_a_script_leaves_does_not_lead_the_basic_tools_out() {
    for mode in MODES {
        let place = Place::new();
        let code = format!(
            r#"
import os, clio
os.symlink({secret:?}, "secret-link")
os.symlink({outside:?}, "outside-link")
for name, args in [
    ("read_file", {{"path": "secret-link"}}),
    ("write_file", {{"path": "outside-link/dropped.txt", "text": "x"}}),
    ("list_files", {{"path": "outside-link"}}),
]:
    try:
        print(name, clio.call(name, args))
    except clio.ToolError as e:
        print(name, e.refusal)
"#,
            secret = place.secret.to_str().unwrap(),
            outside = place.outside.to_str().unwrap(),
        );
        let journal = Journal::open_in_memory().unwrap();
        let report = place.script(&journal, &sandbox(mode), &code).await;
        assert_eq!(
            crate::support::answer(&report),
            "read_file outside_workspace\nwrite_file outside_workspace\n\
             list_files outside_workspace\n",
            "{mode:?}"
        );
        assert!(!place.outside.join("dropped.txt").exists(), "{mode:?}");
    }
}

/// Returns the payloads of the run's `sandbox_off` events.
fn sandbox_off_events(journal: &Journal, report: &RunReport) -> Vec<Value> {
    journal
        .entries(report.run)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EntryKind::Event && e.payload["event"] == "sandbox_off")
        .map(|e| e.payload)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_off_confines_nothing_and_the_run_records_it_once() {
    let place = Place::new();
    let tally = place.plugin("counter", "permission = \"deny\"", TALLY);
    let journal = Journal::open_in_memory().unwrap();
    let off = Sandbox::off();
    let rt = place.runtime(&journal, &off, &["counter"]);
    let code = format!("{}print(open({:?}).read())\n", run_by_path(&tally), place.secret);
    let report = rt.run(sel("code"), json!({ "code": code })).await.unwrap();
    // What the sandbox is for: unconfined, the script reads the secret and runs the
    // denied tool's program.
    assert_eq!(crate::support::answer(&report), "ran 0\nhunter2\n");
    assert_eq!(std::fs::read_to_string(place.workspace.join("tally.log")).unwrap(), "x\n");
    let events = sandbox_off_events(&journal, &report);
    assert_eq!(events.len(), 1, "{events:?}");
    let message = events[0]["message"].as_str().unwrap();
    assert!(message.contains("[sandbox] mode = \"off\""), "{message}");

    // A sandboxed run records nothing of the kind.
    let confined = place.script(&journal, &sandbox(SandboxMode::Bwrap), "print(1)").await;
    assert_eq!(crate::support::answer(&confined), "1\n");
    assert!(sandbox_off_events(&journal, &confined).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bubblewrap_says_how_to_install_it_or_opt_out() {
    let place = Place::new();
    place.plugin("probe", "permission = \"allow\"", "print('{}')\n");
    let missing = Sandbox {
        mode: SandboxMode::Bwrap,
        bwrap: place.outside.join("no-such-bwrap"),
        ..Sandbox::default()
    };
    let journal = Journal::open_in_memory().unwrap();
    let report = place.script(&journal, &missing, "print(1)").await;
    let err = crate::support::error(&report);
    let message = err.to_string();
    assert!(message.contains("run_code sandbox_unavailable:"), "{message}");
    assert!(message.contains("no-such-bwrap is not installed"), "{message}");
    assert!(message.contains("sudo apt-get install bubblewrap"), "{message}");
    assert!(message.contains("mode = \"off\""), "{message}");
    assert!(!place.workspace.join("out.txt").exists());

    let registry = place.registry(&missing, &["probe"]);
    let err = call_tool(&registry, "probe", json!({})).await.unwrap_err();
    let FlowError::CallRefused { refusal, message, .. } = &err else { panic!("{err:?}") };
    assert_eq!(refusal, "sandbox_unavailable");
    assert!(message.starts_with("plugin probe: tool probe: the sandbox needs bubblewrap"));
    assert!(message.contains("sudo apt-get install bubblewrap"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_auto_without_bubblewrap_falls_back_to_landlock() {
    let place = Place::new();
    let auto = Sandbox { bwrap: place.outside.join("no-such-bwrap"), ..Sandbox::default() };
    let journal = Journal::open_in_memory().unwrap();
    let code = format!(
        "try:\n    open({:?}).read()\nexcept PermissionError:\n    print('landlock refused')\n",
        place.secret
    );
    let report = place.script(&journal, &auto, &code).await;
    // bubblewrap would hide the file (FileNotFoundError); Landlock refuses it.
    assert_eq!(crate::support::answer(&report), "landlock refused\n");
}

/// A minimal MCP server in Python (newline-delimited JSON-RPC on stdio, as MCP's stdio
/// transport is) with one tool, `probe`, whose answer is `probe(args)` as JSON text;
/// `body` defines `probe`.
fn mcp_server(body: &str) -> String {
    format!(
        r#"#!/usr/bin/env python3
import json, sys
{body}
for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, params = msg.get("method"), msg.get("params") or {{}}
    if method == "initialize":
        result = {{"protocolVersion": params.get("protocolVersion", "2025-03-26"),
                  "capabilities": {{"tools": {{}}}},
                  "serverInfo": {{"name": "probe", "version": "1.0.0"}}}}
    elif method == "tools/list":
        result = {{"tools": [{{"name": "probe", "description": "Probe.",
                              "inputSchema": {{"type": "object"}}}}]}}
    elif method == "tools/call":
        said = probe(params.get("arguments") or {{}})
        result = {{"content": [{{"type": "text", "text": json.dumps(said)}}]}}
    else:
        reply = {{"jsonrpc": "2.0", "id": msg["id"],
                 "error": {{"code": -32601, "message": "no method " + str(method)}}}}
        print(json.dumps(reply), flush=True)
        continue
    print(json.dumps({{"jsonrpc": "2.0", "id": msg["id"], "result": result}}), flush=True)
"#
    )
}

impl Place {
    /// Writes plugin `id` with one MCP server (`bin/server`, [`mcp_server`] of `body`,
    /// with the extra `[[mcp_servers]]` lines `decl`) and its tool `id`.
    fn mcp_plugin(&self, id: &str, decl: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let clio = self.plugins.join(id).join("ai.iowarp.clio");
        std::fs::create_dir_all(clio.join("bin")).unwrap();
        std::fs::write(
            clio.join("plugin.toml"),
            format!(
                "id = \"{id}\"\nversion = \"0.1.0\"\n\n[[mcp_servers]]\nname = \"srv\"\n\
                 command = \"bin/server\"\n{decl}\n\n[[tools]]\nname = \"{id}\"\n\
                 mcp = \"srv\"\nmcp_tool = \"probe\"\npermission = \"allow\"\n"
            ),
        )
        .unwrap();
        let program = clio.join("bin/server");
        std::fs::write(&program, mcp_server(body)).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A plugin's MCP server is plugin code on the person's machine: it is confined as its
/// executable tools are (issue 18: trust and the sandbox cover MCP servers too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_mcp_server_reads_and_writes_its_workspace_and_nothing_outside() {
    let body =
        format!("import sys\n{REACH}\ndef probe(args):\n    return reach(args, \"server.txt\")\n");
    for mode in MODES {
        let place = Place::new();
        place.mcp_plugin("served", "", &body);
        let registry = place.registry(&sandbox(mode), &["served"]);
        let args = json!({
            "secret": place.secret,
            "outside": place.outside.join("dropped.txt"),
        });
        let value = call_tool(&registry, "served", args).await.unwrap();
        assert_eq!(value, confined_reach(), "{mode:?}");
        let written = std::fs::read_to_string(place.workspace.join("server.txt")).unwrap();
        assert_eq!(written, "from the plugin", "{mode:?}");
        assert!(!place.outside.join("dropped.txt").exists(), "{mode:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_mcp_server_has_the_network_only_when_it_declares_it_and_the_deployment_allows_it()
 {
    for mode in MODES {
        let place = Place::new();
        let listener = Listener::open();
        let body =
            format!("def probe(args):\n{}    return said\n", indent(&connect(listener.port())));
        place.mcp_plugin("online", "network = true", &body);
        place.mcp_plugin("offline", "", &body);
        let cases = [
            ("online", true, "connected"),
            ("online", false, "no network"),
            ("offline", true, "no network"),
            ("offline", false, "no network"),
        ];
        for (tool, allowed, expected) in cases {
            let deployment = Sandbox { network: allowed, ..sandbox(mode) };
            let registry = place.registry(&deployment, &["online", "offline"]);
            let value = call_tool(&registry, tool, json!({})).await.unwrap();
            let what = format!("{mode:?}: MCP tool {tool}, deployment allows network: {allowed}");
            assert_eq!(value, json!(expected), "{what}");
            let sent = (expected == "connected").then(|| "hello".to_owned());
            assert_eq!(listener.received(), sent, "{what}");
        }
    }
}

/// Returns Python `code` indented one level, to be a function's body.
fn indent(code: &str) -> String {
    code.lines()
        .map(|l| if l.is_empty() { "\n".to_owned() } else { format!("    {l}\n") })
        .collect()
}

/// Where no sandbox can be had, a plugin's MCP server is not started unconfined: its
/// call is refused (`sandbox_unavailable`) and the server never ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_mcp_server_does_not_start_without_a_sandbox() {
    let place = Place::new();
    let body = "def probe(args):\n    open('ran.txt', 'w').write('ran')\n    return 'ran'\n";
    place.mcp_plugin("served", "", body);
    let missing = Sandbox {
        mode: SandboxMode::Bwrap,
        bwrap: PathBuf::from("/nonexistent/bwrap"),
        ..Sandbox::default()
    };
    let registry = place.registry(&missing, &["served"]);
    let err = call_tool(&registry, "served", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, FlowError::CallRefused { refusal, .. } if refusal == "sandbox_unavailable"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("mcp server srv"), "{message}");
    assert!(message.contains("bubblewrap"), "{message}");
    assert!(!place.workspace.join("ran.txt").exists());
}
