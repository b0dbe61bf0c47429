//! A deployment's tool settings read from TOML text: the `[tools]` table of
//! `$CLIO_HOME/config.toml`, which the CLI reads and passes here.
//!
//! ```toml
//! [tools]
//! permissions = { "write_*" = "ask", "files/delete" = "deny" }
//! callers = { "shell_bash" = "code" }
//! confirmation = "ask"
//! ```
//!
//! `permissions` and `callers` map a tool pattern (a name, `plugin/tool`, `*` for any run
//! of characters) to a value; `confirmation` is the policy for tools no one else decided.
//! Callers entries are tried in the patterns' sorted order, the first match wins.

use std::path::{Path, PathBuf};

use clio_plugins::{Callers, CallersRule, Permission, PermissionRule, PermissionSettings};
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

#[cfg(test)]
mod tests {
    use super::*;

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
