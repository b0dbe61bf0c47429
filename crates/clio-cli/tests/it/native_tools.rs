//! Built-in tools a plugin claims with `[[native_tools]]` are offered to the top-level agent
//! that carries the plugin, as they are to the plugin's subagents (docs/plugins.md, "At run
//! time"). The test plugin `tests/data/native-tools/lab` has no tools of its own and claims
//! `council_run` (an orchestration tool: the agent does not carry the orchestration plugin)
//! and `run_code` (which every agent is offered anyway).

use serde_json::Value;

use insta::assert_snapshot;

use crate::support::{ChatServer, clio, temp_home};

const DATA: &str = "crates/clio-cli/tests/data/native-tools";

/// On the scripted model, the agent carrying `lab` calls `council_run`: the call runs
/// (a tool task in the tree) and its subagent answers (the run's team). The same agent
/// without `lab` makes the same call and is refused, so the run has no such task and no
/// team.
#[test]
fn an_agent_can_call_a_built_in_tool_its_plugin_claims() {
    let home = temp_home("native-tools");
    let h = home.to_str().unwrap();
    let models = format!("{DATA}/models.toml");
    let run = |agent: &str, plugins: &[&str]| {
        let agent = format!("{DATA}/{agent}");
        let mut args = vec!["--home", h, "run", &agent, "--input", "Measure batch 7"];
        for plugin in plugins {
            args.extend(["--plugin", plugin]);
        }
        args.extend(["--models", &models, "--quiet"]);
        let outcome = clio(&args);
        assert_eq!(outcome.code, 0, "{}", outcome.render());
        assert_eq!(outcome.stdout, "Done.\n");
    };

    run("lab_lead.toml", &[&format!("{DATA}/lab")]);
    let tree = clio(&["--home", h, "runs", "tree", "1"]);
    assert_eq!(tree.code, 0, "{}", tree.render());
    assert_snapshot!(tree.stdout);

    run("plain_lead.toml", &[]);
    let tree = clio(&["--home", h, "runs", "tree", "2"]);
    assert_eq!(tree.code, 0, "{}", tree.render());
    assert!(!tree.stdout.contains("council_run"), "{}", tree.stdout);
    assert!(!tree.stdout.contains("team"), "{}", tree.stdout);
}

/// Returns the names of the tools a chat-completions request offers.
fn tools_of(request: &Value) -> Vec<String> {
    let tools = request["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools.iter().filter_map(|t| t["function"]["name"].as_str()).map(str::to_owned).collect()
}

/// On a model server, the request of the agent carrying `lab` lists `council_run` and
/// `run_code` once each, beside the basic tools, and no orchestration tool lab does not
/// claim.
#[test]
fn the_claimed_tools_are_offered_once() {
    let server = ChatServer::start(|_| ChatServer::answer("Done."));
    let home = temp_home("native-tools-offered");
    let h = home.to_str().unwrap();
    let config = format!(
        "[[provider]]\nname = \"local\"\nkind = \"openai\"\nbase_url = \"{}\"\n\n\
         [[model]]\naccount = \"local\"\nid = \"m\"\nprovider = \"local\"\n\
         capabilities = {{ tool_calling = true }}\n",
        server.url
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
    let agent = format!("{DATA}/lab_lead.toml");
    let plugin = format!("{DATA}/lab");
    let outcome =
        clio(&["--home", h, "run", &agent, "--plugin", &plugin, "--input", "Hi", "--quiet"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert_eq!(outcome.stdout, "Done.\n");

    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let tools = tools_of(&requests[0]);
    for tool in ["council_run", "run_code", "read_file"] {
        let times = tools.iter().filter(|t| *t == tool).count();
        assert_eq!(times, 1, "{tool} is offered once: {tools:?}");
    }
    for tool in ["run_flow", "council_wait"] {
        assert!(!tools.contains(&tool.to_owned()), "{tool} is not offered: {tools:?}");
    }
}
