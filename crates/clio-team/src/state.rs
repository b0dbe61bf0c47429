//! What a team keeps in the journal beyond the session record's own fields: the router
//! allowlist's encoding in `router_allowlist`, and the team state kept in the session's
//! `checkpoint` value (the checkpointed model input, the task, the answer or question,
//! the last route command).
//!
//! The journal's session record has no `answer`, `question` or route-command field, so the
//! team keeps them beside the checkpoint in one JSON object; `docs/teams.md` gives its
//! shape. Only this module reads or writes that value.

use std::collections::BTreeSet;

use clio_journal::{SessionId, SessionRecord};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use clio_models::{Message, RouterAllowlist};

use crate::error::TeamError;

/// The providers and models a session's requests may go to (SPEC §8 `restrict_router`).
///
/// Each side is unrestricted (`None`) or a set of names; a model passes when both its
/// provider and its name are allowed. A child inherits its parent's allowlist as it is;
/// a caller narrows further with clio-flow's `RestrictedRouter::restrict`,
/// which keeps each layer's set (a model has two names, so sets are not intersected).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionAllowlist {
    /// The providers allowed; `None` allows any.
    pub providers: Option<BTreeSet<String>>,
    /// The models allowed (`account/model` or an id); `None` allows any.
    pub models: Option<BTreeSet<String>>,
}

impl SessionAllowlist {
    /// Returns the model layer's allowlist that enforces this one on every request, retry
    /// and fallback.
    pub fn to_router(&self) -> RouterAllowlist {
        let mut router = RouterAllowlist::unrestricted();
        if let Some(p) = &self.providers {
            router = router.with_providers(p.iter().cloned());
        }
        if let Some(m) = &self.models {
            router = router.with_models(m.iter().cloned());
        }
        router
    }

    /// Returns the journal's encoding: `None` when unrestricted, else `provider:NAME` and
    /// `model:NAME` entries, with a bare `provider:` or `model:` marking a side that
    /// allows nothing.
    pub fn encode(&self) -> Option<Vec<String>> {
        if self.providers.is_none() && self.models.is_none() {
            return None;
        }
        let mut out = Vec::new();
        for (prefix, side) in [("provider:", &self.providers), ("model:", &self.models)] {
            match side {
                None => {}
                Some(set) if set.is_empty() => out.push(prefix.to_owned()),
                Some(set) => out.extend(set.iter().map(|n| format!("{prefix}{n}"))),
            }
        }
        Some(out)
    }

    /// Reads the journal's encoding back; an entry without a prefix counts as a model name
    /// (the narrower reading).
    pub fn decode(stored: Option<&[String]>) -> SessionAllowlist {
        let Some(entries) = stored else { return SessionAllowlist::default() };
        let mut providers: Option<BTreeSet<String>> = None;
        let mut models: Option<BTreeSet<String>> = None;
        for entry in entries {
            let (side, name) = match entry.strip_prefix("provider:") {
                Some(name) => (&mut providers, name),
                None => (&mut models, entry.strip_prefix("model:").unwrap_or(entry)),
            };
            let set = side.get_or_insert_with(BTreeSet::new);
            if !name.is_empty() {
                set.insert(name.to_owned());
            }
        }
        if providers.is_none() && models.is_none() {
            // A stored empty list allows nothing at all.
            models = Some(BTreeSet::new());
        }
        SessionAllowlist { providers, models }
    }
}

/// The route command stored for a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRoute {
    /// Its sequence number among the session's route commands, from 1.
    pub seq: u64,
    /// The provider it routes to.
    pub provider: String,
    /// The model it routes to.
    pub model: String,
    /// The command as issued.
    pub command: String,
    /// Who issued it.
    pub issuer: String,
}

/// The team state kept in a session's `checkpoint` value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionState {
    /// The last complete model input (the checkpoint proper).
    pub messages: Option<Vec<Message>>,
    /// The task the session was started on.
    pub task: String,
    /// The model it runs on.
    pub model: String,
    /// The provider of that model.
    pub provider: String,
    /// Its final answer, once done.
    pub answer: Option<String>,
    /// The question its last turn ended with, while idle.
    pub question: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// The last route command issued for it.
    pub route: Option<StoredRoute>,
}

impl SessionState {
    /// Reads the team state of `record` (empty when it has none).
    pub fn of(record: &SessionRecord) -> Result<SessionState, TeamError> {
        match &record.checkpoint {
            None | Some(Value::Null) => Ok(SessionState::default()),
            Some(value) => serde_json::from_value(value.clone()).map_err(|err| {
                TeamError::BadState { session: record.id.clone(), problem: err.to_string() }
            }),
        }
    }

    /// Returns the value to store in the session's `checkpoint`.
    pub fn to_value(&self, session: &SessionId) -> Result<Value, TeamError> {
        serde_json::to_value(self).map_err(|err| TeamError::BadState {
            session: session.clone(),
            problem: err.to_string(),
        })
    }
}

/// Returns the last complete model input of a chat: the whole chat, unless its last
/// assistant turn asked for tool calls that are not all answered yet, in which case the
/// chat before that turn (dropping the turn and any partial results).
///
/// The result is plain messages: nothing of the runtime (tasks, channels, handles) can be
/// in it.
pub fn complete_input(messages: &[Message]) -> Vec<Message> {
    let last_assistant = messages.iter().rposition(|m| matches!(m, Message::Assistant { .. }));
    let Some(at) = last_assistant else { return messages.to_vec() };
    let Message::Assistant { tool_calls, .. } = &messages[at] else { return messages.to_vec() };
    let answered: BTreeSet<&str> = messages[at + 1..]
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    if tool_calls.iter().all(|c| answered.contains(c.id.as_str())) {
        messages.to_vec()
    } else {
        messages[..at].to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_encoding_round_trips() {
        let cases = [
            SessionAllowlist::default(),
            SessionAllowlist { providers: Some(BTreeSet::new()), models: None },
            SessionAllowlist {
                providers: Some(["ollama".to_owned()].into()),
                models: Some(["local/qwen".to_owned(), "big".to_owned()].into()),
            },
            SessionAllowlist { providers: None, models: Some(BTreeSet::new()) },
        ];
        for case in cases {
            let stored = case.encode();
            assert_eq!(SessionAllowlist::decode(stored.as_deref()), case);
        }
        assert_eq!(
            SessionAllowlist::decode(Some(&[])),
            SessionAllowlist { providers: None, models: Some(BTreeSet::new()) }
        );
    }
}
