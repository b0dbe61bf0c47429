//! The rules by which the journal's records are made and changed, written once for every
//! backend: the redb store applies them to its tables, another backend to its rows, so
//! that an update means the same thing wherever it is stored.

use std::collections::HashSet;

use serde_json::value::RawValue;

use crate::error::{JournalError, Result};
use crate::format::{
    RunId, RunRecord, RunStatus, SessionRecord, SessionStatus, TaskId, TaskRecord, TaskStatus,
};
use crate::input::{NewEntry, NewRun, NewSession, NewTask, RunUpdate, SessionUpdate, TaskUpdate};

/// Returns the record of a new run `id`, status running, as of `now` (ms since the epoch).
pub fn new_run(id: RunId, new: NewRun, now: u64) -> RunRecord {
    RunRecord {
        id,
        flow: new.flow,
        input: new.input,
        input_digest: new.input_digest,
        fingerprint: new.fingerprint,
        owner: new.owner,
        status: RunStatus::Running,
        started_at_ms: now,
        updated_at_ms: now,
        finished_at_ms: None,
        answer: None,
        error: None,
        launch: new.launch,
    }
}

/// Applies `update` to a run: a finished status stamps `finished_at_ms`, any other clears it.
pub fn update_run(rec: &mut RunRecord, update: RunUpdate, now: u64) {
    let RunUpdate { status, answer, error, owner, launch } = update;
    apply_run_update(rec, RunChange { status, answer, error, owner, launch }, now);
}

/// A change to a run whose answer and launch are of the record's payload type `P` (JSON
/// values, or the text the embedded store keeps them as).
pub(crate) struct RunChange<P> {
    pub(crate) status: Option<RunStatus>,
    pub(crate) answer: Option<P>,
    pub(crate) error: Option<String>,
    pub(crate) owner: Option<String>,
    pub(crate) launch: Option<P>,
}

/// Applies `change` to a run, whatever its payloads are kept as (see [`update_run`]).
pub(crate) fn apply_run_update<P>(rec: &mut RunRecord<P>, change: RunChange<P>, now: u64) {
    if let Some(status) = change.status {
        rec.status = status;
        rec.finished_at_ms = status.is_finished().then_some(now);
    }
    if let Some(answer) = change.answer {
        rec.answer = Some(answer);
    }
    if let Some(error) = change.error {
        rec.error = Some(error);
    }
    if let Some(owner) = change.owner {
        rec.owner = owner;
    }
    if let Some(launch) = change.launch {
        rec.launch = Some(launch);
    }
    rec.updated_at_ms = now;
}

/// Returns the record of a new task `id`. The caller checks that its run and parent exist.
pub fn new_task(id: TaskId, new: NewTask, now: u64) -> TaskRecord {
    TaskRecord {
        id,
        run: new.run,
        parent: new.parent,
        kind: new.kind,
        target: new.target,
        label: new.label,
        status: new.status,
        model: new.model,
        input_tokens: 0,
        output_tokens: 0,
        result: None,
        error: None,
        owner: new.owner,
        call: new.call,
        created_at_ms: now,
        updated_at_ms: now,
    }
}

/// Applies `update` to a task; a task already finished is refused with
/// [`JournalError::TaskFinished`] and left as it was.
pub fn update_task(rec: &mut TaskRecord, update: TaskUpdate, now: u64) -> Result<()> {
    if rec.status.is_terminal() {
        return Err(JournalError::TaskFinished { task: rec.id, status: rec.status });
    }
    apply_task_update(rec, update, now);
    Ok(())
}

/// Applies the fields `update` sets to `rec`, as of `now`, whatever its status.
pub(crate) fn apply_task_update(rec: &mut TaskRecord, update: TaskUpdate, now: u64) {
    if let Some(status) = update.status {
        rec.status = status;
    }
    if let Some(model) = update.model {
        rec.model = Some(model);
    }
    if let Some(n) = update.input_tokens {
        rec.input_tokens = n;
    }
    if let Some(n) = update.output_tokens {
        rec.output_tokens = n;
    }
    if let Some(result) = update.result {
        rec.result = Some(result);
    }
    if let Some(error) = update.error {
        rec.error = Some(error);
    }
    if let Some(owner) = update.owner {
        rec.owner = owner;
    }
    rec.updated_at_ms = now;
}

/// Returns the record of a task that is recorded once it has ended: made new, then
/// changed by `update` (which may set a terminal status).
pub fn ended_task(id: TaskId, new: NewTask, update: TaskUpdate, now: u64) -> TaskRecord {
    let mut rec = new_task(id, new, now);
    apply_task_update(&mut rec, update, now);
    rec
}

/// Returns the record of a new session. The caller refuses an id already taken.
pub fn new_session(new: NewSession, now: u64) -> SessionRecord {
    SessionRecord {
        id: new.id,
        leader: new.leader,
        parent: new.parent,
        team: new.team,
        managed: new.managed,
        enabled: new.enabled,
        status: new.status,
        iteration_budget: new.iteration_budget,
        iterations_used: 0,
        router_allowlist: new.router_allowlist,
        checkpoint: None,
        owner: new.owner,
        run: new.run,
        created_at_ms: now,
        updated_at_ms: now,
    }
}

/// Gives a session of a run that `worker` has claimed to that worker, as a claim on a
/// journal with leases does; returns whether it changed.
pub fn pass_session(rec: &mut SessionRecord, worker: &str, now: u64) -> bool {
    if rec.owner == worker {
        return false;
    }
    rec.owner = worker.to_owned();
    rec.updated_at_ms = now;
    true
}

/// Applies `update` to a session.
pub fn update_session(rec: &mut SessionRecord, update: SessionUpdate, now: u64) {
    if let Some(status) = update.status {
        rec.status = status;
    }
    if let Some(enabled) = update.enabled {
        rec.enabled = enabled;
    }
    if let Some(budget) = update.iteration_budget {
        rec.iteration_budget = budget;
    }
    if let Some(allowlist) = update.router_allowlist {
        rec.router_allowlist = allowlist;
    }
    if let Some(checkpoint) = update.checkpoint {
        rec.checkpoint = Some(checkpoint);
    }
    if let Some(owner) = update.owner {
        rec.owner = owner;
    }
    rec.updated_at_ms = now;
}

/// Claims one iteration of the session's budget: the count used including this one, or
/// `None` (and no change) when the budget is spent or the session has ended.
pub fn claim_iteration(rec: &mut SessionRecord, now: u64) -> Option<u64> {
    if rec.status.is_terminal() || rec.iteration_budget.is_some_and(|b| rec.iterations_used >= b) {
        return None;
    }
    rec.iterations_used += 1;
    rec.updated_at_ms = now;
    Some(rec.iterations_used)
}

/// Marks a task interrupted if a process not in `live` left it active; returns whether it
/// changed.
pub fn reconcile_task(rec: &mut TaskRecord, live: &HashSet<String>, now: u64) -> bool {
    if rec.status.is_active() && !live.contains(&rec.owner) {
        rec.status = TaskStatus::Interrupted;
        rec.updated_at_ms = now;
        return true;
    }
    false
}

/// Marks a session lost if neither it, its owner nor its leader is in `live`; returns
/// whether it changed.
pub fn reconcile_session(rec: &mut SessionRecord, live: &HashSet<String>, now: u64) -> bool {
    let spared = live.contains(&rec.id.0)
        || live.contains(&rec.owner)
        || rec.leader.as_ref().is_some_and(|l| live.contains(&l.0));
    if rec.status.is_live() && !spared {
        rec.status = SessionStatus::Lost;
        rec.updated_at_ms = now;
        return true;
    }
    false
}

/// Marks a run interrupted if a process not in `live` left it running; returns whether it
/// changed.
pub fn reconcile_run<P>(rec: &mut RunRecord<P>, live: &HashSet<String>, now: u64) -> bool {
    if rec.status == RunStatus::Running && !live.contains(&rec.owner) {
        rec.status = RunStatus::Interrupted;
        rec.updated_at_ms = now;
        return true;
    }
    false
}

/// Returns whether a run is pruned by a prune of everything finished before `before_ms`.
pub fn is_pruned<P>(rec: &RunRecord<P>, before_ms: u64) -> bool {
    rec.status.is_finished() && rec.finished_at_ms.is_some_and(|t| t < before_ms)
}

/// Returns the JSON text an entry's payload is stored as.
pub fn payload_text(entry: &NewEntry) -> Box<RawValue> {
    entry.payload_text()
}

/// Refuses a batch that names one identity twice, naming the sequence number (counted
/// from `first`) the earlier one would get.
pub fn check_batch_identities(run: RunId, first: u64, entries: &[NewEntry]) -> Result<()> {
    let mut seen = std::collections::HashMap::new();
    for (idx, entry) in entries.iter().enumerate() {
        let Some(identity) = entry.identity.as_deref() else { continue };
        if let Some(seq) = seen.insert(identity, first + idx as u64) {
            return Err(JournalError::DuplicateIdentity {
                run,
                identity: identity.to_owned(),
                seq,
            });
        }
    }
    Ok(())
}

/// The milliseconds since the Unix epoch, as the journal stamps its records.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
