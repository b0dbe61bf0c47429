//! Hook declarations (SPEC §11): the events a hook can be keyed by, what each event may
//! do, the `tools` matcher, and the order in which the hooks of several plugins run.
//!
//! Ordering is topological over `before`/`after`, ties broken by plugin order and then
//! hook id; a cycle is a load error naming the hooks on it. A `before`/`after` entry that
//! names no loaded hook adds no edge: it may name a hook of a plugin this agent does not
//! carry.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use serde_json::{Value as Json, json};

/// The SDK's event keys and CLIO's event names, in the order of SPEC §11.
pub const HOOK_EVENTS: &[(&str, &str)] = &[
    ("tool_call", "PreToolUse"),
    ("tool_result", "PostToolUse"),
    ("tool_batch", "PostToolBatch"),
    ("prompt_submit", "UserPromptSubmit"),
    ("stop", "Stop"),
    ("session_start", "SessionStart"),
    ("session_end", "SessionEnd"),
    ("subagent_start", "SubagentStart"),
    ("subagent_stop", "SubagentStop"),
    ("pre_compact", "PreCompact"),
    ("model_request", "BeforeModel"),
    ("model_response", "AfterModel"),
    ("event", "SemanticEvent"),
];

/// One hook event, by its position in [`HOOK_EVENTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HookEventKind(usize);

/// What answers to an event can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventPower {
    /// `PreToolUse`, `UserPromptSubmit`, `BeforeModel`: every decision applies.
    CanDeny,
    /// `Stop`: a `deny` asks for one more bounded turn; nothing else applies.
    CanContinue,
    /// Every other event: hooks observe; only context (and `updated_output` on
    /// `PostToolUse`) applies.
    Observe,
}

/// Each event by name, so that the runtime names the event it fires in code, not in a
/// string looked up at run time.
impl HookEventKind {
    /// `PreToolUse` (`tool_call`).
    pub const PRE_TOOL_USE: HookEventKind = HookEventKind(0);
    /// `PostToolUse` (`tool_result`).
    pub const POST_TOOL_USE: HookEventKind = HookEventKind(1);
    /// `PostToolBatch` (`tool_batch`).
    pub const POST_TOOL_BATCH: HookEventKind = HookEventKind(2);
    /// `UserPromptSubmit` (`prompt_submit`).
    pub const USER_PROMPT_SUBMIT: HookEventKind = HookEventKind(3);
    /// `Stop` (`stop`).
    pub const STOP: HookEventKind = HookEventKind(4);
    /// `SessionStart` (`session_start`).
    pub const SESSION_START: HookEventKind = HookEventKind(5);
    /// `SessionEnd` (`session_end`).
    pub const SESSION_END: HookEventKind = HookEventKind(6);
    /// `SubagentStart` (`subagent_start`).
    pub const SUBAGENT_START: HookEventKind = HookEventKind(7);
    /// `SubagentStop` (`subagent_stop`).
    pub const SUBAGENT_STOP: HookEventKind = HookEventKind(8);
    /// `PreCompact` (`pre_compact`).
    pub const PRE_COMPACT: HookEventKind = HookEventKind(9);
    /// `BeforeModel` (`model_request`).
    pub const BEFORE_MODEL: HookEventKind = HookEventKind(10);
    /// `AfterModel` (`model_response`).
    pub const AFTER_MODEL: HookEventKind = HookEventKind(11);
    /// `SemanticEvent` (`event`).
    pub const SEMANTIC_EVENT: HookEventKind = HookEventKind(12);

    /// Looks up an SDK key such as `tool_call`.
    pub fn from_key(key: &str) -> Option<HookEventKind> {
        HOOK_EVENTS.iter().position(|(k, _)| *k == key).map(HookEventKind)
    }

    /// Looks up a CLIO event name such as `PreToolUse`.
    pub fn from_name(name: &str) -> Option<HookEventKind> {
        HOOK_EVENTS.iter().position(|(_, n)| *n == name).map(HookEventKind)
    }

    /// Returns every event, in [`HOOK_EVENTS`] order.
    pub fn all() -> impl Iterator<Item = HookEventKind> {
        (0..HOOK_EVENTS.len()).map(HookEventKind)
    }

    /// Returns the SDK key, such as `tool_call`.
    pub fn key(self) -> &'static str {
        HOOK_EVENTS[self.0].0
    }

    /// Returns CLIO's name, such as `PreToolUse`.
    pub fn name(self) -> &'static str {
        HOOK_EVENTS[self.0].1
    }

    /// Returns what answers to this event can do.
    pub fn power(self) -> EventPower {
        match self.name() {
            "PreToolUse" | "UserPromptSubmit" | "BeforeModel" => EventPower::CanDeny,
            "Stop" => EventPower::CanContinue,
            _ => EventPower::Observe,
        }
    }

    /// Says whether the event concerns one tool, so that a `tools` matcher applies.
    pub fn is_tool_event(self) -> bool {
        matches!(self.name(), "PreToolUse" | "PostToolUse")
    }
}

impl fmt::Display for HookEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a hook is carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookHandler {
    /// The host registers a Rust callback under the plugin's id and the hook's id.
    Host,
    /// An executable, relative to `ai.iowarp.clio/`, that reads the `HookEvent` JSON on
    /// stdin and prints a decision.
    Command {
        /// The program's path, relative to `ai.iowarp.clio/`.
        command: PathBuf,
        /// Seconds before the hook counts as failed; 30 when unset.
        timeout_secs: Option<u64>,
    },
    /// A Python function of the plugin (`@hook` in `plugin.py`), called with a
    /// `HookEvent` in the plugin's Python child; what it returns is its decision.
    Python {
        /// The file that defines it, relative to `ai.iowarp.clio/`.
        file: PathBuf,
        /// The function's name in that file.
        function: String,
    },
}

/// A hook a plugin declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The event it answers.
    pub event: HookEventKind,
    /// Its id, unique within the plugin; others order themselves against it.
    pub id: String,
    /// Hooks this one must run before (ids, or `plugin/id`).
    pub before: Vec<String>,
    /// Hooks this one must run after (ids, or `plugin/id`).
    pub after: Vec<String>,
    /// Which tools it applies to on tool events: `""` for all, else `|`-separated names
    /// where `*` matches any run of characters (`write_*|edit_file`).
    pub tools: String,
    /// A failure or timeout denies (on events that can deny) instead of being skipped.
    pub fail_closed: bool,
    /// How it runs.
    pub handler: HookHandler,
}

impl Hook {
    /// Declares hook `id` on `event`, run by the host, with no ordering or matcher.
    pub fn new(event: HookEventKind, id: impl Into<String>) -> Hook {
        Hook {
            event,
            id: id.into(),
            before: Vec::new(),
            after: Vec::new(),
            tools: String::new(),
            fail_closed: false,
            handler: HookHandler::Host,
        }
    }

    /// Says whether this hook applies to a call of tool `tool`.
    pub fn matches_tool(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.split('|').any(|pattern| glob(pattern.trim(), tool))
    }

    pub(crate) fn describe(&self) -> Json {
        let handler = match &self.handler {
            HookHandler::Host => json!({"kind": "host"}),
            HookHandler::Python { file, function } => json!({
                "kind": "python",
                "file": crate::decl::slash_path(file),
                "function": function,
            }),
            HookHandler::Command { command, timeout_secs } => json!({
                "kind": "command",
                "command": crate::decl::slash_path(command),
                "timeout_secs": timeout_secs,
            }),
        };
        json!({
            "event": self.event.key(),
            "clio_event": self.event.name(),
            "id": self.id,
            "before": self.before,
            "after": self.after,
            "tools": self.tools,
            "fail_closed": self.fail_closed,
            "handler": handler,
        })
    }
}

/// Matches `text` against `pattern`, where `*` matches any run of characters.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else { return pattern == text };
    let Some(mut remaining) = text.strip_prefix(first) else { return false };
    let mut parts: Vec<&str> = rest.split('*').collect();
    let last = parts.pop().unwrap_or_default();
    for part in parts {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

/// A hook to order: the plugin it comes from and its declaration.
#[derive(Debug, Clone, Copy)]
pub struct HookRef<'a> {
    /// The plugin's id.
    pub plugin: &'a str,
    /// The plugin's position in the agent's plugin list; lower runs first on ties.
    pub plugin_order: usize,
    /// The hook.
    pub hook: &'a Hook,
}

/// Why hooks cannot be ordered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookOrderError {
    /// `before`/`after` form a cycle; `hooks` are the hooks on it, as `plugin/id`.
    #[error("hook ordering cycle: {}", hooks.join(" -> "))]
    Cycle {
        /// The hooks on the cycle, in order, the first repeated at the end.
        hooks: Vec<String>,
    },
}

/// Returns the indexes of `hooks` in the order they run: topological over
/// `before`/`after`, ties by plugin order, then id, then position.
///
/// Hooks of different events can be ordered together; only the relative order of hooks
/// of one event matters to the runtime.
pub fn order_hooks(hooks: &[HookRef<'_>]) -> Result<Vec<usize>, HookOrderError> {
    let n = hooks.len();
    let named = |target: &str, idx: usize| {
        let h = &hooks[idx];
        target == h.hook.id || target.split_once('/') == Some((h.plugin, h.hook.id.as_str()))
    };
    // successors[a] holds b when a runs before b.
    let mut successors: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for (a, h) in hooks.iter().enumerate() {
        for b in 0..n {
            if a == b {
                continue;
            }
            if h.hook.before.iter().any(|t| named(t, b)) {
                successors[a].insert(b);
            }
            if h.hook.after.iter().any(|t| named(t, b)) {
                successors[b].insert(a);
            }
        }
    }
    let mut indegree = vec![0usize; n];
    for succ in &successors {
        for &b in succ {
            indegree[b] += 1;
        }
    }
    let key = |idx: usize| (hooks[idx].plugin_order, hooks[idx].hook.id.clone(), idx);
    let mut ready: BTreeSet<(usize, String, usize)> =
        (0..n).filter(|&i| indegree[i] == 0).map(key).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(next) = ready.pop_first() {
        let idx = next.2;
        order.push(idx);
        for &b in &successors[idx] {
            indegree[b] -= 1;
            if indegree[b] == 0 {
                ready.insert(key(b));
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    Err(HookOrderError::Cycle { hooks: find_cycle(hooks, &successors, &indegree) })
}

/// Walks from a hook left with incoming edges until a hook repeats, returning that loop.
fn find_cycle(
    hooks: &[HookRef<'_>],
    successors: &[BTreeSet<usize>],
    indegree: &[usize],
) -> Vec<String> {
    let name = |idx: usize| format!("{}/{}", hooks[idx].plugin, hooks[idx].hook.id);
    let Some(start) = (0..hooks.len()).find(|&i| indegree[i] > 0) else { return Vec::new() };
    let mut path = vec![start];
    let mut current = start;
    loop {
        // Every node left over lies on or leads to a cycle, so a successor with
        // remaining indegree always exists.
        let Some(&next) = successors[current].iter().find(|&&b| indegree[b] > 0) else {
            return path.into_iter().map(name).collect();
        };
        if let Some(at) = path.iter().position(|&p| p == next) {
            let mut cycle: Vec<String> = path[at..].iter().map(|&p| name(p)).collect();
            cycle.push(name(next));
            return cycle;
        }
        path.push(next);
        current = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_named_event_is_its_row_of_the_table() {
        let named = [
            (HookEventKind::PRE_TOOL_USE, "PreToolUse"),
            (HookEventKind::POST_TOOL_USE, "PostToolUse"),
            (HookEventKind::POST_TOOL_BATCH, "PostToolBatch"),
            (HookEventKind::USER_PROMPT_SUBMIT, "UserPromptSubmit"),
            (HookEventKind::STOP, "Stop"),
            (HookEventKind::SESSION_START, "SessionStart"),
            (HookEventKind::SESSION_END, "SessionEnd"),
            (HookEventKind::SUBAGENT_START, "SubagentStart"),
            (HookEventKind::SUBAGENT_STOP, "SubagentStop"),
            (HookEventKind::PRE_COMPACT, "PreCompact"),
            (HookEventKind::BEFORE_MODEL, "BeforeModel"),
            (HookEventKind::AFTER_MODEL, "AfterModel"),
            (HookEventKind::SEMANTIC_EVENT, "SemanticEvent"),
        ];
        assert_eq!(named.len(), HOOK_EVENTS.len());
        for (kind, name) in named {
            assert_eq!(kind.name(), name);
        }
    }

    #[test]
    fn glob_matches_stars_anywhere() {
        assert!(glob("write_*", "write_file"));
        assert!(glob("*_file", "read_file"));
        assert!(glob("a*c*e", "abcde"));
        assert!(!glob("a*c*e", "abcd"));
        assert!(glob("*", ""));
        assert!(!glob("read", "read_file"));
        assert!(!glob("ab*ba", "aba"));
        assert!(glob("a**b", "axyb"), "stars in a row are one star");
        assert!(glob("files/*", "files/read/deep"), "a star crosses a slash");
    }

    /// Only `*` is special: the characters other glob syntaxes give a meaning (`?`, `[`,
    /// `]`, `{`, `}`, `\`) match themselves, so a pattern means what it says
    /// (docs/decisions.md, "Tool patterns stay hand-matched").
    #[test]
    fn glob_takes_every_other_character_literally() {
        assert!(glob("a?b", "a?b") && !glob("a?b", "axb"));
        assert!(glob("[x]", "[x]") && !glob("[x]", "x"));
        assert!(glob("{a,b}", "{a,b}") && !glob("{a,b}", "a"));
        assert!(glob("a\\b", "a\\b") && !glob("a\\b", "ab"));
    }

    #[test]
    fn matcher_takes_alternatives() {
        let mut hook = Hook::new(HookEventKind(0), "h");
        assert!(hook.matches_tool("anything"));
        hook.tools = "write_*|edit_file".into();
        assert!(hook.matches_tool("write_note") && hook.matches_tool("edit_file"));
        assert!(!hook.matches_tool("read_file"));
    }

    #[test]
    fn every_event_has_a_key_and_a_name() {
        for event in HookEventKind::all() {
            assert_eq!(HookEventKind::from_key(event.key()), Some(event));
            assert_eq!(HookEventKind::from_name(event.name()), Some(event));
        }
        let deny: Vec<_> = HookEventKind::all()
            .filter(|e| e.power() == EventPower::CanDeny)
            .map(HookEventKind::name)
            .collect();
        assert_eq!(deny, ["PreToolUse", "UserPromptSubmit", "BeforeModel"]);
    }
}
