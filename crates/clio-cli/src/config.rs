//! `$CLIO_HOME/config.toml`, the deployment's settings, and where a run's models come from.
//!
//! ```toml
//! default_model = "local/qwen"       # the run's model when --model is not given
//!
//! [[provider]]                       # providers and models: the schema of a models file
//! name = "local"                     # (docs/models.md)
//! kind = "openai"
//! base_url = "http://127.0.0.1:11434/v1"
//!
//! [[model]]
//! account = "local"
//! id = "qwen"
//! provider = "local"
//!
//! [tools]                            # permissions, callers, confirmation (docs/plugins.md)
//! permissions = { "write_*" = "ask" }
//! env = { "search/web" = ["OPENAI_API_KEY"] }   # clio's variables a tool may have
//!
//! [limits]                           # CLIO's own bounds, under every flow's limits
//! max_depth = 16
//! max_iters = 20
//! max_entries = 10000
//! compact_at = 0.8                   # a react loop compacts its conversation past this
//!                                    # share of its model's context_tokens
//!
//! [workflows]                        # the person's limits for every workflow: the
//! max_added_steps = 4                # tighter of these and a workflow's own bounds
//! max_edit_rounds = 2                # applies (recorded in the run's `wf-limits`)
//!
//! [sandbox]                          # how run_code scripts and plugin executables are
//! mode = "auto"                      # confined: auto | bwrap | landlock | off
//! network = false                    # tools that declare `network = true` may use it
//! read = ["/opt/python"]             # more folders code may read (absolute paths)
//! memory = "512MiB"                  # limits of every sandboxed program (docs/run_code.md):
//! processes = 32                     # a number, or "unlimited"
//! cpu_seconds = 600
//! file_size = "4GiB"
//! ```
//!
//! Models come from the first of: `--models FILE` (kept in the run's launch record, so a
//! resume reads the same file); config.toml's `[[provider]]` and `[[model]]` tables; the
//! models file `$CLIO_HOME/models.toml`. The source that wins is used whole: catalogs are
//! never merged, so a model's provider is always the one declared beside it.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clio_flow::{
    EnvRule, ModelError, ModelInfo, Models, ModelsConfig, ProviderConfig, RuntimeConfig, Sandbox,
    SandboxMode,
};
use clio_plugins::PermissionSettings;
use serde::Deserialize;

use crate::error::CliError;
use crate::home::Home;

/// The most journal entries a run may record (SPEC §7), the ceiling of `limits.max_entries`.
const MAX_ENTRIES: u64 = 10_000;

/// The settings of `$CLIO_HOME/config.toml`; all defaults when there is no such file.
#[derive(Debug, Default)]
pub(crate) struct HomeConfig {
    /// The file, for messages.
    path: PathBuf,
    /// Its providers, models and default model; `None` when it declares no model.
    models: Option<(ModelsConfig, String)>,
    /// The `[tools]` settings.
    pub(crate) tools: PermissionSettings,
    limits: Limits,
    sandbox: SandboxTable,
    /// `[workflows]`: Steps editors may add and Editing rounds, for every workflow.
    workflows: WorkflowsTable,
    /// `[tools] env`: the variables of `clio`'s environment each sandboxed program gets.
    tool_env: Vec<EnvRule>,
    /// `[sandbox]`'s memory, process, CPU-time and file-size limits.
    sandbox_limits: clio_flow::SandboxLimits,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    // Read by `Home::locate` (`home::journal_setting`), before anything else of the file.
    #[serde(default, rename = "journal")]
    _journal: Option<serde::de::IgnoredAny>,
    // Read by `shared::config` when a shared journal is opened.
    #[serde(default, rename = "postgres")]
    _postgres: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    default_model: String,
    #[serde(default)]
    provider: Vec<ProviderConfig>,
    #[serde(default)]
    model: Vec<ModelInfo>,
    // Read by `clio_flow::tool_settings_from_toml`, which names its own fields in errors.
    #[serde(default, rename = "tools")]
    _tools: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    sandbox: SandboxTable,
    #[serde(default)]
    workflows: WorkflowsTable,
}

/// The `[workflows]` table: the person's limits for every workflow (the seeds' Settings →
/// Execution & history → Workflows: "Steps editors may add" and "Editing rounds"); an
/// absent field leaves that limit to each workflow.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkflowsTable {
    max_added_steps: Option<u32>,
    max_edit_rounds: Option<u32>,
}

/// The `[sandbox]` table: how code that runs on this machine is confined; an absent field
/// keeps the default (`auto`, no network, nothing more to read).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SandboxTable {
    mode: Option<ModeName>,
    network: Option<bool>,
    read: Option<Vec<PathBuf>>,
    memory: Option<LimitValue>,
    processes: Option<LimitValue>,
    cpu_seconds: Option<LimitValue>,
    file_size: Option<LimitValue>,
}

/// A `[sandbox]` limit as written: a number, a size such as `"512MiB"`, or `"unlimited"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum LimitValue {
    Number(u64),
    Text(String),
}

/// A `[sandbox] mode` as written; serde names the allowed values when it is none of them.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ModeName {
    Auto,
    Bwrap,
    Landlock,
    Off,
}

impl From<ModeName> for SandboxMode {
    fn from(mode: ModeName) -> SandboxMode {
        match mode {
            ModeName::Auto => SandboxMode::Auto,
            ModeName::Bwrap => SandboxMode::Bwrap,
            ModeName::Landlock => SandboxMode::Landlock,
            ModeName::Off => SandboxMode::Off,
        }
    }
}

/// The `[limits]` table: CLIO's global bounds; an absent field keeps the default.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Limits {
    max_depth: Option<u64>,
    max_iters: Option<u64>,
    max_entries: Option<u64>,
    /// The share of a model's context window a conversation may fill before it is
    /// compacted: more than 0, at most 1.
    compact_at: Option<f64>,
}

impl HomeConfig {
    /// Reads `home`'s config.toml, checking every table; errors name the file, and the
    /// line and field where there is one.
    pub(crate) fn load(home: &Home) -> Result<HomeConfig, CliError> {
        let path = home.root().join("config.toml");
        let Some(text) = crate::input::read_if_present(&path)? else {
            return Ok(HomeConfig { path, ..HomeConfig::default() });
        };
        let hint = "see docs/models.md, \"config.toml\"";
        let file: ConfigFile = toml::from_str(&text).map_err(|e| {
            let start = e.span().map_or(0, |span| span.start);
            let (line, column) = line_column(&text, start);
            let message = clio_spec::toml_error_message(&text, &e);
            let at = path.display();
            let error = match key_before(&text, start) {
                Some(key) => anyhow!("{at}:{line}:{column}: {key}: {message}"),
                None => anyhow!("{at}:{line}:{column}: {message}"),
            };
            CliError::user(error).hint(hint)
        })?;
        let tools = clio_flow::tool_settings_from_toml(&text, &path)
            .map_err(|e| CliError::user(e).hint("see docs/plugins.md, Permissions"))?;
        check_limits(&path, &file.limits)?;
        check_sandbox(&path, &file.sandbox)?;
        let sandbox_limits = sandbox_limits(&path, &file.sandbox)?;
        let tool_env = clio_flow::tool_env_from_toml(&text, &path)
            .map_err(|e| CliError::user(e).hint("see docs/run_code.md, \"Environment\""))?;
        let models = if file.model.is_empty() {
            if let Some(provider) = file.provider.first() {
                return Err(CliError::user(anyhow!(
                    "{}: provider `{}` is declared but no [[model]] is: models come from one place, so add the models that use it here",
                    path.display(),
                    provider.name
                ))
                .hint(hint));
            }
            if !file.default_model.is_empty() {
                return Err(CliError::user(anyhow!(
                    "{}: default_model = {:?} names a model of this file's [[model]] tables, and it has none",
                    path.display(),
                    file.default_model
                ))
                .hint(hint));
            }
            None
        } else {
            let config = ModelsConfig::new(file.provider, file.model)
                .map_err(|e| CliError::user(named(&path, e)).hint(hint))?;
            if !file.default_model.is_empty() {
                config.catalog.get(&file.default_model).map_err(|e| {
                    CliError::user(anyhow!("{}: default_model: {e}", path.display())).hint(hint)
                })?;
            }
            Some((config, file.default_model))
        };
        Ok(HomeConfig {
            path,
            models,
            tools,
            limits: file.limits,
            sandbox: file.sandbox,
            workflows: file.workflows,
            tool_env,
            sandbox_limits,
        })
    }

    /// Returns the sandbox policy this file gives; private temporary folders go under the
    /// system's temporary folder.
    pub(crate) fn sandbox(&self) -> Sandbox {
        let table = &self.sandbox;
        let default = Sandbox::default();
        Sandbox {
            mode: table.mode.map_or(default.mode, SandboxMode::from),
            network: table.network.unwrap_or(default.network),
            read: table.read.clone().unwrap_or_default(),
            temp: std::env::temp_dir(),
            kept_check: kept_sandbox_check(),
            env: self.tool_env.clone(),
            limits: self.sandbox_limits,
            ..default
        }
    }

    /// Sets the limits this file gives on `config`.
    pub(crate) fn apply_limits(&self, config: &mut RuntimeConfig) {
        let Limits { max_depth, max_iters, max_entries, compact_at } = self.limits;
        config.compact_at = compact_at.unwrap_or(config.compact_at);
        config.max_depth = max_depth.unwrap_or(config.max_depth);
        config.max_iters = max_iters.unwrap_or(config.max_iters);
        config.max_entries = max_entries.unwrap_or(config.max_entries);
        let WorkflowsTable { max_added_steps, max_edit_rounds } = self.workflows;
        config.workflows = clio_workflow::Settings { max_added_steps, max_edit_rounds };
    }
}

/// Where a passed check of bubblewrap is kept for the next `clio` process
/// (`Sandbox::kept_check`): `clio/sandbox-check.json` in the user's cache folder
/// (`$XDG_CACHE_HOME`, else `~/.cache`), not in the home: whether bubblewrap works is a
/// fact of the machine and the user, not of one home. `None` without either variable.
fn kept_sandbox_check() -> Option<PathBuf> {
    let absolute =
        |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|path| path.is_absolute());
    let cache =
        absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache")))?;
    Some(cache.join("clio").join("sandbox-check.json"))
}

fn check_limits(path: &Path, limits: &Limits) -> Result<(), CliError> {
    if let Some(share) = limits.compact_at
        && !(share > 0.0 && share <= 1.0)
    {
        return Err(CliError::user(anyhow!(
            "{}: limits.compact_at = {share}: it must be more than 0 and at most 1 (the share of a model's context window a conversation may fill before it is compacted)",
            path.display()
        ))
        .hint("see docs/models.md, \"config.toml\""));
    }
    let fields = [
        ("max_depth", limits.max_depth, u64::MAX),
        ("max_iters", limits.max_iters, u64::MAX),
        ("max_entries", limits.max_entries, MAX_ENTRIES),
    ];
    for (field, value, most) in fields {
        let Some(value) = value else { continue };
        let problem = if value == 0 {
            "it must be at least 1".to_owned()
        } else if value > most {
            format!("it may be at most {most}")
        } else {
            continue;
        };
        return Err(CliError::user(anyhow!(
            "{}: limits.{field} = {value}: {problem}",
            path.display()
        ))
        .hint("see docs/models.md, \"config.toml\""));
    }
    Ok(())
}

/// Checks that every `[sandbox] read` path is absolute: a relative one would depend on the
/// folder clio happens to start in.
fn check_sandbox(path: &Path, sandbox: &SandboxTable) -> Result<(), CliError> {
    let relative = sandbox.read.iter().flatten().find(|p| !p.is_absolute());
    match relative {
        Some(read) => Err(CliError::user(anyhow!(
            "{}: sandbox.read: {} is not an absolute path",
            path.display(),
            read.display()
        ))
        .hint("see docs/run_code.md, \"The sandbox\"")),
        None => Ok(()),
    }
}

/// Reads `[sandbox]`'s limits: each a number (bytes for `memory` and `file_size`, which
/// also take a size such as `"512MiB"`), or `"unlimited"`; an absent one keeps its default
/// (`clio_flow::SandboxLimits::default`).
fn sandbox_limits(path: &Path, table: &SandboxTable) -> Result<clio_flow::SandboxLimits, CliError> {
    let default = clio_flow::SandboxLimits::default();
    let read = |field: &str, value: &Option<LimitValue>, fallback: Option<u64>, sized: bool| {
        let Some(value) = value else { return Ok(fallback) };
        let parsed = match value {
            LimitValue::Number(0) => None,
            LimitValue::Number(n) => Some(Some(*n)),
            LimitValue::Text(t) if t.trim() == "unlimited" => Some(None),
            LimitValue::Text(t) if sized => clio_flow::parse_bytes(t).filter(|n| *n > 0).map(Some),
            LimitValue::Text(_) => None,
        };
        parsed.ok_or_else(|| {
            let shown = match value {
                LimitValue::Number(n) => n.to_string(),
                LimitValue::Text(t) => format!("{t:?}"),
            };
            let allowed = if sized {
                "a number of bytes above 0, a size such as \"512MiB\" or \"4GiB\", or \"unlimited\""
            } else {
                "a number above 0, or \"unlimited\""
            };
            CliError::user(anyhow!(
                "{}: sandbox.{field} = {shown}: expected {allowed}",
                path.display()
            ))
            .hint("see docs/run_code.md, \"Limits\"")
        })
    };
    Ok(clio_flow::SandboxLimits {
        memory: read("memory", &table.memory, default.memory, true)?,
        processes: read("processes", &table.processes, default.processes, false)?,
        cpu_seconds: read("cpu_seconds", &table.cpu_seconds, default.cpu_seconds, false)?,
        file_size: read("file_size", &table.file_size, default.file_size, true)?,
    })
}

/// Where the models of a run or of `clio models list` come from.
#[derive(Debug)]
pub(crate) enum ModelsSource {
    /// A models file: the `--models` one, or `$CLIO_HOME/models.toml`.
    File(PathBuf),
    /// The `[[provider]]` and `[[model]]` tables of config.toml.
    Config(PathBuf),
}

impl ModelsSource {
    /// Returns the file the models are read from.
    pub(crate) fn path(&self) -> &Path {
        match self {
            ModelsSource::File(path) | ModelsSource::Config(path) => path,
        }
    }
}

/// The models a run may use, and where they come from.
pub(crate) struct ModelsChoice {
    /// The providers and the catalog, not yet built.
    pub(crate) config: ModelsConfig,
    /// The file they come from.
    pub(crate) source: ModelsSource,
    /// The run's model when none is named: config.toml's `default_model`, else the
    /// catalog's only model, else empty.
    pub(crate) default_model: String,
    /// A models file that is present but not read because a source before it won.
    pub(crate) shadowed: Option<PathBuf>,
}

impl ModelsChoice {
    /// Picks the models of `flag` (a `--models` file), else `config`'s, else `home`'s
    /// models.toml; `None` when there are none.
    pub(crate) fn pick(
        home: &Home,
        flag: Option<&Path>,
        config: &HomeConfig,
    ) -> Result<Option<ModelsChoice>, CliError> {
        let models_toml = home.root().join("models.toml");
        if let Some(path) = flag {
            let config = read_models_file(path)?;
            let default_model = only_model(&config);
            let source = ModelsSource::File(path.to_path_buf());
            return Ok(Some(ModelsChoice { config, source, default_model, shadowed: None }));
        }
        if let Some((models, default)) = &config.models {
            let default_model =
                if default.is_empty() { only_model(models) } else { default.clone() };
            return Ok(Some(ModelsChoice {
                config: models.clone(),
                source: ModelsSource::Config(config.path.clone()),
                default_model,
                shadowed: models_toml.exists().then_some(models_toml),
            }));
        }
        if !models_toml.exists() {
            return Ok(None);
        }
        let config = read_models_file(&models_toml)?;
        let default_model = only_model(&config);
        let source = ModelsSource::File(models_toml);
        Ok(Some(ModelsChoice { config, source, default_model, shadowed: None }))
    }

    /// Builds the providers, reading key variables from the environment; script paths are
    /// relative to the source file's folder.
    pub(crate) fn build(self) -> Result<(Models, String), CliError> {
        let path = self.source.path().to_path_buf();
        let base = path.parent().unwrap_or(Path::new("."));
        let models = self.config.build(base, |name| std::env::var(name).ok()).map_err(|e| {
            CliError::user(named(&path, e))
                .hint(format!("see {} and docs/models.md", path.display()))
        })?;
        Ok((models, self.default_model))
    }
}

fn read_models_file(path: &Path) -> Result<ModelsConfig, CliError> {
    let text = crate::input::read_file(path)?;
    ModelsConfig::from_toml(&text, path)
        .map_err(|e| CliError::user(named(path, e)).hint("see docs/models.md"))
}

fn only_model(config: &ModelsConfig) -> String {
    match config.catalog.models() {
        [only] => only.name(),
        _ => String::new(),
    }
}

/// Prefixes `error` with the file it is about, unless its message already starts with a
/// file.
fn named(path: &Path, error: ModelError) -> anyhow::Error {
    match error {
        ModelError::Parse { .. } | ModelError::Read { .. } => anyhow!("{error}"),
        _ => anyhow!("{}: {error}", path.display()),
    }
}

/// Returns the key whose value starts at byte `offset` of `text`, if a value starts there
/// (`tool_calling` in `{ tool_calling = "yes" }`), so that a type error names its field.
fn key_before(text: &str, offset: usize) -> Option<&str> {
    let before = text.get(..offset)?.trim_end().strip_suffix('=')?.trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '"'))
        .map_or(0, |i| i + 1);
    let key = &before[start..];
    (!key.is_empty()).then_some(key)
}

/// Returns the 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
