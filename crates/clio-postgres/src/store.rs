//! [`PgStore`]: the journal's operations as SQL, each one transaction on a pooled
//! connection, with the records' rules from `clio_journal::records`, leases renewed by a
//! thread of the handle's own, and commits of other processes heard through `LISTEN`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use clio_journal::{
    CommitNotices, EndedTaskUpdate, EntryKind, JournalBackend, JournalError, Lease, NewEntry,
    NewRun, NewSession, NewTask, Pending, PendingReply, Pruned, RawEntry, Reconciled, Result,
    RunFilter, RunId, RunRecord, RunStatus, RunUpdate, SessionId, SessionRecord, SessionUpdate,
    TaskId, TaskRecord, TaskUpdate, pending_reply, records,
};
use postgres::types::ToSql;
use postgres::{Client, Row, Statement};
use serde_json::value::RawValue;

use crate::PostgresConfig;
use crate::lease::{Held, HeldState, Leases, Shared, listen, renew};
use crate::pool::{self, LOST, Link, Pool, Target, Traffic, backend, describe};
use crate::schema;

/// Subagent sessions, fenced by their run's lease.
#[path = "sessions.rs"]
mod sessions;

/// The writes into one run that wait together, written in one transaction.
#[path = "batch.rs"]
mod batch;
use batch::{
    EntryWrite, Queued, RunWrite, TaskPart, UpdateWrite, Written, in_batch, remember_task,
};

/// The PostgreSQL journal behind a [`clio_journal::Journal`].
pub(crate) struct PgStore {
    shared: Arc<Shared>,
    /// The writes into each run that wait for a connection (see [`PgStore::pending_in_run`]).
    queued: Arc<Mutex<HashMap<u64, Vec<RunWrite>>>>,
    pool: Pool,
    url: String,
    /// The thread that renews the leases, started with the first lease this handle holds.
    renewer: Mutex<Option<thread::JoinHandle<()>>>,
    /// Whether the thread that hears other processes' commits was started (by the first
    /// watcher of [`JournalBackend::commits`]); it is not joined: it sees the handle close
    /// within 200 ms and ends by itself.
    listening: std::sync::Once,
    /// What its connection threads asked of the server.
    traffic: Traffic,
    /// The run of each task this handle made that may still change, so that an update of
    /// the task joins the run's batch of writes (`update_task`).
    task_runs: Arc<Mutex<HashMap<u64, u64>>>,
    /// Whether a batch's writes of entries are grouped ([`crate::PostgresConfig::group_writes`]).
    group_writes: bool,
}

impl PgStore {
    /// Connects, migrates the schema and starts the handle's threads.
    ///
    /// A server that cannot be reached is tried again with backoff for the configured
    /// reconnect window, so that a command started while the server restarts waits for it.
    /// Only one connection is made here; the pool's others are made when they have work,
    /// and neither the renewer nor the listener starts until it is needed.
    pub(crate) fn connect(config: &PostgresConfig, location: PathBuf) -> Result<PgStore> {
        let target = Target {
            url: Arc::from(config.url.as_str()),
            location: location.clone(),
            reconnect: config.reconnect,
            traffic: Traffic::default(),
            idle_in_transaction: config.lease,
        };
        let mut first = pool::connect_within(&target, &mut None)?;
        schema::migrate(&mut first, &location)?;
        let pool = Pool::start(&target, config.connections, first)?;
        let lease_ms = i64::try_from(config.lease.as_millis()).unwrap_or(i64::MAX).max(1);
        let shared = Arc::new(Shared {
            location,
            commits: CommitNotices::default(),
            leases: Leases::default(),
            lease_ms,
            stop: AtomicBool::new(false),
            bell: Default::default(),
        });
        Ok(PgStore {
            shared,
            queued: Arc::default(),
            pool,
            url: config.url.clone(),
            renewer: Mutex::new(None),
            listening: std::sync::Once::new(),
            traffic: target.traffic.clone(),
            group_writes: config.group_writes,
            task_runs: Arc::default(),
        })
    }

    /// The count of the round trips and commits of this handle's connection threads.
    pub(crate) fn traffic(&self) -> Traffic {
        self.traffic.clone()
    }

    /// Notes that this handle holds run `run`'s lease at `epoch`, starting the renewer
    /// with the first lease.
    fn hold(&self, run: RunId, epoch: i64) {
        self.shared.leases.lock().insert(run.0, Held::live(epoch));
        let mut renewer = self.renewer.lock().unwrap_or_else(PoisonError::into_inner);
        if renewer.is_none() {
            let shared = Arc::clone(&self.shared);
            let url = self.url.clone();
            match spawn("clio-postgres-leases", move || renew(&url, &shared)) {
                Ok(handle) => *renewer = Some(handle),
                Err(err) => tracing::warn!(%err, "cannot start the thread that renews leases"),
            }
        }
    }

    fn location(&self) -> &Path {
        &self.shared.location
    }

    /// Runs `f` in one transaction on a pooled connection and waits for it (`f` runs again
    /// if the connection was lost before the commit: see [`in_tx`]).
    fn blocking<T: Send + 'static>(
        &self,
        f: impl FnMut(&mut Conn<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let shared = Arc::clone(&self.shared);
        self.pool.run(self.location(), move |link| in_tx(link, &shared, f))
    }

    /// Sends `f` to run in one transaction on a pooled connection; the answer comes back
    /// through the returned [`Pending`].
    fn pending<T: Send + 'static>(
        &self,
        f: impl FnMut(&mut Conn<'_>) -> Result<T> + Send + 'static,
    ) -> Pending<T> {
        let (reply, pending) = pending_reply(self.location());
        let shared = Arc::clone(&self.shared);
        let sent = self.pool.send(Box::new(move |link| reply.send(in_tx(link, &shared, f))));
        if sent {
            pending
        } else {
            clio_journal::pending_ready(Err(pool::stopped(self.location())))
        }
    }

    /// Sends `f`, a write into run `run`, to run on a pooled connection, in one transaction
    /// with the other writes into the run that are waiting when a connection takes it up:
    /// writes that arrive together (a gather's calls) share one commit, as the embedded
    /// journal's writer makes them share one flush. Each runs in a savepoint of its own, so
    /// that one refused (a taken identity) leaves the others; each is answered once the
    /// transaction has committed.
    fn pending_in_run<T: Send + 'static>(
        &self,
        run: RunId,
        f: impl FnMut(&mut Conn<'_>) -> Result<T> + Send + 'static,
    ) -> Pending<T> {
        let (reply, pending) = pending_reply(self.location());
        self.queue(run, RunWrite::Other(Box::new(Queued { f, reply, outcome: None })));
        pending
    }

    /// Sends a write of `entries` into run `run`, and of a task with its entries `task`,
    /// to run in a batch as [`PgStore::pending_in_run`] does; written with the batch's other
    /// such writes in a few statements ([`write_group`]). Its answer is `answer` of what
    /// was written (`None` only if a task write made no task, which it always does).
    fn entries_in_run<T: Send + 'static>(
        &self,
        run: RunId,
        entries: Vec<NewEntry>,
        task: Option<TaskPart>,
        answer: impl FnOnce(Written) -> Option<T> + Send + 'static,
    ) -> Pending<T> {
        let (reply, pending) = pending_reply(self.location());
        let location = self.location().to_path_buf();
        let answer = move |res: Result<Written>| {
            let answer = res.and_then(|written| {
                answer(written).ok_or_else(|| {
                    backend(&location, "a write of a task was answered without its task")
                })
            });
            reply.send(answer);
        };
        let write = EntryWrite { run, entries, task, outcome: None, answer: Box::new(answer) };
        self.queue(run, RunWrite::Entries(Box::new(write)));
        pending
    }

    /// Queues `write` into run `run`; the first write of a batch sends the job that runs
    /// the batch.
    fn queue(&self, run: RunId, write: RunWrite) {
        let first = {
            let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
            let waiting = queued.entry(run.0).or_default();
            waiting.push(write);
            waiting.len() == 1
        };
        if first {
            let group = self.group_writes;
            let shared = Arc::clone(&self.shared);
            let queued = Arc::clone(&self.queued);
            let job = Box::new(move |link: &mut Link| {
                let writes = queued
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&run.0)
                    .unwrap_or_default();
                in_batch(link, &shared, run, group, writes);
            });
            if !self.pool.send(job) {
                let writes =
                    self.queued.lock().unwrap_or_else(PoisonError::into_inner).remove(&run.0);
                for write in writes.into_iter().flatten() {
                    write.refuse(pool::stopped(self.location()));
                }
            }
        }
    }

    /// Runs the read `f` on a pooled connection, each statement on its own (a read of
    /// several statements checks what it needs of the others). A read that lost its
    /// connection is read again on a new one, for as long as the reconnect window lasts.
    fn read<T: Send + 'static>(
        &self,
        f: impl Fn(&mut Conn<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let shared = Arc::clone(&self.shared);
        self.pool.run(self.location(), move |link| {
            let location = shared.location.as_path();
            let mut backoff = None;
            let trips = link.traffic();
            loop {
                let client = link.connect(&mut backoff)?;
                let mut conn = Conn {
                    client,
                    location,
                    shared: &shared,
                    traffic: &trips,
                    wrote: false,
                    lost: false,
                };
                match f(&mut conn) {
                    Err(err) if conn.lost => {
                        link.reset();
                        if !pool::retry(&mut backoff, link.window()) {
                            return Err(err);
                        }
                    }
                    res => return res,
                }
            }
        })
    }
}

impl PgStore {
    /// Claims `only`, or else the runnable run with the smallest id, for `worker`.
    pub(crate) fn claim(
        &self,
        only: Option<RunId>,
        worker: &str,
        lease: Duration,
    ) -> Result<Option<Lease>> {
        let only = only.map(|r| r.0 as i64);
        // A run this handle still holds is not claimed again: its drive here may still be
        // under way, and a second claim would let it write under the new epoch.
        let mine: Vec<i64> = self.shared.leases.lock().keys().map(|r| *r as i64).collect();
        let worker = worker.to_owned();
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX).max(1);
        let claimed = self.blocking(move |conn| {
            let mut skip = mine.clone();
            // The candidate's lease is read from the statement's snapshot, which may be
            // older than the lock on the run's row: a worker whose claim of the same run
            // committed in between would go unseen. The lease is therefore taken over
            // only if it has expired as it stands once locked (`ON CONFLICT … WHERE`); a
            // candidate lost that way is skipped and the next one tried.
            //
            // A lease that ran out before the server started (while it was down: a
            // restart, a crash, when no holder could renew) counts as lapsed only once a
            // lease period (the claimer's) has passed since the start: each holder gets
            // that long to renew once the server is back, so that an outage alone moves no
            // run from the worker driving it. A lease given up (expiry 0) is free at once.
            let (run, epoch) = loop {
                let row = conn.query_opt(
                    "WITH now AS (SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS ms, \
                       (extract(epoch from pg_postmaster_start_time()) * 1000)::bigint AS started_ms), \
                     candidate AS ( \
                       SELECT r.id FROM clio_runs r LEFT JOIN clio_leases l ON l.run = r.id, now \
                       WHERE r.status IN ('running', 'interrupted') \
                       AND (l.run IS NULL OR l.expires_at_ms = 0 OR (l.expires_at_ms < now.ms \
                         AND (l.expires_at_ms > now.started_ms OR now.started_ms + $2 < now.ms))) \
                       AND ($3::bigint IS NULL OR r.id = $3) \
                       AND NOT (r.id = ANY($4)) \
                       ORDER BY r.id LIMIT 1 FOR UPDATE OF r SKIP LOCKED), \
                     claimed AS ( \
                       INSERT INTO clio_leases (run, worker, epoch, expires_at_ms) \
                       SELECT candidate.id, $1, 1, now.ms + $2 FROM candidate, now \
                       ON CONFLICT (run) DO UPDATE SET worker = EXCLUDED.worker, \
                         epoch = clio_leases.epoch + 1, expires_at_ms = EXCLUDED.expires_at_ms \
                       WHERE clio_leases.expires_at_ms < EXCLUDED.expires_at_ms - $2 \
                       RETURNING run, epoch) \
                     SELECT candidate.id, claimed.epoch FROM candidate \
                     LEFT JOIN claimed ON claimed.run = candidate.id",
                    &[&worker, &lease_ms, &only, &skip],
                )?;
                let Some(row) = row else { return Ok(None) };
                let run: i64 = row.get(0);
                match row.get::<_, Option<i64>>(1) {
                    Some(epoch) => break (RunId(run as u64), epoch),
                    None => skip.push(run),
                }
            };
            conn.changed();
            // What the run's last worker left running is cut short: its tasks are marked
            // interrupted and the run too, as a resume expects of work whose process is gone.
            // Nobody counts as live, this worker included: the run's lease had lapsed or was
            // given up, so whatever was left active in it (by this worker too, when a drive
            // here ended on a lost connection) is driven by no one.
            let live = HashSet::new();
            let now = records::now_ms();
            let rows = conn.query(
                "SELECT record FROM clio_tasks WHERE run = $1 AND active FOR UPDATE",
                &[&(run.0 as i64)],
            )?;
            for row in rows {
                let mut rec: TaskRecord = from_json(conn.location, "a task", &row.get::<_, String>(0))?;
                if records::reconcile_task(&mut rec, &live, now) {
                    conn.store_task(&rec, false)?;
                }
            }
            let row = conn.query_opt("SELECT record FROM clio_runs WHERE id = $1", &[&(run.0 as i64)])?;
            if let Some(row) = row {
                let mut rec: RunRecord = from_json(conn.location, "a run", &row.get::<_, String>(0))?;
                if records::reconcile_run(&mut rec, &live, now) {
                    conn.store_run(&rec)?;
                }
            }
            // The run's subagent sessions pass to this worker with it (`sessions.rs`).
            conn.pass_sessions(run, &worker)?;
            Ok(Some((run, epoch)))
        })?;
        Ok(claimed.map(|(run, epoch)| {
            self.hold(run, epoch);
            Lease { run, epoch: epoch as u64 }
        }))
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        // The handle's leases go with it, so that another worker may claim at once.
        let held: Vec<(i64, i64)> = self
            .shared
            .leases
            .lock()
            .iter()
            .filter(|(_, h)| h.owned())
            .map(|(run, h)| (*run as i64, h.epoch))
            .collect();
        if !held.is_empty() {
            let res = self.blocking(move |conn| {
                for (run, epoch) in &held {
                    conn.execute(
                        "UPDATE clio_leases SET expires_at_ms = 0 WHERE run = $1 AND epoch = $2",
                        &[run, epoch],
                    )?;
                }
                Ok(())
            });
            if let Err(err) = res {
                tracing::warn!(%err, "could not give up the leases of a closing journal handle");
            }
        }
        self.shared.close();
        let renewer = self.renewer.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(handle) = renewer {
            let _ = handle.join();
        }
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<thread::JoinHandle<()>> {
    thread::Builder::new().name(name.to_owned()).spawn(f).map_err(|err| JournalError::Backend {
        location: PathBuf::from("postgres"),
        detail: format!("cannot start the thread {name}: {err}"),
    })
}

/// A connection inside a transaction, with its statements prepared once.
pub(crate) struct Conn<'a> {
    client: &'a mut Client,
    location: &'a Path,
    shared: &'a Shared,
    /// The handle's count of round trips (one more for each statement sent) and commits.
    traffic: &'a Traffic,
    /// Whether the transaction changed anything: only then is its commit announced (an
    /// announcement wakes every watcher, and a worker that looks for runs must not wake
    /// itself by looking).
    wrote: bool,
    /// Whether a statement failed because the connection was lost: the transaction did not
    /// commit, and may be tried again on a new connection.
    lost: bool,
}

impl Conn<'_> {
    fn statement(&mut self, sql: &'static str) -> Result<Statement> {
        if let Some(st) = pool::prepared(sql) {
            return Ok(st);
        }
        self.traffic.add();
        let st = match self.client.prepare(sql) {
            Ok(st) => st,
            Err(err) => return Err(self.fail(sql, &err)),
        };
        pool::remember(sql, st.clone());
        Ok(st)
    }

    /// The error of statement `sql`; a lost connection is noted, and said so.
    fn fail(&mut self, sql: &str, err: &postgres::Error) -> JournalError {
        let what = sql.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
        if pool::is_lost(err) {
            self.lost = true;
            return backend(self.location, format!("{LOST} ({what}...): {}", describe(err)));
        }
        backend(self.location, format!("{what}...: {}", describe(err)))
    }

    fn query(&mut self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        let st = self.statement(sql)?;
        self.traffic.add();
        match self.client.query(&st, params) {
            Ok(rows) => Ok(rows),
            Err(err) => Err(self.fail(sql, &err)),
        }
    }

    fn query_opt(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>> {
        let st = self.statement(sql)?;
        self.traffic.add();
        match self.client.query_opt(&st, params) {
            Ok(row) => Ok(row),
            Err(err) => Err(self.fail(sql, &err)),
        }
    }

    fn execute(&mut self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let st = self.statement(sql)?;
        self.traffic.add();
        let n = match self.client.execute(&st, params) {
            Ok(n) => n,
            Err(err) => return Err(self.fail(sql, &err)),
        };
        self.wrote |= n > 0;
        Ok(n)
    }

    /// Notes that a query (an `INSERT … RETURNING`, say) changed something.
    fn changed(&mut self) {
        self.wrote = true;
    }

    /// Refuses a write into `run` when this handle held its lease and another worker has
    /// claimed the run since; locks the lease so that no claim passes the write.
    ///
    /// Called once the run's row is locked: a claim locks the run's row, then its lease,
    /// and a write taking them the other way round could deadlock with it.
    fn fence(&mut self, run: RunId) -> Result<()> {
        let Some(epoch) = self.shared.leases.fence(run) else { return Ok(()) };
        let row = self.query_opt(
            "SELECT epoch FROM clio_leases WHERE run = $1 FOR SHARE",
            &[&(run.0 as i64)],
        )?;
        let current = row.map(|r| r.get::<_, i64>(0));
        if current == Some(epoch) {
            return Ok(());
        }
        Err(JournalError::Fenced {
            run,
            epoch: epoch as u64,
            current: current.unwrap_or(0) as u64,
            session: None,
        })
    }

    /// Locks run `run`'s row and returns its head (next sequence number).
    fn lock_head(&mut self, run: RunId) -> Result<u64> {
        let row = self
            .query_opt("SELECT head FROM clio_runs WHERE id = $1 FOR UPDATE", &[&(run.0 as i64)])?;
        row.map(|r| r.get::<_, i64>(0) as u64).ok_or(JournalError::RunNotFound { run })
    }

    fn check_run(&mut self, run: RunId) -> Result<()> {
        let row = self.query_opt("SELECT 1 FROM clio_runs WHERE id = $1", &[&(run.0 as i64)])?;
        row.map(drop).ok_or(JournalError::RunNotFound { run })
    }

    fn check_task(&mut self, task: TaskId) -> Result<()> {
        let row = self.query_opt("SELECT 1 FROM clio_tasks WHERE id = $1", &[&(task.0 as i64)])?;
        row.map(drop).ok_or(JournalError::TaskNotFound { task })
    }

    /// Locks run `run`'s row, checks its lease and appends `entries`.
    fn append(&mut self, run: RunId, entries: Vec<NewEntry>) -> Result<Vec<u64>> {
        let first = self.lock_head(run)?;
        self.fence(run)?;
        self.append_at(run, first, entries)
    }

    /// Appends `entries` to `run`, whose head `first` is locked: identities checked first,
    /// then every entry written and the head moved in one statement.
    fn append_at(&mut self, run: RunId, first: u64, entries: Vec<NewEntry>) -> Result<Vec<u64>> {
        records::check_batch_identities(run, first, &entries)?;
        let identities: Vec<&str> = entries.iter().filter_map(|e| e.identity.as_deref()).collect();
        if !identities.is_empty() {
            let taken = self.query_opt(
                "SELECT identity, seq FROM clio_entries WHERE run = $1 AND identity = ANY($2) \
                 ORDER BY seq LIMIT 1",
                &[&(run.0 as i64), &identities],
            )?;
            if let Some(row) = taken {
                return Err(JournalError::DuplicateIdentity {
                    run,
                    identity: row.get(0),
                    seq: row.get::<_, i64>(1) as u64,
                });
            }
        }
        let now = records::now_ms() as i64;
        let n = entries.len();
        let mut seqs = Vec::with_capacity(n);
        let mut ids = Vec::with_capacity(n);
        let mut kinds = Vec::with_capacity(n);
        let mut tasks = Vec::with_capacity(n);
        let mut payloads = Vec::with_capacity(n);
        for (i, entry) in entries.iter().enumerate() {
            seqs.push((first + i as u64) as i64);
            ids.push(entry.identity.clone());
            kinds.push(kind_text(entry.kind));
            tasks.push(entry.task.map(|t| t.0 as i64));
            payloads.push(records::payload_text(entry).get().to_owned());
        }
        let head = (first + n as u64) as i64;
        // One round trip: the entries go in and the head moves in the same statement.
        self.execute(
            "WITH added AS ( \
               INSERT INTO clio_entries (run, seq, identity, kind, task, at_ms, payload) \
               SELECT $1, s, i, k, t, $2, p FROM unnest($3::bigint[], $4::text[], $5::text[], \
               $6::bigint[], $7::text[]) AS e(s, i, k, t, p)) \
             UPDATE clio_runs SET head = $8 WHERE id = $1",
            &[&(run.0 as i64), &now, &seqs, &ids, &kinds, &tasks, &payloads, &head],
        )?;
        Ok(seqs.into_iter().map(|s| s as u64).collect())
    }

    fn next_task_id(&mut self) -> Result<TaskId> {
        let row = self.query_opt("SELECT nextval('clio_task_ids')", &[])?;
        Ok(TaskId(row.map(|r| r.get::<_, i64>(0)).unwrap_or_default() as u64))
    }

    fn store_task(&mut self, rec: &TaskRecord, new: bool) -> Result<()> {
        let text = to_json(self.location, "a task", rec)?;
        let active = rec.status.is_active();
        if new {
            self.execute(
                "INSERT INTO clio_tasks (id, run, active, record) VALUES ($1, $2, $3, $4)",
                &[&(rec.id.0 as i64), &(rec.run.0 as i64), &active, &text],
            )?;
        } else {
            self.execute(
                "UPDATE clio_tasks SET active = $2, record = $3 WHERE id = $1",
                &[&(rec.id.0 as i64), &active, &text],
            )?;
        }
        Ok(())
    }

    fn store_run(&mut self, rec: &RunRecord) -> Result<()> {
        let text = to_json(self.location, "a run", rec)?;
        self.execute(
            "UPDATE clio_runs SET status = $2, owner = $3, record = $4 WHERE id = $1",
            &[&(rec.id.0 as i64), &status_text(rec.status), &rec.owner, &text],
        )?;
        Ok(())
    }

    fn store_session(&mut self, rec: &SessionRecord) -> Result<()> {
        let text = to_json(self.location, "a session", rec)?;
        self.execute(
            "UPDATE clio_sessions SET live = $2, record = $3 WHERE id = $1",
            &[&rec.id.0, &rec.status.is_live(), &text],
        )?;
        Ok(())
    }

    fn load_session(&mut self, id: &SessionId, lock: bool) -> Result<Option<SessionRecord>> {
        let row = if lock {
            self.query_opt("SELECT record FROM clio_sessions WHERE id = $1 FOR UPDATE", &[&id.0])?
        } else {
            self.query_opt("SELECT record FROM clio_sessions WHERE id = $1", &[&id.0])?
        };
        row.map(|r| from_json(self.location, "a session", &r.get::<_, String>(0))).transpose()
    }

    fn existing_session(&mut self, id: &SessionId) -> Result<SessionRecord> {
        self.load_session(id, true)?
            .ok_or_else(|| JournalError::SessionNotFound { session: id.clone() })
    }

    /// Updates `task` on its own, locking in the order every write and claim takes them:
    /// the run's row, then the task's, then the lease (a claim holding the run's row and
    /// waiting for a task the update held would otherwise deadlock with it).
    fn update_task_alone(&mut self, task: TaskId, update: TaskUpdate) -> Result<TaskRecord> {
        let owner =
            self.query_opt("SELECT run FROM clio_tasks WHERE id = $1", &[&(task.0 as i64)])?;
        let run = RunId(owner.ok_or(JournalError::TaskNotFound { task })?.get::<_, i64>(0) as u64);
        self.lock_head(run)?;
        let row = self.query_opt(
            "SELECT run, record FROM clio_tasks WHERE id = $1 FOR UPDATE",
            &[&(task.0 as i64)],
        )?;
        let row = row.ok_or(JournalError::TaskNotFound { task })?;
        self.fence(run)?;
        let mut rec: TaskRecord = from_json(self.location, "a task", &row.get::<_, String>(1))?;
        records::update_task(&mut rec, update, records::now_ms())?;
        self.store_task(&rec, false)?;
        Ok(rec)
    }

    /// Creates `task` with `before` and `after` (naming it) in `run`, every check first.
    fn task_with_entries(
        &mut self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
        ended: Option<&mut Ended>,
    ) -> Result<(TaskRecord, Vec<u64>)> {
        if task.run != run {
            return Err(JournalError::RunNotFound { run: task.run });
        }
        let first = self.lock_head(run)?;
        self.fence(run)?;
        let mut all = before;
        let n_before = all.len();
        all.extend(after);
        records::check_batch_identities(run, first, &all)?;
        if let Some(parent) = task.parent {
            self.check_task(parent)?;
        }
        let now = records::now_ms();
        let (id, rec) = match ended {
            Some(ended) => {
                let (id, update) = ended.for_task(self)?;
                (id, records::ended_task(id, task, update, now))
            }
            None => {
                let id = self.next_task_id()?;
                (id, records::new_task(id, task, now))
            }
        };
        for entry in all.iter_mut().skip(n_before) {
            entry.task = Some(id);
        }
        // The identities are checked by `append`, before anything of this write is stored:
        // the task row goes in after it, in the same transaction.
        let seqs = self.append_at(run, first, all)?;
        self.store_task(&rec, true)?;
        Ok((rec, seqs))
    }
}

/// The update of a task recorded ended ([`JournalBackend::record_ended_task`]), made once
/// from the task's id: a write tried again after a lost connection keeps the id (a
/// sequence's numbers are not rolled back) and the update made for it.
struct Ended {
    update: Option<EndedTaskUpdate>,
    made: Option<(TaskId, TaskUpdate)>,
}

impl Ended {
    fn for_task(&mut self, conn: &mut Conn<'_>) -> Result<(TaskId, TaskUpdate)> {
        if let Some((id, update)) = &self.made {
            return Ok((*id, update.clone()));
        }
        let id = conn.next_task_id()?;
        Ok(self.make(id))
    }

    /// Makes the update for the task `id`, once.
    fn make(&mut self, id: TaskId) -> (TaskId, TaskUpdate) {
        let update = self.update.take().map(|f| f(id)).unwrap_or_default();
        self.made = Some((id, update.clone()));
        (id, update)
    }
}

/// Opens a transaction on `link`'s connection and returns it with the transaction's id
/// (which says, should the answer to its commit be lost, whether it committed): a
/// connection found lost (the server restarted since it was last used) is made again,
/// with backoff for the reconnect window, since nothing of the transaction has run yet.
fn begin<'l>(link: &'l mut Link, location: &Path) -> Result<(&'l mut Client, i64)> {
    begin_locking(link, location, None).map(|(client, xid, _)| (client, xid))
}

/// Opens a transaction as [`begin`] does and, when `run` is given, locks the run's row in
/// the same round trip: returns its head too (`None` when there is no such run).
fn begin_locking<'l>(
    link: &'l mut Link,
    location: &Path,
    run: Option<RunId>,
) -> Result<(&'l mut Client, i64, Option<u64>)> {
    let sql = match run {
        // A number, formatted: nothing of a caller's text goes into the statement.
        Some(run) => format!(
            "BEGIN; SELECT txid_current() AS xid; \
             SELECT head FROM clio_runs WHERE id = {} FOR UPDATE",
            run.0 as i64
        ),
        None => "BEGIN; SELECT txid_current() AS xid".to_owned(),
    };
    let mut backoff = None;
    let trips = link.traffic();
    let (xid, head) = loop {
        trips.add();
        let err = match link.connect(&mut backoff)?.simple_query(&sql) {
            Ok(messages) => {
                let (mut xid, mut head) = (None, None);
                for m in &messages {
                    let postgres::SimpleQueryMessage::Row(row) = m else { continue };
                    let value = row.get(0).and_then(|t| t.parse::<i64>().ok());
                    match row.columns().first().map(|c| c.name()) {
                        Some("xid") => xid = value,
                        Some("head") => head = value.map(|h| h as u64),
                        _ => {}
                    }
                }
                break (xid.unwrap_or(0), head);
            }
            Err(err) => err,
        };
        if !pool::is_lost(&err) {
            // Whatever of it ran is not left open on the connection.
            if let Ok(client) = link.connect(&mut backoff) {
                trips.add();
                let _ = client.batch_execute("ROLLBACK");
            }
            return Err(backend(location, format!("BEGIN: {}", describe(&err))));
        }
        link.reset();
        if !pool::retry(&mut backoff, link.window()) {
            return Err(backend(location, format!("{LOST} (BEGIN): {}", describe(&err))));
        }
    };
    Ok((link.connect(&mut backoff)?, xid, head))
}

/// How a transaction whose commit lost its answer ended, as the server says once it can
/// be asked again.
enum Settled {
    Committed,
    /// It did not commit: it may be run again.
    NotCommitted,
    /// The server cannot say (it stayed away for the whole window).
    Unknown,
}

/// Asks the server, on a new connection, whether transaction `xid` committed, waiting for
/// the server (and for a dying connection's transaction to end) for the reconnect window.
fn settled(link: &mut Link, xid: i64, backoff: &mut Option<pool::Backoff>) -> Settled {
    if xid == 0 {
        return Settled::Unknown;
    }
    let trips = link.traffic();
    loop {
        trips.add();
        let status = match link.connect(backoff) {
            Ok(client) => client.query_opt("SELECT txid_status($1)", &[&xid]),
            Err(_) => return Settled::Unknown,
        };
        match status {
            Ok(Some(row)) => match row.get::<_, Option<String>>(0).as_deref() {
                Some("committed") => return Settled::Committed,
                Some("aborted") => return Settled::NotCommitted,
                // Still in progress: the backend of the lost connection is ending it.
                Some(_) => {}
                None => return Settled::Unknown,
            },
            Ok(None) => return Settled::Unknown,
            Err(err) if pool::is_lost(&err) => link.reset(),
            Err(_) => return Settled::Unknown,
        }
        if !pool::retry(backoff, link.window()) {
            return Settled::Unknown;
        }
    }
}

/// Runs `f` in a transaction on `link`; announces and commits it when `f` succeeds.
///
/// A transaction whose connection was lost before its commit did not commit (the server
/// rolls back what a lost connection left open): it is run again, `f` and all, on a new
/// connection, for as long as the reconnect window lasts. A commit whose answer was lost
/// is looked up by the transaction's id once the server answers again: run again if it
/// did not commit, answered if it did; only a server that cannot say leaves the caller
/// told that the write may or may not be stored.
fn in_tx<T>(
    link: &mut Link,
    shared: &Shared,
    mut f: impl FnMut(&mut Conn<'_>) -> Result<T>,
) -> Result<T> {
    let location = shared.location.as_path();
    let mut backoff = None;
    let trips = link.traffic();
    loop {
        let (client, xid) = begin(link, location)?;
        let mut conn = Conn {
            client: &mut *client,
            location,
            shared,
            traffic: &trips,
            wrote: false,
            lost: false,
        };
        let res = f(&mut conn);
        let (wrote, lost) = (conn.wrote, conn.lost);
        match res {
            Ok(value) => match commit(client, shared, &trips, wrote) {
                Ok(()) => return Ok(value),
                Err(Commit::Failed(err)) => return Err(err),
                Err(Commit::Lost(err)) => {
                    link.reset();
                    // A transaction that changed nothing has nothing to lose.
                    if !wrote {
                        return Ok(value);
                    }
                    match settled(link, xid, &mut backoff) {
                        Settled::Committed => {
                            trips.committed();
                            shared.commits.bump();
                            return Ok(value);
                        }
                        Settled::NotCommitted => {
                            if !pool::retry(&mut backoff, link.window()) {
                                return Err(err);
                            }
                        }
                        Settled::Unknown => return Err(err),
                    }
                }
            },
            Err(err) => {
                trips.add();
                let _ = client.batch_execute("ROLLBACK");
                if !lost {
                    return Err(err);
                }
                link.reset();
                if !pool::retry(&mut backoff, link.window()) {
                    return Err(err);
                }
            }
        }
    }
}

/// Why a commit failed.
enum Commit {
    /// The server refused it: nothing was stored.
    Failed(JournalError),
    /// The connection was lost before the answer came: it may or may not have committed.
    Lost(JournalError),
}

impl Commit {
    fn error(self) -> JournalError {
        match self {
            Commit::Failed(err) | Commit::Lost(err) => err,
        }
    }
}

/// Commits the transaction open on `client`, announcing it when it `wrote` something (a
/// transaction that changed nothing must not wake the handles that watch); a failed commit
/// is rolled back.
fn commit(
    client: &mut Client,
    shared: &Shared,
    trips: &Traffic,
    wrote: bool,
) -> std::result::Result<(), Commit> {
    trips.add();
    match client.batch_execute(if wrote { "NOTIFY clio_changes; COMMIT" } else { "COMMIT" }) {
        Ok(()) => {
            trips.committed();
            if wrote {
                shared.commits.bump();
            }
            Ok(())
        }
        Err(err) => {
            trips.add();
            let _ = client.batch_execute("ROLLBACK");
            if pool::is_lost(&err) {
                return Err(Commit::Lost(backend(
                    &shared.location,
                    format!(
                        "{LOST} (COMMIT; the write may or may not be stored): {}",
                        describe(&err)
                    ),
                )));
            }
            Err(Commit::Failed(backend(&shared.location, format!("COMMIT: {}", describe(&err)))))
        }
    }
}

/// The detail of a backend error, or the whole text of another.
fn detail_of(err: JournalError) -> String {
    match err {
        JournalError::Backend { detail, .. } => detail,
        other => other.to_string(),
    }
}

fn to_json<T: serde::Serialize>(location: &Path, what: &str, value: &T) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|err| backend(location, format!("cannot encode {what}: {err}")))
}

fn from_json<T: serde::de::DeserializeOwned>(location: &Path, what: &str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|err| JournalError::Corrupted {
        path: location.to_path_buf(),
        detail: format!("{what} does not decode: {err}"),
    })
}

fn kind_text(kind: EntryKind) -> String {
    serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn kind_of(location: &Path, text: &str) -> Result<EntryKind> {
    from_json(location, "an entry kind", &format!("\"{text}\""))
}

fn status_text(status: RunStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Reads an entry from a row of `seq, kind, identity, task, at_ms, payload`.
fn entry_of(location: &Path, run: RunId, row: &Row) -> Result<RawEntry> {
    let payload: String = row.get(5);
    let payload = RawValue::from_string(payload).map_err(|err| JournalError::Corrupted {
        path: location.to_path_buf(),
        detail: format!("an entry payload of run {run} is not JSON: {err}"),
    })?;
    Ok(RawEntry {
        run,
        seq: row.get::<_, i64>(0) as u64,
        kind: kind_of(location, &row.get::<_, String>(1))?,
        identity: row.get(2),
        task: row.get::<_, Option<i64>>(3).map(|t| TaskId(t as u64)),
        at_ms: row.get::<_, i64>(4) as u64,
        payload,
    })
}

/// Whether a run in `status` is no longer being driven, so its lease goes.
fn stops_driving(status: RunStatus) -> bool {
    status.is_finished() || matches!(status, RunStatus::AwaitingInput | RunStatus::Interrupted)
}

impl JournalBackend for PgStore {
    fn location(&self) -> &Path {
        &self.shared.location
    }

    fn commits(&self) -> &CommitNotices {
        // Whoever looks at the notices watches for changes: the listener starts now.
        self.listening.call_once(|| {
            let shared = Arc::clone(&self.shared);
            let url = self.url.clone();
            if let Err(err) = spawn("clio-postgres-listen", move || listen(&url, &shared)) {
                tracing::warn!(%err, "cannot start the thread that hears other processes' commits");
            }
        });
        &self.shared.commits
    }

    fn create_run(&self, new: NewRun) -> Result<RunId> {
        let (run, epoch) = self.blocking(move |conn| {
            let row = conn.query_opt("SELECT nextval('clio_run_ids')", &[])?;
            let id = RunId(row.map(|r| r.get::<_, i64>(0)).unwrap_or_default() as u64);
            let rec = records::new_run(id, new.clone(), records::now_ms());
            let text = to_json(conn.location, "a run", &rec)?;
            conn.execute(
                "INSERT INTO clio_runs (id, status, owner, flow, started_at_ms, record) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &(id.0 as i64),
                    &status_text(rec.status),
                    &rec.owner,
                    &rec.flow,
                    &(rec.started_at_ms as i64),
                    &text,
                ],
            )?;
            let lease_ms = conn.shared.lease_ms;
            let row = conn.query_opt(
                "INSERT INTO clio_leases (run, worker, epoch, expires_at_ms) \
                 VALUES ($1, $2, 1, (extract(epoch from clock_timestamp()) * 1000)::bigint + $3) \
                 RETURNING epoch",
                &[&(id.0 as i64), &rec.owner, &lease_ms],
            )?;
            Ok((id, row.map(|r| r.get::<_, i64>(0)).unwrap_or(1)))
        })?;
        self.hold(run, epoch);
        Ok(run)
    }

    fn update_run(&self, run: RunId, update: RunUpdate) -> Pending<RunRecord> {
        let releases = update.status.is_some_and(stops_driving);
        let shared = Arc::clone(&self.shared);
        self.pending_in_run(run, move |conn| {
            let row = conn.query_opt(
                "SELECT record FROM clio_runs WHERE id = $1 FOR UPDATE",
                &[&(run.0 as i64)],
            )?;
            let row = row.ok_or(JournalError::RunNotFound { run })?;
            conn.fence(run)?;
            let mut rec: RunRecord = from_json(conn.location, "a run", &row.get::<_, String>(0))?;
            records::update_run(&mut rec, update.clone(), records::now_ms());
            conn.store_run(&rec)?;
            if releases && let Some(epoch) = conn.shared.leases.fence(run) {
                conn.execute(
                    "UPDATE clio_leases SET expires_at_ms = 0 WHERE run = $1 AND epoch = $2",
                    &[&(run.0 as i64), &epoch],
                )?;
            }
            Ok(rec)
        })
        .map(move |rec| {
            // Committed: no longer the run's driver, this handle's later writes into the
            // run are a bystander's (an answer, say), not fenced.
            if releases {
                shared.leases.lock().remove(&run.0);
            }
            rec
        })
    }

    fn append(&self, run: RunId, entries: Vec<NewEntry>) -> Pending<Vec<u64>> {
        self.entries_in_run(run, entries, None, |(_, seqs)| Some(seqs))
    }

    fn create_task(&self, new: NewTask) -> Result<TaskId> {
        let run = new.run;
        let made = self.blocking(move |conn| {
            conn.check_run(new.run)?;
            conn.fence(new.run)?;
            if let Some(parent) = new.parent {
                conn.check_task(parent)?;
            }
            let id = conn.next_task_id()?;
            let rec = records::new_task(id, new.clone(), records::now_ms());
            conn.store_task(&rec, true)?;
            Ok(id)
        })?;
        remember_task(&self.task_runs, made, run);
        Ok(made)
    }

    fn create_task_with_entries(
        &self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
    ) -> Pending<(TaskId, Vec<u64>)> {
        let task = TaskPart { task, after, ended: None };
        let runs = Arc::clone(&self.task_runs);
        self.entries_in_run(run, before, Some(task), move |(rec, seqs)| {
            rec.map(|rec| {
                remember_task(&runs, rec.id, run);
                (rec.id, seqs)
            })
        })
    }

    fn record_ended_task(
        &self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
        update: EndedTaskUpdate,
    ) -> Pending<(TaskRecord, Vec<u64>)> {
        let ended = Ended { update: Some(update), made: None };
        let task = TaskPart { task, after, ended: Some(ended) };
        self.entries_in_run(run, before, Some(task), |(rec, seqs)| rec.map(|rec| (rec, seqs)))
    }

    fn update_task(&self, task: TaskId, update: TaskUpdate) -> Pending<TaskRecord> {
        let runs = Arc::clone(&self.task_runs);
        // Not when writes are not grouped: then every write goes as it did before.
        let run = runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&task.0)
            .copied()
            .filter(|_| self.group_writes);
        // A task this handle made is updated in its run's batch (a gather's calls end
        // together: one commit for them all); another in a transaction of its own.
        let pending = match run {
            Some(run) => {
                let (reply, pending) = pending_reply(self.location());
                let write = UpdateWrite { task, update, outcome: None, reply };
                self.queue(RunId(run), RunWrite::Update(Box::new(write)));
                pending
            }
            None => self.pending(move |conn| conn.update_task_alone(task, update.clone())),
        };
        pending.map(move |rec| {
            if rec.status.is_terminal() {
                runs.lock().unwrap_or_else(PoisonError::into_inner).remove(&task.0);
            }
            rec
        })
    }

    fn create_session(&self, new: NewSession) -> Result<SessionRecord> {
        self.create_fenced_session(new)
    }

    fn update_session(&self, id: &SessionId, update: SessionUpdate) -> Result<SessionRecord> {
        self.update_fenced_session(id, update)
    }

    fn claim_iteration(&self, id: &SessionId) -> Result<Option<u64>> {
        self.claim_fenced_iteration(id)
    }

    fn reconcile(&self, live: &HashSet<String>) -> Result<Reconciled> {
        let live = live.clone();
        self.blocking(move |conn| {
            let mut done = Reconciled::default();
            let now = records::now_ms();
            let rows = conn.query("SELECT record FROM clio_tasks WHERE active FOR UPDATE", &[])?;
            for row in rows {
                let mut rec: TaskRecord =
                    from_json(conn.location, "a task", &row.get::<_, String>(0))?;
                if records::reconcile_task(&mut rec, &live, now) {
                    conn.store_task(&rec, false)?;
                    done.tasks += 1;
                }
            }
            done.sessions += conn.reconcile_sessions(&live, now)?;
            let rows = conn
                .query("SELECT record FROM clio_runs WHERE status = 'running' FOR UPDATE", &[])?;
            for row in rows {
                let mut rec: RunRecord =
                    from_json(conn.location, "a run", &row.get::<_, String>(0))?;
                if records::reconcile_run(&mut rec, &live, now) {
                    conn.store_run(&rec)?;
                    done.runs += 1;
                }
            }
            Ok(done)
        })
    }

    fn prune(&self, before_ms: u64) -> Result<Pruned> {
        self.blocking(move |conn| {
            let rows = conn.query(
                "SELECT record FROM clio_runs WHERE status IN ('succeeded', 'failed', 'cancelled') \
                 FOR UPDATE",
                &[],
            )?;
            let mut pruned = Pruned::default();
            for row in rows {
                let rec: RunRecord = from_json(conn.location, "a run", &row.get::<_, String>(0))?;
                if !records::is_pruned(&rec, before_ms) {
                    continue;
                }
                let id = rec.id.0 as i64;
                pruned.entries +=
                    conn.execute("DELETE FROM clio_entries WHERE run = $1", &[&id])?;
                pruned.tasks += conn.execute("DELETE FROM clio_tasks WHERE run = $1", &[&id])?;
                conn.execute("DELETE FROM clio_runs WHERE id = $1", &[&id])?;
                pruned.runs += 1;
            }
            Ok(pruned)
        })
    }

    fn flush(&self) -> Result<()> {
        // Every write is committed (synchronous_commit) before it is answered.
        Ok(())
    }

    fn run(&self, run: RunId) -> Result<Option<RunRecord>> {
        self.read(move |conn| {
            let row =
                conn.query_opt("SELECT record FROM clio_runs WHERE id = $1", &[&(run.0 as i64)])?;
            row.map(|r| from_json(conn.location, "a run", &r.get::<_, String>(0))).transpose()
        })
    }

    fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let statuses: Vec<String> = filter.statuses.iter().map(|s| status_text(*s)).collect();
        let flow = filter.flow.clone();
        let after = filter.started_after_ms.map(|t| t as i64).unwrap_or(i64::MIN);
        let before = filter.started_before_ms.map(|t| t as i64).unwrap_or(i64::MAX);
        let limit = filter.limit.map(|n| n as i64);
        self.read(move |conn| {
            let rows = conn.query(
                "SELECT record FROM clio_runs \
                 WHERE (cardinality($1::text[]) = 0 OR status = ANY($1)) \
                 AND ($2::text IS NULL OR flow = $2) \
                 AND started_at_ms >= $3 AND started_at_ms < $4 \
                 ORDER BY id DESC LIMIT $5",
                &[&statuses, &flow, &after, &before, &limit],
            )?;
            rows.iter().map(|r| from_json(conn.location, "a run", &r.get::<_, String>(0))).collect()
        })
    }

    fn entry_count(&self, run: RunId) -> Result<u64> {
        self.read(move |conn| {
            let row =
                conn.query_opt("SELECT head FROM clio_runs WHERE id = $1", &[&(run.0 as i64)])?;
            row.map(|r| r.get::<_, i64>(0) as u64).ok_or(JournalError::RunNotFound { run })
        })
    }

    fn raw_entries(&self, run: RunId, from: u64) -> Result<Vec<RawEntry>> {
        self.read(move |conn| {
            conn.check_run(run)?;
            let rows = conn.query(
                "SELECT seq, kind, identity, task, at_ms, payload FROM clio_entries \
                 WHERE run = $1 AND seq >= $2 ORDER BY seq",
                &[&(run.0 as i64), &(from as i64)],
            )?;
            rows.iter().map(|r| entry_of(conn.location, run, r)).collect()
        })
    }

    fn raw_entry(&self, run: RunId, seq: u64) -> Result<Option<RawEntry>> {
        self.read(move |conn| {
            let row = conn.query_opt(
                "SELECT seq, kind, identity, task, at_ms, payload FROM clio_entries \
                 WHERE run = $1 AND seq = $2",
                &[&(run.0 as i64), &(seq as i64)],
            )?;
            row.map(|r| entry_of(conn.location, run, &r)).transpose()
        })
    }

    fn raw_entry_by_identity(&self, run: RunId, identity: &str) -> Result<Option<RawEntry>> {
        let identity = identity.to_owned();
        self.read(move |conn| {
            let row = conn.query_opt(
                "SELECT seq, kind, identity, task, at_ms, payload FROM clio_entries \
                 WHERE run = $1 AND identity = $2",
                &[&(run.0 as i64), &identity],
            )?;
            row.map(|r| entry_of(conn.location, run, &r)).transpose()
        })
    }

    fn task(&self, task: TaskId) -> Result<Option<TaskRecord>> {
        self.read(move |conn| {
            let row =
                conn.query_opt("SELECT record FROM clio_tasks WHERE id = $1", &[&(task.0 as i64)])?;
            row.map(|r| from_json(conn.location, "a task", &r.get::<_, String>(0))).transpose()
        })
    }

    fn tasks(&self, run: RunId) -> Result<Vec<TaskRecord>> {
        self.read(move |conn| {
            let rows = conn.query(
                "SELECT record FROM clio_tasks WHERE run = $1 ORDER BY id",
                &[&(run.0 as i64)],
            )?;
            rows.iter()
                .map(|r| from_json(conn.location, "a task", &r.get::<_, String>(0)))
                .collect()
        })
    }

    fn session(&self, id: &SessionId) -> Result<Option<SessionRecord>> {
        let id = id.clone();
        self.read(move |conn| conn.load_session(&id, false))
    }

    fn sessions(&self) -> Result<Vec<SessionRecord>> {
        self.read(move |conn| {
            let rows =
                conn.query("SELECT record FROM clio_sessions ORDER BY id COLLATE \"C\"", &[])?;
            rows.iter()
                .map(|r| from_json(conn.location, "a session", &r.get::<_, String>(0)))
                .collect()
        })
    }

    fn has_leases(&self) -> bool {
        true
    }

    fn claim_this_run(&self, run: RunId, worker: &str, lease: Duration) -> Result<Option<Lease>> {
        self.claim(Some(run), worker, lease)
    }

    fn claim_run(&self, worker: &str, lease: Duration) -> Result<Option<Lease>> {
        self.claim(None, worker, lease)
    }

    fn release_run(&self, run: RunId) -> Result<bool> {
        // Forgotten first, whatever its state: a lost lease is forgotten too, once the
        // worker has stopped the drive that held it, so that it may claim the run again.
        let held = self.shared.leases.lock().remove(&run.0);
        let Some(held) = held.filter(Held::owned) else { return Ok(false) };
        let epoch = held.epoch;
        let released = self.blocking(move |conn| {
            conn.execute(
                "UPDATE clio_leases SET expires_at_ms = 0 WHERE run = $1 AND epoch = $2",
                &[&(run.0 as i64), &epoch],
            )
        })?;
        Ok(released > 0)
    }

    fn lease(&self, run: RunId) -> Option<Lease> {
        let held = self.shared.leases.lock().get(&run.0).copied()?;
        held.owned().then_some(Lease { run, epoch: held.epoch as u64 })
    }

    fn stop_renewing(&self, run: RunId) {
        if let Some(held) = self.shared.leases.lock().get_mut(&run.0).filter(|h| h.owned()) {
            held.state = HeldState::Stalled;
        }
    }
}
