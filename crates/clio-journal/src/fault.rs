//! Guards against a crash or a failing disk leaving the journal unopenable, torn, or missing
//! an acknowledged append.
//!
//! [`FaultDisk`] is a redb `StorageBackend` over memory that remembers what has been synced.
//! It "crashes" at a chosen point: after N writes (every later operation then fails, as a
//! dying disk would) or at the Nth sync (later syncs silently do nothing, as on a power cut).
//! The image left on disk is the last synced state plus a random subset of the writes issued
//! since. A proptest runs random append programs against it and checks the reopened image
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

struct DiskState {
    current: Vec<u8>,
    durable: Vec<u8>,
    // Writes issued since the last sync that reached the disk, in order.
    pending: Vec<(u64, Vec<u8>)>,
    writes: u64,
    syncs: u64,
    crash: CrashPoint,
    rng: u64,
    // Invariant: `Some` once the crash point has been reached; never changes after.
    image: Option<Vec<u8>>,
}

impl DiskState {
    fn next_bit(&mut self) -> bool {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng & 1 == 1
    }

    /// The disk as a crash now would leave it.
    fn crash_image(&mut self) -> Vec<u8> {
        let mut image = self.durable.clone();
        image.resize(self.current.len(), 0);
        for idx in 0..self.pending.len() {
            if self.next_bit() {
                let (offset, data) = &self.pending[idx];
                let start = *offset as usize;
                let end = (start + data.len()).min(image.len());
                if start < end {
                    image[start..end].copy_from_slice(&data[..end - start]);
                }
            }
        }
        image
    }

    fn crashed(&self) -> bool {
        self.image.is_some()
    }

    fn dead(&self) -> bool {
        matches!(self.crash, CrashPoint::AfterWrites(_)) && self.crashed()
    }
}

/// A memory disk that crashes at a chosen point; clones share the disk.
#[derive(Clone)]
struct FaultDisk(Arc<Mutex<DiskState>>);

impl fmt::Debug for FaultDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FaultDisk")
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
        Self(Arc::new(Mutex::new(DiskState {
            durable: image.clone(),
            current: image,
            pending: Vec::new(),
            writes: 0,
            syncs: 0,
            crash,
            rng: seed | 1,
            image: None,
        })))
    }

    fn state(&self) -> MutexGuard<'_, DiskState> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn crashed(&self) -> bool {
        self.state().crashed()
    }

    /// The image left on disk: at the crash point, or now if it was never reached.
    fn final_image(&self) -> Vec<u8> {
        let mut state = self.state();
        match state.image.clone() {
            Some(image) => image,
            None => state.crash_image(),
        }
    }
}

impl StorageBackend for FaultDisk {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.state().current.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let state = self.state();
        let start = offset as usize;
        let src = state.current.get(start..start + out.len()).ok_or_else(injected)?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        let mut state = self.state();
        if state.dead() {
            return Err(injected());
        }
        state.current.resize(len as usize, 0);
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        let mut state = self.state();
        if state.dead() {
            return Err(injected());
        }
        state.syncs += 1;
        if let CrashPoint::AtSync(n) = state.crash
            && state.syncs == n
        {
            let image = state.crash_image();
            state.image = Some(image);
        }
        if !state.crashed() {
            state.durable = state.current.clone();
            state.pending.clear();
        }
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let mut state = self.state();
        if state.dead() {
            return Err(injected());
        }
        if let CrashPoint::AfterWrites(n) = state.crash
            && state.writes >= n
        {
            let image = state.crash_image();
            state.image = Some(image);
            return Err(injected());
        }
        state.writes += 1;
        let start = offset as usize;
        let dst = state.current.get_mut(start..start + data.len()).ok_or_else(injected)?;
        dst.copy_from_slice(data);
        state.pending.push((offset, data.to_vec()));
        Ok(())
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
    let mut model = Model::default();
    let label = PathBuf::from(":fault:");
    let Ok(journal) = Journal::open_backend(disk.clone(), label, config) else { return model };
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

#[test]
fn a_disk_that_fails_at_once_gives_a_typed_error() {
    let disk = FaultDisk::new(CrashPoint::AfterWrites(0), 7);
    let err = Journal::open_backend(disk, PathBuf::from(":fault:"), JournalConfig::default()).err();
    assert!(matches!(err, Some(JournalError::Io { .. } | JournalError::Storage { .. })), "{err:?}");
}
