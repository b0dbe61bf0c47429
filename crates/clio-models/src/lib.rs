//! Models for CLIO: the data of a model call, the [`ModelProvider`] trait, the model catalog
//! with capabilities ([`ModelCatalog`]), the choice of a model for a call ([`Models`]), the
//! router allowlist ([`RouterAllowlist`]), and two providers: [`ScriptedProvider`], read from a
//! file, and [`OpenAiProvider`], OpenAI-compatible over HTTP (reqwest).
//!
//! Its one job: given a model request, choose the model that may answer it and get the answer.
//! Everything a model call produces ([`ModelResponse`], with its [`Usage`]) is plain,
//! serialisable data, so the runtime (clio-flow) journals it and a replay never calls the
//! model again; errors are [`ModelError`], each with a stable [`ModelError::reason`].
//!
//! What it does not do: journal, replay or know about runs and flows (clio-flow does); spawn
//! tasks; read environment variables or the home folder: keys, URLs and files are values the
//! caller passes in (the CLI reads the environment). It is the only crate that knows reqwest.

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

/// The crate README's example, run as a doctest so that it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
