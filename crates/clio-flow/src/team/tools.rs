//! The team's functions as tools of the built-in `orchestration` plugin:
//! [`AgentEnv::call_tool`] takes a tool name and JSON arguments and returns JSON, with
//! errors as data (`{"error": {"reason", "message"}}`), so the runtime's tool layer can
//! route calls to it. [`TEAM_TOOLS`] lists the names and what each does; the
//! orchestration layer makes them registry tools bound to one session (`AgentEnv::tools`,
//! in `orchestration.rs`: the team knows nothing of the registry).

use clio_journal::SessionId;
use serde_json::{Map, Value, json};

use crate::model::Message;
use crate::team::{
    AgentEnv, AskOptions, ReplyOutcome, RunOptions, TaskSpec, TeamError, WaitOptions,
};

/// A team tool: its name and what it does, written for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TeamTool {
    /// The name the model calls (`council.` in front is accepted too).
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
}

impl TeamTool {
    /// Returns the JSON schema of its arguments.
    pub fn schema(&self) -> Value {
        tool_schema(self.name)
    }

    /// Returns whether it only reads (the queries).
    pub fn read_only(&self) -> bool {
        matches!(
            self.name,
            "controls"
                | "enabled"
                | "stop_reason"
                | "restrict_router"
                | "routing_change"
                | "wake_allowed"
        )
    }
}

/// Every team tool.
pub const TEAM_TOOLS: &[TeamTool] = &[
    TeamTool {
        name: "run",
        description: "Run each task in its own subagent and wait for all of them. A task is a string or a dict with task and optional model, provider, iteration_budget and context. A child on another model gets only the system prompt and its task, unless context is \"full\". Records have session_id, status, answer and question. timeout_secs defaults to 240 (max 1800). If a status is still running, call wait. lost means the child stopped without an answer.",
    },
    TeamTool {
        name: "wait",
        description: "Wait again for subagents by session_ids (default: all your children). Same records and timeout as run.",
    },
    TeamTool {
        name: "cancel_agent",
        description: "Cancel a subagent (session_id) and its descendants, including queued work. Returns its record.",
    },
    TeamTool {
        name: "ask",
        description: "As a subagent, ask your parent a question and wait for the reply text. The reply is null when the parent is not running or does not reply within timeout_secs (default 600): then choose the safest option and say so in your answer.",
    },
    TeamTool {
        name: "reply",
        description: "Reply text to a child (session_id) that asked you a question.",
    },
    TeamTool {
        name: "checkpoint",
        description: "Capture the last complete model input of messages, before its in-flight tool call.",
    },
    TeamTool {
        name: "claim_iteration",
        description: "Reserve one model iteration of your durable budget.",
    },
    TeamTool {
        name: "stop_reason",
        description: "Give the cause when claim_iteration refuses you.",
    },
    TeamTool {
        name: "controls",
        description: "Whether actor controls target: leaders control their descendants; subagents themselves and their direct children.",
    },
    TeamTool {
        name: "enabled",
        description: "Whether session_id (default: you) can use managed subagents.",
    },
    TeamTool {
        name: "require_enabled",
        description: "Refuse unless session_id (default: you) can use managed subagents.",
    },
    TeamTool {
        name: "reconcile_orphans",
        description: "Mark lost the children a dead process left queued or running, sparing those whose session, leader or ancestor live_session_ids names. Returns the count.",
    },
    TeamTool {
        name: "restrict_router",
        description: "The router allowlist your requests are held to.",
    },
    TeamTool {
        name: "routing_change",
        description: "The route command issued for you since mark before, as {preference: {provider, model}, command}, or null.",
    },
    TeamTool {
        name: "wake_allowed",
        description: "Whether a message from author may automatically resume recipient.",
    },
];

fn bad(tool: &str, problem: impl Into<String>) -> TeamError {
    TeamError::InvalidArguments { tool: tool.to_owned(), problem: problem.into() }
}

struct Args<'a> {
    tool: &'a str,
    map: Map<String, Value>,
}

impl Args<'_> {
    fn opt_str(&self, key: &str) -> Result<Option<String>, TeamError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(self.tool, format!("{key} must be a string"))),
        }
    }

    fn str(&self, key: &str) -> Result<String, TeamError> {
        self.opt_str(key)?.ok_or_else(|| bad(self.tool, format!("{key} is required")))
    }

    fn opt_u64(&self, key: &str) -> Result<Option<u64>, TeamError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| bad(self.tool, format!("{key} must be a whole number ≥ 0"))),
        }
    }

    fn sid(&self, key: &str) -> Result<SessionId, TeamError> {
        self.str(key).map(SessionId)
    }

    fn opt_ids(&self, key: &str) -> Result<Option<Vec<SessionId>>, TeamError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => ids(self.tool, v).map(Some),
        }
    }
}

fn ids(tool: &str, v: &Value) -> Result<Vec<SessionId>, TeamError> {
    let Value::Array(items) = v else {
        return Err(bad(tool, "session ids must be a list of strings"));
    };
    items
        .iter()
        .map(|i| i.as_str().map(|s| SessionId(s.to_owned())))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| bad(tool, "session ids must be a list of strings"))
}

/// Reads one task of `run`: a string, or `{task, model, provider, iteration_budget,
/// context}`.
fn task_spec(index: usize, v: &Value) -> Result<TaskSpec, TeamError> {
    let invalid = |problem: String| TeamError::InvalidTask { index, problem };
    match v {
        Value::String(s) => Ok(TaskSpec::from(s.as_str())),
        Value::Object(map) => {
            for key in map.keys() {
                if !matches!(
                    key.as_str(),
                    "task" | "model" | "provider" | "iteration_budget" | "context"
                ) {
                    return Err(invalid(format!("unknown key {key:?}")));
                }
            }
            let args = Args { tool: "run", map: map.clone() };
            let field = |key: &str| {
                args.opt_str(key).map_err(|_| invalid(format!("{key} must be a string")))
            };
            Ok(TaskSpec {
                task: field("task")?.ok_or_else(|| invalid("task is required".into()))?,
                model: field("model")?,
                provider: field("provider")?,
                iteration_budget: args
                    .opt_u64("iteration_budget")
                    .map_err(|_| invalid("iteration_budget must be a whole number ≥ 0".into()))?,
                context: field("context")?,
            })
        }
        _ => Err(invalid("a task is a string or an object".into())),
    }
}

fn records(recs: Vec<crate::team::AgentRecord>) -> Value {
    Value::Array(recs.iter().map(|r| r.to_json()).collect())
}

/// Returns the JSON schema of the arguments of team tool `name` (an open object for an
/// unknown name).
fn tool_schema(name: &str) -> Value {
    let string = json!({ "type": "string" });
    let count = json!({ "type": "integer", "minimum": 0 });
    let ids = json!({ "type": "array", "items": { "type": "string" } });
    let (props, required): (Value, &[&str]) = match name {
        "run" => (
            json!({
                "tasks": { "type": "array", "items": { "oneOf": [
                    { "type": "string" },
                    { "type": "object", "properties": {
                        "task": string, "model": string, "provider": string,
                        "iteration_budget": count, "context": { "enum": ["full", "task"] },
                    }, "required": ["task"], "additionalProperties": false },
                ] } },
                "timeout_secs": count,
                "team": string,
            }),
            &["tasks"],
        ),
        "wait" => (json!({ "session_ids": ids, "timeout_secs": count }), &[]),
        "cancel_agent" => (json!({ "session_id": string }), &["session_id"]),
        "ask" => (json!({ "question": string, "timeout_secs": count }), &["question"]),
        "reply" => (json!({ "session_id": string, "text": string }), &["session_id", "text"]),
        "checkpoint" => (
            json!({ "messages": { "type": "array", "items": { "type": "object" } } }),
            &["messages"],
        ),
        "controls" => (json!({ "actor": string, "target": string }), &["actor", "target"]),
        "enabled" | "require_enabled" => (json!({ "session_id": string }), &[]),
        "reconcile_orphans" => (json!({ "live_session_ids": ids }), &[]),
        "routing_change" => (json!({ "before": count }), &[]),
        "wake_allowed" => {
            (json!({ "author": string, "recipient": string }), &["author", "recipient"])
        }
        _ => (json!({}), &[]),
    };
    json!({ "type": "object", "properties": props, "required": required })
}

impl AgentEnv {
    /// Calls team tool `name` with JSON `args` on behalf of this session and returns its
    /// JSON result, or `{"error": {"reason", "message"}}`.
    pub async fn call_tool(&self, name: &str, args: Value) -> Value {
        match self.dispatch(name, args).await {
            Ok(v) => v,
            Err(err) => err.to_json(),
        }
    }

    async fn dispatch(&self, name: &str, args: Value) -> Result<Value, TeamError> {
        let tool =
            name.strip_prefix("council.").or_else(|| name.strip_prefix("council_")).unwrap_or(name);
        let tool = if tool == "wait_agents" { "wait" } else { tool };
        if !TEAM_TOOLS.iter().any(|t| t.name == tool) {
            return Err(TeamError::UnknownTool { name: name.to_owned() });
        }
        // `wait` also takes the list of ids alone.
        if let (true, Value::Array(_)) = (tool == "wait", &args) {
            let ids = ids(tool, &args)?;
            return self.wait_agents(Some(ids), WaitOptions::default()).await.map(records);
        }
        let map = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            _ => return Err(bad(tool, "arguments must be an object")),
        };
        let a = Args { tool, map };
        let team = self.team();
        match tool {
            "run" => {
                let Some(Value::Array(items)) = a.map.get("tasks") else {
                    return Err(bad(tool, "tasks must be a list"));
                };
                let tasks = items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| task_spec(i, v))
                    .collect::<Result<_, _>>()?;
                let opts = RunOptions {
                    timeout_secs: a.opt_u64("timeout_secs")?,
                    team: a.opt_str("team")?,
                };
                self.run(tasks, opts).await.map(records)
            }
            "wait" => {
                let opts = WaitOptions { timeout_secs: a.opt_u64("timeout_secs")? };
                self.wait_agents(a.opt_ids("session_ids")?, opts).await.map(records)
            }
            "cancel_agent" => self.cancel_agent(&a.sid("session_id")?).await.map(|r| r.to_json()),
            "ask" => {
                let opts = AskOptions { timeout_secs: a.opt_u64("timeout_secs")? };
                Ok(match self.ask(&a.str("question")?, opts).await? {
                    Some(reply) => json!({ "reply": reply }),
                    None => json!({
                        "reply": null,
                        "note": "no reply: choose the safest option and say so in your answer",
                    }),
                })
            }
            "reply" => {
                let outcome = self.reply(&a.sid("session_id")?, &a.str("text")?).await?;
                let name = match outcome {
                    ReplyOutcome::Delivered => "delivered",
                    ReplyOutcome::Woken => "woken",
                };
                Ok(json!({ "outcome": name }))
            }
            "checkpoint" => {
                let raw = a.map.get("messages").cloned().unwrap_or(Value::Null);
                let messages: Vec<Message> = serde_json::from_value(raw)
                    .map_err(|err| bad(tool, format!("messages: {err}")))?;
                let input = self.checkpoint(&messages).await?;
                serde_json::to_value(input)
                    .map(|m| json!({ "messages": m }))
                    .map_err(|err| bad(tool, err.to_string()))
            }
            "claim_iteration" => {
                if self.claim_iteration().await? {
                    Ok(json!({ "claimed": true }))
                } else {
                    let reason = self.stop_reason().await?.map(|r| r.to_json());
                    Ok(json!({ "claimed": false, "stop_reason": reason }))
                }
            }
            "stop_reason" => Ok(self.stop_reason().await?.map_or(Value::Null, |r| r.to_json())),
            "controls" => team.controls(&a.sid("actor")?, &a.sid("target")?).await.map(Value::Bool),
            "enabled" | "require_enabled" => {
                let sid =
                    a.opt_str("session_id")?.map_or_else(|| self.session().clone(), SessionId);
                if tool == "enabled" {
                    team.enabled(&sid).await.map(Value::Bool)
                } else {
                    team.require_enabled(&sid).await.map(|()| json!({ "enabled": true }))
                }
            }
            "reconcile_orphans" => {
                let live = a.opt_ids("live_session_ids")?.unwrap_or_default();
                let live: Vec<String> = live.into_iter().map(|s| s.0).collect();
                team.reconcile_orphans(&live).await.map(|n| json!(n))
            }
            "restrict_router" => {
                let allow = self.allowlist().await?;
                Ok(json!({ "providers": allow.providers, "models": allow.models }))
            }
            "routing_change" => {
                let before = a.opt_u64("before")?.unwrap_or(0);
                Ok(self.routing_change(before).await?.map_or(Value::Null, |c| c.to_json()))
            }
            "wake_allowed" => {
                team.wake_allowed(&a.sid("author")?, &a.sid("recipient")?).await.map(Value::Bool)
            }
            _ => Err(TeamError::UnknownTool { name: name.to_owned() }),
        }
    }
}
