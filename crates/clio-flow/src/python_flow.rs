//! Flows written in Python: a plugin's `ai.iowarp.clio/flows/*.py`, run in a child
//! process that speaks the line protocol of `docs/python-flows.md` with this runtime.
//!
//! The Python code never opens the journal: each `ctx` operation it makes arrives as a
//! request, which becomes the same [`Command`](crate::Command) a Rust flow's [`Ctx`]
//! builds, with the identity the child gives it (the `.py` file, line and column, and its
//! occurrence), and is answered from the history or carried out and recorded. So a Python
//! flow has the Rust core's guarantees: exact replay, one gate, the sandbox (its child
//! runs in it), journal damage refused.
//!
//! Children are shared: one per plugin (at the digest it is trusted at) and runtime serves
//! every instance of that plugin's flows, as asyncio tasks (`docs/decisions.md`: one
//! interpreter per run will not hold 1,000 runs). A child that dies takes its instances
//! with it; their runs are left interrupted, for `runs resume`.

mod child;

use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use clio_journal::{EntryKind, TaskId, TaskStatus};
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::command::{AskSchema, Command, object};
use crate::ctx::{Call, Ctx, ReturnWhen};
use crate::error::FlowError;
use crate::flow::{Flow, FlowFuture, Limits};
use crate::options::{OptionSpec, OptionType};
use crate::registry::Target;
use crate::result::{CallInput, CallResult, FlowOutput};

use child::{Child, Incoming, Loss, PROTOCOL, Spawn};

/// How long a flow told to cancel may take to end before its child is killed.
const CANCEL_GRACE: Duration = Duration::from_secs(3);

/// How long after the last message to or from an instance it counts as working: the
/// child may be computing what to ask next, so the run must not yet be taken for one
/// that only waits on a person.
const SETTLE: Duration = Duration::from_millis(100);

/// How long the requests of an instance whose child died may take to end (a tool call
/// running then finishes and is recorded; see `Instance::settle`).
const SETTLE_AFTER_LOSS: Duration = Duration::from_secs(40);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The children of one plugin's Python flows in this runtime: started on first use, one
/// at a time, started again when the one there died.
#[derive(Debug)]
pub struct Pool {
    plugin: String,
    root: PathBuf,
    interpreter: PathBuf,
    network: bool,
    child: tokio::sync::Mutex<Option<Arc<Child>>>,
}

impl Pool {
    /// Returns the pool of plugin `plugin`'s flows, whose folder (holding
    /// `ai.iowarp.clio/`) is `root`, run on `interpreter`.
    pub fn new(plugin: impl Into<String>, root: PathBuf, interpreter: PathBuf) -> Arc<Pool> {
        Arc::new(Pool {
            plugin: plugin.into(),
            root,
            interpreter,
            network: false,
            child: tokio::sync::Mutex::new(None),
        })
    }

    /// Runs function `function` (a `@tool`, `@hook` or `@host_call` function; a dotted
    /// path names an attribute of one) of the plugin's file `file` (relative to the plugin
    /// folder) on `input` in the plugin's child, and returns what it returned. `name` is
    /// what the errors call it (`tool summarize`); `convention` is how `input` is passed:
    /// `kwargs` (a mapping as keyword arguments, a tool's), `arg` (one argument: a hook's
    /// event, a host call's arguments) or `none`. The plugin must be trusted: a function
    /// of a plugin the run does not trust is refused (`FlowNotTrusted`) before anything
    /// starts; the gate asks the person before it calls a plugin's tool.
    ///
    /// The future is boxed: a function's call may reach the gate, which may call a Python
    /// hook, so its type would otherwise contain itself.
    pub fn call_function<'a>(
        &'a self,
        ctx: &'a Ctx,
        file: &'a str,
        function: &'a str,
        convention: &'a str,
        name: &'a str,
        input: Value,
    ) -> Pin<Box<dyn std::future::Future<Output = Result<Value, FlowError>> + Send + 'a>> {
        Box::pin(self.call_function_inner(ctx, file, function, convention, name, input))
    }

    async fn call_function_inner(
        &self,
        ctx: &Ctx,
        file: &str,
        function: &str,
        convention: &str,
        name: &str,
        input: Value,
    ) -> Result<Value, FlowError> {
        if !crate::gate::trusted(ctx, &self.plugin) {
            let info = ctx.registry().plugin_info(&self.plugin).cloned().unwrap_or_default();
            return Err(FlowError::FlowNotTrusted {
                target: name.to_owned(),
                plugin: self.plugin.clone(),
                version: info.version,
                digest: info.digest,
                trust_with: info.trust_with,
            });
        }
        let child = self.child(ctx).await.map_err(|why| FlowError::FlowProtocol {
            flow: name.to_owned(),
            file: file.to_owned(),
            problem: format!("its Python process did not start: {why}"),
        })?;
        let Some((instance, incoming)) = child.open(ctx.run_id().0) else {
            return Err(lost(ctx, name, file, &Loss::Died("it ended as the call started".into())));
        };
        child.send(&json!({
            "type": "start",
            "instance": instance,
            "protocol": PROTOCOL,
            "root": self.root,
            "file": file,
            "flow": name,
            "function": function,
            "convention": convention,
            "task": input,
            "options": {},
            "run_id": ctx.run_id().0,
            "depth": ctx.depth(),
            "workspace": ctx.config().workspace,
            "history": true,
        }));
        let driver = Instance {
            name,
            file,
            ctx,
            child: &child,
            id: instance.clone(),
            steps: Mutex::new(HashMap::new()),
            drops: Mutex::new(HashMap::new()),
            frontier_sent: std::sync::atomic::AtomicBool::new(true),
        };
        let out = driver.drive(incoming).await;
        child.close(&instance);
        out.map(|output| output.value)
    }

    /// Returns a live child, starting one under `ctx`'s sandbox if there is none.
    async fn child(&self, ctx: &Ctx) -> Result<Arc<Child>, String> {
        let mut slot = self.child.lock().await;
        if let Some(child) = slot.as_ref()
            && child.is_alive()
        {
            return Ok(Arc::clone(child));
        }
        let config = ctx.config();
        let spawn = Spawn {
            interpreter: self.interpreter.clone(),
            plugin: self.plugin.clone(),
            root: self.root.clone(),
            workspace: config.workspace.clone(),
            sandbox: config.sandbox.clone(),
            network: self.network,
        };
        let child = Child::start(&spawn).await?;
        *slot = Some(Arc::clone(&child));
        Ok(child)
    }
}

/// A pool dropped (its registry, its runtime) ends its child: the child's reader holds it
/// alive otherwise, and it would outlive everything that could send it work.
impl Drop for Pool {
    fn drop(&mut self) {
        if let Ok(slot) = self.child.try_lock()
            && let Some(child) = slot.as_ref()
        {
            child.kill();
        }
    }
}

/// A flow a plugin declares in a `.py` file (`class Review(Flow)`), as read from the
/// file's syntax tree; its `forward` runs in the plugin's child.
#[derive(Debug)]
pub struct PythonFlow {
    id: String,
    description: String,
    shape: String,
    model: String,
    version: String,
    plugin: String,
    /// The file, relative to the plugin folder (`ai.iowarp.clio/flows/review.py`).
    file: String,
    class: String,
    limits: Limits,
    options: Vec<OptionSpec>,
    pool: Arc<Pool>,
}

impl PythonFlow {
    /// Returns the flow `decl` of plugin `plugin` (at `version`), run by `pool`; `None`
    /// when `decl` is no Python flow.
    pub fn from_decl(
        decl: &clio_plugins::FlowDecl,
        plugin: &str,
        version: &str,
        pool: &Arc<Pool>,
    ) -> Option<PythonFlow> {
        let clio_plugins::FlowSource::Python { path, class, shape, model, limits, options, .. } =
            &decl.source
        else {
            return None;
        };
        let n = |k: &str| limits.get(k).and_then(Value::as_u64).unwrap_or(0);
        let path = path.to_string_lossy().replace('\\', "/");
        Some(PythonFlow {
            id: decl.id.clone(),
            description: decl.description.clone(),
            shape: shape.clone(),
            model: model.clone(),
            version: version.to_owned(),
            plugin: plugin.to_owned(),
            file: format!("{}/{path}", clio_plugins::PLUGIN_DIR),
            class: class.clone(),
            limits: Limits {
                max_depth: n("max_depth"),
                max_concurrency: n("max_concurrency"),
                max_model_calls: n("max_model_calls"),
                budget_tokens: n("budget_tokens"),
            },
            options: options.iter().filter_map(option_spec).collect(),
            pool: Arc::clone(pool),
        })
    }

    /// The flow's `.py` file, relative to its plugin folder.
    pub fn file(&self) -> &str {
        &self.file
    }
}

/// Reads an option declared as data (`{name, type, default}`).
fn option_spec(option: &Value) -> Option<OptionSpec> {
    let name = option.get("name")?.as_str()?;
    let ty = option_type(option.get("type")?)?;
    Some(OptionSpec::new(name, ty, option.get("default").cloned().unwrap_or(Value::Null)))
}

/// Reads an option type as data (the reader's form of [`OptionType`]).
fn option_type(ty: &Value) -> Option<OptionType> {
    let int = |k: &str| ty.get(k).and_then(Value::as_i64);
    Some(match ty.get("type")?.as_str()? {
        "any" => OptionType::Any,
        "bool" => OptionType::Bool,
        "int" => OptionType::Int { min: int("min"), max: int("max") },
        "float" => OptionType::Float,
        "str" => OptionType::Str,
        "one_of" => OptionType::OneOf(
            ty.get("values")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        ),
        "list" => OptionType::List(Box::new(option_type(ty.get("items")?)?)),
        "map" => OptionType::Map,
        "optional" => OptionType::Optional(Box::new(option_type(ty.get("inner")?)?)),
        _ => return None,
    })
}

impl Flow for PythonFlow {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn shape(&self) -> &str {
        &self.shape
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn version(&self) -> &str {
        &self.version
    }

    fn limits(&self) -> Limits {
        self.limits
    }

    fn options(&self) -> Vec<OptionSpec> {
        self.options.clone()
    }

    fn forward<'a>(&'a self, task: Value, ctx: Ctx) -> FlowFuture<'a> {
        Box::pin(async move { self.run(task, ctx).await })
    }
}

impl PythonFlow {
    async fn run(&self, task: Value, ctx: Ctx) -> Result<FlowOutput, FlowError> {
        // Nothing of the plugin runs before the person trusts it at this digest.
        let key = format!("py-trust:{}", self.id);
        crate::gate::ensure_trusted(&ctx, &key, &self.plugin, &self.id).await?;
        let protocol = |problem: String| FlowError::FlowProtocol {
            flow: self.id.clone(),
            file: self.file.clone(),
            problem,
        };
        let child = self
            .pool
            .child(&ctx)
            .await
            .map_err(|why| protocol(format!("its Python process did not start: {why}")))?;
        let Some((instance, incoming)) = child.open(ctx.run_id().0) else {
            return Err(lost(
                &ctx,
                &self.id,
                &self.file,
                &Loss::Died("it ended as the flow started".into()),
            ));
        };
        let history = ctx.run.replay_only || ctx.run.scope_behind(&ctx.scope.prefix);
        child.send(&json!({
            "type": "start",
            "instance": instance,
            "protocol": PROTOCOL,
            "root": self.pool.root,
            "file": self.file,
            "class": self.class,
            "flow": self.id,
            "task": task,
            "options": Value::Object(ctx.options().clone()),
            "run_id": ctx.run_id().0,
            "depth": ctx.depth(),
            "workspace": ctx.config().workspace,
            "history": history,
        }));
        let driver = Instance {
            name: &self.id,
            file: &self.file,
            ctx: &ctx,
            child: &child,
            id: instance.clone(),
            steps: Mutex::new(HashMap::new()),
            drops: Mutex::new(HashMap::new()),
            frontier_sent: std::sync::atomic::AtomicBool::new(!history),
        };
        let out = driver.drive(incoming).await;
        child.close(&instance);
        out
    }
}

/// The error of a flow (or function) `name` of `file` whose child was lost: a child that
/// died leaves the run interrupted (nothing it did unrecorded is taken for done; `runs
/// resume` starts a new one); one that spoke garbage fails the flow with a protocol error.
fn lost(ctx: &Ctx, name: &str, file: &str, loss: &Loss) -> FlowError {
    match loss {
        Loss::Died(why) => {
            let message = format!(
                "the Python process of {name} ({file}) ended: {why}; the run is interrupted, resume it"
            );
            ctx.run.suspend(message.clone());
            FlowError::CallInterrupted { handle: ctx.handle(), message }
        }
        Loss::Garbage(line) => FlowError::FlowProtocol {
            flow: name.to_owned(),
            file: file.to_owned(),
            problem: format!("its Python process wrote {line}, which is no message"),
        },
    }
}

type Handler<'a> = Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

/// One running instance of a Python flow: its requests, served until its `end`.
struct Instance<'a> {
    /// What runs: the flow's id (`tool summarize` for a plugin's function).
    name: &'a str,
    /// Its `.py` file, relative to the plugin folder.
    file: &'a str,
    ctx: &'a Ctx,
    child: &'a Arc<Child>,
    id: String,
    /// Steps whose function the child runs now: where its `step_done` goes.
    steps: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    /// `as_completed` streams the child may drop.
    drops: Mutex<HashMap<u64, CancellationToken>>,
    frontier_sent: std::sync::atomic::AtomicBool,
}

/// A request the child made that this host cannot read.
struct BadRequest(String);

impl<'a> Instance<'a> {
    async fn drive(
        &'a self,
        mut incoming: tokio::sync::mpsc::UnboundedReceiver<Incoming>,
    ) -> Result<FlowOutput, FlowError> {
        let mut handlers: FuturesUnordered<Handler<'a>> = FuturesUnordered::new();
        let cancel = self.ctx.scope.cancel.clone();
        let mut cancel_sent: Option<Instant> = None;
        // Working until the child has been quiet for a while (see `SETTLE`).
        let activity = &self.ctx.run.activity;
        let mut busy = Some(activity.busy());
        let mut quiet_at = crate::clock::instant() + SETTLE;
        loop {
            let grace = cancel_sent.map(|at| at + CANCEL_GRACE);
            tokio::select! {
                message = incoming.recv() => {
                    quiet_at = crate::clock::instant() + SETTLE;
                    if busy.is_none() {
                        busy = Some(activity.busy());
                    }
                    let message = match message {
                        Some(Incoming::Message(message)) => message,
                        Some(Incoming::Lost(loss)) => {
                            let err = lost(self.ctx, self.name, self.file, &loss);
                            self.settle(&mut handlers).await;
                            return Err(err);
                        }
                        None => {
                            let err = lost(self.ctx, self.name, self.file, &Loss::Died("ended".into()));
                            self.settle(&mut handlers).await;
                            return Err(err);
                        }
                    };
                    match message.get("type").and_then(Value::as_str).unwrap_or("") {
                        "end" => return self.end(&message, cancel_sent.is_some()),
                        "step_done" => {
                            let id = message.get("id").and_then(Value::as_u64).unwrap_or(0);
                            match lock(&self.steps).remove(&id) {
                                Some(waiting) => drop(waiting.send(message)),
                                None => return Err(self.garbage(&message, "a step_done for no step it was told to run")),
                            }
                        }
                        "drop" => {
                            let id = message.get("id").and_then(Value::as_u64).unwrap_or(0);
                            if let Some(token) = lock(&self.drops).remove(&id) {
                                token.cancel();
                            }
                        }
                        _ => handlers.push(Box::pin(self.request(message))),
                    }
                }
                Some(()) = handlers.next(), if !handlers.is_empty() => {
                    quiet_at = crate::clock::instant() + SETTLE;
                }
                () = tokio::time::sleep_until(quiet_at.into()), if busy.is_some() => {
                    busy = None;
                }
                () = cancel.cancelled(), if cancel_sent.is_none() => {
                    self.child.send(&json!({ "type": "cancel", "instance": self.id }));
                    cancel_sent = Some(crate::clock::instant());
                }
                () = sleep_until_opt(grace), if grace.is_some() => {
                    // It ignored the cancellation: its process is killed, with every
                    // instance it held (their runs are left interrupted).
                    self.child.kill();
                    return Err(FlowError::CallCancelled { handle: self.ctx.handle() });
                }
            }
        }
    }

    /// Lets the requests of an instance whose child died end before the flow does: the run
    /// is suspended, so a tool call running now finishes and is recorded (a resume replays
    /// it instead of reporting it cut short), calls not started yet start nothing, and a
    /// step whose function the dead child was running is left unrecorded (it runs again).
    /// Bounded by [`SETTLE_AFTER_LOSS`].
    async fn settle(&self, handlers: &mut FuturesUnordered<Handler<'a>>) {
        lock(&self.steps).clear();
        let drained = async { while handlers.next().await.is_some() {} };
        let _ = tokio::time::timeout(SETTLE_AFTER_LOSS, drained).await;
    }

    /// Returns what the instance's `end` says.
    fn end(&self, message: &Value, cancelled: bool) -> Result<FlowOutput, FlowError> {
        if message.get("cancelled").and_then(Value::as_bool) == Some(true) {
            if let Some(why) = self.ctx.run.suspension() {
                return Err(FlowError::CallInterrupted { handle: self.ctx.handle(), message: why });
            }
            let _ = cancelled;
            return Err(FlowError::CallCancelled { handle: self.ctx.handle() });
        }
        if let Some(error) = message.get("error") {
            return Err(FlowError::from_json(error));
        }
        let Some(ok) = message.get("ok") else {
            return Err(self.garbage(message, "an end with neither ok nor error"));
        };
        let value = ok.get("value").cloned().unwrap_or(Value::Null);
        Ok(match ok.get("form").and_then(Value::as_str).unwrap_or("") {
            "text" => FlowOutput::text(value.as_str().unwrap_or_default()),
            "mapping" => FlowOutput::mapping(value.as_object().cloned().unwrap_or_default()),
            "result" => match ok.get("result").and_then(CallResult::from_json) {
                Some(result) => FlowOutput::from(result),
                None => return Err(self.garbage(message, "an end whose result cannot be read")),
            },
            "value" => FlowOutput { answer: value.to_string(), value, ..FlowOutput::default() },
            _ => return Err(self.garbage(message, "an end of an unknown form")),
        })
    }

    /// The error of a message this host cannot take: the child is killed (it cannot be
    /// trusted to go on), the flow fails naming it.
    fn garbage(&self, message: &Value, what: &str) -> FlowError {
        self.child.kill();
        FlowError::FlowProtocol {
            flow: self.name.to_owned(),
            file: self.file.to_owned(),
            problem: format!("{what}: {}", child::quote(&message.to_string())),
        }
    }

    fn reply(&self, id: u64, result: Result<Value, FlowError>) {
        let mut message = json!({ "type": "result", "instance": self.id, "id": id });
        match result {
            Ok(ok) => message["ok"] = ok,
            Err(err) => message["error"] = err.to_json(),
        }
        self.child.send(&message);
    }

    /// Serves one request of the child, replying when it is done.
    async fn request(&'a self, message: Value) {
        let id = message.get("id").and_then(Value::as_u64);
        let kind = message.get("type").and_then(Value::as_str).unwrap_or("").to_owned();
        let Some(id) = id else {
            let err = self.garbage(&message, "a request without an integer id");
            self.ctx.run.suspend(err.to_string());
            return;
        };
        let answer = match kind.as_str() {
            "call" => self.call(&message).await,
            "gather" => self.gather(&message).await,
            "as_completed" => return self.as_completed(id, &message).await,
            "step" => self.step(id, &message).await,
            "ask" => self.ask(&message).await,
            "event" => self.event(&message).await,
            "publish" => self.publish(&message).await,
            "patched" => self.patched(&message).await,
            "permission_receipts" => self.receipts(&message).await,
            "tool_results" => self.tool_results(&message).await,
            "wait" => self.wait(&message).await,
            "follow" => return self.follow(id, &message).await,
            "cancel_task" => self.cancel_task(&message).await,
            other => Err(BadRequest(format!("unknown request type {other:?}"))),
        };
        match answer {
            Ok(result) => self.reply(id, result),
            Err(BadRequest(why)) => {
                let err = FlowError::FlowProtocol {
                    flow: self.name.to_owned(),
                    file: self.file.to_owned(),
                    problem: format!("{why}, in {}", child::quote(&message.to_string())),
                };
                self.reply(id, Err(err));
            }
        }
    }

    /// Returns the identity of a command about `what` at the request's site (or `key`).
    fn identity(&self, message: &Value, what: &Value, key: &str) -> Result<String, BadRequest> {
        let site = message.get("site").ok_or_else(|| BadRequest("no site".into()))?;
        let file = site.get("file").and_then(Value::as_str).unwrap_or(self.file);
        let line = site.get("line").and_then(Value::as_u64).unwrap_or(0);
        let column = site.get("column").and_then(Value::as_u64).unwrap_or(0);
        let occurrence = message.get("occurrence").and_then(Value::as_u64).unwrap_or(0);
        Ok(self.ctx.identity_at(file, line, column, occurrence, what, key))
    }

    /// Builds the call a `call` request (or a member of a gather) describes.
    fn build_call(&self, message: &Value) -> Result<(Call, Value), BadRequest> {
        let target = match message.get("target") {
            Some(Value::String(name)) => Target::Name(name.clone()),
            Some(Value::Object(selection)) => {
                let id = selection
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| BadRequest("a target selection without an id".into()))?;
                let options = selection.get("options").cloned().unwrap_or(json!({}));
                Target::Selection(crate::flow::selection(id, options))
            }
            _ => return Err(BadRequest("a call without a target".into())),
        };
        let input_value = message.get("input").cloned().unwrap_or(Value::Null);
        let input = match &input_value {
            Value::String(text) => CallInput::Text(text.clone()),
            other => CallInput::Json(other.clone()),
        };
        let what = object([("target", target.to_json()), ("input", input_value)]);
        let key = str_of(message, "key");
        let identity = self.identity(message, &what, "")?;
        let target_json = target.to_json();
        let mut call = Call::with_identity(self.ctx.clone(), target, input, identity, key);
        let evidence: Vec<TaskId> = message
            .get("evidence")
            .and_then(Value::as_array)
            .map(|handles| handles.iter().filter_map(Value::as_u64).map(TaskId).collect())
            .unwrap_or_default();
        if !evidence.is_empty() {
            call = call.evidence(evidence);
        }
        let model = str_of(message, "model");
        if !model.is_empty() {
            call = call.model(model);
        }
        let label = str_of(message, "label");
        if !label.is_empty() {
            call = call.label(label);
        }
        Ok((call, target_json))
    }

    async fn call(&self, message: &Value) -> Result<Result<Value, FlowError>, BadRequest> {
        let (call, target) = self.build_call(message)?;
        if message.get("wait").and_then(Value::as_bool) == Some(false) {
            return Ok(call
                .start()
                .await
                .map(|handle| json!({ "handle": handle.0, "target": target })));
        }
        Ok(call.await.map(|result| result.to_json()))
    }

    fn calls(&self, message: &Value) -> Result<Vec<Call>, BadRequest> {
        let members = message
            .get("calls")
            .and_then(Value::as_array)
            .ok_or_else(|| BadRequest("no calls".into()))?;
        members.iter().map(|m| self.build_call(m).map(|(call, _)| call)).collect()
    }

    async fn gather(&self, message: &Value) -> Result<Result<Value, FlowError>, BadRequest> {
        let calls = self.calls(message)?;
        let identity = self.identity(message, &Value::String("select".into()), "")?;
        let limit = message.get("limit").and_then(Value::as_u64).unwrap_or(0) as usize;
        let any = message.get("return_when").and_then(Value::as_str) == Some("any");
        let mut gather = self.ctx.gather_as(calls, identity).limit(limit);
        if any {
            gather = gather.return_when(ReturnWhen::Any);
        }
        let settled = gather.settled().await;
        let items: Vec<Value> = settled
            .into_iter()
            .map(|s| match s {
                Some(Ok(result)) => result.to_json(),
                Some(Err(err)) => err.to_json(),
                None => Value::Null,
            })
            .collect();
        Ok(Ok(Value::Array(items)))
    }

    async fn as_completed(&self, id: u64, message: &Value) {
        let prepared = self.calls(message).and_then(|calls| {
            let identity = self.identity(message, &Value::String("select".into()), "")?;
            Ok((calls, identity))
        });
        let (calls, identity) = match prepared {
            Ok(prepared) => prepared,
            Err(BadRequest(why)) => {
                let err = FlowError::FlowProtocol {
                    flow: self.name.to_owned(),
                    file: self.file.to_owned(),
                    problem: why,
                };
                return self.reply(id, Err(err));
            }
        };
        let limit = message.get("limit").and_then(Value::as_u64).unwrap_or(0) as usize;
        let dropped = CancellationToken::new();
        lock(&self.drops).insert(id, dropped.clone());
        let stream = self.ctx.as_completed_as(calls, limit, identity);
        futures::pin_mut!(stream);
        loop {
            let next = tokio::select! {
                next = stream.next() => next,
                () = dropped.cancelled() => return,
            };
            let Some(settled) = next else { break };
            let mut out = json!({
                "type": "settled", "instance": self.id, "id": id, "index": settled.index,
            });
            match settled.result {
                Ok(result) => out["ok"] = result.to_json(),
                Err(err) => out["error"] = err.to_json(),
            }
            self.child.send(&out);
        }
        lock(&self.drops).remove(&id);
        self.reply(id, Ok(Value::Null));
    }

    async fn step(&self, id: u64, message: &Value) -> Result<Result<Value, FlowError>, BadRequest> {
        let name = str_of(message, "name");
        let cmd = Command::Step { name: name.clone() };
        let key = str_of(message, "key");
        let identity = self.identity(message, &cmd.to_json(), &key)?;
        let ran = message.get("ran").and_then(Value::as_bool) == Some(true);
        let step_error = |identity: &str, error: &Value| {
            let mut err = FlowError::from_json(error);
            if let FlowError::StepFailed { identity: at, .. } = &mut err
                && at.is_empty()
            {
                identity.clone_into(at);
            }
            err
        };
        let result = if ran {
            // The child ran the function at once (the run is past its history).
            let outcome = match message.get("error") {
                Some(error) => Err(step_error(&identity, error)),
                None => Ok(message.get("ok").cloned().unwrap_or(Value::Null)),
            };
            let ident = identity.clone();
            self.ctx.recorded_or_run(ident, cmd, EntryKind::Step, || async move { outcome }).await
        } else {
            let (tx, rx) = oneshot::channel();
            let ident = identity.clone();
            self.ctx
                .recorded_or_run(ident, cmd, EntryKind::Step, || async move {
                    // Not recorded, and admitted: now the child runs the function.
                    lock(&self.steps).insert(id, tx);
                    self.child.send(&json!({ "type": "run", "instance": self.id, "id": id }));
                    let done = rx.await.map_err(|_| FlowError::CallInterrupted {
                        handle: None,
                        message: "the Python process ended while a step ran".into(),
                    })?;
                    match done.get("error") {
                        Some(error) => Err(step_error(&identity, error)),
                        None => Ok(done.get("ok").cloned().unwrap_or(Value::Null)),
                    }
                })
                .await
        };
        self.maybe_frontier();
        Ok(result)
    }

    /// Tells the child its scope has reached the end of its history, once: from now on
    /// it runs step functions at once (one message per new step instead of two).
    fn maybe_frontier(&self) {
        use std::sync::atomic::Ordering;
        if self.frontier_sent.load(Ordering::SeqCst)
            || self.ctx.run.replay_only
            || self.ctx.run.scope_behind(&self.ctx.scope.prefix)
        {
            return;
        }
        if !self.frontier_sent.swap(true, Ordering::SeqCst) {
            self.child.send(&json!({ "type": "frontier", "instance": self.id }));
        }
    }

    async fn ask(&self, message: &Value) -> Result<Result<Value, FlowError>, BadRequest> {
        let schema = match message.get("schema").and_then(Value::as_str).unwrap_or("text") {
            "bool" => AskSchema::Bool,
            "options" => AskSchema::Options,
            _ => AskSchema::Text,
        };
        let options: Vec<String> = message
            .get("options")
            .and_then(Value::as_array)
            .map(|o| o.iter().filter_map(Value::as_str).map(str::to_lowercase).collect())
            .unwrap_or_default();
        let cmd = Command::Ask {
            question: str_of(message, "question"),
            schema,
            options,
            reason: str_of(message, "reason"),
        };
        let identity = self.identity(message, &cmd.to_json(), &str_of(message, "key"))?;
        Ok(self.ctx.ask_as(identity, cmd).await)
    }

    async fn event(&self, message: &Value) -> Result<Result<Value, FlowError>, BadRequest> {
        let event = message.get("event").cloned().unwrap_or(Value::Null);
        let cmd = Command::Event { event };
        let identity = self.identity(message, &cmd.to_json(), "")?;
        Ok(self.ctx.record_event_as(identity, cmd).await.map(|()| Value::Null))
    }

    async fn publish(&self, message: &Value) -> Result<Result<Value, FlowError>, BadRequest> {
        let view = message.get("view").cloned().unwrap_or(Value::Null);
        let identity = self.identity(message, &json!({ "command": "publish" }), "")?;
        Ok(self.ctx.publish_as(identity, view).await.map(|()| Value::Null))
    }

    async fn patched(&self, message: &Value) -> Result<Result<Value, FlowError>, BadRequest> {
        let patch = str_of(message, "patch");
        if patch.is_empty() {
            return Err(BadRequest("patched without a patch id".into()));
        }
        Ok(self.ctx.patched(&patch).await.map(Value::Bool))
    }

    async fn receipts(&self, message: &Value) -> Result<Result<Value, FlowError>, BadRequest> {
        let refresh = message.get("refresh").and_then(Value::as_bool).unwrap_or(false);
        let cmd = Command::Step { name: format!("permission_receipts:{refresh}") };
        let key = if refresh { "" } else { "permission_receipts" };
        let identity = self.identity(message, &cmd.to_json(), key)?;
        Ok(self.ctx.permission_receipts_as(identity, refresh).await)
    }

    fn handle_of(message: &Value) -> Result<TaskId, BadRequest> {
        message
            .get("handle")
            .and_then(Value::as_u64)
            .map(TaskId)
            .ok_or_else(|| BadRequest("no integer handle".into()))
    }

    async fn tool_results(&self, message: &Value) -> Result<Result<Value, FlowError>, BadRequest> {
        let handle = Self::handle_of(message)?;
        Ok(self.ctx.tool_results(handle).await.map(Value::Array))
    }

    /// Reads task `handle` of this run from the journal.
    async fn task(&self, handle: TaskId) -> Result<clio_journal::TaskRecord, FlowError> {
        let journal = self.ctx.journal().clone();
        let run = self.ctx.run_id();
        let record = crate::runtime::blocking(move || journal.task(handle)).await?;
        match record {
            Some(record) if record.run == run => Ok(record),
            _ => Err(FlowError::CallFailed {
                handle: Some(handle),
                message: format!("task {} is no task of run {}", handle.0, run.0),
            }),
        }
    }

    async fn wait(&self, message: &Value) -> Result<Result<Value, FlowError>, BadRequest> {
        let handle = Self::handle_of(message)?;
        let mut pause = Duration::from_millis(20);
        loop {
            let record = match self.task(handle).await {
                Ok(record) => record,
                Err(err) => return Ok(Err(err)),
            };
            if let Some(ended) = ended(&record) {
                return Ok(ended);
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.ctx.scope.cancel.cancelled() => {
                    return Ok(Err(FlowError::CallCancelled { handle: Some(handle) }));
                }
            }
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    async fn follow(&self, id: u64, message: &Value) {
        let handle = match Self::handle_of(message) {
            Ok(handle) => handle,
            Err(BadRequest(why)) => {
                let err = FlowError::FlowProtocol {
                    flow: self.name.to_owned(),
                    file: self.file.to_owned(),
                    problem: why,
                };
                return self.reply(id, Err(err));
            }
        };
        let mut last = None;
        loop {
            let record = match self.task(handle).await {
                Ok(record) => record,
                Err(err) => return self.reply(id, Err(err)),
            };
            let status = record.status;
            if last != Some(status) {
                last = Some(status);
                self.child.send(&json!({
                    "type": "update", "instance": self.id, "id": id,
                    "ok": {
                        "status": serde_json::to_value(status).unwrap_or(Value::Null),
                        "handle": handle.0,
                        "target": record.target,
                    },
                }));
            }
            if let Some(ended) = ended(&record) {
                return self.reply(id, ended);
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
                () = self.ctx.scope.cancel.cancelled() => {
                    return self.reply(id, Err(FlowError::CallCancelled { handle: Some(handle) }));
                }
            }
        }
    }

    async fn cancel_task(&self, message: &Value) -> Result<Result<Value, FlowError>, BadRequest> {
        let handle = Self::handle_of(message)?;
        self.ctx.run.cancel_task(handle);
        Ok(Ok(Value::Null))
    }
}

/// Returns the result or error of an ended task; `None` while it runs.
fn ended(record: &clio_journal::TaskRecord) -> Option<Result<Value, FlowError>> {
    match record.status {
        TaskStatus::Succeeded => Some(Ok(record.result.clone().unwrap_or(Value::Null))),
        TaskStatus::Failed => Some(Err(record
            .error
            .as_deref()
            .map_or_else(
                || FlowError::CallFailed { handle: Some(record.id), message: "failed".into() },
                FlowError::from_record,
            )
            .with_handle(record.id))),
        TaskStatus::Cancelled => Some(Err(FlowError::CallCancelled { handle: Some(record.id) })),
        _ => None,
    }
}

fn str_of(message: &Value, key: &str) -> String {
    message.get(key).and_then(Value::as_str).unwrap_or("").to_owned()
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
