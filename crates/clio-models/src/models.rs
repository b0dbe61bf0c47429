//! [`Models`]: the catalog plus the registered providers; the one door through which the
//! runtime sends a model request.
//!
//! Every request is checked against the router allowlist and the child's requirements
//! before it goes out, and so is every automatic fallback. Retries of one provider go to
//! the same model, provider and URL that were checked.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use clio_spec::Requires;

use crate::{
    FinishReason, ModelCapabilities, ModelCatalog, ModelError, ModelInfo, ModelProvider,
    ModelRequest, ModelResponse, RouterAllowlist, ScriptedProvider,
};

/// The model catalog and the providers that serve its models.
#[derive(Clone, Default)]
pub struct Models {
    catalog: ModelCatalog,
    providers: BTreeMap<String, Arc<dyn ModelProvider>>,
}

impl fmt::Debug for Models {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Models")
            .field("catalog", &self.catalog)
            .field("providers", &self.providers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Models {
    /// Returns `catalog` with no provider registered yet.
    pub fn new(catalog: ModelCatalog) -> Models {
        Models { catalog, providers: BTreeMap::new() }
    }

    /// Returns a catalog of one model, `offline/scripted`, served by `provider`: for tests,
    /// examples and the offline quick start.
    ///
    /// The model claims every capability (tool calling, vision, a million context and a
    /// hundred thousand output tokens), so no requirement refuses it.
    pub fn offline(provider: ScriptedProvider) -> Models {
        let model = ModelInfo::new("offline", "scripted", provider.name()).with_capabilities(
            ModelCapabilities {
                tool_calling: true,
                vision: true,
                context_tokens: 1_000_000,
                output_tokens: 100_000,
            },
        );
        let catalog = ModelCatalog { models: vec![model] };
        Models::new(catalog).with_provider(Arc::new(provider))
    }

    /// Returns these models with `provider` registered under its name, replacing a
    /// provider of the same name.
    pub fn with_provider(mut self, provider: Arc<dyn ModelProvider>) -> Models {
        self.providers.insert(provider.name().to_owned(), provider);
        self
    }

    /// Returns the catalog.
    pub fn catalog(&self) -> &ModelCatalog {
        &self.catalog
    }

    /// Returns the provider registered as `name`.
    pub fn provider(&self, name: &str) -> Option<&Arc<dyn ModelProvider>> {
        self.providers.get(name)
    }

    /// Sends `request` to its model (`request.model`, `account/model` or an id), held to
    /// `requires` and `allow`, and returns the response with its usage.
    ///
    /// A request with images also requires `vision`.
    ///
    /// When the provider fails (see [`ModelError::is_provider_failure`]) after its own
    /// retries, the model's `fallbacks` are tried in order; a fallback that is not allowed
    /// or cannot meet `requires` is skipped. The response's `model` names the model that
    /// answered. When every fallback fails too, the first model's error is returned.
    pub async fn complete(
        &self,
        request: &ModelRequest,
        requires: &Requires,
        allow: &RouterAllowlist,
    ) -> Result<ModelResponse, ModelError> {
        // Images need a vision model whatever the child declared.
        let vision = Requires { vision: request.has_images(), ..Requires::default() };
        let requires = &requires.union(&vision);
        let model = self.catalog.check(&request.model, requires, allow)?;
        let first = match self.send(model, request).await {
            Ok(response) => return Ok(response),
            Err(err) if err.is_provider_failure() => err,
            Err(err) => return Err(err),
        };
        for fallback in &model.fallbacks {
            let Ok(next) = self.catalog.check(fallback, requires, allow) else { continue };
            match self.send(next, request).await {
                Ok(response) => return Ok(response),
                Err(err) if err.is_provider_failure() => {}
                Err(err) => return Err(err),
            }
        }
        Err(first)
    }

    async fn send(
        &self,
        model: &ModelInfo,
        request: &ModelRequest,
    ) -> Result<ModelResponse, ModelError> {
        let provider = self.providers.get(&model.provider).ok_or_else(|| {
            ModelError::UnknownProvider { model: model.name(), provider: model.provider.clone() }
        })?;
        // The model's declared output limit caps every request to it: without one a
        // model that does not stop would write until its context is full.
        // The model's sampling settings fill what the request leaves unset.
        let declared = model.capabilities.output_tokens;
        let cap = declared > 0
            && (request.max_output_tokens == 0 || request.max_output_tokens > declared);
        let fill = (request.temperature.is_none() && model.temperature.is_some())
            || (request.seed.is_none() && model.seed.is_some());
        let adjusted;
        let request = if cap || fill {
            let mut changed = request.clone();
            if cap {
                changed.max_output_tokens = declared;
            }
            changed.temperature = changed.temperature.or(model.temperature);
            changed.seed = changed.seed.or(model.seed);
            adjusted = changed;
            &adjusted
        } else {
            request
        };
        let mut response = provider.complete(model, request).await?;
        if model.text_tool_calls && response.tool_calls.is_empty() {
            let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
            let (calls, rest) = crate::text_calls::extract(&response.text, &offered);
            if !calls.is_empty() {
                response.tool_calls = calls;
                response.text = rest;
                response.finish = FinishReason::ToolCalls;
            }
        }
        Ok(response)
    }
}
