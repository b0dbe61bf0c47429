//! Marketplaces (SPEC §11): a folder with `.claude-plugin/marketplace.json` listing
//! plugins and agents, each at one or more versions, with `source` paths relative to the
//! marketplace folder. Loading one loads every listed plugin the way an install does.
//!
//! The format is Claude Code's, so its descriptive extras (`author`, `homepage`,
//! `license`, ...) are accepted and ignored; anything else is an unknown field. Agents
//! are CLIO's addition: `agents` entries have the same fields, and `source` names an
//! agent TOML or JSON file, or a folder holding `agent.toml`.

use std::path::{Component, Path, PathBuf};

use clio_spec::{AgentDef, AgentSpec, parse_plugin_version};
use semver::Version;

use crate::manifest::read_plugin;
use crate::plugin::{Plugin, id_problem};
use crate::problem::{Problem, ProblemCode, Severity, Sink, read_or_report};
use crate::reader::Fields;
use crate::resolve::{Candidate, Index};
use crate::tree::{Node, parse_json};

/// Where a marketplace's listing is, relative to its folder.
pub const MARKETPLACE_FILE: &str = ".claude-plugin/marketplace.json";

/// Claude Code's descriptive fields, accepted and ignored.
const IGNORED_ENTRY_FIELDS: &[&str] =
    &["author", "homepage", "repository", "license", "keywords", "category", "tags", "strict"];

/// A loaded marketplace.
#[derive(Debug, Clone, PartialEq)]
pub struct Marketplace {
    /// Its name, the `marketplace` of `marketplace/id` references.
    pub name: String,
    /// Who keeps it.
    pub owner: String,
    /// Its folder.
    pub root: PathBuf,
    /// Every listed plugin version, loaded.
    pub plugins: Vec<Listed>,
    /// Every listed agent, frozen.
    pub agents: Vec<ListedAgent>,
}

/// One listed plugin version.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The plugin's folder, relative to the marketplace.
    pub source: PathBuf,
    /// The listing's description.
    pub description: String,
    /// The plugin, as loaded from its folder.
    pub plugin: Plugin,
}

/// One listed agent.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedAgent {
    /// The agent's name in the listing.
    pub name: String,
    /// Its file, relative to the marketplace.
    pub source: PathBuf,
    /// The listing's description.
    pub description: String,
    /// The agent, frozen.
    pub spec: AgentSpec,
}

impl Marketplace {
    /// Loads the marketplace in `root`, refusing it when any problem is an error.
    pub fn load(root: &Path) -> Result<Marketplace, MarketplaceError> {
        if !root.join(MARKETPLACE_FILE).is_file() {
            return Err(MarketplaceError::NotAMarketplace { folder: root.to_path_buf() });
        }
        let mut problems = Vec::new();
        let market = read_marketplace(root, &mut problems);
        problems.retain(|p| p.severity() == Severity::Error);
        match market {
            Some(market) if problems.is_empty() => Ok(market),
            _ => Err(MarketplaceError::Invalid { folder: root.to_path_buf(), problems }),
        }
    }

    /// Returns the candidates this marketplace offers, with the built-in plugins.
    pub fn index(&self) -> Index {
        let mut index = Index::with_builtins();
        self.add_to(&mut index);
        index
    }

    /// Adds this marketplace's plugin versions to `index`.
    pub fn add_to(&self, index: &mut Index) {
        for listed in &self.plugins {
            index.add(Candidate::of(&self.name, &listed.plugin));
        }
    }

    /// Returns the listed plugin `id` at `version`.
    pub fn plugin(&self, id: &str, version: &Version) -> Option<&Listed> {
        self.plugins.iter().find(|l| l.plugin.id == id && &l.plugin.version == version)
    }
}

/// Why a marketplace cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarketplaceError {
    /// The folder has no `.claude-plugin/marketplace.json`.
    #[error("{} is not a marketplace: it has no .claude-plugin/marketplace.json", folder.display())]
    NotAMarketplace {
        /// The folder.
        folder: PathBuf,
    },
    /// The marketplace or a plugin in it has problems (the first is shown).
    #[error("marketplace {} is invalid: {}{}", folder.display(), problems.first().map(ToString::to_string).unwrap_or_default(), if problems.len() > 1 { format!(" (and {} more)", problems.len() - 1) } else { String::new() })]
    Invalid {
        /// The folder.
        folder: PathBuf,
        /// Every problem.
        problems: Vec<Problem>,
    },
}

/// One entry of `plugins` or `agents`, as read.
struct Entry {
    path: String,
    line: Option<u32>,
    name: Option<String>,
    source: Option<(String, PathBuf)>,
    version: Option<Version>,
    description: String,
}

/// Reads the marketplace in `root`, pushing every problem of it and of every listed
/// plugin and agent.
pub(crate) fn read_marketplace(root: &Path, problems: &mut Vec<Problem>) -> Option<Marketplace> {
    let file = MARKETPLACE_FILE.to_owned();
    let text = read_or_report(&root.join(MARKETPLACE_FILE), file.clone(), "marketplace", problems)?;
    let node = match parse_json(&text) {
        Ok((node, _)) => node,
        Err(err) => {
            problems.push(Problem {
                code: ProblemCode::ParseError,
                file,
                line: err.line,
                field: String::new(),
                message: err.message,
            });
            return None;
        }
    };
    let mut sink = Sink { file, problems };
    let mut f = Fields::open(&node, "", &mut sink)?;
    f.ignore(&["$schema", "metadata", "description", "version"]);
    let name = f.req_str(&mut sink, "name");
    if let Some(name) = &name {
        id_problem(&mut sink, "name", name);
    }
    let owner = f.get("owner").map(|owner| read_owner(&mut sink, owner)).unwrap_or_default();
    let plugin_entries: Vec<Entry> = f
        .table_list(&mut sink, "plugins")
        .into_iter()
        .filter_map(|(path, n)| read_entry(&mut sink, root, &path, n))
        .collect();
    let agent_entries: Vec<Entry> = f
        .table_list(&mut sink, "agents")
        .into_iter()
        .filter_map(|(path, n)| read_entry(&mut sink, root, &path, n))
        .collect();
    f.finish(&mut sink);

    let mut plugins: Vec<Listed> = Vec::new();
    for entry in plugin_entries {
        let Some((shown, source)) = entry.source else { continue };
        let folder = root.join(&source);
        let prefix = format!("{}/", shown.trim_end_matches('/'));
        let Some(plugin) = read_plugin(&folder, &prefix, sink.problems) else { continue };
        if let Some(name) = &entry.name
            && name != &plugin.id
        {
            sink.push(
                ProblemCode::NameMismatch,
                format!("{}.name", entry.path),
                entry.line,
                format!("listed as {name:?} but the plugin's id is {:?}", plugin.id),
            );
        }
        if let Some(version) = &entry.version
            && version != &plugin.version
        {
            sink.push(
                ProblemCode::VersionMismatch,
                format!("{}.version", entry.path),
                entry.line,
                format!("listed as {version} but the plugin's version is {}", plugin.version),
            );
        }
        if plugins.iter().any(|l| l.plugin.id == plugin.id && l.plugin.version == plugin.version) {
            sink.push(
                ProblemCode::ListedTwice,
                entry.path.clone(),
                entry.line,
                format!("{} {} is listed twice", plugin.id, plugin.version),
            );
            continue;
        }
        plugins.push(Listed { source, description: entry.description, plugin });
    }
    let mut agents = Vec::new();
    for entry in agent_entries {
        let Some((shown, source)) = entry.source.clone() else { continue };
        if let Some(agent) = read_agent(&mut sink, root, &entry, &shown, source) {
            agents.push(agent);
        }
    }
    Some(Marketplace { name: name?, owner, root: root.to_path_buf(), plugins, agents })
}

fn read_owner(sink: &mut Sink<'_>, node: &Node) -> String {
    if let crate::tree::Value::Str(owner) = &node.value {
        return owner.clone();
    }
    let Some(mut o) = Fields::open(node, "owner", sink) else { return String::new() };
    let name = o.req_str(sink, "name").unwrap_or_default();
    o.ignore(&["email", "url"]);
    o.finish(sink);
    name
}

fn read_entry(sink: &mut Sink<'_>, root: &Path, path: &str, node: &Node) -> Option<Entry> {
    let mut e = Fields::open(node, path, sink)?;
    e.ignore(IGNORED_ENTRY_FIELDS);
    let name = e.req_str(sink, "name");
    if let Some(name) = &name {
        id_problem(sink, &format!("{path}.name"), name);
    }
    let source = e.req_str(sink, "source").and_then(|source| {
        let relative = Path::new(&source);
        let escapes = source.is_empty()
            || relative.is_absolute()
            || relative.components().any(|c| {
                matches!(c, Component::ParentDir | Component::RootDir | Component::Prefix(_))
            });
        if escapes {
            sink.push(
                ProblemCode::SourceInvalid,
                format!("{path}.source"),
                None,
                format!("{source:?} must be a relative path inside the marketplace"),
            );
            return None;
        }
        if !root.join(relative).exists() {
            sink.push(
                ProblemCode::SourceMissing,
                format!("{path}.source"),
                None,
                format!("{source:?} does not exist"),
            );
            return None;
        }
        let shown = crate::decl::slash_path(relative);
        Some((shown, relative.to_path_buf()))
    });
    let version = e.str(sink, "version").and_then(|v| match parse_plugin_version(&v) {
        Ok(version) => Some(version),
        Err(err) => {
            sink.push(
                ProblemCode::InvalidVersion,
                format!("{path}.version"),
                None,
                format!("{v:?}: {err}"),
            );
            None
        }
    });
    let description = e.str(sink, "description").unwrap_or_default();
    let line = e.line;
    e.finish(sink);
    Some(Entry { path: path.to_owned(), line, name, source, version, description })
}

fn read_agent(
    sink: &mut Sink<'_>,
    root: &Path,
    entry: &Entry,
    shown: &str,
    source: PathBuf,
) -> Option<ListedAgent> {
    let mut file = root.join(&source);
    let mut shown = shown.to_owned();
    if file.is_dir() {
        file = file.join("agent.toml");
        shown = format!("{shown}/agent.toml");
    }
    let text = read_or_report(&file, shown.clone(), "agent", sink.problems)?;
    let def = if file.extension().is_some_and(|e| e == "json") {
        AgentDef::from_json(&text, &shown)
    } else {
        AgentDef::from_toml(&text, &shown)
    };
    let spec = def.and_then(|def| def.spec());
    let spec = match spec {
        Ok(spec) => spec,
        Err(err) => {
            let code = if matches!(err, clio_spec::AgentDefinitionError::Parse { .. }) {
                ProblemCode::ParseError
            } else {
                ProblemCode::AgentInvalid
            };
            let line = match &err {
                clio_spec::AgentDefinitionError::Parse { line, .. } => u32::try_from(*line).ok(),
                _ => None,
            };
            sink.problems.push(Problem {
                code,
                file: shown,
                line,
                field: String::new(),
                message: err.to_string(),
            });
            return None;
        }
    };
    if let Some(name) = &entry.name
        && name != spec.id()
    {
        sink.push(
            ProblemCode::NameMismatch,
            format!("{}.name", entry.path),
            entry.line,
            format!("listed as {name:?} but the agent's id is {:?}", spec.id()),
        );
    }
    if let Some(version) = &entry.version
        && version.to_string() != spec.version()
    {
        sink.push(
            ProblemCode::VersionMismatch,
            format!("{}.version", entry.path),
            entry.line,
            format!("listed as {version} but the agent's version is {}", spec.version()),
        );
    }
    Some(ListedAgent {
        name: entry.name.clone().unwrap_or_default(),
        source,
        description: entry.description.clone(),
        spec,
    })
}
