//! The subagent sessions of the PostgreSQL journal (SPEC §8), fenced as runs are.
//!
//! A session names the run whose flow drives it ([`SessionRecord::run`]). Every write of
//! such a session (its creation, a change, a claimed iteration) takes the locks a write
//! into the run takes, in the same order (the run's row, then the session's, then the
//! run's lease), and is refused with [`JournalError::Fenced`], naming the run and the
//! session, when this handle held the run's lease and another worker has claimed the run
//! since: a worker frozen past its lease can no longer spend a session's budget, write its
//! checkpoint or end it. A claim of the run marks lost the sessions another process left
//! working, as the tasks it left are marked interrupted (their turns died with it, as on
//! the embedded journal's resume), and gives the run's other sessions that have not ended
//! to the worker that claimed it ([`Conn::pass_sessions`]); a reconcile spares the
//! sessions of a run whose lease a worker holds now ([`Conn::reconcile_sessions`]). A session of no run (a team no run
//! drives) is written as before, by whoever writes it.
//!
//! A child of `store.rs`, whose private connection type it extends.

use std::collections::HashSet;

use clio_journal::{
    JournalError, NewSession, Result, RunId, SessionId, SessionRecord, SessionUpdate, records,
};

use super::{Conn, PgStore, from_json, to_json};

impl PgStore {
    /// Creates session `new`: refused when its run does not exist, when this handle's
    /// lease of its run was taken, or when its id is.
    pub(super) fn create_fenced_session(&self, new: NewSession) -> Result<SessionRecord> {
        self.blocking(move |conn| {
            if let Some(run) = new.run {
                if !conn.lock_session_run(run)? {
                    return Err(JournalError::RunNotFound { run });
                }
                conn.fence_session(run, &new.id)?;
            }
            let rec = records::new_session(new.clone(), records::now_ms());
            let text = to_json(conn.location, "a session", &rec)?;
            let run = rec.run.map(|r| r.0 as i64);
            let n = conn.execute(
                "INSERT INTO clio_sessions (id, live, run, record) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (id) DO NOTHING",
                &[&rec.id.0, &rec.status.is_live(), &run, &text],
            )?;
            if n == 0 {
                return Err(JournalError::SessionExists { session: rec.id });
            }
            Ok(rec)
        })
    }

    /// Changes session `id`, fenced by its run's lease.
    pub(super) fn update_fenced_session(
        &self,
        id: &SessionId,
        update: SessionUpdate,
    ) -> Result<SessionRecord> {
        let id = id.clone();
        self.blocking(move |conn| {
            let mut rec = conn.session_to_write(&id)?;
            records::update_session(&mut rec, update.clone(), records::now_ms());
            conn.store_session(&rec)?;
            Ok(rec)
        })
    }

    /// Claims one iteration of session `id`'s budget, fenced by its run's lease: the
    /// session's row is locked for the claim, so that two handles never spend one
    /// iteration twice.
    pub(super) fn claim_fenced_iteration(&self, id: &SessionId) -> Result<Option<u64>> {
        let id = id.clone();
        self.blocking(move |conn| {
            let mut rec = conn.session_to_write(&id)?;
            let claimed = records::claim_iteration(&mut rec, records::now_ms());
            if claimed.is_some() {
                conn.store_session(&rec)?;
            }
            Ok(claimed)
        })
    }
}

impl Conn<'_> {
    /// Locks session `id` for a write and returns it, once the write is found allowed: the
    /// session's run (if it has one) is locked first, as every write into a run locks it,
    /// and the write is fenced by the run's lease.
    fn session_to_write(&mut self, id: &SessionId) -> Result<SessionRecord> {
        let row = self.query_opt("SELECT run FROM clio_sessions WHERE id = $1", &[&id.0])?;
        let row = row.ok_or_else(|| JournalError::SessionNotFound { session: id.clone() })?;
        let run = row.get::<_, Option<i64>>(0).map(|r| RunId(r as u64));
        // A session whose run was pruned since is no run's any more: written as before.
        let run = match run {
            Some(run) => self.lock_session_run(run)?.then_some(run),
            None => None,
        };
        let rec = self.existing_session(id)?;
        if let Some(run) = run {
            self.fence_session(run, id)?;
        }
        Ok(rec)
    }

    /// Locks run `run`'s row for a write of one of its sessions: shared, so that the
    /// run's sessions are written side by side, while a claim of the run (and a write into
    /// its journal) waits for them. Returns whether the run exists.
    fn lock_session_run(&mut self, run: RunId) -> Result<bool> {
        let row =
            self.query_opt("SELECT 1 FROM clio_runs WHERE id = $1 FOR SHARE", &[&(run.0 as i64)])?;
        Ok(row.is_some())
    }

    /// Refuses the write of `session`, a session of run `run`, as [`Conn::fence`] refuses
    /// a write into the run, naming the session.
    fn fence_session(&mut self, run: RunId, session: &SessionId) -> Result<()> {
        match self.fence(run) {
            Err(JournalError::Fenced { run, epoch, current, .. }) => {
                Err(JournalError::Fenced { run, epoch, current, session: Some(session.clone()) })
            }
            other => other,
        }
    }

    /// Marks lost the sessions left queued or running by processes not in `live`
    /// ([`records::reconcile_session`]), sparing the sessions of a run whose lease a worker
    /// holds now: on a fleet the lease, not a process name, says who drives a run (the
    /// worker holding it is alive, renewing it). Returns how many it marked.
    pub(super) fn reconcile_sessions(&mut self, live: &HashSet<String>, now: u64) -> Result<u64> {
        let rows = self.query(
            "SELECT s.record, l.expires_at_ms > (extract(epoch from clock_timestamp()) * 1000)::bigint \
             FROM clio_sessions s LEFT JOIN clio_leases l ON l.run = s.run \
             WHERE s.live FOR UPDATE OF s",
            &[],
        )?;
        let mut marked = 0;
        for row in rows {
            if row.get::<_, Option<bool>>(1) == Some(true) {
                continue;
            }
            let mut rec: SessionRecord =
                from_json(self.location, "a session", &row.get::<_, String>(0))?;
            if records::reconcile_session(&mut rec, live, now) {
                self.store_session(&rec)?;
                marked += 1;
            }
        }
        Ok(marked)
    }

    /// Hands the sessions of run `run`, which `worker` has just claimed, to that worker:
    /// those another process left working (queued or running) are marked lost, as a
    /// resume's reconcile marks a dead process's sessions on the embedded journal (their
    /// turns died with it, and the run's replay does not run them again); the others not
    /// ended (idle ones, waiting for a reply) pass to the worker.
    pub(super) fn pass_sessions(&mut self, run: RunId, worker: &str) -> Result<()> {
        let rows = self.query(
            "SELECT record FROM clio_sessions WHERE run = $1 ORDER BY id COLLATE \"C\" FOR UPDATE",
            &[&(run.0 as i64)],
        )?;
        let now = records::now_ms();
        let claimer = HashSet::from([worker.to_owned()]);
        for row in rows {
            let mut rec: SessionRecord =
                from_json(self.location, "a session", &row.get::<_, String>(0))?;
            let lost = records::reconcile_session(&mut rec, &claimer, now);
            let passed = !rec.status.is_terminal() && records::pass_session(&mut rec, worker, now);
            if lost || passed {
                self.store_session(&rec)?;
            }
        }
        Ok(())
    }
}
