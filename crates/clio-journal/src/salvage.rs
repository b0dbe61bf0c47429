//! [`Journal::salvage`]: copies every run of a damaged journal that still reads whole into a
//! new journal, and reports what it left behind and why.
//!
//! A run is copied only whole: its record, its head, every entry from 0 to the head (each
//! verifying its checksum, saying where it is stored, with identities unique in the run), and
//! every task that belongs to it (by its record or by `clio_run_tasks`) and every task its
//! entries name, each verifying. A run with any part missing or damaged is left out entirely,
//! because a partial run would resume as a different run. Sessions are copied one by one.
//! The indexes (identities, run tasks, live tasks and sessions) are rebuilt from the records
//! copied, not copied, so damage confined to an index costs nothing.
//!
//! Ids are kept, so that a person's "run 3" is still run 3, and the new journal's counters
//! lie past every id the old one used, so that no id is ever given twice (invariant 9).
//!
//! The source is only read (see `source`); the destination is written as
//! `<to>.salvaging`, made durable, then renamed to `to`, so `to` never holds half a journal.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use redb::{Builder, Database, ReadOnlyTable, ReadableTable, TableDefinition, WriteTransaction};
use serde::Serialize;

use crate::check::record;
use crate::checksum::{self, Place, Sealing};
use crate::error::{JournalError, Result};
use crate::format::{RawEntry, RawRunRecord, RunId, SessionRecord, TaskId, TaskRecord};
use crate::guard;
use crate::handle::Journal;
use crate::source::{self, Opening, Scratch, Source};
use crate::store::{
    self, AtPath, ENTRIES, IDENTITIES, KEY_NEXT_RUN, KEY_NEXT_TASK, LIVE_SESSIONS, LIVE_TASKS,
    META, RUN_HEADS, RUN_TASKS, RUNS, SESSIONS, TASKS,
};
use crate::wal;

/// What [`Journal::salvage`] copied and what it left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SalvageReport {
    /// The damaged journal, which was only read.
    pub from: PathBuf,
    /// The new journal.
    pub to: PathBuf,
    /// The format version of `from`.
    pub format_version: u64,
    /// The runs copied whole, in id order.
    pub copied: Vec<SalvagedRun>,
    /// The runs left out, in id order, each with why.
    pub left: Vec<LeftRun>,
    /// How many sessions were copied.
    pub sessions_copied: u64,
    /// The sessions left out, each with why.
    pub sessions_left: Vec<LeftSession>,
    /// Damaged tasks that no run claims: they may belong to a run that was copied without
    /// knowing it had them (a task that no entry names and no index lists).
    pub tasks_lost: Vec<LostTask>,
    /// What a person should know besides (a crash left the file, the log was not read, ...).
    pub notes: Vec<String>,
}

/// A run copied whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SalvagedRun {
    /// Its id, the same in both journals.
    pub run: RunId,
    /// How many entries it has.
    pub entries: u64,
    /// How many tasks it has.
    pub tasks: u64,
}

/// A run left out of a salvage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftRun {
    /// Its id.
    pub run: RunId,
    /// The first thing found wrong with it, naming the table and key.
    pub reason: String,
}

/// A session left out of a salvage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftSession {
    /// Its id.
    pub session: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A damaged task that no run claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LostTask {
    /// Its id.
    pub task: TaskId,
    /// What is wrong with it.
    pub reason: String,
}

impl Journal {
    /// Copies every run of the journal at `from` that still reads whole into a new journal
    /// at `to`, which must not exist, and reports what it copied and what it left.
    ///
    /// `from` is only read (a file that needs crash recovery is read from a recovered
    /// private copy); its write-ahead log is not read. The new journal keeps every id and
    /// its counters lie past every id `from` used. Fails with
    /// [`JournalError::DestinationExists`] when `to` (or its log) exists, and with
    /// [`JournalError::Damaged`] when `from` does not open at all.
    pub fn salvage(from: impl AsRef<Path>, to: impl AsRef<Path>) -> Result<SalvageReport> {
        let (from, to) = (from.as_ref(), to.as_ref());
        for taken in [to.to_path_buf(), wal::path_for(to)] {
            if fs::symlink_metadata(&taken).is_ok() {
                return Err(JournalError::DestinationExists { path: taken });
            }
        }
        source::preflight(from)?;
        let mut notes = Vec::new();
        let (mut src, mut scratch) = open_source(from, &mut notes)?;
        let mut log = LogWrites::read(&src, from);
        // A whole log's records are applied to a private copy, as an open would apply
        // them to the file: then every run reads as the journal does.
        if log.damage.is_none() && !log.pending.is_empty() {
            match with_log_applied(from, &log.pending) {
                Ok((applied, copy)) => {
                    let (first, last) = log.lsns.unwrap_or_default();
                    notes.push(format!(
                        "the write-ahead log {} holds writes the file does not (records {first} \
                         to {last}): they were applied to a private copy, which was read",
                        log.path.display()
                    ));
                    guard::drop_quietly(std::mem::replace(&mut src, applied));
                    scratch = Some(copy);
                    log = LogWrites { path: log.path, ..LogWrites::default() };
                }
                Err(err) => notes.push(format!(
                    "the write-ahead log {} could not be applied to a private copy ({err})",
                    log.path.display()
                )),
            }
        }
        let mut report = SalvageReport {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            format_version: src.version,
            copied: Vec::new(),
            left: Vec::new(),
            sessions_copied: 0,
            sessions_left: Vec::new(),
            tasks_lost: Vec::new(),
            notes,
        };
        if let Some(note) = log.note() {
            report.notes.push(note);
        } else if log_has_records(from) && log.expected.is_none() {
            report.notes.push(format!(
                "the write-ahead log {} may hold writes the file does not: it was not read; \
                 if the journal still opens, opening it once applies them to the file",
                wal::path_for(from).display()
            ));
        }

        let tmp = sibling(to, ".salvaging");
        match fs::remove_file(&tmp) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(JournalError::Io { path: tmp, source: err });
            }
            _ => {}
        }
        let written = guard::catching(from, "salvaging it", || {
            // Its owner's only, as every journal file this crate makes.
            let file = crate::wal::open_read_write(&tmp)
                .map_err(|source| JournalError::Io { path: tmp.clone(), source })?;
            let backend = redb::backends::FileBackend::new(file).at(&tmp)?;
            let dest = Builder::new().create_with_backend(backend).at(&tmp)?;
            let copied = copy(&src, &dest, &tmp, &mut report, &log);
            // Closed before the file is flushed and renamed.
            drop(dest);
            copied
        });
        // Closing a damaged file may panic inside redb; what was read has been copied.
        guard::drop_quietly(src);
        drop(scratch);
        if let Err(err) = written {
            let _ = fs::remove_file(&tmp);
            return Err(err);
        }
        place_file(&tmp, to)?;
        Ok(report)
    }
}

/// Opens `from` for reading, from a recovered private copy when it needs crash recovery.
fn open_source(from: &Path, notes: &mut Vec<String>) -> Result<(Source, Option<Scratch>)> {
    let unreadable = |why: String| {
        JournalError::damaged(
            from,
            format!("the file does not open ({why}); nothing can be read from it"),
        )
    };
    match source::open_read_only(from)? {
        Opening::Open(src) => Ok((src, None)),
        Opening::Unreadable(why) => Err(unreadable(why)),
        Opening::NeedsRecovery => {
            let scratch = Scratch::copy_of(from)
                .map_err(|err| JournalError::Io { path: std::env::temp_dir(), source: err })?;
            let db = source::open_copy(from, &scratch)?.map_err(unreadable)?;
            match source::from_copy(from, db)? {
                Opening::Open(src) => {
                    notes.push(
                        "the file was not closed cleanly (a crash): it was read from a \
                         recovered copy"
                            .to_owned(),
                    );
                    Ok((src, Some(scratch)))
                }
                Opening::NeedsRecovery => Err(unreadable("it needs crash recovery".to_owned())),
                Opening::Unreadable(why) => Err(unreadable(why)),
            }
        }
    }
}

/// Returns whether the log beside `journal` starts with a record (of either log format:
/// a generation's header, or a format-1 record).
fn log_has_records(journal: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    fs::File::open(wal::path_for(journal))
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| matches!(&magic, b"CLWG" | b"CLWP" | b"CLWR"))
}

/// Returns `path` with `suffix` added to its file name.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

/// Flushes the finished `tmp` and renames it to `to`, flushing the folder, unless `to` has
/// appeared meanwhile.
fn place_file(tmp: &Path, to: &Path) -> Result<()> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| JournalError::Io { path, source }
    };
    fs::File::open(tmp).and_then(|f| f.sync_all()).map_err(io_err(tmp))?;
    if fs::symlink_metadata(to).is_ok() {
        let _ = fs::remove_file(tmp);
        return Err(JournalError::DestinationExists { path: to.to_path_buf() });
    }
    fs::rename(tmp, to).map_err(io_err(to))?;
    if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))?;
    }
    Ok(())
}

/// What is known of the tasks of the source, read once.
#[derive(Default)]
struct Tasks {
    /// Every task record: its JSON, run and status, or what is wrong with it.
    records: BTreeMap<u64, std::result::Result<TaskCopy, String>>,
    /// `clio_run_tasks`, by run.
    listed: BTreeMap<u64, BTreeSet<u64>>,
    /// Tasks claimed by some run (listed, or whose record names it).
    claimed: BTreeSet<u64>,
}

struct TaskCopy {
    run: u64,
    active: bool,
    json: Vec<u8>,
}

/// One run read whole, ready to write.
struct RunCopy {
    record: Vec<u8>,
    /// Each entry's JSON and identity, in order from 0.
    entries: Vec<(Vec<u8>, Option<String>)>,
    tasks: Vec<u64>,
}

/// Copies what reads whole from `src` into `dest` (a fresh file at `tmp`), filling `report`.
fn copy(
    src: &Source,
    dest: &Database,
    tmp: &Path,
    report: &mut SalvageReport,
    log: &LogWrites,
) -> Result<()> {
    let path = &src.path;
    let txn = dest.begin_write().at(tmp)?;
    store::initialise(&txn, tmp)?;
    txn.commit().at(tmp)?;

    let runs_table = src.txn.open_table(RUNS).at(path)?;
    let heads_table = src.txn.open_table(RUN_HEADS).at(path)?;
    let entries_table = src.txn.open_table(ENTRIES).at(path)?;
    let tasks = read_tasks(src, report)?;

    // Every run any table mentions, so that each one left out is reported.
    let mut runs: BTreeSet<u64> = BTreeSet::new();
    let mut max_run = 0;
    for item in runs_table.iter().at(path)? {
        match item {
            Ok((key, _)) => {
                runs.insert(key.value());
            }
            Err(err) => {
                report.notes.push(format!("clio_runs could not be read to its end: {err}"));
                break;
            }
        }
    }
    for item in heads_table.iter().at(path)? {
        match item {
            Ok((key, _)) => {
                runs.insert(key.value());
            }
            Err(err) => {
                report.notes.push(format!("clio_run_heads could not be read to its end: {err}"));
                break;
            }
        }
    }
    runs.extend(tasks.listed.keys());
    runs.extend(tasks.records.values().filter_map(|t| t.as_ref().ok().map(|t| t.run)));
    runs.extend(entry_runs(&entries_table, path));
    let in_file = runs.clone();
    runs.extend(log.runs.keys());
    runs.extend(log.created_runs());

    for run in runs {
        max_run = max_run.max(run);
        if let Some(reason) = log.leaves(run, in_file.contains(&run)) {
            report.left.push(LeftRun { run: RunId(run), reason });
            continue;
        }
        let read = guard::catching(path, format_args!("reading run {run}"), || {
            Ok(read_run(src, &runs_table, &heads_table, &entries_table, &tasks, run))
        });
        let read = read.map_err(|err| err.to_string()).and_then(|r| r).and_then(|whole| match log
            .leaves_unended(run, &whole.record)
        {
            Some(reason) => Err(reason),
            None => Ok(whole),
        });
        match read {
            Ok(whole) => {
                write_run(dest, tmp, run, &whole, &tasks)?;
                report.copied.push(SalvagedRun {
                    run: RunId(run),
                    entries: whole.entries.len() as u64,
                    tasks: whole.tasks.len() as u64,
                });
            }
            Err(reason) => report.left.push(LeftRun { run: RunId(run), reason }),
        }
    }
    for (task, rec) in &tasks.records {
        if let Err(reason) = rec
            && !tasks.claimed.contains(task)
        {
            report.tasks_lost.push(LostTask { task: TaskId(*task), reason: reason.clone() });
        }
    }

    copy_sessions(src, dest, tmp, report, log)?;

    // Past every id the source used or still names (its log included), whatever its own
    // counters say.
    let max_task = tasks
        .records
        .keys()
        .chain(tasks.listed.values().flatten())
        .chain(&log.tasks)
        .copied()
        .max()
        .unwrap_or(0);
    let mut next_run = max_run.saturating_add(1).max(log.next_run);
    let mut next_task = max_task.saturating_add(1).max(log.next_task);
    if let Ok(meta) = src.txn.open_table(META) {
        let counter = |name| meta.get(name).ok().flatten().map(|v| v.value());
        next_run = next_run.max(counter(KEY_NEXT_RUN).unwrap_or(0));
        next_task = next_task.max(counter(KEY_NEXT_TASK).unwrap_or(0));
    }
    let txn = dest.begin_write().at(tmp)?;
    {
        let mut meta = txn.open_table(META).at(tmp)?;
        meta.insert(KEY_NEXT_RUN, next_run).at(tmp)?;
        meta.insert(KEY_NEXT_TASK, next_task).at(tmp)?;
    }
    txn.commit().at(tmp)
}

/// Reads every task record and `clio_run_tasks`.
fn read_tasks(src: &Source, report: &mut SalvageReport) -> Result<Tasks> {
    let path = &src.path;
    let mut tasks = Tasks::default();
    let table = src.txn.open_table(TASKS).at(path)?;
    for item in table.iter().at(path)? {
        let (key, bytes) = match item {
            Ok(row) => row,
            Err(err) => {
                report.notes.push(format!("clio_tasks could not be read to its end: {err}"));
                break;
            }
        };
        let task = key.value();
        let place = Place::Task(task);
        let read = src.sealing.open(place, bytes.value()).and_then(|json| {
            let rec: TaskRecord = record(Sealing::Bare, place, json)?;
            if rec.id.0 != task {
                return Err(format!("it holds task {}", rec.id));
            }
            Ok(TaskCopy { run: rec.run.0, active: rec.status.is_active(), json: json.to_vec() })
        });
        let read = read.map_err(|why| format!("{place}: {why}"));
        if let Ok(copy) = &read {
            tasks.claimed.insert(task);
            tasks.listed.entry(copy.run).or_default().insert(task);
        }
        tasks.records.insert(task, read);
    }
    let index = src.txn.open_table(RUN_TASKS).at(path)?;
    for item in index.iter().at(path)? {
        let Ok((key, _)) = item else {
            report.notes.push("clio_run_tasks could not be read to its end".to_owned());
            break;
        };
        let (run, task) = key.value();
        tasks.listed.entry(run).or_default().insert(task);
        tasks.claimed.insert(task);
    }
    Ok(tasks)
}

/// Returns the runs that have entries, found by seeking past each run's keys.
fn entry_runs(table: &ReadOnlyTable<(u64, u64), &'static [u8]>, path: &Path) -> Vec<u64> {
    let mut runs = Vec::new();
    let mut from = 0u64;
    loop {
        let first = table.range((from, 0)..).at(path).ok().and_then(|mut r| r.next());
        let Some(Ok((key, _))) = first else { break };
        let run = key.value().0;
        runs.push(run);
        let Some(next) = run.checked_add(1) else { break };
        from = next;
    }
    runs
}

/// Reads run `run` whole, or says the first thing wrong with it.
fn read_run(
    src: &Source,
    runs: &ReadOnlyTable<u64, &'static [u8]>,
    heads: &ReadOnlyTable<u64, u64>,
    entries: &ReadOnlyTable<(u64, u64), &'static [u8]>,
    tasks: &Tasks,
    run: u64,
) -> std::result::Result<RunCopy, String> {
    let path = &src.path;
    let storage = |err: redb::StorageError| JournalError::from_redb(path, err).to_string();
    let place = Place::Run(run);
    let bytes = runs.get(run).map_err(storage)?.ok_or_else(|| format!("{place}: missing"))?;
    let json = src.sealing.open(place, bytes.value()).map_err(|why| format!("{place}: {why}"))?;
    let rec: RawRunRecord =
        record(Sealing::Bare, place, json).map_err(|why| format!("{place}: {why}"))?;
    if rec.id.0 != run {
        return Err(format!("{place}: it holds run {}", rec.id));
    }
    let run_json = json.to_vec();
    let head = heads
        .get(run)
        .map_err(storage)?
        .ok_or_else(|| format!("clio_run_heads (run {run}): missing"))?
        .value();

    let own: BTreeSet<u64> = tasks.listed.get(&run).cloned().unwrap_or_default();
    let mut out = Vec::new();
    let mut identities = HashMap::new();
    let mut next = 0u64;
    for item in entries.range((run, 0)..(run, head)).map_err(storage)? {
        let (key, bytes) = item.map_err(storage)?;
        let seq = key.value().1;
        let place = Place::Entry { run, seq };
        if seq != next {
            return Err(format!("clio_entries (run {run}): entry {next} is missing"));
        }
        let json =
            src.sealing.open(place, bytes.value()).map_err(|why| format!("{place}: {why}"))?;
        let entry: RawEntry =
            record(Sealing::Bare, place, json).map_err(|why| format!("{place}: {why}"))?;
        if entry.run.0 != run || entry.seq != seq {
            return Err(format!("{place}: it holds entry {} of run {}", entry.seq, entry.run));
        }
        if let Some(identity) = &entry.identity
            && let Some(first) = identities.insert(identity.clone(), seq)
        {
            return Err(format!("{place}: its identity {identity:?} is also entry {first}'s"));
        }
        if let Some(task) = entry.task
            && !own.contains(&task.0)
        {
            return Err(format!("{place}: it names task {task}, which is not one of the run's"));
        }
        out.push((json.to_vec(), entry.identity));
        next += 1;
    }
    if next < head {
        return Err(format!(
            "clio_entries (run {run}): entry {next} is missing (the run's head is {head})"
        ));
    }
    if entries.get((run, head)).map_err(storage)?.is_some() {
        return Err(format!("clio_entries (run {run}): entry {head} lies past the run's head"));
    }
    for task in &own {
        match tasks.records.get(task) {
            None => {
                return Err(format!("clio_tasks (task {task}): missing, but listed under the run"));
            }
            Some(Err(why)) => return Err(why.clone()),
            Some(Ok(copy)) if copy.run != run => {
                return Err(format!(
                    "clio_run_tasks (run {run}, task {task}): the task belongs to run {}",
                    copy.run
                ));
            }
            Some(Ok(_)) => {}
        }
    }
    Ok(RunCopy { record: run_json, entries: out, tasks: own.into_iter().collect() })
}

/// Writes one whole run, its entries, tasks and index rows, in its own transaction (the
/// file becomes durable once, at the end: it is not in place before then).
fn write_run(dest: &Database, tmp: &Path, run: u64, copy: &RunCopy, tasks: &Tasks) -> Result<()> {
    let mut txn = dest.begin_write().at(tmp)?;
    txn.set_durability(redb::Durability::None).at(tmp)?;
    {
        put(&txn, tmp, RUNS, run, Place::Run(run), &copy.record)?;
        txn.open_table(RUN_HEADS).at(tmp)?.insert(run, copy.entries.len() as u64).at(tmp)?;
        let mut entries = txn.open_table(ENTRIES).at(tmp)?;
        let mut identities = txn.open_table(IDENTITIES).at(tmp)?;
        for (seq, (json, identity)) in copy.entries.iter().enumerate() {
            let seq = seq as u64;
            let sealed = checksum::seal(Place::Entry { run, seq }, json.clone());
            entries.insert((run, seq), sealed.as_slice()).at(tmp)?;
            if let Some(identity) = identity {
                identities.insert((run, identity.as_str()), seq).at(tmp)?;
            }
        }
        let mut run_tasks = txn.open_table(RUN_TASKS).at(tmp)?;
        let mut live = txn.open_table(LIVE_TASKS).at(tmp)?;
        for task in &copy.tasks {
            let Some(Ok(rec)) = tasks.records.get(task) else { continue };
            put(&txn, tmp, TASKS, *task, Place::Task(*task), &rec.json)?;
            run_tasks.insert((run, *task), ()).at(tmp)?;
            if rec.active {
                live.insert(*task, ()).at(tmp)?;
            }
        }
    }
    txn.commit().at(tmp)
}

/// Stores `json` sealed at `key` of `table`.
fn put(
    txn: &WriteTransaction,
    tmp: &Path,
    table: TableDefinition<u64, &[u8]>,
    key: u64,
    place: Place<'_>,
    json: &[u8],
) -> Result<()> {
    let sealed = checksum::seal(place, json.to_vec());
    txn.open_table(table).at(tmp)?.insert(key, sealed.as_slice()).at(tmp)?;
    Ok(())
}

/// Copies every session that reads whole; reports the others.
fn copy_sessions(
    src: &Source,
    dest: &Database,
    tmp: &Path,
    report: &mut SalvageReport,
    log: &LogWrites,
) -> Result<()> {
    let path = &src.path;
    let copied = guard::catching(path, "reading clio_sessions", || {
        let table = src.txn.open_table(SESSIONS).at(path)?;
        let mut whole = Vec::new();
        for item in table.iter().at(path)? {
            let (key, bytes) = match item {
                Ok(row) => row,
                Err(err) => {
                    report.notes.push(format!("clio_sessions could not be read to its end: {err}"));
                    break;
                }
            };
            let id = key.value().to_owned();
            if log.sessions.contains(&id) {
                report.sessions_left.push(LeftSession { reason: log.reason(None), session: id });
                continue;
            }
            let place = Place::Session(&id);
            let read = src.sealing.open(place, bytes.value()).and_then(|json| {
                let rec: SessionRecord = record(Sealing::Bare, place, json)?;
                if rec.id.0 != id {
                    return Err(format!("it holds session {:?}", rec.id.0));
                }
                Ok((json.to_vec(), rec.status.is_live()))
            });
            match read {
                Ok((json, live)) => whole.push((id, json, live)),
                Err(why) => report
                    .sessions_left
                    .push(LeftSession { reason: format!("{place}: {why}"), session: id }),
            }
        }
        Ok(whole)
    });
    let whole = match copied {
        Ok(whole) => whole,
        Err(err) => {
            report.notes.push(format!("no session was copied: {err}"));
            return Ok(());
        }
    };
    let txn = dest.begin_write().at(tmp)?;
    {
        let mut sessions = txn.open_table(SESSIONS).at(tmp)?;
        let mut live_sessions = txn.open_table(LIVE_SESSIONS).at(tmp)?;
        for (id, json, live) in &whole {
            let sealed = checksum::seal(Place::Session(id), json.clone());
            sessions.insert(id.as_str(), sealed.as_slice()).at(tmp)?;
            if *live {
                live_sessions.insert(id.as_str(), ()).at(tmp)?;
            }
        }
    }
    txn.commit().at(tmp)?;
    report.sessions_copied = whole.len() as u64;
    Ok(())
}

/// What the write-ahead log beside a salvaged journal holds that its file lacks: salvage
/// reads the file alone, so every run and session the log writes to is left (its copy
/// would lack those writes: a run resumed from it would run again what they record), and
/// every id the log gives is kept from the new journal's counters.
#[derive(Debug, Default)]
struct LogWrites {
    /// What the file says of its log; `None` when it names none.
    expected: Option<wal::Expected>,
    /// The log's path.
    path: PathBuf,
    /// The runs its readable records write to, each with the first and last lsn.
    runs: BTreeMap<u64, (u64, u64)>,
    /// The sessions its readable records write to.
    sessions: BTreeSet<String>,
    /// The tasks its readable records write.
    tasks: BTreeSet<u64>,
    /// The file's own `next_run`, and the largest counters the log's records set.
    file_next_run: u64,
    next_run: u64,
    next_task: u64,
    /// How many records it holds past the file, and the lsns of the first and last.
    records: usize,
    /// Those records, when the log reads whole (to apply them to a copy).
    pending: Vec<wal::Record>,
    lsns: Option<(u64, u64)>,
    /// Why the log does not read whole, when it does not.
    damage: Option<String>,
}

impl LogWrites {
    /// Reads the log of the journal `from` as its file `src` describes it, without writing.
    fn read(src: &Source, from: &Path) -> LogWrites {
        let path = wal::path_for(from);
        let Ok(Some(expected)) = crate::journal::expected_log(&src.txn, from) else {
            return LogWrites { path, ..LogWrites::default() };
        };
        let file_next_run = src
            .txn
            .open_table(META)
            .ok()
            .and_then(|meta| meta.get(KEY_NEXT_RUN).ok().flatten().map(|v| v.value()))
            .unwrap_or(0);
        let mut log = LogWrites {
            expected: Some(expected),
            path: path.clone(),
            file_next_run,
            ..LogWrites::default()
        };
        let records = match wal::read(&path, &expected) {
            Ok(records) => records,
            Err(err) => {
                // The damage alone: what to do is the report's to say.
                let detail = match &err {
                    JournalError::Corrupted { detail, .. } => detail.clone(),
                    other => other.to_string(),
                };
                let detail = detail.split("; nothing was changed").next().unwrap_or_default();
                log.damage = Some(detail.to_owned());
                wal::readable_records(&path, &expected).unwrap_or_default()
            }
        };
        log.records = records.len();
        log.lsns = records.first().zip(records.last()).map(|(a, b)| (a.lsn, b.lsn));
        for record in &records {
            log.note_writes(record);
        }
        if log.damage.is_none() {
            log.pending = records;
        }
        log
    }

    /// Notes what one record writes.
    fn note_writes(&mut self, record: &wal::Record) {
        let lsn = record.lsn;
        let mut reader = crate::redo::Reader::new(&record.payload, &self.path, lsn);
        let touch = |runs: &mut BTreeMap<u64, (u64, u64)>, run: u64| {
            let span = runs.entry(run).or_insert((lsn, lsn));
            span.0 = span.0.min(lsn);
            span.1 = span.1.max(lsn);
        };
        while let Ok(Some(write)) = reader.next_write() {
            use crate::redo::Write;
            match write {
                Write::Meta { key, value } if key == KEY_NEXT_RUN => {
                    self.next_run = self.next_run.max(value);
                }
                Write::Meta { key, value } if key == KEY_NEXT_TASK => {
                    self.next_task = self.next_task.max(value);
                }
                Write::Meta { .. } => {}
                Write::Run { run, .. }
                | Write::RunHead { run, .. }
                | Write::Entry { run, .. }
                | Write::Identity { run, .. } => touch(&mut self.runs, run),
                Write::RunTask { run, task } => {
                    touch(&mut self.runs, run);
                    self.tasks.insert(task);
                }
                Write::Task { task, record } => {
                    self.tasks.insert(task);
                    if let Some(run) = task_run(record) {
                        touch(&mut self.runs, run);
                    }
                }
                Write::LiveTask { task, .. } => {
                    self.tasks.insert(task);
                }
                Write::Session { session, .. } | Write::LiveSession { session, .. } => {
                    self.sessions.insert(session.to_owned());
                }
            }
        }
    }

    /// The runs the log's records created, as its counters say, that none of its readable
    /// records names (they were created in records that do not read).
    fn created_runs(&self) -> impl Iterator<Item = u64> + '_ {
        (self.file_next_run.max(1)..self.next_run).filter(|run| !self.runs.contains_key(run))
    }

    /// A note on the log for the report, when it holds anything the file lacks.
    fn note(&self) -> Option<String> {
        let path = self.path.display();
        match (&self.damage, self.lsns) {
            (Some(damage), _) => Some(format!(
                "the write-ahead log {path} does not read whole ({damage}); {} of its records \
                 still read on their own, and every run and session they write to, or that had \
                 not ended, was left",
                self.records
            )),
            (None, Some((first, last))) => Some(format!(
                "the write-ahead log {path} holds writes the file does not (records {first} to \
                 {last}); salvage reads the file alone, so the runs and sessions they write to \
                 were left: if the journal still opens, open it once (any `clio runs` command) \
                 to apply its log, then salvage again"
            )),
            (None, None) => None,
        }
    }

    /// Why something the log writes to (run `run`'s records, when given) is left.
    fn reason(&self, run: Option<u64>) -> String {
        let path = self.path.display();
        let records = match run.and_then(|run| self.runs.get(&run)) {
            Some((first, last)) if first == last => format!("record {first}"),
            Some((first, last)) => format!("records {first} to {last}"),
            None => "records".to_owned(),
        };
        match &self.damage {
            Some(damage) => format!(
                "its latest writes ({records}) are in the write-ahead log {path}, which is \
                 damaged ({damage}): they cannot all be read"
            ),
            None => format!(
                "its latest writes ({records}) are only in the write-ahead log {path}, which \
                 salvage does not apply: open the journal once to apply the log, then salvage \
                 again"
            ),
        }
    }

    /// Why run `run` is left because of the log (`in_file`: whether the file has it), if it is.
    fn leaves(&self, run: u64, in_file: bool) -> Option<String> {
        let only = if in_file { "" } else { "; the run lived only in the log" };
        if self.runs.contains_key(&run) {
            return Some(format!("{}{only}", self.reason(Some(run))));
        }
        if !in_file && run >= self.file_next_run && run < self.next_run {
            let damage = self.damage.as_deref().unwrap_or("damaged");
            return Some(format!(
                "it was created in the write-ahead log {}, in a record that does not read \
                 ({damage}); the run lived only in the log",
                self.path.display()
            ));
        }
        None
    }

    /// Why run `run`, read whole from the file with the record `record` (its JSON), is
    /// left all the same: the log is damaged and the run had not ended, so writes to it may
    /// lie in the records that do not read.
    fn leaves_unended(&self, run: u64, record: &[u8]) -> Option<String> {
        let damage = self.damage.as_ref()?;
        let status = serde_json::from_slice::<serde_json::Value>(record)
            .ok()
            .and_then(|v| v.get("status").and_then(|s| s.as_str()).map(str::to_owned));
        if matches!(status.as_deref(), Some("succeeded" | "failed" | "cancelled")) {
            return None;
        }
        Some(format!(
            "run {run} had not ended ({}) and the write-ahead log {} is damaged ({damage}): \
             writes to it in records that do not read would be missing from a copy",
            status.as_deref().unwrap_or("status unknown"),
            self.path.display()
        ))
    }
}

/// Returns the run a task record (its JSON, sealed or not) belongs to.
fn task_run(record: &[u8]) -> Option<u64> {
    let json = serde_json::from_slice::<serde_json::Value>(record)
        .ok()
        .or_else(|| serde_json::from_slice(record.get(..record.len().checked_sub(4)?)?).ok())?;
    json.get("run")?.as_u64()
}

/// Copies the journal `from` to a private file, applies `records` (its write-ahead log's
/// records past what it holds, read whole) to the copy as an open applies them to the file,
/// and opens the copy for reading.
fn with_log_applied(from: &Path, records: &[wal::Record]) -> Result<(Source, Scratch)> {
    let scratch = Scratch::copy_of(from)
        .map_err(|err| JournalError::Io { path: std::env::temp_dir(), source: err })?;
    let db = source::open_copy(from, &scratch)?
        .map_err(|why| JournalError::damaged(from, format!("a copy does not open: {why}")))?;
    let log = wal::path_for(from);
    guard::catching(from, "applying its write-ahead log to a copy", || {
        let txn = guard::Held::new(db.begin_write().at(from)?);
        let mut tx = store::Tx::open(&txn, from, store::now_ms())?;
        for record in records {
            tx.apply_redo(&record.payload, &log, record.lsn)?;
        }
        drop(tx);
        txn.into_inner().commit().at(from)
    })?;
    match source::from_copy(from, db)? {
        Opening::Open(src) => Ok((src, scratch)),
        Opening::NeedsRecovery => {
            Err(JournalError::damaged(from, "its copy still needs crash recovery"))
        }
        Opening::Unreadable(why) => Err(JournalError::damaged(from, why)),
    }
}
