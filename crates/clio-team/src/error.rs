//! [`TeamError`]: everything a team operation can refuse or fail with, each variant naming
//! the session or value at fault, and its stable `reason` for tool results.

use std::sync::Arc;

use clio_journal::{JournalError, SessionId};

/// Why a team operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TeamError {
    /// No session has this id.
    #[error("session {session} not found")]
    SessionNotFound {
        /// The id asked for.
        session: SessionId,
    },
    /// A session with this id already exists.
    #[error("session {session} already exists")]
    SessionExists {
        /// The id given.
        session: SessionId,
    },
    /// The actor does not control the target (see [`crate::rules::controls`]).
    #[error("session {actor} does not control session {target}")]
    NotControlled {
        /// The session acting.
        actor: SessionId,
        /// The session acted on.
        target: SessionId,
    },
    /// Managed subagents are not enabled for the session (see `require_enabled`).
    #[error("managed subagents are not enabled for session {session}")]
    NotEnabled {
        /// The session refused.
        session: SessionId,
    },
    /// The session has no parent to ask.
    #[error("session {session} is not a subagent: it has no parent to ask")]
    NoParent {
        /// The session that asked.
        session: SessionId,
    },
    /// A task given to `run` is malformed.
    #[error("task {index}: {problem}")]
    InvalidTask {
        /// Its position in the list, from 0.
        index: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// The child has no question waiting and is not idle, so there is nothing to reply to.
    #[error("session {session} is not waiting for a reply")]
    NotWaiting {
        /// The child.
        session: SessionId,
    },
    /// The recipient may not be woken by the author (see [`crate::rules::wake_allowed`]).
    #[error("session {author} may not wake session {recipient}")]
    WakeRefused {
        /// The session that would wake it.
        author: SessionId,
        /// The session that stays idle.
        recipient: SessionId,
    },
    /// A tool was called with arguments it cannot use.
    #[error("tool {tool}: {problem}")]
    InvalidArguments {
        /// The tool called.
        tool: String,
        /// What is wrong with the arguments.
        problem: String,
    },
    /// No team tool has this name.
    #[error("no team tool is named {name:?}")]
    UnknownTool {
        /// The name called.
        name: String,
    },
    /// The stored team state of a session does not decode.
    #[error("session {session} holds team state that does not decode: {problem}")]
    BadState {
        /// The session.
        session: SessionId,
        /// What does not decode.
        problem: String,
    },
    /// The worker that runs journal calls stopped.
    #[error("journal worker stopped: {message}")]
    WorkerStopped {
        /// What the runtime reported.
        message: String,
    },
    /// The journal failed.
    #[error("journal error")]
    Journal(#[source] Arc<JournalError>),
}

impl From<JournalError> for TeamError {
    fn from(err: JournalError) -> Self {
        match err {
            JournalError::SessionNotFound { session } => TeamError::SessionNotFound { session },
            JournalError::SessionExists { session } => TeamError::SessionExists { session },
            other => TeamError::Journal(Arc::new(other)),
        }
    }
}

impl TeamError {
    /// Returns the stable snake_case name of the error, as tool results carry it.
    pub fn reason(&self) -> &'static str {
        match self {
            TeamError::SessionNotFound { .. } => "session_not_found",
            TeamError::SessionExists { .. } => "session_exists",
            TeamError::NotControlled { .. } => "not_controlled",
            TeamError::NotEnabled { .. } => "subagents_not_enabled",
            TeamError::NoParent { .. } => "no_parent",
            TeamError::InvalidTask { .. } => "invalid_task",
            TeamError::NotWaiting { .. } => "not_waiting",
            TeamError::WakeRefused { .. } => "wake_refused",
            TeamError::InvalidArguments { .. } => "invalid_arguments",
            TeamError::UnknownTool { .. } => "unknown_tool",
            TeamError::BadState { .. } => "bad_state",
            TeamError::WorkerStopped { .. } => "worker_stopped",
            TeamError::Journal(_) => "journal_error",
        }
    }

    /// Returns the error as tool-result data: `{"error": {"reason", "message"}}`, the
    /// message including the journal's own error when there is one.
    pub fn to_json(&self) -> serde_json::Value {
        let message = match self {
            TeamError::Journal(err) => format!("journal error: {err}"),
            other => other.to_string(),
        };
        serde_json::json!({ "error": { "reason": self.reason(), "message": message } })
    }
}
