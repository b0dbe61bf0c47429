//! Tests of progress: the tree's order and lines, the plain lines, and the tree of bars as
//! indicatif draws it on a small screen that stands in for a terminal.

use std::sync::{Arc, Mutex};

use clio_journal::{TaskId, TaskKind};
use indicatif::TermLike;
use serde_json::json;

use super::*;

fn task(
    id: u64,
    parent: Option<u64>,
    kind: TaskKind,
    target: &str,
    status: TaskStatus,
) -> TaskRecord {
    TaskRecord {
        id: TaskId(id),
        run: RunId(7),
        parent: parent.map(TaskId),
        kind,
        target: target.to_owned(),
        label: String::new(),
        status,
        model: None,
        input_tokens: 0,
        output_tokens: 0,
        result: None,
        error: None,
        owner: "test".to_owned(),
        call: None,
        created_at_ms: 1_000,
        updated_at_ms: 1_000,
    }
}

/// A run with an agent that called a tool (which ran a step) and a subagent, and a task
/// whose parent is not in the run.
fn run_tasks() -> Vec<TaskRecord> {
    let mut agent = task(1, None, TaskKind::Agent, "lead", TaskStatus::Running);
    agent.model = Some("m-small".into());
    agent.input_tokens = 120;
    agent.output_tokens = 30;
    let mut tool = task(2, Some(1), TaskKind::Tool, "read_file", TaskStatus::Succeeded);
    tool.updated_at_ms = 2_500;
    let mut sub = task(3, Some(1), TaskKind::Subagent, "critic", TaskStatus::Failed);
    sub.updated_at_ms = 1_250;
    sub.error = Some("model refused".into());
    let step = task(4, Some(2), TaskKind::Step, "parse", TaskStatus::Queued);
    let orphan = task(5, Some(99), TaskKind::Flow, "other", TaskStatus::Interrupted);
    vec![agent, tool, sub, step, orphan]
}

#[test]
fn the_header_counts_each_status_and_the_rate() {
    let tasks = run_tasks();
    // Done: the succeeded tool, the failed subagent; the rest are not. Two ended in 2.3 s.
    assert_eq!(
        header(RunId(7), Duration::from_millis(2_340), &tasks, &HashSet::new()),
        "run 7 — 2.3s — 2 of 5 task(s) done (1 succeeded, 1 failed, 1 running, 1 queued, 1 interrupted) — 0.9 tasks/s"
    );
    // Replayed tasks ended in an earlier process: they are not this drive's rate.
    assert_eq!(
        header(RunId(7), Duration::from_millis(2_000), &tasks, &HashSet::from([2, 3])),
        "run 7 — 2.0s — 2 of 5 task(s) done (1 succeeded, 1 failed, 1 running, 1 queued, 1 interrupted) — 0.0 tasks/s"
    );
}

#[test]
fn plain_lines_show_each_change_once() {
    let mut tasks = run_tasks();
    let mut shown = BTreeMap::new();
    let mut out = Vec::new();
    let none = HashSet::new();
    lines(&mut shown, &none, Duration::from_millis(400), &tasks[..2], &mut out).unwrap();
    tasks[0].output_tokens += 5;
    lines(&mut shown, &none, Duration::from_millis(800), &tasks, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "[   0.4s] ▶ #1 agent lead running on m-small 120+30 tokens\n\
         [   0.4s] ✓ #2 tool read_file succeeded in 1.5s\n\
         [   0.8s] ▶ #1 agent lead running on m-small 120+35 tokens\n\
         [   0.8s] ✗ #3 subagent critic failed in 0.2s — model refused\n\
         [   0.8s] · #4 step parse queued\n\
         [   0.8s] ! #5 flow other interrupted\n"
    );
}

#[test]
fn tasks_that_ended_before_a_resume_are_marked_replayed() {
    let tasks = run_tasks();
    let mut shown = BTreeMap::new();
    let mut out = Vec::new();
    // The tool had ended before this process started driving the run.
    let earlier = HashSet::from([2]);
    lines(&mut shown, &earlier, Duration::from_millis(100), &tasks[..2], &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "[   0.1s] ▶ #1 agent lead running on m-small 120+30 tokens\n\
         [   0.1s] ✓ #2 tool read_file succeeded in 1.5s (replayed)\n"
    );
}

/// A terminal of fixed width that keeps what is written on it, cursor moves included.
#[derive(Debug, Clone, Default)]
struct Screen(Arc<Mutex<ScreenState>>);

#[derive(Debug, Default)]
struct ScreenState {
    rows: Vec<Vec<char>>,
    row: usize,
    col: usize,
}

const WIDTH: usize = 100;

impl Screen {
    /// The screen's text, one string per row, without trailing blanks or empty rows.
    fn text(&self) -> Vec<String> {
        let state = self.0.lock().unwrap();
        let mut rows: Vec<String> =
            state.rows.iter().map(|r| r.iter().collect::<String>().trim_end().to_owned()).collect();
        while rows.last().is_some_and(String::is_empty) {
            rows.pop();
        }
        rows
    }
}

impl TermLike for Screen {
    fn width(&self) -> u16 {
        WIDTH as u16
    }
    fn height(&self) -> u16 {
        40
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        let mut s = self.0.lock().unwrap();
        s.row = s.row.saturating_sub(n);
        s.col = s.col.min(WIDTH - 1);
        Ok(())
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        let mut s = self.0.lock().unwrap();
        s.row += n;
        s.col = s.col.min(WIDTH - 1);
        Ok(())
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        let mut s = self.0.lock().unwrap();
        s.col = (s.col + n).min(WIDTH - 1);
        Ok(())
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        let mut s = self.0.lock().unwrap();
        s.col = s.col.saturating_sub(n);
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write_str(s)?;
        self.write_str("\n")
    }
    fn write_str(&self, text: &str) -> std::io::Result<()> {
        let mut s = self.0.lock().unwrap();
        for c in text.chars() {
            match c {
                '\r' => s.col = 0,
                '\n' => {
                    s.row += 1;
                    s.col = 0;
                }
                c => {
                    // A character past the last column wraps to the next row.
                    if s.col == WIDTH {
                        s.row += 1;
                        s.col = 0;
                    }
                    let (row, col) = (s.row, s.col);
                    if s.rows.len() <= row {
                        s.rows.resize(row + 1, Vec::new());
                    }
                    let line = &mut s.rows[row];
                    if line.len() <= col {
                        line.resize(col + 1, ' ');
                    }
                    line[col] = c;
                    s.col += 1;
                }
            }
        }
        Ok(())
    }
    fn clear_line(&self) -> std::io::Result<()> {
        let mut s = self.0.lock().unwrap();
        let row = s.row;
        if let Some(line) = s.rows.get_mut(row) {
            line.clear();
        }
        s.col = 0;
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

fn tree_on(screen: &Screen) -> Tree {
    let room = Room::of(Some(screen.height()), Some(screen.width()));
    Tree::on(ProgressDrawTarget::term_like(Box::new(screen.clone())), room).unwrap()
}

/// A workflow run of `n` steps as the live view sees it at one moment: its flow task, the
/// steps that ended (one in 97 failed), `running` steps under way and the rest queued.
fn workflow_tasks(n: u64, ended: u64, running: u64) -> Vec<TaskRecord> {
    let mut root = task(1, None, TaskKind::Flow, "workflow", TaskStatus::Running);
    root.created_at_ms = 0;
    let mut tasks = vec![root];
    for i in 0..n {
        let status = if i < ended {
            if i % 97 == 13 { TaskStatus::Failed } else { TaskStatus::Succeeded }
        } else if i < ended + running {
            TaskStatus::Running
        } else {
            TaskStatus::Queued
        };
        let mut step = task(i + 2, Some(1), TaskKind::Tool, "noop", status);
        step.call = Some(format!("key:wf:s{i}"));
        step.created_at_ms = 1_000 + i * 10;
        step.updated_at_ms = step.created_at_ms + if status.is_terminal() { 5 } else { 0 };
        if status == TaskStatus::Failed {
            step.error = Some(format!("the tool noop failed on step s{i}: exit status 3"));
        }
        tasks.push(step);
    }
    tasks
}

/// The live view of a workflow run of `n` steps, drawn on the screen twice (part way,
/// then at a later moment), as a terminal shows it.
fn drawn(n: u64) -> String {
    let screen = Screen::default();
    let tree = tree_on(&screen);
    let first = workflow_tasks(n, n / 3, 4.min(n));
    let lines = view(RunId(7), Duration::from_secs(3), &first, &HashSet::new(), 20_000, tree.room);
    tree.bar.set_message(lines.join("\n"));
    let later = workflow_tasks(n, n - 2, 2);
    let elapsed = Duration::from_secs(9);
    let lines = view(RunId(7), elapsed, &later, &HashSet::new(), 1_000 + n * 10 + 500, tree.room);
    tree.bar.finish_with_message(lines.join("\n"));
    screen.text().join("\n")
}

#[test]
fn the_live_view_of_10_steps() {
    insta::assert_snapshot!(drawn(10));
}

#[test]
fn the_live_view_of_1000_steps_is_as_high_as_that_of_10() {
    let text = drawn(1_000);
    assert!(text.lines().count() <= 24, "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn the_live_view_of_10000_steps_keeps_its_failures_on_screen() {
    let text = drawn(10_000);
    assert!(text.lines().count() <= 24, "{text}");
    // The first failure (step s13) stays on screen, with the count of the others.
    assert!(text.contains("✗ #15 tool noop (step s13) failed"), "{text}");
    assert!(text.contains("more failed: `clio runs tree 7` lists every task"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn the_view_is_bounded_by_the_room_whatever_the_run_size() {
    for n in [1, 10, 100, 1_000, 10_000] {
        for rows in [5, 12, 24, 40, 100] {
            let room = Room::of(Some(rows), Some(80));
            let tasks = workflow_tasks(n, n / 2, 8.min(n));
            let lines = view(RunId(7), Duration::from_secs(1), &tasks, &HashSet::new(), 0, room);
            assert!(lines.len() <= 24, "{n} tasks, {rows} rows: {lines:#?}");
            assert!(lines.len() <= usize::from(rows).max(10), "{n} tasks, {rows} rows: {lines:#?}");
            for line in &lines {
                assert!(console::measure_text_width(line) < 80, "{line}");
            }
        }
    }
}

#[test]
fn lines_are_cut_to_the_terminal_by_display_width() {
    let mut wide = task(2, None, TaskKind::Tool, &"漢".repeat(60), TaskStatus::Running);
    wide.created_at_ms = 0;
    let room = Room { items: 5, width: Some(40) };
    let lines = view(RunId(7), Duration::from_secs(1), &[wide], &HashSet::new(), 0, room);
    let line = &lines[2];
    assert!(line.ends_with('…'), "{line}");
    assert!(console::measure_text_width(line) <= 39, "{line}");
}

#[test]
fn the_view_is_drawn_at_a_fixed_rate() {
    let screen = Screen::default();
    let mut tree = tree_on(&screen);
    assert!(tree.due());
    tree.update(RunId(7), Duration::from_secs(1), &run_tasks());
    // Drawn just now: the next change waits for the next refresh.
    assert!(!tree.due());
    std::thread::sleep(REFRESH);
    assert!(tree.due());
}

#[test]
fn the_view_stays_when_the_run_ends_and_an_interrupt_draws_nothing_more() {
    let screen = Screen::default();
    let mut tree = tree_on(&screen);
    let all = run_tasks();
    tree.update(RunId(7), Duration::from_secs(1), &all);
    let text = screen.text();
    assert!(text[0].starts_with("run 7 — 1.0s — 2 of 5 task(s) done"), "{text:#?}");
    assert_eq!(text[1], "failed (1):");
    assert_eq!(text[2], "  ✗ #3 subagent critic failed in 0.2s — model refused");
    assert_eq!(text[3], "active (1):");
    assert!(
        text[4].starts_with("  ▶ #1 agent lead running on m-small 120+30 tokens "),
        "{text:#?}"
    );
    assert_eq!(text[5], "ended lately:");
    assert_eq!(text[6], "  ✓ #2 tool read_file succeeded in 1.5s");
    assert_eq!(text.len(), 7, "{text:#?}");
    tree.stop();
    assert_eq!(screen.text(), text);
}

/// Returns an in-memory journal with run 1, and that run's id.
fn journal_with_a_run() -> (Journal, RunId) {
    let journal = Journal::open_in_memory().unwrap();
    let run = journal
        .create_run(clio_journal::NewRun {
            flow: "workflow".into(),
            input: serde_json::json!("x"),
            input_digest: "d".into(),
            fingerprint: "f".into(),
            owner: "test".into(),
            launch: None,
        })
        .unwrap();
    (journal, run)
}

/// Records the runtime's entry-cap warning in `run`.
fn record_entries_warning(journal: &Journal, run: RunId) {
    let payload = serde_json::json!({
        "event": "entries_warning", "entries": 8, "max": 10,
        "message": "run 1 has used 8 of its 10 journal entries",
    });
    let entry = clio_journal::NewEntry::new(clio_journal::EntryKind::Event, payload)
        .with_identity(ENTRIES_WARNING);
    journal.append(run, entry).unwrap();
}

#[test]
fn the_entry_cap_warning_is_one_line_among_the_plain_lines() {
    let (journal, run) = journal_with_a_run();
    let mut progress = Progress::new(journal.clone(), run, false);
    let mut out = Vec::new();
    progress.tick(&mut out);
    assert!(!progress.warned());
    record_entries_warning(&journal, run);
    progress.tick(&mut out);
    progress.tick(&mut out);
    assert!(progress.warned());
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "warning: run 1 has used 8 of its 10 journal entries\n"
    );
}

#[test]
fn the_entry_cap_warning_is_printed_once_above_the_tree() {
    let (journal, run) = journal_with_a_run();
    let screen = Screen::default();
    let how = Drawing::Tree(Box::new(tree_on(&screen)));
    let mut progress = Progress {
        journal: journal.clone(),
        run,
        started: Instant::now(),
        how,
        warned: false,
        read_to: 0,
        earlier: HashSet::new(),
    };
    record_entries_warning(&journal, run);
    progress.tick(&mut std::io::sink());
    progress.tick(&mut std::io::sink());
    progress.finish(false);
    let text = screen.text();
    assert_eq!(text.len(), 2, "{text:#?}");
    assert_eq!(text[0], "warning: run 1 has used 8 of its 10 journal entries");
    assert!(text[1].starts_with("run 1 — "), "{text:#?}");
}

#[test]
fn retries_cut_offs_and_suspensions_are_notices() {
    let retry = json!({
        "event": "model_retry", "provider": "local", "attempt": 2,
        "error": "cannot connect to http://127.0.0.1:8080/v1/chat/completions", "wait_ms": 2100
    });
    assert_eq!(
        super::notice(&retry).as_deref(),
        Some(
            "retrying: local attempt 2 failed (cannot connect to http://127.0.0.1:8080/v1/chat/completions); next in 2.1s"
        )
    );
    // A flow records its events under `command`.
    let cut = json!({ "command": { "command": "event", "event": {
        "event": "model_cut_off", "agent": "writer", "model": "local/qwen" } } });
    assert_eq!(
        super::notice(&cut).as_deref(),
        Some("cut off: the answer of writer from local/qwen reached its output-token limit")
    );
    let suspended =
        json!({ "event": "run_suspended", "message": "the provider stayed unreachable" });
    assert_eq!(
        super::notice(&suspended).as_deref(),
        Some("suspended: the provider stayed unreachable")
    );
    assert_eq!(super::notice(&json!({ "event": "something_else" })), None);
}
