//! [`FlowError`]: the one error family of the runtime. Its first variants are the typed
//! outcomes of the seed's table (`CallFailed` … `GatherFailed`), each with a stable
//! [`reason`](FlowError::reason), the [`handle`](FlowError::handle) of the child it concerns,
//! [`details`](FlowError::details) and [`to_json`](FlowError::to_json); the rest are the
//! runtime's own failures (the journal, an unknown run, invalid options, nondeterminism).
//!
//! A recorded failure is stored as its JSON form and read back with
//! [`FlowError::from_json`], so that a replayed call fails exactly as it first did.

use std::sync::Arc;

use clio_journal::{JournalError, RunId, TaskId};
use serde_json::{Map, Value, json};

use crate::result::CallResult;

/// One bad option found by `checked_options`.
#[derive(Debug, Clone, PartialEq)]
pub struct OptionProblem {
    /// The option's name.
    pub option: String,
    /// What it needs (a type, a bound), or `"no such option"` for an unknown one.
    pub needs: String,
    /// The value that was given.
    pub got: Value,
}

/// A command the history holds, as a replay mismatch names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedCommand {
    /// Its replay identity (call site or key, with the scope it ran in).
    pub identity: String,
    /// `call`, `step` or `ask`.
    pub kind: String,
    /// What it called (a call's target, a step's name, a question's text).
    pub target: String,
    /// Whether running it again could repeat an effect outside the run: a call of a tool
    /// not declared read-only, a child flow or agent, or a step.
    pub side_effecting: bool,
}

impl RecordedCommand {
    fn to_json(&self) -> Value {
        json!({
            "identity": self.identity,
            "kind": self.kind,
            "target": self.target,
            "side_effecting": self.side_effecting,
        })
    }

    fn from_json(v: &Value) -> RecordedCommand {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        RecordedCommand {
            identity: s("identity"),
            kind: s("kind"),
            target: s("target"),
            side_effecting: v.get("side_effecting").and_then(Value::as_bool).unwrap_or(true),
        }
    }
}

fn describe_unreached(unreached: &[RecordedCommand]) -> String {
    if unreached.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = unreached
        .iter()
        .map(|c| {
            let effect = if c.side_effecting { "side-effecting" } else { "read-only" };
            format!("{} {} at {} ({effect})", c.kind, c.target, c.identity)
        })
        .collect();
    format!("; the history still holds, not reached: {}", parts.join(", "))
}

/// One thing that differs between a run's record and the code resuming it.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// What differs: `flow`, `flow version`, `plugin set` or `input`.
    pub what: String,
    /// What the run recorded.
    pub recorded: String,
    /// What the resuming code has.
    pub now: String,
}

/// Everything a flow, a call or the runtime can end with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FlowError {
    /// The child failed.
    #[error("call failed: {message}")]
    CallFailed {
        /// The child's task handle.
        handle: Option<TaskId>,
        /// What went wrong.
        message: String,
    },
    /// The child ended its turn waiting for input (a kind of `CallFailed`).
    #[error("call ended awaiting input")]
    CallAwaitingInput {
        /// The child's task handle.
        handle: Option<TaskId>,
        /// The child's last answer.
        answer: String,
    },
    /// The child's turn stopped, by Stop or by an error such as a provider timeout (a kind
    /// of `CallFailed`).
    #[error("call stopped: {message}")]
    CallStopped {
        /// The child's task handle.
        handle: Option<TaskId>,
        /// Why it stopped.
        message: String,
    },
    /// The child was cancelled.
    #[error("call cancelled")]
    CallCancelled {
        /// The child's task handle.
        handle: Option<TaskId>,
    },
    /// The child stopped without a result, or never started.
    #[error("call interrupted: {message}")]
    CallInterrupted {
        /// The child's task handle.
        handle: Option<TaskId>,
        /// What happened.
        message: String,
    },
    /// The runtime cannot confirm whether the child was accepted; it is never submitted again.
    #[error("cannot confirm whether the call to {target} was accepted")]
    TaskStateUncertain {
        /// The child's task handle, when one is known.
        handle: Option<TaskId>,
        /// The target of the call.
        target: String,
    },
    /// The call was not accepted; `refusal` is a stable code such as `no_workspace` or
    /// `model_requirement_unmet`.
    #[error("call refused ({refusal}): {message}")]
    CallRefused {
        /// The child's task handle, when one exists.
        handle: Option<TaskId>,
        /// The stable code of the refusal.
        refusal: String,
        /// Why.
        message: String,
    },
    /// The target names nothing this agent can reach.
    #[error("unknown call target {target:?}")]
    FlowTargetUnknown {
        /// The target as given.
        target: String,
    },
    /// The target is a flow, a tool or other code of a plugin that is not trusted at its
    /// current digest, and the person did not trust it (or the run cannot ask): nothing of
    /// the plugin ran.
    #[error(
        "{target:?} comes from plugin {plugin:?} {version} (digest {digest}), which is not trusted{}",
        trust_hint(trust_with)
    )]
    FlowNotTrusted {
        /// The flow id, or the tool, hook or binding that would have run.
        target: String,
        /// Its plugin.
        plugin: String,
        /// The plugin's version.
        version: String,
        /// The content digest trust would be pinned to.
        digest: String,
        /// How a person trusts it, as the host words it (the CLI: `clio plugin trust …`);
        /// empty when the host gave none.
        trust_with: String,
    },
    /// A limit refused the call; `limit` names it.
    #[error("limit {limit} ({max}) refused the call")]
    FlowLimitExceeded {
        /// `max_depth`, `max_concurrency`, `max_model_calls` or `budget_tokens`.
        limit: String,
        /// The limit's value.
        max: u64,
        /// What the run had reached.
        reached: u64,
    },
    /// The run recorded the most entries it may and cannot record more.
    #[error("the run recorded {max} entries and cannot record more")]
    FlowCheckpointLimit {
        /// The most entries a run records.
        max: u64,
    },
    /// A resumed run met a different flow, flow version, plugin set or input than it recorded.
    #[error("the resumed run differs from its record: {}", describe(.differs))]
    FlowReplayMismatch {
        /// Each difference.
        differs: Vec<Mismatch>,
    },
    /// A resumed run asked, at a recorded place, for something other than what it recorded;
    /// or asked for a new command while the history still held commands of the same scope
    /// that the replay had not reached (`unreached`): the new command did not run.
    #[error(
        "nondeterminism at {identity}: recorded {journaled}, now {requested}{}",
        describe_unreached(unreached)
    )]
    Nondeterminism {
        /// The replay identity of the command the code asked for (call site, digest of
        /// target and input, occurrence; or its key).
        identity: String,
        /// What the journal holds there.
        journaled: String,
        /// What the code asked for.
        requested: String,
        /// The recorded commands the replay had not reached when the code asked for a new
        /// one, in the order they were recorded (empty for a mismatch at a recorded place).
        unreached: Vec<RecordedCommand>,
    },
    /// A flow stopped because work cannot proceed.
    #[error("flow stalled ({stall}): {message}")]
    FlowStall {
        /// A stable code for the stall (`step_failed`, `planner_no_directions`, …).
        stall: String,
        /// What happened.
        message: String,
        /// The step it concerns.
        step: String,
        /// The condition that failed, if any.
        predicate: Option<Box<Value>>,
        /// What was observed, if anything.
        observed: Option<Box<Value>>,
        /// The task handle it concerns.
        handle: Option<TaskId>,
    },
    /// At least one gathered call failed; `results` holds every result or error.
    #[error("{} of {} gathered calls failed", .results.iter().filter(|r| r.is_err()).count(), .results.len())]
    GatherFailed {
        /// Every call's result or error, in call order.
        results: Vec<Result<CallResult, FlowError>>,
    },
    /// Options given to a flow were refused; `problems` names each.
    #[error("invalid options for flow {flow}: {}", describe_options(.problems))]
    OptionsInvalid {
        /// The flow.
        flow: String,
        /// Every bad option.
        problems: Vec<OptionProblem>,
    },
    /// No run has this id.
    #[error("run {run} not found")]
    RunNotFound {
        /// The id asked for.
        run: RunId,
    },
    /// The run cannot do what was asked in its current state.
    #[error("run {run}: {message}")]
    RunState {
        /// The run.
        run: RunId,
        /// Why.
        message: String,
    },
    /// No open question matches.
    #[error("run {run} has no open question {question}")]
    QuestionNotFound {
        /// The run.
        run: RunId,
        /// The question asked for.
        question: u64,
    },
    /// An answer does not fit its question.
    #[error("answer {answer:?} does not fit the question: {needs}")]
    AnswerInvalid {
        /// The answer given.
        answer: String,
        /// What the question needs.
        needs: String,
    },
    /// A step's result could not be recorded or read back.
    #[error("step {identity}: {message}")]
    StepFailed {
        /// The step's replay identity.
        identity: String,
        /// What went wrong.
        message: String,
    },
    /// A flow written in Python raised an exception that is no outcome (or its file does
    /// not import, or it returned what is not JSON): `details` hold `flow`, `phase`,
    /// `type`, `message`, `file` and `line` (the innermost place in the plugin's code) and
    /// the Python `traceback`.
    #[error("{message}")]
    FlowException {
        /// The flow's id.
        flow: String,
        /// What happened, naming the flow, the exception, its file and line.
        message: String,
        /// Everything the runner reported, the traceback included.
        details: Box<Map<String, Value>>,
    },
    /// The process running a Python flow spoke outside the protocol (a line that is no
    /// message, a reply to nothing), or did not start: nothing it said was recorded.
    #[error("flow {flow} ({file}): protocol error: {problem}")]
    FlowProtocol {
        /// The flow's id.
        flow: String,
        /// Its `.py` file, relative to its plugin folder.
        file: String,
        /// What went wrong, quoting the start of the line at fault.
        problem: String,
    },
    /// The journal failed.
    #[error("journal error")]
    Journal(#[source] Arc<JournalError>),
}

impl From<JournalError> for FlowError {
    fn from(err: JournalError) -> Self {
        FlowError::Journal(Arc::new(err))
    }
}

fn trust_hint(trust_with: &str) -> String {
    if trust_with.is_empty() { String::new() } else { format!("; trust it with `{trust_with}`") }
}

fn describe(differs: &[Mismatch]) -> String {
    let parts: Vec<String> = differs
        .iter()
        .map(|m| format!("{} was {:?}, now {:?}", m.what, m.recorded, m.now))
        .collect();
    parts.join("; ")
}

fn describe_options(problems: &[OptionProblem]) -> String {
    let parts: Vec<String> = problems
        .iter()
        .map(|p| {
            if p.needs == "no such option" {
                format!("{} is not one of its options (got {})", p.option, p.got)
            } else {
                format!("{} needs {} (got {})", p.option, p.needs, p.got)
            }
        })
        .collect();
    parts.join("; ")
}

fn handle_json(handle: Option<TaskId>) -> Value {
    handle.map_or(Value::Null, |h| json!(h.0))
}

impl FlowError {
    /// Returns the stable reason code of the seed's table (`call_failed`, …), or the
    /// runtime's own code for the other variants.
    pub fn reason(&self) -> &'static str {
        match self {
            FlowError::CallFailed { .. } => "call_failed",
            FlowError::CallAwaitingInput { .. } => "call_awaiting_input",
            FlowError::CallStopped { .. } => "call_stopped",
            FlowError::CallCancelled { .. } => "call_cancelled",
            FlowError::CallInterrupted { .. } => "call_interrupted",
            FlowError::TaskStateUncertain { .. } => "task_state_uncertain",
            FlowError::CallRefused { .. } => "call_refused",
            FlowError::FlowTargetUnknown { .. } => "flow_target_unknown",
            FlowError::FlowNotTrusted { .. } => "flow_not_trusted",
            FlowError::FlowLimitExceeded { .. } => "flow_limit_exceeded",
            FlowError::FlowCheckpointLimit { .. } => "flow_checkpoint_limit",
            FlowError::FlowReplayMismatch { .. } | FlowError::Nondeterminism { .. } => {
                "flow_replay_mismatch"
            }
            FlowError::FlowStall { .. } => "flow_stall",
            FlowError::GatherFailed { .. } => "gather_failed",
            FlowError::OptionsInvalid { .. } => "flow_options_invalid",
            FlowError::RunNotFound { .. } => "run_not_found",
            FlowError::RunState { .. } => "run_state",
            FlowError::QuestionNotFound { .. } => "question_not_found",
            FlowError::AnswerInvalid { .. } => "answer_invalid",
            FlowError::StepFailed { .. } => "step_failed",
            FlowError::FlowException { .. } => "flow_exception",
            FlowError::FlowProtocol { .. } => "flow_protocol_error",
            FlowError::Journal(_) => "journal_error",
        }
    }

    /// Returns whether this is a `CallFailed` or one of its kinds.
    pub fn is_call_failed(&self) -> bool {
        matches!(
            self,
            FlowError::CallFailed { .. }
                | FlowError::CallAwaitingInput { .. }
                | FlowError::CallStopped { .. }
        )
    }

    /// Returns the task handle of the child the error concerns, if any.
    pub fn handle(&self) -> Option<TaskId> {
        match self {
            FlowError::CallFailed { handle, .. }
            | FlowError::CallAwaitingInput { handle, .. }
            | FlowError::CallStopped { handle, .. }
            | FlowError::CallCancelled { handle }
            | FlowError::CallInterrupted { handle, .. }
            | FlowError::TaskStateUncertain { handle, .. }
            | FlowError::CallRefused { handle, .. }
            | FlowError::FlowStall { handle, .. } => *handle,
            _ => None,
        }
    }

    /// Returns the error with its handle set to `handle` when it concerns a child and has
    /// none yet.
    pub(crate) fn with_handle(mut self, task: TaskId) -> Self {
        match &mut self {
            FlowError::CallFailed { handle, .. }
            | FlowError::CallAwaitingInput { handle, .. }
            | FlowError::CallStopped { handle, .. }
            | FlowError::CallCancelled { handle }
            | FlowError::CallInterrupted { handle, .. }
            | FlowError::TaskStateUncertain { handle, .. }
            | FlowError::CallRefused { handle, .. }
            | FlowError::FlowStall { handle, .. } => {
                handle.get_or_insert(task);
            }
            _ => {}
        }
        self
    }

    /// Returns the error's details as a mapping: the fields of its variant (for
    /// `FlowLimitExceeded`, `limit` names the limit; for an `as_completed` error, `index`).
    pub fn details(&self) -> Map<String, Value> {
        let v = match self {
            FlowError::CallFailed { message, .. }
            | FlowError::CallStopped { message, .. }
            | FlowError::CallInterrupted { message, .. } => json!({ "message": message }),
            FlowError::CallAwaitingInput { answer, .. } => json!({ "answer": answer }),
            FlowError::CallCancelled { .. } => json!({}),
            FlowError::TaskStateUncertain { target, .. }
            | FlowError::FlowTargetUnknown { target } => json!({ "target": target }),
            FlowError::CallRefused { refusal, message, .. } => {
                json!({ "refusal": refusal, "message": message })
            }
            FlowError::FlowNotTrusted { target, plugin, version, digest, trust_with } => {
                json!({ "target": target, "plugin": plugin, "version": version,
                        "digest": digest, "trust_with": trust_with })
            }
            FlowError::FlowLimitExceeded { limit, max, reached } => {
                json!({ "limit": limit, "max": max, "reached": reached })
            }
            FlowError::FlowCheckpointLimit { max } => json!({ "max": max }),
            FlowError::FlowReplayMismatch { differs } => json!({
                "differs": differs.iter().map(|m| json!({
                    "what": m.what, "recorded": m.recorded, "now": m.now
                })).collect::<Vec<_>>()
            }),
            FlowError::Nondeterminism { identity, journaled, requested, unreached } => json!({
                "identity": identity, "journaled": journaled, "requested": requested,
                "unreached": unreached.iter().map(RecordedCommand::to_json).collect::<Vec<_>>(),
            }),
            FlowError::FlowStall { stall, message, step, predicate, observed, .. } => json!({
                "stall": stall, "message": message, "step": step,
                "predicate": predicate, "observed": observed
            }),
            FlowError::GatherFailed { results } => json!({
                "results": results.iter().map(|r| match r {
                    Ok(res) => res.to_json(),
                    Err(err) => err.to_json(),
                }).collect::<Vec<_>>()
            }),
            FlowError::OptionsInvalid { flow, problems } => json!({
                "flow": flow,
                "problems": problems.iter().map(|p| json!({
                    "option": p.option, "needs": p.needs, "got": p.got
                })).collect::<Vec<_>>()
            }),
            FlowError::RunNotFound { run } => json!({ "run": run.0 }),
            FlowError::RunState { run, message } => json!({ "run": run.0, "message": message }),
            FlowError::QuestionNotFound { run, question } => {
                json!({ "run": run.0, "question": question })
            }
            FlowError::AnswerInvalid { answer, needs } => {
                json!({ "answer": answer, "needs": needs })
            }
            FlowError::StepFailed { identity, message } => {
                json!({ "identity": identity, "message": message })
            }
            FlowError::FlowException { flow, details, .. } => {
                let mut details = (**details).clone();
                details.insert("flow".into(), json!(flow));
                Value::Object(details)
            }
            FlowError::FlowProtocol { flow, file, problem } => {
                json!({ "flow": flow, "file": file, "problem": problem })
            }
            FlowError::Journal(err) => json!({ "message": err.to_string() }),
        };
        match v {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    /// Returns the error as `{reason, handle, message, details}`.
    pub fn to_json(&self) -> Value {
        json!({
            "reason": self.reason(),
            "handle": handle_json(self.handle()),
            "message": self.to_string(),
            "details": Value::Object(self.details()),
        })
    }

    /// Returns the error as the journal records it (a run's or a task's `error`): the
    /// text of its [`to_json`](Self::to_json) form. [`FlowError::from_record`] reads it
    /// back; nothing else should parse it.
    pub fn to_record(&self) -> String {
        self.to_json().to_string()
    }

    /// Reads back an error the journal recorded ([`to_record`](Self::to_record)), as the
    /// `FlowError` it was. Text that is not that form (written by hand, or by a build
    /// before errors were recorded this way) becomes a `CallFailed` carrying the text, so
    /// that nothing recorded is lost.
    pub fn from_record(text: &str) -> FlowError {
        match serde_json::from_str::<Value>(text) {
            Ok(value) if value.is_object() => FlowError::from_json(&value),
            _ => FlowError::CallFailed { handle: None, message: text.to_owned() },
        }
    }

    /// Returns the message of an error the journal recorded, as it was written when the
    /// error happened (a person reads that, not the message a newer build would write);
    /// text that is not a recorded error is its own message.
    pub fn recorded_message(text: &str) -> String {
        serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| text.to_owned())
    }

    /// Reads an error back from its [`to_json`](Self::to_json) form. A form it cannot read
    /// becomes a `CallFailed` carrying the text, so that nothing recorded is lost.
    pub fn from_json(value: &Value) -> FlowError {
        let reason = value.get("reason").and_then(Value::as_str).unwrap_or("");
        let handle = value.get("handle").and_then(Value::as_u64).map(TaskId);
        let empty = Map::new();
        let d = value.get("details").and_then(Value::as_object).unwrap_or(&empty);
        let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let n = |k: &str| d.get(k).and_then(Value::as_u64).unwrap_or(0);
        let opt = |k: &str| d.get(k).filter(|v| !v.is_null()).cloned();
        match reason {
            "call_failed" => FlowError::CallFailed { handle, message: s("message") },
            "call_awaiting_input" => FlowError::CallAwaitingInput { handle, answer: s("answer") },
            "call_stopped" => FlowError::CallStopped { handle, message: s("message") },
            "call_cancelled" => FlowError::CallCancelled { handle },
            "call_interrupted" => FlowError::CallInterrupted { handle, message: s("message") },
            "task_state_uncertain" => FlowError::TaskStateUncertain { handle, target: s("target") },
            "call_refused" => {
                FlowError::CallRefused { handle, refusal: s("refusal"), message: s("message") }
            }
            "flow_target_unknown" => FlowError::FlowTargetUnknown { target: s("target") },
            "flow_not_trusted" => FlowError::FlowNotTrusted {
                target: s("target"),
                plugin: s("plugin"),
                version: s("version"),
                digest: s("digest"),
                trust_with: s("trust_with"),
            },
            "flow_limit_exceeded" => FlowError::FlowLimitExceeded {
                limit: s("limit"),
                max: n("max"),
                reached: n("reached"),
            },
            "flow_checkpoint_limit" => FlowError::FlowCheckpointLimit { max: n("max") },
            "flow_stall" => FlowError::FlowStall {
                stall: s("stall"),
                message: s("message"),
                step: s("step"),
                predicate: opt("predicate").map(Box::new),
                observed: opt("observed").map(Box::new),
                handle,
            },
            "gather_failed" => FlowError::GatherFailed {
                results: d
                    .get("results")
                    .and_then(Value::as_array)
                    .map(|items| {
                        items
                            .iter()
                            .map(|item| {
                                if item.get("reason").is_some() {
                                    Err(FlowError::from_json(item))
                                } else {
                                    CallResult::from_json(item).ok_or_else(|| {
                                        FlowError::CallFailed {
                                            handle: None,
                                            message: item.to_string(),
                                        }
                                    })
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            "flow_replay_mismatch" if d.contains_key("identity") => FlowError::Nondeterminism {
                identity: s("identity"),
                journaled: s("journaled"),
                requested: s("requested"),
                unreached: d
                    .get("unreached")
                    .and_then(Value::as_array)
                    .map(|items| items.iter().map(RecordedCommand::from_json).collect())
                    .unwrap_or_default(),
            },
            "flow_replay_mismatch" => FlowError::FlowReplayMismatch {
                differs: d
                    .get("differs")
                    .and_then(Value::as_array)
                    .map(|items| {
                        items
                            .iter()
                            .map(|m| Mismatch {
                                what: str_of(m, "what"),
                                recorded: str_of(m, "recorded"),
                                now: str_of(m, "now"),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            "step_failed" => {
                FlowError::StepFailed { identity: s("identity"), message: s("message") }
            }
            "flow_exception" => FlowError::FlowException {
                flow: s("flow"),
                message: value
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| s("message"), str::to_owned),
                details: Box::new(d.clone()),
            },
            "flow_protocol_error" => {
                FlowError::FlowProtocol { flow: s("flow"), file: s("file"), problem: s("problem") }
            }
            _ => FlowError::CallFailed {
                handle,
                message: value
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| value.to_string(), str::to_owned),
            },
        }
    }

    /// Returns a `FlowStall` with `stall` and `message` and nothing else set.
    pub fn stall(stall: impl Into<String>, message: impl Into<String>) -> FlowError {
        FlowError::FlowStall {
            stall: stall.into(),
            message: message.into(),
            step: String::new(),
            predicate: None,
            observed: None,
            handle: None,
        }
    }
}

fn str_of(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_owned()
}

/// A call whose program could not start because no sandbox can be had here is refused
/// (`sandbox_unavailable`): nothing ran. Every other failure of the program fails it.
fn sandboxed_call_error(sandbox_unavailable: bool, message: String) -> FlowError {
    if sandbox_unavailable {
        FlowError::CallRefused { handle: None, refusal: "sandbox_unavailable".into(), message }
    } else {
        FlowError::CallFailed { handle: None, message }
    }
}

/// An MCP server that could not start because no sandbox can be had refuses the call.
impl From<clio_tools::McpError> for FlowError {
    fn from(error: clio_tools::McpError) -> FlowError {
        sandboxed_call_error(error.is_sandbox_unavailable(), error.to_string())
    }
}

/// An executable tool that did not answer fails its call; one no sandbox could be had for
/// is refused.
impl From<clio_tools::ExecError> for FlowError {
    fn from(error: clio_tools::ExecError) -> FlowError {
        sandboxed_call_error(error.is_sandbox_unavailable(), error.to_string())
    }
}
