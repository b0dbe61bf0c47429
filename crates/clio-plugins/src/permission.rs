//! Permission resolution (SPEC §4, §11): which permission a tool call has, who may call
//! a tool, and whether it is deferred — the pure rules the runtime applies before hooks.
//!
//! Order, first one that says something wins: the deployment's `tools.permissions`
//! setting, the person's rules, the tool's declared `permission`, the confirmation
//! policy; when all are unset, a read-only tool is allowed and any other asked. Within
//! the deployment's settings and within the person's rules, rules are evaluated deny →
//! ask → allow, so a matching deny always beats a matching allow of the same layer. A
//! deny hides the tool from the agent. A deployment's settings override the person's
//! rules in both directions, as SPEC §4 orders them.

use crate::decl::{Callers, Permission, ToolOptions};
use crate::hooks::glob;

/// A rule: tools whose name matches `tool` get `permission`.
///
/// `tool` is a tool name, or `plugin/tool`, where `*` matches any run of characters
/// (`write_*`, `files/*`, `*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionRule {
    /// The pattern.
    pub tool: String,
    /// The permission it gives.
    pub permission: Permission,
}

/// A deployment's `tools.callers` entry: tools matching `tool` may be called by `callers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallersRule {
    /// The pattern, as in [`PermissionRule::tool`].
    pub tool: String,
    /// Who may call matching tools.
    pub callers: Callers,
}

/// Everything above the tool's own declaration that decides its permission.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PermissionSettings {
    /// The deployment's `tools.permissions`.
    pub deployment: Vec<PermissionRule>,
    /// The deployment's `tools.callers`.
    pub deployment_callers: Vec<CallersRule>,
    /// The person's rules.
    pub person: Vec<PermissionRule>,
    /// The confirmation policy: a permission for every tool no one else decided.
    pub confirmation: Option<Permission>,
}

/// What resolution needs to know about a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolFacts<'a> {
    /// The plugin that brings the tool.
    pub plugin: &'a str,
    /// The tool's name.
    pub name: &'a str,
    /// Whether it only reads.
    pub read_only: bool,
    /// Its declared options.
    pub options: ToolOptions,
}

/// Which layer decided a permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionSource {
    /// A deployment setting.
    Deployment,
    /// A rule of the person's.
    Person,
    /// The tool's declared default.
    Tool,
    /// The confirmation policy.
    Confirmation,
    /// Nothing was set: read-only tools are allowed, others asked.
    ReadOnly,
}

/// A resolved permission and where it came from, for the permission receipts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPermission {
    /// The permission.
    pub permission: Permission,
    /// The layer that decided it.
    pub source: PermissionSource,
    /// The pattern of the deciding rule, when a rule decided.
    pub rule: Option<String>,
}

impl ResolvedPermission {
    /// Says whether the tool is hidden from the agent (a deny).
    pub fn hidden(&self) -> bool {
        self.permission == Permission::Deny
    }
}

fn matches(pattern: &str, tool: &ToolFacts<'_>) -> bool {
    tool_pattern_matches(pattern, tool.plugin, tool.name)
}

/// Says whether a tool pattern of the deployment's settings (`permissions`, `[tools] env`)
/// names tool `name` of plugin `plugin`: a pattern with a `/` matches the plugin and the
/// name apart (`materials/csv_*`), one without it the name alone; `*` matches any run of
/// characters. One rule for every setting keyed by tool, so they cannot disagree.
pub fn tool_pattern_matches(pattern: &str, plugin: &str, name: &str) -> bool {
    match pattern.split_once('/') {
        Some((plugin_pattern, name_pattern)) => {
            glob(plugin_pattern, plugin) && glob(name_pattern, name)
        }
        None => glob(pattern, name),
    }
}

/// Evaluates one layer's rules deny → ask → allow.
fn evaluate<'r>(rules: &'r [PermissionRule], tool: &ToolFacts<'_>) -> Option<&'r PermissionRule> {
    [Permission::Deny, Permission::Ask, Permission::Allow].into_iter().find_map(|permission| {
        rules.iter().find(|rule| rule.permission == permission && matches(&rule.tool, tool))
    })
}

/// Resolves the permission of `tool` under `settings`.
pub fn resolve_permission(
    settings: &PermissionSettings,
    tool: &ToolFacts<'_>,
) -> ResolvedPermission {
    let from_rule = |rule: &PermissionRule, source| ResolvedPermission {
        permission: rule.permission,
        source,
        rule: Some(rule.tool.clone()),
    };
    if let Some(rule) = evaluate(&settings.deployment, tool) {
        return from_rule(rule, PermissionSource::Deployment);
    }
    if let Some(rule) = evaluate(&settings.person, tool) {
        return from_rule(rule, PermissionSource::Person);
    }
    let plain = |permission, source| ResolvedPermission { permission, source, rule: None };
    if let Some(permission) = tool.options.permission {
        return plain(permission, PermissionSource::Tool);
    }
    if let Some(permission) = settings.confirmation {
        return plain(permission, PermissionSource::Confirmation);
    }
    let permission = if tool.read_only { Permission::Allow } else { Permission::Ask };
    plain(permission, PermissionSource::ReadOnly)
}

/// Resolves who may call `tool`: the deployment's first matching `tools.callers` entry,
/// else the tool's `callers`, else `both`.
pub fn resolve_callers(settings: &PermissionSettings, tool: &ToolFacts<'_>) -> Callers {
    settings
        .deployment_callers
        .iter()
        .find(|rule| matches(&rule.tool, tool))
        .map(|rule| rule.callers)
        .or(tool.options.callers)
        .unwrap_or(Callers::Both)
}

/// Resolves whether `tool` is deferred: its `defer`, else the plugin's default, else
/// CLIO's default (not deferred).
pub fn resolve_defer(plugin_default: Option<bool>, tool: &ToolFacts<'_>) -> bool {
    tool.options.defer.or(plugin_default).unwrap_or(false)
}
