//! A launch's input as `clio run` and `clio workflow run` take it: text, or structured
//! JSON, as the seeds' flows receive it ("text, or a JSON object or list").
//!
//! - `--input-json JSON`: the input is JSON (any JSON value); `--input-json @FILE` reads it
//!   from a file. What does not parse is refused, naming the flag (or the file), the line
//!   and the column.
//! - `--input @FILE.json`: the file's content, read as JSON (refused as above when it is
//!   not); `@FILE` of any other name is the file's text.
//! - `--input TEXT`: a JSON object or list (text that starts with `{` or `[` and parses as
//!   one) is that JSON, so `clio run workflow --input '{"workflow": …}'` calls the workflow
//!   flow with the same fields a flow would; anything else is the text itself.
//!
//! A JSON input that names a key twice is refused rather than read with the last value.

use std::path::Path;

use anyhow::anyhow;
use serde_json::Value;

use crate::error::CliError;

/// Where the launch's input came from, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputFlag {
    /// `--input` (for `workflow run`, `--task`, its alias).
    Input,
    /// `--input-json`.
    InputJson,
}

impl InputFlag {
    fn name(self) -> &'static str {
        match self {
            InputFlag::Input => "--input",
            InputFlag::InputJson => "--input-json",
        }
    }
}

const HINT: &str = "`--input-json '{\"key\": \"value\"}'` passes JSON, `--input-json @FILE` or `--input @FILE.json` reads it from a file, `--input TEXT` passes text";

/// Returns the input `text` given with `flag` stands for.
pub(crate) fn launch_input(flag: InputFlag, text: &str) -> Result<Value, CliError> {
    if let Some(file) = text.strip_prefix('@').filter(|f| !f.trim().is_empty()) {
        let path = Path::new(file);
        let json_file = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        // `--input @someone` that names no file stays text: only `--input-json` and a
        // `.json` name promise a file.
        if flag == InputFlag::Input && !json_file && !path.is_file() {
            return Ok(Value::String(text.to_owned()));
        }
        let content = crate::input::read_file(path)?;
        if flag == InputFlag::Input && !json_file {
            return Ok(Value::String(content));
        }
        return parse_json(&content, &format!("{} {}", flag.name(), path.display()));
    }
    match flag {
        InputFlag::InputJson => parse_json(text, flag.name()),
        InputFlag::Input => {
            let trimmed = text.trim_start();
            if (trimmed.starts_with('{') || trimmed.starts_with('['))
                && let Ok(value @ (Value::Object(_) | Value::Array(_))) =
                    serde_json::from_str::<Value>(text)
            {
                refuse_duplicates(text, flag.name())?;
                return Ok(value);
            }
            Ok(Value::String(text.to_owned()))
        }
    }
}

/// Parses `text` as JSON, naming `what` (the flag, and the file) in the refusal.
fn parse_json(text: &str, what: &str) -> Result<Value, CliError> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        CliError::usage(anyhow!("{what}: not JSON at line {} column {}: {e}", e.line(), e.column()))
            .hint(HINT)
    })?;
    refuse_duplicates(text, what)?;
    Ok(value)
}

fn refuse_duplicates(text: &str, what: &str) -> Result<(), CliError> {
    match clio_spec::duplicate_json_key(text) {
        Some(dup) => Err(CliError::usage(anyhow!("{what}: {dup}")).hint(HINT)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_stays_text_and_an_object_or_a_list_is_json() {
        let input = |t: &str| launch_input(InputFlag::Input, t).unwrap();
        assert_eq!(input("Say hello"), json!("Say hello"));
        assert_eq!(input("{not json"), json!("{not json"));
        assert_eq!(input("42"), json!("42"), "only an object or a list is read as JSON");
        assert_eq!(input("\"quoted\""), json!("\"quoted\""));
        assert_eq!(input(" {\"workflow\": {\"steps\": []}}"), json!({"workflow": {"steps": []}}));
        assert_eq!(input("[1, 2]"), json!([1, 2]));
        assert_eq!(input("@nobody"), json!("@nobody"), "a name that is no file stays text");
    }

    #[test]
    fn input_json_is_json_or_refused_naming_the_flag() {
        assert_eq!(launch_input(InputFlag::InputJson, "42").unwrap(), json!(42));
        assert_eq!(launch_input(InputFlag::InputJson, "\"x\"").unwrap(), json!("x"));
        let err = launch_input(InputFlag::InputJson, "{\"a\": }").unwrap_err().error.to_string();
        assert!(err.contains("--input-json: not JSON at line 1 column 7"), "{err}");
        let err = launch_input(InputFlag::InputJson, "{\"a\": 1, \"a\": 2}").unwrap_err();
        assert!(err.error.to_string().contains("--input-json"), "{:?}", err.error);
        assert!(err.error.to_string().contains("`a`"), "{:?}", err.error);
        let err = launch_input(InputFlag::Input, "{\"a\": 1, \"a\": 2}").unwrap_err();
        assert!(err.error.to_string().contains("--input"), "{:?}", err.error);
    }

    #[test]
    fn a_file_is_read_as_json_when_the_flag_or_its_name_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let json_file = dir.path().join("input.json");
        std::fs::write(&json_file, "{\"task\": \"batch7\"}").unwrap();
        let text_file = dir.path().join("input.txt");
        std::fs::write(&text_file, "{\"task\": \"batch7\"} as text").unwrap();
        let at = |p: &Path| format!("@{}", p.display());
        assert_eq!(
            launch_input(InputFlag::Input, &at(&json_file)).unwrap(),
            json!({"task": "batch7"})
        );
        assert_eq!(
            launch_input(InputFlag::InputJson, &at(&json_file)).unwrap(),
            json!({"task": "batch7"})
        );
        assert_eq!(
            launch_input(InputFlag::Input, &at(&text_file)).unwrap(),
            json!("{\"task\": \"batch7\"} as text")
        );
        let err =
            launch_input(InputFlag::InputJson, &at(&text_file)).unwrap_err().error.to_string();
        assert!(err.contains("input.txt: not JSON"), "{err}");
        let missing = dir.path().join("missing.json");
        let err = launch_input(InputFlag::Input, &at(&missing)).unwrap_err().error.to_string();
        assert!(err.contains("missing.json"), "{err}");
    }
}
