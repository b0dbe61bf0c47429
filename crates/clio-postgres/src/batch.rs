//! The writes into one run that wait for a connection together, written in one
//! transaction ([`in_batch`]): appends, tasks made with their entries and the updates of
//! the run's tasks are planned together ([`plan_write`], [`plan_update`]: each checked as
//! it would be alone, in order) and written in a few statements ([`write_group`]); any
//! other write runs on its own in a savepoint. Each write is answered once the
//! transaction has committed.
//!
//! A child of `store.rs`, whose private connection type and helpers it uses.

use super::*;

/// A write into a run, waiting in its run's queue for the batch that runs it.
pub(super) enum RunWrite {
    /// Entries, and maybe a task they name: written with the batch's other such writes
    /// in a few statements ([`write_group`]).
    Entries(Box<EntryWrite>),
    /// The update of a task of the run: written with the batch's writes of entries.
    Update(Box<UpdateWrite>),
    /// Any other write (a run's update): run on its own, in a savepoint when the batch
    /// has others, since it may fail half-way.
    Other(Box<dyn QueuedWrite>),
}

impl RunWrite {
    /// Whether the write is written with the others of its group ([`write_group`]).
    fn grouped(&self) -> bool {
        matches!(self, RunWrite::Entries(_) | RunWrite::Update(_))
    }

    fn as_queued(&mut self) -> &mut dyn QueuedWrite {
        match self {
            RunWrite::Entries(write) => &mut **write,
            RunWrite::Update(write) => &mut **write,
            RunWrite::Other(write) => &mut **write,
        }
    }

    fn settle(self, commit: Result<()>) {
        match self {
            RunWrite::Entries(write) => write.settle(commit),
            RunWrite::Update(write) => write.settle(commit),
            RunWrite::Other(write) => write.settle(commit),
        }
    }

    pub(super) fn refuse(self, error: JournalError) {
        match self {
            RunWrite::Entries(write) => write.refuse(error),
            RunWrite::Update(write) => write.refuse(error),
            RunWrite::Other(write) => write.refuse(error),
        }
    }
}

/// A write of a batch: it runs inside the batch's transaction, saying whether it
/// succeeded (and runs again, should the batch be tried again on a new connection), then
/// answers its caller once the commit's outcome is known; or it is refused without
/// running when the batch cannot start.
pub(super) trait QueuedWrite: Send {
    fn run(&mut self, conn: &mut Conn<'_>) -> bool;
    /// Answers the caller: with the write's own error, or its value once committed.
    fn settle(self: Box<Self>, commit: Result<()>);
    fn refuse(self: Box<Self>, error: JournalError);
}

pub(super) struct Queued<F, T> {
    pub(super) f: F,
    pub(super) reply: PendingReply<T>,
    /// What the last run of `f` returned.
    pub(super) outcome: Option<Result<T>>,
}

impl<F, T> QueuedWrite for Queued<F, T>
where
    F: FnMut(&mut Conn<'_>) -> Result<T> + Send,
    T: Send + 'static,
{
    fn run(&mut self, conn: &mut Conn<'_>) -> bool {
        let res = (self.f)(conn);
        let ok = res.is_ok();
        self.outcome = Some(res);
        ok
    }

    fn settle(self: Box<Self>, commit: Result<()>) {
        let answer = settled_answer(self.outcome, commit);
        self.reply.send(answer);
    }

    fn refuse(self: Box<Self>, error: JournalError) {
        self.reply.send(Err(error));
    }
}

/// A write's answer: its own error, or its value once `commit` succeeded.
fn settled_answer<T>(outcome: Option<Result<T>>, commit: Result<()>) -> Result<T> {
    match outcome {
        Some(Ok(value)) => commit.map(|()| value),
        Some(Err(err)) => Err(err),
        None => commit.and(Err(JournalError::Backend {
            location: PathBuf::from("postgres"),
            detail: "a write of a batch was answered without running".to_owned(),
        })),
    }
}

/// What an entry write stored: the task it made, if it made one, and its entries'
/// sequence numbers.
pub(super) type Written = (Option<TaskRecord>, Vec<u64>);

/// A task written with entries: `after` name it once its id is known; `ended` when it is
/// recorded already ended.
pub(super) struct TaskPart {
    pub(super) task: NewTask,
    pub(super) after: Vec<NewEntry>,
    pub(super) ended: Option<Ended>,
}

/// A write of entries into a run (an `append`), or of a task with its entries: data the
/// batch can plan with the others, rather than statements of its own.
pub(super) struct EntryWrite {
    pub(super) run: RunId,
    /// The entries (before the task's, when there is one).
    pub(super) entries: Vec<NewEntry>,
    pub(super) task: Option<TaskPart>,
    /// What the last run of the write made of it.
    pub(super) outcome: Option<Result<Written>>,
    pub(super) answer: Box<dyn FnOnce(Result<Written>) + Send>,
}

impl QueuedWrite for EntryWrite {
    /// Runs the write on its own, as the batch does once a statement of its group failed.
    fn run(&mut self, conn: &mut Conn<'_>) -> bool {
        let run = self.run;
        let res = match &mut self.task {
            None => conn.append(run, self.entries.clone()).map(|seqs| (None, seqs)),
            Some(part) => conn
                .task_with_entries(
                    run,
                    self.entries.clone(),
                    part.task.clone(),
                    part.after.clone(),
                    part.ended.as_mut(),
                )
                .map(|(rec, seqs)| (Some(rec), seqs)),
        };
        let ok = res.is_ok();
        self.outcome = Some(res);
        ok
    }

    fn settle(self: Box<Self>, commit: Result<()>) {
        let answer = settled_answer(self.outcome, commit);
        (self.answer)(answer);
    }

    fn refuse(self: Box<Self>, error: JournalError) {
        (self.answer)(Err(error));
    }
}

/// The update of a task of the batch's run (one this handle made).
pub(super) struct UpdateWrite {
    pub(super) task: TaskId,
    pub(super) update: TaskUpdate,
    /// What the last run of the write made of it.
    pub(super) outcome: Option<Result<TaskRecord>>,
    pub(super) reply: PendingReply<TaskRecord>,
}

impl QueuedWrite for UpdateWrite {
    /// Runs the update on its own, as the batch does once a statement of its group failed.
    fn run(&mut self, conn: &mut Conn<'_>) -> bool {
        let res = conn.update_task_alone(self.task, self.update.clone());
        let ok = res.is_ok();
        self.outcome = Some(res);
        ok
    }

    fn settle(self: Box<Self>, commit: Result<()>) {
        let answer = settled_answer(self.outcome, commit);
        self.reply.send(answer);
    }

    fn refuse(self: Box<Self>, error: JournalError) {
        self.reply.send(Err(error));
    }
}

/// What a batch's transaction holds of its run once a group has locked it: the run's head
/// (its row locked), and the check of the lease (its row share-locked), so that the
/// batch's later groups ask for neither again.
#[derive(Default)]
struct Locked {
    /// The run's head, once its row is locked (`None` also for a run that does not exist:
    /// the group then looks, and refuses its writes).
    head: Option<u64>,
    /// `Some` once the lease was checked: the error that fences the run's writes, if any.
    fence: Option<Option<(u64, u64)>>,
}

/// The check of a group's writes, in one statement after the run's row is locked: the
/// identities of the group's entries already taken (kind 0: identity, seq), the parent
/// tasks that exist (1: id), `$5` new task ids (2: id), when `$2` the run's lease epoch
/// (3: epoch), share-locked as [`Conn::fence`] locks it, and the records of the tasks the
/// group updates (4: record, id), locked.
const GROUP_CHECK: &str = "WITH lease AS ( \
       SELECT epoch FROM clio_leases WHERE run = $1 AND $2::boolean FOR SHARE), \
     updated AS ( \
       SELECT id, record FROM clio_tasks WHERE id = ANY($6::bigint[]) AND run = $1 FOR UPDATE) \
     SELECT 0, identity, seq FROM clio_entries WHERE run = $1 AND identity = ANY($3::text[]) \
     UNION ALL SELECT 1, NULL::text, id FROM clio_tasks WHERE id = ANY($4::bigint[]) \
     UNION ALL SELECT 2, NULL::text, nextval('clio_task_ids') \
       FROM generate_series(1, $5::integer) \
     UNION ALL SELECT 3, NULL::text, epoch FROM lease \
     UNION ALL SELECT 4, record, id FROM updated";

/// The write of a group, in one statement: its entries, its new tasks, its tasks'
/// updates, and the run's head.
const GROUP_WRITE: &str = "WITH added AS ( \
       INSERT INTO clio_entries (run, seq, identity, kind, task, at_ms, payload) \
       SELECT $1, s, i, k, t, $2, p FROM unnest($3::bigint[], $4::text[], $5::text[], \
       $6::bigint[], $7::text[]) AS e(s, i, k, t, p)), \
     tasks AS ( \
       INSERT INTO clio_tasks (id, run, active, record) \
       SELECT id, $1, a, r FROM unnest($8::bigint[], $9::boolean[], $10::text[]) AS t(id, a, r)), \
     updated AS ( \
       UPDATE clio_tasks SET active = u.a, record = u.r \
       FROM unnest($12::bigint[], $13::boolean[], $14::text[]) AS u(id, a, r) \
       WHERE clio_tasks.id = u.id) \
     UPDATE clio_runs SET head = $11 WHERE id = $1";

/// A write of a group.
enum Member<'a> {
    Entries(&'a mut EntryWrite),
    Update(&'a mut UpdateWrite),
}

impl Member<'_> {
    fn refused(&self) -> bool {
        match self {
            Member::Entries(w) => w.outcome.as_ref().is_some_and(Result::is_err),
            Member::Update(w) => w.outcome.as_ref().is_some_and(Result::is_err),
        }
    }

    fn refuse(&mut self, error: JournalError) {
        match self {
            Member::Entries(w) => w.outcome = Some(Err(error)),
            Member::Update(w) => w.outcome = Some(Err(error)),
        }
    }
}

/// Writes `group`, consecutive writes of entries (and tasks) and updates of tasks of one
/// batch into `run`, in a few statements whatever its size: the run's row locked (with
/// the batch's BEGIN), one statement that checks the lease, the identities and the parent
/// tasks of every write, takes the new tasks' ids and locks the updated tasks, and one that
/// stores every entry and task, every task's update, and moves the head. Each write is
/// checked as it would be on its own, in order (a write's identity taken by an earlier
/// write of the group is taken; an update sees the group's earlier updates of its task),
/// and one refused is answered with its error while the others are stored: no statement
/// of the group can fail for one write alone, so no savepoint is needed.
///
/// Returns whether anything was stored; an error is a statement's failure (the connection
/// lost, or the server refusing it), after which the transaction is spoilt.
fn write_group(
    conn: &mut Conn<'_>,
    run: RunId,
    group: &mut [RunWrite],
    locked: &mut Locked,
) -> Result<bool> {
    let mut writes: Vec<Member<'_>> = group
        .iter_mut()
        .filter_map(|w| match w {
            RunWrite::Entries(write) => Some(Member::Entries(write)),
            RunWrite::Update(write) => Some(Member::Update(write)),
            RunWrite::Other(_) => None,
        })
        .collect();
    for write in &mut writes {
        match write {
            Member::Entries(w) => {
                w.outcome = None;
                if let Some(part) = &w.task
                    && part.task.run != run
                {
                    w.outcome = Some(Err(JournalError::RunNotFound { run: part.task.run }));
                }
            }
            Member::Update(w) => w.outcome = None,
        }
    }
    let head = match locked.head {
        Some(head) => head,
        None => {
            let row = conn.query_opt(
                "SELECT head FROM clio_runs WHERE id = $1 FOR UPDATE",
                &[&(run.0 as i64)],
            )?;
            let Some(row) = row else {
                for write in writes.iter_mut().filter(|w| !w.refused()) {
                    write.refuse(JournalError::RunNotFound { run });
                }
                return Ok(false);
            };
            row.get::<_, i64>(0) as u64
        }
    };
    locked.head = Some(head);
    // What the check needs: every identity, every parent, how many new ids, which tasks.
    let mut identities: Vec<&str> = Vec::new();
    let mut parents: Vec<i64> = Vec::new();
    let mut new_ids = 0i32;
    let mut updated: Vec<i64> = Vec::new();
    for write in writes.iter().filter(|w| !w.refused()) {
        match write {
            Member::Entries(write) => {
                identities.extend(write.entries.iter().filter_map(|e| e.identity.as_deref()));
                if let Some(part) = &write.task {
                    identities.extend(part.after.iter().filter_map(|e| e.identity.as_deref()));
                    parents.extend(part.task.parent.map(|p| p.0 as i64));
                    if part.ended.as_ref().is_none_or(|e| e.made.is_none()) {
                        new_ids += 1;
                    }
                }
            }
            Member::Update(write) => updated.push(write.task.0 as i64),
        }
    }
    let fenced_epoch = conn.shared.leases.fence(run);
    let check_lease = fenced_epoch.is_some() && locked.fence.is_none();
    let mut taken: HashMap<String, u64> = HashMap::new();
    let mut found_parents: HashSet<i64> = HashSet::new();
    let mut ids: Vec<TaskId> = Vec::new();
    let mut epoch: Option<i64> = None;
    let mut stored: HashMap<i64, String> = HashMap::new();
    let any = !identities.is_empty() || !parents.is_empty() || !updated.is_empty();
    if any || new_ids > 0 || check_lease {
        let rows = conn.query(
            GROUP_CHECK,
            &[&(run.0 as i64), &check_lease, &identities, &parents, &new_ids, &updated],
        )?;
        for row in rows {
            let value: i64 = row.get(2);
            match row.get::<_, i32>(0) {
                0 => {
                    let identity: String = row.get(1);
                    taken.insert(identity, value as u64);
                }
                1 => {
                    found_parents.insert(value);
                }
                2 => ids.push(TaskId(value as u64)),
                3 => epoch = Some(value),
                _ => {
                    stored.insert(value, row.get(1));
                }
            }
        }
    }
    drop(identities);
    if check_lease && let Some(mine) = fenced_epoch {
        locked.fence =
            Some((epoch != Some(mine)).then(|| (mine as u64, epoch.unwrap_or(0) as u64)));
    }
    let fence = locked.fence.flatten();
    // Each write in turn, as it would be checked alone.
    let now = records::now_ms();
    let mut next = head;
    let mut ids = ids.into_iter();
    let mut rows = GroupRows::default();
    // The tasks the group updates as they stand after its updates so far, and the order
    // in which they were first changed.
    let mut current: HashMap<i64, TaskRecord> = HashMap::new();
    let mut changed: Vec<i64> = Vec::new();
    for write in writes.iter_mut().filter(|w| !w.refused()) {
        let write = match write {
            Member::Update(write) => {
                let res = plan_update(
                    conn.location,
                    write,
                    fence.map(|(epoch, current)| JournalError::Fenced {
                        run,
                        epoch,
                        current,
                        session: None,
                    }),
                    &stored,
                    &mut current,
                    now,
                );
                if res.is_ok() && !changed.contains(&(write.task.0 as i64)) {
                    changed.push(write.task.0 as i64);
                }
                write.outcome = Some(res);
                continue;
            }
            Member::Entries(write) => write,
        };
        let res = plan_write(run, write, next, fence, &taken, &found_parents, &mut ids, now);
        if let Ok((rec, entries)) = &res {
            for (i, entry) in entries.iter().enumerate() {
                let seq = next + i as u64;
                if let Some(identity) = &entry.identity {
                    taken.insert(identity.clone(), seq);
                }
                rows.entry(seq, entry);
            }
            next += entries.len() as u64;
            if let Some(rec) = rec {
                rows.task(conn.location, rec)?;
            }
        }
        write.outcome = Some(res.map(|(rec, entries)| {
            let first = next - entries.len() as u64;
            (rec, (first..next).collect())
        }));
    }
    let mut updates = GroupRows::default();
    for id in &changed {
        if let Some(rec) = current.get(id) {
            updates.task(conn.location, rec)?;
        }
    }
    if next == head && rows.task_ids.is_empty() && updates.task_ids.is_empty() {
        return Ok(false);
    }
    conn.execute(
        GROUP_WRITE,
        &[
            &(run.0 as i64),
            &(now as i64),
            &rows.seqs,
            &rows.identities,
            &rows.kinds,
            &rows.tasks,
            &rows.payloads,
            &rows.task_ids,
            &rows.task_active,
            &rows.task_records,
            &(next as i64),
            &updates.task_ids,
            &updates.task_active,
            &updates.task_records,
        ],
    )?;
    conn.changed();
    locked.head = Some(next);
    Ok(true)
}

/// Checks the update `write` as it would be checked on its own (its task locked by the
/// group's check, `stored` as read, `current` as the group's earlier updates left it) and
/// applies it to `current`; returns the task's record after it.
fn plan_update(
    location: &Path,
    write: &UpdateWrite,
    fenced: Option<JournalError>,
    stored: &HashMap<i64, String>,
    current: &mut HashMap<i64, TaskRecord>,
    now: u64,
) -> Result<TaskRecord> {
    let task = write.task;
    let key = task.0 as i64;
    let rec = match current.entry(key) {
        std::collections::hash_map::Entry::Occupied(held) => held.into_mut(),
        std::collections::hash_map::Entry::Vacant(empty) => {
            let text = stored.get(&key).ok_or(JournalError::TaskNotFound { task })?;
            empty.insert(from_json(location, "a task", text)?)
        }
    };
    if let Some(err) = fenced {
        return Err(err);
    }
    let mut after = rec.clone();
    records::update_task(&mut after, write.update.clone(), now)?;
    *rec = after.clone();
    Ok(after)
}

/// Checks `write`, to be written at `first`, as it would be checked on its own, and makes
/// its task's record; returns the task and the entries to store.
#[allow(clippy::too_many_arguments, reason = "the group's state, passed to each write")]
fn plan_write(
    run: RunId,
    write: &mut EntryWrite,
    first: u64,
    fence: Option<(u64, u64)>,
    taken: &HashMap<String, u64>,
    parents: &HashSet<i64>,
    ids: &mut impl Iterator<Item = TaskId>,
    now: u64,
) -> Result<(Option<TaskRecord>, Vec<NewEntry>)> {
    if let Some((epoch, current)) = fence {
        return Err(JournalError::Fenced { run, epoch, current, session: None });
    }
    let mut all = write.entries.clone();
    let n_before = all.len();
    if let Some(part) = &write.task {
        all.extend(part.after.iter().cloned());
    }
    records::check_batch_identities(run, first, &all)?;
    if let Some(parent) = write.task.as_ref().and_then(|p| p.task.parent)
        && !parents.contains(&(parent.0 as i64))
    {
        return Err(JournalError::TaskNotFound { task: parent });
    }
    // The first of its identities taken (by the journal, or by an earlier write of the
    // group), as `append_at` finds it.
    let clash = all
        .iter()
        .filter_map(|e| e.identity.as_deref())
        .filter_map(|identity| taken.get(identity).map(|seq| (*seq, identity)))
        .min();
    if let Some((seq, identity)) = clash {
        return Err(JournalError::DuplicateIdentity { run, identity: identity.to_owned(), seq });
    }
    let Some(part) = &mut write.task else { return Ok((None, all)) };
    let mut next_id = || {
        ids.next().ok_or_else(|| JournalError::Backend {
            location: PathBuf::from("postgres"),
            detail: "a batch of writes took fewer task ids than it has tasks".to_owned(),
        })
    };
    let rec = match &mut part.ended {
        Some(ended) => {
            let (id, update) = match &ended.made {
                Some(made) => made.clone(),
                None => ended.make(next_id()?),
            };
            records::ended_task(id, part.task.clone(), update, now)
        }
        None => records::new_task(next_id()?, part.task.clone(), now),
    };
    for entry in all.iter_mut().skip(n_before) {
        entry.task = Some(rec.id);
    }
    Ok((Some(rec), all))
}

/// The rows a group stores, as the arrays [`GROUP_WRITE`] takes.
#[derive(Default)]
struct GroupRows {
    seqs: Vec<i64>,
    identities: Vec<Option<String>>,
    kinds: Vec<String>,
    tasks: Vec<Option<i64>>,
    payloads: Vec<String>,
    task_ids: Vec<i64>,
    task_active: Vec<bool>,
    task_records: Vec<String>,
}

impl GroupRows {
    fn entry(&mut self, seq: u64, entry: &NewEntry) {
        self.seqs.push(seq as i64);
        self.identities.push(entry.identity.clone());
        self.kinds.push(kind_text(entry.kind));
        self.tasks.push(entry.task.map(|t| t.0 as i64));
        self.payloads.push(records::payload_text(entry).get().to_owned());
    }

    fn task(&mut self, location: &Path, rec: &TaskRecord) -> Result<()> {
        self.task_records.push(to_json(location, "a task", rec)?);
        self.task_ids.push(rec.id.0 as i64);
        self.task_active.push(rec.status.is_active());
        Ok(())
    }
}

/// Runs `writes` (into run `run`) in one transaction, then answers each with its own
/// result or the commit's failure: consecutive writes of entries and tasks together
/// ([`write_group`]), each other write in a savepoint when there are several. A batch
/// whose connection was lost before its commit is run again, every write of it, on a new
/// connection, for as long as the reconnect window lasts (as [`in_tx`]); one whose group
/// statement the server refused (a value it cannot store, say) is run again with each
/// write on its own in a savepoint, so that the one at fault gets the error alone.
pub(super) fn in_batch(
    link: &mut Link,
    shared: &Shared,
    run: RunId,
    group: bool,
    mut writes: Vec<RunWrite>,
) {
    let location = shared.location.as_path();
    let fail =
        |what: &str, err: &postgres::Error| backend(location, format!("{what}: {}", describe(err)));
    let alone = writes.len() == 1;
    let trips = link.traffic();
    let mut backoff = None;
    // Once a group's statement failed (or when writes are not grouped): every write on
    // its own.
    let mut one_by_one = !group;
    loop {
        // The run's row is locked with the transaction's start, in one round trip, when
        // the batch has writes to group (they need its head).
        let lock = (!one_by_one && writes.iter().any(RunWrite::grouped)).then_some(run);
        let (client, xid, head) = match begin_locking(link, location, lock) {
            Ok(begun) => begun,
            Err(err) => {
                let detail = detail_of(err);
                for write in writes {
                    write.refuse(backend(location, detail.clone()));
                }
                return;
            }
        };
        let mut wrote = false;
        let mut broken: Option<String> = None;
        let mut lost = false;
        let mut regroup = false;
        let mut locked = Locked { head, fence: None };
        let mut i = 0;
        while i < writes.len() {
            if !one_by_one && writes[i].grouped() {
                let end =
                    writes[i..].iter().position(|w| !w.grouped()).map_or(writes.len(), |n| i + n);
                let mut conn = Conn {
                    client: &mut *client,
                    location,
                    shared,
                    traffic: &trips,
                    wrote: false,
                    lost: false,
                };
                match write_group(&mut conn, run, &mut writes[i..end], &mut locked) {
                    Ok(stored) => wrote |= stored,
                    Err(err) => {
                        lost = conn.lost;
                        regroup = !lost;
                        broken = Some(if lost {
                            format!("{LOST} during a batch of writes")
                        } else {
                            detail_of(err)
                        });
                        break;
                    }
                }
                i = end;
                continue;
            }
            // A write that may fail half-way: alone, or in a savepoint.
            locked.head = None;
            if !alone && let Err(err) = savepoint(client, &trips, "SAVEPOINT w") {
                lost = pool::is_lost(&err);
                broken = Some(fail("SAVEPOINT", &err).to_string());
                break;
            }
            let mut conn = Conn {
                client: &mut *client,
                location,
                shared,
                traffic: &trips,
                wrote: false,
                lost: false,
            };
            let ok = writes[i].as_queued().run(&mut conn);
            let changed = conn.wrote;
            if conn.lost {
                lost = true;
                broken = Some(format!("{LOST} during a batch of writes"));
                break;
            }
            i += 1;
            if alone {
                wrote = ok && changed;
                if !ok {
                    // The write's own error answers it; the transaction goes.
                    let _ = savepoint(client, &trips, "ROLLBACK");
                    for write in writes {
                        write.settle(Ok(()));
                    }
                    return;
                }
                continue;
            }
            let end = if ok {
                "RELEASE SAVEPOINT w"
            } else {
                "ROLLBACK TO SAVEPOINT w; RELEASE SAVEPOINT w"
            };
            match savepoint(client, &trips, end) {
                Ok(()) => wrote |= ok && changed,
                Err(err) => {
                    lost = pool::is_lost(&err);
                    broken = Some(fail("ending a savepoint", &err).to_string());
                    break;
                }
            }
        }
        if regroup {
            let _ = savepoint(client, &trips, "ROLLBACK");
            tracing::debug!(detail = ?broken, "a group of writes failed: each on its own now");
            one_by_one = true;
            continue;
        }
        if lost {
            let _ = savepoint(client, &trips, "ROLLBACK");
            link.reset();
            if pool::retry(&mut backoff, link.window()) {
                continue;
            }
            let detail = broken.unwrap_or_else(|| LOST.to_owned());
            for write in writes {
                write.settle(Err(backend(location, detail.clone())));
            }
            return;
        }
        let outcome = match broken {
            Some(detail) => {
                let _ = savepoint(client, &trips, "ROLLBACK");
                Err(detail)
            }
            None => match commit(client, shared, &trips, wrote) {
                Ok(()) => Ok(()),
                Err(Commit::Lost(err)) if wrote => {
                    link.reset();
                    match settled(link, xid, &mut backoff) {
                        Settled::Committed => {
                            trips.committed();
                            shared.commits.bump();
                            Ok(())
                        }
                        Settled::NotCommitted if pool::retry(&mut backoff, link.window()) => {
                            continue;
                        }
                        Settled::NotCommitted => Err(detail_of(err)),
                        Settled::Unknown => Err(detail_of(err)),
                    }
                }
                // A batch that changed nothing has nothing to lose.
                Err(Commit::Lost(_)) => Ok(()),
                Err(failed) => Err(detail_of(failed.error())),
            },
        };
        for write in writes {
            write.settle(outcome.clone().map_err(|detail| backend(location, detail)));
        }
        return;
    }
}

/// Sends `sql` (a savepoint's statement, or a rollback), counted as one round trip.
fn savepoint(
    client: &mut Client,
    trips: &Traffic,
    sql: &str,
) -> std::result::Result<(), postgres::Error> {
    trips.add();
    client.batch_execute(sql)
}

/// Notes that task `task` of run `run` was made by this handle and may still change. The
/// table forgets a task once an update ends it; should it grow past 100,000 tasks (tasks
/// ended by other processes), it starts again empty: an update of a task it does not know
/// is written in a transaction of its own, which is slower, never wrong.
pub(super) fn remember_task(runs: &Mutex<HashMap<u64, u64>>, task: TaskId, run: RunId) {
    let mut runs = runs.lock().unwrap_or_else(PoisonError::into_inner);
    if runs.len() >= 100_000 {
        runs.clear();
    }
    runs.insert(task.0, run.0);
}
