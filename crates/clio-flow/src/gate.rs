//! The one gate every tool call passes (SPEC §4, §11, §12), whoever makes it — an agent's
//! react loop, a subagent, a flow's own `ctx.call`, a workflow step, the children of
//! `run_flow` and `run_workflow`, a `run_code` script's `clio.call`, an MCP server's tool —
//! and the trust every plugin's code needs before it runs.
//!
//! A call passes, in order: the decisions that run nothing and ask no one (`callers`, and a
//! `deny` permission, which also hides the tool); trust (a tool of an untrusted plugin
//! asks the person, durably, whether to trust the plugin at its digest; a run that cannot
//! ask refuses with `FlowNotTrusted`); the `PreToolUse` hooks (fail-closed honoured); the
//! permission's `ask`, a durable question to the person; then the tool runs ([`run`]) and
//! its `PostToolUse` hooks see the result. Flows of untrusted plugins ask the same trust
//! question before they start ([`ensure_trusted`]), and so does `run_workflow` before any
//! step starts; hooks of untrusted plugins do not run (a failure), except that before a
//! `fail_closed` hook of an untrusted plugin decides anything the person is asked to trust
//! its plugin (a no, or a run that cannot ask, is `FlowNotTrusted`, not a silent deny of
//! every call); script bindings of untrusted plugins are refused.
//!
//! By construction nothing else can run a tool: a tool's code is held as an
//! [`Implementation`], which only this module can invoke, and [`run`] takes a [`Passed`],
//! which only [`before`] makes.
//!
//! The rules themselves are clio-plugins' pure functions; this module carries them out on a
//! run. Everything that is not a pure function of the run's configuration is recorded, so
//! a resumed or replayed run decides exactly as the first drive did: each hook invocation
//! is an event of the run (`<call>@<event>#<n>`), the merged outcome of an event is one
//! more event (`<call>@<event>`) that a resumed call reads instead of running the hooks
//! again, a person's answer is the answer of a question keyed by the call, and every
//! decision that is not a plain allow is a `PermissionReceipt` (`<call>@receipt`; a trust
//! decision `<question>@trust`, which a later drive of the run reads to know what the
//! person trusted).
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
//! subagent call; `PreCompact` (observe; its `additional_context` instructs the
//! summariser) before a react loop compacts its conversation (`crate::react`).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clio_journal::{EntryKind, NewEntry};
use clio_plugins::{
    Callers, DecisionKind, EventPower, Hook, HookAnswer, HookEvent, HookEventKind, HookOutcome,
    HookRef, HookResult, Permission, PermissionSource, ToolFacts, Verdict, merge_decisions,
    order_hooks, resolve_callers, resolve_permission,
};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::command::Command;
use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::registry::{ContextualHandler, Tool, ToolHandler};
use crate::runtime::{blocking, digest};

/// A tool's code. Only this module can run it: [`run`] is the one place, and it takes the
/// [`Passed`] that only [`before`] gives.
#[derive(Clone)]
pub(crate) struct Implementation(Runner);

#[derive(Clone)]
enum Runner {
    /// Given the arguments.
    Plain(ToolHandler),
    /// Given the arguments and the context of the call's own task.
    Contextual(ContextualHandler),
}

impl Implementation {
    /// Returns an implementation given only the arguments.
    pub(crate) fn plain(handler: ToolHandler) -> Implementation {
        Implementation(Runner::Plain(handler))
    }

    /// Returns an implementation given the arguments and its task's context.
    pub(crate) fn contextual(handler: ContextualHandler) -> Implementation {
        Implementation(Runner::Contextual(handler))
    }

    /// Says whether it needs its task's context.
    pub(crate) fn is_contextual(&self) -> bool {
        matches!(self.0, Runner::Contextual(_))
    }
}

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
    /// A callback that runs with the run's context: a plugin's Python hook, which runs in
    /// the plugin's Python child under the run's sandbox.
    Contextual(ContextualHook),
}

/// A hook callback that runs with the run's context ([`HookRun::Contextual`]).
pub type ContextualHook = Arc<
    dyn for<'a> Fn(
            &'a Ctx,
            Value,
        ) -> std::pin::Pin<Box<dyn Future<Output = HookOutcome> + Send + 'a>>
        + Send
        + Sync,
>;

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

/// Says whether the code of plugin `plugin` may run in the run of `ctx`: code of no
/// declared plugin (the host's own, registered in code, and the built-in plugins'), of a
/// plugin the host loaded as trusted at its digest, or of one a person trusted during this
/// run at that same digest.
pub(crate) fn trusted(ctx: &Ctx, plugin: &str) -> bool {
    match ctx.run.rt.registry.plugin_info(plugin) {
        None => true,
        Some(info) => info.trusted || ctx.run.trusted_in_run(plugin, &info.digest),
    }
}

/// Returns whether `tool` only reads, as far as the run believes it: the claim of a tool
/// whose plugin is not trusted is not believed.
pub(crate) fn believed_read_only(ctx: &Ctx, tool: &Tool) -> bool {
    tool.read_only && trusted(ctx, &tool.plugin)
}

/// Returns what resolution knows about `tool`. A tool registered in code by the host (no
/// plugin) that declares no permission is allowed by default: the host that wrote it
/// vouches for it; deployment and person rules still apply to it. The claims of a tool of
/// an untrusted plugin are not believed: it counts as side-effecting, with permission
/// `ask` (its `callers` and `defer` only narrow or hide it, so they stand).
pub(crate) fn facts<'a>(ctx: &Ctx, tool: &'a Tool) -> ToolFacts<'a> {
    let mut options = tool.options;
    let mut read_only = tool.read_only;
    if tool.plugin.is_empty() && options.permission.is_none() {
        options.permission = Some(Permission::Allow);
    } else if !trusted(ctx, &tool.plugin) {
        options.permission = Some(Permission::Ask);
        read_only = false;
    }
    ToolFacts { plugin: &tool.plugin, name: &tool.name, read_only, options }
}

/// Returns how `tool` is listed to an agent's model in the run of `ctx`.
pub(crate) fn listing(ctx: &Ctx, tool: &Tool) -> Listing {
    let settings = &ctx.run.rt.config.permissions;
    let facts = facts(ctx, tool);
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

/// Who makes a call, as the `callers` rule sees it. Every caller passes the whole gate;
/// only `callers` tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// A flow's own code: a target its author wrote.
    Flow,
    /// An agent's react loop, or work it asked for (a workflow it wrote, through
    /// `run_workflow`).
    Agent,
    /// A `run_code` script, or work it asked for.
    Code,
}

/// What the gate lets through: the input to run with, or a synthesized result. Only
/// [`before`] makes one, and only [`run`] takes it.
pub(crate) struct Passed {
    /// The input the tool runs with (a hook may have modified it).
    input: Value,
    /// A result a hook synthesized; the tool does not run.
    synthesized: Option<Value>,
}

impl Passed {
    /// Returns the input the tool runs with.
    pub(crate) fn input(&self) -> &Value {
        &self.input
    }
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
    match (caller, resolve_callers(settings, &facts(ctx, tool))) {
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
/// it is recorded: callers, a deny, trust, `PreToolUse` hooks, the person's answer. Every
/// step is recorded or a pure function of the settings, so a call decided before (a
/// resumed call left running) is decided again the same way, asking nothing new.
pub(crate) async fn before(
    ctx: &Ctx,
    identity: &str,
    tool: &Tool,
    input: Value,
    caller: Caller,
) -> Result<Passed, FlowError> {
    check_callers(ctx, tool, caller)?;
    let settings = &ctx.run.rt.config.permissions;
    let mut permission = resolve_permission(settings, &facts(ctx, tool));
    if !permission.hidden() && !trusted(ctx, &tool.plugin) {
        ensure_trusted(ctx, &format!("trust:{identity}"), &tool.plugin, &tool.name).await?;
        // Trusted now: its own claims count.
        permission = resolve_permission(settings, &facts(ctx, tool));
    }
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
    let kind = HookEventKind::PRE_TOOL_USE;
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
            let key = format!("permission:{identity}");
            if !can_ask(ctx, &key) {
                let r = Receipt {
                    decision: "deny",
                    layer: decided_layer,
                    rule: permission.rule.as_deref(),
                    answer: Value::Null,
                };
                receipt(ctx, identity, tool, &input, r).await?;
                return Err(refused(
                    "permission_denied",
                    format!(
                        "tool {} needs a person's permission ({decided_layer}) and this run cannot ask",
                        tool.name
                    ),
                ));
            }
            let question = format!("allow tool {} with {}?", tool.name, input);
            let why = if reason.is_empty() {
                format!("tool {} needs your permission ({decided_layer})", tool.name)
            } else {
                reason
            };
            let site = std::panic::Location::caller();
            let answer =
                ctx.ask_with(site, &question, crate::AskSchema::Bool, &[], &why, &key).await?;
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

/// Runs `tool` as the call `identity` that [`before`] passed: its implementation (a
/// contextual one in `child`, the context of the call's own task), or the result a hook
/// synthesized in its place; then the `PostToolUse` hooks on its result. Returns the value
/// to keep (a hook's `updated_output`) and the additional context the hooks gave (empty:
/// none). The one place a tool's code runs.
pub(crate) async fn run(
    ctx: &Ctx,
    identity: &str,
    tool: &Tool,
    passed: Passed,
    child: Option<Ctx>,
) -> Result<(Value, String), FlowError> {
    let Passed { input, synthesized } = passed;
    let kind = HookEventKind::POST_TOOL_USE;
    // Most tools have no PostToolUse hook: their input is not kept for one.
    let observed = !ctx.run.rt.registry.hooks_for(kind, &tool.name).is_empty();
    let seen = observed.then(|| input.clone());
    let value = match synthesized {
        Some(value) => value,
        None => match (&tool.implementation.0, child) {
            (Runner::Plain(handler), _) => {
                let _busy = ctx.run.activity.busy();
                handler(input).await?
            }
            (Runner::Contextual(handler), Some(child)) => handler(input, child).await?,
            (Runner::Contextual(_), None) => {
                return Err(FlowError::CallFailed {
                    handle: None,
                    message: format!("tool {} needs the context of a call", tool.name),
                });
            }
        },
    };
    let Some(input) = seen else {
        return Ok((value, String::new()));
    };
    let mut subject = Subject::tool(tool, &input);
    subject.answer = Some(value.clone());
    let verdict = hooks(ctx, identity, &subject, kind, None).await?;
    Ok((verdict.updated_output.unwrap_or(value), verdict.additional_context))
}

/// Says whether the question `key` of `ctx`'s scope can be asked, or has been answered:
/// a run that cannot ask a person (a non-interactive one) uses only answers it already has.
fn can_ask(ctx: &Ctx, key: &str) -> bool {
    ctx.run.rt.config.interactive
        || ctx.run.has_answer(&format!("{}key:{key}@answer", ctx.scope.prefix))
}

/// Lets code of plugin `plugin` run for `target` (a flow, a tool, a workflow's steps) in
/// the run of `ctx`: at once when it is trusted ([`trusted`]); otherwise the person is
/// asked, durably, as question `key` of `ctx`'s scope, which shows the plugin, its version
/// and digest, and what it brings (tools, hooks, flows with their shapes, MCP servers,
/// bindings). A yes trusts the plugin at that digest: in the host's trust store when the
/// runtime has one, and for the rest of the run (a receipt `<question>@trust`, read back by
/// later drives). A no, or a run that cannot ask, refuses with `FlowNotTrusted`, naming the
/// plugin and how to trust it.
pub(crate) async fn ensure_trusted(
    ctx: &Ctx,
    key: &str,
    plugin: &str,
    target: &str,
) -> Result<(), FlowError> {
    if trusted(ctx, plugin) {
        return Ok(());
    }
    let registry = &ctx.run.rt.registry;
    let info = registry.plugin_info(plugin).cloned().unwrap_or_default();
    let not_trusted = || FlowError::FlowNotTrusted {
        target: target.to_owned(),
        plugin: plugin.to_owned(),
        version: info.version.clone(),
        digest: info.digest.clone(),
        trust_with: info.trust_with.clone(),
    };
    // The question is the run's, one per plugin and digest, whichever call asks it first;
    // a run recorded when each call asked its own (`key`, in its scope) keeps to that.
    let own_question = format!("{}key:{key}", ctx.scope.prefix);
    let (asker, question_key) = if ctx.run.recorded(&own_question).is_some() {
        (ctx.clone(), key.to_owned())
    } else {
        (ctx.run_scope(), format!("trust:{plugin}@{}", info.digest))
    };
    if !can_ask(&asker, &question_key) {
        return Err(not_trusted());
    }
    // A call refused by another call's "no" (below) replays to the same refusal.
    let receipt = format!("{}key:{key}@trust", ctx.scope.prefix);
    if ctx
        .run
        .recorded(&receipt)
        .and_then(|e| e.payload_value().ok())
        .is_some_and(|p| p["decision"] == "deny" && p["rule"] == SHARED_QUESTION)
    {
        return Err(not_trusted());
    }
    // One question per plugin at a time: calls that want it at once wait for the first
    // one's answer. A yes trusts the plugin for the run, so they go on; a no while they
    // waited refuses them too, each with a receipt of its own.
    let ask = ctx.run.trust_ask(plugin);
    let denials = ask.denials.load(Ordering::SeqCst);
    let _turn = ask.turn.lock().await;
    if trusted(ctx, plugin) {
        return Ok(());
    }
    if ask.denials.load(Ordering::SeqCst) > denials {
        let payload = json!({
            "target": target,
            "plugin": plugin,
            "version": info.version,
            "digest": info.digest,
            "decision": "deny",
            "layer": "trust",
            "rule": SHARED_QUESTION,
            "answer": Value::Null,
        });
        record(ctx, vec![(receipt, EntryKind::PermissionReceipt, payload)]).await?;
        return Err(not_trusted());
    }
    let question = trust_question(ctx, plugin, &info);
    let why = format!("{target} comes from plugin {plugin}, which is not trusted at this digest");
    let site = std::panic::Location::caller();
    let answer =
        asker.ask_with(site, &question, crate::AskSchema::Bool, &[], &why, &question_key).await?;
    let yes = answer.as_bool().unwrap_or(false);
    if yes && let Some(store) = ctx.run.rt.config.trust_store.clone() {
        let (id, version, digest) = (plugin.to_owned(), info.version.clone(), info.digest.clone());
        let stored = tokio::task::spawn_blocking(move || store.trust_at(&id, &version, &digest))
            .await
            .map_err(|e| e.to_string())
            .and_then(|res| res.map_err(|e| e.to_string()));
        if let Err(message) = stored {
            return Err(FlowError::CallFailed {
                handle: None,
                message: format!(
                    "the person trusted plugin {plugin}, but the trust list could not record it: {message}"
                ),
            });
        }
    }
    let payload = json!({
        "target": target,
        "plugin": plugin,
        "version": info.version,
        "digest": info.digest,
        "decision": if yes { "trust" } else { "deny" },
        "layer": "trust",
        "rule": Value::Null,
        "answer": answer,
    });
    record(ctx, vec![(receipt, EntryKind::PermissionReceipt, payload)]).await?;
    if yes {
        ctx.run.trust_in_run(plugin, &info.digest);
        Ok(())
    } else {
        ask.denials.fetch_add(1, Ordering::SeqCst);
        Err(not_trusted())
    }
}

/// The `rule` of the trust receipt of a call that waited for another call's question
/// about the same plugin, which the person answered no.
const SHARED_QUESTION: &str = "the same plugin's question, asked for another call, was answered no";

/// Returns the trust question for plugin `plugin`: its version and digest, and everything
/// it brings that would run, as the registry holds it.
fn trust_question(ctx: &Ctx, plugin: &str, info: &crate::registry::PluginInfo) -> String {
    let registry = &ctx.run.rt.registry;
    let digest = if info.digest.is_empty() { "none" } else { info.digest.as_str() };
    let mut text = format!(
        "trust plugin {plugin} {} (digest {digest})? Its code runs only if you do; a yes trusts \
         this content only, and any change to it asks again.",
        info.version
    );
    let mut tools: Vec<&Tool> = registry.tools().filter(|t| t.plugin == plugin).collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    for tool in tools {
        let claims = [
            tool.read_only.then_some("read_only"),
            tool.options.permission.map(|p| match p {
                Permission::Allow => "permission allow",
                Permission::Ask => "permission ask",
                Permission::Deny => "permission deny",
            }),
        ];
        let claims: Vec<&str> = claims.into_iter().flatten().collect();
        let claims = if claims.is_empty() {
            String::new()
        } else {
            format!(" (claims {}, not believed until trusted)", claims.join(", "))
        };
        text.push_str(&format!("\n  tool {}{claims}: {}", tool.name, tool.description));
    }
    for hook in registry.hooks_of(plugin) {
        let closed = if hook.hook.fail_closed { ", fail_closed" } else { "" };
        text.push_str(&format!("\n  hook {} on {}{closed}", hook.hook.id, hook.hook.event.name()));
    }
    for flow in registry.flows_of(plugin) {
        text.push_str(&format!("\n  flow {}: {}", flow.id(), flow.description()));
        if !flow.shape().is_empty() {
            text.push_str(&format!("\n    shape: {}", flow.shape()));
        }
    }
    for line in &info.also {
        text.push_str(&format!("\n  {line}"));
    }
    text
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
    let kind = HookEventKind::SEMANTIC_EVENT;
    Ok(!ctx.run.rt.registry.hooks_for(kind, "").is_empty())
}

pub(crate) async fn semantic_event(
    ctx: &Ctx,
    identity: &str,
    command: &Command,
) -> Result<(), FlowError> {
    let kind = HookEventKind::SEMANTIC_EVENT;
    if ctx.run.rt.registry.hooks_for(kind, "").is_empty() {
        return Ok(());
    }
    let subject = Subject { payload: command.to_json(), ..Subject::default() };
    hooks(ctx, identity, &subject, kind, None).await?;
    Ok(())
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
            // A `fail_closed` hook of an untrusted plugin would deny what it guards without
            // running: the person is asked to trust its plugin before it decides anything
            // (one question per plugin and digest, as for its tools), and a run that cannot
            // ask, or a no, ends the call with `FlowNotTrusted`, naming the plugin and how
            // to trust it, rather than every call being silently denied.
            if kind.power() == EventPower::CanDeny {
                for (n, hook) in registered.iter().enumerate() {
                    if hook.hook.fail_closed && !trusted(ctx, &hook.plugin) {
                        let key = format!("trust:{summary_id}#{n}");
                        let what = format!("the fail_closed {} hook {}", kind.name(), hook.hook.id);
                        Box::pin(ensure_trusted(ctx, &key, &hook.plugin, &what)).await?;
                    }
                }
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
                // An untrusted plugin's hook never runs: that is a failure, which denies
                // when the hook is `fail_closed` and the event can deny.
                let outcome = if trusted(ctx, &hook.plugin) {
                    invoke(ctx, hook, event.to_json()).await
                } else {
                    HookOutcome::Failed {
                        reason: format!(
                            "plugin {} is not trusted at its digest, so its hook did not run",
                            hook.plugin
                        ),
                    }
                };
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

/// Runs one hook on `event` and returns how it ended; never fails otherwise. A hook's
/// program runs in the run's sandbox, as a plugin's executable tool does: it reads and
/// writes the workspace, reads its plugin's folder and the system's read-only folders,
/// and has no network. A sandbox that cannot be had is the hook's failure (which denies
/// when the hook is `fail_closed`).
async fn invoke(ctx: &Ctx, hook: &RuntimeHook, event: Value) -> HookOutcome {
    match &hook.run {
        HookRun::Host(f) => f(event).await,
        HookRun::Contextual(f) => f(ctx, event).await,
        HookRun::Command { program, cwd, timeout } => {
            let config = &ctx.run.rt.config;
            let access = clio_tools::Access {
                workspace: config.workspace.clone().or_else(|| cwd.clone()),
                read: vec![plugin_folder_of(program)],
                write: Vec::new(),
                network: false,
                // A hook gets the sandbox's short list of variables only.
                env: Vec::new(),
            };
            let run = run_command(program, &config.sandbox, &access, &event);
            match tokio::time::timeout(*timeout, run).await {
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

/// Returns the plugin folder a hook's program belongs to: the folder holding the
/// `ai.iowarp.clio/` its program lies under, else the program's own folder.
fn plugin_folder_of(program: &std::path::Path) -> PathBuf {
    program
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|n| n == clio_plugins::PLUGIN_DIR))
        .and_then(std::path::Path::parent)
        .or_else(|| program.parent())
        .map_or_else(|| program.to_path_buf(), std::path::Path::to_path_buf)
}

async fn run_command(
    program: &std::path::Path,
    sandbox: &clio_tools::Sandbox,
    access: &clio_tools::Access,
    event: &Value,
) -> Result<(Option<i32>, String, String), String> {
    let mut confined = sandbox
        .confine(program, access)
        .await
        .map_err(|e| format!("cannot confine {}: {e}", program.display()))?;
    confined
        .command()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child =
        confined.spawn().map_err(|e| format!("cannot start {}: {e}", program.display()))?;
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
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    if !status.success() {
        // bubblewrap's own failure on a kept pass of its check: the next process checks.
        confined.ended_with(&stderr);
    }
    Ok((status.code(), String::from_utf8_lossy(&stdout).into_owned(), stderr))
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
