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

const TREE: [&str; 5] = [
    "  ▶ #1 agent lead running on m-small 120+30 tokens",
    "    ✓ #2 tool read_file succeeded in 1.5s",
    "      · #4 step parse queued",
    "    ✗ #3 subagent critic failed in 0.2s — model refused",
    "  ! #5 flow other interrupted",
];

#[test]
fn the_tree_puts_each_task_under_its_parent_indented_by_depth() {
    let tasks = run_tasks();
    let numbers = TaskNumbers::of(&tasks);
    let lines: Vec<String> = tree_rows(&tasks)
        .into_iter()
        .map(|(depth, task)| task_line(&numbers, depth, task, false))
        .collect();
    assert_eq!(lines, TREE);
    // Done: the succeeded tool, the failed subagent; the rest are not.
    assert_eq!(
        header(RunId(7), Duration::from_millis(2_340), &tasks),
        "run 7 — 2.3s — 2 of 5 task(s) done"
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

#[test]
fn new_bars_slot_in_only_between_bars_in_the_same_order() {
    assert!(keeps_order(&[], &[1, 2]));
    assert!(keeps_order(&[1, 3], &[1, 2, 3, 4]));
    assert!(!keeps_order(&[3, 1], &[1, 2, 3]));
    assert!(!keeps_order(&[1, 5], &[1, 2]));
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
    Tree::on(ProgressDrawTarget::term_like(Box::new(screen.clone()))).unwrap()
}

#[test]
fn the_tree_of_bars_shows_the_task_lines_and_stays_when_the_run_ends() {
    let screen = Screen::default();
    let mut tree = tree_on(&screen);
    let all = run_tasks();

    // First the agent and its tool, both running.
    let mut early = vec![all[0].clone(), all[1].clone()];
    early[1].status = TaskStatus::Running;
    tree.update("run 7 — 0.2s — 2 task(s)", &early);
    let text = screen.text();
    assert_eq!(text.len(), 3, "{text:#?}");
    assert_eq!(text[0], "run 7 — 0.2s — 2 task(s)");
    // An active task's bar is its line, then a spinner and its elapsed time.
    assert!(text[1].starts_with(&format!("{} ", TREE[0])), "{text:#?}");
    assert!(text[2].starts_with("    ▶ #2 tool read_file running "), "{text:#?}");

    // Then every task: the step slots in under the tool, ended tasks show their mark.
    tree.update("run 7 — 0.9s — 5 task(s)", &all);
    let text = screen.text();
    assert_eq!(text.len(), 6, "{text:#?}");
    assert_eq!(text[0], "run 7 — 0.9s — 5 task(s)");
    assert!(text[1].starts_with(&format!("{} ", TREE[0])), "{text:#?}");
    assert_eq!(text[2], TREE[1]);
    assert!(text[3].starts_with(&format!("{} ", TREE[2])), "{text:#?}");
    assert_eq!(text[4], TREE[3]);
    // An interrupted task may come back on resume; it is not active, so no spinner.
    assert_eq!(text[5], TREE[4]);

    // The end leaves the tree in place, with the final header.
    tree.close("run 7 — 1.0s — 5 task(s)");
    let text = screen.text();
    assert_eq!(text.len(), 6, "{text:#?}");
    assert_eq!(text[0], "run 7 — 1.0s — 5 task(s)");
    assert_eq!(text[2], TREE[1]);
    assert_eq!(text[4], TREE[3]);
}

#[test]
fn a_task_that_moves_redraws_the_tree_in_order() {
    let screen = Screen::default();
    let mut tree = tree_on(&screen);
    let all = run_tasks();
    // The orphan is drawn first as a root; its parent then shows up, after the agent.
    let mut orphan = all[4].clone();
    orphan.parent = Some(TaskId(6));
    tree.update("h", &[all[0].clone(), orphan.clone()]);
    let parent = task(6, Some(1), TaskKind::Flow, "outer", TaskStatus::Succeeded);
    tree.update("h", &[all[0].clone(), orphan, parent]);
    tree.close("h");
    let text = screen.text();
    assert_eq!(text.len(), 4, "{text:#?}");
    assert!(text[1].starts_with(&format!("{} ", TREE[0])), "{text:#?}");
    // Numbered within the run: the agent, the orphan, then its parent, as created.
    assert_eq!(text[2], "    ✓ #3 flow outer succeeded in 0.0s");
    assert_eq!(text[3], "      ! #2 flow other interrupted");
}

#[test]
fn an_interrupt_leaves_the_last_drawing_and_draws_nothing_more() {
    let screen = Screen::default();
    let mut tree = tree_on(&screen);
    let all = run_tasks();
    tree.update("run 7 — 0.5s — 5 task(s)", &all);
    let before = screen.text();
    tree.stop();
    assert_eq!(screen.text(), before);
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
