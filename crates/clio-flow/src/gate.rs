//! The gate every tool call passes (SPEC §4, §11): who may call the tool (`callers`), its
//! permission (`resolve_permission`: deny refuses and hides, ask becomes a durable question
//! to the person), and the `PreToolUse` / `PostToolUse` hooks of the loaded plugins.
//!
//! The rules themselves are clio-plugins' pure functions; this module carries them out on a
//! run. Everything that is not a pure function of the run's configuration is recorded, so
//! a resumed or replayed run decides exactly as the first drive did: each hook invocation
//! is an event of the run (`<call>@<event>#<n>`), the merged outcome of an event is one
//! more event (`<call>@<event>`) that a resumed call reads instead of running the hooks
//! again, a person's answer is the answer of a question keyed by the call, and every
//! decision that is not a plain allow is a `PermissionReceipt` (`<call>@receipt`).
//!
//! Only calls made by an agent (its react loop) or by a `run_code` script pass the
//! question and the hooks; a flow's own `ctx.call` of a tool is the flow author's code, so
//! it is checked only against a deny, which holds for every caller.
//!
//! Events wired: `PreToolUse` and `PostToolUse` here; `SemanticEvent` (observes) on each
//! `ctx.record_event` and `ctx.publish` (`semantic_event`; the hooks' own records are
//! written by `record`, never through `ctx`, so they fire none); in the react loop
//! (`crate::react`) `SessionStart` and `SessionEnd` around it, `UserPromptSubmit` on its
//! task (may deny, defer, ask the person, synthesize the answer or modify the prompt; its
//! `additional_context` joins the prompt), `BeforeModel` (may deny the model call; its
//! `additional_context` joins that request), `AfterModel` and `PostToolBatch` (observe;
//! their `additional_context` joins the next request), and `Stop` (a deny asks for one
//! more turn, once per loop); `SubagentStart` and `SubagentStop` (observe) around a
//! subagent call. `PreCompact` is never fired: the runtime never compacts a conversation
//! (a react loop sends its whole history each turn), so there is nothing to announce.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use clio_journal::{EntryKind, NewEntry};
use clio_plugins::{
    Callers, DecisionKind, Hook, HookAnswer, HookEvent, HookEventKind, HookOutcome, HookRef,
    HookResult, Permission, PermissionSettings, PermissionSource, ToolFacts, Verdict,
    merge_decisions, order_hooks, resolve_callers, resolve_permission,
};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::command::Command;
use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::registry::Tool;
use crate::runtime::{blocking, digest};

/// How long a command hook may run when its declaration sets no timeout (SPEC §11).
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// The most bytes a command hook may print on stdout or stderr.
const HOOK_OUTPUT_LIMIT: u64 = 1024 * 1024;

/// The future a host hook returns.
pub type HostHookFuture = Pin<Box<dyn Future<Output = HookOutcome> + Send>>;

/// A hook implemented by the host: takes the `HookEvent` JSON, returns how it ended.
pub type HostHook = Arc<dyn Fn(Value) -> HostHookFuture + Send + Sync>;

/// How the runtime carries out a hook.
#[derive(Clone)]
pub enum HookRun {
    /// An executable: the `HookEvent` JSON on stdin, a decision JSON on stdout; exit 2
    /// denies with stderr as the reason; another exit, a timeout or a missing program is
    /// a failure.
    Command {
        /// The program.
        program: PathBuf,
        /// Where it runs (`None`: the process's folder).
        cwd: Option<PathBuf>,
        /// How long it may run.
        timeout: Duration,
    },
    /// A Rust callback of the host.
    Host(HostHook),
}

/// A hook of a loaded plugin, as the registry holds it.
#[derive(Clone)]
pub struct RuntimeHook {
    /// The plugin that brings it.
    pub plugin: String,
    /// Its declaration: event, id, ordering, tool matcher, `fail_closed`.
    pub hook: Hook,
    /// How it runs.
    pub run: HookRun,
}

impl std::fmt::Debug for RuntimeHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeHook")
            .field("plugin", &self.plugin)
            .field("id", &self.hook.id)
            .field("event", &self.hook.event.name())
            .finish()
    }
}

/// How a tool is shown to an agent's model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing {
    /// With its description and schema.
    Full,
    /// By name only, until `search_tools` loads it.
    Deferred,
    /// Not at all: denied, or only `run_code` scripts may call it.
    Hidden,
}

/// Returns what resolution knows about `tool`. A tool registered in code by the host (no
/// plugin) that declares no permission is allowed by default: the host that wrote it
/// vouches for it; deployment and person rules still apply to it.
pub(crate) fn facts(tool: &Tool) -> ToolFacts<'_> {
    let mut options = tool.options;
    if tool.plugin.is_empty() && options.permission.is_none() {
        options.permission = Some(Permission::Allow);
    }
    ToolFacts { plugin: &tool.plugin, name: &tool.name, read_only: tool.read_only, options }
}

/// Returns how `tool` is listed to an agent's model under `settings`.
pub(crate) fn listing(settings: &PermissionSettings, tool: &Tool) -> Listing {
    let facts = facts(tool);
    if resolve_permission(settings, &facts).hidden()
        || resolve_callers(settings, &facts) == Callers::Code
    {
        Listing::Hidden
    } else if clio_plugins::resolve_defer(None, &facts) {
        Listing::Deferred
    } else {
        Listing::Full
    }
}

fn source_name(source: PermissionSource) -> &'static str {
    match source {
        PermissionSource::Deployment => "deployment",
        PermissionSource::Person => "person",
        PermissionSource::Tool => "tool",
        PermissionSource::Confirmation => "confirmation",
        PermissionSource::ReadOnly => "read_only",
    }
}

fn refused(refusal: &str, message: String) -> FlowError {
    FlowError::CallRefused { handle: None, refusal: refusal.to_owned(), message }
}

/// Who makes a call, as the gate sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// A flow's own code.
    Flow,
    /// An agent's react loop.
    Agent,
    /// A `run_code` script.
    Code,
}

/// What the gate lets through: the input to run with, or a synthesized result.
pub(crate) struct Passed {
    /// The input the tool runs with (a hook may have modified it).
    pub(crate) input: Value,
    /// A result a hook synthesized; the tool does not run.
    pub(crate) synthesized: Option<Value>,
}

/// Writes `entries` (identity, kind, payload) not yet recorded, in one commit.
async fn record(ctx: &Ctx, entries: Vec<(String, EntryKind, Value)>) -> Result<(), FlowError> {
    let run = &ctx.run;
    let mut batch = Vec::new();
    for (identity, kind, payload) in entries {
        if run.recorded(&identity).is_some() {
            continue;
        }
        if run.replay_only {
            return Err(FlowError::Nondeterminism {
                identity,
                journaled: "nothing".into(),
                requested: format!("{kind:?}"),
                unreached: Vec::new(),
            });
        }
        run.reserve_entry()?;
        let mut entry = NewEntry::new(kind, payload).with_identity(identity);
        entry.task = ctx.scope.parent;
        batch.push(entry);
    }
    if batch.is_empty() {
        return Ok(());
    }
    let _busy = run.activity.busy();
    let journal = run.rt.journal.clone();
    let run_id = run.run;
    blocking(move || journal.append_batch(run_id, batch)).await?;
    Ok(())
}

fn event_entry(identity: String, event: Value) -> (String, EntryKind, Value) {
    let command = Command::Event { event: event.clone() }.to_json();
    (identity, EntryKind::Event, json!({ "command": command, "result": event }))
}

/// A decision about a call, as its permission receipt records it.
struct Receipt<'a> {
    decision: &'a str,
    layer: &'a str,
    rule: Option<&'a str>,
    answer: Value,
}

/// Records the permission receipt of the call `identity` of `tool` with `input`.
async fn receipt(
    ctx: &Ctx,
    identity: &str,
    tool: &Tool,
    input: &Value,
    r: Receipt<'_>,
) -> Result<(), FlowError> {
    let payload = json!({
        "tool": tool.name,
        "plugin": tool.plugin,
        "input_digest": digest(input),
        "decision": r.decision,
        "layer": r.layer,
        "rule": r.rule,
        "answer": r.answer,
    });
    record(ctx, vec![(format!("{identity}@receipt"), EntryKind::PermissionReceipt, payload)]).await
}

/// Refuses a call of `tool` by `caller` that the tool's callers rule does not allow. It
/// runs nothing and records nothing: the same settings refuse the same call on replay.
pub(crate) fn check_callers(ctx: &Ctx, tool: &Tool, caller: Caller) -> Result<(), FlowError> {
    let settings = &ctx.run.rt.config.permissions;
    match (caller, resolve_callers(settings, &facts(tool))) {
        (Caller::Code, Callers::Direct) => Err(refused(
            "callers",
            format!("tool {} may be called by the agent only, not from code", tool.name),
        )),
        (Caller::Agent, Callers::Code) => Err(refused(
            "callers",
            format!("tool {} may be called from run_code scripts only", tool.name),
        )),
        _ => Ok(()),
    }
}

/// Passes the call `identity` of `tool` with `input` by `caller` through the gate before
/// it is recorded: callers, permission, `PreToolUse` hooks, the person's answer.
pub(crate) async fn before(
    ctx: &Ctx,
    identity: &str,
    tool: &Tool,
    input: Value,
    caller: Caller,
) -> Result<Passed, FlowError> {
    check_callers(ctx, tool, caller)?;
    let settings = &ctx.run.rt.config.permissions;
    let facts = facts(tool);
    let permission = resolve_permission(settings, &facts);
    let layer = source_name(permission.source);
    if permission.hidden() {
        let r = Receipt {
            decision: "deny",
            layer,
            rule: permission.rule.as_deref(),
            answer: Value::Null,
        };
        receipt(ctx, identity, tool, &input, r).await?;
        return Err(refused(
            "permission_denied",
            format!("tool {} is denied by the {layer} permission", tool.name),
        ));
    }
    if caller == Caller::Flow {
        return Ok(Passed { input, synthesized: None });
    }
    let kind = event_kind("PreToolUse")?;
    let verdict =
        hooks(ctx, identity, &Subject::tool(tool, &input), kind, Some(permission.permission))
            .await?;
    let hook = verdict.decided_by.clone();
    let hook_layer = hook.as_deref().map(|h| format!("hook {h}"));
    let decided_layer = hook_layer.as_deref().unwrap_or(layer);
    let reason = verdict.reason.clone().unwrap_or_default();
    match verdict.decision {
        DecisionKind::Deny => {
            let r =
                Receipt { decision: "deny", layer: decided_layer, rule: None, answer: Value::Null };
            receipt(ctx, identity, tool, &input, r).await?;
            Err(refused("hook_denied", format!("tool {} was denied: {reason}", tool.name)))
        }
        DecisionKind::Defer => {
            let r = Receipt {
                decision: "defer",
                layer: decided_layer,
                rule: None,
                answer: Value::Null,
            };
            receipt(ctx, identity, tool, &input, r).await?;
            Err(refused("hook_deferred", format!("tool {} was deferred: {reason}", tool.name)))
        }
        DecisionKind::Synthesize => Ok(Passed { input, synthesized: verdict.result.clone() }),
        DecisionKind::Modify => {
            Ok(Passed { input: verdict.input.unwrap_or(input), synthesized: None })
        }
        DecisionKind::Allow => Ok(Passed { input, synthesized: None }),
        DecisionKind::Ask => {
            let input = verdict.input.unwrap_or(input);
            let question = format!("allow tool {} with {}?", tool.name, input);
            let why = if reason.is_empty() {
                format!("tool {} needs your permission ({decided_layer})", tool.name)
            } else {
                reason
            };
            let key = format!("permission:{identity}");
            let site = std::panic::Location::caller();
            let answer = ctx.ask_with(site, &question, "bool", &[], &why, &key).await?;
            let yes = answer.as_bool().unwrap_or(false);
            let decision = if yes { "allow" } else { "deny" };
            let rule = permission.rule.as_deref();
            let r = Receipt { decision, layer: decided_layer, rule, answer };
            receipt(ctx, identity, tool, &input, r).await?;
            if yes {
                Ok(Passed { input, synthesized: None })
            } else {
                Err(refused(
                    "permission_denied",
                    format!("the person did not allow tool {}", tool.name),
                ))
            }
        }
    }
}

/// Runs the `PostToolUse` hooks on the result `value` of the call `identity` by an agent or
/// a script; returns the value to keep (a hook's `updated_output`) and the additional
/// context the hooks gave (empty: none).
pub(crate) async fn after(
    ctx: &Ctx,
    identity: &str,
    tool: &Tool,
    input: &Value,
    value: Value,
) -> Result<(Value, String), FlowError> {
    let kind = event_kind("PostToolUse")?;
    let mut subject = Subject::tool(tool, input);
    subject.answer = Some(value.clone());
    let verdict = hooks(ctx, identity, &subject, kind, None).await?;
    Ok((verdict.updated_output.unwrap_or(value), verdict.additional_context))
}

/// Runs the `SemanticEvent` hooks on `command` (a `ctx.record_event` or `ctx.publish`),
/// recorded as `<identity>@SemanticEvent`: the hooks observe, and the payload they get is
/// the command as the journal records it. A run without such hooks records nothing more.
///
/// Hook invocations are recorded by `record`, never through `ctx.record_event`, so they
/// fire no `SemanticEvent` of their own.
/// Returns whether any hook observes `SemanticEvent`s, so a caller copies an event for
/// them only when one does.
pub(crate) fn semantic_events_observed(ctx: &Ctx) -> Result<bool, FlowError> {
    let kind = event_kind("SemanticEvent")?;
    Ok(!ctx.run.rt.registry.hooks_for(kind, "").is_empty())
}

pub(crate) async fn semantic_event(
    ctx: &Ctx,
    identity: &str,
    command: &Command,
) -> Result<(), FlowError> {
    let kind = event_kind("SemanticEvent")?;
    if ctx.run.rt.registry.hooks_for(kind, "").is_empty() {
        return Ok(());
    }
    let subject = Subject { payload: command.to_json(), ..Subject::default() };
    hooks(ctx, identity, &subject, kind, None).await?;
    Ok(())
}

pub(crate) fn event_kind(name: &str) -> Result<HookEventKind, FlowError> {
    HookEventKind::from_name(name).ok_or_else(|| FlowError::CallFailed {
        handle: None,
        message: format!("hook event {name} is unknown"),
    })
}

/// What a hook event is about: the `HookEvent` fields the runtime fills.
#[derive(Debug, Clone, Default)]
pub(crate) struct Subject {
    pub(crate) tool: Option<String>,
    pub(crate) input: Option<Value>,
    pub(crate) prompt: Option<String>,
    pub(crate) payload: Value,
    pub(crate) answer: Option<Value>,
}

impl Subject {
    fn tool(tool: &Tool, input: &Value) -> Subject {
        Subject { tool: Some(tool.name.clone()), input: Some(input.clone()), ..Subject::default() }
    }
}

/// Returns `answer` as decision JSON that [`HookAnswer::parse`] reads back.
fn answer_json(answer: &HookAnswer) -> Value {
    let mut out = Map::new();
    if let Some(decision) = answer.decision {
        out.insert("decision".into(), json!(decision.as_str()));
    }
    let mut put = |key: &str, v: Option<Value>| {
        if let Some(v) = v {
            out.insert(key.into(), v);
        }
    };
    put("reason", answer.reason.clone().map(Value::String));
    put("input", answer.input.clone());
    put("result", answer.result.clone());
    put("additional_context", answer.additional_context.clone().map(Value::String));
    put("updated_output", answer.updated_output.clone());
    Value::Object(out)
}

fn outcome_json(outcome: &HookOutcome) -> Value {
    match outcome {
        HookOutcome::Answered(answer) => json!({ "answered": answer_json(answer) }),
        HookOutcome::Failed { reason } => json!({ "failed": reason }),
    }
}

fn outcome_from_json(v: &Value) -> HookOutcome {
    if let Some(answer) = v.get("answered") {
        match HookAnswer::parse(&answer.to_string()) {
            Ok(answer) => HookOutcome::Answered(Box::new(answer)),
            Err(err) => HookOutcome::Failed { reason: err.to_string() },
        }
    } else {
        let reason = v.get("failed").and_then(Value::as_str).unwrap_or("no record");
        HookOutcome::Failed { reason: reason.to_owned() }
    }
}

/// Runs (or reads back) the hooks of `kind` on the call `identity` of `tool`, and merges
/// their outcomes with the call's `base` permission.
pub(crate) async fn hooks(
    ctx: &Ctx,
    identity: &str,
    subject: &Subject,
    kind: HookEventKind,
    base: Option<Permission>,
) -> Result<Verdict, FlowError> {
    let tool = subject.tool.as_deref().unwrap_or("");
    let summary_id = format!("{identity}@{}", kind.name());
    let results: Vec<HookResult> = match ctx.run.recorded(&summary_id) {
        Some(entry) => entry
            .payload_value()
            .unwrap_or(Value::Null)
            .pointer("/result/results")
            .and_then(Value::as_array)
            .map(|rs| {
                rs.iter()
                    .map(|r| HookResult {
                        hook: r.get("hook").and_then(Value::as_str).unwrap_or("").to_owned(),
                        fail_closed: r.get("fail_closed").and_then(Value::as_bool).unwrap_or(false),
                        outcome: outcome_from_json(r.get("outcome").unwrap_or(&Value::Null)),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        None => {
            let registered = ctx.run.rt.registry.hooks_for(kind, tool);
            if registered.is_empty() {
                return merged(kind, base, &[], subject);
            }
            let mut results = Vec::new();
            let mut entries = Vec::new();
            for (n, hook) in registered.iter().enumerate() {
                let mut event = HookEvent::new(kind, hook.hook.id.clone());
                event.session_id = ctx.run.run.0.to_string();
                event.turn_id = ctx.scope.parent.map(|t| t.0.to_string()).unwrap_or_default();
                event.cwd = ctx
                    .run
                    .rt
                    .config
                    .workspace
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                event.tool_name = subject.tool.clone();
                event.tool_input = subject.input.clone();
                event.prompt = subject.prompt.clone();
                if !subject.payload.is_null() {
                    event.payload = subject.payload.clone();
                }
                event.answer = subject.answer.clone();
                let outcome = invoke(hook, event.to_json()).await;
                let name = format!("{}/{}", hook.plugin, hook.hook.id);
                let record = json!({
                    "hook": name,
                    "event": kind.name(),
                    "tool": subject.tool,
                    "fail_closed": hook.hook.fail_closed,
                    "outcome": outcome_json(&outcome),
                });
                entries.push(event_entry(format!("{summary_id}#{n}"), record.clone()));
                results.push(HookResult {
                    hook: name,
                    fail_closed: hook.hook.fail_closed,
                    outcome,
                });
            }
            let records: Vec<Value> = entries.iter().map(|(_, _, p)| p["result"].clone()).collect();
            let verdict = merge_decisions(kind, base, &results);
            let verdict_json = match &verdict {
                Ok(v) => v.to_json(),
                Err(err) => json!({ "error": err.to_string() }),
            };
            entries.push(event_entry(
                summary_id,
                json!({
                    "event": kind.name(),
                    "tool": subject.tool,
                    "results": records,
                    "verdict": verdict_json,
                }),
            ));
            record(ctx, entries).await?;
            results
        }
    };
    merged(kind, base, &results, subject)
}

fn merged(
    kind: HookEventKind,
    base: Option<Permission>,
    results: &[HookResult],
    subject: &Subject,
) -> Result<Verdict, FlowError> {
    merge_decisions(kind, base, results).map_err(|err| {
        refused(
            "hook_conflict",
            match &subject.tool {
                Some(tool) => format!("tool {tool}: {err}"),
                None => format!("{kind}: {err}"),
            },
        )
    })
}

/// Runs one hook on `event` and returns how it ended; never fails otherwise.
async fn invoke(hook: &RuntimeHook, event: Value) -> HookOutcome {
    match &hook.run {
        HookRun::Host(f) => f(event).await,
        HookRun::Command { program, cwd, timeout } => {
            match tokio::time::timeout(*timeout, run_command(program, cwd.as_ref(), &event)).await {
                Ok(Ok((status, stdout, stderr))) => {
                    HookOutcome::from_exit(status, &stdout, &stderr)
                }
                Ok(Err(reason)) => HookOutcome::Failed { reason },
                Err(_) => HookOutcome::Failed {
                    reason: format!("timed out after {} s", timeout.as_secs()),
                },
            }
        }
    }
}

async fn run_command(
    program: &PathBuf,
    cwd: Option<&PathBuf>,
    event: &Value,
) -> Result<(Option<i32>, String, String), String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that exits without reading its input is not a failure by itself.
        let _ = stdin.write_all(event.to_string().as_bytes()).await;
        drop(stdin);
    }
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    if let Some(out) = child.stdout.take() {
        out.take(HOOK_OUTPUT_LIMIT)
            .read_to_end(&mut stdout)
            .await
            .map_err(|e| format!("cannot read its output: {e}"))?;
    }
    if let Some(err) = child.stderr.take() {
        err.take(HOOK_OUTPUT_LIMIT)
            .read_to_end(&mut stderr)
            .await
            .map_err(|e| format!("cannot read its errors: {e}"))?;
    }
    let status = child.wait().await.map_err(|e| format!("cannot wait for it: {e}"))?;
    Ok((
        status.code(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    ))
}

/// Returns the hooks of `kind` that apply to tool `tool` among `hooks`, in their order
/// (`before`/`after`, then plugin order, then id). An ordering cycle (refused when the
/// plugins load) falls back to registration order.
pub(crate) fn ordered<'a>(
    hooks: &'a [RuntimeHook],
    kind: HookEventKind,
    tool: &str,
) -> Vec<&'a RuntimeHook> {
    let mut plugins: Vec<&str> = Vec::new();
    for h in hooks {
        if !plugins.contains(&h.plugin.as_str()) {
            plugins.push(&h.plugin);
        }
    }
    let chosen: Vec<&RuntimeHook> = hooks
        .iter()
        .filter(|h| h.hook.event == kind && (!kind.is_tool_event() || h.hook.matches_tool(tool)))
        .collect();
    let refs: Vec<HookRef<'_>> = chosen
        .iter()
        .map(|h| HookRef {
            plugin: &h.plugin,
            plugin_order: plugins.iter().position(|p| *p == h.plugin).unwrap_or(0),
            hook: &h.hook,
        })
        .collect();
    match order_hooks(&refs) {
        Ok(order) => order.into_iter().filter_map(|i| chosen.get(i).copied()).collect(),
        Err(_) => chosen,
    }
}

/// Returns `tool`, or when a hook synthesized `result`, a tool of the same name and facts
/// that answers `result` without running.
pub(crate) fn synthesized(tool: Tool, result: Option<Value>) -> Tool {
    let Some(result) = result else {
        return tool;
    };
    let mut stand_in = Tool::new(tool.name.clone(), move |_args: Value| {
        let result = result.clone();
        async move { Ok(result) }
    });
    stand_in.description = tool.description;
    stand_in.read_only = true;
    stand_in.schema = tool.schema;
    stand_in.plugin = tool.plugin;
    stand_in.options = tool.options;
    stand_in
}
