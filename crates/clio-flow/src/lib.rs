//! The async flow runtime (SPEC §7): the [`Flow`] trait, the flow context [`Ctx`], durable
//! tasks, replay from the journal, limits, cancellation, the react loop and the built-in
//! flows `react` and `workflow`. Models and their providers are clio-models', re-exported
//! here under the same names.
//!
//! - [`Runtime`] runs a flow selection on a [`clio_journal::Journal`] and a [`Registry`] of
//!   what calls can reach; [`Runtime::resume`], [`Runtime::answer`], [`Runtime::cancel`]
//!   and [`Runtime::replay`] are what the CLI calls.
//! - [`Ctx`] is a thin layer over [`Command`]s (call, start, step, ask, event, publish),
//!   each recorded in the journal with its result: every call is a task with its parent,
//!   and a run resumed after a crash runs its flow from the top, each command finding its
//!   record.
//! - The process side of tools is clio-tools', re-exported here: [`Sandbox`] confines the
//!   code that runs on the person's machine (`run_code` scripts, plugin executables),
//!   [`run_executable`] runs an executable tool, [`McpServers`] talks to MCP servers. This
//!   crate decides whether such code may run at all (the gate) and records what it did.
//! - [`FlowError`] holds the seed's typed outcomes (`CallFailed` … `GatherFailed`), each
//!   with `reason`, `handle`, `details` and `to_json`, and the runtime's own errors;
//!   [`FlowError::Nondeterminism`] is its own variant.
//!
//! Invariants: a command counts as done only once its record is durable; replayed code
//! reads time only through [`Ctx::now_ms`] (a crate-local `clippy.toml` forbids the clock
//! elsewhere); nothing recorded is submitted twice — an acceptance that cannot be confirmed
//! is `TaskStateUncertain`, and a side-effecting tool cut short by a crash is
//! `CallInterrupted`. This is the only library crate that spawns tasks but for the two
//! that clio-tools keeps per MCP server process; its public signatures use plain futures.
//!
//! What it does not do: read the environment (but `PATH`, to find the program a sandbox
//! must let run, as starting it would) or the home folder, print, or own a tokio
//! runtime (callers bring one).

mod binding;
mod builtin;
mod clock;
mod command;
mod compact_json;
mod council;
mod ctx;
mod error;
mod flow;
mod gate;
mod options;
mod orchestration;
mod plugin_bridge;
mod python_flow;
mod react;
mod registry;
mod result;
mod run_code;
mod runtime;
mod scope_task;
mod team;
#[cfg(test)]
mod test_json;
mod tool_settings;
mod workflow_flow;
mod workspace;

// The models live in their own crate; the modules of this crate name them as `crate::model::*`,
// as they did when the models were a module here.
use clio_models as model;

pub use crate::binding::{Binding, HostCallFuture, HostCallHandler};
pub use crate::builtin::builtin_flows;
pub use crate::clock::instant;
pub use crate::command::{AskSchema, Command};
pub use crate::council::CouncilFlow;
pub use crate::ctx::{Call, Ctx, Gather, ReturnWhen, Settled};
pub use crate::error::{FlowError, Mismatch, OptionProblem, RecordedCommand};
pub use crate::flow::{Flow, FlowFuture, FnFlow, Limits, reference, selection};
pub use crate::gate::{
    ContextualHook, HOOK_TIMEOUT, HookRun, HostHook, HostHookFuture, RuntimeHook,
};
pub use crate::options::{LIMIT_NAMES, OptionSpec, OptionType, check_options};
pub use crate::orchestration::{
    ORCHESTRATION_TOOLS, orchestration_tools, register_orchestration_tools, register_team_tools,
    run_leader, run_team,
};
pub use crate::plugin_bridge::{
    BASIC_TOOLS, WorkflowFileFlow, register_basic_tools, register_plugin,
    register_plugin_with_digest, register_plugin_with_mcp, run_executable, workflow_shape,
};
pub use crate::python_flow::{Pool as PythonPool, PythonFlow};
pub use crate::react::{COMPACT_FLOW, CompactFlow, ReactFlow, SEARCH_TOOLS};
pub use crate::registry::{
    ContextualHandler, Registry, Target, Tool, ToolFuture, ToolHandler, Worker, WorkerFuture,
    WorkerReply, WorkerRequest, WorkerRun,
};
pub use crate::result::{CallInput, CallKind, CallResult, FlowOutput, input_text};
pub use crate::run_code::{RunCodeConfig, register_run_code};
pub use crate::runtime::{
    Question, ReplayReport, ReplayVerdict, RunHandle, RunOutcome, RunReport, Runtime, RuntimeConfig,
};
pub use crate::team::{
    AgentContext, AgentEnv, AgentRecord, AskOptions, CancelSignal, EnabledConfig, LeaderSettings,
    ModelRunner, ReplyOutcome, RestrictedRouter, RouteCommand, RouteIssuer, RunOptions,
    RunnerFuture, SessionAllowlist, SessionSummary, SessionTree, StopReason, SubagentJob,
    SubagentOutcome, SubagentRunner, TEAM_TOOLS, TaskSpec, Team, TeamConfig, TeamError, TeamTool,
    TurnHold, WaitOptions, complete_input, rules as team_rules,
};
pub use crate::tool_settings::{ToolSettingsError, tool_env_from_toml, tool_settings_from_toml};
pub use crate::workflow_flow::{WorkflowFlow, WorkflowRun, workflow_state};
pub use crate::workspace::Workspace;
pub use clio_models::{
    ChosenModel, CutOffPolicy, FinishReason, Message, ModelCapabilities, ModelCatalog, ModelError,
    ModelFuture, ModelInfo, ModelProvider, ModelRequest, ModelResponse, ModelSource, Models,
    ModelsConfig, OpenAiConfig, OpenAiProvider, ProviderConfig, ProviderKind, RetryNotice,
    RetryObserver, RetryPolicy, RouterAllowlist, ScriptedProvider, ToolCall, ToolSpec, Usage,
    observe_retries, schema_problems,
};
pub use clio_spec::FlowSelection;
pub use clio_tools::{
    Access, Confined, ETC, ETC_NETWORK, ExecError, McpConfig, McpError, McpServers, McpTool,
    SANDBOX_PATH, Sandbox, SandboxError, SandboxMode, TOOL_OUTPUT_LIMIT, TOOL_TIMEOUT,
    find_program, program_prefixes,
};
pub use clio_tools::{EnvRule, SandboxLimits, is_locale, parse_bytes, show_bytes};

/// The crate README's example, run as a doctest so that it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
