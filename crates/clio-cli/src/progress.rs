//! Live progress of a run: the tasks it started, their states, models, tokens and elapsed
//! times, read from the journal while the run goes.
//!
//! On a terminal the task tree is redrawn in place; otherwise each change is one plain
//! line, which logs and pipes can keep.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

use clio_journal::{Journal, RunId, TaskRecord, TaskStatus};

/// Draws a run's progress on a stream.
pub(crate) struct Progress {
    journal: Journal,
    run: RunId,
    tty: bool,
    started: Instant,
    // The last state shown of each task, to print only changes in plain mode.
    shown: BTreeMap<u64, (TaskStatus, u64)>,
    // How many lines the last drawing took, to redraw over it on a terminal.
    drawn: usize,
}

impl Progress {
    /// Starts showing run `run`; `tty` chooses the redrawn tree over plain lines.
    pub(crate) fn new(journal: Journal, run: RunId, tty: bool) -> Progress {
        Progress { journal, run, tty, started: Instant::now(), shown: BTreeMap::new(), drawn: 0 }
    }

    /// Shows what changed since the last call.
    pub(crate) fn tick(&mut self, out: &mut dyn Write) {
        // Progress is best effort: a failed read or write must not stop the run.
        let Ok(tasks) = self.journal.tasks(self.run) else { return };
        let _ = if self.tty { self.redraw(&tasks, out) } else { self.lines(&tasks, out) };
    }

    fn lines(&mut self, tasks: &[TaskRecord], out: &mut dyn Write) -> std::io::Result<()> {
        let elapsed = self.started.elapsed().as_secs_f64();
        for task in tasks {
            let tokens = task.input_tokens + task.output_tokens;
            let now = (task.status, tokens);
            if self.shown.get(&task.id.0) == Some(&now) {
                continue;
            }
            self.shown.insert(task.id.0, now);
            writeln!(out, "[{elapsed:6.1}s] {}", describe(task))?;
        }
        Ok(())
    }

    fn redraw(&mut self, tasks: &[TaskRecord], out: &mut dyn Write) -> std::io::Result<()> {
        let mut lines = vec![format!(
            "run {} — {:.1}s — {} task(s)",
            self.run.0,
            self.started.elapsed().as_secs_f64(),
            tasks.len()
        )];
        tree_lines(tasks, &mut lines);
        if self.drawn > 0 {
            // Move up over the last drawing and clear it.
            write!(out, "\x1b[{}A\x1b[J", self.drawn)?;
        }
        for line in &lines {
            writeln!(out, "{line}")?;
        }
        out.flush()?;
        self.drawn = lines.len();
        Ok(())
    }
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

/// One line about a task: glyph, handle, kind, target, state, model, tokens.
fn describe(task: &TaskRecord) -> String {
    let mut line = format!(
        "{} #{} {:?} {} {:?}",
        glyph(task.status),
        task.id.0,
        task.kind,
        task.target,
        task.status
    )
    .to_lowercase();
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
    if let Some(error) = &task.error {
        let short: String = error.chars().take(80).collect();
        line.push_str(&format!(" — {short}"));
    }
    line
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

fn tree_lines(tasks: &[TaskRecord], lines: &mut Vec<String>) {
    let children = children_by_parent(tasks);
    fn walk(
        parent: Option<u64>,
        depth: usize,
        children: &BTreeMap<Option<u64>, Vec<&TaskRecord>>,
        lines: &mut Vec<String>,
    ) {
        for task in children.get(&parent).into_iter().flatten() {
            lines.push(format!("{}{}", "  ".repeat(depth + 1), describe(task)));
            walk(Some(task.id.0), depth + 1, children, lines);
        }
    }
    walk(None, 0, &children, lines);
}
