//! [`ModelsConfig`]: the models file (`[[provider]]` and `[[model]]` tables in TOML) that
//! the CLI reads to build [`Models`].
//!
//! The library never reads the environment: a provider names the variable that holds
//! its key (`api_key_env`), and [`ModelsConfig::build`] asks the caller's `env` function
//! for it. Script paths are relative to the folder the caller passes (the config file's).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::catalog::toml_error;
use crate::{
    ModelCatalog, ModelError, ModelInfo, Models, OpenAiConfig, OpenAiProvider, RetryPolicy,
    ScriptedProvider,
};

/// What kind of service a provider is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// An OpenAI-compatible chat-completions endpoint ([`OpenAiProvider`]).
    Openai,
    /// Answers from a script file ([`ScriptedProvider`]).
    Scripted,
}

/// One `[[provider]]` table of a models file.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The provider's name, as models' `provider` fields name it.
    pub name: String,
    /// What kind of service it is.
    pub kind: ProviderKind,
    /// The API root of an `openai` provider, such as `http://127.0.0.1:11434/v1`.
    #[serde(default)]
    pub base_url: String,
    /// The environment variable that holds the key of an `openai` provider.
    #[serde(default)]
    pub api_key_env: String,
    /// The key itself, written in the file; prefer `api_key_env`. Setting neither sends
    /// no key; setting both is an error.
    #[serde(default)]
    pub api_key: String,
    /// The longest the server may take to start answering (its first chunk, or a whole
    /// non-streamed answer), in seconds; 0 keeps the default (120).
    #[serde(default)]
    pub timeout_secs: u64,
    /// When streaming, the longest pause between two chunks, in seconds; 0 keeps the
    /// default (60).
    #[serde(default)]
    pub idle_timeout_secs: u64,
    /// Whether to ask for streamed answers; unset streams.
    #[serde(default)]
    pub stream: Option<bool>,
    /// The most attempts of one request; 0 keeps the default (100, within the deadline).
    #[serde(default)]
    pub max_attempts: u32,
    /// How long retries of one request may go on, in seconds; 0 keeps the default
    /// (600 s). An outage longer than this leaves the run interrupted, to resume.
    #[serde(default)]
    pub retry_deadline_secs: u64,
    /// The script file of a `scripted` provider, relative to the models file's folder.
    #[serde(default)]
    pub script: String,
}

impl fmt::Debug for ProviderConfig {
    // The key never appears in logs or error output.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key_env", &self.api_key_env)
            .field("api_key", &if self.api_key.is_empty() { "" } else { "<redacted>" })
            .field("timeout_secs", &self.timeout_secs)
            .field("idle_timeout_secs", &self.idle_timeout_secs)
            .field("stream", &self.stream)
            .field("max_attempts", &self.max_attempts)
            .field("retry_deadline_secs", &self.retry_deadline_secs)
            .field("script", &self.script)
            .finish()
    }
}

/// A parsed models file: providers and the model catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelsConfig {
    /// The providers, in file order.
    pub providers: Vec<ProviderConfig>,
    /// The models.
    pub catalog: ModelCatalog,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    provider: Vec<ProviderConfig>,
    #[serde(default)]
    model: Vec<ModelInfo>,
}

impl ModelsConfig {
    /// Parses a models file's TOML `text`; `file` names it in errors.
    ///
    /// Checks the catalog (see [`ModelCatalog::new`]), that provider names are unique, and
    /// that every model's provider is declared.
    pub fn from_toml(text: &str, file: &Path) -> Result<ModelsConfig, ModelError> {
        let parsed: ConfigFile = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
        ModelsConfig::new(parsed.provider, parsed.model)
    }

    /// Checks `providers` and `models` read from elsewhere (the `[[provider]]` and
    /// `[[model]]` tables of a file that holds other settings too) the way
    /// [`ModelsConfig::from_toml`] checks a models file's.
    pub fn new(
        providers: Vec<ProviderConfig>,
        models: Vec<ModelInfo>,
    ) -> Result<ModelsConfig, ModelError> {
        let catalog = ModelCatalog::new(models)?;
        for (index, provider) in providers.iter().enumerate() {
            if providers[..index].iter().any(|p| p.name == provider.name) {
                return Err(ModelError::Config {
                    provider: provider.name.clone(),
                    problem: "the provider is declared twice".into(),
                });
            }
        }
        for model in catalog.models() {
            if !providers.iter().any(|p| p.name == model.provider) {
                return Err(ModelError::UnknownProvider {
                    model: model.name(),
                    provider: model.provider.clone(),
                });
            }
        }
        Ok(ModelsConfig { providers, catalog })
    }

    /// Returns the environment variables whose values [`ModelsConfig::build`] will ask for.
    pub fn env_names(&self) -> Vec<&str> {
        self.providers
            .iter()
            .filter(|p| !p.api_key_env.is_empty())
            .map(|p| p.api_key_env.as_str())
            .collect()
    }

    /// Builds the providers and returns [`Models`]; `env` returns an environment
    /// variable's value (the CLI passes `std::env::var`), and `base_dir` is the folder
    /// script paths are relative to.
    ///
    /// A key variable that `env` does not know is an error naming the provider and the
    /// variable, so that a run does not fail later with a 401.
    pub fn build(
        self,
        base_dir: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Models, ModelError> {
        let mut models = Models::new(self.catalog);
        for p in self.providers {
            let problem =
                |problem: String| ModelError::Config { provider: p.name.clone(), problem };
            models = match p.kind {
                ProviderKind::Openai => {
                    if p.base_url.trim().is_empty() {
                        return Err(problem("an openai provider needs a base_url".into()));
                    }
                    if !p.api_key.is_empty() && !p.api_key_env.is_empty() {
                        return Err(problem("set api_key or api_key_env, not both".into()));
                    }
                    let api_key = if !p.api_key.is_empty() {
                        Some(p.api_key.clone())
                    } else if p.api_key_env.is_empty() {
                        None
                    } else {
                        Some(env(&p.api_key_env).ok_or_else(|| {
                            problem(format!(
                                "the environment variable {} that holds its key is not set",
                                p.api_key_env
                            ))
                        })?)
                    };
                    let mut config = OpenAiConfig::new(p.name.clone(), p.base_url.clone());
                    config.api_key = api_key;
                    if p.timeout_secs > 0 {
                        config.timeout = Duration::from_secs(p.timeout_secs);
                    }
                    if p.idle_timeout_secs > 0 {
                        config.idle_timeout = Duration::from_secs(p.idle_timeout_secs);
                    }
                    config.stream = p.stream.unwrap_or(true);
                    if p.max_attempts > 0 {
                        config.retry = RetryPolicy { max_attempts: p.max_attempts, ..config.retry };
                    }
                    if p.retry_deadline_secs > 0 {
                        config.retry = RetryPolicy {
                            deadline: Duration::from_secs(p.retry_deadline_secs),
                            ..config.retry
                        };
                    }
                    models.with_provider(Arc::new(OpenAiProvider::new(config)?))
                }
                ProviderKind::Scripted => {
                    if p.script.trim().is_empty() {
                        return Err(problem("a scripted provider needs a script file".into()));
                    }
                    let path: PathBuf = base_dir.join(&p.script);
                    let provider = ScriptedProvider::from_file(&path)?.named(p.name.clone());
                    models.with_provider(Arc::new(provider))
                }
            };
        }
        Ok(models)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[provider]]
name = "ollama"
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"

[[provider]]
name = "hosted"
kind = "openai"
base_url = "https://api.example.invalid/v1"
api_key_env = "HOSTED_KEY"
max_attempts = 2

[[model]]
account = "local"
id = "qwen"
provider = "ollama"
api_model = "qwen2.5:7b"
capabilities = { tool_calling = true, context_tokens = 32768 }
fallbacks = ["work/big"]

[[model]]
account = "work"
id = "big"
provider = "hosted"
"#;

    #[test]
    fn a_models_file_builds_with_keys_from_the_callers_env() -> Result<(), ModelError> {
        let config = ModelsConfig::from_toml(FILE, Path::new("models.toml"))?;
        assert_eq!(config.env_names(), ["HOSTED_KEY"]);
        let models = config
            .clone()
            .build(Path::new("."), |name| (name == "HOSTED_KEY").then(|| "sk-x".to_owned()))?;
        assert_eq!(models.catalog().get("qwen")?.api_model(), "qwen2.5:7b");
        assert!(models.provider("hosted").is_some() && models.provider("ollama").is_some());
        let err = config.build(Path::new("."), |_| None).err();
        assert_eq!(
            err.map(|e| e.to_string()),
            Some(
                "provider `hosted` is misconfigured: the environment variable HOSTED_KEY that \
                 holds its key is not set"
                    .to_owned()
            )
        );
        Ok(())
    }

    #[test]
    fn a_key_in_the_file_is_used_and_never_shown() -> Result<(), ModelError> {
        let text = "[[provider]]\nname = \"h\"\nkind = \"openai\"\nbase_url = \"http://h/v1\"\n\
                    api_key = \"sk-in-file\"\n";
        let config = ModelsConfig::from_toml(text, Path::new("m.toml"))?;
        assert!(!format!("{config:?}").contains("sk-in-file"));
        assert!(config.env_names().is_empty());
        config.clone().build(Path::new("."), |_| None)?;
        let mut both = config;
        both.providers[0].api_key_env = "K".into();
        let err = both.build(Path::new("."), |_| Some("x".into())).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("provider `h` is misconfigured: set api_key or api_key_env, not both")
        );
        Ok(())
    }

    #[test]
    fn models_must_name_declared_providers() {
        let text = "[[model]]\naccount = \"a\"\nid = \"b\"\nprovider = \"nope\"\n";
        let err = ModelsConfig::from_toml(text, Path::new("m.toml")).err();
        assert_eq!(
            err.map(|e| e.to_string()),
            Some("model `a/b` is served by provider `nope`, which is not registered".to_owned())
        );
        let err = ModelsConfig::from_toml(
            "[[provider]]\nname = \"x\"\nkind = \"grpc\"\n",
            Path::new("m.toml"),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.starts_with("m.toml:3:8: unknown variant `grpc`"), "{err}");
    }
}
