//! [`History`]: what a drive of a run knows about the run's recorded commands that the code
//! has not reached yet, and the rule that keeps a resume from running anything twice.
//!
//! The rule (its proof sketch is in `docs/flow-runtime.md`): a command with no record (a
//! new call, step or question) may be issued in a scope only once every recorded call,
//! step and question of that scope has been reached by the code. Until then it is *held*.
//! When the run can make no other progress (every piece of live work is held or waits on a
//! question), a held command is a divergence: it fails with `Nondeterminism`, naming what
//! the history still holds, and nothing new runs in the run from then on.
//!
//! Scopes are the prefixes of identities: `""` for the run's own flow, `t<task>/` for a
//! child flow or a tool with a context, `w<task>/` for a worker. A recorded command's
//! dependants (acceptances, answers, hook events, receipts: identities with `@`) are not
//! counted: they belong to their command.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use clio_journal::{EntryKind, RawEntry};
use serde_json::Value;
use tokio::sync::Notify;

use crate::error::{FlowError, RecordedCommand};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Returns the scope prefix of `identity`: `t<n>/` or `w<n>/`, else `""` (the run's flow).
pub(crate) fn scope_of(identity: &str) -> &str {
    let bytes = identity.as_bytes();
    if bytes.first().is_some_and(|b| *b == b't' || *b == b'w') {
        let digits = bytes[1..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 && bytes.get(1 + digits) == Some(&b'/') {
            return &identity[..digits + 2];
        }
    }
    ""
}

/// Returns whether a recorded entry is a command the code must reach again on replay.
pub(crate) fn is_tracked(identity: &str, entry: &RawEntry) -> bool {
    matches!(entry.kind, EntryKind::Call | EntryKind::Step | EntryKind::Question)
        && !identity.contains('@')
}

/// How a held command ended its wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Its scope has caught up with the history: it may run.
    CaughtUp,
    /// The run could make no other progress while the history still held unreached
    /// commands of its scope.
    Stalled,
}

/// The run's recorded commands not reached yet, and the commands waiting on them.
pub(crate) struct History {
    /// Unreached tracked commands by scope, as their sequence numbers (identities are
    /// looked up only to report a mismatch).
    unreached: Mutex<HashMap<String, BTreeSet<u64>>>,
    /// How many are unreached in all (0: the fast path, nothing to check).
    remaining: AtomicUsize,
    /// Commands held at the barrier (each also counts as waiting in the run's activity).
    held: AtomicUsize,
    /// `ctx.patched` questions held at the barrier (answered `false` at a stall).
    patches: AtomicUsize,
    /// Bumped at each stall of held commands: a waiter that counted itself before was
    /// stalled.
    stalls: AtomicU64,
    /// Bumped at each stall that answers held patch questions.
    patch_stalls: AtomicU64,
    /// Set once a held command diverged: nothing new runs in the run after that.
    diverged: AtomicBool,
    /// The first divergence, which the run ends with.
    first: Mutex<Option<FlowError>>,
    changed: Notify,
}

impl History {
    /// Builds the history of recorded entries `recorded` (identity → entry).
    pub(crate) fn new(recorded: &HashMap<String, RawEntry>) -> History {
        let mut unreached: HashMap<String, BTreeSet<u64>> = HashMap::new();
        let mut remaining = 0;
        for (identity, entry) in recorded {
            if is_tracked(identity, entry) {
                let scope = scope_of(identity);
                // Most entries share a few scopes: a key is made once per scope.
                match unreached.get_mut(scope) {
                    Some(seqs) => {
                        seqs.insert(entry.seq);
                    }
                    None => {
                        unreached.insert(scope.to_owned(), BTreeSet::from([entry.seq]));
                    }
                }
                remaining += 1;
            }
        }
        History {
            unreached: Mutex::new(unreached),
            remaining: AtomicUsize::new(remaining),
            held: AtomicUsize::new(0),
            patches: AtomicUsize::new(0),
            stalls: AtomicU64::new(0),
            patch_stalls: AtomicU64::new(0),
            diverged: AtomicBool::new(false),
            first: Mutex::new(None),
            changed: Notify::new(),
        }
    }

    /// Records that the code reached recorded command `identity` (a no-op for anything
    /// untracked or already reached).
    pub(crate) fn reach(&self, identity: &str, entry: &RawEntry) {
        if self.remaining.load(Ordering::Acquire) == 0 || !is_tracked(identity, entry) {
            return;
        }
        let mut unreached = lock(&self.unreached);
        let scope = scope_of(identity);
        let Some(left) = unreached.get_mut(scope) else { return };
        if left.remove(&entry.seq) {
            self.remaining.fetch_sub(1, Ordering::AcqRel);
            if left.is_empty() {
                unreached.remove(scope);
                drop(unreached);
                self.changed.notify_waiters();
            }
        }
    }

    /// Counts every recorded command of scope `scope` as reached: the work of a call that
    /// replays from its finished task's record does not run again.
    pub(crate) fn settle(&self, scope: &str) {
        if self.remaining.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut unreached = lock(&self.unreached);
        if let Some(left) = unreached.remove(scope) {
            self.remaining.fetch_sub(left.len(), Ordering::AcqRel);
            drop(unreached);
            self.changed.notify_waiters();
        }
    }

    /// Returns whether scope `scope` has recorded commands not reached yet.
    pub(crate) fn behind(&self, scope: &str) -> bool {
        self.remaining.load(Ordering::Acquire) > 0 && lock(&self.unreached).contains_key(scope)
    }

    /// Returns the unreached recorded commands of `scope` (every scope for `None`), in
    /// recorded order, described from `recorded` (at most `max`).
    pub(crate) fn unreached_in(
        &self,
        scope: Option<&str>,
        recorded: &HashMap<String, RawEntry>,
        describe: impl Fn(&str, &RawEntry) -> RecordedCommand,
        max: usize,
    ) -> Vec<RecordedCommand> {
        let seqs: BTreeSet<u64> = {
            let unreached = lock(&self.unreached);
            match scope {
                Some(scope) => {
                    unreached.get(scope).into_iter().flatten().copied().take(max).collect()
                }
                None => unreached.values().flatten().copied().collect(),
            }
        };
        if seqs.is_empty() {
            return Vec::new();
        }
        let mut found: Vec<(u64, RecordedCommand)> = recorded
            .iter()
            .filter(|(id, e)| {
                seqs.contains(&e.seq)
                    && is_tracked(id, e)
                    && scope.is_none_or(|scope| scope_of(id) == scope)
            })
            .map(|(id, e)| (e.seq, describe(id, e)))
            .collect();
        found.sort_by_key(|(seq, _)| *seq);
        found.into_iter().take(max).map(|(_, c)| c).collect()
    }

    /// Returns whether a held command diverged in this drive.
    pub(crate) fn diverged(&self) -> bool {
        self.diverged.load(Ordering::Acquire)
    }

    /// Returns the first divergence of this drive.
    pub(crate) fn first_divergence(&self) -> Option<FlowError> {
        lock(&self.first).clone()
    }

    /// Records divergence `err` (the first one is kept) and returns it.
    pub(crate) fn diverge(&self, err: FlowError) -> FlowError {
        self.diverged.store(true, Ordering::Release);
        let mut first = lock(&self.first);
        if first.is_none() {
            *first = Some(err.clone());
        }
        err
    }

    /// Waits until scope `scope` has caught up with the history, or until the run stalls.
    /// `waiting` is told when the wait starts and ends (the run's activity counts it as a
    /// piece of work that waits). A `patch` wait is answered first at a stall.
    pub(crate) async fn hold(
        &self,
        scope: &str,
        patch: bool,
        waiting: impl Fn(isize),
    ) -> Admission {
        let (counter, stalls) =
            if patch { (&self.patches, &self.patch_stalls) } else { (&self.held, &self.stalls) };
        let mut start = None;
        let admission = loop {
            let changed = self.changed.notified();
            if !self.behind(scope) {
                break Admission::CaughtUp;
            }
            match start {
                Some(start) if stalls.load(Ordering::Acquire) != start => break Admission::Stalled,
                Some(_) => {}
                None => {
                    start = Some(stalls.load(Ordering::Acquire));
                    counter.fetch_add(1, Ordering::AcqRel);
                    waiting(1);
                    // Checked again once counted, so a stall cannot pass it by.
                    continue;
                }
            }
            changed.await;
        };
        if start.is_some() {
            counter.fetch_sub(1, Ordering::AcqRel);
            waiting(-1);
        }
        admission
    }

    /// Called when every piece of the run's live work waits: answers held `patched`
    /// questions first (the history predates the patch), else stalls held commands. Returns
    /// whether anything was waiting here (so the run may move again).
    pub(crate) fn stall(&self) -> bool {
        let stalls = if self.patches.load(Ordering::Acquire) > 0 {
            &self.patch_stalls
        } else if self.held.load(Ordering::Acquire) > 0 {
            &self.stalls
        } else {
            return false;
        };
        stalls.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_waiters();
        true
    }
}

/// Describes recorded command `identity` for a mismatch: its kind, target and whether it
/// could repeat an effect. `side_effecting` decides for a call's target.
pub(crate) fn describe(
    identity: &str,
    entry: &RawEntry,
    side_effecting: impl Fn(&str) -> bool,
) -> RecordedCommand {
    let payload = entry.payload_value().unwrap_or(Value::Null);
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => o.get("id").and_then(Value::as_str).unwrap_or("").to_owned(),
        Some(v) => v.to_string(),
        None => String::new(),
    };
    // A call's entry is its command; a step's holds its command and result; a question's
    // is its command.
    match entry.kind {
        EntryKind::Call => {
            let target = text(payload.get("target"));
            RecordedCommand {
                identity: identity.to_owned(),
                kind: "call".into(),
                side_effecting: side_effecting(&target),
                target,
            }
        }
        EntryKind::Step => RecordedCommand {
            identity: identity.to_owned(),
            kind: "step".into(),
            target: text(payload.pointer("/command/name")),
            side_effecting: true,
        },
        _ => RecordedCommand {
            identity: identity.to_owned(),
            kind: "ask".into(),
            target: text(payload.get("question")),
            side_effecting: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::scope_of;

    #[test]
    fn scopes_are_the_task_prefixes_and_everything_else_is_the_run_flow() {
        assert_eq!(scope_of("t12/src/a.rs:1:2:ab#0"), "t12/");
        assert_eq!(scope_of("w3/key:model:0"), "w3/");
        assert_eq!(scope_of("src/a.rs:1:2:ab#0"), "");
        assert_eq!(scope_of("key:wf:a"), "");
        assert_eq!(scope_of("t/x"), "");
        assert_eq!(scope_of("tx1/y"), "");
        assert_eq!(scope_of("w"), "");
        assert_eq!(scope_of(""), "");
    }
}
