//! How a run was launched — its agent or flow, plugin folders, workspace and models — kept
//! beside the journal in `$CLIO_HOME/runs/<run>.launch.json`, so that `clio runs resume`,
//! `answer` and `cancel` rebuild the same runtime in another process.
//!
//! The journal records what the flow did; the launch file records what the CLI put
//! around it. A resume with a different plugin set is still refused by the runtime
//! (`FlowReplayMismatch`), so a launch file edited by hand cannot change a run silently.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clio_flow::{
    FlowSelection, Models, Registry, Runtime, RuntimeConfig, Worker, register_basic_tools,
    register_plugin,
};
use clio_journal::{Journal, JournalConfig, RunId};
use clio_plugins::{Plugin, Store, digest_folder, load_plugin};
use clio_spec::{AgentDef, AgentDefinitionError, AgentSpec};
use serde::{Deserialize, Serialize};

use crate::config::{HomeConfig, ModelsChoice};
use crate::error::CliError;
use crate::home::{Home, journal_error};

/// The names of the basic tools every runtime has.
const BASIC_TOOLS: [&str; 5] =
    ["read_file", "write_file", "list_files", "read_notes", "write_note"];

/// What the CLI put around a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Launch {
    /// The agent definition file the run is for, if any.
    pub(crate) agent: Option<PathBuf>,
    /// Plugin folders passed with `--plugin`.
    pub(crate) plugins: Vec<PathBuf>,
    /// The workspace folder.
    pub(crate) workspace: Option<PathBuf>,
    /// The `--models` file; when absent, config.toml's models, else `$CLIO_HOME/models.toml`
    /// (`crate::config`).
    pub(crate) models: Option<PathBuf>,
    /// The run's model (empty: config.toml's `default_model`, else the catalog's only model).
    pub(crate) model: String,
    /// The checksum of the agent's frozen spec when the run was launched (or when a change
    /// was last accepted): a resume refuses an agent file that freezes to another one.
    /// Absent for flow runs and in records written before runs were pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent_checksum: Option<String>,
    /// That frozen spec (its JSON form), kept so that a change can be named field by field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent_spec: Option<serde_json::Value>,
}

impl Launch {
    /// Makes every path absolute, so that the run can be resumed from any folder.
    pub(crate) fn absolute(mut self) -> Result<Launch, CliError> {
        let abs = |p: &Path| -> Result<PathBuf, CliError> {
            p.canonicalize()
                .with_context(|| format!("cannot find {}", p.display()))
                .map_err(CliError::user)
        };
        self.agent = self.agent.as_deref().map(abs).transpose()?;
        self.plugins = self.plugins.iter().map(|p| abs(p)).collect::<Result<_, _>>()?;
        self.workspace = self.workspace.as_deref().map(abs).transpose()?;
        self.models = self.models.as_deref().map(abs).transpose()?;
        Ok(self)
    }

    fn path(home: &Home, run: RunId) -> PathBuf {
        home.root().join("runs").join(format!("{}.launch.json", run.0))
    }

    /// Records the launch of `run`.
    pub(crate) fn save(&self, home: &Home, run: RunId) -> Result<(), CliError> {
        let path = Launch::path(home, run);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))
                .map_err(CliError::internal)?;
        }
        let text = serde_json::to_string_pretty(self).map_err(CliError::internal)?;
        std::fs::write(&path, text)
            .with_context(|| format!("cannot write {}", path.display()))
            .map_err(CliError::internal)
    }

    /// Pins the launch to `spec`, the agent's frozen spec: its checksum and content are
    /// recorded, so that a later resume notices an edited agent file.
    pub(crate) fn pin(&mut self, spec: &AgentSpec) {
        self.agent_checksum = Some(spec.checksum().to_owned());
        self.agent_spec = Some(spec.to_json());
    }

    /// Reads the launch of `run`.
    pub(crate) fn load(home: &Home, run: RunId) -> Result<Launch, CliError> {
        Launch::find(home, run)?.ok_or_else(|| {
            CliError::user(anyhow!(
                "run {} has no launch record at {}: it was not started by `clio run` or `clio workflow run`",
                run.0,
                Launch::path(home, run).display()
            ))
        })
    }

    /// Reads the launch of `run`, if it has one: a run written by another program (or by
    /// the journal library directly) has none, and that is no error for a command that
    /// only shows the run.
    pub(crate) fn find(home: &Home, run: RunId) -> Result<Option<Launch>, CliError> {
        let path = Launch::path(home, run);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => {
                return Err(CliError::user(
                    anyhow!(error).context(format!("cannot read {}", path.display())),
                ));
            }
        };
        serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("{} is not a launch record", path.display()))
            .map_err(CliError::user)
    }
}

/// Opens (creating if needed) the journal under `home`, marking work left running by a
/// dead process as interrupted.
pub(crate) fn open_journal(home: &Home) -> Result<Journal, CliError> {
    std::fs::create_dir_all(home.root())
        .with_context(|| format!("cannot create {}", home.root().display()))
        .map_err(CliError::user)?;
    let journal =
        Journal::open(home.journal_path(), JournalConfig::default()).map_err(journal_error)?;
    // The journal is locked by this process, so whatever another owner left running
    // belongs to a process that is gone.
    journal.reconcile(&[owner()]).map_err(journal_error)?;
    Ok(journal)
}

/// Names this process in the journal.
pub(crate) fn owner() -> String {
    format!("clio-{}", std::process::id())
}

/// Reads and freezes the agent definition in `path`: JSON when its extension says so,
/// else TOML. Errors name the file (a parse error already starts with it).
pub(crate) fn agent_spec(path: &Path) -> Result<AgentSpec, CliError> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {source}"))
        .map_err(CliError::user)?;
    let is_json = path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
    let def = if is_json {
        AgentDef::from_json(&text, &source)
    } else {
        AgentDef::from_toml(&text, &source)
    };
    def.and_then(|d| d.spec()).map_err(|error| match error {
        AgentDefinitionError::Parse { .. } => CliError::user(anyhow!("{error}")),
        _ => CliError::user(anyhow!("{source}: {error}")),
    })
}

/// Returns whether the plugin in `folder` is trusted at its current content.
fn trusted(store: &Store, plugin: &Plugin, folder: &Path) -> Result<bool, CliError> {
    let digest = digest_folder(folder).map_err(CliError::user)?;
    let entries = store.trusted().map_err(CliError::user)?;
    let version = plugin.version.to_string();
    Ok(entries.iter().any(|e| e.id == plugin.id && e.version == version && e.digest == digest))
}

/// Builds the runtime a launch describes: the journal, the built-in and basic tools, the
/// plugins (passed folders, and an agent's installed plugins), the models. The agent is
/// offered the basic tools, `run_code`, its plugins' tools and the built-in tools they
/// claim (`[[native_tools]]`), and the orchestration tools when it carries that plugin.
pub(crate) fn runtime(home: &Home, launch: &Launch, journal: Journal) -> Result<Runtime, CliError> {
    let workspace = clio_flow::Workspace::new(launch.workspace.clone());
    let mut registry = register_basic_tools(Registry::new(), workspace.clone());
    let run_code = clio_flow::RunCodeConfig {
        scratch: std::env::temp_dir(),
        ..clio_flow::RunCodeConfig::default()
    };
    registry = clio_flow::register_run_code(registry, run_code);
    registry = clio_flow::register_orchestration_tools(registry);
    let mut tool_names: Vec<String> = BASIC_TOOLS.iter().map(|t| (*t).to_owned()).collect();
    tool_names.push("run_code".to_owned());
    let store = Store::new(home.root());

    let mut folders: Vec<PathBuf> = launch.plugins.clone();
    let spec = launch.agent.as_deref().map(agent_spec).transpose()?;
    if let Some(spec) = &spec {
        let installed = store.list().map_err(CliError::user)?;
        for reference in spec.plugin_refs() {
            if clio_plugins::BUILTIN_PLUGINS.contains(&reference.id()) {
                continue;
            }
            // Already passed as a folder.
            if folders.iter().any(|f| f.file_name().is_some_and(|n| n == reference.id())) {
                continue;
            }
            let best = installed
                .iter()
                .filter(|p| p.id == reference.id())
                .filter(|p| reference.marketplace().is_none_or(|m| m == p.marketplace))
                .filter(|p| reference.accepts_version(&p.version))
                .max_by(|a, b| a.version.cmp(&b.version));
            let Some(best) = best else {
                return Err(CliError::user(anyhow!(
                    "agent {} needs plugin {reference}, which is not installed in {}",
                    spec.id(),
                    home.root().display()
                ))
                .hint("install it with `clio plugin install MARKETPLACE --agent AGENT_FILE`"));
            };
            folders.push(best.path.clone());
        }
    }
    for folder in &folders {
        let plugin = load_plugin(folder).map_err(|e| {
            CliError::user(anyhow!("{e}"))
                .hint(format!("`clio plugin check {}` lists every problem", folder.display()))
        })?;
        let is_trusted = trusted(&store, &plugin, folder)?;
        // Its own tools and the built-in ones it claims with `[[native_tools]]`, as a
        // subagent of the plugin gets them.
        tool_names.extend(plugin.tool_names().map(str::to_owned));
        registry = register_plugin(registry, &plugin, is_trusted, &workspace)
            .map_err(|e| CliError::user(anyhow!("{e}")))?;
    }
    if let Some(spec) = &spec {
        let prompt = [spec.role(), spec.description()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("\n\n");
        let mut worker = Worker::react(spec.id().to_owned(), prompt);
        // An agent that carries the orchestration plugin is offered its tools.
        if spec.plugin_refs().iter().any(|r| r.id() == "orchestration") {
            tool_names.extend(clio_flow::ORCHESTRATION_TOOLS.iter().map(|t| (*t).to_owned()));
        }
        // A tool named twice (a claimed basic tool, `run_code` or orchestration tool) is
        // offered once.
        let mut seen = std::collections::BTreeSet::new();
        tool_names.retain(|name| seen.insert(name.clone()));
        worker.tools = tool_names;
        worker.requires = *spec.requires();
        worker.model = spec.prefers().model.clone();
        registry = registry.this_agent(worker);
    }

    let settings = HomeConfig::load(home)?;
    let (models, default_model) =
        match ModelsChoice::pick(home, launch.models.as_deref(), &settings)? {
            Some(choice) => choice.build()?,
            None => (Models::default(), String::new()),
        };
    let model = if launch.model.is_empty() { default_model } else { launch.model.clone() };
    let mut config = RuntimeConfig {
        owner: owner(),
        workspace: launch.workspace.clone(),
        model,
        models,
        permissions: settings.tools.clone(),
        ..RuntimeConfig::default()
    };
    settings.apply_limits(&mut config);
    Ok(Runtime::new(journal, registry, config))
}

/// Returns the flow an agent runs.
pub(crate) fn agent_flow(spec: &AgentSpec) -> FlowSelection {
    spec.flow().clone()
}
