//! An agent that carries the built-in orchestration plugin, on an OpenAI-compatible model:
//! its react loop is offered `run_flow`, `run_workflow` and `flow_result` (the requests
//! the model server receives list them), it starts a council in the background with
//! `run_flow`, reads the council's answer with `flow_result`, and the run finishes with
//! the answer built from it. An agent without the plugin is not offered them.

use serde_json::{Value, json};

use crate::support::{ChatServer, clio, temp_home};

const LEAD: &str = "crates/clio-cli/tests/data/orchestration/lead.toml";
const TASK: &str = "Ask the council whether Ti-6Al-4V is fatigue-limited";
const QUESTION: &str = "Is Ti-6Al-4V fatigue-limited?";
const MEMBER_ANSWER: &str = "Yes: Ti-6Al-4V has a fatigue limit near 500 MPa.";
const ORCHESTRATION_TOOLS: [&str; 3] = ["run_flow", "run_workflow", "flow_result"];

/// Returns the text of the first user message of a chat-completions request.
fn task_of(request: &Value) -> &str {
    let messages = request["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
    messages.iter().find(|m| m["role"] == "user").and_then(|m| m["content"].as_str()).unwrap_or("")
}

/// Returns the names of the tools a request offers.
fn tools_of(request: &Value) -> Vec<String> {
    let tools = request["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools.iter().filter_map(|t| t["function"]["name"].as_str()).map(str::to_owned).collect()
}

/// The model: the lead starts the council, then polls `flow_result` until the council
/// has ended (a model would; how many polls depends on timing), then answers with the
/// council's answer. The council's result also arrives in the conversation when it ends
/// (a user message), which this model reads past. Council members and the synthesiser answer the question; anything
/// else answers "Hello.".
fn respond(request: &Value) -> Value {
    let task = task_of(request);
    if !task.starts_with(TASK) {
        let text = if task.contains(QUESTION) { MEMBER_ANSWER } else { "Hello." };
        return ChatServer::answer(text);
    }
    // The last tool result decides: the council's result, delivered into the conversation
    // when it ends, is a user message after it.
    let messages = request["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
    let last = messages.iter().rev().find(|m| m["role"] == "tool").cloned().unwrap_or_default();
    if last["role"] != "tool" {
        let arguments =
            json!({"flow": "council", "input": QUESTION, "options": {"members": ["self"]}});
        return ChatServer::tool_call("start", "run_flow", &arguments);
    }
    let result: Value =
        serde_json::from_str(last["content"].as_str().unwrap_or("")).unwrap_or_default();
    let id = last["tool_call_id"].as_str().unwrap_or("");
    let status = result["status"].as_str().unwrap_or("");
    if id == "start" || (id.starts_with("poll-") && status == "running") {
        let n = id.strip_prefix("poll-").and_then(|n| n.parse::<u32>().ok()).unwrap_or(0) + 1;
        let arguments = json!({"handle": result["handle"]});
        return ChatServer::tool_call(&format!("poll-{n}"), "flow_result", &arguments);
    }
    match result["answer"].as_str() {
        Some(answer) if status == "succeeded" => {
            ChatServer::answer(&format!("The council answered: {answer}"))
        }
        _ => ChatServer::answer(&format!("The council did not answer: {result}")),
    }
}

#[test]
fn an_agent_with_the_orchestration_plugin_runs_a_flow_in_the_background_from_its_react_loop() {
    let server = ChatServer::start(respond);
    let home = temp_home("orchestration");
    let h = home.to_str().unwrap();
    // The lead polls flow_result once per turn, so it may take more turns than the default.
    let config = format!(
        "[[provider]]\nname = \"local\"\nkind = \"openai\"\nbase_url = \"{}\"\n\n\
         [[model]]\naccount = \"local\"\nid = \"m\"\nprovider = \"local\"\n\
         capabilities = {{ tool_calling = true }}\n\n[limits]\nmax_iters = 200\n",
        server.url
    );
    std::fs::write(home.join("config.toml"), config).unwrap();

    let outcome = clio(&["--home", h, "run", LEAD, "--input", TASK, "--quiet"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert_eq!(outcome.stdout, format!("The council answered: {MEMBER_ANSWER}\n"));

    let requests = server.requests();
    let lead: Vec<&Value> = requests.iter().filter(|r| task_of(r).starts_with(TASK)).collect();
    assert!(lead.len() >= 3, "start, at least one poll, the answer: {requests:?}");
    for request in &lead {
        let tools = tools_of(request);
        for tool in ORCHESTRATION_TOOLS {
            assert!(tools.contains(&tool.to_owned()), "{tool} is offered: {tools:?}");
        }
    }

    // The journal shows the council under the run_flow call that started it, and the
    // flow_result calls that read it.
    let tree = clio(&["--home", h, "runs", "tree", "1"]);
    assert_eq!(tree.code, 0, "{}", tree.render());
    let text = &tree.stdout;
    assert!(text.contains("tool run_flow [succeeded]"), "{text}");
    assert!(text.contains("flow council [succeeded]"), "{text}");
    assert!(text.contains("tool flow_result [succeeded]"), "{text}");
    let polls = text.matches("tool flow_result").count();
    assert_eq!(polls, lead.len() - 2, "one flow_result per turn between start and answer: {text}");

    // An agent without the plugin is not offered the tools.
    let before = server.requests().len();
    let plain = clio(&[
        "--home",
        h,
        "run",
        "examples/agents/minimal.toml",
        "--input",
        "Say hello",
        "--quiet",
    ]);
    assert_eq!(plain.code, 0, "{}", plain.render());
    assert_eq!(plain.stdout, "Hello.\n");
    let requests = server.requests();
    let tools = tools_of(&requests[before]);
    assert!(!tools.is_empty(), "the basic tools are offered: {tools:?}");
    for tool in ORCHESTRATION_TOOLS {
        assert!(!tools.contains(&tool.to_owned()), "{tool} is not offered: {tools:?}");
    }
}
