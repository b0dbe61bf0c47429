//! The checksum every stored record carries (format 3 on), so that a record changed on disk
//! is refused instead of read back as something that was never written.
//!
//! A stored value is its JSON followed by a CRC-32 (IEEE, little-endian `u32`) of the
//! table's name, the record's key and the JSON. redb checks the pages it reads only when it
//! repairs a file, so without this a flipped bit in a payload, an identity or a status reads
//! back as a different, well-formed record. Salting the checksum with the table and the key
//! also catches a value that ends up under another key (a damaged key, or a page read in
//! place of another): it verifies only where it was written.
//!
//! Files of format 1 and 2 hold bare JSON; [`Sealing`] says which form a file's values take.

use std::fmt;
use std::path::Path;

use crc32fast::Hasher;
use serde::de::DeserializeOwned;

use crate::error::{JournalError, Result};

/// The length of the checksum after a sealed value's JSON.
pub(crate) const CHECKSUM_LEN: usize = 4;

/// The first format whose records carry checksums.
pub(crate) const SEALED_SINCE: u64 = 3;

/// Where a record is stored: its table and its key, which salt its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place<'a> {
    /// `clio_runs[run]`.
    Run(u64),
    /// `clio_entries[(run, seq)]`.
    Entry {
        /// The run.
        run: u64,
        /// The entry's sequence number.
        seq: u64,
    },
    /// `clio_tasks[task]`.
    Task(u64),
    /// `clio_sessions[session]`.
    Session(&'a str),
}

impl Place<'_> {
    /// Returns the name of the table the record is stored in.
    pub(crate) fn table(self) -> &'static str {
        match self {
            Self::Run(_) => "clio_runs",
            Self::Entry { .. } => "clio_entries",
            Self::Task(_) => "clio_tasks",
            Self::Session(_) => "clio_sessions",
        }
    }

    /// Returns the key as a person reads it: `run 3`, `run 3, seq 7`, `task 5`, `session "s-1"`.
    pub(crate) fn key(self) -> String {
        match self {
            Self::Run(run) => format!("run {run}"),
            Self::Entry { run, seq } => format!("run {run}, seq {seq}"),
            Self::Task(task) => format!("task {task}"),
            Self::Session(id) => format!("session {id:?}"),
        }
    }

    /// Returns the checksum of `json` stored at this place.
    pub(crate) fn checksum(self, json: &[u8]) -> u32 {
        let mut hasher = Hasher::new();
        hasher.update(self.table().as_bytes());
        match self {
            Self::Run(id) | Self::Task(id) => hasher.update(&id.to_le_bytes()),
            Self::Entry { run, seq } => {
                hasher.update(&run.to_le_bytes());
                hasher.update(&seq.to_le_bytes());
            }
            Self::Session(id) => {
                // Length first, so that the key's end is unambiguous before the JSON.
                hasher.update(&(id.len() as u64).to_le_bytes());
                hasher.update(id.as_bytes());
            }
        }
        hasher.update(json);
        hasher.finalize()
    }
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.table(), self.key())
    }
}

/// Appends to `json` its checksum at `place`, making it the value to store there.
pub(crate) fn seal(place: Place<'_>, mut json: Vec<u8>) -> Vec<u8> {
    let sum = place.checksum(&json);
    json.extend_from_slice(&sum.to_le_bytes());
    json
}

/// How the values of a file are stored: sealed with a checksum (format 3 on) or bare JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sealing {
    /// JSON followed by its checksum, verified on every read.
    Sealed,
    /// Bare JSON (formats 1 and 2): read unverified.
    Bare,
}

impl Sealing {
    /// Returns how a file of format `version` stores its values.
    pub(crate) fn of_version(version: u64) -> Self {
        if version >= SEALED_SINCE { Self::Sealed } else { Self::Bare }
    }

    /// Returns the JSON of the value `bytes` stored at `place`, or what is wrong with it.
    pub(crate) fn open<'v>(self, place: Place<'_>, bytes: &'v [u8]) -> Result<&'v [u8], String> {
        match self {
            Self::Bare => Ok(bytes),
            Self::Sealed => unseal(place, bytes),
        }
    }

    /// Verifies and decodes the value `bytes` stored at `place`; a failure is
    /// [`JournalError::Damaged`] naming the table and the key.
    pub(crate) fn decode<T: DeserializeOwned>(
        self,
        path: &Path,
        place: Place<'_>,
        bytes: &[u8],
    ) -> Result<T> {
        decode_json(path, place, self.open(place, bytes).map_err(|why| damage(path, place, why))?)
    }
}

/// Returns the JSON of a sealed value, or what is wrong with it.
pub(crate) fn unseal<'v>(place: Place<'_>, bytes: &'v [u8]) -> Result<&'v [u8], String> {
    let Some(split) = bytes.len().checked_sub(CHECKSUM_LEN) else {
        return Err(format!(
            "its value is {} bytes long, shorter than the {CHECKSUM_LEN}-byte checksum every record ends with",
            bytes.len()
        ));
    };
    let (json, stored) = bytes.split_at(split);
    let stored = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
    let computed = place.checksum(json);
    if stored == computed {
        Ok(json)
    } else {
        Err(format!(
            "its value fails its checksum (stored {stored:#010x}, computed {computed:#010x}): \
             it changed after it was written, or belongs under another key"
        ))
    }
}

/// Decodes the JSON of a record stored at `place`.
pub(crate) fn decode_json<T: DeserializeOwned>(
    path: &Path,
    place: Place<'_>,
    json: &[u8],
) -> Result<T> {
    serde_json::from_slice(json)
        .map_err(|err| damage(path, place, format!("its value does not decode: {err}")))
}

/// Verifies and decodes a record of a journal of the current format (the only one the
/// writer and the reads of an open [`crate::Journal`] see).
pub(crate) fn decode<T: DeserializeOwned>(
    path: &Path,
    place: Place<'_>,
    bytes: &[u8],
) -> Result<T> {
    Sealing::Sealed.decode(path, place, bytes)
}

/// Builds the damage error for the record at `place`.
pub(crate) fn damage(path: &Path, place: Place<'_>, why: impl fmt::Display) -> JournalError {
    JournalError::damaged(path, format!("{place}: {why}"))
}

#[cfg(test)]
mod tests {
    use redb::TableHandle;

    use super::*;
    use crate::store;

    #[test]
    fn places_name_the_tables_the_store_uses() {
        assert_eq!(Place::Run(1).table(), store::RUNS.name());
        assert_eq!(Place::Entry { run: 1, seq: 0 }.table(), store::ENTRIES.name());
        assert_eq!(Place::Task(1).table(), store::TASKS.name());
        assert_eq!(Place::Session("s").table(), store::SESSIONS.name());
    }

    #[test]
    fn a_sealed_value_opens_only_where_it_was_sealed() {
        let json = br#"{"n":1}"#.to_vec();
        let at = Place::Entry { run: 1, seq: 2 };
        let sealed = seal(at, json.clone());
        assert_eq!(unseal(at, &sealed), Ok(json.as_slice()));
        for elsewhere in [
            Place::Entry { run: 1, seq: 3 },
            Place::Entry { run: 2, seq: 2 },
            Place::Run(1),
            Place::Task(1),
            Place::Session("s-1"),
        ] {
            assert!(unseal(elsewhere, &sealed).is_err(), "{elsewhere} accepted it");
        }
    }

    #[test]
    fn every_single_bit_flip_of_a_sealed_value_is_refused() {
        let at = Place::Session("s-1");
        let sealed = seal(at, br#"{"id":"s-1","status":"running"}"#.to_vec());
        for byte in 0..sealed.len() {
            for bit in 0..8 {
                let mut flipped = sealed.clone();
                flipped[byte] ^= 1 << bit;
                assert!(unseal(at, &flipped).is_err(), "flip of bit {bit} of byte {byte}");
            }
        }
        assert!(unseal(at, &sealed[..3]).unwrap_err().contains("shorter"));
    }

    #[test]
    fn bare_values_read_unverified_and_sealed_ones_verified() {
        let at = Place::Run(7);
        assert_eq!(Sealing::of_version(2), Sealing::Bare);
        assert_eq!(Sealing::of_version(3), Sealing::Sealed);
        assert_eq!(Sealing::Bare.open(at, b"{}"), Ok(&b"{}"[..]));
        assert!(Sealing::Sealed.open(at, b"{}").is_err());
        let err = Sealing::Sealed
            .decode::<serde_json::Value>(Path::new("j.redb"), at, b"{}xyzw")
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("clio_runs (run 7)") && text.contains("checksum"), "{text}");
        assert!(text.contains("clio journal check"), "{text}");
    }
}
