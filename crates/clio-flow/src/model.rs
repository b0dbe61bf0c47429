//! Models: the data of a model call, the [`ModelProvider`] trait, the model catalog with
//! capabilities, the choice of a child's model, the router allowlist, and two providers
//! (scripted from a file, and OpenAI-compatible over HTTP).
//!
//! Everything a model call produces ([`ModelResponse`], with its [`Usage`]) is plain,
//! serialisable data, so the runtime journals it and a replay never calls the model again.
//! This module spawns nothing and reads no environment variable: keys and URLs are values
//! passed in by the caller (the CLI reads the environment).
//!
//! lib.rs needs exactly these lines:
//!
//! ```text
//! mod model;
//! pub use model::{
//!     ChosenModel, CutOffPolicy, FinishReason, Message, ModelCapabilities, ModelCatalog, ModelError,
//!     ModelFuture, ModelInfo, ModelProvider, ModelRequest, ModelResponse, ModelSource,
//!     Models, ModelsConfig, OpenAiConfig, OpenAiProvider, ProviderConfig, ProviderKind,
//!     RetryPolicy, RouterAllowlist, ScriptedProvider, ToolCall, ToolSpec, Usage,
//! };
//! ```

mod catalog;
mod config;
mod error;
mod models;
mod openai;
mod provider;
mod router;
mod schema;
mod scripted;
mod stream;
mod text_calls;
mod types;

pub use catalog::{
    ChosenModel, CutOffPolicy, ModelCapabilities, ModelCatalog, ModelInfo, ModelSource,
};
pub use config::{ModelsConfig, ProviderConfig, ProviderKind};
pub use error::ModelError;
pub use models::Models;
pub use openai::{
    OpenAiConfig, OpenAiProvider, RetryNotice, RetryObserver, RetryPolicy, observe_retries,
};
pub use provider::{ModelFuture, ModelProvider};
pub use router::RouterAllowlist;
pub use schema::schema_problems;
pub use scripted::ScriptedProvider;
pub use types::{FinishReason, Message, ModelRequest, ModelResponse, ToolCall, ToolSpec, Usage};
