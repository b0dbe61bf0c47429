//! Upgrading a file of an older format to [`FORMAT_VERSION`] when it is opened for writing.
//!
//! Formats 1 and 2 store bare JSON; format 3 seals every record with its checksum (see
//! `checksum`). The upgrade rewrites every record of `clio_runs`, `clio_entries`,
//! `clio_tasks` and `clio_sessions` sealed, and the version, in one durable transaction: a
//! crash leaves the old file or the new one. Each record is decoded first, so that a record
//! already damaged is refused, naming it, instead of being sealed as if it were whole
//! (`Journal::salvage` reads such a file without writing to it).

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;

use crate::checksum::{self, Place};
use crate::error::{JournalError, Result};
use crate::format::{FORMAT_VERSION, RawEntry, RawRunRecord, SessionRecord, TaskRecord};
use crate::guard::Held;
use crate::store::{AtPath, ENTRIES, KEY_FORMAT_VERSION, META, RUNS, SESSIONS, TASKS};

/// Seals every record of `db` (a file of format `from`, below the current one) and records
/// the current format version, in one durable commit.
pub(crate) fn seal_records(
    db: &Database,
    path: &Path,
    from: u64,
    quick_repair: bool,
) -> Result<()> {
    // The records are read from a snapshot while the write transaction replaces them.
    let snapshot = db.begin_read().at(path)?;
    let mut txn = db.begin_write().at(path)?;
    {
        // A record that does not decode is already damaged: sealing it would vouch for it.
        let verify = |place: Place<'_>, json: &[u8], decodes: Decodes| {
            decodes(json).map_err(|err| {
                JournalError::damaged(
                    path,
                    format!(
                        "{place}: its value does not decode ({err}); the file (format {from}) \
                         was not upgraded"
                    ),
                )
            })
        };
        let reseal = |table: TableDefinition<u64, &[u8]>,
                      place: fn(u64) -> Place<'static>,
                      decodes| {
            let src = snapshot.open_table(table).at(path)?;
            let mut dst = Held::new(txn.open_table(table).at(path)?);
            for item in src.iter().at(path)? {
                let (key, bytes) = item.at(path)?;
                let (at, json) = (place(key.value()), bytes.value());
                verify(at, json, decodes)?;
                dst.insert(key.value(), checksum::seal(at, json.to_vec()).as_slice()).at(path)?;
            }
            Ok::<_, JournalError>(())
        };
        reseal(RUNS, Place::Run, decodes::<RawRunRecord>)?;
        reseal(TASKS, Place::Task, decodes::<TaskRecord>)?;

        let src = snapshot.open_table(ENTRIES).at(path)?;
        let mut dst = Held::new(txn.open_table(ENTRIES).at(path)?);
        for item in src.iter().at(path)? {
            let (key, bytes) = item.at(path)?;
            let ((run, seq), json) = (key.value(), bytes.value());
            let at = Place::Entry { run, seq };
            verify(at, json, decodes::<RawEntry>)?;
            dst.insert((run, seq), checksum::seal(at, json.to_vec()).as_slice()).at(path)?;
        }

        let src = snapshot.open_table(SESSIONS).at(path)?;
        let mut dst = Held::new(txn.open_table(SESSIONS).at(path)?);
        for item in src.iter().at(path)? {
            let (key, bytes) = item.at(path)?;
            let (id, json) = (key.value(), bytes.value());
            let at = Place::Session(id);
            verify(at, json, decodes::<SessionRecord>)?;
            dst.insert(id, checksum::seal(at, json.to_vec()).as_slice()).at(path)?;
        }

        txn.open_table(META).at(path)?.insert(KEY_FORMAT_VERSION, FORMAT_VERSION).at(path)?;
    }
    txn.set_quick_repair(quick_repair);
    txn.commit().at(path)
}

/// Whether a record's JSON decodes as the type stored in its table.
type Decodes = fn(&[u8]) -> serde_json::Result<()>;

fn decodes<T: DeserializeOwned>(json: &[u8]) -> serde_json::Result<()> {
    serde_json::from_slice::<T>(json).map(drop)
}
