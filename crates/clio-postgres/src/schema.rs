//! The journal's tables, created and changed by numbered migrations, each applied once in
//! its own transaction under an advisory lock, so that processes starting together on an
//! empty database do not race. The version reached is kept in `clio_meta`; a database at a
//! version newer than this build's is refused, never changed.

use std::path::Path;

use clio_journal::{JournalError, Result};
use postgres::Client;

use crate::pool::{backend, describe};

/// The newest schema this build reads and writes.
pub const SCHEMA_VERSION: u64 = 2;

/// The key of an advisory lock that serialises migrations ("clio" in ASCII).
const MIGRATION_LOCK: i64 = 0x636c_696f;

/// The migrations, in order: migration `i` brings the schema from version `i` to `i + 1`.
///
/// Records are kept as the same JSON the redb journal stores (`docs/journal-format.md`);
/// the columns beside them are what queries select and lock on. Version 2 keeps each
/// session's run beside it (`clio_sessions.run`), by which a session's writes are fenced
/// and a claim of the run finds its sessions.
const MIGRATIONS: &[&str] = &[
    r"
    CREATE TABLE clio_runs (
        id bigint PRIMARY KEY,
        status text NOT NULL,
        owner text NOT NULL,
        flow text NOT NULL,
        started_at_ms bigint NOT NULL,
        head bigint NOT NULL DEFAULT 0,
        record text NOT NULL
    );
    CREATE INDEX clio_runs_by_status ON clio_runs (status);
    CREATE TABLE clio_entries (
        run bigint NOT NULL REFERENCES clio_runs (id) ON DELETE CASCADE,
        seq bigint NOT NULL,
        identity text,
        kind text NOT NULL,
        task bigint,
        at_ms bigint NOT NULL,
        payload text NOT NULL,
        PRIMARY KEY (run, seq)
    );
    CREATE UNIQUE INDEX clio_entries_by_identity ON clio_entries (run, identity)
        WHERE identity IS NOT NULL;
    CREATE TABLE clio_tasks (
        id bigint PRIMARY KEY,
        run bigint NOT NULL REFERENCES clio_runs (id) ON DELETE CASCADE,
        active boolean NOT NULL,
        record text NOT NULL
    );
    CREATE INDEX clio_tasks_by_run ON clio_tasks (run, id);
    CREATE INDEX clio_tasks_active ON clio_tasks (id) WHERE active;
    CREATE TABLE clio_sessions (
        id text PRIMARY KEY,
        live boolean NOT NULL,
        record text NOT NULL
    );
    CREATE TABLE clio_leases (
        run bigint PRIMARY KEY REFERENCES clio_runs (id) ON DELETE CASCADE,
        worker text NOT NULL,
        epoch bigint NOT NULL,
        expires_at_ms bigint NOT NULL
    );
    CREATE SEQUENCE clio_run_ids;
    CREATE SEQUENCE clio_task_ids;
",
    r"
    ALTER TABLE clio_sessions ADD COLUMN run bigint;
    CREATE INDEX clio_sessions_by_run ON clio_sessions (run) WHERE run IS NOT NULL;
",
];

/// Brings the database's schema to [`SCHEMA_VERSION`]; returns the version it found
/// (0 for an empty database).
///
/// A database already at this build's version (every open but the first) is told by one
/// statement, in one round trip, without the migration's lock and transaction.
pub(crate) fn migrate(client: &mut Client, location: &Path) -> Result<u64> {
    if let Some(found) = current_version(client) {
        if found == SCHEMA_VERSION {
            return Ok(found);
        }
        if found > SCHEMA_VERSION {
            return Err(JournalError::UpgradeRequired {
                path: location.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
    }
    let fail = |err: postgres::Error| {
        backend(location, format!("migrating the schema: {}", describe(&err)))
    };
    let mut tx = client.transaction().map_err(fail)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(fail)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS clio_meta (key text PRIMARY KEY, value bigint NOT NULL)",
    )
    .map_err(fail)?;
    let found = tx
        .query_opt("SELECT value FROM clio_meta WHERE key = 'schema_version'", &[])
        .map_err(fail)?
        .map(|row| row.get::<_, i64>(0))
        .unwrap_or(0);
    let found = u64::try_from(found).unwrap_or(u64::MAX);
    if found > SCHEMA_VERSION {
        return Err(JournalError::UpgradeRequired {
            path: location.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (from, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(sql).map_err(fail)?;
        let to = from as i64 + 1;
        tx.execute(
            "INSERT INTO clio_meta (key, value) VALUES ('schema_version', $1)
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            &[&to],
        )
        .map_err(fail)?;
        tracing::info!(version = to, "journal schema migrated");
    }
    tx.commit().map_err(fail)?;
    Ok(found)
}

/// The schema version the database records, read in one round trip; `None` when it
/// records none (an empty database) or the read fails (the migration then says why).
fn current_version(client: &mut Client) -> Option<u64> {
    let messages =
        client.simple_query("SELECT value FROM clio_meta WHERE key = 'schema_version'").ok()?;
    messages.iter().find_map(|m| match m {
        postgres::SimpleQueryMessage::Row(row) => row.get(0).and_then(|v| v.parse().ok()),
        _ => None,
    })
}
