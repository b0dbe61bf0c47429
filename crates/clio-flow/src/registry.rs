//! [`Registry`]: what a run can reach — flows by id, this agent (`"self"`), subagents of
//! carried plugins, tools, and installed agents (`marketplace/id`) — and the resolution of
//! a call target in the seed's order.
//!
//! It is built in code ([`Registry::flow`], [`Registry::tool`], [`Registry::subagent`], …)
//! and from plugin folders (`crate::register_plugin`), which declare each plugin with its
//! version, content digest and trust. Resolution does not decide trust: a flow or tool of an
//! untrusted plugin resolves to what it is, and the gate (`crate::gate`) asks the person or
//! refuses it (`FlowNotTrusted`) before any of its code runs.
//!
//! A [`Tool`]'s implementation is held as a `gate::Implementation`, which only the gate
//! can run: nothing else in the runtime (or outside it) can call a tool's code.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use clio_spec::{FlowSelection, Requires};
use serde_json::{Map, Value, json};

use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::flow::Flow;
use crate::result::CallKind;

/// The future a tool's handler returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, FlowError>> + Send>>;

/// A tool's implementation: takes the mapping of its arguments, returns its value.
pub type ToolHandler = Arc<dyn Fn(Value) -> ToolFuture + Send + Sync>;

/// A tool's implementation that also gets the context of its own task, through which it
/// can make calls of its own (children of its task), such as `run_code`'s script calls.
pub type ContextualHandler = Arc<dyn Fn(Value, Ctx) -> ToolFuture + Send + Sync>;

/// A tool an agent has.
///
/// Its implementation is not reachable from here: a tool runs only as a call
/// (`ctx.call`), through the gate's trust, permission, callers and hooks.
#[derive(Clone)]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Whether it only reads, as declared: a read-only tool interrupted by a crash runs
    /// again, a side-effecting one raises `CallInterrupted`. The gate believes the claim
    /// only of a tool whose plugin is trusted.
    pub read_only: bool,
    /// The JSON schema of its arguments.
    pub schema: Value,
    /// Its implementation, which only the gate can run.
    pub(crate) implementation: crate::gate::Implementation,
    /// The plugin that brings it (empty: none, a tool registered in code).
    pub plugin: String,
    /// Its declared `defer`, `callers` and `permission`.
    pub options: clio_plugins::ToolOptions,
    /// Whether its context carries the calling agent's conversation (the team tools, whose
    /// subagents inherit it); only such tools make a react loop keep a copy of it.
    pub(crate) reads_conversation: bool,
}

impl Tool {
    /// Returns a side-effecting tool `name` run by `handler`.
    pub fn new<F, Fut>(name: impl Into<String>, handler: F) -> Tool
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, FlowError>> + Send + 'static,
    {
        let handler: ToolHandler = Arc::new(move |args| Box::pin(handler(args)));
        Tool {
            name: name.into(),
            description: String::new(),
            read_only: false,
            schema: json!({ "type": "object" }),
            implementation: crate::gate::Implementation::plain(handler),
            plugin: String::new(),
            options: clio_plugins::ToolOptions::default(),
            reads_conversation: false,
        }
    }

    /// Returns a side-effecting tool `name` run by `handler`, which gets the context of
    /// the tool's task: its own calls are children of that task. Such a tool left running
    /// by a crash runs again only if it is read-only or every call it made is to a
    /// read-only tool.
    pub fn contextual<F, Fut>(name: impl Into<String>, handler: F) -> Tool
    where
        F: Fn(Value, Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, FlowError>> + Send + 'static,
    {
        let handler: ContextualHandler = Arc::new(move |args, ctx| Box::pin(handler(args, ctx)));
        Tool {
            implementation: crate::gate::Implementation::contextual(handler),
            ..Tool::new(name, |_args: Value| async move { Ok(Value::Null) })
        }
    }

    /// Returns the tool with `schema`, the JSON Schema of its arguments that the model is
    /// shown and that a model's arguments are checked against before the tool runs.
    pub fn with_schema(mut self, schema: Value) -> Tool {
        self.schema = schema;
        self
    }

    /// Says whether the tool gets the context of its task (and makes calls of its own).
    pub fn is_contextual(&self) -> bool {
        self.implementation.is_contextual()
    }

    /// Returns the tool with its declared `options`.
    pub fn options(mut self, options: clio_plugins::ToolOptions) -> Tool {
        self.options = options;
        self
    }

    /// Returns the tool as brought by plugin `plugin`.
    pub fn of_plugin(mut self, plugin: impl Into<String>) -> Tool {
        self.plugin = plugin.into();
        self
    }

    /// Returns the tool marked read-only.
    pub fn read_only(mut self) -> Tool {
        self.read_only = true;
        self
    }

    /// Returns the tool with `description`.
    pub fn describe(mut self, description: impl Into<String>) -> Tool {
        self.description = description.into();
        self
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// What a worker (an agent or subagent) is asked to do.
pub struct WorkerRequest {
    /// The worker's id.
    pub id: String,
    /// Its task as text: text as is, anything else as JSON.
    pub text: String,
    /// Its task as given.
    pub input: Value,
    /// The results of earlier calls it may read, as `{handle, target, answer}` records.
    pub evidence: Vec<Value>,
    /// The model it runs on (empty: none chosen).
    pub model: String,
    /// Its system prompt.
    pub prompt: String,
    /// The tools it has, including any the caller added for this call.
    pub tools: Vec<Tool>,
    /// The most model iterations it may take.
    pub max_iters: u64,
    /// What its model must offer.
    pub requires: Requires,
    /// The reasoning effort its model requests carry (empty: the provider's).
    pub effort: String,
    /// Its structured outputs, name → JSON schema (empty: it answers in text).
    pub structured_outputs: Map<String, Value>,
    /// A context scoped to the worker's own task, for recording its iterations.
    pub ctx: Ctx,
    /// The conversation it starts from, before its task (empty: its system prompt only).
    pub(crate) history: Vec<crate::model::Message>,
    /// The team session it runs as, whose iteration budget, checkpoint and allowlist
    /// its model calls keep to.
    pub(crate) team: Option<crate::team::AgentEnv>,
}

/// What a worker answers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkerReply {
    /// The final answer.
    pub answer: String,
    /// The raw value (defaults to the answer).
    pub value: Value,
    /// Other outputs.
    pub outputs: Map<String, Value>,
    /// The whole public response (defaults to the answer).
    pub response_text: String,
    /// The model it ran on.
    pub model: String,
    /// Input tokens spent.
    pub input_tokens: u64,
    /// Output tokens spent.
    pub output_tokens: u64,
    /// Its typed workflow state.
    pub workflow_state: Value,
}

impl WorkerReply {
    /// Returns a reply that answers `text`.
    pub fn text(text: impl Into<String>) -> WorkerReply {
        let answer = text.into();
        WorkerReply {
            value: Value::String(answer.clone()),
            response_text: answer.clone(),
            answer,
            ..WorkerReply::default()
        }
    }
}

/// The future a worker's handler returns.
pub type WorkerFuture = Pin<Box<dyn Future<Output = Result<WorkerReply, FlowError>> + Send>>;

/// How a worker runs.
#[derive(Clone)]
pub enum WorkerRun {
    /// The `react` loop on a model (the default).
    React,
    /// Code: a handler given the request.
    Handler(Arc<dyn Fn(WorkerRequest) -> WorkerFuture + Send + Sync>),
}

/// What runs a react worker (a [`WorkerRun::React`] without a declared flow): the react
/// loop, which the layer that owns it registers (`builtin.rs`), so that `ctx` dispatches
/// to it without importing it.
pub(crate) trait WorkerLoop: Send + Sync {
    /// Runs the worker of `req` to its reply.
    fn run(&self, req: WorkerRequest) -> WorkerFuture;
}

/// An agent or a subagent.
#[derive(Clone)]
pub struct Worker {
    /// Its id (for an agent, `marketplace/id`).
    pub id: String,
    /// What it does.
    pub description: String,
    /// Its system prompt.
    pub prompt: String,
    /// The names of the tools it has.
    pub tools: Vec<String>,
    /// The most model iterations per call (0: the runtime's default).
    pub max_iters: u64,
    /// What its model must offer.
    pub requires: Requires,
    /// The model it prefers (`None`: none).
    pub model: Option<String>,
    /// The provider it prefers (`None`: none): narrows the choice of its model as
    /// `Prefers.provider` does ([`ModelCatalog::choose_model`](crate::ModelCatalog::choose_model)).
    pub provider: Option<String>,
    /// The reasoning effort it prefers (`low`, `medium`, `high`; `None`: the provider's),
    /// sent with each of its model requests.
    pub effort: Option<String>,
    /// The plugin that brings it (`None`: a worker registered in code).
    pub plugin: Option<String>,
    /// The plugins it carries besides its own (a subagent's `plugins`): each must be loaded
    /// in the run ([`Registry::check_carried`]).
    pub carries: Vec<String>,
    /// Whether it has every tool of its plugin and of the plugins it carries (a subagent
    /// whose `tools` is unset) on top of [`tools`](Self::tools).
    pub carried_tools: bool,
    /// Its structured outputs, name → JSON schema (a subagent's `structured_outputs`): its
    /// react loop ends only with a call of one of them whose arguments validate.
    pub structured_outputs: Map<String, Value>,
    /// Whether only its own plugin's flows, workflow files and subagents may call it.
    pub internal: bool,
    /// How it runs.
    pub run: WorkerRun,
    /// The flow a react worker runs when it is called (a subagent's declared `flow`);
    /// `None` runs the react loop itself. Inside that flow `"self"` is the worker's own
    /// react loop, so the flow decides how the subagent works (review twice, debate, …).
    pub flow: Option<FlowSelection>,
}

impl Worker {
    /// Returns a worker `id` that runs the react loop with `prompt`.
    pub fn react(id: impl Into<String>, prompt: impl Into<String>) -> Worker {
        Worker {
            id: id.into(),
            description: String::new(),
            prompt: prompt.into(),
            tools: Vec::new(),
            max_iters: 0,
            requires: Requires::default(),
            model: None,
            provider: None,
            effort: None,
            plugin: None,
            carries: Vec::new(),
            carried_tools: false,
            structured_outputs: Map::new(),
            internal: false,
            run: WorkerRun::React,
            flow: None,
        }
    }

    /// Returns a worker `id` run by `handler`.
    pub fn handler<F, Fut>(id: impl Into<String>, handler: F) -> Worker
    where
        F: Fn(WorkerRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<WorkerReply, FlowError>> + Send + 'static,
    {
        Worker {
            run: WorkerRun::Handler(Arc::new(move |req| Box::pin(handler(req)))),
            ..Worker::react(id, "")
        }
    }

    /// Returns the worker with `tools`.
    pub fn with_tools(mut self, tools: &[&str]) -> Worker {
        self.tools = tools.iter().map(|t| (*t).to_owned()).collect();
        self
    }

    /// Returns the worker running `flow` when it is called, its react loop being `"self"`
    /// in there; the flow `react` is the react loop itself.
    pub fn with_flow(mut self, flow: FlowSelection) -> Worker {
        self.flow = (flow.id != "react").then_some(flow);
        self
    }
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker").field("id", &self.id).finish()
    }
}

#[derive(Clone)]
struct FlowEntry {
    flow: Arc<dyn Flow>,
    plugin: Option<String>,
}

/// A plugin the registry holds, as trust sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct PluginInfo {
    /// Its version.
    pub(crate) version: String,
    /// Whether the host found it trusted at `digest` when it loaded it.
    pub(crate) trusted: bool,
    /// The content digest its trust is pinned to (empty: declared in code without one).
    pub(crate) digest: String,
    /// How a person trusts it, as the host words it (empty: the host gave none).
    pub(crate) trust_with: String,
    /// What it brings that the registry holds no entry for: its MCP servers and script
    /// bindings, one line each, for the trust question.
    pub(crate) also: Vec<String>,
}

/// What a call target resolved to.
#[derive(Clone)]
pub(crate) enum Resolved {
    /// A flow, with the plugin that brings it (`None`: the host's or a built-in flow).
    Flow {
        flow: Arc<dyn Flow>,
        options: Map<String, Value>,
        plugin: Option<String>,
    },
    /// An agent or subagent (boxed: a worker is much larger than the other variants).
    Worker {
        worker: Box<Worker>,
        kind: CallKind,
    },
    Tool(Arc<Tool>),
}

impl Resolved {
    pub(crate) fn kind(&self) -> CallKind {
        match self {
            Resolved::Flow { .. } => CallKind::Flow,
            Resolved::Worker { kind, .. } => *kind,
            Resolved::Tool(_) => CallKind::Tool,
        }
    }
}

/// A call's target: a flow selection, or a name resolved in the seed's order.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A flow selection with options.
    Selection(FlowSelection),
    /// `"self"`, a subagent, a flow id, a tool or `marketplace/id`.
    Name(String),
}

impl Target {
    /// Returns the target as the journal records it.
    pub fn to_json(&self) -> Value {
        match self {
            Target::Selection(s) => crate::flow::reference(s),
            Target::Name(n) => Value::String(n.clone()),
        }
    }

    /// Returns the target's name (a selection's flow id).
    pub fn name(&self) -> &str {
        match self {
            Target::Selection(s) => &s.id,
            Target::Name(n) => n,
        }
    }
}

impl From<&str> for Target {
    fn from(s: &str) -> Self {
        Target::Name(s.to_owned())
    }
}

impl From<String> for Target {
    fn from(s: String) -> Self {
        Target::Name(s)
    }
}

impl From<&String> for Target {
    fn from(s: &String) -> Self {
        Target::Name(s.clone())
    }
}

impl From<FlowSelection> for Target {
    fn from(s: FlowSelection) -> Self {
        Target::Selection(s)
    }
}

/// Everything a run can reach, and which plugins are trusted.
#[derive(Clone, Default)]
pub struct Registry {
    flows: BTreeMap<String, FlowEntry>,
    subagents: BTreeMap<String, Worker>,
    agents: BTreeMap<String, Worker>,
    // Shared: a call resolves its tool by cloning the handle, not the tool's schema.
    tools: BTreeMap<String, Arc<Tool>>,
    this_agent: Option<Worker>,
    plugins: BTreeMap<String, PluginInfo>,
    bindings: BTreeMap<String, crate::binding::Binding>,
    hooks: Vec<crate::gate::RuntimeHook>,
    native: BTreeMap<String, NativeClaims>,
    // What runs react workers; `None` in a registry without the built-ins.
    worker_loop: Option<Arc<dyn WorkerLoop>>,
    // What each drive of a run does before its flow runs, registered by the layer whose
    // work it is (background work a restart cut off is started again).
    drive_starts: Vec<DriveStart>,
}

/// Work a layer does each time a run's drive starts, before its flow runs, given the
/// run's root context: the core calls it without knowing whose work it is.
pub(crate) type DriveStart =
    Arc<dyn Fn(Ctx) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// The claims loaded plugins made on one built-in tool (`[[native_tools]]`).
#[derive(Debug, Clone)]
pub(crate) struct NativeClaims {
    /// The tool's own options, as registered before the first claim.
    pub(crate) own: clio_plugins::ToolOptions,
    /// Each claiming plugin and its options, in the order the plugins loaded.
    pub(crate) by: Vec<(String, clio_plugins::ToolOptions)>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("flows", &self.flows.keys().collect::<Vec<_>>())
            .field("subagents", &self.subagents.keys().collect::<Vec<_>>())
            .field("agents", &self.agents.keys().collect::<Vec<_>>())
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Registry {
    /// Sets what runs react workers.
    /// Adds work to do each time a run's drive starts ([`DriveStart`]).
    pub(crate) fn on_drive_start(mut self, start: DriveStart) -> Registry {
        self.drive_starts.push(start);
        self
    }

    /// Returns the work to do as a run's drive starts, in the order it was added.
    pub(crate) fn drive_starts(&self) -> &[DriveStart] {
        &self.drive_starts
    }

    pub(crate) fn worker_loop(mut self, worker_loop: Arc<dyn WorkerLoop>) -> Registry {
        self.worker_loop = Some(worker_loop);
        self
    }

    /// Runs a react worker's `req` with the registered react loop; without one (a registry
    /// made without the built-ins) the call fails, naming what is missing.
    pub(crate) fn run_react(&self, req: WorkerRequest) -> WorkerFuture {
        match &self.worker_loop {
            Some(worker_loop) => worker_loop.run(req),
            None => Box::pin(async {
                Err(FlowError::CallFailed {
                    handle: None,
                    message: "no react loop is registered: build the registry with \
                              Registry::new or builtin_flows"
                        .into(),
                })
            }),
        }
    }

    /// Adds a flow of no plugin (always trusted).
    pub fn flow(mut self, flow: impl Flow) -> Registry {
        self.flows.insert(flow.id().to_owned(), FlowEntry { flow: Arc::new(flow), plugin: None });
        self
    }

    /// Declares plugin `id` at `version`, trusted or not; it enters the run's fingerprint.
    /// The code of an untrusted plugin (its flows, tools, hooks, bindings) runs only once
    /// a person trusts it during a run. A plugin declared this way has no content digest;
    /// [`register_plugin`](crate::register_plugin) declares one with its folder's.
    pub fn plugin(
        mut self,
        id: impl Into<String>,
        version: impl Into<String>,
        trusted: bool,
    ) -> Registry {
        let info = PluginInfo { version: version.into(), trusted, ..PluginInfo::default() };
        self.plugins.insert(id.into(), info);
        self
    }

    /// Declares plugin `id` as `info` says.
    pub(crate) fn declare_plugin(mut self, id: impl Into<String>, info: PluginInfo) -> Registry {
        self.plugins.insert(id.into(), info);
        self
    }

    /// Records how a person trusts plugin `plugin` (such as the CLI's `clio plugin trust
    /// DIR`): a `FlowNotTrusted` refusal of its code names it. A plugin not declared is
    /// left alone.
    pub fn trust_with(mut self, plugin: &str, command: impl Into<String>) -> Registry {
        if let Some(info) = self.plugins.get_mut(plugin) {
            info.trust_with = command.into();
        }
        self
    }

    /// Returns what the registry holds about plugin `id`, if it was declared.
    pub(crate) fn plugin_info(&self, id: &str) -> Option<&PluginInfo> {
        self.plugins.get(id)
    }

    /// Returns the flows of plugin `plugin` with their descriptions and shapes.
    pub(crate) fn flows_of(&self, plugin: &str) -> Vec<Arc<dyn Flow>> {
        self.flows
            .values()
            .filter(|e| e.plugin.as_deref() == Some(plugin))
            .map(|e| Arc::clone(&e.flow))
            .collect()
    }

    /// Returns the hooks of plugin `plugin`.
    pub(crate) fn hooks_of(&self, plugin: &str) -> Vec<&crate::gate::RuntimeHook> {
        self.hooks.iter().filter(|h| h.plugin == plugin).collect()
    }

    /// Returns the plugin whose code `target` (a flow id or tool name, resolved as a call
    /// resolves it) would run, if it is a declared plugin's.
    pub(crate) fn plugin_of(&self, target: &str) -> Option<&str> {
        let plugin = match self.resolve(&Target::Name(target.to_owned())).ok()? {
            Resolved::Flow { plugin, .. } => plugin?,
            Resolved::Tool(tool) => tool.plugin.clone(),
            Resolved::Worker { .. } => return None,
        };
        self.plugins.get_key_value(&plugin).map(|(id, _)| id.as_str())
    }

    /// Adds a flow that plugin `plugin` provides; it runs only once the plugin is trusted.
    pub fn plugin_flow(mut self, plugin: impl Into<String>, flow: impl Flow) -> Registry {
        self.flows.insert(
            flow.id().to_owned(),
            FlowEntry { flow: Arc::new(flow), plugin: Some(plugin.into()) },
        );
        self
    }

    /// Adds a subagent.
    pub fn subagent(mut self, worker: Worker) -> Registry {
        self.subagents.insert(worker.id.clone(), worker);
        self
    }

    /// Adds an installed agent (its id is `marketplace/id`).
    pub fn agent(mut self, worker: Worker) -> Registry {
        self.agents.insert(worker.id.clone(), worker);
        self
    }

    /// Sets this agent, which `"self"` and `ctx.react` run.
    pub fn this_agent(mut self, worker: Worker) -> Registry {
        self.this_agent = Some(worker);
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: Tool) -> Registry {
        self.tools.insert(tool.name.clone(), Arc::new(tool));
        self
    }

    /// Adds a script binding whose host calls answer `run_code` scripts' reserved calls;
    /// a binding of the same name is replaced.
    pub fn binding(mut self, binding: crate::binding::Binding) -> Registry {
        self.bindings.insert(binding.name().to_owned(), binding);
        self
    }

    /// Returns the claims on built-in tool `name`, starting them with the tool's `own`
    /// options at the first claim.
    pub(crate) fn native_claims(
        &mut self,
        name: &str,
        own: clio_plugins::ToolOptions,
    ) -> &mut NativeClaims {
        self.native.entry(name.to_owned()).or_insert_with(|| NativeClaims { own, by: Vec::new() })
    }

    /// Returns the registered tools, by name.
    pub(crate) fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.tools.values().map(|tool| &**tool)
    }

    /// Fails when a subagent carries a plugin this registry does not hold (neither loaded
    /// nor built in): the error names the subagent, its plugin and the plugin it carries.
    /// Every run checks it before it starts, once every plugin is registered, whatever
    /// order they were registered in.
    pub fn check_carried(&self) -> Result<(), FlowError> {
        for worker in self.subagents.values() {
            for carried in &worker.carries {
                let loaded = self.plugins.contains_key(carried)
                    || clio_plugins::BUILTIN_PLUGINS.contains(&carried.as_str());
                if !loaded {
                    let of = match &worker.plugin {
                        None => String::new(),
                        Some(plugin) => format!(" of plugin {plugin}"),
                    };
                    return Err(FlowError::CallRefused {
                        handle: None,
                        refusal: "plugin_not_loaded".into(),
                        message: format!(
                            "subagent {}{of} carries plugin {carried}, which is not loaded in this run",
                            worker.id
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Returns the tools `worker` has: the ones it names, then (when it has every tool of
    /// its plugins) each tool of its own plugin and of the plugins it carries, once each,
    /// in name order per plugin. A built-in plugin's tools are the ones its declaration
    /// lists that the registry holds.
    pub(crate) fn tools_of(&self, worker: &Worker) -> Vec<Tool> {
        let mut names: Vec<String> = worker.tools.clone();
        if worker.carried_tools {
            let own = worker.plugin.as_ref();
            for plugin in own.into_iter().chain(&worker.carries) {
                if clio_plugins::BUILTIN_PLUGINS.contains(&plugin.as_str()) {
                    let declared =
                        clio_plugins::builtin_plugins().into_iter().find(|p| &p.id == plugin);
                    names.extend(declared.iter().flat_map(|p| p.tool_names().map(str::to_owned)));
                } else {
                    names.extend(
                        self.tools.values().filter(|t| &t.plugin == plugin).map(|t| t.name.clone()),
                    );
                }
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        names
            .into_iter()
            .filter(|n| seen.insert(n.clone()))
            .filter_map(|n| self.tools.get(&n).map(|tool| Tool::clone(tool)))
            .collect()
    }

    /// Returns the binding that answers reserved call `call`, if one owns and binds it.
    pub(crate) fn binding_for(&self, call: &str) -> Option<&crate::binding::Binding> {
        self.bindings.values().find(|b| b.answers(call))
    }

    /// Adds a hook of a loaded plugin; hooks of one event run in their `before`/`after`
    /// order, ties by the order their plugins' first hooks were added, then id.
    pub fn hook(mut self, hook: crate::gate::RuntimeHook) -> Registry {
        self.hooks.push(hook);
        self
    }

    /// Returns the hooks of `kind` that apply to tool `tool`, in the order they run.
    pub(crate) fn hooks_for(
        &self,
        kind: clio_plugins::HookEventKind,
        tool: &str,
    ) -> Vec<&crate::gate::RuntimeHook> {
        crate::gate::ordered(&self.hooks, kind, tool)
    }

    /// Returns the flow `id`, if registered.
    pub fn get_flow(&self, id: &str) -> Option<Arc<dyn Flow>> {
        self.flows.get(id).map(|e| Arc::clone(&e.flow))
    }

    /// Returns the ids of the flows, with each one's description.
    pub fn flows(&self) -> Vec<(String, String)> {
        self.flows.iter().map(|(id, e)| (id.clone(), e.flow.description().to_owned())).collect()
    }

    /// Returns tool `name`, if registered.
    pub fn get_tool(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name).map(|tool| &**tool)
    }

    /// Returns the plugin set as the run's fingerprint records it: `id@version` sorted.
    pub fn plugin_set(&self) -> String {
        let parts: Vec<String> =
            self.plugins.iter().map(|(id, info)| format!("{id}@{}", info.version)).collect();
        parts.join(",")
    }

    /// Returns whether `target` names something a call can reach, and what kind.
    pub fn kind_of(&self, target: &str) -> Option<CallKind> {
        self.resolve(&Target::Name(target.to_owned())).ok().map(|r| r.kind())
    }

    /// Returns flow `id` and the plugin that brings it. Its trust is the gate's to decide.
    fn flow_entry(&self, id: &str) -> Result<(Arc<dyn Flow>, Option<String>), FlowError> {
        let entry = self
            .flows
            .get(id)
            .ok_or_else(|| FlowError::FlowTargetUnknown { target: id.to_owned() })?;
        Ok((Arc::clone(&entry.flow), entry.plugin.clone()))
    }

    /// Resolves `target` in the seed's order: a selection; `"self"`; a subagent; a flow id;
    /// a tool; an installed agent `marketplace/id`. A flow or tool of an untrusted plugin
    /// resolves too: the gate asks about it before it runs.
    pub(crate) fn resolve(&self, target: &Target) -> Result<Resolved, FlowError> {
        let name = match target {
            Target::Selection(sel) => {
                let (flow, plugin) = self.flow_entry(&sel.id)?;
                return Ok(Resolved::Flow { flow, options: sel.options.clone(), plugin });
            }
            Target::Name(name) => name,
        };
        if name == "self" {
            let worker = self.this_agent.clone().unwrap_or_else(|| Worker::react("self", ""));
            return Ok(Resolved::Worker { worker: Box::new(worker), kind: CallKind::Agent });
        }
        if let Some(worker) = self.subagents.get(name) {
            return Ok(Resolved::Worker {
                worker: Box::new(worker.clone()),
                kind: CallKind::Subagent,
            });
        }
        if self.flows.contains_key(name) {
            let (flow, plugin) = self.flow_entry(name)?;
            return Ok(Resolved::Flow { flow, options: Map::new(), plugin });
        }
        if let Some(tool) = self.tools.get(name) {
            return Ok(Resolved::Tool(Arc::clone(tool)));
        }
        if name.contains('/')
            && let Some(worker) = self.agents.get(name)
        {
            return Ok(Resolved::Worker {
                worker: Box::new(worker.clone()),
                kind: CallKind::Agent,
            });
        }
        Err(FlowError::FlowTargetUnknown { target: name.clone() })
    }
}
