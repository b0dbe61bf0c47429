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

/// Turns a refused script file into the provider's error: a position where there is one
/// (invalid UTF-8, a BOM), else what the file is or what the system said.
fn read_error(path: &Path, error: clio_spec::InputError) -> ModelError {
    use clio_spec::InputError;
    let file = path.to_path_buf();
    match error {
        InputError::Io { source, .. } => ModelError::Read { file, message: source.to_string() },
        InputError::InvalidUtf8 { offset, line, column, .. } => ModelError::Parse {
            file,
            line,
            column,
            message: format!(
                "invalid UTF-8 at byte offset {offset} (line {line}, column {column}): a script file is UTF-8 text"
            ),
        },
        InputError::ByteOrderMark { .. } => ModelError::Parse {
            file,
            line: 1,
            column: 1,
            message: "the file starts with a UTF-8 byte order mark (bytes EF BB BF at byte offset 0, line 1, column 1): save it as UTF-8 without a BOM".into(),
        },
        InputError::NotAFile { kind, .. } => ModelError::Read {
            file,
            message: format!("it is {kind}, not a regular file; clio reads input only from regular files"),
        },
        InputError::TooLarge { size, limit, .. } => ModelError::Read {
            file,
            message: format!("it is {size} bytes or more, over the limit of {limit} bytes for an input file"),
        },
    }
}

impl ScriptedProvider {
    /// Reads the script file at `path`: JSON when its name ends in `.json`, else TOML.
    ///
    /// The file is read as every input file is ([`clio_spec::read_input`]): a regular file
    /// only, bounded, UTF-8 without a BOM.
    pub fn from_file(path: &Path) -> Result<ScriptedProvider, ModelError> {
        let text = clio_spec::read_input(path).map_err(|e| read_error(path, e))?;
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

    /// Parses a JSON script `text`; `file` names it in errors. An object that names a key
    /// twice is refused with the key and its position.
    pub fn from_json(text: &str, file: &Path) -> Result<ScriptedProvider, ModelError> {
        if let Some(dup) = clio_spec::duplicate_json_key(text) {
            return Err(ModelError::Parse {
                file: file.to_path_buf(),
                line: dup.line,
                column: dup.column,
                message: format!("duplicate key `{}`: an object may name each key once", dup.key),
            });
        }
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
        // A scripted model has the window its catalog entry gives it, as a server would:
        // a request past it fails, naming both (0: no window recorded, no limit).
        let window = model.capabilities.context_tokens;
        let needed = request.estimated_input_tokens();
        if window > 0 && needed > window {
            return Err(ModelError::ScriptedFailure {
                file: self.file.clone(),
                script: script.index,
                line: script.line,
                message: format!(
                    "context_exceeded: the request holds about {needed} tokens, past the {window}-token context window of {}",
                    model.name()
                ),
            });
        }
        let turn_index = request.turn();
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

    /// A script file is read as every input file is: a folder or a device is refused by
    /// its kind, a BOM is placed; a JSON key named twice is refused by name and place.
    #[test]
    fn a_script_file_is_bounded_and_strict() {
        let dir = std::env::temp_dir();
        let error = ScriptedProvider::from_file(&dir).unwrap_err();
        assert!(error.to_string().contains("it is a directory, not a regular file"), "{error}");
        if Path::new("/dev/zero").exists() {
            let error = ScriptedProvider::from_file(Path::new("/dev/zero")).unwrap_err();
            assert!(error.to_string().contains("it is a character device"), "{error}");
        }
        let file = dir.join(format!("clio-script-bom-{}.toml", std::process::id()));
        std::fs::write(&file, b"\xEF\xBB\xBF[[script]]\n").unwrap();
        let error = ScriptedProvider::from_file(&file).unwrap_err();
        assert!(error.to_string().contains(":1:1: the file starts with a UTF-8 byte order mark"));
        let _ = std::fs::remove_file(&file);
        let text = r#"{"script": [{"agent": "a", "prompt": "x", "agent": "b"}]}"#;
        let error = ScriptedProvider::from_json(text, Path::new("s.json")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "s.json:1:43: duplicate key `agent`: an object may name each key once"
        );
    }
}
