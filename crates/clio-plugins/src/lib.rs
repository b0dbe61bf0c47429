//! Plugin and pack declarations, plugin folders, marketplaces, the install and trust
//! store, dependency resolution and `plugin check` (SPEC §4, §11).
//!
//! - [`Plugin`] and [`Pack`] declare what a plugin brings: [`Tool`]s with their
//!   [`ToolOptions`], [`NativeTool`]s, [`Hook`]s, [`Subagent`]s, [`FlowDecl`]s, prompts,
//!   [`ScriptBinding`]s and [`McpServer`]s. Build one with [`Plugin::builder`] or read a
//!   folder with [`load_plugin`]; [`Plugin::describe`] gives it as JSON.
//! - [`resolve_permission`], [`order_hooks`] and [`merge_decisions`] are the pure rules the
//!   runtime applies to tool calls and hook answers; [`HookEvent`] and [`HookAnswer`] are
//!   the hook protocol's JSON.
//! - [`Marketplace`] reads `.claude-plugin/marketplace.json`; [`resolve`] picks versions
//!   over an [`Index`]; [`Store`] installs, lists, removes and trusts plugins under a
//!   home folder; [`check`] reports every problem of a folder or marketplace.
//!
//! Invariants: sync, file I/O only, never tokio, no clio dependency but `clio-spec`.
//! Deliberately not here: running tools, MCP servers and hooks, and asking the person;
//! that is clio-flow's job. Nothing reads `$CLIO_HOME`: callers pass paths.

mod builtin;
mod check;
mod decision;
mod decl;
mod files;
mod hooks;
mod manifest;
mod marketplace;
mod permission;
mod plugin;
mod problem;
pub mod python;
mod python_decl;
mod reader;
mod resolve;
mod schema;
mod store;
mod tree;

pub use builtin::{BUILTIN_FLOWS, BUILTIN_PLUGINS, builtin_plugins, core, memory, orchestration};
pub use check::check;
pub use decision::{
    DecisionError, DecisionKind, HOOK_SCHEMA_VERSION, HookAnswer, HookEvent, HookOutcome,
    HookResult, MergeError, Verdict, merge_decisions,
};
pub use decl::{
    Callers, FlowDecl, FlowSource, McpServer, NativeTool, Permission, Prompt, PromptFile,
    ScriptBinding, Subagent, Tool, ToolImpl, ToolOptions,
};
pub use hooks::{
    EventPower, HOOK_EVENTS, Hook, HookEventKind, HookHandler, HookOrderError, HookRef, order_hooks,
};
pub use manifest::{LoadError, MANIFEST_FILE, PLUGIN_DIR, load_plugin};
pub use marketplace::{Listed, ListedAgent, MARKETPLACE_FILE, Marketplace, MarketplaceError};
pub use permission::{
    CallersRule, PermissionRule, PermissionSettings, PermissionSource, ResolvedPermission,
    ToolFacts, resolve_callers, resolve_defer, resolve_permission, tool_pattern_matches,
};
pub use plugin::{DeclarationError, Pack, Plugin, PluginBuilder};
pub use problem::{FlowListing, Problem, ProblemCode, Report, Severity};
pub use python_decl::{DeclarationProblem, PLUGIN_PY, plugin_from_declaration};
pub use resolve::{
    Candidate, Index, LOCAL, Link, MAX_STEPS, Resolution, ResolveError, ResolveStats, Resolved,
    resolve, resolve_with_stats,
};
pub use schema::{SCHEMA_KEYWORDS, schema_problems, validate as validate_schema};
pub use store::{
    ChooseError, InstallError, Installed, Store, StoreError, TrustEntry, digest_folder,
    plugin_digest,
};

/// The crate README's example, run as a doctest so that it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
