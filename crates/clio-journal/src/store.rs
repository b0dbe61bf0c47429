//! The redb tables of the journal and the operations on them inside one write transaction.
//!
//! This is the only module that names tables; `docs/journal-format.md` describes each one.
//! Every write operation validates everything first and only then writes, so that a failed
//! operation leaves nothing behind in the batch it shares a transaction with.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use redb::{ReadableTable, Table, TableDefinition, WriteTransaction};
use serde::Serialize;

use crate::backend::records;
use crate::checksum::{self, Place, decode};
use crate::error::{JournalError, Result};
use crate::format::{
    FORMAT_VERSION, JournalEntry, RawRunRecord, RunId, RunRecord, SessionId, SessionRecord, TaskId,
    TaskRecord,
};
use crate::guard::Held;
use crate::input::{
    EncodedEntry, NewRun, NewSession, NewTask, Pruned, RawRunUpdate, Reconciled, SessionUpdate,
    TaskUpdate,
};
use crate::redo::{self, RedoLog, Write};

/// Counters and the format version, by name.
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("clio_meta");
/// Run id → JSON [`RunRecord`].
pub(crate) const RUNS: TableDefinition<u64, &[u8]> = TableDefinition::new("clio_runs");
/// Run id → the next sequence number of the run (its entry count).
pub(crate) const RUN_HEADS: TableDefinition<u64, u64> = TableDefinition::new("clio_run_heads");
/// (run id, seq) → JSON [`JournalEntry`].
pub(crate) const ENTRIES: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("clio_entries");
/// (run id, identity) → seq of the entry that holds it.
pub(crate) const IDENTITIES: TableDefinition<(u64, &str), u64> =
    TableDefinition::new("clio_identities");
/// Task id → JSON [`TaskRecord`].
pub(crate) const TASKS: TableDefinition<u64, &[u8]> = TableDefinition::new("clio_tasks");
/// (run id, task id) → (): the tasks of each run.
pub(crate) const RUN_TASKS: TableDefinition<(u64, u64), ()> =
    TableDefinition::new("clio_run_tasks");
/// Task id → (): tasks whose status is not terminal.
pub(crate) const LIVE_TASKS: TableDefinition<u64, ()> = TableDefinition::new("clio_live_tasks");
/// Session id → JSON [`SessionRecord`].
pub(crate) const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("clio_sessions");
/// Session id → (): sessions whose status is queued or running.
pub(crate) const LIVE_SESSIONS: TableDefinition<&str, ()> =
    TableDefinition::new("clio_live_sessions");

pub(crate) const KEY_FORMAT_VERSION: &str = "format_version";
pub(crate) const KEY_NEXT_RUN: &str = "next_run";
pub(crate) const KEY_NEXT_TASK: &str = "next_task";
/// The lsn of the last write-ahead record the file holds (see `wal`).
pub(crate) const KEY_WAL_LSN: &str = "wal_lsn";
/// The generation of the log that may hold records after `wal_lsn` (absent: a file from
/// before generations, whose log has format 1).
pub(crate) const KEY_WAL_GEN: &str = "wal_gen";
/// 1 when that log is live (it may hold acknowledged records the file lacks), 0 or absent
/// when the file holds everything.
pub(crate) const KEY_WAL_LIVE: &str = "wal_live";
/// A random id of the journal, which ties its write-ahead log to it.
pub(crate) const KEY_JOURNAL_ID: &str = "journal_id";

pub(crate) use crate::backend::records::now_ms;

/// Extension that maps redb results onto [`JournalError`] naming the file.
pub(crate) trait AtPath<T> {
    /// Maps the error, naming `path`.
    fn at(self, path: &Path) -> Result<T>;
}

impl<T, E: Into<redb::Error>> AtPath<T> for std::result::Result<T, E> {
    fn at(self, path: &Path) -> Result<T> {
        self.map_err(|err| JournalError::from_redb(path, err))
    }
}

/// Returns the value to store for `value` at `place`: its JSON followed by its checksum
/// (see `checksum`).
pub(crate) fn encode<T: Serialize>(place: Place<'_>, value: &T) -> Vec<u8> {
    // Serialising plain records with string keys into a Vec cannot fail.
    checksum::seal(place, serde_json::to_vec(value).unwrap_or_default())
}

/// Creates every table and the format-version record in a fresh file.
pub(crate) fn initialise(txn: &WriteTransaction, path: &Path) -> Result<()> {
    let mut meta = Held::new(txn.open_table(META).at(path)?);
    meta.insert(KEY_FORMAT_VERSION, FORMAT_VERSION).at(path)?;
    meta.insert(KEY_NEXT_RUN, 1).at(path)?;
    meta.insert(KEY_NEXT_TASK, 1).at(path)?;
    // A new journal's log starts at generation 0, not live: it has never held a record.
    meta.insert(KEY_WAL_GEN, 0).at(path)?;
    meta.insert(KEY_WAL_LIVE, 0).at(path)?;
    drop(meta);
    txn.open_table(RUNS).at(path)?;
    txn.open_table(RUN_HEADS).at(path)?;
    txn.open_table(ENTRIES).at(path)?;
    txn.open_table(IDENTITIES).at(path)?;
    txn.open_table(TASKS).at(path)?;
    txn.open_table(RUN_TASKS).at(path)?;
    txn.open_table(LIVE_TASKS).at(path)?;
    txn.open_table(SESSIONS).at(path)?;
    txn.open_table(LIVE_SESSIONS).at(path)?;
    Ok(())
}

/// One write transaction as the operations see it, with every table open once per batch
/// (opening a table per operation costs more than most operations).
pub(crate) struct Tx<'a> {
    path: &'a Path,
    now: u64,
    meta: Held<Table<'a, &'static str, u64>>,
    runs: Held<Table<'a, u64, &'static [u8]>>,
    run_heads: Held<Table<'a, u64, u64>>,
    entries: Held<Table<'a, (u64, u64), &'static [u8]>>,
    identities: Held<Table<'a, (u64, &'static str), u64>>,
    tasks: Held<Table<'a, u64, &'static [u8]>>,
    run_tasks: Held<Table<'a, (u64, u64), ()>>,
    live_tasks: Held<Table<'a, u64, ()>>,
    sessions: Held<Table<'a, &'static str, &'static [u8]>>,
    live_sessions: Held<Table<'a, &'static str, ()>>,
    /// The batch's writes, kept when the batch goes through the write-ahead log.
    redo: Option<RedoLog>,
    /// Id counters and run heads as the batch has moved them, written once by
    /// [`Tx::finish`] rather than by every operation (most operations move both).
    counters: BTreeMap<&'static str, u64>,
    heads: BTreeMap<u64, u64>,
}

impl<'a> Tx<'a> {
    /// Opens every table in `txn`; `now` stamps the records the batch writes.
    pub(crate) fn open(txn: &'a WriteTransaction, path: &'a Path, now: u64) -> Result<Self> {
        Ok(Self {
            path,
            now,
            meta: Held::new(txn.open_table(META).at(path)?),
            runs: Held::new(txn.open_table(RUNS).at(path)?),
            run_heads: Held::new(txn.open_table(RUN_HEADS).at(path)?),
            entries: Held::new(txn.open_table(ENTRIES).at(path)?),
            identities: Held::new(txn.open_table(IDENTITIES).at(path)?),
            tasks: Held::new(txn.open_table(TASKS).at(path)?),
            run_tasks: Held::new(txn.open_table(RUN_TASKS).at(path)?),
            live_tasks: Held::new(txn.open_table(LIVE_TASKS).at(path)?),
            sessions: Held::new(txn.open_table(SESSIONS).at(path)?),
            live_sessions: Held::new(txn.open_table(LIVE_SESSIONS).at(path)?),
            redo: None,
            counters: BTreeMap::new(),
            heads: BTreeMap::new(),
        })
    }

    /// Sets the time that stamps the records the batch writes: a transaction opened before
    /// its batch came is stamped when the batch comes.
    pub(crate) fn set_now(&mut self, now: u64) {
        self.now = now;
    }

    /// Writes the id counters and run heads the batch moved; the writer calls it once, after
    /// the batch's operations and before the commit.
    pub(crate) fn finish(&mut self) -> Result<()> {
        for (key, value) in std::mem::take(&mut self.counters) {
            self.put(Write::Meta { key, value })?;
        }
        for (run, next) in std::mem::take(&mut self.heads) {
            self.put(Write::RunHead { run, next })?;
        }
        Ok(())
    }

    /// Returns the next sequence number of `run` (its entry count), `None` for no such run.
    fn run_head(&self, run: RunId) -> Result<Option<u64>> {
        if let Some(next) = self.heads.get(&run.0) {
            return Ok(Some(*next));
        }
        Ok(self.run_heads.get(run.0).at(self.path)?.map(|v| v.value()))
    }

    /// Keeps a redo record of every write from now on, for the write-ahead log.
    pub(crate) fn keep_redo(&mut self) {
        self.redo = Some(RedoLog::default());
    }

    /// Returns the redo record kept since [`Tx::keep_redo`].
    pub(crate) fn take_redo(&mut self) -> Option<RedoLog> {
        self.redo.take()
    }

    /// Records that the file holds the write-ahead log up to `lsn` (not itself logged).
    pub(crate) fn set_wal_lsn(&mut self, lsn: u64) -> Result<()> {
        self.meta.insert(KEY_WAL_LSN, lsn).at(self.path)?;
        Ok(())
    }

    /// Returns the lsn of the last write-ahead record the file holds (0 for none).
    pub(crate) fn wal_lsn(&self) -> Result<u64> {
        Ok(self.meta.get(KEY_WAL_LSN).at(self.path)?.map_or(0, |v| v.value()))
    }

    /// Records the log generation the file expects and whether it is live (not logged).
    pub(crate) fn set_wal_generation(&mut self, generation: u64, live: bool) -> Result<()> {
        self.meta.insert(KEY_WAL_GEN, generation).at(self.path)?;
        self.meta.insert(KEY_WAL_LIVE, u64::from(live)).at(self.path)?;
        Ok(())
    }

    /// Returns the log generation the file expects (`None` before generations) and whether
    /// it is live.
    pub(crate) fn wal_generation(&self) -> Result<(Option<u64>, bool)> {
        let generation = self.meta.get(KEY_WAL_GEN).at(self.path)?.map(|v| v.value());
        let live = self.meta.get(KEY_WAL_LIVE).at(self.path)?.is_some_and(|v| v.value() == 1);
        Ok((generation, live))
    }

    /// Returns the journal's id, giving it `fresh` first if it has none (not logged: the
    /// caller commits it durably).
    pub(crate) fn journal_id_or(&mut self, fresh: u64) -> Result<(u64, bool)> {
        if let Some(id) = self.meta.get(KEY_JOURNAL_ID).at(self.path)? {
            return Ok((id.value(), false));
        }
        self.meta.insert(KEY_JOURNAL_ID, fresh).at(self.path)?;
        Ok((fresh, true))
    }

    /// Makes `write` in its table, and keeps it in the redo record if there is one. Every
    /// write of a logged operation goes through here.
    fn put(&mut self, write: Write<'_>) -> Result<()> {
        let path = self.path;
        match write {
            Write::Meta { key, value } => self.meta.insert(key, value).at(path).map(drop),
            Write::Run { run, record } => self.runs.insert(run, record).at(path).map(drop),
            Write::RunHead { run, next } => self.run_heads.insert(run, next).at(path).map(drop),
            Write::Entry { run, seq, entry } => {
                self.entries.insert((run, seq), entry).at(path).map(drop)
            }
            Write::Identity { run, identity, seq } => {
                self.identities.insert((run, identity), seq).at(path).map(drop)
            }
            Write::Task { task, record } => self.tasks.insert(task, record).at(path).map(drop),
            Write::RunTask { run, task } => {
                self.run_tasks.insert((run, task), ()).at(path).map(drop)
            }
            Write::LiveTask { task, live: true } => {
                self.live_tasks.insert(task, ()).at(path).map(drop)
            }
            Write::LiveTask { task, live: false } => {
                self.live_tasks.remove(task).at(path).map(drop)
            }
            Write::Session { session, record } => {
                self.sessions.insert(session, record).at(path).map(drop)
            }
            Write::LiveSession { session, live: true } => {
                self.live_sessions.insert(session, ()).at(path).map(drop)
            }
            Write::LiveSession { session, live: false } => {
                self.live_sessions.remove(session).at(path).map(drop)
            }
        }?;
        if let Some(redo) = &mut self.redo {
            redo.push(write);
        }
        Ok(())
    }

    /// Applies again the writes of one write-ahead record (`wal` and `lsn` name it).
    pub(crate) fn apply_redo(&mut self, bytes: &[u8], wal: &Path, lsn: u64) -> Result<()> {
        let mut reader = redo::Reader::new(bytes, wal, lsn);
        while let Some(write) = reader.next_write()? {
            self.put(write)?;
        }
        Ok(())
    }

    fn next_id(&mut self, key: &'static str) -> Result<u64> {
        let id = match self.counters.get(key) {
            Some(id) => *id,
            None => self.meta.get(key).at(self.path)?.map_or(1, |v| v.value()),
        };
        self.counters.insert(key, id + 1);
        Ok(id)
    }

    fn check_run(&self, run: RunId) -> Result<()> {
        self.run_head(run)?.ok_or(JournalError::RunNotFound { run })?;
        Ok(())
    }

    fn task_exists(&self, task: TaskId) -> Result<()> {
        self.tasks.get(task.0).at(self.path)?.ok_or(JournalError::TaskNotFound { task })?;
        Ok(())
    }

    /// Loads run `run` with its input and answer undecoded: nothing the writer changes in
    /// a run needs them.
    fn load_run(&self, run: RunId) -> Result<RawRunRecord> {
        let runs = &self.runs;
        let bytes = runs.get(run.0).at(self.path)?.ok_or(JournalError::RunNotFound { run })?;
        decode(self.path, Place::Run(run.0), bytes.value())
    }

    fn store_run<P: Serialize>(&mut self, rec: &RunRecord<P>) -> Result<()> {
        self.put(Write::Run { run: rec.id.0, record: &encode(Place::Run(rec.id.0), rec) })
    }

    pub(crate) fn create_run(&mut self, new: NewRun) -> Result<RunRecord> {
        let id = RunId(self.next_id(KEY_NEXT_RUN)?);
        let rec = records::new_run(id, new, self.now);
        self.store_run(&rec)?;
        self.heads.insert(id.0, 0);
        Ok(rec)
    }

    /// Changes run `run`; returns its record as it now stands, input and answer undecoded.
    pub(crate) fn update_run(&mut self, run: RunId, update: RawRunUpdate) -> Result<RawRunRecord> {
        let mut rec = self.load_run(run)?;
        let RawRunUpdate { status, answer, error, owner, launch } = update;
        let change = records::RunChange { status, answer, error, owner, launch };
        records::apply_run_update(&mut rec, change, self.now);
        self.store_run(&rec)?;
        Ok(rec)
    }

    /// Creates `task`, then appends `before` and `after` (each of `after` naming the new
    /// task) to `run`; everything is checked before anything is written, so a refusal
    /// leaves nothing behind in the shared batch.
    pub(crate) fn create_task_with_entries(
        &mut self,
        run: RunId,
        before: Vec<EncodedEntry>,
        task: NewTask,
        mut after: Vec<EncodedEntry>,
    ) -> Result<(TaskId, Vec<u64>)> {
        if task.run != run {
            return Err(JournalError::RunNotFound { run: task.run });
        }
        let n_before = before.len();
        let mut entries = before;
        entries.append(&mut after);
        // The checks `append` and `create_task` would make, before either writes.
        let first = self.check_entries(run, &entries)?;
        if let Some(parent) = task.parent {
            self.task_exists(parent)?;
        }
        let id = self.create_task(task)?;
        for entry in entries.iter_mut().skip(n_before) {
            entry.task = Some(id);
        }
        let seqs = self.write_entries(run, first, entries)?;
        Ok((id, seqs))
    }

    /// Creates `task` with `before` and `after` as [`Tx::create_task_with_entries`] does,
    /// then applies `update` to it: a task recorded when it has already ended.
    pub(crate) fn record_ended_task(
        &mut self,
        run: RunId,
        before: Vec<EncodedEntry>,
        task: NewTask,
        mut after: Vec<EncodedEntry>,
        update: impl FnOnce(TaskId) -> TaskUpdate,
    ) -> Result<(TaskRecord, Vec<u64>)> {
        if task.run != run {
            return Err(JournalError::RunNotFound { run: task.run });
        }
        let n_before = before.len();
        let mut entries = before;
        entries.append(&mut after);
        let first = self.check_entries(run, &entries)?;
        // Built whole and stored once: the task is never written running.
        let mut rec = self.new_task_record(task)?;
        let update = update(rec.id);
        records::apply_task_update(&mut rec, update, self.now);
        // A new task is in no live index yet: only an active one goes in.
        self.put(Write::Task { task: rec.id.0, record: &encode(Place::Task(rec.id.0), &rec) })?;
        if rec.status.is_active() {
            self.put(Write::LiveTask { task: rec.id.0, live: true })?;
        }
        self.put(Write::RunTask { run: rec.run.0, task: rec.id.0 })?;
        for entry in entries.iter_mut().skip(n_before) {
            entry.task = Some(rec.id);
        }
        let seqs = self.write_entries(run, first, entries)?;
        Ok((rec, seqs))
    }

    /// Checks that `run` exists and that no identity of `entries` is taken (in the run or
    /// twice among them); returns the sequence number the first would get.
    fn check_entries(&self, run: RunId, entries: &[EncodedEntry]) -> Result<u64> {
        let first = self.run_head(run)?.ok_or(JournalError::RunNotFound { run })?;
        let mut seen = HashMap::new();
        for (idx, entry) in entries.iter().enumerate() {
            let Some(identity) = entry.identity.as_deref() else { continue };
            let held = self.identities.get((run.0, identity)).at(self.path)?.map(|v| v.value());
            let held = held.or_else(|| seen.get(identity).copied());
            if let Some(seq) = held {
                return Err(JournalError::DuplicateIdentity {
                    run,
                    identity: identity.to_owned(),
                    seq,
                });
            }
            seen.insert(identity, first + idx as u64);
        }
        Ok(first)
    }

    pub(crate) fn append(&mut self, run: RunId, entries: Vec<EncodedEntry>) -> Result<Vec<u64>> {
        // Everything is checked before anything is written (see `check_entries`).
        let first = self.check_entries(run, &entries)?;
        self.write_entries(run, first, entries)
    }

    /// Writes `entries` to `run` from sequence number `first` on, which `check_entries`
    /// returned for them in this batch with nothing appended to the run since.
    fn write_entries(
        &mut self,
        run: RunId,
        first: u64,
        entries: Vec<EncodedEntry>,
    ) -> Result<Vec<u64>> {
        let mut seqs = Vec::with_capacity(entries.len());
        for (idx, entry) in entries.into_iter().enumerate() {
            let seq = first + idx as u64;
            if let Some(identity) = entry.identity.as_deref() {
                self.put(Write::Identity { run: run.0, identity, seq })?;
            }
            let stored = JournalEntry {
                run,
                seq,
                kind: entry.kind,
                identity: entry.identity,
                task: entry.task,
                at_ms: self.now,
                payload: entry.payload,
            };
            self.put(Write::Entry {
                run: run.0,
                seq,
                entry: &encode(Place::Entry { run: run.0, seq }, &stored),
            })?;
            seqs.push(seq);
        }
        self.heads.insert(run.0, first + seqs.len() as u64);
        Ok(seqs)
    }

    fn load_task(&self, task: TaskId) -> Result<TaskRecord> {
        let tasks = &self.tasks;
        let bytes = tasks.get(task.0).at(self.path)?.ok_or(JournalError::TaskNotFound { task })?;
        decode(self.path, Place::Task(task.0), bytes.value())
    }

    fn store_task(&mut self, rec: &TaskRecord) -> Result<()> {
        self.put(Write::Task { task: rec.id.0, record: &encode(Place::Task(rec.id.0), rec) })?;
        self.put(Write::LiveTask { task: rec.id.0, live: rec.status.is_active() })
    }

    pub(crate) fn create_task(&mut self, new: NewTask) -> Result<TaskId> {
        let rec = self.new_task_record(new)?;
        self.store_task(&rec)?;
        self.put(Write::RunTask { run: rec.run.0, task: rec.id.0 })?;
        Ok(rec.id)
    }

    /// Checks `new` and returns its record with a fresh id, not yet stored.
    fn new_task_record(&mut self, new: NewTask) -> Result<TaskRecord> {
        // An existence check on the run's head, not a decode of its record (which holds
        // the run's whole input).
        self.check_run(new.run)?;
        if let Some(parent) = new.parent {
            self.task_exists(parent)?;
        }
        let id = TaskId(self.next_id(KEY_NEXT_TASK)?);
        Ok(records::new_task(id, new, self.now))
    }

    pub(crate) fn update_task(&mut self, task: TaskId, update: TaskUpdate) -> Result<TaskRecord> {
        let mut rec = self.load_task(task)?;
        records::update_task(&mut rec, update, self.now)?;
        self.store_task(&rec)?;
        Ok(rec)
    }

    fn load_session(&self, id: &SessionId) -> Result<Option<SessionRecord>> {
        let sessions = &self.sessions;
        let bytes = sessions.get(id.0.as_str()).at(self.path)?;
        bytes.map(|b| decode(self.path, Place::Session(&id.0), b.value())).transpose()
    }

    fn store_session(&mut self, rec: &SessionRecord) -> Result<()> {
        let session = rec.id.0.as_str();
        self.put(Write::Session { session, record: &encode(Place::Session(session), rec) })?;
        self.put(Write::LiveSession { session, live: rec.status.is_live() })
    }

    pub(crate) fn create_session(&mut self, new: NewSession) -> Result<SessionRecord> {
        if let Some(run) = new.run {
            self.check_run(run)?;
        }
        if self.load_session(&new.id)?.is_some() {
            return Err(JournalError::SessionExists { session: new.id });
        }
        let rec = records::new_session(new, self.now);
        self.store_session(&rec)?;
        Ok(rec)
    }

    fn existing_session(&self, id: &SessionId) -> Result<SessionRecord> {
        self.load_session(id)?.ok_or_else(|| JournalError::SessionNotFound { session: id.clone() })
    }

    pub(crate) fn update_session(
        &mut self,
        id: &SessionId,
        update: SessionUpdate,
    ) -> Result<SessionRecord> {
        let mut rec = self.existing_session(id)?;
        records::update_session(&mut rec, update, self.now);
        self.store_session(&rec)?;
        Ok(rec)
    }

    pub(crate) fn claim_iteration(&mut self, id: &SessionId) -> Result<Option<u64>> {
        let mut rec = self.existing_session(id)?;
        let claimed = records::claim_iteration(&mut rec, self.now);
        if claimed.is_some() {
            self.store_session(&rec)?;
        }
        Ok(claimed)
    }

    pub(crate) fn reconcile(&mut self, live: &HashSet<String>) -> Result<Reconciled> {
        let mut done = Reconciled::default();

        let task_ids: Vec<u64> = {
            let table = &self.live_tasks;
            let mut ids = Vec::new();
            for item in table.iter().at(self.path)? {
                ids.push(item.at(self.path)?.0.value());
            }
            ids
        };
        for id in task_ids {
            let mut rec = self.load_task(TaskId(id))?;
            if records::reconcile_task(&mut rec, live, self.now) {
                self.store_task(&rec)?;
                done.tasks += 1;
            }
        }

        let session_ids: Vec<String> = {
            let table = &self.live_sessions;
            let mut ids = Vec::new();
            for item in table.iter().at(self.path)? {
                ids.push(item.at(self.path)?.0.value().to_owned());
            }
            ids
        };
        for id in session_ids {
            let mut rec = self.existing_session(&SessionId(id))?;
            if records::reconcile_session(&mut rec, live, self.now) {
                self.store_session(&rec)?;
                done.sessions += 1;
            }
        }

        let stale: Vec<RawRunRecord> = {
            let table = &self.runs;
            let mut stale = Vec::new();
            for item in table.iter().at(self.path)? {
                let (key, bytes) = item.at(self.path)?;
                let mut rec: RawRunRecord =
                    decode(self.path, Place::Run(key.value()), bytes.value())?;
                if records::reconcile_run(&mut rec, live, self.now) {
                    stale.push(rec);
                }
            }
            stale
        };
        for rec in stale {
            self.store_run(&rec)?;
            done.runs += 1;
        }
        Ok(done)
    }

    pub(crate) fn prune(&mut self, before_ms: u64) -> Result<Pruned> {
        // Removals by range are not logged: the batch goes to the redb file directly.
        if let Some(redo) = &mut self.redo {
            redo.unlogged = true;
        }
        // What the batch moved so far goes to the tables first, so that removing a run's
        // head removes it for good.
        self.finish()?;
        let doomed: Vec<u64> = {
            let table = &self.runs;
            let mut doomed = Vec::new();
            for item in table.iter().at(self.path)? {
                let (key, bytes) = item.at(self.path)?;
                let rec: RawRunRecord = decode(self.path, Place::Run(key.value()), bytes.value())?;
                if records::is_pruned(&rec, before_ms) {
                    doomed.push(key.value());
                }
            }
            doomed
        };
        let mut pruned = Pruned::default();
        let runs = &mut self.runs;
        let heads = &mut self.run_heads;
        let entries = &mut self.entries;
        let identities = &mut self.identities;
        let run_tasks = &mut self.run_tasks;
        let tasks = &mut self.tasks;
        let live_tasks = &mut self.live_tasks;
        for run in doomed {
            entries
                .retain_in((run, 0)..=(run, u64::MAX), |_, _| {
                    pruned.entries += 1;
                    false
                })
                .at(self.path)?;
            identities.retain_in((run, "")..(run + 1, ""), |_, _| false).at(self.path)?;
            let mut task_ids = Vec::new();
            run_tasks
                .retain_in((run, 0)..=(run, u64::MAX), |(_, task), ()| {
                    task_ids.push(task);
                    false
                })
                .at(self.path)?;
            for task in task_ids {
                tasks.remove(task).at(self.path)?;
                live_tasks.remove(task).at(self.path)?;
                pruned.tasks += 1;
            }
            heads.remove(run).at(self.path)?;
            runs.remove(run).at(self.path)?;
            pruned.runs += 1;
        }
        Ok(pruned)
    }
}
