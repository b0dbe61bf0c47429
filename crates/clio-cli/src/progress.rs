//! Live progress of a run: the tasks it started, their states, models, tokens and elapsed
//! times, read from the journal while the run goes.
//!
//! On a terminal a bounded live view is drawn in place with indicatif ([`view`]): a header
//! with the tasks done, the count of each status and the rate, then the failed tasks (kept
//! on screen), the active ones and the ones that ended most recently, each list cut to the
//! terminal's room. It is drawn at most every [`REFRESH`], so a run of 10 or 10,000 tasks
//! costs the same drawing; the whole tree is `clio runs tree`'s. Otherwise each change is
//! one plain line, which logs and pipes can keep.
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
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
        let tree = if tty {
            let size = console::Term::stderr().size_checked();
            let room = Room::of(size.map(|(rows, _)| rows), size.map(|(_, cols)| cols));
            Tree::on(ProgressDrawTarget::stderr(), room)
        } else {
            None
        };
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
        // On a terminal the view is drawn at a fixed rate, whatever the run's size: a tick
        // that comes sooner reads nothing (the next one, or the close, shows its change).
        if let Drawing::Tree(tree) = &self.how
            && !tree.due()
        {
            return;
        }
        // Progress is best effort: a failed read or write must not stop the run.
        let Ok(tasks) = self.journal.tasks_without_results(self.run) else { return };
        let elapsed = self.started.elapsed();
        match &mut self.how {
            Drawing::Lines { shown } => {
                let _ = lines(shown, &self.earlier, elapsed, &tasks, out);
            }
            Drawing::Tree(tree) => tree.update(self.run, elapsed, &tasks),
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
        let tasks = self.journal.tasks_without_results(self.run).unwrap_or_default();
        tree.close(self.run, self.started.elapsed(), &tasks);
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

/// The first line of the live view: the run, the time since progress started, the tasks
/// done out of those started, the count of each status there is, and the rate at which
/// tasks ended in this process (replayed ones left out).
fn header(run: RunId, elapsed: Duration, tasks: &[TaskRecord], earlier: &HashSet<u64>) -> String {
    let done = tasks.iter().filter(|t| t.status.is_terminal()).count();
    let n = tasks.len();
    let mut line =
        format!("run {} — {:.1}s — {done} of {n} task(s) done", run.0, elapsed.as_secs_f64());
    let counts: Vec<String> = STATUS_ORDER
        .iter()
        .filter_map(|status| {
            let k = tasks.iter().filter(|t| t.status == *status).count();
            (k > 0).then(|| format!("{k} {}", status_name(*status)))
        })
        .collect();
    if !counts.is_empty() {
        line.push_str(&format!(" ({})", counts.join(", ")));
    }
    let ended_here =
        tasks.iter().filter(|t| t.status.is_terminal() && !earlier.contains(&t.id.0)).count();
    let secs = elapsed.as_secs_f64();
    if secs >= 0.1 {
        line.push_str(&format!(" — {:.1} tasks/s", ended_here as f64 / secs));
    }
    line
}

/// The order in which the header counts statuses.
const STATUS_ORDER: [TaskStatus; 7] = [
    TaskStatus::Succeeded,
    TaskStatus::Failed,
    TaskStatus::Cancelled,
    TaskStatus::Running,
    TaskStatus::AwaitingInput,
    TaskStatus::Queued,
    TaskStatus::Interrupted,
];

/// How often the live view is drawn at most, whatever the run's size: each drawing reads
/// the run's tasks once and writes a bounded number of lines.
pub(crate) const REFRESH: Duration = Duration::from_millis(100);

/// How much of a terminal the live view takes: the most failed, active and recently ended
/// tasks it lists, and the width its lines are cut to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Room {
    /// The most task lines (failed, active and ended together).
    pub(crate) items: usize,
    /// The terminal's width in columns, when known.
    pub(crate) width: Option<usize>,
}

impl Room {
    /// The room on a terminal of `height` rows and `width` columns: at most 24 lines in
    /// all (the header, three headings and three "more" lines included), fewer on a
    /// short terminal, so that the view never scrolls.
    pub(crate) fn of(height: Option<u16>, width: Option<u16>) -> Room {
        let height = usize::from(height.unwrap_or(40));
        let lines = height.saturating_sub(2).clamp(10, 24);
        Room { items: lines - 7, width: width.map(usize::from).filter(|w| *w > 10) }
    }
}

/// Returns the live view of a run, line by line: the header, then the failed tasks (kept
/// on screen for the whole run: the first ones), the active tasks (running or waiting on
/// an answer, oldest first, with the time they have taken), and the tasks that ended most
/// recently, each list cut to what `room` allows with a line saying how many more there
/// are. Its length is bounded by `room`, whatever the number of tasks; the whole tree is
/// `clio runs tree`'s.
pub(crate) fn view(
    run: RunId,
    elapsed: Duration,
    tasks: &[TaskRecord],
    earlier: &HashSet<u64>,
    now_ms: u64,
    room: Room,
) -> Vec<String> {
    let numbers = TaskNumbers::of(tasks);
    let mut failed: Vec<&TaskRecord> =
        tasks.iter().filter(|t| t.status == TaskStatus::Failed).collect();
    failed.sort_by_key(|t| (t.updated_at_ms, t.id.0));
    let mut active: Vec<&TaskRecord> = tasks.iter().filter(|t| t.status.is_active()).collect();
    active.retain(|t| t.status != TaskStatus::Queued);
    active.sort_by_key(|t| (t.created_at_ms, t.id.0));
    let mut ended: Vec<&TaskRecord> =
        tasks.iter().filter(|t| t.status.is_terminal() && t.status != TaskStatus::Failed).collect();
    // The most recent ones only: a partial selection, then those few in time order.
    let recent_cap = room.items.min(ended.len());
    if recent_cap < ended.len() {
        let cut = ended.len() - recent_cap;
        ended.select_nth_unstable_by_key(cut, |t| (t.updated_at_ms, t.id.0));
        ended.drain(..cut);
    }
    ended.sort_by_key(|t| (t.updated_at_ms, t.id.0));

    // Failures first (a third of the room, or all the room the others leave), then the
    // active tasks (half of what is left, or more when few tasks ended), then the rest.
    let items = room.items;
    let others = active.len() + ended.len();
    let failed_cap = failed.len().min((items / 3).max(items.saturating_sub(others)));
    let left = items - failed_cap;
    let active_cap = active.len().min(left.div_ceil(2).max(left.saturating_sub(ended.len())));
    let ended_cap = ended.len().min(left - active_cap);

    let mut lines = vec![header(run, elapsed, tasks, earlier)];
    let line_of = |task: &TaskRecord| {
        let mut line = format!("  {}", describe(&numbers, task, earlier.contains(&task.id.0)));
        if task.status.is_active() {
            let ms = now_ms.saturating_sub(task.created_at_ms);
            line.push_str(&format!(" {:.1}s", ms as f64 / 1000.0));
        }
        line
    };
    if !failed.is_empty() {
        lines.push(format!("failed ({}):", failed.len()));
        lines.extend(failed.iter().take(failed_cap).map(|t| line_of(t)));
        if failed.len() > failed_cap {
            lines.push(format!(
                "  … and {} more failed: `clio runs tree {}` lists every task",
                failed.len() - failed_cap,
                run.0
            ));
        }
    }
    if !active.is_empty() {
        lines.push(format!("active ({}):", active.len()));
        lines.extend(active.iter().take(active_cap).map(|t| line_of(t)));
        if active.len() > active_cap {
            lines.push(format!("  … and {} more active", active.len() - active_cap));
        }
    }
    if ended_cap > 0 {
        lines.push("ended lately:".to_owned());
        lines.extend(ended[ended.len() - ended_cap..].iter().map(|t| line_of(t)));
    }
    if let Some(width) = room.width {
        for line in &mut lines {
            if console::measure_text_width(line) >= width {
                *line = console::truncate_str(line, width - 1, "…").into_owned();
            }
        }
    }
    lines
}

/// The live view on a terminal: one bar of indicatif whose message is the whole view,
/// redrawn in place at most every [`REFRESH`].
///
/// The view is advanced by [`Progress::tick`], not by indicatif's steady-tick threads: the
/// CLI holds stderr's lock for the whole command, and a drawing thread would wait on it.
struct Tree {
    bar: ProgressBar,
    room: Room,
    // When the view was last drawn.
    drawn_at: Option<Instant>,
    // The tasks that had ended before this process started driving the run.
    earlier: HashSet<u64>,
}

impl Tree {
    /// Returns a view drawn on `target` in `room`, or `None` if indicatif would draw
    /// nothing there.
    fn on(target: ProgressDrawTarget, room: Room) -> Option<Tree> {
        if target.is_hidden() {
            return None;
        }
        // The template is a constant; a bad one falls back to indicatif's own.
        let style = ProgressStyle::with_template("{msg}").unwrap_or_else(|_| plain_style());
        let bar = ProgressBar::with_draw_target(None, target).with_style(style);
        Some(Tree { bar, room, drawn_at: None, earlier: HashSet::new() })
    }

    /// Whether the view is due to be drawn again.
    fn due(&self) -> bool {
        self.drawn_at.is_none_or(|at| at.elapsed() >= REFRESH)
    }

    /// Draws the view of `tasks`.
    fn update(&mut self, run: RunId, elapsed: Duration, tasks: &[TaskRecord]) {
        let lines = view(run, elapsed, tasks, &self.earlier, now_ms(), self.room);
        self.drawn_at = Some(Instant::now());
        self.bar.set_message(lines.join("\n"));
    }

    /// Prints `line` above the view, which is drawn again below it.
    fn println(&self, line: &str) {
        // Best effort, as all progress: a failed write must not stop the run.
        self.bar.println(line);
    }

    /// Leaves the view on the screen in its last state, the cursor below it.
    fn close(self, run: RunId, elapsed: Duration, tasks: &[TaskRecord]) {
        let lines = view(run, elapsed, tasks, &self.earlier, now_ms(), self.room);
        self.bar.finish_with_message(lines.join("\n"));
    }

    /// Draws nothing more: the screen keeps the last drawing as it is.
    fn stop(self) {
        self.bar.set_draw_target(ProgressDrawTarget::hidden());
    }
}

fn plain_style() -> ProgressStyle {
    ProgressStyle::default_spinner()
}

/// Milliseconds since the Unix epoch, the journal's clock, to age an active task.
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

#[cfg(test)]
mod tests;
