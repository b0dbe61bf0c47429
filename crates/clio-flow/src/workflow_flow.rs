//! The built-in `workflow` flow: drives clio-workflow's [`Scheduler`] through [`Ctx`].
//!
//! Its task is the seed's fields: `workflow`, `task`, `editors`, `max_added_steps`,
//! `max_edit_rounds`, `allowed_targets`, `approve_edits`, `model`. Each step is a call keyed
//! `wf:<step>`; an editor's step gets the two proposal tools `workflow_add_step` and
//! `workflow_cancel_step`, whose calls travel back with the editor's result; `approve_edits`
//! asks through [`Ctx::ask_full`]. Every event told to the scheduler is applied in
//! batches, the events that settled together. A batch that holds every outstanding piece of
//! work, each a step that succeeded, in a workflow without editors, is implicit: the
//! steps' recorded results imply it, so nothing is written (a chain writes one entry per
//! step). Any other batch is logged as one entry (`wf-events-<batch>`). A restarted run
//! applies the logged and implied batches first, in order, so it rebuilds the same steps
//! and decisions; only then does it wait for live completions. The run's live view (every step with its status) is published as it goes.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use clio_journal::Pending;
use clio_workflow::{
    Action, Bounds, EditorCall, Event, Outcome, Proposal, RunConfig, RunResult, Scheduler,
    Settings, TargetKind, Workflow,
};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::command::object;
use crate::ctx::{Call, Ctx};
use crate::error::FlowError;
use crate::flow::{Flow, FlowFuture, selection};
use crate::registry::{Target, Tool};
use crate::result::{CallKind, CallResult, FlowOutput};

/// The built-in `workflow` flow.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkflowFlow;

impl Flow for WorkflowFlow {
    fn id(&self) -> &str {
        "workflow"
    }

    fn description(&self) -> &str {
        "Runs a workflow written as data: steps with targets, inputs and dependencies, \
         optionally edited by editor steps within bounds. Input: {workflow, task, editors, \
         max_added_steps, max_edit_rounds, allowed_targets, approve_edits, model}."
    }

    fn forward<'a>(&'a self, task: Value, ctx: Ctx) -> FlowFuture<'a> {
        Box::pin(run(task, ctx))
    }
}

/// What a live piece of work of the workflow settles with.
enum Done {
    Step { step: String, res: Result<CallResult, FlowError> },
    Decision { proposal: u32, res: Result<Value, FlowError> },
    Repair { step: String, editor: String, res: Result<CallResult, FlowError> },
}

impl Done {
    fn id(&self) -> String {
        match self {
            Done::Step { step, .. } => format!("step:{step}"),
            Done::Decision { proposal, .. } => format!("decision:{proposal}"),
            Done::Repair { step, editor, .. } => format!("repair:{step}:{editor}"),
        }
    }
}

type Live = Pin<Box<dyn Future<Output = Done> + Send>>;

/// An event told to the scheduler, with the id of the piece of work it came from.
type Applied = (String, Event);

/// A batch of events as the log holds it: `{"events": [{"done": .., "event": ..}, ..]}`,
/// encoded straight from the events.
#[derive(serde::Serialize)]
struct LoggedEvents<'a> {
    events: Vec<LoggedEvent<'a>>,
}

#[derive(serde::Serialize)]
struct LoggedEvent<'a> {
    done: &'a str,
    event: &'a Event,
}

impl<'a> LoggedEvents<'a> {
    fn of(applied: &'a [Applied]) -> Self {
        LoggedEvents {
            events: applied.iter().map(|(done, event)| LoggedEvent { done, event }).collect(),
        }
    }
}

/// When the workflow publishes its live view (`ctx.publish`, which replaces the run card's
/// view): once [`VIEW_INTERVAL`] has passed since the last one, after a batch of events or,
/// when the workflow waits with a change not shown yet, as the interval ends; and always at
/// the end. A person watching sees each change within the interval (a step that finished,
/// a proposal waiting for their yes); a run of fast steps writes a view only now and then,
/// so a workflow step costs about one journal entry whatever the workflow's size (see
/// `docs/performance.md`). Views beyond the end's are also bounded by the events applied
/// (8, and one per 40 events), so a large run of slow steps stays within its entry cap,
/// and by their bytes ([`VIEW_BYTES_FREE`], and [`VIEW_BYTES_PER_EVENT`] more per event):
/// each view holds every step, so without it a workflow of n steps would write O(n²) bytes
/// of views that every reader of the run then reads (issue 44: 248 MB of views in a
/// 9,500-step run). Views are not commands the code must reach again, so their rhythm may
/// differ from one drive to the next.
struct ViewRhythm {
    last: std::time::Instant,
    /// Events applied since the last view (a change to show), and in all.
    unshown: u64,
    events: u64,
    published: u64,
    /// The bytes of the views published, and of the last one (the next is about its size).
    bytes: u64,
    last_bytes: u64,
    /// Off in a strict replay, which publishes no view.
    on: bool,
}

/// The least time between two published views.
const VIEW_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// The bytes of views a workflow may publish before its events earn it more.
const VIEW_BYTES_FREE: u64 = 1 << 20;

/// The bytes of views each applied event (a step's end, say) earns.
const VIEW_BYTES_PER_EVENT: u64 = 1 << 10;

impl ViewRhythm {
    fn new(on: bool) -> ViewRhythm {
        ViewRhythm {
            last: crate::clock::instant(),
            unshown: 0,
            events: 0,
            published: 0,
            bytes: 0,
            last_bytes: 0,
            on,
        }
    }

    fn applied(&mut self, events: u64) {
        self.unshown += events;
        self.events += events;
    }

    /// Whether a change waits to be shown and the bounds allow one more view.
    fn wants(&self) -> bool {
        let byte_budget = VIEW_BYTES_FREE + self.events * VIEW_BYTES_PER_EVENT;
        self.on
            && self.unshown > 0
            && self.published < 8 + self.events / 40
            && self.bytes + self.last_bytes <= byte_budget
    }

    /// How long until a view of the change not shown yet is due, if one is wanted.
    fn wait(&self) -> Option<std::time::Duration> {
        self.wants().then(|| VIEW_INTERVAL.saturating_sub(self.last.elapsed()))
    }

    /// Returns whether a view is due now.
    fn due(&self) -> bool {
        self.wait().is_some_and(|w| w.is_zero())
    }

    /// Notes a view of `bytes` bytes published now.
    fn shown(&mut self, bytes: u64) {
        self.unshown = 0;
        self.published += 1;
        self.bytes += bytes;
        self.last_bytes = bytes;
        self.last = crate::clock::instant();
    }
}

fn invalid(message: String) -> FlowError {
    FlowError::stall("workflow_invalid", message)
}

fn proposal_tools() -> [Tool; 2] {
    [
        Tool::new("workflow_add_step", |args: Value| async move { Ok(args) })
            .read_only()
            .describe("Propose a new step: step_id, target, input, after, reason, options.")
            .with_schema(serde_json::json!({
                "type": "object",
                "properties": {
                    "step_id": { "type": "string", "description": "The new step's id, unused so far." },
                    "target": { "type": "string", "description": "Who runs it: a subagent, agent, flow or tool." },
                    "input": { "description": "Its input: text, or a JSON value; may name `$task` or `$<step>`." },
                    "after": { "type": "array", "items": { "type": "string" }, "description": "The steps it waits for." },
                    "reason": { "type": "string", "description": "Why the workflow needs it." },
                    "options": { "type": "object", "description": "The options of a flow target." }
                },
                "required": ["step_id", "target"],
                "additionalProperties": false
            })),
        Tool::new("workflow_cancel_step", |args: Value| async move { Ok(args) })
            .read_only()
            .describe("Propose cancelling a step that has not started: step_id, reason.")
            .with_schema(serde_json::json!({
                "type": "object",
                "properties": {
                    "step_id": { "type": "string", "description": "The step to cancel." },
                    "reason": { "type": "string", "description": "Why it is no longer needed." }
                },
                "required": ["step_id"],
                "additionalProperties": false
            })),
    ]
}

/// A run of the built-in `workflow` flow, as a caller hands it over: the workflow already
/// parsed and checked, and the settings typed. [`WorkflowRun::input`] is the one writer of
/// the flow's input (the run's input in the journal), which the flow reads back once
/// (`WorkflowInput`); callers build no map of settings by name.
#[derive(Debug, Clone)]
pub struct WorkflowRun {
    /// The workflow.
    pub workflow: Workflow,
    /// The task its steps' `$task` stands for: text, or structured JSON (a reference that
    /// is only `$task` is replaced by the value itself).
    pub task: Value,
    /// The subagents that may propose edits after each step (none: no editing).
    pub editors: Vec<String>,
    /// The most steps the editors may add (`None`: the flow's default).
    pub max_added_steps: Option<u64>,
    /// The most rounds of edits (`None`: the flow's default).
    pub max_edit_rounds: Option<u64>,
    /// The targets an added step may name (`None`: the workflow's own targets).
    pub allowed_targets: Option<Vec<String>>,
    /// Whether each proposed edit waits for the person's yes.
    pub approve_edits: bool,
    /// The model the steps run on (`None`: the runtime's).
    pub model: Option<String>,
}

impl WorkflowRun {
    /// Returns a run of `workflow` on `task` with no editors and the default settings.
    pub fn new(workflow: Workflow, task: impl Into<Value>) -> WorkflowRun {
        WorkflowRun {
            workflow,
            task: task.into(),
            editors: Vec::new(),
            max_added_steps: None,
            max_edit_rounds: None,
            allowed_targets: None,
            approve_edits: false,
            model: None,
        }
    }

    /// Returns the run's input as the `workflow` flow reads it: `{workflow, task, ...}`
    /// with only the settings that are set.
    pub fn input(&self) -> Value {
        let mut input = Map::new();
        input.insert("workflow".into(), self.workflow.to_json());
        input.insert("task".into(), self.task.clone());
        if !self.editors.is_empty() {
            input.insert("editors".into(), serde_json::json!(self.editors));
        }
        if let Some(n) = self.max_added_steps {
            input.insert("max_added_steps".into(), serde_json::json!(n));
        }
        if let Some(n) = self.max_edit_rounds {
            input.insert("max_edit_rounds".into(), serde_json::json!(n));
        }
        if let Some(targets) = &self.allowed_targets {
            input.insert("allowed_targets".into(), serde_json::json!(targets));
        }
        if self.approve_edits {
            input.insert("approve_edits".into(), Value::Bool(true));
        }
        if let Some(model) = &self.model {
            input.insert("model".into(), Value::String(model.clone()));
        }
        Value::Object(input)
    }
}

/// The workflow flow's settings, parsed once from its input (beside `workflow`, which
/// [`Workflow::from_value`] reads): a field of the wrong type is refused, naming the
/// field, rather than dropped. Other fields are ignored, as they always were: the inputs
/// of runs already in journals may hold them, and their resumes parse them again.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WorkflowInput {
    /// The task the steps' `$task` stands for (`""` when absent, kept as given otherwise).
    #[serde(default = "no_task")]
    task: Value,
    editors: Option<Vec<String>>,
    max_added_steps: Option<u64>,
    max_edit_rounds: Option<u64>,
    allowed_targets: Option<Vec<String>>,
    approve_edits: Option<bool>,
    model: Option<String>,
}

fn no_task() -> Value {
    Value::String(String::new())
}

impl WorkflowInput {
    /// Reads the settings of `input`; a wrong-typed field is `workflow_invalid`, naming it.
    fn parse(input: &Value) -> Result<WorkflowInput, FlowError> {
        WorkflowInput::deserialize(input).map_err(|e| {
            // serde's message names no field: the field at fault is the one that fails alone.
            let alone = |key: &String, value: &Value| {
                WorkflowInput::deserialize(&Value::Object(Map::from_iter([(
                    key.clone(),
                    value.clone(),
                )])))
                .is_err()
            };
            match input.as_object().and_then(|m| m.iter().find(|(k, v)| alone(k, v))) {
                Some((key, _)) => invalid(format!("the workflow's `{key}` is wrong: {e}")),
                None => invalid(format!("the workflow's settings are wrong: {e}")),
            }
        })
    }
}

impl WorkflowInput {
    /// Returns the scheduler's configuration these settings make.
    fn run_config(self) -> RunConfig {
        RunConfig {
            task: self.task,
            editors: self.editors.unwrap_or_default(),
            bounds: Bounds {
                max_added_steps: saturating_u32(self.max_added_steps),
                max_edit_rounds: saturating_u32(self.max_edit_rounds),
                allowed_targets: self.allowed_targets,
                approve_edits: self.approve_edits.unwrap_or(false),
            },
            ..RunConfig::default()
        }
    }
}

fn saturating_u32(n: Option<u64>) -> Option<u32> {
    n.map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

async fn run(input: Value, ctx: Ctx) -> Result<FlowOutput, FlowError> {
    let registry = ctx.registry().clone();
    let kind_of = |target: &str| match registry.kind_of(target) {
        Some(CallKind::Flow) => TargetKind::Flow,
        Some(_) => TargetKind::Other,
        None => TargetKind::Unknown,
    };
    // The workflow is taken out of the task, not copied: nothing else reads it there.
    let mut input = input;
    let wf_value = input.as_object_mut().and_then(|m| m.remove("workflow")).unwrap_or(Value::Null);
    let workflow = Workflow::from_value(wf_value).map_err(|e| invalid(e.to_string()))?;
    workflow.check_targets(kind_of).map_err(|e| invalid(e.to_string()))?;
    let mut settings = WorkflowInput::parse(&input)?;
    trust_targets(&ctx, &workflow).await?;
    let model = settings.model.take().unwrap_or_default();
    let window = steps_window(&ctx);
    let person = person_settings(&ctx);
    let config = RunConfig { max_concurrency: window, settings: person, ..settings.run_config() };
    let asked = config.bounds.clone();
    let no_editors = config.editors.is_empty();
    let mut sched = Scheduler::new(workflow, config);
    // The last write of the log sent to the journal and not yet confirmed, first the limits
    // (and the window, which a resume must launch its steps within too).
    // The scheduler applies events before their commit: the journal commits in order, so
    // the calls it launches next become durable only after the events that led to them.
    // The limits in force (the tighter of the workflow's bounds and the person's settings),
    // and both of what they came from, recorded when the run starts.
    let to_value = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
    let limits = to_value(serde_json::to_value(sched.limits()));
    let logged_limits = object([
        ("limits", limits),
        ("workflow", to_value(serde_json::to_value(&asked))),
        ("settings", to_value(serde_json::to_value(person))),
        ("window", window.into()),
    ]);
    let mut unconfirmed: Option<Pending<Vec<u64>>> =
        ctx.submit_log("wf-limits", "workflow limits".into(), &logged_limits)?;
    let mut live: FuturesUnordered<Live> = FuturesUnordered::new();
    // How many events of each piece of work were applied from the log.
    let mut consumed: HashMap<String, usize> = HashMap::new();
    // The pieces of work launched whose events are not applied yet, each with its place in
    // the launch order (an implicit batch applies them in that order).
    let mut outstanding: HashMap<String, u64> = HashMap::new();
    let mut launched: u64 = 0;
    // Only a workflow without editors has implicit batches: its only pieces of work are
    // steps, whose events follow from their recorded results alone.
    let implicit_allowed = no_editors;
    // Events applied so far, and batches of them read from or written to the log.
    let mut n: u64 = 0;
    let mut batch: u64 = 0;
    // Views published so far: each is keyed `wf-view-<n>`, numbered on from the views an
    // earlier drive recorded (so a resumed run's live view is written, not taken for one
    // recorded); the writes of those not yet confirmed (a view's write is not waited for,
    // so it shares the next commit).
    let mut views: u64 = ctx.views_recorded("wf-view-");
    let mut views_sent: Vec<Pending<Vec<u64>>> = Vec::new();
    // A replay of an ended run records nothing, and would take a view its history lacks
    // for a divergence: views follow a clock, not the history, so it publishes none.
    let strict = ctx.replays_an_ended_run();
    let mut rhythm = ViewRhythm::new(!strict);
    loop {
        let actions = sched.take_actions();
        // A piece of work launched alone, with nothing else running (a chain's next step),
        // runs on the workflow's own task: the workflow only waits for it, and a task of
        // its own would cost a hand-off to another thread and back each step.
        let alone = actions.len() == 1 && live.is_empty();
        for action in actions {
            outstanding.insert(piece_of(&action), launched);
            launched += 1;
            live.push(launch(&ctx, action, &model, alone));
        }
        if sched.is_done() {
            break;
        }
        let events: Vec<Applied> = match logged_events(&ctx, batch, n)? {
            Some((events, from_batch)) => {
                batch += u64::from(from_batch);
                for (done, _) in &events {
                    *consumed.entry(done.clone()).or_insert(0) += 1;
                    outstanding.remove(done);
                }
                events
            }
            None => {
                // A batch the log does not hold is implicit when every piece of work still
                // waited for is a step whose call has ended with success: it is then all of
                // them, in launch order (see `docs/performance.md`). A resume waits for all
                // of them, as the run that wrote the journal did.
                let implicit_in_journal = implicit_allowed
                    && !outstanding.is_empty()
                    && outstanding.keys().all(|id| {
                        id.strip_prefix("step:").is_some_and(|s| ctx.call_succeeded(&step_key(s)))
                    });
                let mut settled = Vec::new();
                let mut waiting = if implicit_in_journal { outstanding.len() } else { 1 };
                while waiting > 0 {
                    // A change not shown yet is published as its interval ends, if the
                    // work takes that long.
                    let next = match rhythm.wait() {
                        Some(wait) => tokio::select! {
                            next = live.next() => Some(next),
                            () = tokio::time::sleep(wait) => None,
                        },
                        None => Some(live.next().await),
                    };
                    let Some(next) = next else {
                        let bytes = publish_view(&ctx, &sched, &mut views, &mut views_sent).await?;
                        rhythm.shown(bytes);
                        continue;
                    };
                    let Some(done) = next else {
                        return Err(FlowError::stall(
                            "workflow_stuck",
                            "no work is running and the workflow is not done",
                        ));
                    };
                    if !implicit_in_journal || outstanding.contains_key(&done.id()) {
                        waiting -= 1;
                    }
                    settled.push(done);
                }
                // Everything else that has settled by now goes in the same batch.
                while let Some(Some(more)) = live.next().now_or_never() {
                    settled.push(more);
                }
                // Each piece's fresh events with its place in the launch order; a batch
                // is implicit when it holds every outstanding piece, each a step that
                // succeeded and none applied in part from the log.
                let mut pieces: Vec<(u64, String, Vec<Event>)> = Vec::new();
                let mut whole = true;
                for done in settled {
                    let id = done.id();
                    let skip = consumed.remove(&id).unwrap_or(0);
                    let succeeded = matches!(&done, Done::Step { res: Ok(_), .. });
                    let fresh: Vec<Event> =
                        events_of(done, &kind_of)?.into_iter().skip(skip).collect();
                    if fresh.is_empty() {
                        continue;
                    }
                    let seq = outstanding.remove(&id);
                    whole &= seq.is_some() && skip == 0 && succeeded;
                    pieces.push((seq.unwrap_or(u64::MAX), id, fresh));
                }
                let implicit =
                    implicit_allowed && whole && outstanding.is_empty() && !pieces.is_empty();
                if implicit {
                    pieces.sort_by_key(|(seq, _, _)| *seq);
                }
                let events: Vec<Applied> = pieces
                    .into_iter()
                    .flat_map(|(_, id, fresh)| fresh.into_iter().map(move |e| (id.clone(), e)))
                    .collect();
                if implicit {
                    batch += 1;
                } else if !events.is_empty() {
                    let summary = object([("workflow_events", events.len().into())]);
                    let key = format!("wf-events-{batch}");
                    batch += 1;
                    let sent = ctx.submit_log(&key, summary, &LoggedEvents::of(&events))?;
                    if let Some(earlier) = std::mem::replace(&mut unconfirmed, sent) {
                        earlier.await?;
                    }
                }
                events
            }
        };
        rhythm.applied(events.len() as u64);
        for (_done, event) in events {
            n += 1;
            sched.apply(event).map_err(|e| nondeterminism(&format!("event {n}"), e.to_string()))?;
        }
        // The end publishes its own view.
        if rhythm.due() && !sched.is_done() {
            let bytes = publish_view(&ctx, &sched, &mut views, &mut views_sent).await?;
            rhythm.shown(bytes);
        }
    }
    if let Some(last) = unconfirmed.take() {
        last.await?;
    }
    // Work the scheduler no longer waits for (a started step whose result it has) settles here.
    while live.next().await.is_some() {}
    if !strict {
        publish_view(&ctx, &sched, &mut views, &mut views_sent).await?;
    }
    for write in views_sent {
        write.await?;
    }
    // The result is taken out of the scheduler: its steps and answers are not copied.
    let result = sched
        .into_result()
        .map_err(|_| FlowError::stall("workflow_stuck", "the workflow ended without a result"))?;
    match &result.outcome {
        Outcome::Completed => {}
        Outcome::StepFailed { step, error } => {
            return Err(FlowError::FlowStall {
                stall: "step_failed".into(),
                message: format!("step {step} failed: {error}"),
                step: step.clone(),
                predicate: None,
                observed: Some(Box::new(result.to_json())),
                handle: None,
            });
        }
        Outcome::Cancelled { .. } => return Err(FlowError::CallCancelled { handle: ctx.handle() }),
    }
    // The result moves into the output; `workflow_state` stays out of it when no step
    // returned one.
    let RunResult { answer, results, workflow, workflow_state, edits, limits, outcome: _ } = result;
    let json = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
    let mut map = Map::new();
    map.insert("answer".into(), Value::String(answer));
    // The map of results grew as steps finished: it keeps the room it grew, its copy in
    // the outputs would not.
    let mut exact_results = Map::with_capacity(results.len());
    exact_results.extend(results);
    map.insert("results".into(), Value::Object(exact_results));
    map.insert("workflow".into(), Value::Array(workflow.into_iter().map(exact_json).collect()));
    map.insert("edits".into(), json(serde_json::to_value(edits)));
    map.insert("limits".into(), json(serde_json::to_value(limits)));
    if let Some(state) = workflow_state {
        map.insert("workflow_state".into(), state);
    }
    // A large workflow's input takes milliseconds to free: not on the way to the answer.
    drop(tokio::task::spawn_blocking(move || drop(input)));
    Ok(FlowOutput::mapping(map))
}

/// Returns `step` as JSON, each object no larger than its keys: serialising grows a map
/// as keys arrive, and the result's `workflow` holds one map per step, twice at the end of
/// the run (the output's value and its outputs; `compact_json`).
fn exact_json(step: clio_workflow::StepReport) -> Value {
    serde_json::to_value(&step).map_or(Value::Null, crate::compact_json::compact)
}

/// CLIO's own bound on the steps of one workflow running at once. A ready step past it
/// waits, in the order steps became ready, for a running one to end. Everything a step
/// holds while it runs (its call, its task, its result waiting for its commit: about 5 KB)
/// is then bounded by the window rather than by the workflow's width, so a 10,000-way
/// fan-out holds about 1,024 of them, not 10,000. The group commit is no smaller for it:
/// a batch of results rarely reaches 1,024.
pub(crate) const STEPS_RUNNING_AT_ONCE: usize = 1_024;

/// Returns the window a run launches its steps within: the one its `wf-limits` recorded
/// (none, 0, for a run recorded before windows: it launched every ready step at once, and
/// its replay must too), else [`STEPS_RUNNING_AT_ONCE`].
fn steps_window(ctx: &Ctx) -> usize {
    match ctx.logged("wf-limits") {
        Some(logged) => logged
            .get("window")
            .and_then(Value::as_u64)
            .map_or(0, |w| usize::try_from(w).unwrap_or(usize::MAX)),
        None => STEPS_RUNNING_AT_ONCE,
    }
}

/// Returns the person's settings for every workflow (Settings → Execution & history →
/// Workflows; `[workflows]` of the deployment's config.toml) that this run applies: the
/// ones its `wf-limits` recorded when it started (none for a run recorded before they
/// were), so a resume or a replay applies the limits the run started with whatever the
/// settings say now; else the runtime's.
fn person_settings(ctx: &Ctx) -> Settings {
    match ctx.logged("wf-limits") {
        Some(logged) => logged
            .get("settings")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default(),
        None => ctx.config().workflows,
    }
}

/// Makes sure, before any step starts, that every plugin whose code a step would run (a
/// flow or a tool of a declared plugin) is trusted: the person is asked about each one not
/// trusted yet, all at once (questions `wf-trust:<plugin>`), and a no (or a run that cannot
/// ask) ends the workflow with `FlowNotTrusted` before anything ran. Steps editors add
/// later are asked about by the gate when they are called.
async fn trust_targets(ctx: &Ctx, workflow: &Workflow) -> Result<(), FlowError> {
    let registry = &ctx.registry();
    let mut plugins: std::collections::BTreeMap<&str, &str> = std::collections::BTreeMap::new();
    for step in workflow.steps() {
        if let Some(plugin) = registry.plugin_of(&step.target) {
            plugins.entry(plugin).or_insert(&step.target);
        }
    }
    // A question asked in an earlier drive belongs to the workflow even when its plugin has
    // been trusted since (and needs no question now).
    for plugin in plugins.keys() {
        let _ = ctx.run.recorded(&format!("{}key:wf-trust:{plugin}", ctx.scope.prefix));
    }
    let asks = plugins.iter().map(|(plugin, target)| async move {
        crate::gate::ensure_trusted(ctx, &format!("wf-trust:{plugin}"), plugin, target).await
    });
    futures::future::join_all(asks).await.into_iter().collect::<Result<Vec<()>, _>>()?;
    Ok(())
}

/// Returns the events the log holds next, each with the piece of work it came from, and
/// whether they came from batch `batch` (`wf-events-<batch>`, one entry per batch of events
/// that settled together) rather than from event `n` alone (`wf-event-<n>`, as runs
/// recorded before batches log them); `None` when the log holds no more.
fn logged_events(ctx: &Ctx, batch: u64, n: u64) -> Result<Option<(Vec<Applied>, bool)>, FlowError> {
    let read = |logged: &Value, at: &str| -> Result<Applied, FlowError> {
        let done = logged.get("done").and_then(Value::as_str).unwrap_or("").to_owned();
        let event = logged.get("event").cloned().unwrap_or(Value::Null);
        let event = serde_json::from_value(event).map_err(|e| nondeterminism(at, e.to_string()))?;
        Ok((done, event))
    };
    let key = format!("wf-events-{batch}");
    if let Some(logged) = ctx.logged(&key) {
        let items = logged.get("events").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let events = items.iter().map(|item| read(item, &key)).collect::<Result<_, _>>()?;
        return Ok(Some((events, true)));
    }
    let key = format!("wf-event-{n}");
    match ctx.logged(&key) {
        Some(logged) => Ok(Some((vec![read(&logged, &key)?], false))),
        None => Ok(None),
    }
}

/// Publishes the scheduler's state as live view `wf-view-<views>` without waiting for its
/// commit (the write joins `sent`), and confirms the views already committed; returns the
/// view's size in bytes.
async fn publish_view(
    ctx: &Ctx,
    sched: &Scheduler,
    views: &mut u64,
    sent: &mut Vec<Pending<Vec<u64>>>,
) -> Result<u64, FlowError> {
    let key = format!("wf-view-{views}");
    *views += 1;
    let text = view_text(sched)?;
    let bytes = text.get().len() as u64;
    sent.extend(ctx.publish_text(&key, text, || object([("workflow", view(sched))])).await?);
    // The views already committed are confirmed now; the rest by the end.
    confirm_ready(sent)?;
    Ok(bytes)
}

/// Drops the writes of `sent` that have committed, failing with the first that failed.
fn confirm_ready(sent: &mut Vec<Pending<Vec<u64>>>) -> Result<(), FlowError> {
    let mut failed = None;
    sent.retain_mut(|write| match (&mut *write).now_or_never() {
        Some(Ok(_)) => false,
        Some(Err(e)) => {
            failed.get_or_insert(e);
            false
        }
        None => true,
    });
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

fn nondeterminism(at: &str, message: String) -> FlowError {
    FlowError::Nondeterminism {
        identity: at.to_owned(),
        journaled: message,
        requested: "the next event".into(),
        unreached: Vec::new(),
    }
}

/// Returns the run's live view as JSON text, `{"workflow": [..]}` as [`view`] builds it,
/// encoded straight from the scheduler (a large view is published several times).
fn view_text(sched: &Scheduler) -> Result<Box<serde_json::value::RawValue>, FlowError> {
    #[derive(serde::Serialize)]
    struct Step<'a> {
        id: &'a str,
        target: &'a str,
        status: &'static str,
        handle: Option<&'a str>,
    }
    #[derive(serde::Serialize)]
    struct View<'a> {
        workflow: Vec<Step<'a>>,
    }
    let workflow = sched
        .statuses()
        .map(|s| Step { id: s.id, target: s.target, status: s.status.name(), handle: s.handle })
        .collect();
    serde_json::value::to_raw_value(&View { workflow })
        .map_err(|e| FlowError::stall("workflow_invalid", format!("the view does not encode: {e}")))
}

/// Returns the run's live view: every step with its target, status and task handle.
fn view(sched: &Scheduler) -> Value {
    Value::Array(
        sched
            .statuses()
            .map(|s| {
                object([
                    ("id", s.id.into()),
                    ("target", s.target.into()),
                    ("status", s.status.name().into()),
                    ("handle", s.handle.map_or(Value::Null, Value::from)),
                ])
            })
            .collect(),
    )
}

fn call_of(
    ctx: &Ctx,
    target: &str,
    options: Option<Map<String, Value>>,
    input: Value,
    key: String,
    editor: bool,
    model: &str,
) -> Call {
    let target = match options {
        Some(opts) => selection(target, Value::Object(opts)).into(),
        None => Target::from(target),
    };
    let mut call = Call::keyed(ctx.clone(), target, input.into(), key).step();
    if !model.is_empty() {
        call = call.model(model);
    }
    if editor {
        for tool in proposal_tools() {
            call = call.with_tool(tool);
        }
    }
    call
}

/// Aborts a spawned piece of work when the workflow stops waiting for it (a run left
/// awaiting input drops its flow).
struct AbortOnDrop(tokio::task::JoinHandle<(Done, crate::runtime::Finished)>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `work` as its own task, so that it progresses while the workflow logs and applies
/// events, and returns a future of its outcome; or, `inline`, returns it to be polled by
/// the workflow itself.
fn spawned(ctx: &Ctx, work: Live, fallback: Done, inline: bool) -> Live {
    // Counted busy until it has first run, so the run never looks idle in between.
    let starting = crate::runtime::Starting::new(&ctx.run);
    let work = tracing::Instrument::in_current_span(starting.handing_over(work));
    if inline {
        // A panic in the work ends the piece as a lost one, as a spawned task's would.
        let work = std::panic::AssertUnwindSafe(work).catch_unwind();
        return Box::pin(async move { work.await.map_or(fallback, |(done, _finished)| done) });
    }
    let mut guard = AbortOnDrop(tokio::spawn(work));
    Box::pin(async move {
        // The piece counts as live work until its outcome is read here (`_finished`).
        match (&mut guard.0).await {
            Ok((done, _finished)) => done,
            Err(_) => fallback,
        }
    })
}

fn lost() -> FlowError {
    FlowError::CallInterrupted {
        handle: None,
        message: "the step's task stopped without a result".into(),
    }
}

/// Returns the key of step `step`'s call.
fn step_key(step: &str) -> String {
    format!("wf:{step}")
}

/// Returns the id of the piece of work `action` launches, as [`Done::id`] gives it.
fn piece_of(action: &Action) -> String {
    match action {
        Action::Start(s) => format!("step:{}", s.step),
        Action::AskDecision(d) => format!("decision:{}", d.proposal),
        Action::OfferRepair(r) => format!("repair:{}:{}", r.step, r.editor),
    }
}

fn launch(ctx: &Ctx, action: Action, model: &str, inline: bool) -> Live {
    match action {
        Action::Start(s) => {
            let m = s.model.clone().unwrap_or_else(|| model.to_owned());
            // Made a future now: the piece holds the call's future alone, not the call too.
            let call = call_of(ctx, &s.target, s.options, s.input, step_key(&s.step), s.editor, &m)
                .into_future();
            let step = s.step;
            let fallback = Done::Step { step: step.clone(), res: Err(lost()) };
            spawned(
                ctx,
                Box::pin(async move { Done::Step { step, res: call.await } }),
                fallback,
                inline,
            )
        }
        Action::AskDecision(d) => {
            let asker = ctx.clone();
            let proposal = d.proposal;
            let fallback = Done::Decision { proposal, res: Err(lost()) };
            spawned(
                ctx,
                Box::pin(async move {
                    let key = format!("wf-decision-{proposal}");
                    let res = asker
                        .ask_full(&d.question, crate::AskSchema::Bool, &[], &d.reason, &key)
                        .await;
                    Done::Decision { proposal, res }
                }),
                fallback,
                inline,
            )
        }
        Action::OfferRepair(r) => {
            let key = format!("wf-repair:{}:{}", r.step, r.editor);
            let call = call_of(ctx, &r.editor, None, r.input, key, true, model).into_future();
            let (step, editor) = (r.step, r.editor);
            let fallback =
                Done::Repair { step: step.clone(), editor: editor.clone(), res: Err(lost()) };
            spawned(
                ctx,
                Box::pin(async move { Done::Repair { step, editor, res: call.await } }),
                fallback,
                inline,
            )
        }
    }
}

fn proposals(
    result: &CallResult,
    from: &EditorCall,
    kind_of: &dyn Fn(&str) -> TargetKind,
) -> Vec<Event> {
    let calls =
        result.outputs.get("tool_calls").and_then(Value::as_array).cloned().unwrap_or_default();
    calls
        .iter()
        .filter_map(|c| {
            let tool = c.get("tool").and_then(Value::as_str)?;
            let v = c.get("value")?;
            let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            let proposal = match tool {
                "workflow_add_step" => {
                    let target = s("target");
                    let target_kind = kind_of(&target);
                    Proposal::AddStep {
                        step_id: s("step_id"),
                        target,
                        input: v.get("input").filter(|i| !i.is_null()).cloned(),
                        after: v.get("after").and_then(Value::as_array).map(|a| {
                            a.iter().filter_map(Value::as_str).map(str::to_owned).collect()
                        }),
                        reason: s("reason"),
                        options: v.get("options").and_then(Value::as_object).cloned(),
                        target_kind,
                    }
                }
                "workflow_cancel_step" => {
                    Proposal::CancelStep { step_id: s("step_id"), reason: s("reason") }
                }
                _ => return None,
            };
            Some(Event::Proposal { from: from.clone(), proposal })
        })
        .collect()
}

/// Returns a step's answer, taken out of its result: a tool's value (its objects made no
/// larger than their keys: the scheduler keeps it to the end, and an object parsed from a
/// tool server's reply keeps the room it grew), else the answer's text.
fn answer_of(r: CallResult) -> Value {
    if r.kind == CallKind::Tool {
        crate::compact_json::compact(r.value)
    } else {
        Value::String(r.answer)
    }
}

fn events_of(done: Done, kind_of: &dyn Fn(&str) -> TargetKind) -> Result<Vec<Event>, FlowError> {
    Ok(match done {
        Done::Step { step, res: Ok(mut r) } => {
            let mut events = proposals(&r, &EditorCall::Step { step: step.clone() }, kind_of);
            events.push(Event::Started { step: step.clone(), handle: r.handle.0.to_string() });
            let model = (!r.model.is_empty()).then(|| std::mem::take(&mut r.model));
            let state = (!r.workflow_state.is_null()).then(|| r.workflow_state.take());
            events.push(Event::Finished { step, answer: answer_of(r), model, state });
            events
        }
        Done::Step { step, res: Err(err) } => {
            let mut events = Vec::new();
            if let Some(h) = err.handle() {
                events.push(Event::Started { step: step.clone(), handle: h.0.to_string() });
            }
            if matches!(err, FlowError::CallCancelled { .. }) {
                events.push(Event::Cancelled { step });
            } else {
                events.push(Event::Failed { step, error: err.to_string() });
            }
            events
        }
        Done::Decision { proposal, res } => {
            let approve = res?.as_bool().unwrap_or(false);
            vec![Event::Decision { proposal, approve }]
        }
        Done::Repair { step, editor, res } => match res {
            Ok(r) => {
                let mut events = proposals(
                    &r,
                    &EditorCall::Repair { step: step.clone(), editor: editor.clone() },
                    kind_of,
                );
                events.push(Event::RepairEnded { step, editor, error: None });
                events
            }
            Err(err) => vec![Event::RepairEnded { step, editor, error: Some(err.to_string()) }],
        },
    })
}

/// Returns the workflow of `workflow` run `run` as it stands in the journal, for a viewer:
/// `{"steps": [..], "edits": [..], "limits": {..}}`, each step as
/// [`clio_workflow::StepReport`] gives it (its status, the steps it waits on, the proposal
/// that added it) and each edit as [`clio_workflow::EditRecord`] does (a proposal waiting
/// for the person's decision included). The scheduler is rebuilt from the run's input and
/// the events it logged, as a resume rebuilds it; nothing runs and nothing is written.
/// `None` for a run of another flow, or one whose input holds no workflow. An event that
/// does not apply stops the rebuild there, and `problem` says which.
pub fn workflow_state(
    journal: &clio_journal::Journal,
    run: clio_journal::RunId,
) -> Result<Option<Value>, FlowError> {
    let Some(record) = journal.run(run)? else { return Ok(None) };
    let flow: Value = serde_json::from_str(&record.flow).unwrap_or(Value::Null);
    if flow.get("id").and_then(Value::as_str) != Some("workflow") {
        return Ok(None);
    }
    let mut input = record.input;
    let wf_value = input.as_object_mut().and_then(|m| m.remove("workflow")).unwrap_or(Value::Null);
    let Ok(workflow) = Workflow::from_value(wf_value) else { return Ok(None) };
    let Ok(settings) = WorkflowInput::parse(&input) else { return Ok(None) };
    // The top-level flow's logged values, by key (a nested workflow's keys carry a prefix).
    let logged: HashMap<String, Value> = journal
        .entries(run)?
        .into_iter()
        .filter_map(|e| {
            let key = e.identity.as_deref()?.strip_prefix("key:")?.to_owned();
            let result = e.payload.get("result").cloned().unwrap_or(Value::Null);
            Some((key, result))
        })
        .collect();
    // The person's settings the run recorded when it started.
    let person: Settings = logged
        .get("wf-limits")
        .and_then(|l| l.get("settings"))
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .unwrap_or_default();
    let config = RunConfig { settings: person, ..settings.run_config() };
    let implicit_allowed = config.editors.is_empty();
    let mut sched = Scheduler::new(workflow, config);
    // The steps' calls that ended with success, by key, with their results.
    let succeeded: HashMap<String, Value> = journal
        .tasks(run)?
        .into_iter()
        .filter(|t| t.status == clio_journal::TaskStatus::Succeeded)
        .filter_map(|t| Some((t.call?.strip_prefix("key:")?.to_owned(), t.result?)))
        .collect();
    let read = |item: &Value| -> Option<Event> {
        serde_json::from_value(item.get("event").cloned().unwrap_or(Value::Null)).ok()
    };
    // A viewer offers no editing tools: a proposal's target kind is not looked up.
    let kind_of = |_: &str| TargetKind::Other;
    let (mut batch, mut n) = (0u64, 0u64);
    let mut outstanding: Vec<String> = Vec::new();
    let mut problem = None;
    'log: loop {
        for action in sched.take_actions() {
            outstanding.push(piece_of(&action));
        }
        let events: Vec<Option<Event>> = if let Some(logged) =
            logged.get(&format!("wf-events-{batch}"))
        {
            batch += 1;
            let items =
                logged.get("events").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
            let done: std::collections::HashSet<&str> =
                items.iter().filter_map(|i| i.get("done").and_then(Value::as_str)).collect();
            outstanding.retain(|id| !done.contains(id.as_str()));
            items.iter().map(read).collect()
        } else if let Some(logged) = logged.get(&format!("wf-event-{n}")) {
            if let Some(done) = logged.get("done").and_then(Value::as_str) {
                outstanding.retain(|id| id != done);
            }
            vec![read(logged)]
        } else {
            // An implicit batch: every outstanding step, in launch order, from its result.
            let results: Option<Vec<(String, &Value)>> = implicit_allowed
                .then(|| {
                    outstanding
                        .iter()
                        .map(|id| {
                            let step = id.strip_prefix("step:")?;
                            Some((step.to_owned(), succeeded.get(&step_key(step))?))
                        })
                        .collect()
                })
                .flatten();
            let Some(results) = results.filter(|r| !r.is_empty()) else { break };
            outstanding.clear();
            let mut events = Vec::new();
            for (step, result) in results {
                let res = CallResult::from_json(result).ok_or(FlowError::CallFailed {
                    handle: None,
                    message: "the recorded result does not read back".into(),
                });
                events.extend(events_of(Done::Step { step, res }, &kind_of)?.into_iter().map(Some));
            }
            batch += 1;
            events
        };
        for event in events {
            n += 1;
            let applied = match event {
                Some(event) => sched.apply(event).map_err(|e| e.to_string()),
                None => Err("it does not read as an event".to_owned()),
            };
            if let Err(message) = applied {
                problem = Some(format!("event {n} of the log does not apply: {message}"));
                break 'log;
            }
        }
    }
    let json = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
    let mut map = Map::new();
    map.insert("steps".into(), json(serde_json::to_value(sched.snapshot())));
    map.insert("edits".into(), json(serde_json::to_value(sched.edits())));
    map.insert("limits".into(), json(serde_json::to_value(sched.limits())));
    map.insert("problem".into(), problem.map_or(Value::Null, Value::String));
    Ok(Some(Value::Object(map)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Publishes a view whenever the rhythm wants one over `events` single events, each
    /// view of `size` bytes; returns how many views and how many bytes it published.
    fn views_over(events: u64, size: u64) -> (u64, u64) {
        let mut rhythm = ViewRhythm::new(true);
        for _ in 0..events {
            rhythm.applied(1);
            if rhythm.wants() {
                rhythm.shown(size);
            }
        }
        (rhythm.published, rhythm.bytes)
    }

    /// A small workflow's views are bounded by their count (8, and one per 40 events); a
    /// large one's by their bytes, so that its views grow with its steps, not their square.
    #[test]
    fn views_are_bounded_by_count_and_by_bytes() {
        assert_eq!(views_over(3, 300), (3, 900));
        assert_eq!(views_over(400, 2_000).0, 8 + 400 / 40);
        // 9,500 steps, a view of about 70 bytes each: 665 KB a view.
        let (views, bytes) = views_over(9_500, 665_000);
        assert!(
            bytes <= VIEW_BYTES_FREE + 9_500 * VIEW_BYTES_PER_EVENT,
            "{views} views, {bytes} B"
        );
        assert!((10..=17).contains(&views), "{views} views");
        // Before the byte bound: 245 views, 163 MB.
        assert!(bytes < 12_000_000, "{bytes} B");
    }

    /// The editor's proposal tools are offered with schemas that arguments are checked
    /// against (as every built-in tool is, `every_built_in_tool_offers_a_real_schema`): an
    /// empty object or a wrong type never reaches the proposal.
    #[test]
    fn the_proposal_tools_offer_real_schemas() {
        let tools = proposal_tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["workflow_add_step", "workflow_cancel_step"]);
        for tool in &tools {
            let schema = &tool.schema;
            assert_eq!(schema["type"], "object", "{}: {schema}", tool.name);
            assert!(schema["properties"]["step_id"].is_object(), "{}: {schema}", tool.name);
            assert!(
                !crate::model::schema_problems(schema, &json!({ "type": "object" })).is_empty()
            );
            assert!(!crate::model::schema_problems(schema, &json!({ "step_id": 7 })).is_empty());
            assert!(
                !crate::model::schema_problems(schema, &json!({ "step_id": "a", "x": 1 }))
                    .is_empty()
            );
        }
        let add = &tools[0].schema;
        let good =
            json!({ "step_id": "check", "target": "reviewer", "after": ["a"], "reason": "r" });
        assert_eq!(crate::model::schema_problems(add, &good), Vec::<String>::new());
        assert!(!crate::model::schema_problems(add, &json!({ "step_id": "check" })).is_empty());
        let cancel = &tools[1].schema;
        let good = json!({ "step_id": "b", "reason": "not needed" });
        assert_eq!(crate::model::schema_problems(cancel, &good), Vec::<String>::new());
    }

    /// The view published as text is the view built as a value, as steps start and end.
    #[test]
    fn the_view_as_text_is_the_view_as_a_value() {
        let workflow = Workflow::from_value(json!({ "steps": [
            { "id": "a", "target": "t", "input": "x" },
            { "id": "b", "target": "u\"v", "after": ["a"] }
        ] }))
        .expect("workflow");
        let mut sched = Scheduler::new(workflow, RunConfig::default());
        let same = |sched: &Scheduler| {
            let text: Value = serde_json::from_str(view_text(sched).expect("text").get()).unwrap();
            assert_eq!(text, object([("workflow", view(sched))]));
        };
        same(&sched);
        let _ = sched.take_actions();
        sched.apply(Event::Started { step: "a".into(), handle: "7".into() }).expect("started");
        same(&sched);
        let finished =
            Event::Finished { step: "a".into(), answer: json!("ok"), model: None, state: None };
        sched.apply(finished).expect("finished");
        same(&sched);
    }

    /// What `WorkflowRun` writes, the flow reads back as the same run: the workflow and
    /// every setting, and nothing a caller left unset.
    #[test]
    fn a_workflow_run_reads_back_as_the_flows_input() {
        let workflow = Workflow::from_value(
            json!({ "steps": [{ "id": "a", "target": "t", "input": "$task" }] }),
        )
        .expect("workflow");
        let plain = WorkflowRun::new(workflow.clone(), "essay").input();
        assert_eq!(plain, json!({ "workflow": workflow.to_json(), "task": "essay" }));
        let run = WorkflowRun {
            editors: vec!["editor".into()],
            max_added_steps: Some(2),
            max_edit_rounds: Some(3),
            allowed_targets: Some(vec!["t".into()]),
            approve_edits: true,
            model: Some("m/x".into()),
            ..WorkflowRun::new(workflow.clone(), "essay")
        };
        let input = run.input();
        let read = WorkflowInput::parse(&input).expect("settings");
        assert_eq!(read.task, json!("essay"));
        assert_eq!(read.editors, Some(vec!["editor".to_owned()]));
        assert_eq!((read.max_added_steps, read.max_edit_rounds), (Some(2), Some(3)));
        assert_eq!(read.allowed_targets, Some(vec!["t".to_owned()]));
        assert_eq!((read.approve_edits, read.model.as_deref()), (Some(true), Some("m/x")));
        assert_eq!(Workflow::from_value(input["workflow"].clone()).expect("workflow"), workflow);
    }
}
