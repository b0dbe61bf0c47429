//! The model catalog: every model a run may use, named `account/model`, with its
//! capabilities and the provider that serves it; and the choice of a child's model.
//!
//! The choice follows the seed's order: the call's `model`, else the flow's, else the
//! child's preference, else the run's model. The call's and the flow's models are
//! explicit choices: a model there that is unknown, not allowed, or cannot meet the
//! child's `Requires` is refused. The child's preference is advice (SDK reference,
//! `Prefers`): a preferred model that is unknown, not allowed or too weak is passed over
//! for the run's model, which is then held to the same requirements.

use std::fmt;
use std::path::Path;

use clio_spec::{Prefers, Requires};
use serde::{Deserialize, Serialize};

use crate::{ModelError, RouterAllowlist};

/// What a model can do, as the catalog records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelCapabilities {
    /// The model supports tool calling.
    pub tool_calling: bool,
    /// The model accepts images.
    pub vision: bool,
    /// The context window, in tokens; 0 when unknown.
    pub context_tokens: u64,
    /// The most output tokens of one answer; 0 when unknown.
    pub output_tokens: u64,
}

impl ModelCapabilities {
    /// Checks that these capabilities meet `requires`, naming `model` and the first unmet
    /// requirement (in the order `tool_calling`, `vision`, `context_tokens`,
    /// `output_tokens`) in the error.
    ///
    /// A token count the catalog leaves at 0 (unknown) meets no token requirement: a
    /// requirement is only met by a recorded capability.
    pub fn check(&self, model: &str, requires: &Requires) -> Result<(), ModelError> {
        let unmet = |requirement, required: String, offered: String| {
            Err(ModelError::RequirementUnmet {
                model: model.to_owned(),
                requirement,
                required,
                offered,
            })
        };
        if requires.tool_calling && !self.tool_calling {
            return unmet("tool_calling", "true".into(), "no tool calling".into());
        }
        if requires.vision && !self.vision {
            return unmet("vision", "true".into(), "no vision".into());
        }
        if requires.context_tokens > self.context_tokens {
            return unmet(
                "context_tokens",
                requires.context_tokens.to_string(),
                tokens_offered(self.context_tokens, "context"),
            );
        }
        if requires.output_tokens > self.output_tokens {
            return unmet(
                "output_tokens",
                requires.output_tokens.to_string(),
                tokens_offered(self.output_tokens, "output"),
            );
        }
        Ok(())
    }
}

fn tokens_offered(n: u64, what: &str) -> String {
    if n == 0 { format!("an unknown {what} size") } else { format!("{n} {what} tokens") }
}

/// One model of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelInfo {
    /// The account the model is reached through (`local`, `work`, `openai`…), the first
    /// half of its `account/model` name.
    pub account: String,
    /// The model's id in the catalog, the second half of its name.
    pub id: String,
    /// The name of the [`ModelProvider`](crate::ModelProvider) that serves it.
    pub provider: String,
    /// The name the provider's service knows the model by (`qwen2.5:7b`); empty means
    /// the same as `id`.
    #[serde(default)]
    pub api_model: String,
    /// What the model can do.
    #[serde(default)]
    pub capabilities: ModelCapabilities,
    /// Models to try, in order, when this one's provider fails (unreachable, timing out,
    /// answering with an error); each is held to the same requirements and allowlist.
    #[serde(default)]
    pub fallbacks: Vec<String>,
    /// A line for people (`clio models list`).
    #[serde(default)]
    pub description: String,
    /// The model writes its tool calls as text (`<tool_call>{"name": …, "arguments": …}
    /// </tool_call>`, as many small models do) instead of the API's `tool_calls`: such
    /// text is read as tool calls. Opt-in, as an answer may quote the form.
    #[serde(default)]
    pub text_tool_calls: bool,
    /// What a react loop does with an answer cut off at the output-token limit.
    #[serde(default)]
    pub on_cut_off: CutOffPolicy,
    /// The sampling temperature sent with every request that sets none.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// The sampling seed sent with every request that sets none.
    #[serde(default)]
    pub seed: Option<u64>,
}

/// What a react loop does when the model's answer reached the output-token limit
/// (`finish_reason: "length"`); either way the cut is recorded as a `model_cut_off` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CutOffPolicy {
    /// Ask the model to go on from where it stopped (within `max_iters`); the final
    /// answer is the parts joined.
    #[default]
    Continue,
    /// Fail the call with reason `output_cut_off`.
    Fail,
}

impl ModelInfo {
    /// Returns a model named `account/id` served by `provider`, with no capabilities.
    pub fn new(
        account: impl Into<String>,
        id: impl Into<String>,
        provider: impl Into<String>,
    ) -> ModelInfo {
        ModelInfo {
            account: account.into(),
            id: id.into(),
            provider: provider.into(),
            api_model: String::new(),
            capabilities: ModelCapabilities::default(),
            fallbacks: Vec::new(),
            description: String::new(),
            text_tool_calls: false,
            on_cut_off: CutOffPolicy::Continue,
            temperature: None,
            seed: None,
        }
    }

    /// Returns this model with `capabilities`.
    pub fn with_capabilities(mut self, capabilities: ModelCapabilities) -> ModelInfo {
        self.capabilities = capabilities;
        self
    }

    /// Returns the model's `account/model` name.
    pub fn name(&self) -> String {
        format!("{}/{}", self.account, self.id)
    }

    /// Returns the name to send to the provider's service.
    pub fn api_model(&self) -> &str {
        if self.api_model.is_empty() { &self.id } else { &self.api_model }
    }
}

/// Where a [`ChosenModel`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelSource {
    /// The call's `model`.
    Call,
    /// The flow's `model`.
    Flow,
    /// The child's preference (`Prefers`).
    ChildPreference,
    /// The run's model.
    Run,
}

impl fmt::Display for ModelSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModelSource::Call => "call",
            ModelSource::Flow => "flow",
            ModelSource::ChildPreference => "child preference",
            ModelSource::Run => "run",
        })
    }
}

/// The model chosen for a child, and which source named it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChosenModel {
    /// The catalog entry.
    pub model: ModelInfo,
    /// Which source named it.
    pub source: ModelSource,
}

/// Every model a run may use, in the order they were declared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelCatalog {
    // Invariant: names (`account/id`) are unique and every fallback names an entry.
    pub(super) models: Vec<ModelInfo>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    #[serde(default)]
    model: Vec<ModelInfo>,
}

impl ModelCatalog {
    /// Returns a catalog of `models`, checking that names are valid and unique and that
    /// every fallback is in the catalog.
    pub fn new(models: Vec<ModelInfo>) -> Result<ModelCatalog, ModelError> {
        for (index, model) in models.iter().enumerate() {
            for (part, value) in [("account", &model.account), ("id", &model.id)] {
                if let Some(problem) = name_problem(value) {
                    return Err(ModelError::InvalidCatalog {
                        model: model.name(),
                        problem: format!("{part} {problem}"),
                    });
                }
            }
            if model.provider.is_empty() {
                return Err(ModelError::InvalidCatalog {
                    model: model.name(),
                    problem: "provider is empty".into(),
                });
            }
            if models[..index].iter().any(|m| m.account == model.account && m.id == model.id) {
                return Err(ModelError::DuplicateModel { model: model.name() });
            }
        }
        let catalog = ModelCatalog { models };
        for model in &catalog.models {
            for fallback in &model.fallbacks {
                if catalog.get(fallback).is_err() {
                    return Err(ModelError::InvalidCatalog {
                        model: model.name(),
                        problem: format!("fallback `{fallback}` is not a single catalog model"),
                    });
                }
            }
        }
        Ok(catalog)
    }

    /// Parses a catalog from TOML `text` (a list of `[[model]]` tables, each a
    /// [`ModelInfo`]); `file` names the source in errors.
    pub fn from_toml(text: &str, file: &Path) -> Result<ModelCatalog, ModelError> {
        let parsed: CatalogFile = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
        ModelCatalog::new(parsed.model)
    }

    /// Returns the models in declaration order.
    pub fn models(&self) -> &[ModelInfo] {
        &self.models
    }

    /// Returns the model named `name`: `account/model`, or an id that only one account
    /// has; an empty name is [`ModelError::NoModelChosen`].
    pub fn get(&self, name: &str) -> Result<&ModelInfo, ModelError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(ModelError::NoModelChosen);
        }
        if let Some((account, id)) = name.split_once('/') {
            if let Some(model) = self.models.iter().find(|m| m.account == account && m.id == id) {
                return Ok(model);
            }
        } else {
            let mut matches = self.models.iter().filter(|m| m.id == name);
            if let Some(first) = matches.next() {
                let rest: Vec<&ModelInfo> = matches.collect();
                if rest.is_empty() {
                    return Ok(first);
                }
                return Err(ModelError::AmbiguousModel {
                    name: name.to_owned(),
                    candidates: std::iter::once(first).chain(rest).map(ModelInfo::name).collect(),
                });
            }
        }
        let known: Vec<String> = self.models.iter().map(ModelInfo::name).collect();
        Err(ModelError::UnknownModel {
            name: name.to_owned(),
            known: if known.is_empty() { "none".into() } else { known.join(", ") },
        })
    }

    /// Returns the model named `name` after checking that it is allowed and meets
    /// `requires`.
    pub fn check(
        &self,
        name: &str,
        requires: &Requires,
        allow: &RouterAllowlist,
    ) -> Result<&ModelInfo, ModelError> {
        let model = self.get(name)?;
        allow.check(model)?;
        model.capabilities.check(&model.name(), requires)?;
        Ok(model)
    }

    /// Chooses a child's model: `call`, else `flow`, else `child_preference`, else `run`
    /// (an empty string names nothing), held to `requires` and `allow`.
    ///
    /// An explicit choice (call, flow, run) that fails is an error:
    /// [`ModelError::RequirementUnmet`] (`model_requirement_unmet`),
    /// [`ModelError::NotAllowed`] or [`ModelError::UnknownModel`]. The child's preference
    /// is advice and is passed over when it does not fit; a preference for a provider
    /// alone picks the run's model if that provider serves it, else the first model of
    /// that provider that fits.
    pub fn choose_model(
        &self,
        call: &str,
        flow: &str,
        child_preference: &Prefers,
        run: &str,
        requires: &Requires,
        allow: &RouterAllowlist,
    ) -> Result<ChosenModel, ModelError> {
        let chosen = |model: &ModelInfo, source| ChosenModel { model: model.clone(), source };
        for (name, source) in [(call, ModelSource::Call), (flow, ModelSource::Flow)] {
            if !name.trim().is_empty() {
                return Ok(chosen(self.check(name, requires, allow)?, source));
            }
        }
        if !child_preference.model.trim().is_empty() {
            if let Ok(model) = self.check(&child_preference.model, requires, allow)
                && (child_preference.provider.is_empty()
                    || model.provider == child_preference.provider)
            {
                return Ok(chosen(model, ModelSource::ChildPreference));
            }
        } else if !child_preference.provider.is_empty() {
            let fits = |m: &&ModelInfo| {
                m.provider == child_preference.provider
                    && allow.check(m).is_ok()
                    && m.capabilities.check(&m.name(), requires).is_ok()
            };
            let run_model = self.get(run).ok().filter(fits);
            if let Some(model) = run_model.or_else(|| self.models.iter().find(fits)) {
                return Ok(chosen(model, ModelSource::ChildPreference));
            }
        }
        if !run.trim().is_empty() {
            return Ok(chosen(self.check(run, requires, allow)?, ModelSource::Run));
        }
        Err(ModelError::NoModelChosen)
    }
}

/// Returns why `part` is not a valid half of a model name, or `None`.
fn name_problem(part: &str) -> Option<&'static str> {
    if part.is_empty() {
        return Some("is empty");
    }
    if !part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':')) {
        return Some("may hold only ASCII letters, digits, `.`, `_`, `-` and `:`");
    }
    None
}

/// Returns the parse error of TOML `text` read from `file`, with its line and column.
pub(crate) fn toml_error(file: &Path, text: &str, err: &toml::de::Error) -> ModelError {
    let (line, column) = err.span().map_or((0, 0), |span| line_column(text, span.start));
    ModelError::Parse {
        file: file.to_path_buf(),
        line,
        column,
        message: clio_spec::toml_error_message(text, err),
    }
}

/// Returns the 1-based line and column of byte `offset` in `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), ModelError>;

    fn caps(tool_calling: bool, context_tokens: u64) -> ModelCapabilities {
        ModelCapabilities { tool_calling, vision: false, context_tokens, output_tokens: 4096 }
    }

    fn catalog() -> Result<ModelCatalog, ModelError> {
        ModelCatalog::new(vec![
            ModelInfo::new("local", "small", "ollama").with_capabilities(caps(false, 8_192)),
            ModelInfo::new("local", "qwen", "ollama").with_capabilities(caps(true, 32_768)),
            ModelInfo::new("work", "big", "openai").with_capabilities(caps(true, 128_000)),
            ModelInfo::new("home", "big", "vllm").with_capabilities(caps(true, 64_000)),
        ])
    }

    #[test]
    fn names_resolve_by_account_and_by_unique_id() -> TestResult {
        let c = catalog()?;
        assert_eq!(c.get("local/qwen")?.name(), "local/qwen");
        assert_eq!(c.get("qwen")?.name(), "local/qwen");
        let err = c.get("big").unwrap_err();
        assert_eq!(err.to_string(), "model id `big` is ambiguous; name one of: work/big, home/big");
        let err = c.get("nope/x").unwrap_err();
        assert_eq!(err.reason(), "model_unknown");
        Ok(())
    }

    #[test]
    fn choice_follows_call_flow_child_run() -> TestResult {
        let c = catalog()?;
        let none = Requires::default();
        let all = RouterAllowlist::default();
        let prefer = Prefers { model: "work/big".into(), ..Prefers::default() };
        let pick = |call, flow, child: &Prefers, run| {
            c.choose_model(call, flow, child, run, &none, &all).map(|m| (m.model.name(), m.source))
        };
        assert_eq!(pick("local/qwen", "home/big", &prefer, "local/small")?.1, ModelSource::Call);
        assert_eq!(pick("", "home/big", &prefer, "local/small")?.0, "home/big");
        assert_eq!(
            pick("", "", &prefer, "local/small")?,
            ("work/big".into(), ModelSource::ChildPreference)
        );
        assert_eq!(pick("", "", &Prefers::default(), "local/small")?.1, ModelSource::Run);
        assert_eq!(pick("", "", &Prefers::default(), ""), Err(ModelError::NoModelChosen));
        Ok(())
    }

    #[test]
    fn requirement_unmet_names_model_requirement_and_offer() -> TestResult {
        let c = catalog()?;
        let needs = Requires { tool_calling: true, ..Requires::default() };
        let err = c
            .choose_model("local/small", "", &Prefers::default(), "", &needs, &Default::default())
            .unwrap_err();
        assert_eq!(err.reason(), "model_requirement_unmet");
        assert_eq!(
            err.to_string(),
            "model `local/small` cannot meet the requirement tool_calling = true: it offers no tool calling"
        );
        let needs = Requires { context_tokens: 100_000, ..Requires::default() };
        let err = c.check("home/big", &needs, &Default::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "model `home/big` cannot meet the requirement context_tokens = 100000: it offers 64000 context tokens"
        );
        Ok(())
    }

    #[test]
    fn a_weak_preference_is_passed_over_for_the_run_model() -> TestResult {
        let c = catalog()?;
        let needs = Requires { tool_calling: true, ..Requires::default() };
        let prefer = Prefers { model: "local/small".into(), ..Prefers::default() };
        let m = c.choose_model("", "", &prefer, "local/qwen", &needs, &Default::default())?;
        assert_eq!((m.model.name().as_str(), m.source), ("local/qwen", ModelSource::Run));
        let prefer = Prefers { provider: "vllm".into(), ..Prefers::default() };
        let m = c.choose_model("", "", &prefer, "local/qwen", &needs, &Default::default())?;
        assert_eq!((m.model.name().as_str(), m.source), ("home/big", ModelSource::ChildPreference));
        Ok(())
    }

    #[test]
    fn catalog_toml_parses_and_reports_lines() -> TestResult {
        let text = "[[model]]\naccount = \"local\"\nid = \"qwen\"\nprovider = \"ollama\"\n\
                    api_model = \"qwen2.5:7b\"\ncapabilities = { tool_calling = true }\n";
        let c = ModelCatalog::from_toml(text, Path::new("models.toml"))?;
        assert_eq!(c.get("qwen")?.api_model(), "qwen2.5:7b");
        let err =
            ModelCatalog::from_toml("[[model]]\naccount = 3\n", Path::new("m.toml")).unwrap_err();
        assert!(err.to_string().starts_with("m.toml:2:"), "{err}");
        let err = ModelCatalog::new(vec![
            ModelInfo::new("a", "b", "p"),
            ModelInfo { fallbacks: vec!["x/y".into()], ..ModelInfo::new("a", "c", "p") },
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "catalog entry `a/c`: fallback `x/y` is not a single catalog model"
        );
        let err =
            ModelCatalog::new(vec![ModelInfo::new("a", "b", "p"), ModelInfo::new("a", "b", "q")])
                .unwrap_err();
        assert_eq!(err.to_string(), "model `a/b` is in the catalog twice");
        Ok(())
    }
}
