//! The error that stops a workflow before it runs: [`WorkflowError`] names the first problem,
//! the step and field it is in, and what would be valid.

use thiserror::Error;

/// The first problem found in a workflow, found when it is built or read.
///
/// Each variant names the step (by id, or as `steps[i]` when the id itself is the problem)
/// and the field, and its message says what would be valid.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WorkflowError {
    /// The text is not JSON.
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Parse {
        /// The 1-based line of the problem.
        line: usize,
        /// The 1-based column of the problem.
        column: usize,
        /// What the JSON reader found.
        message: String,
    },
    /// An object of the JSON names a key twice.
    #[error(
        "duplicate key `{key}` at line {line}, column {column}: an object may name each key once"
    )]
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// The 1-based line of the repeat.
        line: usize,
        /// The 1-based column of the repeat's opening quote.
        column: usize,
    },
    /// The JSON is neither an object with `steps` nor a list of steps.
    #[error("a workflow is an object with `steps` or a list of steps, found {found}")]
    NotAWorkflow {
        /// The kind of JSON value found.
        found: &'static str,
    },
    /// The workflow object has a field other than `steps`.
    #[error("unknown workflow field `{field}`: a workflow object has only `steps`")]
    UnknownWorkflowField {
        /// The unknown field.
        field: String,
    },
    /// The workflow has no steps.
    #[error("a workflow needs at least one step")]
    NoSteps,
    /// An entry of `steps` is not an object.
    #[error("steps[{index}] is not a step: a step is an object, found {found}")]
    StepNotObject {
        /// The position of the entry in `steps`.
        index: usize,
        /// The kind of JSON value found.
        found: &'static str,
    },
    /// A step has a field that steps do not have.
    #[error(
        "step `{step}` has unknown field `{field}`: valid fields are id, target, input, after, description, options, model"
    )]
    UnknownField {
        /// The step (its id, or `steps[i]`).
        step: String,
        /// The unknown field.
        field: String,
    },
    /// A step lacks a required field.
    #[error("step `{step}` has no `{field}`, which is required")]
    MissingField {
        /// The step (its id, or `steps[i]`).
        step: String,
        /// The missing field.
        field: &'static str,
    },
    /// A step's field has the wrong JSON type.
    #[error("step `{step}` field `{field}` must be {expected}, found {found}")]
    WrongType {
        /// The step (its id, or `steps[i]`).
        step: String,
        /// The field.
        field: &'static str,
        /// What the field must be.
        expected: &'static str,
        /// The kind of JSON value found.
        found: &'static str,
    },
    /// A step id does not follow the id rule.
    #[error(
        "invalid step id `{id}`: {problem}; ids are 1 to 64 lowercase letters, digits, `-` and `_`"
    )]
    InvalidId {
        /// The id as written.
        id: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A step is named `task`, which inputs use for the workflow's task.
    #[error("step id `task` is reserved for the workflow's task: choose another id")]
    ReservedId,
    /// Two steps have the same id.
    #[error("step id `{id}` is used twice: each step needs its own id")]
    DuplicateId {
        /// The repeated id.
        id: String,
    },
    /// A step's target is empty.
    #[error(
        "step `{step}` has an empty target: name a subagent, marketplace/agent, flow, tool or `self`"
    )]
    EmptyTarget {
        /// The step.
        step: String,
    },
    /// A step's target or model holds a control character (a NUL, a newline, an escape).
    #[error(
        "step `{step}` field `{field}` holds control character U+{code:04X} at character {position}: a {field} is a name without control characters"
    )]
    ControlCharacter {
        /// The step.
        step: String,
        /// The field: `target` or `model`.
        field: &'static str,
        /// The character's code point.
        code: u32,
        /// The 1-based position of the character in the field, in characters.
        position: usize,
    },
    /// A step waits on a step that does not exist.
    #[error("step `{step}` waits on `{after}`, which is not a step of this workflow")]
    UnknownDependency {
        /// The step.
        step: String,
        /// The id in its `after` that names no step.
        after: String,
    },
    /// Steps wait on each other in a cycle.
    #[error("steps wait on each other in a cycle: {}", cycle_text(steps))]
    Cycle {
        /// The steps on the cycle: each waits on the next, and the last waits on the first.
        steps: Vec<String>,
    },
    /// A step's input references a name that is neither `task` nor a step.
    #[error(
        "step `{step}` input references `${reference}`, which is neither `$task` nor a step; write `$$` for a literal `$`"
    )]
    UnknownReference {
        /// The step.
        step: String,
        /// The referenced name, without `$`.
        reference: String,
    },
    /// A step's input references a step it does not wait on, directly or transitively.
    #[error(
        "step `{step}` input references `${reference}`, which it does not wait on: add `{reference}` to its `after`"
    )]
    UnreachableReference {
        /// The step.
        step: String,
        /// The referenced step id.
        reference: String,
    },
    /// A step has options but its target is not a flow (checked when targets are known).
    #[error(
        "step `{step}` has options, but its target `{target}` is not a flow: only flows take options"
    )]
    OptionsOnNonFlow {
        /// The step.
        step: String,
        /// Its target.
        target: String,
    },
    /// A step names a target its agent cannot reach (checked when targets are known).
    #[error("step `{step}` names unknown target `{target}`")]
    UnknownTarget {
        /// The step.
        step: String,
        /// Its target.
        target: String,
    },
}

fn cycle_text(steps: &[String]) -> String {
    let mut parts: Vec<String> =
        steps.windows(2).map(|pair| format!("`{}` waits on `{}`", pair[0], pair[1])).collect();
    if let (Some(last), Some(first)) = (steps.last(), steps.first()) {
        parts.push(format!("`{last}` waits on `{first}`"));
    }
    parts.join(", ")
}
