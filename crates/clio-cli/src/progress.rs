//! Live progress of a run: the tasks it started, their states, models, tokens and elapsed
//! times, read from the journal while the run goes.
//!
//! On a terminal the task tree is drawn with indicatif: a header bar, then one bar per task
//! in tree order, indented by depth; a task's bar shows a spinner and its elapsed time
//! while it is active, and is finished with its final line (✓, ✗, ⊘) when it ends.
//! Otherwise each change is one plain line, which logs and pipes can keep.
//!
//! A resumed run's tasks that had ended before this process started driving it are marked
//! `(replayed)`: their results come from the journal, nothing ran again. The header counts
//! the tasks done out of those started.
//!
//! Once the run records that it has used 80 % of its journal entries (the runtime's
//! `entries_warning` event), one warning line is printed, above the tree or among the
//! lines, so that a person sees the run nearing its cap before it fails there.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::time::{Duration, Instant};

use clio_journal::{Journal, RunId, TaskRecord, TaskStatus};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::tasks::{TaskNumbers, kind_name, status_name, step_name};

/// Draws a run's progress on a stream.
pub(crate) struct Progress {
    journal: Journal,
    run: RunId,
    started: Instant,
    how: Drawing,
    // Whether the entry-cap warning was printed.
    warned: bool,
    /// The journal entries of the run read so far for notices (retries, cut-off answers).
    read_to: u64,
    // The tasks that had ended before this process started driving the run: replayed.
    earlier: HashSet<u64>,
}

/// The identity under which the runtime records, once per run, that the run has used 80 %
/// of its journal entries (`clio_flow`'s `entries_warning` event).
pub(crate) const ENTRIES_WARNING: &str = "key:entries-warning";

/// Returns the message of run `run`'s entry-cap warning, if it recorded one. A failed read
/// is no warning: the warning is advice, and the run's outcome is reported anyway.
pub(crate) fn entries_warning(journal: &Journal, run: RunId) -> Option<String> {
    let entry = journal.entry_by_identity(run, ENTRIES_WARNING).ok()??;
    let message = entry.payload.get("message").and_then(serde_json::Value::as_str);
    Some(message.map_or_else(|| entry.payload.to_string(), str::to_owned))
}

/// How progress is shown: plain lines on the given stream, or a tree of bars on stderr.
enum Drawing {
    Lines {
        // The last state shown of each task, to print only changes.
        shown: BTreeMap<u64, (TaskStatus, u64)>,
    },
    Tree(Box<Tree>),
}

impl Progress {
    /// Starts showing run `run`; `tty` chooses the tree of bars over plain lines.
    ///
    /// The tree is drawn on the process's stderr; when indicatif would draw nothing there
    /// (`TERM=dumb`, say), progress falls back to plain lines.
    pub(crate) fn new(journal: Journal, run: RunId, tty: bool) -> Progress {
        // Best effort, as all progress: unreadable tasks are simply not marked. Progress
        // shows no results, so none is decoded.
        let earlier: HashSet<u64> = journal
            .tasks_without_results(run)
            .unwrap_or_default()
            .iter()
            .filter(|t| t.status.is_terminal())
            .map(|t| t.id.0)
            .collect();
        let tree = if tty { Tree::on(ProgressDrawTarget::stderr()) } else { None };
        let how = match tree {
            Some(mut tree) => {
                tree.earlier = earlier.clone();
                Drawing::Tree(Box::new(tree))
            }
            None => Drawing::Lines { shown: BTreeMap::new() },
        };
        // Notices are of this process's drive: entries already in the journal (an earlier
        // drive's retries, say) are neither read again nor shown again.
        let read_to = journal.entry_count(run).unwrap_or(0);
        Progress { journal, run, started: Instant::now(), how, warned: false, earlier, read_to }
    }

    /// Returns the time since progress started: the time this process has driven the run.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Returns whether the entry-cap warning was printed.
    pub(crate) fn warned(&self) -> bool {
        self.warned
    }

    /// Prints the entry-cap warning the first time the run has recorded it.
    fn warn_entries(&mut self, out: &mut dyn Write) {
        if self.warned {
            return;
        }
        let Some(message) = entries_warning(&self.journal, self.run) else { return };
        self.warned = true;
        let line = format!("warning: {message}");
        match &self.how {
            Drawing::Lines { .. } => {
                let _ = writeln!(out, "{line}");
            }
            Drawing::Tree(tree) => tree.println(&line),
        }
    }

    /// Prints a line for each notice the run recorded since the last call: a model request
    /// retried, an answer cut off at the token limit, the run suspended.
    fn notices(&mut self, out: &mut dyn Write) {
        let Ok(entries) = self.journal.entries_from(self.run, self.read_to) else { return };
        for entry in entries {
            self.read_to = self.read_to.max(entry.seq + 1);
            if entry.kind != clio_journal::EntryKind::Event {
                continue;
            }
            let Some(line) = notice(&entry.payload) else { continue };
            match &self.how {
                Drawing::Lines { .. } => {
                    let _ = writeln!(out, "{line}");
                }
                Drawing::Tree(tree) => tree.println(&line),
            }
        }
    }

    /// Shows what changed since the last call: plain lines go to `out`, the tree to stderr.
    pub(crate) fn tick(&mut self, out: &mut dyn Write) {
        // Progress is best effort: a failed read or write must not stop the run.
        let Ok(tasks) = self.journal.tasks_without_results(self.run) else { return };
        let elapsed = self.started.elapsed();
        match &mut self.how {
            Drawing::Lines { shown } => {
                let _ = lines(shown, &self.earlier, elapsed, &tasks, out);
            }
            Drawing::Tree(tree) => tree.update(&header(self.run, elapsed, &tasks), &tasks),
        }
        self.warn_entries(out);
        self.notices(out);
    }

    /// Ends the drawing before anything else is printed: after a run, the tree stays on the
    /// screen in its last state (active tasks keep their line, frozen); after an interrupt
    /// the terminal keeps what was last drawn and nothing more is drawn, so the `^C` the
    /// terminal echoes and the resume hint that follows land below it.
    pub(crate) fn finish(self, interrupted: bool) {
        let Drawing::Tree(tree) = self.how else { return };
        if interrupted {
            tree.stop();
            return;
        }
        let tasks = self.journal.tasks(self.run).unwrap_or_default();
        tree.close(&header(self.run, self.started.elapsed(), &tasks));
    }
}

/// Returns the line a person sees for a recorded event worth a notice during a run.
pub(crate) fn notice(payload: &serde_json::Value) -> Option<String> {
    // An event a flow records holds it under `command`; the runtime's own are bare.
    let event = payload.get("command").and_then(|c| c.get("event")).unwrap_or(payload);
    let text = |key: &str| {
        event.get(key).map_or_else(String::new, |v| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    match event.get("event").and_then(serde_json::Value::as_str)? {
        "model_retry" => {
            let wait = event.get("wait_ms").and_then(serde_json::Value::as_u64).unwrap_or(0);
            Some(format!(
                "retrying: {} attempt {} failed ({}); next in {:.1}s",
                text("provider"),
                text("attempt"),
                shorten(&text("error"), 120),
                wait as f64 / 1000.0
            ))
        }
        "model_cut_off" => Some(format!(
            "cut off: the answer of {} from {} reached its output-token limit",
            text("agent"),
            text("model")
        )),
        "run_suspended" => Some(format!("suspended: {}", text("message"))),
        _ => None,
    }
}

/// Returns `text` cut to `max` characters, with an ellipsis when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max).collect();
    cut.push('…');
    cut
}

/// Prints a plain line for each task whose state or tokens changed since last shown.
fn lines(
    shown: &mut BTreeMap<u64, (TaskStatus, u64)>,
    earlier: &HashSet<u64>,
    elapsed: Duration,
    tasks: &[TaskRecord],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let elapsed = elapsed.as_secs_f64();
    let numbers = TaskNumbers::of(tasks);
    for task in tasks {
        let tokens = task.input_tokens + task.output_tokens;
        let now = (task.status, tokens);
        if shown.get(&task.id.0) == Some(&now) {
            continue;
        }
        shown.insert(task.id.0, now);
        let replayed = earlier.contains(&task.id.0);
        writeln!(out, "[{elapsed:6.1}s] {}", describe(&numbers, task, replayed))?;
    }
    Ok(())
}

/// The first line of the tree: the run, the time since progress started, the tasks done
/// out of those started.
fn header(run: RunId, elapsed: Duration, tasks: &[TaskRecord]) -> String {
    let done = tasks.iter().filter(|t| t.status.is_terminal()).count();
    let n = tasks.len();
    format!("run {} — {:.1}s — {done} of {n} task(s) done", run.0, elapsed.as_secs_f64())
}

/// The tree of bars on stderr: a header, then one bar per task in tree order.
///
/// Bars are advanced by [`Progress::tick`], not by indicatif's steady-tick threads: the
/// CLI holds stderr's lock for the whole command, and a drawing thread would wait on it.
struct Tree {
    multi: MultiProgress,
    header: ProgressBar,
    // The tasks' bars, in the order they are drawn.
    bars: Vec<TaskBar>,
    active: ProgressStyle,
    still: ProgressStyle,
    // The tasks that had ended before this process started driving the run.
    earlier: HashSet<u64>,
}

/// A task's bar, and whether it has the active style (spinner and elapsed time).
struct TaskBar {
    task: u64,
    bar: ProgressBar,
    active: bool,
}

impl Tree {
    /// Returns a tree drawn on `target`, or `None` if indicatif would draw nothing there.
    fn on(target: ProgressDrawTarget) -> Option<Tree> {
        let multi = MultiProgress::with_draw_target(target);
        if multi.is_hidden() {
            return None;
        }
        // Both templates are constants; a bad one falls back to indicatif's own.
        let still = ProgressStyle::with_template("{msg}").unwrap_or_else(|_| plain_style());
        let active = ProgressStyle::with_template("{msg} {spinner} {elapsed}")
            .unwrap_or_else(|_| plain_style());
        let header = multi.add(ProgressBar::new_spinner().with_style(still.clone()));
        Some(Tree { multi, header, bars: Vec::new(), active, still, earlier: HashSet::new() })
    }

    /// Brings the bars in line with `tasks`.
    fn update(&mut self, header: &str, tasks: &[TaskRecord]) {
        let rows = tree_rows(tasks);
        let order: Vec<u64> = rows.iter().map(|(_, task)| task.id.0).collect();
        let drawn: Vec<u64> = self.bars.iter().map(|b| b.task).collect();
        if !keeps_order(&drawn, &order) {
            // A task moved (its parent showed up late): draw the tree anew.
            for b in self.bars.drain(..) {
                self.multi.remove(&b.bar);
            }
        }
        self.header.set_message(header.to_owned());
        let now = now_ms();
        let numbers = TaskNumbers::of(tasks);
        let mut previous = self.header.clone();
        for (i, (depth, task)) in rows.iter().enumerate() {
            if self.bars.get(i).is_none_or(|b| b.task != task.id.0) {
                // Its elapsed time counts from the task's creation, which may be in an
                // earlier process for a resumed run.
                let age = Duration::from_millis(now.saturating_sub(task.created_at_ms));
                let bar = ProgressBar::new_spinner().with_style(self.still.clone());
                let bar = self.multi.insert_after(&previous, bar.with_elapsed(age));
                self.bars.insert(i, TaskBar { task: task.id.0, bar, active: false });
            }
            let b = &mut self.bars[i];
            if !b.bar.is_finished() {
                let replayed = self.earlier.contains(&task.id.0);
                let line = task_line(&numbers, *depth, task, replayed);
                if task.status.is_terminal() {
                    b.bar.set_style(self.still.clone());
                    b.bar.finish_with_message(line);
                } else {
                    // Queued, running or awaiting input: a spinner and the time so far;
                    // interrupted (it may come back on resume): the line alone.
                    let active = task.status.is_active();
                    if active != b.active {
                        b.active = active;
                        b.bar.set_style(if active { &self.active } else { &self.still }.clone());
                    }
                    b.bar.set_message(line);
                    b.bar.tick();
                }
            }
            previous = b.bar.clone();
        }
    }

    /// Prints `line` above the tree, which is drawn again below it.
    fn println(&self, line: &str) {
        // Best effort, as all progress: a failed write must not stop the run.
        let _ = self.multi.println(line);
    }

    /// Leaves the tree on the screen in its last state, the cursor below it.
    fn close(self, header: &str) {
        for b in &self.bars {
            if !b.bar.is_finished() {
                b.bar.abandon();
            }
        }
        self.header.finish_with_message(header.to_owned());
    }

    /// Draws nothing more: the screen keeps the last drawing as it is.
    fn stop(self) {
        self.multi.set_draw_target(ProgressDrawTarget::hidden());
    }
}

fn plain_style() -> ProgressStyle {
    ProgressStyle::default_spinner()
}

/// Whether the tasks already drawn, in their drawn order, keep that order in `order`, so
/// that new bars can be slotted in between them.
fn keeps_order(drawn: &[u64], order: &[u64]) -> bool {
    let mut rest = order.iter();
    drawn.iter().all(|id| rest.any(|o| o == id))
}

/// Milliseconds since the Unix epoch, the journal's clock, to age a task's bar.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn glyph(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Queued => "·",
        TaskStatus::Running => "▶",
        TaskStatus::AwaitingInput => "?",
        TaskStatus::Succeeded => "✓",
        TaskStatus::Failed => "✗",
        TaskStatus::Cancelled => "⊘",
        TaskStatus::Interrupted => "!",
    }
}

/// One line about a task: glyph, number within the run, kind, target, the workflow step
/// it runs, state, model, tokens.
fn describe(numbers: &TaskNumbers, task: &TaskRecord, replayed: bool) -> String {
    let mut line = format!(
        "{} #{} {} {}",
        glyph(task.status),
        numbers.number(task.id.0),
        kind_name(task.kind),
        task.target,
    );
    if let Some(step) = step_name(task) {
        line.push_str(&format!(" ({step})"));
    }
    line.push(' ');
    line.push_str(status_name(task.status));
    if let Some(model) = &task.model {
        line.push_str(&format!(" on {model}"));
    }
    if task.input_tokens + task.output_tokens > 0 {
        line.push_str(&format!(" {}+{} tokens", task.input_tokens, task.output_tokens));
    }
    if task.status.is_terminal() {
        let ms = task.updated_at_ms.saturating_sub(task.created_at_ms);
        line.push_str(&format!(" in {:.1}s", ms as f64 / 1000.0));
    }
    if replayed {
        line.push_str(" (replayed)");
    }
    if let Some(error) = &task.error {
        line.push_str(&format!(" — {}", error_message(error)));
    }
    line
}

/// Returns the message of a task's recorded error, whole: its `message` when it is a
/// recorded `FlowError`, else the text as it is.
pub(crate) fn error_message(error: &str) -> String {
    clio_flow::FlowError::recorded_message(error)
}

/// Groups a run's tasks by parent handle; a task whose parent is not among them (or that
/// has none) goes under `None`, the root. Both task trees (progress, `runs tree`) use it.
pub(crate) fn children_by_parent(tasks: &[TaskRecord]) -> BTreeMap<Option<u64>, Vec<&TaskRecord>> {
    let known: std::collections::HashSet<u64> = tasks.iter().map(|t| t.id.0).collect();
    let mut children: BTreeMap<Option<u64>, Vec<&TaskRecord>> = BTreeMap::new();
    for task in tasks {
        let parent = task.parent.map(|p| p.0).filter(|p| known.contains(p));
        children.entry(parent).or_default().push(task);
    }
    children
}

/// The tasks in tree order (each task after its parent, children in journal order), with
/// their depth: 0 for a root.
fn tree_rows(tasks: &[TaskRecord]) -> Vec<(usize, &TaskRecord)> {
    let children = children_by_parent(tasks);
    fn walk<'a>(
        parent: Option<u64>,
        depth: usize,
        children: &BTreeMap<Option<u64>, Vec<&'a TaskRecord>>,
        rows: &mut Vec<(usize, &'a TaskRecord)>,
    ) {
        for task in children.get(&parent).into_iter().flatten() {
            rows.push((depth, task));
            walk(Some(task.id.0), depth + 1, children, rows);
        }
    }
    let mut rows = Vec::with_capacity(tasks.len());
    walk(None, 0, &children, &mut rows);
    rows
}

/// A task's line in the tree: indented two spaces per level, below the header.
fn task_line(numbers: &TaskNumbers, depth: usize, task: &TaskRecord, replayed: bool) -> String {
    format!("{}{}", "  ".repeat(depth + 1), describe(numbers, task, replayed))
}

#[cfg(test)]
mod tests;
