//! A deployment's tool settings read from TOML text: the `[tools]` table of
//! `$CLIO_HOME/config.toml`, which the CLI reads and passes here.
//!
//! ```toml
//! [tools]
//! permissions = { "write_*" = "ask", "files/delete" = "deny" }
//! callers = { "shell_bash" = "code" }
//! confirmation = "ask"
//! env = { "search/web" = ["OPENAI_API_KEY"], "search/mcp:brave" = ["BRAVE_API_KEY"] }
//! ```
//!
//! `permissions` and `callers` map a tool pattern (a name, `plugin/tool`, `*` for any run
//! of characters) to a value; `confirmation` is the policy for tools no one else decided.
//! Callers entries are tried in the patterns' sorted order, the first match wins.
//! `env` maps a pattern to the variables of `clio`'s environment that the matching
//! sandboxed programs get ([`tool_env_from_toml`]; an MCP server is `plugin/mcp:server`, a
//! script binding `plugin/binding:name`); no other variable of it reaches them.

use std::path::{Path, PathBuf};

use clio_plugins::{Callers, CallersRule, Permission, PermissionRule, PermissionSettings};
use clio_tools::{EnvRule, is_env_name};
use serde_json::Value;

/// Why tool settings cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolSettingsError {
    /// The text is not TOML.
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// A field has a value it cannot take.
    #[error("{}: tools.{field} = {value:?}: allowed values are {}", path.display(), allowed.join(", "))]
    Value {
        /// The file.
        path: PathBuf,
        /// The field, as `permissions."write_*"`.
        field: String,
        /// The value found.
        value: String,
        /// The values allowed.
        allowed: Vec<String>,
    },
}

/// Reads the `[tools]` table of `text` (the file `path`, for messages) into the
/// deployment's settings; a text without `[tools]` gives the default settings.
pub fn tool_settings_from_toml(
    text: &str,
    path: &Path,
) -> Result<PermissionSettings, ToolSettingsError> {
    let parsed: Value = toml::from_str(text)
        .map_err(|e| ToolSettingsError::Parse { path: path.to_owned(), message: e.to_string() })?;
    let mut settings = PermissionSettings::default();
    let Some(tools) = parsed.get("tools") else {
        return Ok(settings);
    };
    let bad = |field: String, value: &Value, allowed: &[&str]| ToolSettingsError::Value {
        path: path.to_owned(),
        field,
        value: value.as_str().map_or_else(|| value.to_string(), str::to_owned),
        allowed: allowed.iter().map(|a| (*a).to_owned()).collect(),
    };
    if let Some(table) = tools.get("permissions") {
        let Some(table) = table.as_object() else {
            return Err(bad("permissions".into(), table, &["a table of pattern = permission"]));
        };
        for (pattern, value) in table {
            let permission = value.as_str().and_then(Permission::parse).ok_or_else(|| {
                bad(format!("permissions.{pattern:?}"), value, Permission::ALLOWED)
            })?;
            settings.deployment.push(PermissionRule { tool: pattern.clone(), permission });
        }
    }
    if let Some(table) = tools.get("callers") {
        let Some(table) = table.as_object() else {
            return Err(bad("callers".into(), table, &["a table of pattern = callers"]));
        };
        for (pattern, value) in table {
            let callers = value
                .as_str()
                .and_then(Callers::parse)
                .ok_or_else(|| bad(format!("callers.{pattern:?}"), value, Callers::ALLOWED))?;
            settings.deployment_callers.push(CallersRule { tool: pattern.clone(), callers });
        }
    }
    if let Some(value) = tools.get("confirmation") {
        let permission = value
            .as_str()
            .and_then(Permission::parse)
            .ok_or_else(|| bad("confirmation".into(), value, Permission::ALLOWED))?;
        settings.confirmation = Some(permission);
    }
    Ok(settings)
}

/// Reads `[tools] env` of `text` (the file `path`, for messages): for each tool pattern,
/// the names of the variables of `clio`'s environment its program gets. A text without it
/// gives none: no sandboxed program gets any variable of `clio`'s beyond the sandbox's
/// short list (`docs/run_code.md`, "Environment").
pub fn tool_env_from_toml(text: &str, path: &Path) -> Result<Vec<EnvRule>, ToolSettingsError> {
    let parsed: Value = toml::from_str(text)
        .map_err(|e| ToolSettingsError::Parse { path: path.to_owned(), message: e.to_string() })?;
    let Some(table) = parsed.get("tools").and_then(|tools| tools.get("env")) else {
        return Ok(Vec::new());
    };
    let bad = |field: String, value: &Value, allowed: &str| ToolSettingsError::Value {
        path: path.to_owned(),
        field,
        value: value.as_str().map_or_else(|| value.to_string(), str::to_owned),
        allowed: vec![allowed.to_owned()],
    };
    let Some(table) = table.as_object() else {
        return Err(bad("env".into(), table, "a table of pattern = [variable names]"));
    };
    let mut rules = Vec::new();
    for (pattern, value) in table {
        let field = || format!("env.{pattern:?}");
        let Some(list) = value.as_array() else {
            return Err(bad(field(), value, "a list of variable names"));
        };
        let mut names = Vec::new();
        for name in list {
            match name.as_str() {
                Some(n) if is_env_name(n) => names.push(n.to_owned()),
                _ => {
                    return Err(bad(
                        field(),
                        name,
                        "variable names (letters, digits and _, not starting with a digit)",
                    ));
                }
            }
        }
        rules.push(EnvRule { tool: pattern.clone(), names });
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_variables_each_tool_may_have() {
        let text = r#"
[tools]
permissions = { "x" = "allow" }
env = { "search/web" = ["OPENAI_API_KEY", "HTTP_PROXY"], "*/mcp:brave" = [] }
"#;
        let rules = tool_env_from_toml(text, Path::new("config.toml")).unwrap();
        assert_eq!(
            rules,
            vec![
                EnvRule { tool: "*/mcp:brave".into(), names: vec![] },
                EnvRule {
                    tool: "search/web".into(),
                    names: vec!["OPENAI_API_KEY".into(), "HTTP_PROXY".into()]
                },
            ]
        );
        assert!(tool_env_from_toml("[tools]\n", Path::new("c.toml")).unwrap().is_empty());
        let err = tool_env_from_toml("[tools]\nenv = { \"a\" = [\"A=B\"] }\n", Path::new("c.toml"))
            .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "c.toml: tools.env.\"a\" = \"A=B\": allowed values are variable names"
            ),
            "{err}"
        );
        let err = tool_env_from_toml("[tools]\nenv = { \"a\" = \"KEY\" }\n", Path::new("c.toml"))
            .unwrap_err();
        assert!(err.to_string().contains("a list of variable names"), "{err}");
        let err =
            tool_env_from_toml("[tools]\nenv = [\"KEY\"]\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("tools.env"), "{err}");
    }

    #[test]
    fn reads_permissions_callers_and_confirmation() {
        let text = r#"
[tools]
permissions = { "write_*" = "ask", "files/delete" = "deny" }
callers = { "shell_bash" = "code" }
confirmation = "allow"
"#;
        let s = tool_settings_from_toml(text, Path::new("config.toml")).unwrap();
        assert_eq!(s.deployment.len(), 2);
        assert!(s.deployment.contains(&PermissionRule {
            tool: "files/delete".into(),
            permission: Permission::Deny
        }));
        assert_eq!(
            s.deployment_callers,
            vec![CallersRule { tool: "shell_bash".into(), callers: Callers::Code }]
        );
        assert_eq!(s.confirmation, Some(Permission::Allow));
        assert!(s.person.is_empty());
    }

    #[test]
    fn a_bad_value_names_the_field_and_the_allowed_values() {
        let text = "[tools]\npermissions = { \"x\" = \"maybe\" }\n";
        let err = tool_settings_from_toml(text, Path::new("config.toml")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "config.toml: tools.permissions.\"x\" = \"maybe\": allowed values are allow, ask, deny"
        );
        let none = tool_settings_from_toml("[other]\na = 1\n", Path::new("c.toml")).unwrap();
        assert_eq!(none, PermissionSettings::default());
        assert!(tool_settings_from_toml("[tools", Path::new("c.toml")).is_err());
    }
}
