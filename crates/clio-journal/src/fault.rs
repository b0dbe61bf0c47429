//! Guards against a crash or a failing disk leaving the journal unopenable, torn, or missing
//! an acknowledged append.
//!
//! [`FaultDisk`] is a redb `StorageBackend` over memory that remembers what has been synced.
//! It "crashes" at a chosen point: after N writes (every later operation then fails, as a
//! dying disk would) or at the Nth sync (later syncs silently do nothing, as on a power cut).
//! The image left on disk is the last synced state plus a random subset of the writes issued
//! since (of the log's writes, a random subset of their 4 KiB pages: a torn write). A proptest runs random append programs against it and checks the reopened image
//! against an in-memory model: the entries are an exact prefix of the appends, cut at a batch
//! boundary, and include every append acknowledged before the crash.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use proptest::prelude::*;
use redb::StorageBackend;
use serde_json::json;

use crate::{EntryKind, Journal, JournalConfig, JournalError, NewEntry, NewRun, RunId};

/// Where the simulated crash happens.
#[derive(Debug, Clone, Copy)]
enum CrashPoint {
    /// After this many successful writes; later operations fail.
    AfterWrites(u64),
    /// When this sync (counted from 1) is called; it and later syncs do nothing.
    AtSync(u64),
    /// Never during the program: the process ends after a clean close.
    Never,
}

/// One simulated file: what it holds now, what was last made durable, and the writes issued
/// since (which a crash keeps or loses, each at random).
struct Disk {
    current: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<(u64, Vec<u8>)>,
    /// A write past the end extends the file, as a log's does (redb sets the length first).
    extends: bool,
    // Invariant: `Some` once the machine has crashed; never changes after.
    image: Option<Vec<u8>>,
}

/// The simulated machine: its files, and the one clock a crash point is counted on (writes
/// and syncs of every file), so that a power cut hits the journal and its log at once.
struct Machine {
    disks: Vec<Disk>,
    writes: u64,
    syncs: u64,
    crash: CrashPoint,
    rng: u64,
    crashed: bool,
}

impl Machine {
    fn next_bit(&mut self) -> bool {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng & 1 == 1
    }

    /// Takes every file's image as a crash now leaves it.
    fn crash_now(&mut self) {
        self.crashed = true;
        for i in 0..self.disks.len() {
            let image = self.crash_image(i);
            self.disks[i].image = Some(image);
        }
    }

    /// The file `i` as a crash now would leave it: the durable bytes, and each write
    /// issued since, kept or lost at random.
    fn crash_image(&mut self, i: usize) -> Vec<u8> {
        let mut image = self.disks[i].durable.clone();
        if !self.disks[i].extends {
            image.resize(self.disks[i].current.len(), 0);
        }
        for idx in 0..self.disks[i].pending.len() {
            // A log's write is torn at page boundaries: each 4 KiB page of it is kept or
            // lost on its own, as a disk that writes pages in any order leaves it.
            let pieces: Vec<(usize, usize)> = {
                let (offset, data) = &self.disks[i].pending[idx];
                let (start, end) = (*offset as usize, *offset as usize + data.len());
                if self.disks[i].extends {
                    let mut pieces = Vec::new();
                    let mut at = start;
                    while at < end {
                        let next = ((at / 4096) + 1) * 4096;
                        pieces.push((at, next.min(end)));
                        at = next.min(end);
                    }
                    pieces
                } else {
                    vec![(start, end)]
                }
            };
            for (from, to) in pieces {
                if self.next_bit() {
                    let (offset, data) = &self.disks[i].pending[idx];
                    let base = *offset as usize;
                    if self.disks[i].extends && to > image.len() {
                        image.resize(to, 0);
                    }
                    let to = to.min(image.len());
                    if from < to {
                        image[from..to].copy_from_slice(&data[from - base..to - base]);
                    }
                }
            }
        }
        image
    }

    fn dead(&self) -> bool {
        matches!(self.crash, CrashPoint::AfterWrites(_)) && self.crashed
    }

    fn sync(&mut self, i: usize) -> Result<(), io::Error> {
        if self.dead() {
            return Err(injected());
        }
        self.syncs += 1;
        if let CrashPoint::AtSync(n) = self.crash
            && self.syncs == n
            && !self.crashed
        {
            self.crash_now();
        }
        if !self.crashed {
            let disk = &mut self.disks[i];
            disk.durable = disk.current.clone();
            disk.pending.clear();
        }
        Ok(())
    }

    fn write(&mut self, i: usize, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        if self.dead() {
            return Err(injected());
        }
        if let CrashPoint::AfterWrites(n) = self.crash
            && self.writes >= n
        {
            if !self.crashed {
                self.crash_now();
            }
            return Err(injected());
        }
        self.writes += 1;
        let disk = &mut self.disks[i];
        let start = offset as usize;
        if disk.extends && start + data.len() > disk.current.len() {
            disk.current.resize(start + data.len(), 0);
        }
        let dst = disk.current.get_mut(start..start + data.len()).ok_or_else(injected)?;
        dst.copy_from_slice(data);
        disk.pending.push((offset, data.to_vec()));
        Ok(())
    }
}

/// One file of a simulated machine that crashes at a chosen point; clones share the machine.
#[derive(Clone)]
struct FaultDisk {
    machine: Arc<Mutex<Machine>>,
    index: usize,
}

impl fmt::Debug for FaultDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultDisk({})", self.index)
    }
}

fn injected() -> io::Error {
    io::Error::other("injected disk failure")
}

impl FaultDisk {
    fn new(crash: CrashPoint, seed: u64) -> Self {
        Self::from_image(Vec::new(), crash, seed)
    }

    fn from_image(image: Vec<u8>, crash: CrashPoint, seed: u64) -> Self {
        Self::machine(vec![(image, false)], crash, seed).remove(0)
    }

    /// A machine of files holding `images` (each with whether writes extend it), crashing
    /// at `crash`; returns one handle per file.
    fn machine(images: Vec<(Vec<u8>, bool)>, crash: CrashPoint, seed: u64) -> Vec<FaultDisk> {
        let disks = images
            .into_iter()
            .map(|(image, extends)| Disk {
                durable: image.clone(),
                current: image,
                pending: Vec::new(),
                extends,
                image: None,
            })
            .collect::<Vec<_>>();
        let n = disks.len();
        let machine = Arc::new(Mutex::new(Machine {
            disks,
            writes: 0,
            syncs: 0,
            crash,
            rng: seed | 1,
            crashed: false,
        }));
        (0..n).map(|index| FaultDisk { machine: Arc::clone(&machine), index }).collect()
    }

    fn state(&self) -> MutexGuard<'_, Machine> {
        self.machine.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn crashed(&self) -> bool {
        self.state().crashed
    }

    /// The image left on disk: at the crash point, or now if it was never reached.
    fn final_image(&self) -> Vec<u8> {
        let mut state = self.state();
        match state.disks[self.index].image.clone() {
            Some(image) => image,
            None => state.crash_image(self.index),
        }
    }
}

impl StorageBackend for FaultDisk {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.state().disks[self.index].current.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let state = self.state();
        let start = offset as usize;
        let disk = &state.disks[self.index];
        let src = disk.current.get(start..start + out.len()).ok_or_else(injected)?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        let mut state = self.state();
        if state.dead() {
            return Err(injected());
        }
        state.disks[self.index].current.resize(len as usize, 0);
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.state().sync(self.index)
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.state().write(self.index, offset, data)
    }
}

impl crate::wal::LogFile for FaultDisk {
    fn len(&self) -> io::Result<u64> {
        Ok(self.state().disks[self.index].current.len() as u64)
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<bool> {
        let state = self.state();
        let start = at as usize;
        Ok(match state.disks[self.index].current.get(start..start + buf.len()) {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        })
    }

    fn write_at(&mut self, data: &[u8], at: u64) -> io::Result<()> {
        self.state().write(self.index, at, data)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.state().sync(self.index)
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.state().sync(self.index)
    }
}

fn entry(batch: usize, idx: usize) -> NewEntry {
    NewEntry::new(EntryKind::Step, json!({"batch": batch, "idx": idx}))
        .with_identity(format!("b{batch}-{idx}"))
}

/// What the program did, as the model sees it.
#[derive(Debug, Default)]
struct Model {
    /// The size of every batch attempted, in order.
    batches: Vec<usize>,
    /// Entries acknowledged before the crash point: these must survive.
    guaranteed: usize,
    /// Whether the new file was complete before the crash point. A file crashed while being
    /// created is never seen: `Journal::open` creates it under another name and renames it.
    created: bool,
}

fn run_program(disk: &FaultDisk, config: JournalConfig, batches: &[usize]) -> Model {
    let label = PathBuf::from(":fault:");
    let journal = Journal::open_backend(disk.clone(), label, config);
    run_on(journal, disk, batches, None)
}

/// Runs the program on an opened `journal` whose disks are `disk`'s machine, taking the
/// checkpoint a close makes ([`Journal::checkpoint`]) after batch `close_checkpoint_after`.
fn run_on(
    journal: Result<Journal, JournalError>,
    disk: &FaultDisk,
    batches: &[usize],
    close_checkpoint_after: Option<usize>,
) -> Model {
    let mut model = Model::default();
    let Ok(journal) = journal else { return model };
    model.created = !disk.crashed();
    let Ok(run) = journal.create_run(NewRun {
        flow: "fault".into(),
        input: json!(null),
        input_digest: String::new(),
        fingerprint: String::new(),
        owner: "test".into(),
        launch: None,
    }) else {
        return model;
    };
    debug_assert_eq!(run, RunId(1));
    let mut acked = 0;
    for (batch, &size) in batches.iter().enumerate() {
        model.batches.push(size);
        let entries = (0..size).map(|idx| entry(batch, idx)).collect();
        match journal.append_batch(run, entries) {
            Ok(_) => {
                acked += size;
                if !disk.crashed() {
                    model.guaranteed = acked;
                }
                // Its outcome adds nothing to what was acknowledged; a disk that failed
                // in it fails the next batch.
                if close_checkpoint_after == Some(batch) {
                    let _ = journal.checkpoint().wait();
                }
            }
            Err(err) => {
                assert!(
                    matches!(err, JournalError::Io { .. } | JournalError::Storage { .. }),
                    "a disk failure gave {err:?}"
                );
                break;
            }
        }
    }
    // Dropping the journal closes it; on a dead disk that fails quietly, as a crash would.
    drop(journal);
    model
}

fn check_image(image: Vec<u8>, model: &Model) -> Result<(), TestCaseError> {
    if !model.created {
        return Ok(());
    }
    let disk = FaultDisk::from_image(image, CrashPoint::Never, 1);
    let journal =
        Journal::open_backend(disk, PathBuf::from(":reopened:"), JournalConfig::default())
            .map_err(|err| TestCaseError::fail(format!("the crash image does not open: {err}")))?;
    check_journal(&journal, model)
}

/// Checks a journal reopened from crash images against what the program acknowledged.
fn check_journal(journal: &Journal, model: &Model) -> Result<(), TestCaseError> {
    let entries = match journal.entries(RunId(1)) {
        Ok(entries) => entries,
        Err(JournalError::RunNotFound { .. }) => Vec::new(),
        Err(err) => return Err(TestCaseError::fail(format!("reading failed: {err}"))),
    };
    let expected: Vec<NewEntry> = model
        .batches
        .iter()
        .enumerate()
        .flat_map(|(batch, &size)| (0..size).map(move |idx| entry(batch, idx)))
        .collect();
    prop_assert!(entries.len() <= expected.len(), "more entries than appended");
    prop_assert!(
        entries.len() >= model.guaranteed,
        "{} entries survive, {} were acknowledged before the crash",
        entries.len(),
        model.guaranteed
    );
    for (got, want) in entries.iter().zip(&expected) {
        prop_assert_eq!(&got.payload, &want.payload);
        prop_assert_eq!(&got.identity, &want.identity);
    }
    let boundaries: Vec<usize> = model
        .batches
        .iter()
        .scan(0, |sum, size| {
            *sum += size;
            Some(*sum)
        })
        .collect();
    prop_assert!(
        entries.is_empty() || boundaries.contains(&entries.len()),
        "a batch was torn: {} entries",
        entries.len()
    );
    if let Some(last) = entries.last()
        && let Some(identity) = &last.identity
    {
        let found = journal.entry_by_identity(RunId(1), identity).ok().flatten();
        prop_assert_eq!(found.map(|e| e.seq), Some(last.seq));
    }
    // The reopened journal takes new appends after the surviving prefix.
    if !entries.is_empty() {
        let seq = journal
            .append(RunId(1), NewEntry::new(EntryKind::Event, json!("after")))
            .map_err(|err| TestCaseError::fail(format!("append after reopen failed: {err}")))?;
        prop_assert_eq!(seq, entries.len() as u64);
    }
    Ok(())
}

fn crash_point() -> impl Strategy<Value = CrashPoint> {
    prop_oneof![
        (0u64..400).prop_map(CrashPoint::AfterWrites),
        (1u64..40).prop_map(CrashPoint::AtSync),
        Just(CrashPoint::Never),
    ]
}

/// The number of cases: `PROPTEST_CASES` when set (the long tier sets 10,000), else 96.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(96)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn a_crash_leaves_a_prefix_with_every_acknowledged_append(
        batches in prop::collection::vec(1usize..5, 0..24),
        crash in crash_point(),
        seed in any::<u64>(),
        quick_repair in any::<bool>(),
    ) {
        let disk = FaultDisk::new(crash, seed);
        let config = JournalConfig { quick_repair, ..JournalConfig::default() };
        let model = run_program(&disk, config, &batches);
        check_image(disk.final_image(), &model)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// The shipped configuration: the journal with its write-ahead log, both on simulated
    /// disks of one machine. A power cut at any write or sync (every later write lost, each
    /// write since the last sync of its file kept or lost at random) leaves two files that
    /// reopen to a prefix holding every acknowledged append: the log's torn tail is dropped,
    /// and nothing acknowledged is ever taken for damage and refused. Some runs take the
    /// close's checkpoint ahead of the close, between two batches.
    #[test]
    fn a_power_cut_with_the_log_leaves_a_prefix_with_every_acknowledged_append(
        batches in prop::collection::vec(1usize..5, 0..24),
        crash in crash_point(),
        seed in any::<u64>(),
        small_log in any::<bool>(),
        close_checkpoint in any::<Option<prop::sample::Index>>(),
    ) {
        let close_checkpoint_after = close_checkpoint.map(|at| at.index(batches.len().max(1)));
        let disks = FaultDisk::machine(vec![(Vec::new(), false), (Vec::new(), true)], crash, seed);
        let checkpoint_bytes = if small_log { 512 } else { 16 << 20 };
        let config = JournalConfig { checkpoint_bytes, ..JournalConfig::default() };
        let opened = Journal::open_backend_with_log(
            disks[0].clone(),
            Box::new(disks[1].clone()),
            PathBuf::from(":fault:"),
            config.clone(),
        );
        let model = run_on(opened, &disks[0], &batches, close_checkpoint_after);
        if !model.created {
            return Ok(());
        }
        let images = vec![(disks[0].final_image(), false), (disks[1].final_image(), true)];
        let reopened = FaultDisk::machine(images, CrashPoint::Never, 1);
        let journal = Journal::open_backend_with_log(
            reopened[0].clone(),
            Box::new(reopened[1].clone()),
            PathBuf::from(":reopened:"),
            config,
        )
        .map_err(|err| TestCaseError::fail(format!("the crash images do not open: {err}")))?;
        check_journal(&journal, &model)?;
    }
}

#[test]
fn a_disk_that_fails_at_once_gives_a_typed_error() {
    let disk = FaultDisk::new(CrashPoint::AfterWrites(0), 7);
    let err = Journal::open_backend(disk, PathBuf::from(":fault:"), JournalConfig::default()).err();
    assert!(matches!(err, Some(JournalError::Io { .. } | JournalError::Storage { .. })), "{err:?}");
}

/// A log on a simulated disk whose writes fail while `failing` is set.
#[derive(Debug)]
struct FailingLog {
    disk: FaultDisk,
    failing: Arc<std::sync::atomic::AtomicBool>,
}

impl crate::wal::LogFile for FailingLog {
    fn len(&self) -> io::Result<u64> {
        crate::wal::LogFile::len(&self.disk)
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<bool> {
        self.disk.read_at(buf, at)
    }

    fn write_at(&mut self, data: &[u8], at: u64) -> io::Result<()> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(injected());
        }
        self.disk.write_at(data, at)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        crate::wal::LogFile::sync_data(&mut self.disk)
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.disk.sync_all()
    }
}

/// A write to the log that failed leaves what the log holds unknown, so every later write
/// is refused until a reopen; each caller is told so, and why, not that the writer stopped
/// (the batch is refused before its operations run, and they still answer).
#[test]
fn a_write_after_a_failed_log_write_is_refused_naming_the_log_failure() {
    let disks =
        FaultDisk::machine(vec![(Vec::new(), false), (Vec::new(), true)], CrashPoint::Never, 3);
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let log = FailingLog { disk: disks[1].clone(), failing: Arc::clone(&failing) };
    let journal = Journal::open_backend_with_log(
        disks[0].clone(),
        Box::new(log),
        PathBuf::from(":fault:"),
        JournalConfig::default(),
    )
    .expect("the journal opens");
    let run = journal
        .create_run(NewRun {
            flow: "f".into(),
            input: json!({}),
            input_digest: String::new(),
            fingerprint: String::new(),
            owner: "p".into(),
            launch: None,
        })
        .expect("a run");
    journal.append(run, entry(0, 0)).expect("an append through the log");
    failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let first = journal.append(run, entry(0, 1)).expect_err("the log's write fails");
    assert!(chain(&first).contains("injected disk failure"), "{first:?}");
    failing.store(false, std::sync::atomic::Ordering::SeqCst);
    for idx in 2..4 {
        let later = journal.append(run, entry(0, idx)).expect_err("refused until a reopen");
        let message = chain(&later);
        assert!(
            message.contains("writing the write-ahead log")
                && message.contains("reopen the journal"),
            "{later:?}"
        );
    }
    // What was acknowledged before the failure is still read back.
    assert_eq!(journal.entries(run).expect("entries").len(), 1);
}

/// An error with every source under it, as a person reading the whole error sees it.
fn chain(err: &JournalError) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
