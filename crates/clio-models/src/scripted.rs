//! [`ScriptedProvider`]: model answers and tool calls read from a file, matched by agent
//! and prompt, for tests, examples and the offline quick start.
//!
//! The provider keeps no state between calls: the script is chosen by the request's
//! agent and last user message, and the turn by how many assistant messages the chat
//! already holds. So the same request always gets the same answer, concurrent calls
//! cannot disturb each other, and a resumed react loop gets the turn it is at. The file
//! format and the matching rule are documented in `docs/scripted-models.md`.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::catalog::{line_column, toml_error};
use crate::error::excerpt;
use crate::{
    FinishReason, ModelError, ModelFuture, ModelInfo, ModelProvider, ModelRequest, ModelResponse,
    ToolCall, Usage,
};

/// A provider that answers from a script file.
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    name: String,
    file: PathBuf,
    scripts: Vec<Script>,
}

#[derive(Debug, Clone)]
struct Script {
    // Position in the file, from 1, and the line of its table (0 for JSON).
    index: usize,
    line: usize,
    agent: String,
    // Invariant: whitespace-normalised, split at `*`, empty pieces removed.
    pattern: Vec<String>,
    turns: Vec<Turn>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "S: Deserialize<'de>"))]
struct ScriptFile<S> {
    #[serde(default)]
    script: Vec<S>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptDef {
    #[serde(default)]
    agent: String,
    #[serde(default)]
    prompt: String,
    #[serde(default, alias = "turns")]
    turn: Vec<Turn>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<ScriptedCall>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    finish: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedCall {
    #[serde(default)]
    id: String,
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

impl ScriptedProvider {
    /// Reads the script file at `path`: JSON when its name ends in `.json`, else TOML.
    pub fn from_file(path: &Path) -> Result<ScriptedProvider, ModelError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ModelError::Read { file: path.to_path_buf(), message: e.to_string() })?;
        let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if json { Self::from_json(&text, path) } else { Self::from_toml(&text, path) }
    }

    /// Parses a TOML script `text`; `file` names it in errors.
    pub fn from_toml(text: &str, file: &Path) -> Result<ScriptedProvider, ModelError> {
        let parsed: ScriptFile<toml::Spanned<ScriptDef>> =
            toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
        let defs = parsed.script.into_iter().map(|s| {
            let line = line_column(text, s.span().start).0;
            (line, s.into_inner())
        });
        Ok(Self::build(file, defs))
    }

    /// Parses a JSON script `text`; `file` names it in errors.
    pub fn from_json(text: &str, file: &Path) -> Result<ScriptedProvider, ModelError> {
        let parsed: ScriptFile<ScriptDef> =
            serde_json::from_str(text).map_err(|e| ModelError::Parse {
                file: file.to_path_buf(),
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            })?;
        Ok(Self::build(file, parsed.script.into_iter().map(|s| (0, s))))
    }

    fn build(file: &Path, defs: impl Iterator<Item = (usize, ScriptDef)>) -> ScriptedProvider {
        let scripts = defs
            .enumerate()
            .map(|(i, (line, def))| Script {
                index: i + 1,
                line,
                agent: def.agent.trim().to_owned(),
                pattern: normalise(&def.prompt)
                    .split('*')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect(),
                turns: def.turn,
            })
            .collect();
        ScriptedProvider { name: "scripted".into(), file: file.to_path_buf(), scripts }
    }

    /// Returns this provider registered under `name` instead of `scripted`.
    pub fn named(mut self, name: impl Into<String>) -> ScriptedProvider {
        self.name = name.into();
        self
    }

    /// Returns the scripted response to `request` on `model`, without the future.
    pub fn answer(
        &self,
        model: &ModelInfo,
        request: &ModelRequest,
    ) -> Result<ModelResponse, ModelError> {
        let prompt = normalise(request.last_user_message());
        let script = self
            .scripts
            .iter()
            .find(|s| {
                (s.agent.is_empty() || s.agent == "*" || s.agent == request.agent)
                    && matches_pattern(&prompt, &s.pattern)
            })
            .ok_or_else(|| ModelError::NoScript {
                file: self.file.clone(),
                agent: request.agent.clone(),
                prompt: excerpt(&prompt, 200),
            })?;
        let turn_index = request.assistant_turns();
        let turn = script.turns.get(turn_index).ok_or_else(|| ModelError::ScriptExhausted {
            file: self.file.clone(),
            script: script.index,
            line: script.line,
            agent: request.agent.clone(),
            turns: script.turns.len(),
            turn: turn_index + 1,
        })?;
        if let Some(message) = &turn.error {
            return Err(ModelError::ScriptedFailure {
                file: self.file.clone(),
                script: script.index,
                line: script.line,
                message: message.clone(),
            });
        }
        let tool_calls: Vec<ToolCall> = turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{}_{}", turn_index + 1, i + 1)
                } else {
                    c.id.clone()
                },
                name: c.name.clone(),
                arguments: c.arguments.clone().unwrap_or_else(|| Value::Object(Default::default())),
            })
            .collect();
        let finish = match &turn.finish {
            Some(f) => FinishReason::from_provider(f),
            None if tool_calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        let usage = turn.usage.unwrap_or_else(|| Usage::estimate(request, &turn.text, &tool_calls));
        Ok(ModelResponse {
            model: model.name(),
            provider: self.name.clone(),
            text: turn.text.clone(),
            tool_calls,
            finish,
            usage,
        })
    }
}

impl ModelProvider for ScriptedProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn complete<'a>(&'a self, model: &'a ModelInfo, request: &'a ModelRequest) -> ModelFuture<'a> {
        let res = self.answer(model, request);
        Box::pin(async move { res })
    }
}

/// Trims `text` and collapses each run of whitespace to one space.
fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Returns true when the `pieces` of a pattern occur in `prompt` in order, without
/// overlapping; no pieces (an empty pattern, or only `*`) match every prompt.
fn matches_pattern(prompt: &str, pieces: &[String]) -> bool {
    let mut rest = prompt;
    for piece in pieces {
        match rest.find(piece.as_str()) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_ordered_substrings() {
        let p = |s: &str| -> Vec<String> {
            normalise(s)
                .split('*')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(Into::into)
                .collect()
        };
        let prompt = normalise("  Summarise   the paper on\n solar cells ");
        assert!(matches_pattern(&prompt, &p("the paper")));
        assert!(matches_pattern(&prompt, &p("Summarise * solar")));
        assert!(!matches_pattern(&prompt, &p("solar * Summarise")));
        assert!(!matches_pattern(&prompt, &p("summarise")));
        assert!(matches_pattern(&prompt, &p("")));
        assert!(matches_pattern("", &p("*")));
    }
}
