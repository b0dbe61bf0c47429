//! The hook protocol's data (SPEC §11) and the pure rules the runtime applies to it: the
//! `HookEvent` JSON a command hook reads on stdin, the decision JSON it answers, how an
//! exit status becomes an outcome, and how several answers merge into one verdict.
//!
//! Merging: the most restrictive answer wins (`deny > defer > ask > synthesize > modify >
//! allow`, ties to the hook that ran first); two `modify` answers are an error that
//! blocks the call; a failed hook denies only when it is `fail_closed` and the event can
//! deny, and is otherwise skipped with a warning; hooks only tighten, so the permission
//! the call already has is a floor that no `allow` lifts. Running hooks is clio-flow's job.

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::decl::Permission;
use crate::hooks::{EventPower, HookEventKind};

/// The version of the [`HookEvent`] JSON written here.
pub const HOOK_SCHEMA_VERSION: u32 = 1;

/// What a hook receives: the JSON a command hook reads on stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookEvent {
    /// The format's version, [`HOOK_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The id of the hook being run.
    pub hook_id: String,
    /// CLIO's event name, such as `PreToolUse`.
    pub event: String,
    /// The session (conversation) the event belongs to.
    pub session_id: String,
    /// The turn within the session.
    pub turn_id: String,
    /// The working directory of the run.
    pub cwd: String,
    /// The tool, on tool events.
    #[serde(default)]
    pub tool_name: Option<String>,
    /// The tool's arguments, on tool events.
    #[serde(default)]
    pub tool_input: Option<Json>,
    /// The person's prompt, on `UserPromptSubmit`.
    #[serde(default)]
    pub prompt: Option<String>,
    /// Event-specific data (a model request, a tool result, a semantic event).
    #[serde(default)]
    pub payload: Json,
    /// The answer, on `Stop` and `SubagentStop`.
    #[serde(default)]
    pub answer: Option<Json>,
}

impl HookEvent {
    /// Starts the event `kind` for hook `hook_id`, every other field empty.
    pub fn new(kind: HookEventKind, hook_id: impl Into<String>) -> HookEvent {
        HookEvent {
            schema_version: HOOK_SCHEMA_VERSION,
            hook_id: hook_id.into(),
            event: kind.name().to_owned(),
            session_id: String::new(),
            turn_id: String::new(),
            cwd: String::new(),
            tool_name: None,
            tool_input: None,
            prompt: None,
            payload: Json::Null,
            answer: None,
        }
    }

    /// Returns the event as the JSON a command hook reads.
    pub fn to_json(&self) -> Json {
        serde_json::to_value(self).unwrap_or(Json::Null)
    }
}

/// A hook's decision, ordered from least to most restrictive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DecisionKind {
    /// Let it happen.
    Allow,
    /// Let it happen with different input (`input`).
    Modify,
    /// Do not run the tool; use `result` as its result.
    Synthesize,
    /// Ask the person first.
    Ask,
    /// Put the call off.
    Defer,
    /// Refuse it (on `Stop`: ask for one more bounded turn).
    Deny,
}

impl DecisionKind {
    /// The decisions as written in JSON.
    pub const ALLOWED: &'static [&'static str] =
        &["allow", "deny", "ask", "modify", "synthesize", "defer"];

    /// Returns the decision as written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Allow => "allow",
            DecisionKind::Modify => "modify",
            DecisionKind::Synthesize => "synthesize",
            DecisionKind::Ask => "ask",
            DecisionKind::Defer => "defer",
            DecisionKind::Deny => "deny",
        }
    }

    fn parse(s: &str) -> Option<DecisionKind> {
        [
            DecisionKind::Allow,
            DecisionKind::Modify,
            DecisionKind::Synthesize,
            DecisionKind::Ask,
            DecisionKind::Defer,
            DecisionKind::Deny,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }

    fn from_permission(permission: Permission) -> DecisionKind {
        match permission {
            Permission::Allow => DecisionKind::Allow,
            Permission::Ask => DecisionKind::Ask,
            Permission::Deny => DecisionKind::Deny,
        }
    }
}

/// One hook's answer: the decision JSON it printed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HookAnswer {
    /// The decision; `allow` for empty output.
    pub decision: Option<DecisionKind>,
    /// Why, shown to the model or the person.
    pub reason: Option<String>,
    /// The new input, with `modify`.
    pub input: Option<Json>,
    /// The result to use, with `synthesize`.
    pub result: Option<Json>,
    /// Context for the model, joined across hooks.
    pub additional_context: Option<String>,
    /// A replacement tool output, on `PostToolUse`.
    pub updated_output: Option<Json>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAnswer {
    #[serde(default)]
    decision: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    input: Option<Json>,
    #[serde(default)]
    result: Option<Json>,
    #[serde(default)]
    additional_context: Option<String>,
    #[serde(default)]
    updated_output: Option<Json>,
}

/// Why a hook's output is not a decision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionError {
    /// The output is not a JSON object of the decision format.
    #[error("hook output is not a decision: {message}")]
    Invalid {
        /// What the JSON reader said.
        message: String,
    },
    /// `decision` has a value outside [`DecisionKind::ALLOWED`].
    #[error("unknown decision {value:?}, expected one of: {}", DecisionKind::ALLOWED.join(", "))]
    UnknownDecision {
        /// The value given.
        value: String,
    },
    /// `modify` without `input`, or `synthesize` without `result`.
    #[error("decision {decision} needs field {field}")]
    MissingField {
        /// The decision.
        decision: &'static str,
        /// The field it needs.
        field: &'static str,
    },
}

impl HookAnswer {
    /// Returns an `allow` answer with nothing else.
    pub fn allow() -> HookAnswer {
        HookAnswer { decision: Some(DecisionKind::Allow), ..HookAnswer::default() }
    }

    /// Returns a `deny` answer with `reason`.
    pub fn deny(reason: impl Into<String>) -> HookAnswer {
        HookAnswer {
            decision: Some(DecisionKind::Deny),
            reason: Some(reason.into()),
            ..HookAnswer::default()
        }
    }

    /// Parses a hook's stdout; empty (or blank) output means `allow`.
    pub fn parse(stdout: &str) -> Result<HookAnswer, DecisionError> {
        if stdout.trim().is_empty() {
            return Ok(HookAnswer::allow());
        }
        let raw: RawAnswer = serde_json::from_str(stdout)
            .map_err(|err| DecisionError::Invalid { message: err.to_string() })?;
        let decision = match raw.decision.as_deref() {
            None => None,
            Some(value) => Some(
                DecisionKind::parse(value)
                    .ok_or_else(|| DecisionError::UnknownDecision { value: value.to_owned() })?,
            ),
        };
        if decision == Some(DecisionKind::Modify) && raw.input.is_none() {
            return Err(DecisionError::MissingField { decision: "modify", field: "input" });
        }
        if decision == Some(DecisionKind::Synthesize) && raw.result.is_none() {
            return Err(DecisionError::MissingField { decision: "synthesize", field: "result" });
        }
        Ok(HookAnswer {
            decision,
            reason: raw.reason,
            input: raw.input,
            result: raw.result,
            additional_context: raw.additional_context,
            updated_output: raw.updated_output,
        })
    }

    /// Returns the decision, `allow` when the answer gave none.
    pub fn kind(&self) -> DecisionKind {
        self.decision.unwrap_or(DecisionKind::Allow)
    }
}

/// How one hook invocation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum HookOutcome {
    /// The hook answered (exit 0 with a decision, or exit 2, which denies).
    Answered(Box<HookAnswer>),
    /// The hook failed: another exit status, a timeout, a missing program, or output
    /// that is not a decision. Distinct from a denial.
    Failed {
        /// What went wrong.
        reason: String,
    },
}

impl HookOutcome {
    /// Interprets a finished command hook: exit 0 parses stdout, exit 2 denies with
    /// stderr as the reason, anything else (`None` for a signal) is a failure.
    pub fn from_exit(status: Option<i32>, stdout: &str, stderr: &str) -> HookOutcome {
        match status {
            Some(0) => match HookAnswer::parse(stdout) {
                Ok(answer) => HookOutcome::Answered(Box::new(answer)),
                Err(err) => HookOutcome::Failed { reason: err.to_string() },
            },
            Some(2) => HookOutcome::Answered(Box::new(HookAnswer::deny(stderr.trim()))),
            Some(code) => HookOutcome::Failed {
                reason: format!("exited with status {code}: {}", stderr.trim()),
            },
            None => {
                HookOutcome::Failed { reason: format!("killed by a signal: {}", stderr.trim()) }
            }
        }
    }
}

/// One hook's outcome, as merging sees it; give them in the order the hooks ran.
#[derive(Debug, Clone, PartialEq)]
pub struct HookResult {
    /// The hook, as `plugin/id`.
    pub hook: String,
    /// Whether the hook fails closed.
    pub fail_closed: bool,
    /// How it ended.
    pub outcome: HookOutcome,
}

/// The merged verdict of every hook on one event.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// What happens. On `Stop`, `Deny` means one more bounded turn.
    pub decision: DecisionKind,
    /// Why, from the deciding hook or permission.
    pub reason: Option<String>,
    /// The hook that decided (`plugin/id`), or `None` when the permission or the
    /// default decided.
    pub decided_by: Option<String>,
    /// The modified input, when a hook answered `modify` and the verdict is `Modify` or
    /// `Ask` (the person is asked about the modified call).
    pub input: Option<Json>,
    /// The synthesized result, when the verdict is `Synthesize`.
    pub result: Option<Json>,
    /// Every hook's `additional_context`, in order, joined by blank lines.
    pub additional_context: String,
    /// The last `updated_output`, on `PostToolUse`.
    pub updated_output: Option<Json>,
    /// Skipped failures and answers the event cannot act on.
    pub warnings: Vec<String>,
}

impl Verdict {
    /// Returns the verdict as JSON, for the run's event record.
    pub fn to_json(&self) -> Json {
        json!({
            "decision": self.decision.as_str(),
            "reason": self.reason,
            "decided_by": self.decided_by,
            "input": self.input,
            "result": self.result,
            "additional_context": self.additional_context,
            "updated_output": self.updated_output,
            "warnings": self.warnings,
        })
    }
}

/// Why hook answers cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// Two hooks answered `modify`; the call is blocked.
    #[error("hooks {first} and {second} both modify the input; the call is blocked")]
    TwoModify {
        /// The first hook that modified.
        first: String,
        /// The second.
        second: String,
    },
}

/// Merges the outcomes of the hooks that ran on `event` with the permission the call
/// already has (`base`, `None` where no permission applies).
///
/// The error blocks the call; the runtime records it like a denial.
pub fn merge_decisions(
    event: HookEventKind,
    base: Option<Permission>,
    results: &[HookResult],
) -> Result<Verdict, MergeError> {
    let power = event.power();
    let mut verdict = Verdict {
        decision: base.map_or(DecisionKind::Allow, DecisionKind::from_permission),
        reason: (base == Some(Permission::Deny)).then(|| "denied by permission".to_owned()),
        decided_by: None,
        input: None,
        result: None,
        additional_context: String::new(),
        updated_output: None,
        warnings: Vec::new(),
    };
    let mut modified_by: Option<&str> = None;
    let mut contexts: Vec<&str> = Vec::new();
    for res in results {
        let answer = match &res.outcome {
            HookOutcome::Failed { reason } => {
                if res.fail_closed && power == EventPower::CanDeny {
                    let failed = HookAnswer::deny(format!("hook {} failed: {reason}", res.hook));
                    apply(&mut verdict, &res.hook, &failed, DecisionKind::Deny);
                } else {
                    verdict
                        .warnings
                        .push(format!("hook {} failed and was skipped: {reason}", res.hook));
                }
                continue;
            }
            HookOutcome::Answered(answer) => answer,
        };
        if let Some(context) = answer.additional_context.as_deref().filter(|c| !c.is_empty()) {
            contexts.push(context);
        }
        if let Some(output) = &answer.updated_output {
            if event.name() == "PostToolUse" {
                verdict.updated_output = Some(output.clone());
            } else {
                verdict.warnings.push(format!(
                    "hook {} gave updated_output, which only PostToolUse uses",
                    res.hook
                ));
            }
        }
        let kind = answer.kind();
        let applies = match power {
            EventPower::CanDeny => true,
            EventPower::CanContinue => matches!(kind, DecisionKind::Allow | DecisionKind::Deny),
            EventPower::Observe => kind == DecisionKind::Allow,
        };
        if !applies {
            verdict.warnings.push(format!(
                "hook {} answered {} on {event}, which cannot act on it",
                res.hook,
                kind.as_str()
            ));
            continue;
        }
        if kind == DecisionKind::Modify {
            if let Some(first) = modified_by {
                return Err(MergeError::TwoModify {
                    first: first.to_owned(),
                    second: res.hook.clone(),
                });
            }
            modified_by = Some(&res.hook);
            verdict.input = answer.input.clone();
        }
        apply(&mut verdict, &res.hook, answer, kind);
    }
    verdict.additional_context = contexts.join("\n\n");
    if !matches!(verdict.decision, DecisionKind::Modify | DecisionKind::Ask) {
        verdict.input = None;
    }
    Ok(verdict)
}

/// Makes `answer` the verdict when it is strictly more restrictive than the current one.
fn apply(verdict: &mut Verdict, hook: &str, answer: &HookAnswer, kind: DecisionKind) {
    if kind > verdict.decision {
        verdict.decision = kind;
        verdict.reason = answer.reason.clone();
        verdict.decided_by = Some(hook.to_owned());
        verdict.result =
            if kind == DecisionKind::Synthesize { answer.result.clone() } else { None };
    }
}
