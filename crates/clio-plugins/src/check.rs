//! `plugin check`: load a plugin folder or a whole marketplace the way an install does
//! and report every problem ([`check`] → [`Report`]).
//!
//! Besides what loading finds, the check looks across plugins: every plugin's and
//! agent's references must resolve (`requires_unresolved`); subagents may only name
//! plugins that exist and tools those plugins have; agents and subagents may only select
//! flows that some plugin provides (`flow_missing`; `react`, `workflow` and `council`
//! always exist). A plugin checked on its own cannot see its marketplace: a reference to
//! a plugin that is not built in is a `requires_external` warning, and the checks that
//! would need that plugin's declaration are skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use clio_spec::PluginRef;

use crate::builtin::{BUILTIN_FLOWS, builtin_plugins};
use crate::manifest::{MANIFEST_FILE, PLUGIN_DIR, read_plugin};
use crate::marketplace::{MARKETPLACE_FILE, read_marketplace};
use crate::plugin::Plugin;
use crate::problem::{Problem, ProblemCode, Report};
use crate::resolve::{Candidate, Index, resolve};

/// Checks the plugin folder or marketplace at `path` and reports every problem.
///
/// A folder with `.claude-plugin/marketplace.json` is checked as a marketplace, one
/// with `ai.iowarp.clio/` as a plugin; anything else is `not_a_plugin`.
pub fn check(path: &Path) -> Report {
    let mut problems = Vec::new();
    let mut flows = Vec::new();
    if path.join(MARKETPLACE_FILE).is_file() {
        check_marketplace(path, &mut problems, &mut flows);
    } else {
        check_plugin(path, &mut problems, &mut flows);
    }
    let mut report = Report::new(problems);
    report.flows = flows;
    report
}

/// Adds the Python flows of `plugin` (whose folder is `prefix` in the report) to `flows`.
fn list_python_flows(plugin: &Plugin, prefix: &str, flows: &mut Vec<crate::problem::FlowListing>) {
    for flow in &plugin.flows {
        if let crate::decl::FlowSource::Python { path, class, line, shape, options, .. } =
            &flow.source
        {
            flows.push(crate::problem::FlowListing {
                plugin: plugin.id.clone(),
                file: format!(
                    "{prefix}{}/{}",
                    crate::manifest::PLUGIN_DIR,
                    crate::decl::slash_path(path)
                ),
                line: *line,
                id: flow.id.clone(),
                class: class.clone(),
                description: flow.description.clone(),
                shape: shape.clone(),
                options: options.clone(),
            });
        }
    }
}

fn check_plugin(
    path: &Path,
    problems: &mut Vec<Problem>,
    flows: &mut Vec<crate::problem::FlowListing>,
) {
    let Some(plugin) = read_plugin(path, "", problems) else { return };
    list_python_flows(&plugin, "", flows);
    let mut index = Index::with_builtins();
    index.add(Candidate::of(crate::resolve::LOCAL, &plugin));
    let file = manifest_file("", &plugin);
    let mut external = BTreeSet::new();
    for reference in plugin.dependencies() {
        if index.candidates(reference.id()).is_empty() {
            external.insert(reference.id().to_owned());
            problems.push(problem(
                ProblemCode::RequiresExternal,
                &file,
                "requires",
                format!("{reference} is not built in; check the marketplace that provides it to resolve it"),
            ));
        }
    }
    let known: Vec<&Plugin> = vec![&plugin];
    let ctx = Cross { index: &index, plugins: known, builtins: builtin_plugins(), external };
    ctx.check_plugin(&plugin, &file, problems);
}

fn check_marketplace(
    path: &Path,
    problems: &mut Vec<Problem>,
    flows: &mut Vec<crate::problem::FlowListing>,
) {
    let Some(market) = read_marketplace(path, problems) else { return };
    let index = market.index();
    let plugins: Vec<&Plugin> = market.plugins.iter().map(|l| &l.plugin).collect();
    let ctx =
        Cross { index: &index, plugins, builtins: builtin_plugins(), external: BTreeSet::new() };
    for listed in &market.plugins {
        let prefix = format!("{}/", crate::decl::slash_path(&listed.source).trim_end_matches('/'));
        let file = manifest_file(&prefix, &listed.plugin);
        list_python_flows(&listed.plugin, &prefix, flows);
        ctx.check_plugin(&listed.plugin, &file, problems);
    }
    for (idx, agent) in market.agents.iter().enumerate() {
        let field = format!("agents[{idx}]");
        let refs = agent.spec.plugin_refs();
        if let Err(err) = resolve(&index, &format!("agent {}", agent.spec.id()), &refs) {
            problems.push(problem(
                ProblemCode::RequiresUnresolved,
                MARKETPLACE_FILE,
                &field,
                err.to_string(),
            ));
        }
        let flow = &agent.spec.flow().id;
        if !ctx.flow_exists(flow) {
            problems.push(problem(
                ProblemCode::FlowMissing,
                MARKETPLACE_FILE,
                &format!("{field}.flow"),
                format!(
                    "agent {} selects flow {flow:?}, which no plugin provides",
                    agent.spec.id()
                ),
            ));
        }
    }
}

/// Returns the file that declares `plugin`: its `plugin.toml`, or its `plugin.py` when it
/// is declared in Python (it has no manifest).
fn manifest_file(prefix: &str, plugin: &Plugin) -> String {
    let declared_in_python = plugin.folder.as_deref().is_some_and(|dir| {
        !dir.join(MANIFEST_FILE).exists() && dir.join(crate::python_decl::PLUGIN_PY).is_file()
    });
    let file = if declared_in_python { crate::python_decl::PLUGIN_PY } else { MANIFEST_FILE };
    format!("{prefix}{PLUGIN_DIR}/{file}")
}

fn problem(code: ProblemCode, file: &str, field: &str, message: String) -> Problem {
    Problem { code, file: file.to_owned(), line: None, field: field.to_owned(), message }
}

/// What the cross-plugin checks see: the index and every loaded plugin.
struct Cross<'a> {
    index: &'a Index,
    plugins: Vec<&'a Plugin>,
    // The built-in plugins, made once (not once per subagent).
    builtins: Vec<Plugin>,
    // Plugins referenced but not visible to this check (a plugin checked alone).
    external: BTreeSet<String>,
}

impl Cross<'_> {
    /// Returns the newest loaded or built-in plugin `id`.
    fn find(&self, id: &str) -> Option<&Plugin> {
        let loaded =
            self.plugins.iter().filter(|p| p.id == id).max_by(|a, b| a.version.cmp(&b.version));
        match loaded {
            Some(plugin) => Some(*plugin),
            None => self.builtins.iter().find(|p| p.id == id),
        }
    }

    fn flow_exists(&self, flow: &str) -> bool {
        BUILTIN_FLOWS.contains(&flow)
            || self.plugins.iter().any(|p| p.flows.iter().any(|f| f.id == flow))
    }

    fn check_plugin(&self, plugin: &Plugin, file: &str, problems: &mut Vec<Problem>) {
        let deps: Vec<PluginRef> =
            plugin.dependencies().filter(|r| !self.external.contains(r.id())).cloned().collect();
        if !deps.is_empty()
            && let Err(err) =
                resolve(self.index, &format!("{} {}", plugin.id, plugin.version), &deps)
        {
            problems.push(problem(
                ProblemCode::RequiresUnresolved,
                file,
                "requires",
                err.to_string(),
            ));
        }
        let requires_external = plugin.dependencies().any(|r| self.external.contains(r.id()));
        // The tools every subagent of this plugin has (its own, the built-in ones and those
        // of the plugins it requires), gathered once: per subagent, only the plugins that
        // subagent adds are looked at, so the check stays linear in tools and subagents.
        let mut base: BTreeSet<&str> = plugin.tool_names().collect();
        for b in &self.builtins {
            base.extend(b.tool_names());
        }
        for reference in plugin.dependencies() {
            if let Some(p) = self.find(reference.id()) {
                base.extend(p.tool_names());
            }
        }
        let mut by_plugin: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (idx, subagent) in plugin.subagents.iter().enumerate() {
            let field = format!("subagents[{idx}]");
            let mut unknown_plugins = requires_external;
            let mut carried: Vec<&Plugin> = Vec::new();
            for (p_idx, reference) in subagent.plugins.iter().enumerate() {
                let Ok(reference) = PluginRef::parse(reference) else { continue };
                let id = reference.id();
                if id == plugin.id {
                    continue;
                }
                if self.external.contains(id) {
                    unknown_plugins = true;
                    continue;
                }
                match self.find(id) {
                    Some(p) => carried.push(p),
                    None => {
                        problems.push(problem(
                            ProblemCode::SubagentUnknownPlugin,
                            file,
                            &format!("{field}.plugins[{p_idx}]"),
                            format!("subagent {} names plugin {id:?}, which is neither built in nor available", subagent.id),
                        ));
                        unknown_plugins = true;
                    }
                }
            }
            for p in &carried {
                by_plugin.entry(p.id.as_str()).or_insert_with(|| p.tool_names().collect());
            }
            let has = |tool: &str| {
                base.contains(tool)
                    || carried
                        .iter()
                        .any(|p| by_plugin.get(p.id.as_str()).is_some_and(|t| t.contains(tool)))
            };
            if !unknown_plugins {
                for (t_idx, tool) in subagent.tools.iter().flatten().enumerate() {
                    if !has(tool) {
                        problems.push(problem(
                            ProblemCode::SubagentUnknownTool,
                            file,
                            &format!("{field}.tools[{t_idx}]"),
                            format!(
                                "subagent {} names tool {tool:?}, which none of its plugins has",
                                subagent.id
                            ),
                        ));
                    }
                }
            }
            let flow = &subagent.flow.id;
            let own = plugin.flows.iter().any(|f| &f.id == flow);
            if !own && !requires_external && !self.flow_exists(flow) {
                problems.push(problem(
                    ProblemCode::FlowMissing,
                    file,
                    &format!("{field}.flow"),
                    format!(
                        "subagent {} selects flow {flow:?}, which no plugin provides",
                        subagent.id
                    ),
                ));
            }
        }
    }
}
