//! The team's pure rules over a snapshot of the sessions: who controls whom
//! ([`controls`]), who may wake whom ([`wake_allowed`]), whether a session may use managed
//! subagents ([`enabled`]), and which children a dead process orphaned.
//!
//! They read a [`SessionTree`] and nothing else, so they are the same whether the sessions
//! come from the journal or from a test's random tree.

use std::collections::{BTreeMap, HashSet};

use clio_journal::{SessionId, SessionRecord, SessionStatus};

/// A snapshot of sessions, indexed by id.
#[derive(Debug, Clone, Default)]
pub struct SessionTree {
    by_id: BTreeMap<SessionId, SessionRecord>,
}

impl SessionTree {
    /// Returns the tree of `records` (a later record with the same id replaces an earlier
    /// one).
    pub fn new(records: impl IntoIterator<Item = SessionRecord>) -> SessionTree {
        SessionTree { by_id: records.into_iter().map(|r| (r.id.clone(), r)).collect() }
    }

    /// Returns the session `id`, if the snapshot holds it.
    pub fn get(&self, id: &SessionId) -> Option<&SessionRecord> {
        self.by_id.get(id)
    }

    /// Returns every session, in id order.
    pub fn sessions(&self) -> impl Iterator<Item = &SessionRecord> {
        self.by_id.values()
    }

    /// Returns the ancestors of `id` through its parent links, nearest first.
    ///
    /// A parent chain that loops (which only a damaged journal could hold) stops where it
    /// would repeat a session.
    pub fn ancestors(&self, id: &SessionId) -> Vec<SessionId> {
        let mut out = Vec::new();
        let mut seen = HashSet::from([id.clone()]);
        let mut next = self.get(id).and_then(|r| r.parent.clone());
        while let Some(parent) = next {
            if !seen.insert(parent.clone()) {
                break;
            }
            next = self.get(&parent).and_then(|r| r.parent.clone());
            out.push(parent);
        }
        out
    }

    /// Returns the descendants of `id` (children, their children, ...), nearest first.
    pub fn descendants(&self, id: &SessionId) -> Vec<SessionId> {
        let mut children: BTreeMap<&SessionId, Vec<&SessionId>> = BTreeMap::new();
        for r in self.by_id.values() {
            if let Some(parent) = &r.parent {
                children.entry(parent).or_default().push(&r.id);
            }
        }
        let mut out = Vec::new();
        let mut seen = HashSet::from([id]);
        let mut next = vec![id];
        while !next.is_empty() {
            let mut after = Vec::new();
            for parent in next {
                for &child in children.get(parent).into_iter().flatten() {
                    if seen.insert(child) {
                        out.push(child.clone());
                        after.push(child);
                    }
                }
            }
            next = after;
        }
        out
    }
}

/// How the configuration decides whether sessions may use managed subagents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EnabledConfig {
    /// The configured setting, used when no session setting applies.
    pub configured: bool,
    /// A value given for this invocation (a command-line flag); when set, it decides for
    /// every session, whatever their own settings say.
    pub invocation: Option<bool>,
}

/// Returns true when `record` is a managed subagent: a leader manages it and it has a
/// parent.
pub fn is_subagent(record: &SessionRecord) -> bool {
    record.managed && record.parent.is_some()
}

/// Returns true when `record` has claimed its whole iteration budget.
pub fn is_exhausted(record: &SessionRecord) -> bool {
    record.iteration_budget.is_some_and(|budget| record.iterations_used >= budget)
}

/// Returns true when `actor` controls `target`: a leader (any session that is not a
/// managed subagent) controls its descendants; a subagent controls itself and its direct
/// children. Unknown sessions control nothing and are controlled by nobody.
pub fn controls(tree: &SessionTree, actor: &SessionId, target: &SessionId) -> bool {
    let (Some(a), Some(t)) = (tree.get(actor), tree.get(target)) else { return false };
    if is_subagent(a) {
        a.id == t.id || t.parent.as_ref() == Some(&a.id)
    } else {
        tree.ancestors(&t.id).contains(&a.id)
    }
}

/// Returns true when a message from `author` may automatically resume `recipient`.
///
/// - A managed subagent keeps its team rule: a cancelled or exhausted one stays idle; its
///   parent or leader may resume it, a sibling only when both share a task team, a child
///   of its own when it returns; an explicit ping from anyone else does not.
/// - Only a managed subagent wakes itself; an independent session stays idle.
/// - An independent recipient is resumed by an explicit ping from another independent
///   session, or by a managed child returning to it as its leader or parent.
pub fn wake_allowed(tree: &SessionTree, author: &SessionId, recipient: &SessionId) -> bool {
    let (Some(a), Some(r)) = (tree.get(author), tree.get(recipient)) else { return false };
    if is_subagent(r) {
        if r.status == SessionStatus::Cancelled || is_exhausted(r) {
            return false;
        }
        if a.id == r.id {
            return true;
        }
        let manager = r.parent.as_ref() == Some(&a.id) || r.leader.as_ref() == Some(&a.id);
        let sibling =
            is_subagent(a) && a.parent == r.parent && a.team.is_some() && a.team == r.team;
        let returning_child = is_subagent(a) && a.parent.as_ref() == Some(&r.id);
        manager || sibling || returning_child
    } else if a.id == r.id {
        false
    } else if is_subagent(a) {
        a.leader.as_ref() == Some(&r.id) || a.parent.as_ref() == Some(&r.id)
    } else {
        true
    }
}

/// Returns whether session `sid` can use managed subagents, or `None` when the snapshot
/// does not hold it.
///
/// An invocation value decides first. Otherwise a managed child reads its leader's setting
/// (a new session starts without its source's settings), any other session its own; and
/// without such a setting the configured value decides.
pub fn enabled(tree: &SessionTree, sid: &SessionId, config: EnabledConfig) -> Option<bool> {
    let record = tree.get(sid)?;
    if let Some(value) = config.invocation {
        return Some(value);
    }
    let setting = if is_subagent(record) {
        record.leader.as_ref().and_then(|l| tree.get(l)).and_then(|l| l.enabled)
    } else {
        record.enabled
    };
    Some(setting.unwrap_or(config.configured))
}

/// Returns the children (sessions with a parent) that are queued or running and that no
/// live session owns: neither the child, its leader nor any ancestor is in `live`.
pub fn orphans(tree: &SessionTree, live: &HashSet<SessionId>) -> Vec<SessionId> {
    tree.sessions()
        .filter(|r| r.parent.is_some() && r.status.is_live())
        .filter(|r| {
            let spared = live.contains(&r.id)
                || r.leader.as_ref().is_some_and(|l| live.contains(l))
                || tree.ancestors(&r.id).iter().any(|a| live.contains(a));
            !spared
        })
        .map(|r| r.id.clone())
        .collect()
}
