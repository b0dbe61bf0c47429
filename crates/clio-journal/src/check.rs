//! [`Journal::check`]: reads a journal file without writing to it and reports every problem
//! it finds, each naming its table and key.
//!
//! Two checks, because each sees what the other cannot:
//! - redb's own integrity check, which verifies the checksum of every page of its trees. It
//!   repairs what it can and so needs a writable database: it runs on a private copy of the
//!   file in the temporary folder (as much free space as the journal takes), never on the file.
//! - a read of every record of every table: each record's checksum (format 3 on), that it
//!   decodes and says where it is stored, and the cheap invariants of
//!   `docs/journal-format.md`: runs and run heads pair up, a run's entries are exactly
//!   `0..head`, the identity index matches the entries' identities, the run-task and live
//!   indexes match the tasks and sessions, the id counters lie past every id, and a scan of a
//!   table reads as many rows as the table records.
//!
//! The write-ahead log is read as an open reads it, without applying it: damage to it is a
//! problem (every other command refuses the journal), and so is a copy of its last batch
//! that does not read beside one that does; when it holds writes the file lacks, a note
//! says so (their records were not checked against the tables).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use redb::{ReadOnlyTable, ReadableTable, ReadableTableMetadata, TableError};
use serde::Serialize;

use crate::checksum::{Place, Sealing};
use crate::error::{JournalError, Result};
use crate::format::{RawEntry, RawRunRecord, SessionRecord, TaskRecord};
use crate::guard;
use crate::handle::Journal;
use crate::source::{self, Opening, Scratch, Source};
use crate::store::{
    ENTRIES, IDENTITIES, KEY_NEXT_RUN, KEY_NEXT_TASK, LIVE_SESSIONS, LIVE_TASKS, META, RUN_HEADS,
    RUN_TASKS, RUNS, SESSIONS, TASKS,
};
use crate::wal;

/// What [`Journal::check`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// The journal file.
    pub path: PathBuf,
    /// Its format version, when it could be read.
    pub format_version: Option<u64>,
    /// Whether its records carry checksums (format 3 on), each verified by this check.
    pub checksummed: bool,
    /// What redb's integrity check said.
    pub storage: StorageCheck,
    /// How many records of each kind were read.
    pub counts: RecordCounts,
    /// Every problem found; none when the journal is whole.
    pub problems: Vec<Problem>,
    /// What a person should know besides the problems (what was not checked, and why).
    pub notes: Vec<String>,
}

impl CheckReport {
    /// Returns whether no problem was found.
    pub fn is_whole(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The outcome of redb's integrity check, run on a private copy of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum StorageCheck {
    /// Every page of the file verified.
    Passed,
    /// redb found its structures damaged (also listed among the problems).
    Failed {
        /// What it said.
        detail: String,
    },
    /// The check did not run.
    Skipped {
        /// Why not.
        reason: String,
    },
}

/// How many records of each kind a check read (whole or not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RecordCounts {
    /// Rows of `clio_runs`.
    pub runs: u64,
    /// Rows of `clio_entries`.
    pub entries: u64,
    /// Rows of `clio_tasks`.
    pub tasks: u64,
    /// Rows of `clio_sessions`.
    pub sessions: u64,
}

/// One problem a check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The table it is in (`clio_entries`, ...), or `file` for the file as a whole.
    pub table: String,
    /// The key, as a person reads it (`run 3, seq 7`), when the problem is one record's.
    pub key: Option<String>,
    /// What is wrong: what was found, and what was expected.
    pub detail: String,
}

impl Journal {
    /// Checks the journal file at `path` without writing to it, and reports every problem.
    ///
    /// Runs redb's integrity check on a private copy, then reads every record verifying its
    /// checksum and the invariants of the format (see the module `check`). Fails only when
    /// the file cannot be checked at all: missing ([`JournalError::Io`]), in use
    /// ([`JournalError::AlreadyOpen`]), not a journal or of a newer format. Damage, including
    /// a file redb cannot open or panics on, is reported, not returned as an error.
    pub fn check(path: impl AsRef<Path>) -> Result<CheckReport> {
        let path = path.as_ref();
        source::preflight(path)?;
        let mut report = CheckReport {
            path: path.to_path_buf(),
            format_version: None,
            checksummed: false,
            storage: StorageCheck::Skipped { reason: String::new() },
            counts: RecordCounts::default(),
            problems: Vec::new(),
            notes: Vec::new(),
        };
        match guard::catching(path, "checking it", || check_into(path, &mut report)) {
            Ok(()) => Ok(report),
            // A panic outside the record checks (opening, closing): the report so far stands.
            Err(JournalError::Damaged { detail, .. }) => {
                report.problem("file", None, detail);
                Ok(report)
            }
            Err(err) => Err(err),
        }
    }
}

/// Runs the checks of [`Journal::check`] into `report`. The storage engine's handles are
/// closed with [`guard::drop_quietly`]: closing a damaged file may panic.
fn check_into(path: &Path, report: &mut CheckReport) -> Result<()> {
    let (storage, mut copy) = storage_check(path)?;
    if let StorageCheck::Failed { detail } = &storage {
        report.problem("file", None, format!("redb's integrity check failed: {detail}"));
    }
    report.storage = storage;

    let mut opened = source::open_read_only(path)?;
    if let Opening::NeedsRecovery = opened
        && let Some(db) = copy.take()
    {
        opened = source::from_copy(path, db)?;
        if let Opening::Open(_) = opened {
            report.notes.push(
                "the file was not closed cleanly (a crash): its records were read from a \
                 recovered copy; the next open recovers the file itself"
                    .to_owned(),
            );
        }
    }
    guard::drop_quietly(copy);
    let source = match opened {
        Opening::Open(source) => source,
        Opening::NeedsRecovery => {
            report.problem(
                "file",
                None,
                "the file was not closed cleanly and needs crash recovery, which only a \
                 writable open does; open the journal once (any clio command that reads it), \
                 then check again",
            );
            return Ok(());
        }
        Opening::Unreadable(why) => {
            report.problem("file", None, format!("the file does not open: {why}"));
            return Ok(());
        }
    };
    report.format_version = Some(source.version);
    report.checksummed = source.sealing == Sealing::Sealed;
    if !report.checksummed {
        report.notes.push(format!(
            "format {}: records carry no checksums, so only their decoding and the invariants \
             were checked; opening the journal for writing upgrades it",
            source.version
        ));
    }
    Checker { src: &source, report, runs: BTreeSet::new(), max_task: 0 }.run();
    check_log(&source, report);
    guard::drop_quietly(source);
    Ok(())
}

impl CheckReport {
    fn problem(&mut self, table: &str, key: Option<String>, detail: impl Into<String>) {
        self.problems.push(Problem { table: table.to_owned(), key, detail: detail.into() });
    }
}

/// Runs redb's integrity check on a private copy of `path`; returns its outcome and the
/// copy, opened (and recovered if need be), for reading when the file itself needs recovery.
fn storage_check(path: &Path) -> Result<(StorageCheck, Option<redb::Database>)> {
    let scratch = match Scratch::copy_of(path) {
        Ok(scratch) => scratch,
        Err(err) => {
            let reason = format!(
                "copying the file to {} failed ({err}); redb's check needs a writable copy",
                std::env::temp_dir().display()
            );
            return Ok((StorageCheck::Skipped { reason }, None));
        }
    };
    let mut db = match source::open_copy(path, &scratch)? {
        Ok(db) => db,
        Err(why) => return Ok((StorageCheck::Failed { detail: why }, None)),
    };
    let checked = guard::catching(path, "checking a copy of it", || {
        db.check_integrity().map_err(|err| JournalError::from_redb(path, err))
    });
    let outcome = match checked {
        Ok(true) => StorageCheck::Passed,
        Ok(false) => StorageCheck::Failed {
            detail: "some pages fail their checksums (redb could repair its copy)".to_owned(),
        },
        Err(JournalError::Corrupted { detail, .. } | JournalError::Damaged { detail, .. }) => {
            StorageCheck::Failed { detail }
        }
        Err(JournalError::Storage { source, .. }) => {
            StorageCheck::Failed { detail: source.to_string() }
        }
        Err(err) => return Err(err),
    };
    // The copy's file goes with `scratch`; an open database keeps reading its inode.
    drop(scratch);
    Ok((outcome, Some(db)))
}

/// Reads the write-ahead log beside the file as an open would (without applying it): a
/// log that an open refuses is a problem, and so is a copy of its last batch found damaged
/// beside a whole one (read past, but damage all the same); records the file does not hold
/// yet are a note.
fn check_log(src: &Source, report: &mut CheckReport) {
    const TABLE: &str = "write-ahead log";
    let log = wal::path_for(&src.path);
    let expected = match crate::journal::expected_log(&src.txn, &src.path) {
        Ok(Some(expected)) => expected,
        Ok(None) => return,
        Err(err) => {
            report.problem(
                TABLE,
                None,
                format!("what the file says of its log does not read: {err}"),
            );
            return;
        }
    };
    match wal::read_all(&log, &expected) {
        Ok(read) => {
            for mended in &read.mended {
                report.problem(
                    TABLE,
                    Some(format!("record {}", mended.lsn)),
                    format!(
                        "{}: the copy of the log's last batch at offset {} does not read (damaged, \
                         or torn by a power cut while it was written); its other copy at offset \
                         {} is whole and is what an open reads",
                        log.display(),
                        mended.damaged_at,
                        mended.read_at
                    ),
                );
            }
            if let (Some(first), Some(last)) = (read.records.first(), read.records.last()) {
                report.notes.push(format!(
                    "the write-ahead log {} holds writes the file does not (records {} to {}): \
                     they were not checked; open the journal once to apply them, then check again",
                    log.display(),
                    first.lsn,
                    last.lsn
                ));
            }
        }
        Err(JournalError::Corrupted { path, detail }) => {
            // What to do is the report's to say: the damage alone.
            let detail = detail.split("; nothing was changed").next().unwrap_or(&detail);
            report.problem(TABLE, None, format!("{}: {detail}", path.display()));
        }
        Err(err) => report.problem(TABLE, None, err.to_string()),
    }
}

/// Reads every table of a source into a report.
struct Checker<'a> {
    src: &'a Source,
    report: &'a mut CheckReport,
    /// The keys of `clio_runs`.
    runs: BTreeSet<u64>,
    max_task: u64,
}

/// A table's rows as read: how many, and whether the scan reached the end.
struct Scan {
    read: u64,
    whole: bool,
}

impl Checker<'_> {
    fn run(mut self) {
        let heads = self.step("clio_runs", Self::runs).unwrap_or_default();
        self.step("clio_entries", |c| c.entries(&heads));
        self.step("clio_tasks", Self::tasks);
        self.step("clio_sessions", Self::sessions);
        self.step("clio_meta", Self::counters);
    }

    fn problem(&mut self, table: &str, key: Option<String>, detail: impl Into<String>) {
        self.report.problem(table, key, detail);
    }

    /// Runs one part of the check; a storage error or a panic ends that part as a problem of
    /// `table`, and the check goes on with the next.
    fn step<T>(&mut self, table: &str, f: impl FnOnce(&mut Self) -> Result<T>) -> Option<T> {
        let path = self.src.path.clone();
        match guard::catching(&path, format_args!("reading {table}"), || f(self)) {
            Ok(value) => Some(value),
            Err(err) => {
                self.problem(table, None, format!("the check of this table stopped: {err}"));
                None
            }
        }
    }

    /// Opens `table`; a missing table is a problem (`None`).
    fn open<K: redb::Key + 'static, V: redb::Value + 'static>(
        &mut self,
        def: redb::TableDefinition<K, V>,
    ) -> Result<Option<ReadOnlyTable<K, V>>> {
        use redb::TableHandle;
        match self.src.txn.open_table(def) {
            Ok(table) => Ok(Some(table)),
            Err(TableError::TableDoesNotExist(_)) => {
                self.problem(def.name(), None, "the table is missing");
                Ok(None)
            }
            Err(err) => Err(JournalError::from_redb(&self.src.path, err)),
        }
    }

    /// Reports a scan that stopped early or read another number of rows than recorded.
    fn scanned<K: redb::Key + 'static, V: redb::Value + 'static>(
        &mut self,
        name: &str,
        table: &ReadOnlyTable<K, V>,
        scan: Scan,
    ) -> Result<()> {
        let recorded = table.len().map_err(|e| JournalError::from_redb(&self.src.path, e))?;
        if scan.whole && scan.read != recorded {
            self.problem(
                name,
                None,
                format!("a scan read {} rows, but the table records {recorded}", scan.read),
            );
        }
        Ok(())
    }

    fn storage(&mut self, table: &str, after: Option<String>, err: redb::StorageError) {
        let at = after.map_or_else(|| "at its first row".to_owned(), |k| format!("after {k}"));
        self.problem(table, None, format!("reading stopped {at}: {err}"));
    }

    /// Checks `clio_runs` and `clio_run_heads` (invariant 2's pairing); returns the heads.
    fn runs(&mut self) -> Result<BTreeMap<u64, u64>> {
        let sealing = self.src.sealing;
        let mut heads = BTreeMap::new();
        if let Some(table) = self.open(RUNS)? {
            let mut scan = Scan { read: 0, whole: true };
            let mut last = None;
            for item in table.iter().map_err(|e| JournalError::from_redb(&self.src.path, e))? {
                let (key, bytes) = match item {
                    Ok(row) => row,
                    Err(err) => {
                        self.storage("clio_runs", last, err);
                        scan.whole = false;
                        break;
                    }
                };
                let run = key.value();
                scan.read += 1;
                self.report.counts.runs += 1;
                self.runs.insert(run);
                last = Some(format!("run {run}"));
                let place = Place::Run(run);
                match record::<RawRunRecord>(sealing, place, bytes.value()) {
                    Ok(rec) if rec.id.0 != run => {
                        self.place_problem(place, format!("it holds run {}", rec.id))
                    }
                    Ok(_) => {}
                    Err(why) => self.place_problem(place, why),
                }
            }
            self.scanned("clio_runs", &table, scan)?;
        }
        if let Some(table) = self.open(RUN_HEADS)? {
            let mut scan = Scan { read: 0, whole: true };
            let mut last = None;
            for item in table.iter().map_err(|e| JournalError::from_redb(&self.src.path, e))? {
                let (key, head) = match item {
                    Ok(row) => row,
                    Err(err) => {
                        self.storage("clio_run_heads", last, err);
                        scan.whole = false;
                        break;
                    }
                };
                scan.read += 1;
                last = Some(format!("run {}", key.value()));
                heads.insert(key.value(), head.value());
            }
            self.scanned("clio_run_heads", &table, scan)?;
        }
        let runs = self.runs.clone();
        for run in runs.difference(&heads.keys().copied().collect()) {
            self.problem(
                "clio_run_heads",
                Some(format!("run {run}")),
                "missing: the run has a record but no head",
            );
        }
        for run in heads.keys().filter(|r| !runs.contains(r)) {
            self.problem(
                "clio_runs",
                Some(format!("run {run}")),
                "missing: the run has a head but no record",
            );
        }
        Ok(heads)
    }

    fn place_problem(&mut self, place: Place<'_>, detail: impl Into<String>) {
        self.report.problem(place.table(), Some(place.key()), detail);
    }

    /// Checks `clio_entries` run by run against the heads (invariants 2 and 3) and the
    /// identity index (invariant 4).
    fn entries(&mut self, heads: &BTreeMap<u64, u64>) -> Result<()> {
        let Some(table) = self.open(ENTRIES)? else { return Ok(()) };
        let identities = self.open(IDENTITIES)?;
        let sealing = self.src.sealing;
        let mut scan = Scan { read: 0, whole: true };
        let mut group: Option<RunEntries> = None;
        let mut seen = BTreeSet::new();
        let mut last = None;
        for item in table.iter().map_err(|e| JournalError::from_redb(&self.src.path, e))? {
            let (key, bytes) = match item {
                Ok(row) => row,
                Err(err) => {
                    self.storage("clio_entries", last, err);
                    scan.whole = false;
                    break;
                }
            };
            let (run, seq) = key.value();
            scan.read += 1;
            self.report.counts.entries += 1;
            last = Some(format!("run {run}, seq {seq}"));
            if group.as_ref().is_none_or(|g| g.run != run) {
                if let Some(done) = group.take() {
                    self.end_run(done, heads, identities.as_ref())?;
                }
                seen.insert(run);
                group =
                    Some(RunEntries { run, next: 0, identities: HashMap::new(), damaged: false });
            }
            let Some(g) = group.as_mut() else { continue };
            if seq != g.next {
                let missing = if seq == g.next + 1 {
                    format!("entry {} is missing", g.next)
                } else {
                    format!("entries {} to {} are missing", g.next, seq - 1)
                };
                let place = Place::Entry { run, seq };
                self.report.problem(place.table(), Some(format!("run {run}")), missing);
            }
            g.next = seq + 1;
            let place = Place::Entry { run, seq };
            match record::<RawEntry>(sealing, place, bytes.value()) {
                Ok(entry) if entry.run.0 != run || entry.seq != seq => self.place_problem(
                    place,
                    format!("it holds entry {} of run {}", entry.seq, entry.run),
                ),
                Ok(entry) => {
                    if let Some(identity) = entry.identity
                        && let Some(first) = g.identities.insert(identity.clone(), seq)
                    {
                        self.place_problem(
                            place,
                            format!("its identity {identity:?} is also entry {first}'s"),
                        );
                    }
                }
                Err(why) => {
                    g.damaged = true;
                    self.place_problem(place, why);
                }
            }
        }
        if let Some(done) = group.take() {
            self.end_run(done, heads, identities.as_ref())?;
        }
        self.scanned("clio_entries", &table, scan)?;
        for (run, head) in heads {
            if *head > 0 && !seen.contains(run) {
                self.problem(
                    "clio_entries",
                    Some(format!("run {run}")),
                    format!("the run's head says it has {head} entries, but none is stored"),
                );
            }
        }
        // Identity rows of runs without entries, found run by run.
        if let Some(index) = &identities {
            let mut from = 0u64;
            loop {
                let first = index
                    .range((from, "")..)
                    .map_err(|e| JournalError::from_redb(&self.src.path, e))?
                    .next();
                let Some(Ok((key, _))) = first else { break };
                let run = key.value().0;
                if !seen.contains(&run) {
                    let rows = identity_rows(index, run, &self.src.path)?.len();
                    self.problem(
                        "clio_identities",
                        Some(format!("run {run}")),
                        format!("{rows} rows name entries of a run that has none"),
                    );
                }
                let Some(next) = run.checked_add(1) else { break };
                from = next;
            }
        }
        Ok(())
    }

    /// Checks the end of one run's entries against its head and its identity rows.
    fn end_run(
        &mut self,
        done: RunEntries,
        heads: &BTreeMap<u64, u64>,
        index: Option<&ReadOnlyTable<(u64, &'static str), u64>>,
    ) -> Result<()> {
        let run = done.run;
        let key = Some(format!("run {run}"));
        match heads.get(&run) {
            None => {
                self.problem("clio_run_heads", key.clone(), "missing: the run has entries");
            }
            Some(head) if done.next < *head => self.problem(
                "clio_entries",
                key.clone(),
                format!(
                    "entries {} to {} are missing (the run's head is {head})",
                    done.next,
                    head - 1
                ),
            ),
            Some(head) if done.next > *head => self.problem(
                "clio_entries",
                key.clone(),
                format!("entries {head} to {} lie past the run's head ({head})", done.next - 1),
            ),
            Some(_) => {}
        }
        if !self.runs.contains(&run) && heads.contains_key(&run) {
            // Already reported as a head without a record.
        } else if !self.runs.contains(&run) {
            self.problem("clio_runs", key.clone(), "missing: the run has entries");
        }
        let Some(index) = index else { return Ok(()) };
        let mut expected = done.identities;
        for (identity, seq) in identity_rows(index, run, &self.src.path)? {
            match expected.remove(&identity) {
                Some(held) if held == seq => {}
                Some(held) => self.problem(
                    "clio_identities",
                    Some(format!("run {run}, {identity:?}")),
                    format!("points at entry {seq}, but entry {held} holds the identity"),
                ),
                // An entry that failed its checksum may be the one that holds it.
                None if done.damaged => {}
                None => self.problem(
                    "clio_identities",
                    Some(format!("run {run}, {identity:?}")),
                    format!("points at entry {seq}, but no entry of the run holds the identity"),
                ),
            }
        }
        let mut missing: Vec<_> = expected.into_iter().collect();
        missing.sort_by_key(|(_, seq)| *seq);
        for (identity, seq) in missing {
            self.problem(
                "clio_identities",
                Some(format!("run {run}, {identity:?}")),
                format!("missing: entry {seq} holds the identity, but the index lacks it"),
            );
        }
        Ok(())
    }

    /// Checks `clio_tasks` against `clio_run_tasks` and `clio_live_tasks` (invariants 5, 6).
    fn tasks(&mut self) -> Result<()> {
        let sealing = self.src.sealing;
        let mut listed = BTreeSet::new();
        let mut active = BTreeSet::new();
        let mut damaged = BTreeSet::new();
        if let Some(table) = self.open(TASKS)? {
            let mut scan = Scan { read: 0, whole: true };
            let mut last = None;
            for item in table.iter().map_err(|e| JournalError::from_redb(&self.src.path, e))? {
                let (key, bytes) = match item {
                    Ok(row) => row,
                    Err(err) => {
                        self.storage("clio_tasks", last, err);
                        scan.whole = false;
                        break;
                    }
                };
                let task = key.value();
                scan.read += 1;
                self.report.counts.tasks += 1;
                self.max_task = self.max_task.max(task);
                last = Some(format!("task {task}"));
                let place = Place::Task(task);
                match record::<TaskRecord>(sealing, place, bytes.value()) {
                    Ok(rec) if rec.id.0 != task => {
                        damaged.insert(task);
                        self.place_problem(place, format!("it holds task {}", rec.id));
                    }
                    Ok(rec) => {
                        if !self.runs.contains(&rec.run.0) {
                            self.place_problem(
                                place,
                                format!("it belongs to run {}, which does not exist", rec.run),
                            );
                        }
                        listed.insert((rec.run.0, task));
                        if rec.status.is_active() {
                            active.insert(task);
                        }
                    }
                    Err(why) => {
                        damaged.insert(task);
                        self.place_problem(place, why);
                    }
                }
            }
            self.scanned("clio_tasks", &table, scan)?;
        }
        if let Some(index) = self.open(RUN_TASKS)? {
            let mut scan = Scan { read: 0, whole: true };
            for item in index.iter().map_err(|e| JournalError::from_redb(&self.src.path, e))? {
                let Ok((key, _)) = item else {
                    self.problem("clio_run_tasks", None, "reading stopped part way");
                    scan.whole = false;
                    break;
                };
                scan.read += 1;
                let (run, task) = key.value();
                if !listed.remove(&(run, task)) && !damaged.contains(&task) {
                    self.problem(
                        "clio_run_tasks",
                        Some(format!("run {run}, task {task}")),
                        "lists a task that does not exist or belongs to another run",
                    );
                }
            }
            self.scanned("clio_run_tasks", &index, scan)?;
            for (run, task) in listed {
                self.problem(
                    "clio_run_tasks",
                    Some(format!("run {run}, task {task}")),
                    "missing: the task belongs to the run but is not listed under it",
                );
            }
        }
        if let Some(index) = self.open(LIVE_TASKS)? {
            let mut scan = Scan { read: 0, whole: true };
            for item in index.iter().map_err(|e| JournalError::from_redb(&self.src.path, e))? {
                let Ok((key, _)) = item else {
                    self.problem("clio_live_tasks", None, "reading stopped part way");
                    scan.whole = false;
                    break;
                };
                scan.read += 1;
                let task = key.value();
                if !active.remove(&task) && !damaged.contains(&task) {
                    self.problem(
                        "clio_live_tasks",
                        Some(format!("task {task}")),
                        "lists a task that does not exist or is not active",
                    );
                }
            }
            self.scanned("clio_live_tasks", &index, scan)?;
            for task in active {
                self.problem(
                    "clio_live_tasks",
                    Some(format!("task {task}")),
                    "missing: the task is active (queued, running or awaiting input)",
                );
            }
        }
        Ok(())
    }

    /// Checks `clio_sessions` against `clio_live_sessions` (invariant 7).
    fn sessions(&mut self) -> Result<()> {
        let sealing = self.src.sealing;
        let mut live = BTreeSet::new();
        let mut damaged = BTreeSet::new();
        if let Some(table) = self.open(SESSIONS)? {
            let mut scan = Scan { read: 0, whole: true };
            for item in table.iter().map_err(|e| JournalError::from_redb(&self.src.path, e))? {
                let Ok((key, bytes)) = item else {
                    self.problem("clio_sessions", None, "reading stopped part way");
                    scan.whole = false;
                    break;
                };
                scan.read += 1;
                self.report.counts.sessions += 1;
                let id = key.value().to_owned();
                let place = Place::Session(&id);
                match record::<SessionRecord>(sealing, place, bytes.value()) {
                    Ok(rec) if rec.id.0 != id => {
                        self.place_problem(place, format!("it holds session {:?}", rec.id.0));
                        damaged.insert(id);
                    }
                    Ok(rec) => {
                        if rec.status.is_live() {
                            live.insert(id);
                        }
                    }
                    Err(why) => {
                        self.place_problem(place, why);
                        damaged.insert(id);
                    }
                }
            }
            self.scanned("clio_sessions", &table, scan)?;
        }
        if let Some(index) = self.open(LIVE_SESSIONS)? {
            let mut scan = Scan { read: 0, whole: true };
            for item in index.iter().map_err(|e| JournalError::from_redb(&self.src.path, e))? {
                let Ok((key, _)) = item else {
                    self.problem("clio_live_sessions", None, "reading stopped part way");
                    scan.whole = false;
                    break;
                };
                scan.read += 1;
                let id = key.value().to_owned();
                if !live.remove(&id) && !damaged.contains(&id) {
                    self.problem(
                        "clio_live_sessions",
                        Some(format!("session {id:?}")),
                        "lists a session that does not exist or is not queued or running",
                    );
                }
            }
            self.scanned("clio_live_sessions", &index, scan)?;
            for id in live {
                self.problem(
                    "clio_live_sessions",
                    Some(format!("session {id:?}")),
                    "missing: the session is queued or running",
                );
            }
        }
        Ok(())
    }

    /// Checks that the id counters lie past every id in use (invariant 9).
    fn counters(&mut self) -> Result<()> {
        let Some(meta) = self.open(META)? else { return Ok(()) };
        let max_run = self.runs.last().copied().unwrap_or(0);
        for (name, max) in [(KEY_NEXT_RUN, max_run), (KEY_NEXT_TASK, self.max_task)] {
            let next = meta.get(name).map_err(|e| JournalError::from_redb(&self.src.path, e))?;
            match next.map(|v| v.value()) {
                None => self.problem("clio_meta", Some(name.to_owned()), "missing"),
                Some(next) if next <= max => self.problem(
                    "clio_meta",
                    Some(name.to_owned()),
                    format!("is {next}, but id {max} is in use: the next id must lie past it"),
                ),
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// One run's entries, as the scan of `clio_entries` goes through them.
struct RunEntries {
    run: u64,
    /// The sequence number the next entry should have.
    next: u64,
    /// The identities of its entries that read whole, with their sequence numbers.
    identities: HashMap<String, u64>,
    /// Whether one of its entries did not read (its identity is then unknown).
    damaged: bool,
}

/// Verifies and decodes a record stored at `place`; the error says what is wrong with it.
pub(crate) fn record<T: serde::de::DeserializeOwned>(
    sealing: Sealing,
    place: Place<'_>,
    bytes: &[u8],
) -> std::result::Result<T, String> {
    let json = sealing.open(place, bytes)?;
    serde_json::from_slice(json).map_err(|err| format!("its value does not decode: {err}"))
}

/// Returns the identity rows of `run`, in order.
pub(crate) fn identity_rows(
    index: &ReadOnlyTable<(u64, &'static str), u64>,
    run: u64,
    path: &Path,
) -> Result<Vec<(String, u64)>> {
    let at = |e: redb::StorageError| JournalError::from_redb(path, e);
    let range = match run.checked_add(1) {
        Some(next) => index.range((run, "")..(next, "")).map_err(at)?,
        None => index.range((run, "")..).map_err(at)?,
    };
    let mut rows = Vec::new();
    for item in range {
        let (key, seq) = item.map_err(at)?;
        rows.push((key.value().1.to_owned(), seq.value()));
    }
    Ok(rows)
}
