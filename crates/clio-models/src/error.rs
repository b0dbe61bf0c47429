//! [`ModelError`]: everything that can go wrong choosing a model or calling one.
//!
//! Each variant carries what a person needs to act on it (the model, the provider, the URL,
//! the status, the file and line), and [`ModelError::reason`] gives a stable snake_case code
//! that the runtime puts in a refusal's `reason` (for example `model_requirement_unmet`).

use std::path::PathBuf;
use std::time::Duration;

/// An error choosing a model or calling one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// No model was named by the call, the flow, the child's preference or the run.
    #[error("no model chosen: the call, the flow, the child's preference and the run name none")]
    NoModelChosen,
    /// The name is not in the catalog.
    #[error("unknown model `{name}` (known: {known})")]
    UnknownModel {
        /// The name as given.
        name: String,
        /// The catalog's names, comma-separated, or `none`.
        known: String,
    },
    /// An id without an account matches models of several accounts.
    #[error("model id `{name}` is ambiguous; name one of: {}", candidates.join(", "))]
    AmbiguousModel {
        /// The id as given.
        name: String,
        /// The matching `account/model` names.
        candidates: Vec<String>,
    },
    /// The model cannot meet a requirement of the agent or subagent.
    #[error(
        "model `{model}` cannot meet the requirement {requirement} = {required}: it offers {offered}"
    )]
    RequirementUnmet {
        /// The model, as `account/model`.
        model: String,
        /// The field of `Requires` it fails (`tool_calling`, `vision`, `context_tokens`,
        /// `output_tokens`).
        requirement: &'static str,
        /// What the requirement asks for.
        required: String,
        /// What the model offers.
        offered: String,
    },
    /// The router allowlist does not allow the model or its provider.
    #[error(
        "model `{model}` of provider `{provider}` is not allowed by the router allowlist ({allowed})"
    )]
    NotAllowed {
        /// The model, as `account/model`.
        model: String,
        /// Its provider.
        provider: String,
        /// The allowlist, as text.
        allowed: String,
    },
    /// The catalog names a provider that is not registered.
    #[error("model `{model}` is served by provider `{provider}`, which is not registered")]
    UnknownProvider {
        /// The model, as `account/model`.
        model: String,
        /// The provider's name.
        provider: String,
    },
    /// Two catalog entries have the same `account/model` name.
    #[error("model `{model}` is in the catalog twice")]
    DuplicateModel {
        /// The repeated name.
        model: String,
    },
    /// A catalog entry is malformed (an empty or invalid name, a fallback that is not in
    /// the catalog).
    #[error("catalog entry `{model}`: {problem}")]
    InvalidCatalog {
        /// The entry, as written.
        model: String,
        /// What is wrong.
        problem: String,
    },
    /// A file (a script, a catalog) could not be read.
    #[error("cannot read {}: {message}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// The system's error message.
        message: String,
    },
    /// A file (a script, a catalog) does not parse.
    #[error("{}:{line}:{column}: {message}", file.display())]
    Parse {
        /// The file.
        file: PathBuf,
        /// The line, from 1; 0 when unknown.
        line: usize,
        /// The column, from 1; 0 when unknown.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// No script of the scripted provider matches the request.
    #[error("{}: no script matches agent `{agent}` and prompt {prompt:?}", file.display())]
    NoScript {
        /// The script file.
        file: PathBuf,
        /// The request's agent or subagent id.
        agent: String,
        /// The request's last user message (cut to 200 characters).
        prompt: String,
    },
    /// A script matched, but it has no turn for this point of the chat.
    #[error("{}: script {script}{}: agent `{agent}` has {turns} scripted turn(s); the chat asks for turn {turn}", file.display(), at_line(*line))]
    ScriptExhausted {
        /// The script file.
        file: PathBuf,
        /// The matching script's position in the file, from 1.
        script: usize,
        /// The line of the matching script, from 1; 0 when the format gives none (JSON).
        line: usize,
        /// The request's agent or subagent id.
        agent: String,
        /// How many turns the script has.
        turns: usize,
        /// The turn the chat asks for, from 1.
        turn: usize,
    },
    /// A scripted turn that fails on purpose.
    #[error("{}: script {script}{}: scripted failure: {message}", file.display(), at_line(*line))]
    ScriptedFailure {
        /// The script file.
        file: PathBuf,
        /// The script's position in the file, from 1.
        script: usize,
        /// The line of the script, from 1; 0 when the format gives none (JSON).
        line: usize,
        /// The scripted message.
        message: String,
    },
    /// The provider answered with an HTTP error status (after retries when it is one
    /// that is retried).
    #[error(
        "provider `{provider}` answered {status} for {url} after {attempts} attempt(s): {body}"
    )]
    Status {
        /// The provider's name.
        provider: String,
        /// The URL requested.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the response body (at most 500 characters).
        body: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The provider could not be reached.
    #[error("cannot reach provider `{provider}` at {url} after {attempts} attempt(s): {message}")]
    Connect {
        /// The provider's name.
        provider: String,
        /// The URL requested.
        url: String,
        /// The client's error message.
        message: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The provider did not answer in time.
    #[error(
        "provider `{provider}` did not answer {url} within {after:?} after {attempts} attempt(s)"
    )]
    Timeout {
        /// The provider's name.
        provider: String,
        /// The URL requested.
        url: String,
        /// The timeout of one attempt.
        after: Duration,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The provider answered 2xx with a body that is not a chat completion.
    #[error("provider `{provider}` sent a malformed response from {url}: {problem}; body: {body}")]
    MalformedResponse {
        /// The provider's name.
        provider: String,
        /// The URL requested.
        url: String,
        /// What is wrong with it.
        problem: String,
        /// The start of the response body (at most 500 characters).
        body: String,
    },
    /// The provider's configuration is invalid (for example a base URL that is not
    /// `http://` or `https://`).
    #[error("provider `{provider}` is misconfigured: {problem}")]
    Config {
        /// The provider's name.
        provider: String,
        /// What is wrong.
        problem: String,
    },
}

impl ModelError {
    /// Returns the stable snake_case code of the error, for a refusal's `reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            ModelError::NoModelChosen => "no_model_chosen",
            ModelError::UnknownModel { .. } => "model_unknown",
            ModelError::AmbiguousModel { .. } => "model_ambiguous",
            ModelError::RequirementUnmet { .. } => "model_requirement_unmet",
            ModelError::NotAllowed { .. } => "model_not_allowed",
            ModelError::UnknownProvider { .. } => "provider_unknown",
            ModelError::DuplicateModel { .. } | ModelError::InvalidCatalog { .. } => {
                "catalog_invalid"
            }
            ModelError::Read { .. } | ModelError::Parse { .. } => "model_file_invalid",
            ModelError::NoScript { .. } => "script_no_match",
            ModelError::ScriptExhausted { .. } => "script_exhausted",
            ModelError::ScriptedFailure { .. } => "script_failure",
            ModelError::Status { .. } => "provider_status",
            ModelError::Connect { .. } => "provider_unreachable",
            ModelError::Timeout { .. } => "provider_timeout",
            ModelError::MalformedResponse { .. } => "provider_malformed_response",
            ModelError::Config { .. } => "provider_misconfigured",
        }
    }

    /// Returns true when the provider could not be reached or did not answer in time, or
    /// answered that it is overloaded or down (408, 429, 5xx): an outage that may end,
    /// after which the same request is worth sending again.
    pub fn is_unreachable(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => matches!(status, 408 | 429 | 500..=599),
            ModelError::Connect { .. } | ModelError::Timeout { .. } => true,
            _ => false,
        }
    }

    /// Returns true when the error is about the provider's service (unreachable, timing
    /// out, answering with an error status or garbage), so that a fallback model may be
    /// tried; choice, catalog and script errors are never worth a fallback.
    pub fn is_provider_failure(&self) -> bool {
        matches!(
            self,
            ModelError::Status { .. }
                | ModelError::Connect { .. }
                | ModelError::Timeout { .. }
                | ModelError::MalformedResponse { .. }
        )
    }
}

fn at_line(line: usize) -> String {
    if line == 0 { String::new() } else { format!(" (line {line})") }
}

/// Returns the first `limit` characters of `text`, with `…` when it was cut.
pub(crate) fn excerpt(text: &str, limit: usize) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(limit).collect();
    if chars.next().is_some() { format!("{head}…") } else { head }
}
