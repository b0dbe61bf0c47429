//! The [`ModelProvider`] trait: one service that answers model requests.
//!
//! The trait returns a boxed future instead of using `async fn`, so that providers can be
//! kept as `Arc<dyn ModelProvider>` in a registry (`async fn` in traits is not
//! object-safe).

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use crate::{ModelError, ModelInfo, ModelRequest, ModelResponse};

/// The future a [`ModelProvider`] returns.
pub type ModelFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ModelResponse, ModelError>> + Send + 'a>>;

/// A service that answers model requests: scripted, OpenAI-compatible, or a test's own.
///
/// Implementations retry what is worth retrying themselves and return the final outcome;
/// the caller journals it. They never read the environment.
pub trait ModelProvider: fmt::Debug + Send + Sync {
    /// Returns the provider's name, as the catalog's `provider` field names it.
    fn name(&self) -> &str;

    /// Sends `request` to `model` (the catalog entry, whose `api_model` is the name the
    /// service knows) and returns the response with its token usage.
    fn complete<'a>(&'a self, model: &'a ModelInfo, request: &'a ModelRequest) -> ModelFuture<'a>;
}
