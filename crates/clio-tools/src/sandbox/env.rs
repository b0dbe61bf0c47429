//! The environment of a sandboxed program: a short allowlist, never `clio`'s own.
//!
//! Every program [`Sandbox::confine`](super::Sandbox::confine) prepares — a plugin's
//! executable tool, an MCP server, a hook, a script binding, a `run_code` script — starts
//! from an empty environment and gets only:
//!
//! - `PATH`: [`SANDBOX_PATH`](super::SANDBOX_PATH) (with mode `off`, `clio`'s own);
//! - `HOME` and `TMPDIR`: the program's private temporary folder (with mode `off`,
//!   `clio`'s own `HOME` and `TMPDIR`);
//! - the locale and time zone, copied from `clio`'s environment when set: `LANG`,
//!   `LANGUAGE`, every `LC_*`, `TZ` ([`is_locale`]); `LANG` is `C.UTF-8` when `clio` has
//!   none;
//! - the variables the deployment allows that program by name in `config.toml`
//!   (`[tools] env = { "plugin/tool" = ["OPENAI_API_KEY"] }`, read into [`EnvRule`]s),
//!   with `clio`'s values; one `clio` does not have is not set;
//! - what its runner sets itself after (an MCP server's declared `env` table, `run_code`'s
//!   Python settings).
//!
//! So a model key in `clio`'s environment reaches no plugin unless the person named it for
//! that plugin's tool.

use std::ffi::OsString;
use std::path::Path;

/// One `[tools] env` entry: the tools (a pattern, as in `[tools] permissions`) and the
/// variables of `clio`'s environment they get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvRule {
    /// A tool name, or `plugin/name`; `*` matches any run of characters. An MCP server is
    /// named `plugin/mcp:server`, a script binding `plugin/binding:name`.
    pub tool: String,
    /// The variables' names.
    pub names: Vec<String>,
}

/// Says whether `name` is a locale or time-zone variable, which every sandboxed program
/// gets from `clio`'s environment: `LANG`, `LANGUAGE`, `LC_*`, `TZ`.
pub fn is_locale(name: &str) -> bool {
    matches!(name, "LANG" | "LANGUAGE" | "TZ") || name.starts_with("LC_")
}

/// Says whether `name` can be an environment variable's name: ASCII letters, digits and
/// `_`, not starting with a digit.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Returns the names `rules` allow to the program `name` of plugin `plugin` (an empty
/// plugin: a tool of no plugin), each once, in the rules' order. A rule's pattern with a
/// `/` matches the plugin and the name apart; without one, the name alone.
pub(super) fn allowed(rules: &[EnvRule], plugin: &str, name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for rule in rules {
        if clio_plugins::tool_pattern_matches(&rule.tool, plugin, name) {
            for var in &rule.names {
                if !out.contains(var) {
                    out.push(var.clone());
                }
            }
        }
    }
    out
}

/// Returns the environment a sandboxed program starts with: [`the list`](self) with
/// `temp` as its `HOME` and `TMPDIR` (`None`: mode `off`, `clio`'s own), then the
/// variables `passed` with `clio`'s values.
pub(super) fn environment(temp: Option<&Path>, passed: &[String]) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = Vec::new();
    match temp {
        Some(temp) => {
            out.push(("PATH".into(), super::SANDBOX_PATH.into()));
            out.push(("HOME".into(), temp.into()));
            out.push(("TMPDIR".into(), temp.into()));
        }
        None => {
            for name in ["PATH", "HOME", "TMPDIR"] {
                if let Some(value) = std::env::var_os(name) {
                    out.push((name.into(), value));
                }
            }
        }
    }
    let mut has_lang = false;
    for (name, value) in std::env::vars_os() {
        if name.to_str().is_some_and(is_locale) {
            has_lang |= name == "LANG";
            out.push((name, value));
        }
    }
    if !has_lang {
        out.push(("LANG".into(), "C.UTF-8".into()));
    }
    for name in passed {
        if let Some(value) = std::env::var_os(name) {
            out.push((name.into(), value));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(tool: &str, names: &[&str]) -> EnvRule {
        EnvRule { tool: tool.into(), names: names.iter().map(|n| (*n).to_owned()).collect() }
    }

    #[test]
    fn rules_match_the_plugin_and_the_name_apart() {
        let rules = [
            rule("search/web", &["OPENAI_API_KEY"]),
            rule("search/*", &["SEARCH_KEY", "OPENAI_API_KEY"]),
            rule("fetch", &["PROXY"]),
            rule("*/mcp:brave", &["BRAVE_KEY"]),
        ];
        assert_eq!(allowed(&rules, "search", "web"), ["OPENAI_API_KEY", "SEARCH_KEY"]);
        assert_eq!(allowed(&rules, "search", "news"), ["SEARCH_KEY", "OPENAI_API_KEY"]);
        assert_eq!(allowed(&rules, "other", "web"), Vec::<String>::new());
        assert_eq!(allowed(&rules, "net", "fetch"), ["PROXY"]);
        assert_eq!(allowed(&rules, "net", "mcp:brave"), ["BRAVE_KEY"]);
        assert_eq!(allowed(&[], "search", "web"), Vec::<String>::new());
    }

    #[test]
    fn names_and_locale_variables() {
        assert!(is_env_name("OPENAI_API_KEY") && is_env_name("_x1"));
        assert!(!is_env_name("") && !is_env_name("1A") && !is_env_name("A-B"));
        assert!(!is_env_name("A=B"));
        assert!(is_locale("LC_ALL") && is_locale("LANG") && is_locale("TZ"));
        assert!(!is_locale("OPENAI_API_KEY") && !is_locale("LD_PRELOAD"));
    }

    #[test]
    fn the_environment_is_the_list_and_what_was_passed() {
        let env = environment(Some(Path::new("/tmp/x")), &["CLIO_TEST_NOT_SET_ANYWHERE".into()]);
        let names: Vec<String> =
            env.iter().map(|(n, _)| n.to_string_lossy().into_owned()).collect();
        assert_eq!(&names[..3], ["PATH", "HOME", "TMPDIR"]);
        assert!(names[3..].iter().all(|n| is_locale(n)), "{names:?}");
        assert!(names.contains(&"LANG".to_owned()));
        let path = std::env::var_os("PATH").unwrap_or_default();
        let passed = environment(None, &["PATH".into()]);
        assert!(passed.iter().any(|(n, v)| n == "PATH" && *v == path));
    }
}

#[cfg(test)]
mod run_tests {
    use super::EnvRule;
    use crate::sandbox::limits::tests::{Tool, modes};
    use crate::{Access, Sandbox};

    /// Prints the program's whole environment.
    const DUMP: &str = "import json, os\nprint(json.dumps(dict(os.environ)))\n";

    #[test]
    fn a_tool_sees_none_of_clio_s_environment_unless_allowed() {
        // Cargo gives the test process its `CARGO_*` variables: stand-ins for a model key.
        let secret = "CARGO_PKG_NAME";
        assert!(std::env::var_os(secret).is_some());
        let tool = Tool::new("dump", DUMP);
        for mode in modes() {
            let sandbox = Sandbox { mode, ..Sandbox::default() };
            let env = tool.run(&sandbox, &tool.access()).unwrap();
            let env = env.as_object().unwrap();
            let mut names: Vec<&str> = env.keys().map(String::as_str).collect();
            // What the sandbox adds (bubblewrap's `PWD`, the call's marker) is not clio's.
            names.retain(|n| !super::is_locale(n) && !["PWD", "CLIO_CALL"].contains(n));
            names.sort_unstable();
            if mode == crate::SandboxMode::Off {
                // clio's own `TMPDIR` only when it has one.
                names.retain(|n| *n != "TMPDIR");
                assert_eq!(names, ["HOME", "PATH"], "{mode:?}: {env:?}");
            } else {
                assert_eq!(names, ["HOME", "PATH", "TMPDIR"], "{mode:?}: {env:?}");
                assert_eq!(env["PATH"], crate::SANDBOX_PATH);
                assert_eq!(env["HOME"], env["TMPDIR"]);
            }
            // Allowed for this tool by name, it gets exactly that one, with clio's value.
            let rules = vec![
                EnvRule { tool: "t".into(), names: vec![secret.into()] },
                EnvRule { tool: "other".into(), names: vec!["CARGO_PKG_VERSION".into()] },
            ];
            let allowed = Sandbox { env: rules, ..sandbox };
            let access = Access { env: allowed.env_for("", "t"), ..tool.access() };
            let env = tool.run(&allowed, &access).unwrap();
            assert_eq!(env[secret], std::env::var(secret).unwrap(), "{mode:?}");
            assert!(env.get("CARGO_PKG_VERSION").is_none(), "{mode:?}: {env}");
        }
    }
}
