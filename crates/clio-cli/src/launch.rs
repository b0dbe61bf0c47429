//! How a run was launched — its agent or flow, plugin folders, workspace and models — kept
//! in the run's own journal record (`RunRecord::launch`), so that `clio runs resume`,
//! `answer` and `replay` rebuild the same runtime in another process.
//!
//! The journal records what the flow did; the launch records what the CLI put around it.
//! It is written in the same transaction as the run (`Runtime::create_with_launch`): a
//! process killed at any moment leaves no run or a run that can be resumed, never a run
//! whose launch is lost. Builds before that kept it in `$CLIO_HOME/runs/<run>.launch.json`;
//! such files are still read for the runs they made, and no longer written. A resume with
//! a different plugin set is still refused by the runtime (`FlowReplayMismatch`), so a
//! launch edited by hand cannot change a run silently.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clio_flow::{
    FlowSelection, Models, Registry, Runtime, RuntimeConfig, Worker, register_basic_tools,
    register_plugin_with_digest,
};
use clio_journal::{Journal, RunId, RunRecord, RunUpdate};
use clio_plugins::{Plugin, Store, digest_folder, load_plugin};
use clio_spec::{AgentDef, AgentDefinitionError, AgentSpec};
use serde::{Deserialize, Serialize};

use crate::config::{HomeConfig, ModelsChoice};
use crate::error::{CliError, journal_error};
use crate::home::Home;

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
    /// `--no-input`: the run asks the person nothing; what would need an answer is refused.
    /// Kept so that every resume of the run keeps to it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) no_input: bool,
}

impl Launch {
    /// Makes every path absolute, so that the run can be resumed from any folder.
    pub(crate) fn absolute(mut self) -> Result<Launch, CliError> {
        let abs = |p: &Path| -> Result<PathBuf, CliError> {
            p.canonicalize()
                .with_context(|| format!("cannot find {}", p.display()))
                .map_err(CliError::user)
        };
        // An agent class in a Python file (`agents/reviewer.py:Reviewer`): its file made
        // absolute, the class kept.
        let agent = |p: &Path| -> Result<PathBuf, CliError> {
            match python_class(&p.to_string_lossy()) {
                Some((file, class)) => {
                    Ok(PathBuf::from(format!("{}:{class}", abs(Path::new(file))?.display())))
                }
                None => abs(p),
            }
        };
        self.agent = self.agent.as_deref().map(agent).transpose()?;
        self.plugins = self.plugins.iter().map(|p| abs(p)).collect::<Result<_, _>>()?;
        self.workspace = self.workspace.as_deref().map(abs).transpose()?;
        self.models = self.models.as_deref().map(abs).transpose()?;
        Ok(self)
    }

    /// Returns the file where builds before launches lived in the journal kept the launch
    /// of `run`; still read for the runs they made.
    fn legacy_path(home: &Home, run: RunId) -> PathBuf {
        home.root().join("runs").join(format!("{}.launch.json", run.0))
    }

    /// Returns the launch as stored in a run's record.
    pub(crate) fn to_json(&self) -> Result<serde_json::Value, CliError> {
        serde_json::to_value(self)
            .context("cannot encode the launch record")
            .map_err(CliError::internal)
    }

    /// Records the launch of `run` in its journal record, replacing the one there: used
    /// when a run goes on under a changed agent (`crate::pin`). The run's own record is
    /// updated in one write, so a crash leaves the old launch or the new one.
    pub(crate) fn save(&self, journal: &Journal, run: RunId) -> Result<(), CliError> {
        let update = RunUpdate { launch: Some(self.to_json()?), ..RunUpdate::default() };
        journal.update_run(run, update).map_err(journal_error)?;
        Ok(())
    }

    /// Pins the launch to `spec`, the agent's frozen spec: its checksum and content are
    /// recorded, so that a later resume notices an edited agent file.
    pub(crate) fn pin(&mut self, spec: &AgentSpec) {
        self.agent_checksum = Some(spec.checksum().to_owned());
        self.agent_spec = Some(spec.to_json());
    }

    /// Reads the launch of the run `record` holds; without one, the run cannot be rebuilt,
    /// and the error says where the launch was looked for and what is left to do.
    pub(crate) fn load(home: &Home, record: &RunRecord) -> Result<Launch, CliError> {
        let run = record.id.0;
        Launch::find(home, record)?.ok_or_else(|| {
            CliError::user(anyhow!(
                "run {run} cannot go on: its launch record (the agent, plugins, workspace and models it ran with) is neither in its journal record nor in {}, where earlier builds kept it",
                Launch::legacy_path(home, record.id).display()
            ))
            .hint(format!(
                "if that file was moved or deleted, put it back to continue the run; otherwise `clio runs cancel {run}` gives the run up"
            ))
            .hint(format!("`clio runs show {run}` shows what it did"))
        })
    }

    /// Reads the launch of the run `record` holds, if it has one: from the record itself,
    /// else from the file of an earlier build. A run written by another program (or by the
    /// journal library directly) has none, and that is no error for a command that only
    /// shows the run.
    pub(crate) fn find(home: &Home, record: &RunRecord) -> Result<Option<Launch>, CliError> {
        if let Some(value) = &record.launch {
            let run = record.id.0;
            return Launch::deserialize(value)
                .map(Some)
                .with_context(|| format!("the launch record of run {run} does not decode"))
                .map_err(|e| {
                    CliError::user(e).hint(format!(
                        "a newer build of clio wrote it and can resume the run; `clio runs cancel {run}` gives it up without it"
                    ))
                });
        }
        let path = Launch::legacy_path(home, record.id);
        let Some(text) = crate::input::read_if_present(&path)? else { return Ok(None) };
        if let Some(dup) = clio_spec::duplicate_json_key(&text) {
            return Err(CliError::user(anyhow!(
                "{} is not a launch record: {dup}",
                path.display()
            )));
        }
        serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("{} is not a launch record", path.display()))
            .map_err(CliError::user)
    }
}

/// Opens (creating if needed) the journal under `home`, marking work left running by a
/// dead process as interrupted.
pub(crate) fn open_journal(home: &Home) -> Result<Journal, CliError> {
    // A served command uses the owner's journal, whose running work is live.
    if let Some(held) = home.held() {
        return Ok(held.journal.clone());
    }
    home.writable_journal(&owner())
}

/// Names this process in the journal.
pub(crate) fn owner() -> String {
    format!("clio-{}", std::process::id())
}

/// Reads and freezes the agent definition in `path`: JSON when its extension says so,
/// `FILE.py:Class` a Python class (read from its syntax tree, never run), else TOML.
/// Errors name the file (a parse error already starts with it).
pub(crate) fn agent_spec(path: &Path) -> Result<AgentSpec, CliError> {
    let source = path.display().to_string();
    if let Some((file, class)) = python_class(&source) {
        return python_agent_spec(Path::new(file), class, &source);
    }
    let text = crate::input::read_file(path)?;
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

/// Splits `agents/reviewer.py:Reviewer` into the file and the class name.
pub(crate) fn python_class(text: &str) -> Option<(&str, &str)> {
    let (file, class) = text.rsplit_once(':')?;
    let is_name = class.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && class.chars().all(|c| c.is_alphanumeric() || c == '_');
    (file.ends_with(".py") && is_name).then_some((file, class))
}

/// Freezes the agent class `class` of the Python file `file`: the carried `clio_agent`
/// package's `_agent_decl.py` reads the class chain from the syntax tree (the file never
/// runs) into clio-spec's `AgentDef` JSON, which is frozen here as a TOML definition is, so
/// the checksum is `Class.spec()`'s in Python (docs/python-package.md).
fn python_agent_spec(file: &Path, class: &str, source: &str) -> Result<AgentSpec, CliError> {
    // Read first, so that a missing or unreadable file is reported as for TOML.
    crate::input::read_file(file)?;
    let package =
        clio_plugins::python::package_dir().map_err(|e| CliError::user(anyhow!("{e}")))?;
    let python = clio_plugins::python::interpreter();
    let output = std::process::Command::new(&python)
        .args(["-I", "-B"])
        .arg(package.join("clio_agent").join("_agent_decl.py"))
        .arg(file)
        .arg(class)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            CliError::user(anyhow!(
                "{source}: cannot start {} to read the agent class: {e}",
                python.display()
            ))
            .hint("install python3 3.10 or newer, or name one with CLIO_PYTHON")
        })?;
    let read: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|e| {
        CliError::user(anyhow!(
            "{source}: reading the agent class failed ({}): {e}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    })?;
    if let Some(first) = read["errors"].as_array().and_then(|errors| errors.first()) {
        let message = first["message"].as_str().unwrap_or("the agent class cannot be read");
        return Err(CliError::user(anyhow!("{message}")));
    }
    AgentDef::from_json(&read["agent"].to_string(), source)
        .and_then(|def| def.spec())
        .map_err(|error| CliError::user(anyhow!("{source}: {error}")))
}

/// Returns the folder of the installed, trusted plugin that declares flow `flow` (its
/// highest version), when none of the folders `passed` with `--plugin` declares it: a
/// person who installed and trusted a plugin need not name its folder to run its flow.
/// Folders that do not load are passed over here; a run that names them reports them.
pub(crate) fn installed_flow_provider(
    home: &Home,
    flow: &str,
    passed: &[PathBuf],
) -> Result<Option<PathBuf>, CliError> {
    let declares = |plugin: &Plugin| plugin.flows.iter().any(|f| f.id == flow);
    if passed.iter().filter_map(|f| load_plugin(f).ok()).any(|p| declares(&p)) {
        return Ok(None);
    }
    let store = Store::new(home.root());
    let mut best: Option<clio_plugins::Installed> = None;
    for installed in store.list().map_err(CliError::from)? {
        if !store.is_trusted(&installed).map_err(CliError::from)? {
            continue;
        }
        let Ok(plugin) = load_plugin(&installed.path) else { continue };
        if declares(&plugin) && best.as_ref().is_none_or(|b| installed.version > b.version) {
            best = Some(installed);
        }
    }
    let Some(best) = best else { return Ok(None) };
    let folder = best
        .path
        .canonicalize()
        .with_context(|| format!("cannot find {}", best.path.display()))
        .map_err(CliError::user)?;
    Ok(Some(folder))
}

/// Returns whether the plugin in `folder` is trusted at its current content, and that
/// content's digest.
fn trusted(store: &Store, plugin: &Plugin, folder: &Path) -> Result<(bool, String), CliError> {
    let digest = digest_folder(folder).map_err(CliError::user)?;
    let trusted = store
        .is_trusted_at(&plugin.id, &plugin.version.to_string(), &digest)
        .map_err(CliError::from)?;
    Ok((trusted, digest))
}

/// A plugin of a launch that is not trusted at its content now.
#[derive(Debug, Clone)]
pub(crate) struct Untrusted {
    pub(crate) id: String,
    pub(crate) version: String,
    /// The command that trusts it (`clio plugin trust DIR`, or `MARKETPLACE/ID VERSION` for
    /// an installed one).
    pub(crate) trust_with: String,
    /// Whether it is a folder passed with `--plugin` (which `--trust` vouches for).
    pub(crate) passed: bool,
}

/// Builds the runtime a launch describes on `journal` ([`prepare_runtime`]).
pub(crate) fn runtime(home: &Home, launch: &Launch, journal: Journal) -> Result<Runtime, CliError> {
    Ok(prepare_runtime(home, launch)?.0.with_journal(journal))
}

/// A runtime as a launch describes it, but for its journal: what [`prepare_runtime`]
/// reads and builds (settings, plugins and their digests, models) needs no journal, so a
/// command can open the journal meanwhile.
pub(crate) struct PreparedRuntime {
    registry: Registry,
    config: RuntimeConfig,
}

impl PreparedRuntime {
    /// Returns the runtime on `journal`.
    pub(crate) fn with_journal(self, journal: Journal) -> Runtime {
        Runtime::new(journal, self.registry, self.config)
    }
}

/// Prepares the runtime a launch describes, all but its journal: the built-in and basic
/// tools, the plugins (passed folders, and an agent's installed plugins), the models. The
/// agent is offered the basic tools, `run_code`, its plugins' tools and the built-in tools
/// they claim (`[[native_tools]]`), and the orchestration tools when it carries that
/// plugin. Returns the plugins that are not trusted beside it, which a new run that may not
/// ask (`--no-input`) refuses before it exists.
pub(crate) fn prepare_runtime(
    home: &Home,
    launch: &Launch,
) -> Result<(PreparedRuntime, Vec<Untrusted>), CliError> {
    prepare_runtime_vouching(home, launch, false)
}

/// As [`prepare_runtime`]; with `vouch_passed`, the plugin folders passed with `--plugin`
/// count as trusted (the person vouches for them with `--trust`) without being put on the
/// trust list yet: the command records that trust only once everything it checks before
/// a run exists has passed, so a refused command trusts nothing.
pub(crate) fn prepare_runtime_vouching(
    home: &Home,
    launch: &Launch,
    vouch_passed: bool,
) -> Result<(PreparedRuntime, Vec<Untrusted>), CliError> {
    let settings = HomeConfig::load(home)?;
    let mut sandbox = settings.sandbox();
    // No sandboxed program sees the home: its journal, its control socket's key, its token.
    sandbox.hidden.push(home.root().to_path_buf());
    let workspace =
        clio_flow::Workspace::new(launch.workspace.clone()).with_sandbox(sandbox.clone());
    let mut registry = register_basic_tools(Registry::new(), workspace.clone());
    let run_code = clio_flow::RunCodeConfig {
        scratch: std::env::temp_dir(),
        ..clio_flow::RunCodeConfig::default()
    };
    registry = clio_flow::register_run_code(registry, run_code);
    registry = clio_flow::register_orchestration_tools(registry);
    let mut tool_names: Vec<String> =
        clio_flow::BASIC_TOOLS.iter().map(|t| (*t).to_owned()).collect();
    tool_names.push("run_code".to_owned());
    let store = Store::new(home.root());

    // Each plugin folder, with how a person trusts it: a folder passed with `--plugin` by
    // its path, an installed plugin by its marketplace, id and version.
    let folders: Vec<(PathBuf, String)> = launch
        .plugins
        .iter()
        .map(|f| (f.clone(), format!("clio plugin trust {}", f.display())))
        .collect();
    let spec = launch.agent.as_deref().map(agent_spec).transpose()?;
    // The folders passed by hand, loaded once: they stand in for their ids.
    let mut loaded: Vec<(Plugin, PathBuf, String, bool)> = Vec::with_capacity(folders.len());
    for (folder, trust_with) in folders {
        let plugin = load_plugin(&folder).map_err(|e| {
            CliError::from(e)
                .hint(format!("`clio plugin check {}` lists every problem", folder.display()))
        })?;
        loaded.push((plugin, folder, trust_with, true));
    }
    if let Some(spec) = &spec {
        // Every other plugin the agent needs, transitively, chosen by the resolver among
        // the installed versions (one per plugin, every range on it satisfied).
        let given: Vec<Plugin> = loaded.iter().map(|(p, ..)| p.clone()).collect();
        let root = format!("agent {}", spec.id());
        let chosen =
            store.choose_for_run(&root, &spec.plugin_refs(), &given).map_err(|err| match err {
                clio_plugins::ChooseError::Resolve(err) => CliError::user(anyhow!(
                    "the plugins agent {} needs are not installed in {}: {err}",
                    spec.id(),
                    home.root().display()
                ))
                .hint("install them with `clio plugin install MARKETPLACE --agent AGENT_FILE`"),
                clio_plugins::ChooseError::Store(err) => CliError::from(err),
                clio_plugins::ChooseError::Load { path, source } => CliError::from(source)
                    .hint(format!("`clio plugin check {}` lists every problem", path.display())),
            })?;
        for best in chosen {
            let plugin = load_plugin(&best.path).map_err(CliError::from)?;
            let command =
                format!("clio plugin trust {}/{} {}", best.marketplace, best.id, best.version);
            loaded.push((plugin, best.path.clone(), command, false));
        }
    }
    let mut untrusted = Vec::new();
    for (plugin, folder, trust_with, passed) in &loaded {
        let (is_trusted, digest) = trusted(&store, plugin, folder)?;
        let is_trusted = is_trusted || (vouch_passed && *passed);
        if !is_trusted {
            untrusted.push(Untrusted {
                id: plugin.id.clone(),
                version: plugin.version.to_string(),
                trust_with: trust_with.clone(),
                passed: *passed,
            });
        }
        // Its own tools and the built-in ones it claims with `[[native_tools]]`, as a
        // subagent of the plugin gets them.
        tool_names.extend(plugin.tool_names().map(str::to_owned));
        registry = register_plugin_with_digest(registry, plugin, is_trusted, digest, &workspace)
            .map_err(CliError::from)?
            .trust_with(&plugin.id, trust_with.clone());
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
        // The agent's preferences choose its model as a subagent's do.
        // Unset is `None`, not the empty string.
        let set = |v: &String| (!v.trim().is_empty()).then(|| v.clone());
        worker.model = set(&spec.prefers().model);
        worker.provider = set(&spec.prefers().provider);
        worker.effort = set(&spec.prefers().effort);
        registry = registry.this_agent(worker);
    }

    let (models, default_model) =
        match ModelsChoice::pick(home, launch.models.as_deref(), &settings)? {
            Some(choice) => choice.build()?,
            None => (Models::default(), String::new()),
        };
    let model = if launch.model.is_empty() { default_model } else { launch.model.clone() };
    // A model named with --model must be in the catalog before any run uses it, so that a
    // typo is caught before a run exists (and a resume says at once what is missing).
    if !launch.model.is_empty() && models.catalog().get(&launch.model).is_err() {
        let known: Vec<String> =
            models.catalog().models().iter().map(|m| format!("{}/{}", m.account, m.id)).collect();
        let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
        return Err(CliError::user(anyhow::anyhow!(
            "--model {}: no such model in the catalog (known: {known})",
            launch.model
        ))
        .hint("`clio models list` shows the models and the file they come from; pass --models FILE to use another catalog"));
    }
    let mut config = RuntimeConfig {
        owner: owner(),
        workspace: launch.workspace.clone(),
        model,
        models,
        permissions: settings.tools.clone(),
        sandbox,
        // A person's yes to a trust question goes on the home's trust list, pinned to the
        // digest they were shown.
        trust_store: Some(store),
        interactive: !launch.no_input,
        ..RuntimeConfig::default()
    };
    settings.apply_limits(&mut config);
    Ok((PreparedRuntime { registry, config }, untrusted))
}

/// Returns the flow an agent runs.
pub(crate) fn agent_flow(spec: &AgentSpec) -> FlowSelection {
    spec.flow().clone()
}

#[cfg(test)]
mod tests {
    use clio_journal::RunStatus;
    use serde_json::json;

    use super::*;

    fn record(launch: Option<serde_json::Value>) -> RunRecord {
        RunRecord {
            id: RunId(4),
            flow: "f".into(),
            input: json!(null),
            input_digest: String::new(),
            fingerprint: String::new(),
            owner: String::new(),
            status: RunStatus::Interrupted,
            started_at_ms: 0,
            updated_at_ms: 0,
            finished_at_ms: None,
            answer: None,
            error: None,
            launch,
        }
    }

    /// The launch in the run's record wins over a file an earlier build left; the file is
    /// read only for a record without one; a record's launch that does not decode is an
    /// error that says how to give the run up.
    #[test]
    fn the_records_launch_comes_first_then_an_earlier_builds_file() {
        let root = std::env::temp_dir().join(format!("clio-launch-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("runs")).unwrap();
        let home = Home::locate(Some(&root), None).unwrap();
        let file = json!({"agent": "/old.toml", "plugins": [], "model": ""});
        std::fs::write(root.join("runs/4.launch.json"), file.to_string()).unwrap();

        let stored = json!({"agent": "/new.toml", "plugins": [], "model": "m"});
        let found = Launch::find(&home, &record(Some(stored))).unwrap().unwrap();
        assert_eq!((found.agent, found.model), (Some(PathBuf::from("/new.toml")), "m".into()));
        let found = Launch::find(&home, &record(None)).unwrap().unwrap();
        assert_eq!(found.agent, Some(PathBuf::from("/old.toml")));

        let foreign = record(Some(json!({"agent": "/a.toml", "sandbox": true})));
        let error = Launch::find(&home, &foreign).unwrap_err();
        assert!(error.hints[0].contains("`clio runs cancel 4`"), "{:?}", error.hints);

        std::fs::remove_file(root.join("runs/4.launch.json")).unwrap();
        assert!(Launch::find(&home, &record(None)).unwrap().is_none());
        let error = Launch::load(&home, &record(None)).unwrap_err();
        assert!(error.error.to_string().contains("runs/4.launch.json"), "{}", error.error);
        let _ = std::fs::remove_dir_all(&root);
    }
}
