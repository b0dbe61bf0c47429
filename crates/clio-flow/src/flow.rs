//! The [`Flow`] trait (a procedure that calls things through [`Ctx`]), its [`Limits`], and
//! [`selection`], the Rust form of the seed's `Flow("campaign", max_cycles=5)`.

use std::future::Future;
use std::pin::Pin;

use clio_spec::FlowSelection;
use serde_json::{Map, Value, json};

use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::options::{OptionSpec, check_options};
use crate::result::FlowOutput;

/// The future a flow's [`forward`](Flow::forward) returns.
pub type FlowFuture<'a> = Pin<Box<dyn Future<Output = Result<FlowOutput, FlowError>> + Send + 'a>>;

/// The four flow-level limits; zero means no flow-level limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// How deeply flows may nest when this flow calls flows.
    pub max_depth: u64,
    /// How many of the run's calls run at once.
    pub max_concurrency: u64,
    /// How many agent, subagent, flow and react calls the run makes.
    pub max_model_calls: u64,
    /// Input plus output tokens of the run's children so far.
    pub budget_tokens: u64,
}

impl Limits {
    /// Returns these limits with any of the four given in `options` taking their place.
    pub fn with_options(self, options: &Map<String, Value>) -> Limits {
        let get = |k: &str, d: u64| options.get(k).and_then(Value::as_u64).unwrap_or(d);
        Limits {
            max_depth: get("max_depth", self.max_depth),
            max_concurrency: get("max_concurrency", self.max_concurrency),
            max_model_calls: get("max_model_calls", self.max_model_calls),
            budget_tokens: get("budget_tokens", self.budget_tokens),
        }
    }
}

/// A flow: a procedure that calls tools, subagents, agents and other flows through
/// [`Ctx`], where every call is a durable task.
///
/// `forward` must make the same calls in the same order when given the same results: put
/// every side effect and every value that could differ on a second run in
/// [`Ctx::step`].
pub trait Flow: Send + Sync + 'static {
    /// Returns the flow's id, used to select and to call it.
    fn id(&self) -> &str;

    /// Returns what the flow does and which options it takes, for someone choosing a flow.
    fn description(&self) -> &str {
        ""
    }

    /// Returns a railroad-grammar diagram of the flow's steps, shown when trust is asked.
    fn shape(&self) -> &str {
        ""
    }

    /// Returns the model the flow's calls run on when a call names none (empty: none).
    fn model(&self) -> &str {
        ""
    }

    /// Returns the flow's code version; a run resumed under another version is refused.
    fn version(&self) -> &str {
        "0.0.0"
    }

    /// Returns the flow's own limits, before options.
    fn limits(&self) -> Limits {
        Limits::default()
    }

    /// Returns the flow's declared options with their types and defaults.
    fn options(&self) -> Vec<OptionSpec> {
        Vec::new()
    }

    /// Checks `options` against [`options`](Flow::options) and returns them converted,
    /// with defaults filled; [`FlowError::OptionsInvalid`] names every bad option.
    fn checked_options(
        &self,
        options: &Map<String, Value>,
    ) -> Result<Map<String, Value>, FlowError> {
        check_options(self.id(), &self.options(), options)
    }

    /// Returns the selection of this flow with its default options, as `{id, options}`.
    fn reference(&self) -> Value {
        let options: Map<String, Value> =
            self.options().into_iter().map(|o| (o.name, o.default)).collect();
        json!({ "id": self.id(), "options": options })
    }

    /// Runs the procedure on `task`; its options are [`Ctx::options`].
    fn forward<'a>(&'a self, task: Value, ctx: Ctx) -> FlowFuture<'a>;
}

/// Returns the selection of flow `id` with `options` (a JSON object; anything else counts
/// as no options), the seed's `Flow("campaign", max_cycles=5)`.
pub fn selection(id: impl Into<String>, options: Value) -> FlowSelection {
    FlowSelection { id: id.into(), options: options.as_object().cloned().unwrap_or_default() }
}

/// Returns a selection as `{id, options}`.
pub fn reference(selection: &FlowSelection) -> Value {
    json!({ "id": selection.id, "options": Value::Object(selection.options.clone()) })
}

/// A flow written as a closure, for small flows, tests and examples.
pub struct FnFlow {
    id: String,
    version: String,
    model: String,
    limits: Limits,
    options: Vec<OptionSpec>,
    forward: Box<dyn Fn(Value, Ctx) -> FlowFuture<'static> + Send + Sync>,
}

impl FnFlow {
    /// Returns flow `id` whose `forward` is `f`.
    pub fn new<F, Fut>(id: impl Into<String>, f: F) -> FnFlow
    where
        F: Fn(Value, Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<FlowOutput, FlowError>> + Send + 'static,
    {
        FnFlow {
            id: id.into(),
            version: "0.0.0".into(),
            model: String::new(),
            limits: Limits::default(),
            options: Vec::new(),
            forward: Box::new(move |task, ctx| Box::pin(f(task, ctx))),
        }
    }

    /// Returns the flow at code version `version`.
    pub fn version(mut self, version: impl Into<String>) -> FnFlow {
        self.version = version.into();
        self
    }

    /// Returns the flow with `limits`.
    pub fn limits(mut self, limits: Limits) -> FnFlow {
        self.limits = limits;
        self
    }

    /// Returns the flow with `model` for calls that name none.
    pub fn model(mut self, model: impl Into<String>) -> FnFlow {
        self.model = model.into();
        self
    }

    /// Returns the flow with declared `options`.
    pub fn options(mut self, options: Vec<OptionSpec>) -> FnFlow {
        self.options = options;
        self
    }
}

impl Flow for FnFlow {
    fn id(&self) -> &str {
        &self.id
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
        (self.forward)(task, ctx)
    }
}
