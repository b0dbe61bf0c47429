//! `clio runs list|show|tree|events|export|prune`: what the journal holds about runs, for
//! people (tables and trees) and for programs (`--json`, JSON lines). `runs show` and
//! `runs tree` also show a run's subagent team (`clio_flow::run_team`, drawn by
//! `write_team`).

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::anyhow;
use clio_flow::SessionSummary;
use clio_journal::{
    EntryKind, Journal, JournalEntry, RunFilter, RunId, RunRecord, RunStatus, SessionId, TaskRecord,
};
use serde_json::Value;

use super::write_json;
use crate::args::{
    RunAnswerArgs, RunArgs, RunEventsArgs, RunExportArgs, RunShowArgs, RunsListArgs, RunsPruneArgs,
};
use crate::error::{CliError, journal_error};
use crate::home::Home;
use crate::launch::Launch;
use crate::tasks::{
    TaskNumbers, kind_name, run_status_name, status_name as task_status_name, step_name,
};

const STATUSES: [(&str, RunStatus); 6] = [
    ("running", RunStatus::Running),
    ("awaiting_input", RunStatus::AwaitingInput),
    ("succeeded", RunStatus::Succeeded),
    ("failed", RunStatus::Failed),
    ("cancelled", RunStatus::Cancelled),
    ("interrupted", RunStatus::Interrupted),
];

/// Returns a run's flow selection for people: the id, then the options if any.
fn flow_label(flow: &str) -> String {
    let Ok(value) = serde_json::from_str::<Value>(flow) else { return flow.to_owned() };
    let Some(id) = value.get("id").and_then(Value::as_str) else { return flow.to_owned() };
    match value.get("options").and_then(Value::as_object) {
        Some(options) if !options.is_empty() => format!("{id} {}", Value::Object(options.clone())),
        _ => id.to_owned(),
    }
}

/// Returns a run as JSON for programs: the journal's record, with what it keeps as JSON
/// text (the flow selection, the fingerprint, the error) given as the JSON it is, so that
/// no JSON is nested inside a string.
pub(super) fn run_json(run: &RunRecord) -> Result<Value, CliError> {
    let mut value = serde_json::to_value(run).map_err(CliError::internal)?;
    for key in ["flow", "fingerprint", "error"] {
        unnest(&mut value, key);
    }
    // A launch without `--model` recorded the model as empty: it is no model, null.
    if let Some(model) = value.get_mut("launch").and_then(|l| l.get_mut("model"))
        && model.as_str() == Some("")
    {
        *model = Value::Null;
    }
    Ok(value)
}

/// Returns a run's tasks as JSON for programs: each journal record with its number within
/// the run (`number`, as people see it), the workflow step it runs (`step`, or null), and
/// its error as the JSON it is.
pub(super) fn tasks_json(tasks: &[TaskRecord]) -> Result<Value, CliError> {
    let numbers = TaskNumbers::of(tasks);
    let mut list = Vec::with_capacity(tasks.len());
    for task in tasks {
        let mut value = serde_json::to_value(task).map_err(CliError::internal)?;
        unnest(&mut value, "error");
        if let Value::Object(map) = &mut value {
            map.insert("number".into(), Value::from(numbers.number(task.id.0)));
            let step = task_step(task);
            map.insert("step".into(), step.map_or(Value::Null, Value::String));
        }
        list.push(value);
    }
    Ok(Value::Array(list))
}

/// Returns what a viewer shows of a run at a glance: its flow's name, what it works on,
/// the agent it was launched with, the models its tasks ran on, the tokens they spent and
/// how long it took (to its end, or to its last change while it goes on).
pub(super) fn summary_json(home: &Home, run: &RunRecord, tasks: &[TaskRecord]) -> Value {
    let launch = Launch::find(home, run).ok().flatten();
    let agent = launch.as_ref().and_then(|l| l.agent.as_ref()).map(|file| {
        let checksum = launch.as_ref().and_then(|l| l.agent_checksum.clone());
        serde_json::json!({ "file": file, "checksum": checksum })
    });
    let mut models: Vec<&str> = tasks.iter().filter_map(|t| t.model.as_deref()).collect();
    models.sort_unstable();
    models.dedup();
    let tokens: u64 = tasks.iter().map(|t| t.input_tokens + t.output_tokens).sum();
    let end = run_end_ms(run);
    let workflow_task = run.input.get("workflow").and(run.input.get("task"));
    let task = match workflow_task.and_then(Value::as_str) {
        Some(task) => task.to_owned(),
        None => answer_text(Some(&run.input)),
    };
    serde_json::json!({
        "flow_name": flow_label(&run.flow),
        "task": task,
        "agent": agent,
        "models": models,
        "tokens": tokens,
        "duration_ms": end.saturating_sub(run.started_at_ms),
        "n_tasks": tasks.len(),
    })
}

/// Returns the workflow step id a task runs (without the words around it), if any.
fn task_step(task: &TaskRecord) -> Option<String> {
    step_name(task).map(|name| name.strip_prefix("step ").map(str::to_owned).unwrap_or(name))
}

/// Replaces the string at `key` of `value` with the JSON it holds, when it holds JSON.
fn unnest(value: &mut Value, key: &str) {
    let Some(slot) = value.get_mut(key) else { return };
    if let Some(parsed) = slot.as_str().and_then(|text| serde_json::from_str::<Value>(text).ok()) {
        *slot = parsed;
    }
}

/// Returns a run status's name, as `--status` takes it and JSON shows it.
pub(super) fn status_name(status: RunStatus) -> &'static str {
    run_status_name(status)
}

fn parse_status(text: &str) -> Result<RunStatus, CliError> {
    STATUSES.iter().find(|(name, _)| *name == text).map(|(_, s)| *s).ok_or_else(|| {
        let known: Vec<&str> = STATUSES.iter().map(|(name, _)| *name).collect();
        CliError::usage(anyhow!("unknown status `{text}`; use one of {}", known.join(", ")))
    })
}

/// Opens the journal and the run `id`, or explains why not.
fn open_run(home: &Home, id: u64) -> Result<(Journal, RunRecord), CliError> {
    let journal = home.reading_journal()?.ok_or_else(|| no_journal(home))?;
    let run =
        journal.run(RunId(id)).map_err(journal_error)?.map(|r| home.seen(r)).ok_or_else(|| {
            CliError::user(anyhow!("run {id} not found in {}", home.journal_path().display()))
                .hint("`clio runs list` shows the runs there are")
        })?;
    Ok((journal, run))
}

/// As [`open_run`], for a page for people: the run's input is decoded only as far as the
/// page shows it. A workflow run's input is the whole workflow (as long as the run), of
/// which the page shows the task: its input reads `{"workflow": {}, "task": …}`. Any other
/// input, and the answer and launch, are decoded whole.
fn open_run_for_people(home: &Home, id: u64) -> Result<(Journal, RunRecord), CliError> {
    let journal = home.reading_journal()?.ok_or_else(|| no_journal(home))?;
    let raw = journal.run_raw(RunId(id)).map_err(journal_error)?.ok_or_else(|| {
        CliError::user(anyhow!("run {id} not found in {}", home.journal_path().display()))
            .hint("`clio runs list` shows the runs there are")
    })?;
    #[derive(serde::Deserialize)]
    struct WorkflowInput {
        #[serde(rename = "workflow")]
        _workflow: serde::de::IgnoredAny,
        task: Option<Value>,
    }
    let decode = |text: &str| serde_json::from_str::<Value>(text).map_err(CliError::internal);
    let input = match serde_json::from_str::<WorkflowInput>(raw.input.get()) {
        Ok(WorkflowInput { task: Some(task @ Value::String(_)), .. }) => {
            serde_json::json!({ "workflow": {}, "task": task })
        }
        _ => decode(raw.input.get())?,
    };
    let run = RunRecord {
        id: raw.id,
        flow: raw.flow,
        input,
        input_digest: raw.input_digest,
        fingerprint: raw.fingerprint,
        owner: raw.owner,
        status: raw.status,
        started_at_ms: raw.started_at_ms,
        updated_at_ms: raw.updated_at_ms,
        finished_at_ms: raw.finished_at_ms,
        answer: raw.answer.filter(|a| a.get() != "null").map(|a| decode(a.get())).transpose()?,
        error: raw.error,
        launch: raw.launch.filter(|l| l.get() != "null").map(|l| decode(l.get())).transpose()?,
    };
    Ok((journal, home.seen(run)))
}

fn no_journal(home: &Home) -> CliError {
    CliError::user(anyhow!(
        "no journal at {}: no run has been recorded there",
        home.journal_path().display()
    ))
    .hint("pass --home DIR (or set CLIO_HOME) if your runs live elsewhere")
}

/// The runs `clio runs list` shows on a page when `--limit` is not given.
const PAGE: usize = 50;

/// Lists runs, newest first: a table a person can scan (when each started, how long it
/// took, what it ran and on what, and its error, question or answer), or JSON. Filters by
/// status, agent, flow and start time; pages of `--limit` runs.
pub(super) fn list(home: &Home, args: &RunsListArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let statuses = args.status.iter().map(|s| parse_status(s)).collect::<Result<Vec<_>, _>>()?;
    let since = args.since.as_deref().map(parse_since_ms).transpose()?;
    let journal = home.reading_journal()?;
    let mut runs: Vec<RunRecord> = Vec::new();
    let mut total = 0;
    if let Some(journal) = &journal {
        // A run recorded running is seen as interrupted (see `Home::seen`): asking for
        // interrupted runs asks for those too.
        let mut asked = statuses.clone();
        if asked.contains(&RunStatus::Interrupted) {
            asked.push(RunStatus::Running);
        }
        let filter = RunFilter { statuses: asked, started_after_ms: since, ..RunFilter::default() };
        let found = journal.runs(&filter).map_err(journal_error)?.into_iter().map(|r| home.seen(r));
        runs = found.filter(|r| statuses.is_empty() || statuses.contains(&r.status)).collect();
        if let Some(flow) = &args.flow {
            runs.retain(|r| flow_id(&r.flow) == *flow);
        }
        if let Some(agent) = &args.agent {
            runs.retain(|r| agent_name(home, r).is_some_and(|name| agent_matches(&name, agent)));
        }
        let filtered = statuses.is_empty() && since.is_none();
        total = if filtered && args.flow.is_none() && args.agent.is_none() {
            runs.len()
        } else {
            journal.runs(&RunFilter::default()).map_err(journal_error)?.len()
        };
    }
    let matching = runs.len();
    let limit = args.limit.or((!args.json).then_some(PAGE));
    let page = usize::try_from(args.page.unwrap_or(1)).unwrap_or(usize::MAX).max(1);
    let skip = limit.map_or(0, |l| l.saturating_mul(page - 1));
    let shown: Vec<RunRecord> =
        runs.into_iter().skip(skip).take(limit.unwrap_or(usize::MAX)).collect();
    if args.json {
        let list = shown.iter().map(run_json).collect::<Result<Vec<_>, _>>()?;
        return write_json(out, &Value::Array(list));
    }
    let what = filter_words(args);
    if shown.is_empty() {
        let place = home.journal_path().display().to_string();
        match (what.is_empty(), matching, total) {
            (_, _, 0) => writeln!(out, "no runs in {place}")?,
            (true, _, _) => writeln!(
                out,
                "no runs on page {page}: {total} run(s) in {place}, {} to a page",
                limit.unwrap_or(PAGE)
            )?,
            (false, 0, _) => writeln!(
                out,
                "no runs match {what} ({total} run(s) in {place}; `clio runs list` lists them all)"
            )?,
            (false, _, _) => writeln!(
                out,
                "no runs on page {page}: {matching} run(s) match {what}, {} to a page",
                limit.unwrap_or(PAGE)
            )?,
        }
        return Ok(());
    }
    let rows: Vec<ListRow> =
        shown.iter().map(|run| ListRow::of(home, journal.as_ref(), run)).collect();
    write!(out, "{}", list_table(&rows, now_ms()))?;
    if matching > skip + shown.len() || skip > 0 {
        let first = skip + 1;
        let last = skip + shown.len();
        let mut line = format!("runs {first}–{last} of {matching}");
        if matching > last {
            let mut next = vec!["clio runs list".to_owned()];
            next.extend(filter_flags(args));
            if let Some(limit) = args.limit {
                next.push(format!("--limit {limit}"));
            }
            next.push(format!("--page {}", page + 1));
            line.push_str(&format!("; next page: `{}`", next.join(" ")));
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The filters given, as a person reads them: `--status failed, --since 2d`.
fn filter_words(args: &RunsListArgs) -> String {
    filter_flags(args).join(", ")
}

/// The filter flags given, as they are written on a command line.
fn filter_flags(args: &RunsListArgs) -> Vec<String> {
    let mut flags: Vec<String> = args.status.iter().map(|s| format!("--status {s}")).collect();
    if let Some(agent) = &args.agent {
        flags.push(format!("--agent {agent}"));
    }
    if let Some(flow) = &args.flow {
        flags.push(format!("--flow {flow}"));
    }
    if let Some(since) = &args.since {
        flags.push(format!("--since {since}"));
    }
    flags
}

/// Returns a run's flow id: the selection's `id`, or the text as it is.
pub(crate) fn flow_id(flow: &str) -> String {
    serde_json::from_str::<Value>(flow)
        .ok()
        .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| flow.to_owned())
}

/// Returns the name of the agent a run was launched with: its definition file's stem.
fn agent_name(home: &Home, run: &RunRecord) -> Option<String> {
    let launch = Launch::find(home, run).ok().flatten()?;
    let agent = launch.agent?;
    Some(
        agent
            .file_stem()
            .map_or_else(|| agent.display().to_string(), |s| s.to_string_lossy().into_owned()),
    )
}

/// Whether `--agent given` names the agent `name`: its file's stem, or its file's name.
fn agent_matches(name: &str, given: &str) -> bool {
    let given = given.rsplit('/').next().unwrap_or(given);
    let given =
        given.strip_suffix(".toml").or_else(|| given.strip_suffix(".json")).unwrap_or(given);
    name == given
}

/// What `clio runs list` shows of one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ListRow {
    pub(crate) id: u64,
    pub(crate) status: RunStatus,
    pub(crate) started_at_ms: u64,
    /// Milliseconds from its start to its end, or to its last change while it goes on.
    pub(crate) took_ms: u64,
    /// The agent (`agent NAME`) or the flow it runs, with the flow's options.
    pub(crate) what: String,
    /// What it works on: a workflow's task, an agent's or flow's input.
    pub(crate) task: String,
    /// Its error's first line (failed), its open question (waiting), its answer's first
    /// line (succeeded), or what to do (interrupted).
    pub(crate) note: String,
}

impl ListRow {
    fn of(home: &Home, journal: Option<&Journal>, run: &RunRecord) -> ListRow {
        let what = match agent_name(home, run) {
            Some(agent) => format!("agent {agent}"),
            None => flow_label(&run.flow),
        };
        let workflow_task = run.input.get("workflow").and(run.input.get("task"));
        let task = match workflow_task.and_then(Value::as_str) {
            Some(task) => task.to_owned(),
            None => answer_text(Some(&run.input)),
        };
        let first_line = |text: &str| {
            text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_owned()
        };
        let note = match run.status {
            RunStatus::Failed => run
                .error
                .as_deref()
                .map(|e| first_line(&crate::progress::error_message(e)))
                .unwrap_or_default(),
            RunStatus::AwaitingInput => {
                let entries = journal.and_then(|j| j.entries(run.id).ok()).unwrap_or_default();
                match open_questions(&entries).first() {
                    Some(question) => format!("? {}", first_line(&question.text)),
                    None => format!("answered: `clio runs resume {}`", run.id.0),
                }
            }
            RunStatus::Succeeded => first_line(&answer_text(run.answer.as_ref())),
            RunStatus::Interrupted => format!("`clio runs resume {}` continues it", run.id.0),
            RunStatus::Running | RunStatus::Cancelled => String::new(),
        };
        let end = run_end_ms(run);
        ListRow {
            id: run.id.0,
            status: run.status,
            started_at_ms: run.started_at_ms,
            took_ms: end.saturating_sub(run.started_at_ms),
            what,
            task,
            note,
        }
    }
}

/// Draws `rows` as `clio runs list`'s table, with start times relative to `now_ms`. Cells
/// are cut by display width (a wide character counts two columns), and the table lines
/// them up the same way.
pub(crate) fn list_table(rows: &[ListRow], now_ms: u64) -> String {
    use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets};
    let mut table = Table::new();
    table.load_preset(presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled);
    table.set_header([
        "RUN",
        "STATUS",
        "STARTED",
        "TOOK",
        "WHAT",
        "TASK",
        "ERROR / QUESTION / ANSWER",
    ]);
    for row in rows {
        table.add_row([
            Cell::new(row.id).set_alignment(CellAlignment::Right),
            Cell::new(status_name(row.status)),
            Cell::new(ago(now_ms.saturating_sub(row.started_at_ms)))
                .set_alignment(CellAlignment::Right),
            Cell::new(span(row.took_ms)).set_alignment(CellAlignment::Right),
            Cell::new(cut(&row.what, 24)),
            Cell::new(cut(&row.task, 32)),
            Cell::new(cut(&row.note, 60)),
        ]);
    }
    // The preset pads each cell with a space each side: the first column's left one and
    // every line's trailing blanks go.
    let text = table.to_string();
    let mut lines: Vec<&str> =
        text.lines().map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end()).collect();
    lines.retain(|l| !l.is_empty());
    lines.join("\n") + "\n"
}

/// Returns `text` on one line, cut to `max` columns of display width with an ellipsis.
fn cut(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    console::truncate_str(&flat, max, "…").into_owned()
}

/// Returns how long ago something happened, `ms` milliseconds back, in its largest unit.
pub(crate) fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=4 => "just now".to_owned(),
        5..=59 => format!("{s}s ago"),
        60..=3_599 => format!("{}m ago", s / 60),
        3_600..=86_399 => format!("{}h ago", s / 3_600),
        86_400..=1_209_599 => format!("{}d ago", s / 86_400),
        _ => format!("{}w ago", s / 604_800),
    }
}

/// Returns a duration for people: `850ms`, `12.4s`, `3m 05s`, `2h 10m`.
pub(crate) fn span(ms: u64) -> String {
    let s = ms / 1000;
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3_600, (s % 3_600) / 60),
    }
}

/// Parses `--since`: an age (`30m`, `2d`) back from now, or a date (`YYYY-MM-DD`, UTC).
fn parse_since_ms(text: &str) -> Result<u64, CliError> {
    if text.len() == 10 && text.as_bytes().get(4) == Some(&b'-') {
        return parse_flag_date_ms("--since", text);
    }
    let age = humantime::parse_duration(text).map_err(|error| {
        CliError::usage(anyhow!("--since {text}: {error}"))
            .hint("write an age such as 30m, 12h, 2d or 1w, or a date as YYYY-MM-DD")
    })?;
    let ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
    Ok(now_ms().saturating_sub(ms))
}

/// A question a run waits on, as people see it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OpenQuestion {
    /// Its entry's sequence in the run: the id the runtime takes.
    pub(crate) seq: u64,
    /// Its number among the run's questions, from 1: what people type.
    pub(crate) number: u64,
    /// Its text.
    pub(crate) text: String,
    /// The answer's form: `yes|no`, the options (`a|b|c`), or `"…"` for text.
    pub(crate) form: String,
}

/// Returns the questions of a run not answered yet, each with its number within the run
/// and the form its answer takes.
pub(crate) fn open_questions(entries: &[JournalEntry]) -> Vec<OpenQuestion> {
    let answered: std::collections::HashSet<&str> = entries
        .iter()
        .filter(|e| e.kind == clio_journal::EntryKind::Answer)
        .filter_map(|e| e.identity.as_deref())
        .collect();
    entries
        .iter()
        .filter(|e| e.kind == clio_journal::EntryKind::Question)
        .enumerate()
        .filter(|(_, e)| {
            let id = e.identity.as_deref().unwrap_or("");
            !answered.contains(format!("{id}@answer").as_str())
        })
        .map(|(i, e)| {
            let text = e.payload.get("question").and_then(Value::as_str).unwrap_or("");
            OpenQuestion {
                seq: e.seq,
                number: i as u64 + 1,
                text: text.to_owned(),
                form: answer_form(&e.payload),
            }
        })
        .collect()
}

/// Returns the form an answer to a recorded question takes, as a command line shows it:
/// `yes|no`, its options `a|b|c`, else `"…"`.
pub(crate) fn answer_form(question: &Value) -> String {
    let schema = question.get("schema").and_then(Value::as_str).unwrap_or("text");
    let options: Vec<&str> = question
        .get("options")
        .and_then(Value::as_array)
        .map(|o| o.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match schema {
        "bool" => "yes|no".to_owned(),
        "options" if !options.is_empty() => options.join("|"),
        _ => "\"…\"".to_owned(),
    }
}

/// Returns the command that answers `question` of run `run`: with no question number when
/// it is the run's only open one.
pub(crate) fn answer_command(run: u64, question: &OpenQuestion, only: bool) -> String {
    if only {
        format!("clio runs answer {run} {}", question.form)
    } else {
        format!("clio runs answer {run} {} {}", question.number, question.form)
    }
}

/// Answers a question of a run (`clio runs answer N [QUESTION] ANSWER`): the question is
/// the run's only open one when none is named, else its number within the run (an entry
/// number, as JSON gives a question's `id`, is taken too when no question has that
/// number). The answer is recorded (`run::answer`); then, unless the run is held by another
/// process (served: that process goes on with it) or is on a shared journal (a worker goes
/// on), or `--record-only` is given, the run continues here as `runs resume` does.
pub(super) fn answer(
    home: &Home,
    args: &mut RunAnswerArgs,
    quiet: bool,
    paint: crate::paint::Paint,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let (journal, run) = open_run(home, args.run)?;
    let entries = journal.entries(run.id).map_err(journal_error)?;
    let open = open_questions(&entries);
    let all = question_numbers_of(&entries);
    drop(journal);
    let (given, text) = match args.words.as_slice() {
        [text] => (None, text.clone()),
        [question, text] => (Some(question.clone()), text.clone()),
        _ => {
            return Err(CliError::usage(anyhow!(
                "give the answer, after the question's number if the run waits on more than one"
            )));
        }
    };
    // A run that waits on nothing (it ended, or its questions are answered) is for
    // `run::answer` to refuse, with its own reasons (ended, launch lost, no such question).
    if open.is_empty() {
        args.question = given.as_deref().and_then(|g| g.parse().ok()).unwrap_or(0);
        args.text = text;
        let mut recorded = Vec::new();
        super::run::answer(home, args, &mut recorded, err)?;
        out.write_all(&recorded)?;
        return Ok(());
    }
    let question = pick_question(args.run, &open, &all, given.as_deref())?;
    args.question = question.seq;
    args.text = text;
    let continues_here = !args.record_only
        && home.held().is_none()
        && home.shared_journal().is_none()
        && run.status == RunStatus::AwaitingInput;
    if !continues_here {
        let mut recorded = Vec::new();
        super::run::answer(home, args, &mut recorded, err)?;
        return write_renumbered(&recorded, question, args.json, out);
    }
    let mut recorded = Vec::new();
    super::run::answer(home, args, &mut recorded, err)?;
    // Once every question is answered the run goes on here; otherwise it still waits.
    let left = open.len() - 1;
    if left > 0 {
        write_renumbered(&recorded, question, args.json, out)?;
        if !args.json {
            writeln!(
                out,
                "run {} still waits on {left} question(s): `clio runs show {}` lists them",
                args.run, args.run
            )?;
        }
        return Ok(());
    }
    let resume = crate::args::RunResumeArgs {
        run: args.run,
        json: args.json,
        accept_changed_agent: args.accept_changed_agent,
    };
    if args.json {
        let answered: Value = serde_json::from_slice(&recorded).map_err(CliError::internal)?;
        let mut outcome = Vec::new();
        let result = super::run::resume(home, &resume, quiet, paint, &mut outcome, err);
        let mut value: Value = serde_json::from_slice(&outcome).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            let mut answered = answered;
            answered["number"] = Value::from(question.number);
            map.insert("answered".into(), answered);
            write_json(out, &value)?;
        } else {
            out.write_all(&outcome)?;
        }
        return result;
    }
    let first = String::from_utf8_lossy(&recorded);
    let first = first.lines().next().unwrap_or("");
    writeln!(out, "{}", renumber(first, question))?;
    super::run::resume(home, &resume, quiet, paint, out, err)
}

/// The run-local number of each question of a run's entries, by its entry's sequence.
fn question_numbers_of(entries: &[JournalEntry]) -> BTreeMap<u64, u64> {
    entries
        .iter()
        .filter(|e| e.kind == clio_journal::EntryKind::Question)
        .enumerate()
        .map(|(i, e)| (e.seq, i as u64 + 1))
        .collect()
}

/// Returns the open question `given` names (none: the only open one), or an error that
/// lists the run's open questions with the command that answers each.
fn pick_question<'q>(
    run: u64,
    open: &'q [OpenQuestion],
    all: &BTreeMap<u64, u64>,
    given: Option<&str>,
) -> Result<&'q OpenQuestion, CliError> {
    let listed = || {
        open.iter()
            .map(|q| {
                format!(
                    "question {}: {} — `{}`",
                    q.number,
                    q.text,
                    answer_command(run, q, open.len() == 1)
                )
            })
            .collect::<Vec<_>>()
    };
    let Some(given) = given else {
        return match open {
            [] => Err(CliError::user(anyhow!("run {run} waits on no question"))
                .hint(format!("`clio runs show {run}` shows where it is"))),
            [only] => Ok(only),
            _ => {
                let mut error = CliError::usage(anyhow!(
                    "run {run} waits on {} questions: say which one, by its number",
                    open.len()
                ));
                for line in listed() {
                    error = error.hint(line);
                }
                Err(error)
            }
        };
    };
    let number: u64 = given.trim_start_matches('#').parse().map_err(|_| {
        CliError::usage(anyhow!("question `{given}`: not a number"))
            .hint(format!("`clio runs show {run}` numbers the run's questions"))
    })?;
    // The run's own number first; else an entry number (a question's `id` in JSON).
    if let Some(q) = open.iter().find(|q| q.number == number) {
        return Ok(q);
    }
    if !all.values().any(|n| *n == number)
        && let Some(q) = open.iter().find(|q| q.seq == number)
    {
        return Ok(q);
    }
    let why = if all.values().any(|n| *n == number) {
        "is answered already"
    } else {
        "is not one of its questions"
    };
    let mut error = CliError::user(anyhow!("question {number} of run {run} {why}"));
    for line in listed() {
        error = error.hint(line);
    }
    if open.is_empty() {
        error = error.hint(format!(
            "run {run} waits on no question: `clio runs show {run}` shows where it is"
        ));
    }
    Err(error)
}

/// Writes what `run::answer` printed, its question named by the run's own number.
fn write_renumbered(
    recorded: &[u8],
    question: &OpenQuestion,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if json {
        let mut value: Value = serde_json::from_slice(recorded).map_err(CliError::internal)?;
        value["number"] = Value::from(question.number);
        return write_json(out, &value);
    }
    let text = String::from_utf8_lossy(recorded);
    for line in text.lines() {
        writeln!(out, "{}", renumber(line, question))?;
    }
    Ok(())
}

/// Replaces the entry number in `answered question SEQ of run` with the run's own.
fn renumber(line: &str, question: &OpenQuestion) -> String {
    line.replacen(
        &format!("answered question {} of", question.seq),
        &format!("answered question {} of", question.number),
        1,
    )
}

/// The kinds of entries `runs show` reads without `--entries`: every kind that can hold a
/// question, an answer, the workflow's limits or an event a person must see. Calls, steps
/// and views never do (their payloads hold a command and its result, not an event).
const SHOWN_KINDS: &[EntryKind] = &[
    EntryKind::Question,
    EntryKind::Answer,
    EntryKind::Event,
    EntryKind::Proposal,
    EntryKind::Decision,
    EntryKind::PermissionReceipt,
];

/// Shows one run: its record, tasks, team (as `runs tree` draws it), the questions it
/// waits on with the command that answers each, and (with `--entries`) its entries.
/// `--json` gives `{"run": ..., "tasks": [...], "team": [...], "entries": [...]}`.
pub(super) fn show(home: &Home, args: &RunShowArgs, out: &mut dyn Write) -> Result<(), CliError> {
    buffered(out, |out| show_to(home, args, out))
}

/// Runs `write` on a buffer, then writes what it wrote to `out` at once (also when it
/// failed part-way): a long run's page is thousands of lines, and `out` may write each
/// piece of each line with a system call of its own.
fn buffered(
    out: &mut dyn Write,
    write: impl FnOnce(&mut dyn Write) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let mut buf = Vec::new();
    let done = write(&mut buf);
    out.write_all(&buf)?;
    done
}

/// `runs show --json` without its entries: what `GET /api/v1/runs/{id}` gives (the entries
/// are at `events`), read without reading them.
pub(super) fn show_json_without_entries(home: &Home, id: u64) -> Result<Value, CliError> {
    let (journal, run) = open_run(home, id)?;
    json_of_run(home, &journal, &run, None)
}

/// `{"run": ..., "tasks": [...], "team": [...], "entries": [...], "agent": ...}`, the
/// entries when given.
fn json_of_run(
    home: &Home,
    journal: &Journal,
    run: &RunRecord,
    entries: Option<Vec<JournalEntry>>,
) -> Result<Value, CliError> {
    let tasks: Vec<TaskRecord> = journal
        .tasks(run.id)
        .map_err(journal_error)?
        .into_iter()
        .map(|t| home.task_seen(t))
        .collect();
    let team = clio_flow::run_team(journal, run.id).map_err(journal_error)?;
    let team: Vec<Value> = team.iter().map(SessionSummary::to_json).collect();
    let mut value = serde_json::json!({
        "run": run_json(run)?, "tasks": tasks_json(&tasks)?, "team": team
    });
    if let Some(entries) = entries {
        value["entries"] = serde_json::to_value(entries).map_err(CliError::internal)?;
    }
    // Only the launch's agent is shown (see `show_to`).
    let launch = Launch::find(home, run).ok().flatten();
    if let Some(agent) = launch.as_ref().and_then(|l| l.agent.as_ref()) {
        let checksum = launch.as_ref().and_then(|l| l.agent_checksum.clone());
        value["agent"] = serde_json::json!({ "file": agent, "checksum": checksum });
    }
    Ok(value)
}

fn show_to(home: &Home, args: &RunShowArgs, out: &mut dyn Write) -> Result<(), CliError> {
    if args.json {
        let (journal, run) = open_run(home, args.run)?;
        let entries = journal.entries(run.id).map_err(journal_error)?;
        return write_json(out, &json_of_run(home, &journal, &run, Some(entries))?);
    }
    let (journal, run) = open_run_for_people(home, args.run)?;
    // The page for people reads what it prints: the tasks without their results, and of
    // the entries only those that can be a question, an answer or an event (a long run's
    // calls and views, the bulk of its bytes, are counted, not read). `--entries` gives
    // every entry, so it reads them all.
    let whole = args.entries;
    let tasks: Vec<TaskRecord> = journal
        .tasks_without_results(run.id)
        .map_err(journal_error)?
        .into_iter()
        .map(|t| home.task_seen(t))
        .collect();
    let team = clio_flow::run_team(&journal, run.id).map_err(journal_error)?;
    let entries =
        if whole { journal.entries(run.id) } else { journal.entries_of_kinds(run.id, SHOWN_KINDS) }
            .map_err(journal_error)?;
    let entry_count = if whole {
        entries.len() as u64
    } else {
        journal.entry_count(run.id).map_err(journal_error)?
    };
    // Only the launch's agent is shown: a launch record that cannot be read is reported
    // by the commands that need it (resume, answer, replay), not here.
    let launch = Launch::find(home, &run).ok().flatten();
    writeln!(out, "run {}  {}  {}", run.id.0, flow_label(&run.flow), status_name(run.status))?;
    // A workflow run's input is the whole workflow: its task is what a person reads, the
    // steps are in the tree below.
    let workflow_task = run.input.get("workflow").and(run.input.get("task"));
    match workflow_task.and_then(Value::as_str) {
        Some(task) => writeln!(out, "  task:   {}", shorten(task, 100))?,
        None => writeln!(out, "  input:  {}", shorten(&answer_text(Some(&run.input)), 100))?,
    }
    writeln!(out, "  took:   {}", took(&run))?;
    if let Some(limits) = super::workflow::limits_line(&entries) {
        writeln!(out, "  limits: {limits}")?;
    }
    let mut models: Vec<&str> = tasks.iter().filter_map(|t| t.model.as_deref()).collect();
    models.sort_unstable();
    models.dedup();
    if !models.is_empty() {
        writeln!(out, "  model:  {}", models.join(", "))?;
    }
    if let Some(launch) = &launch {
        write_agent(launch, out)?;
    }
    if let Some(answer) = &run.answer {
        writeln!(out, "  answer:")?;
        for line in answer_text(Some(answer)).lines() {
            writeln!(out, "    {line}")?;
        }
    }
    if let Some(error) = &run.error {
        writeln!(out, "  error:  {}", crate::progress::error_message(error))?;
        // A flow written in Python that raised: its traceback, file and line included.
        if let Some(traceback) = python_traceback(error) {
            writeln!(out, "  python traceback:")?;
            for line in traceback.lines() {
                writeln!(out, "    {line}")?;
            }
        }
    }
    let tokens: u64 = tasks.iter().map(|t| t.input_tokens + t.output_tokens).sum();
    if tokens > 0 {
        writeln!(out, "  tokens: {tokens}")?;
    }
    let numbers = TaskNumbers::of(&tasks);
    writeln!(out, "tasks ({}):", tasks.len())?;
    write_tree(&tasks, out)?;
    write_team(&team, out)?;
    let waiting = open_questions(&entries);
    if !waiting.is_empty() {
        writeln!(out, "waiting for an answer:")?;
        for question in &waiting {
            writeln!(out, "  question {}: {}", question.number, question.text)?;
            let command = answer_command(run.id.0, question, waiting.len() == 1);
            writeln!(out, "    answer with: {command}")?;
        }
    }
    if args.entries {
        writeln!(out, "entries ({}):", entries.len())?;
        for entry in &entries {
            write_entry(entry, &numbers, out)?;
        }
    } else {
        // What a person must see even without the raw journal: warnings and changes the
        // runtime or the CLI recorded (a mismatch, an accepted agent change, the entry cap,
        // the sandbox off).
        let notable: Vec<&JournalEntry> =
            entries.iter().filter(|e| event_text(&e.payload).is_some()).collect();
        if !notable.is_empty() {
            writeln!(out, "events:")?;
            for entry in notable {
                write_entry(entry, &numbers, out)?;
            }
        }
        writeln!(
            out,
            "entries: {entry_count} in the journal (`clio runs show {} --entries` lists them)",
            run.id.0
        )?;
    }
    match run.status {
        RunStatus::AwaitingInput if waiting.is_empty() => writeln!(
            out,
            "hint: its questions are answered: continue it with `clio runs resume {}`",
            run.id.0
        )?,
        RunStatus::AwaitingInput => writeln!(
            out,
            "hint: the answer continues the run here (--record-only only records it)"
        )?,
        RunStatus::Interrupted => {
            writeln!(out, "hint: continue it with `clio runs resume {}`", run.id.0)?
        }
        _ => {}
    }
    Ok(())
}

/// Draws a run's task tree, then its team: the subagent sessions its agents started with
/// the orchestration plugin's team tools. `--json` gives `{"tasks": [...], "team": [...]}`.
pub(super) fn tree(home: &Home, args: &RunArgs, out: &mut dyn Write) -> Result<(), CliError> {
    buffered(out, |out| tree_to(home, args, out))
}

fn tree_to(home: &Home, args: &RunArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let (journal, run) = open_run(home, args.run)?;
    let tasks: Vec<TaskRecord> = journal
        .tasks(run.id)
        .map_err(journal_error)?
        .into_iter()
        .map(|t| home.task_seen(t))
        .collect();
    let team = clio_flow::run_team(&journal, run.id).map_err(journal_error)?;
    if args.json {
        let tasks = tasks_json(&tasks)?;
        let team: Vec<Value> = team.iter().map(SessionSummary::to_json).collect();
        return write_json(out, &serde_json::json!({ "tasks": tasks, "team": team }));
    }
    writeln!(out, "run {}  {}  {}", run.id.0, flow_label(&run.flow), status_name(run.status))?;
    write_tree(&tasks, out)?;
    write_team(&team, out)
}

/// Lists a run's events in order: one line each with its time (UTC, and since the run
/// started), its kind, its task and a summary in words; `--json` gives the raw entries.
/// With the hidden `--from SEQ` (what `--follow` reads, `crate::follow_events`), only the
/// entries from SEQ on, after a header line `{"next": SEQ, "ended": BOOL}`, the entries
/// as JSON lines with `--json`.
pub(super) fn events(
    home: &Home,
    args: &RunEventsArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    buffered(out, |out| events_to(home, args, out))
}

fn events_to(home: &Home, args: &RunEventsArgs, out: &mut dyn Write) -> Result<(), CliError> {
    // Of the run, the events read only its status and start.
    let (journal, run) = open_run_for_people(home, args.run)?;
    let from = args.from.unwrap_or(0);
    // A page (`--after`, `--limit`) reads only its entries, however long the run.
    let paged = args.after.is_some() || args.limit.is_some();
    if !paged && !args.json && args.from.is_none() {
        return event_lines(&journal, &run, out);
    }
    let entries = if paged {
        let start = args.after.map_or(0, |after| after.saturating_add(1));
        journal.entries_page(run.id, start, args.limit.unwrap_or(usize::MAX))
    } else {
        journal.entries_from(run.id, from)
    }
    .map_err(journal_error)?;
    if args.from.is_some() {
        let next = entries.last().map_or(from, |e| e.seq + 1);
        let ended =
            matches!(run.status, RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled);
        writeln!(out, "{}", serde_json::json!({ "next": next, "ended": ended }))?;
        if args.json {
            for entry in &entries {
                writeln!(out, "{}", serde_json::to_string(entry).map_err(CliError::internal)?)?;
            }
            return Ok(());
        }
    } else if args.json {
        let value = serde_json::to_value(&entries).map_err(CliError::internal)?;
        return write_json(out, &value);
    }
    let numbers = TaskNumbers::of_ids(&journal.task_ids(run.id).map_err(journal_error)?);
    // A question's number counts the run's questions before it: read only when the page
    // shows a question or an answer.
    let asks = entries.iter().any(|e| matches!(e.kind, EntryKind::Question | EntryKind::Answer));
    let questions = if asks { question_numbers(&journal, run.id)? } else { BTreeMap::new() };
    for entry in &entries {
        writeln!(out, "{}", event_line(entry, run.started_at_ms, &numbers, &questions))?;
    }
    if let (Some(limit), Some(last)) = (args.limit, entries.last())
        && entries.len() == limit
    {
        writeln!(
            out,
            "(more: clio runs events {} --after {} --limit {limit})",
            run.id.0, last.seq
        )?;
    }
    Ok(())
}

/// Writes every event of `run` as a line for people, decoding each payload only as far as
/// its line needs: a view (a long workflow's views hold every step, and are the bulk of
/// its journal) is measured, not decoded.
fn event_lines(journal: &Journal, run: &RunRecord, out: &mut dyn Write) -> Result<(), CliError> {
    let numbers = TaskNumbers::of_ids(&journal.task_ids(run.id).map_err(journal_error)?);
    let questions = question_numbers(journal, run.id)?;
    let mut text = String::new();
    let mut undecodable = None;
    // One entry at a time, its payload's text borrowed from the read and scanned once: to
    // measure a view, or to decode anything else.
    journal
        .visit_entry_texts(run.id, |entry| {
            let view = (entry.kind == EntryKind::View).then(|| view_summary(entry.payload));
            let line = match view.flatten() {
                Some(summary) => {
                    line_of(&with_payload(entry, Value::Null), run.started_at_ms, &numbers, summary)
                }
                None => match serde_json::from_str(entry.payload) {
                    Ok(payload) => {
                        let entry = with_payload(entry, payload);
                        event_line(&entry, run.started_at_ms, &numbers, &questions)
                    }
                    Err(err) => {
                        undecodable.get_or_insert(anyhow::anyhow!(
                            "entry {} of run {} does not decode: {err}",
                            entry.seq,
                            entry.run
                        ));
                        return;
                    }
                },
            };
            text.push_str(&line);
            text.push('\n');
        })
        .map_err(journal_error)?;
    if let Some(problem) = undecodable {
        return Err(CliError::internal(problem));
    }
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// Returns `entry` with its payload `payload`.
fn with_payload(entry: &JournalEntry<&str>, payload: Value) -> JournalEntry {
    let JournalEntry { run, seq, kind, ref identity, task, at_ms, payload: _ } = *entry;
    JournalEntry { run, seq, kind, identity: identity.clone(), task, at_ms, payload }
}

/// The summary of a published view, as [`event_summary`] words it (`published a view:
/// workflow (120 items)`), read without building the view: each top-level part is skipped
/// over, an array counted. `None` when the payload is not a view command (the caller then
/// decodes it).
fn view_summary(payload: &str) -> Option<String> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    /// A view's part: an array's length, or `None` for any other value.
    struct Part(Option<usize>);
    impl<'de> serde::Deserialize<'de> for Part {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Part, D::Error> {
            struct Visit;
            impl<'de> Visitor<'de> for Visit {
                type Value = Part;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a value")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Part, A::Error> {
                    let mut n = 0;
                    while seq.next_element::<IgnoredAny>()?.is_some() {
                        n += 1;
                    }
                    Ok(Part(Some(n)))
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part, A::Error> {
                    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                    Ok(Part(None))
                }
                fn visit_str<E>(self, _: &str) -> Result<Part, E> {
                    Ok(Part(None))
                }
                fn visit_bool<E>(self, _: bool) -> Result<Part, E> {
                    Ok(Part(None))
                }
                fn visit_i64<E>(self, _: i64) -> Result<Part, E> {
                    Ok(Part(None))
                }
                fn visit_u64<E>(self, _: u64) -> Result<Part, E> {
                    Ok(Part(None))
                }
                fn visit_f64<E>(self, _: f64) -> Result<Part, E> {
                    Ok(Part(None))
                }
                fn visit_unit<E>(self) -> Result<Part, E> {
                    Ok(Part(None))
                }
            }
            d.deserialize_any(Visit)
        }
    }
    /// A view's parts in their order.
    struct Parts(Vec<(String, Option<usize>)>);
    impl<'de> serde::Deserialize<'de> for Parts {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Parts, D::Error> {
            struct Visit;
            impl<'de> Visitor<'de> for Visit {
                type Value = Parts;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a view object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parts, A::Error> {
                    let mut parts = Vec::new();
                    while let Some((key, Part(len))) = map.next_entry::<String, Part>()? {
                        parts.push((key, len));
                    }
                    Ok(Parts(parts))
                }
            }
            d.deserialize_map(Visit)
        }
    }
    #[derive(serde::Deserialize)]
    struct Command {
        view: Option<Parts>,
    }
    #[derive(serde::Deserialize)]
    struct Payload {
        command: Option<Command>,
    }
    let parts = serde_json::from_str::<Payload>(payload).ok()?.command?.view?.0;
    let parts: Vec<String> = parts
        .into_iter()
        .map(|(key, len)| match len {
            Some(n) => format!("{key} ({n} items)"),
            None => key,
        })
        .collect();
    Some(format!("published a view: {}", parts.join(", ")))
}

/// The run-local number (1, 2, …) of each question of a run, by its entry's sequence.
pub(crate) fn question_numbers(
    journal: &Journal,
    run: RunId,
) -> Result<BTreeMap<u64, u64>, CliError> {
    let entries = journal.entries_of_kinds(run, &[EntryKind::Question]).map_err(journal_error)?;
    Ok(question_numbers_of(&entries))
}

/// One event for people: its sequence, its time (UTC) and the time since the run started,
/// its kind, its task's number and a summary in words, on one line.
pub(crate) fn event_line(
    entry: &JournalEntry,
    started_at_ms: u64,
    numbers: &TaskNumbers,
    questions: &BTreeMap<u64, u64>,
) -> String {
    line_of(entry, started_at_ms, numbers, event_summary(entry, questions))
}

/// One event's line (see [`event_line`]) with its summary in words given.
fn line_of(
    entry: &JournalEntry,
    started_at_ms: u64,
    numbers: &TaskNumbers,
    summary: String,
) -> String {
    let since = entry.at_ms.saturating_sub(started_at_ms);
    let task = entry.task.map(|t| format!("#{}", numbers.number(t.0))).unwrap_or_default();
    let kind = serde_json::to_value(entry.kind).ok();
    let kind = kind.as_ref().and_then(Value::as_str).unwrap_or("entry");
    let summary = cut(&summary, 110);
    format!(
        "{:>5}  {} {:>9}  {kind:<8} {task:<5} {summary}",
        entry.seq,
        clock(entry.at_ms),
        format!("+{}", span(since)),
    )
    .trim_end()
    .to_owned()
}

/// Returns the time of day (UTC) of `ms` since the Unix epoch: `HH:MM:SS.mmm`.
fn clock(ms: u64) -> String {
    let day_ms = ms % 86_400_000;
    let (h, m, s, milli) =
        (day_ms / 3_600_000, (day_ms / 60_000) % 60, (day_ms / 1000) % 60, day_ms % 1000);
    format!("{h:02}:{m:02}:{s:02}.{milli:03}")
}

/// Returns what an entry records, in words: the call and its target, the step, the
/// question and its answer, the event; raw JSON (flattened) only for what has no words.
fn event_summary(entry: &JournalEntry, questions: &BTreeMap<u64, u64>) -> String {
    use clio_journal::EntryKind;
    let p = &entry.payload;
    if let Some(text) = event_text(p) {
        return text;
    }
    // A flow's command is held under `command` (an object), the runtime's own calls
    // name theirs there (`"command": "call"`) beside their fields.
    let command = p.get("command").filter(|c| c.is_object()).unwrap_or(p);
    let s = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let outcome = || -> String {
        if let Some(error) = p.get("error").filter(|e| !e.is_null()) {
            let text = match error {
                Value::String(t) => crate::progress::error_message(t),
                other => clio_flow::FlowError::from_json(other).to_string(),
            };
            return format!(" — failed: {}", text.lines().next().unwrap_or(""));
        }
        match p.get("result") {
            Some(Value::Null) | None => String::new(),
            Some(result) => format!(" → {}", compact(result, 60)),
        }
    };
    match entry.kind {
        EntryKind::Call => {
            if p.get("accepted").is_some() {
                return "the call's start is recorded".to_owned();
            }
            let target = s(command, "target").unwrap_or_default();
            let verb = s(command, "command").unwrap_or_else(|| "call".to_owned());
            let input =
                command.get("input").map(|i| format!(" {}", compact(i, 50))).unwrap_or_default();
            let key = s(command, "key").and_then(|k| k.strip_prefix("wf:").map(str::to_owned));
            let step = key.map(|k| format!(" (step {k})")).unwrap_or_default();
            format!("{verb} {target}{step}{input}{}", outcome())
        }
        EntryKind::Step => {
            let name = s(command, "name").or_else(|| s(command, "step")).unwrap_or_default();
            format!("step {name}{}", outcome()).replace("step  ", "step ")
        }
        EntryKind::Question => {
            let number = questions.get(&entry.seq).copied().unwrap_or(entry.seq);
            let text = s(p, "question").unwrap_or_default();
            let mut line = format!("question {number}: {text}");
            let options: Vec<&str> = p
                .get("options")
                .and_then(Value::as_array)
                .map(|o| o.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if !options.is_empty() {
                line.push_str(&format!(" [{}]", options.join("/")));
            }
            line
        }
        EntryKind::Answer => {
            let question = p.get("question").and_then(Value::as_u64);
            let number = question.map(|q| questions.get(&q).copied().unwrap_or(q));
            let text = s(p, "text").unwrap_or_else(|| compact(p.get("value").unwrap_or(p), 60));
            match number {
                Some(n) => format!("answer to question {n}: {text}"),
                None => format!("answer: {text}"),
            }
        }
        EntryKind::Event => {
            let event = command.get("event").unwrap_or(command);
            if let Some(name) = event.as_str() {
                return format!("{name}{}", outcome_keys(p));
            }
            if event.get("workflow_events").is_some() {
                return workflow_events(p.get("result"));
            }
            let name = s(event, "event").unwrap_or_else(|| "event".to_owned());
            match s(event, "message") {
                Some(message) => format!("{name}: {message}"),
                None => format!("{name} {}", compact(event, 80)),
            }
        }
        EntryKind::View => {
            let view = command.get("view").unwrap_or(command);
            let parts: Vec<String> = view
                .as_object()
                .map(|map| {
                    map.iter()
                        .map(|(key, value)| match value {
                            Value::Array(items) => format!("{key} ({} items)", items.len()),
                            _ => key.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!("published a view: {}", parts.join(", "))
        }
        _ => {
            let verb = s(command, "command").unwrap_or_default();
            let body = compact(p, 80);
            if verb.is_empty() { body } else { format!("{verb} {body}") }
        }
    }
}

/// Returns the keys of a recorded event's result, ` (limits, window)`, or nothing.
fn outcome_keys(payload: &Value) -> String {
    let keys: Vec<&str> = payload
        .get("result")
        .and_then(Value::as_object)
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if keys.is_empty() { String::new() } else { format!(" ({})", keys.join(", ")) }
}

/// Returns what a batch of a workflow's step events says: `s3 started; s3 finished; s5
/// failed: …`, the steps in the batch's order.
fn workflow_events(result: Option<&Value>) -> String {
    let events = result.and_then(|r| r.get("events")).and_then(Value::as_array);
    let parts: Vec<String> = events
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("event"))
        .map(|e| {
            let what = e.get("event").and_then(Value::as_str).unwrap_or("?");
            let step = e.get("step").and_then(Value::as_str).unwrap_or("?");
            match e.get("error").and_then(Value::as_str) {
                Some(error) => format!("{step} {what}: {}", crate::progress::error_message(error)),
                None => format!("{step} {what}"),
            }
        })
        .collect();
    format!("workflow: {}", parts.join("; "))
}

/// Returns `value` as one line of JSON (a string as its text), cut to `max` columns.
fn compact(value: &Value, max: usize) -> String {
    let text = match value {
        Value::String(t) => t.clone(),
        other => other.to_string(),
    };
    cut(&text, max)
}

/// Writes a run as JSON lines.
pub(super) fn export(
    home: &Home,
    args: &RunExportArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let (journal, run) = open_run(home, args.run)?;
    if !args.json {
        journal.export(run.id, out).map_err(journal_error)?;
        return Ok(());
    }
    // One document: the export's lines, gathered by record.
    let mut lines = Vec::new();
    journal.export(run.id, &mut lines).map_err(journal_error)?;
    let mut document = serde_json::json!({ "run": null, "tasks": [], "entries": [] });
    for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let mut record: Value = serde_json::from_slice(line).map_err(CliError::internal)?;
        let kind = record.get("record").and_then(Value::as_str).unwrap_or("").to_owned();
        if let Value::Object(map) = &mut record {
            map.remove("record");
        }
        match kind.as_str() {
            "run" => document["run"] = record,
            "task" => push(&mut document["tasks"], record),
            _ => push(&mut document["entries"], record),
        }
    }
    write_json(out, &document)
}

/// Appends `value` to the JSON array `list`.
fn push(list: &mut Value, value: Value) {
    if let Value::Array(items) = list {
        items.push(value);
    }
}

/// Deletes finished runs started before a date.
pub(super) fn prune(
    home: &Home,
    args: &RunsPruneArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let before_ms = match (&args.older_than, &args.before) {
        (Some(age), _) => now_ms().saturating_sub(parse_age_ms(age)?),
        (None, Some(date)) => parse_date_ms(date)?,
        (None, None) => {
            return Err(CliError::usage(anyhow!("give --older-than AGE or --before DATE")));
        }
    };
    let Some(journal) = home.existing_journal()? else {
        if args.json {
            let value = serde_json::json!({"runs": 0, "tasks": 0, "entries": 0});
            return write_json(out, &value);
        }
        writeln!(out, "nothing to prune: no journal at {}", home.journal_path().display())?;
        return Ok(());
    };
    let pruned = journal.prune(before_ms).map_err(journal_error)?;
    if args.json {
        let value = serde_json::json!({
            "runs": pruned.runs, "tasks": pruned.tasks, "entries": pruned.entries
        });
        return write_json(out, &value);
    }
    writeln!(
        out,
        "pruned {} run(s), with {} task(s) and {} journal entries",
        pruned.runs, pruned.tasks, pruned.entries
    )?;
    Ok(())
}

/// Draws a run's tasks as a tree, each numbered within the run.
fn write_tree(tasks: &[TaskRecord], out: &mut dyn Write) -> Result<(), CliError> {
    let children = crate::progress::children_by_parent(tasks);
    let numbers = TaskNumbers::of(tasks);
    fn walk(
        parent: Option<u64>,
        prefix: &str,
        children: &BTreeMap<Option<u64>, Vec<&TaskRecord>>,
        numbers: &TaskNumbers,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let Some(list) = children.get(&parent) else { return Ok(()) };
        for (i, task) in list.iter().enumerate() {
            let last = i + 1 == list.len();
            let branch = if last { "└─ " } else { "├─ " };
            let mut line = format!(
                "{prefix}{branch}#{} {} {}",
                numbers.number(task.id.0),
                kind_name(task.kind),
                task.target
            );
            if let Some(step) = step_name(task) {
                line.push_str(&format!(" ({step})"));
            }
            line.push_str(&format!(" [{}]", task_status_name(task.status)));
            if !task.label.is_empty() && task.label != task.target {
                line.push_str(&format!(" \"{}\"", task.label));
            }
            if let Some(model) = &task.model {
                line.push_str(&format!(" model {model}"));
            }
            if task.input_tokens + task.output_tokens > 0 {
                line.push_str(&format!(" tokens {}+{}", task.input_tokens, task.output_tokens));
            }
            if let Some(error) = &task.error {
                line.push_str(&format!(
                    " error: {}",
                    shorten(&crate::progress::error_message(error), 60)
                ));
            }
            writeln!(out, "{line}")?;
            let deeper = format!("{prefix}{}", if last { "   " } else { "│  " });
            walk(Some(task.id.0), &deeper, children, numbers, out)?;
        }
        Ok(())
    }
    walk(None, "  ", &children, &numbers, out)?;
    Ok(())
}

/// Draws a run's team, if it has one: the leader, then each session under the one that
/// started it, with its status, model, task and the start of its answer, question or
/// error.
fn write_team(team: &[SessionSummary], out: &mut dyn Write) -> Result<(), CliError> {
    let Some(leader) = team.iter().find(|s| s.leader.is_none()) else { return Ok(()) };
    let n = team.len() - 1;
    writeln!(out, "team ({n} subagent{}):", if n == 1 { "" } else { "s" })?;
    writeln!(out, "  {} leader [{}]", leader.session_id, leader.status)?;
    let mut children: BTreeMap<&SessionId, Vec<&SessionSummary>> = BTreeMap::new();
    for member in team {
        if let Some(parent) = &member.parent {
            children.entry(parent).or_default().push(member);
        }
    }
    fn walk(
        parent: &SessionId,
        prefix: &str,
        children: &BTreeMap<&SessionId, Vec<&SessionSummary>>,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let Some(list) = children.get(parent) else { return Ok(()) };
        for (i, member) in list.iter().enumerate() {
            let last = i + 1 == list.len();
            let branch = if last { "└─ " } else { "├─ " };
            let mut line = format!("{prefix}{branch}{} [{}]", member.session_id, member.status);
            if !member.model.is_empty() {
                line.push_str(&format!(" model {}", member.model));
            }
            if !member.task.is_empty() {
                line.push_str(&format!(" task \"{}\"", shorten(&member.task, 40)));
            }
            if let Some(answer) = &member.answer {
                line.push_str(&format!(" answer: {}", shorten(answer, 60)));
            } else if let Some(question) = &member.question {
                line.push_str(&format!(" question: {}", shorten(question, 60)));
            }
            if let Some(error) = &member.error {
                line.push_str(&format!(
                    " error: {}",
                    shorten(&crate::progress::error_message(error), 60)
                ));
            }
            writeln!(out, "{line}")?;
            let deeper = format!("{prefix}{}", if last { "   " } else { "│  " });
            walk(&member.session_id, &deeper, children, out)?;
        }
        Ok(())
    }
    walk(&leader.session_id, "  ", &children, out)?;
    Ok(())
}

/// Writes the agent an agent run was launched with, and the checksum of the spec it is
/// pinned to (`crate::pin`); nothing for a flow run.
fn write_agent(launch: &Launch, out: &mut dyn Write) -> Result<(), CliError> {
    let Some(agent) = &launch.agent else { return Ok(()) };
    match &launch.agent_checksum {
        Some(checksum) => {
            writeln!(out, "  agent:  {} (spec checksum {checksum})", agent.display())?
        }
        None => writeln!(out, "  agent:  {} (not pinned to a spec checksum)", agent.display())?,
    }
    Ok(())
}

fn write_entry(
    entry: &JournalEntry,
    numbers: &TaskNumbers,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let task = entry.task.map(|t| format!(" task #{}", numbers.number(t.0))).unwrap_or_default();
    let text = match event_text(&entry.payload) {
        Some(text) => text,
        None => {
            let payload = serde_json::to_string(&entry.payload).map_err(CliError::internal)?;
            shorten(&payload, 90)
        }
    };
    // The kind as JSON spells it (`call`, `event`, …), one spelling for people and programs.
    let kind = serde_json::to_value(entry.kind).map_err(CliError::internal)?;
    let kind = kind.as_str().unwrap_or_default().to_owned();
    writeln!(out, "  {:>5}  {kind:<18}{task}  {text}", entry.seq)?;
    Ok(())
}

/// Returns the events a person must be able to read in full, in words: the entry-cap
/// warning and the sandbox-off notice (their whole message), a replay mismatch, an
/// accepted agent change. Other entries are shown as their JSON, cut short.
fn event_text(payload: &Value) -> Option<String> {
    if let Some(line) = crate::progress::notice(payload) {
        return Some(line);
    }
    let text = |key: &str| payload.get(key).and_then(Value::as_str).unwrap_or("");
    match payload.get("event").and_then(Value::as_str)? {
        "entries_warning" | "sandbox_off" => Some(format!("warning: {}", text("message"))),
        "replay_mismatch" => {
            let error = clio_flow::FlowError::from_json(payload.get("error")?);
            Some(shorten(&format!("replay mismatch, nothing ran: {error}"), 200))
        }
        "agent_changed_accepted" => {
            let fields: Vec<&str> = payload
                .get("fields")
                .and_then(Value::as_array)
                .map(|list| list.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            Some(format!(
                "agent change accepted ({}): spec checksum {} -> {}",
                fields.join(", "),
                text("recorded"),
                text("now")
            ))
        }
        _ => None,
    }
}

/// Returns an answer as text: a string as is, an object's `answer` if it has one, else JSON.
fn answer_text(answer: Option<&Value>) -> String {
    match answer {
        None => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Object(map)) if map.get("answer").is_some_and(Value::is_string) => {
            map.get("answer").and_then(Value::as_str).unwrap_or_default().to_owned()
        }
        Some(other) => other.to_string(),
    }
}

/// Returns when run `run`'s time stops counting: its end; for a run still running, now (its
/// record changes only with its status, so its last change is its start: a running run
/// showed "took 0 ms"); for one waiting or interrupted, its last change.
fn run_end_ms(run: &RunRecord) -> u64 {
    match run.finished_at_ms {
        Some(end) => end,
        None if run.status == RunStatus::Running => now_ms().max(run.updated_at_ms),
        None => run.updated_at_ms,
    }
}

fn took(run: &RunRecord) -> String {
    let end = run_end_ms(run);
    let ms = end.saturating_sub(run.started_at_ms);
    if ms < 1_000 { format!("{ms}ms") } else { format!("{:.1}s", ms as f64 / 1000.0) }
}

fn shorten(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Parses an age such as `30d`, `12h`, `90m`, `2w` or `1h 30m` (humantime's units: `m`
/// is minutes, `M` months) into milliseconds.
fn parse_age_ms(text: &str) -> Result<u64, CliError> {
    let age = humantime::parse_duration(text).map_err(|error| {
        CliError::usage(anyhow!("--older-than {text}: {error}"))
            .hint("write a number and a unit, as in 30d, 12h, 90m or 2w")
    })?;
    u64::try_from(age.as_millis()).map_err(|_| {
        CliError::usage(anyhow!("--older-than {text}: longer than any run can have lasted"))
    })
}

/// Parses `YYYY-MM-DD` (UTC midnight) into milliseconds since the Unix epoch; a day the
/// month does not have (2026-02-30) is refused.
fn parse_date_ms(text: &str) -> Result<u64, CliError> {
    parse_flag_date_ms("--before", text)
}

/// Parses the date `text` given to `flag` as [`parse_date_ms`] does; errors name the flag.
fn parse_flag_date_ms(flag: &str, text: &str) -> Result<u64, CliError> {
    let bad = |why: String| {
        CliError::usage(anyhow!("{flag} {text}: {why}")).hint("write the date as YYYY-MM-DD")
    };
    let shaped = text.len() == 10
        && text
            .char_indices()
            .all(|(i, c)| if i == 4 || i == 7 { c == '-' } else { c.is_ascii_digit() });
    if !shaped {
        return Err(bad("not a date of the form YYYY-MM-DD".into()));
    }
    let midnight = humantime::parse_rfc3339(&format!("{text}T00:00:00Z"))
        .map_err(|error| bad(format!("no such day in the calendar ({error})")))?;
    let since = midnight
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| bad("before 1970-01-01".into()))?;
    u64::try_from(since.as_millis()).map_err(|_| bad("too far ahead".into()))
}

/// Returns the Python traceback a recorded error carries (a Python flow's exception).
fn python_traceback(error: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(error).ok()?;
    let details = value.get("details")?;
    let traceback = details
        .get("traceback")
        .or_else(|| details.get("python").and_then(|p| p.get("traceback")))?
        .as_str()?;
    (!traceback.trim().is_empty()).then(|| traceback.trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 44: `runs events` words a view read without building it exactly as it words
    /// the view decoded, and leaves what is not a view command to the whole decode.
    #[test]
    fn a_view_is_summed_up_without_decoding_it_as_when_decoded() {
        let payloads = [
            serde_json::json!({ "command": { "command": "publish", "view": {
                "workflow": [{ "id": "s0", "status": "finished" }, { "id": "s1" }],
                "title": "t", "counts": { "done": 1 }, "empty": [], "n": 3, "none": null,
            } } }),
            serde_json::json!({ "command": { "command": "publish", "view": {} } }),
        ];
        for payload in payloads {
            let entry = JournalEntry {
                run: RunId(1),
                seq: 4,
                kind: EntryKind::View,
                identity: None,
                task: None,
                at_ms: 0,
                payload: payload.clone(),
            };
            let decoded = event_summary(&entry, &BTreeMap::new());
            assert_eq!(view_summary(&payload.to_string()).as_deref(), Some(decoded.as_str()));
        }
        assert_eq!(
            view_summary(
                r#"{"command":{"command":"publish","view":{"workflow":[1,2,3],"x":true}}}"#
            )
            .as_deref(),
            Some("published a view: workflow (3 items), x")
        );
        for other in [r#"{"view":{"a":[1]}}"#, r#"{"command":"publish"}"#, r#"[1]"#, "{"] {
            assert_eq!(view_summary(other), None, "{other}");
        }
    }

    /// Issue 44: a running run took until now, not "0 ms" (its record's last change is its
    /// start); a run that waits took until its last change; an ended one, until its end.
    #[test]
    fn a_running_run_took_until_now() {
        let started = now_ms() - 5_000;
        let mut run: RunRecord = serde_json::from_value(serde_json::json!({
            "id": 1, "flow": "demo", "input": null, "input_digest": "d",
            "fingerprint": "f", "owner": "o", "status": "running",
            "started_at_ms": started, "updated_at_ms": started,
        }))
        .unwrap();
        assert!(run_end_ms(&run) >= started + 5_000, "running: until now");
        assert!(took(&run).ends_with('s') && !took(&run).ends_with("ms"), "{}", took(&run));
        run.status = RunStatus::AwaitingInput;
        run.updated_at_ms = started + 1_200;
        assert_eq!(run_end_ms(&run), started + 1_200);
        run.status = RunStatus::Succeeded;
        run.finished_at_ms = Some(started + 2_000);
        assert_eq!(run_end_ms(&run), started + 2_000);
        assert_eq!(took(&run), "2.0s");
    }

    /// Twenty runs, of every status, with agents, workflows and flows, wide and long
    /// text, started from seconds to weeks before `NOW`.
    fn twenty_rows() -> Vec<ListRow> {
        const NOW: u64 = 2_000_000_000_000;
        let statuses = [
            RunStatus::Succeeded,
            RunStatus::Failed,
            RunStatus::AwaitingInput,
            RunStatus::Running,
            RunStatus::Cancelled,
            RunStatus::Interrupted,
        ];
        let ages = [2, 40, 500, 4_000, 90_000, 2_000_000];
        let whats = ["agent reviewer", "workflow", "batch7 {\"depth\":2}", "agent 研究员"];
        let tasks = [
            "Review batch 7",
            "Summarise the fatigue tests of batch 7 and say which specimens failed early",
            "材料の疲労試験を要約する",
            "",
        ];
        (1..=20u64)
            .rev()
            .map(|id| {
                let i = id as usize;
                let status = statuses[i % statuses.len()];
                let note = match status {
                    RunStatus::Failed => "call failed: plugin materials: tool csv_stats: exited with code 1: cannot read data/batch7/fatigue.csv".to_owned(),
                    RunStatus::AwaitingInput => "? Proceed with the 12 specimens that passed?".to_owned(),
                    RunStatus::Succeeded => "Batch 7 passes review.".to_owned(),
                    RunStatus::Interrupted => format!("`clio runs resume {id}` continues it"),
                    _ => String::new(),
                };
                ListRow {
                    id,
                    status,
                    started_at_ms: NOW - ages[i % ages.len()] * 1000 - id,
                    took_ms: [850, 12_400, 185_000, 7_900_000][i % 4],
                    what: whats[i % whats.len()].to_owned(),
                    task: tasks[i % tasks.len()].to_owned(),
                    note,
                }
            })
            .collect()
    }

    #[test]
    fn runs_list_shows_twenty_runs_of_every_status() {
        let table = list_table(&twenty_rows(), 2_000_000_000_000);
        insta::assert_snapshot!(table);
    }

    #[test]
    fn the_list_lines_up_wide_characters_by_display_width() {
        let table = list_table(&twenty_rows(), 2_000_000_000_000);
        let lines: Vec<&str> = table.lines().collect();
        // Every note starts at the same display column as its header, whatever the wide
        // characters before it.
        let at = |line: &str, text: &str| {
            line.find(text).map(|i| console::measure_text_width(&line[..i]))
        };
        let column = at(lines[0], "ERROR / QUESTION").unwrap();
        let mut checked = 0;
        for line in &lines[1..] {
            let note = ["? Proceed", "call failed", "Batch 7 passes", "`clio runs resume"]
                .iter()
                .find_map(|n| at(line, n));
            if let Some(note) = note {
                assert_eq!(note, column, "{line}");
                checked += 1;
            }
        }
        assert_eq!(checked, 14);
    }

    #[test]
    fn ages_and_durations_read_in_their_largest_unit() {
        assert_eq!(ago(0), "just now");
        assert_eq!(ago(45_000), "45s ago");
        assert_eq!(ago(3 * 60_000), "3m ago");
        assert_eq!(ago(5 * 3_600_000), "5h ago");
        assert_eq!(ago(3 * 86_400_000), "3d ago");
        assert_eq!(ago(30 * 86_400_000), "4w ago");
        assert_eq!(span(850), "850ms");
        assert_eq!(span(12_400), "12.4s");
        assert_eq!(span(185_000), "3m 05s");
        assert_eq!(span(7_900_000), "2h 11m");
    }

    #[test]
    fn since_takes_an_age_or_a_date() {
        let now = now_ms();
        let two_days = parse_since_ms("2d").unwrap();
        assert!(now - two_days >= 172_800_000 && now - two_days < 172_900_000);
        assert_eq!(parse_since_ms("2026-11-29").unwrap(), 1_795_910_400_000);
        let bad = parse_since_ms("yesterday").unwrap_err();
        assert!(bad.error.to_string().starts_with("--since yesterday: "), "{}", bad.error);
        let bad = parse_since_ms("2026-02-30").unwrap_err();
        assert!(bad.error.to_string().starts_with("--since 2026-02-30: "), "{}", bad.error);
    }

    #[test]
    fn an_agent_is_named_by_its_file_with_or_without_its_extension() {
        assert!(agent_matches("reviewer", "reviewer"));
        assert!(agent_matches("reviewer", "reviewer.toml"));
        assert!(agent_matches("reviewer", "examples/agents/reviewer.toml"));
        assert!(!agent_matches("reviewer", "review"));
    }

    #[test]
    fn dates_and_ages_parse() {
        assert_eq!(parse_date_ms("1970-01-01").unwrap(), 0);
        assert_eq!(parse_date_ms("2026-11-29").unwrap(), 1_795_910_400_000);
        assert_eq!(parse_date_ms("2000-03-01").unwrap(), 951_868_800_000);
        assert_eq!(parse_date_ms("2024-02-29").unwrap(), 1_709_164_800_000);
        assert!(parse_date_ms("2026-13-01").is_err());
        assert!(parse_date_ms("2026-02-30").is_err(), "a day February does not have");
        assert!(parse_date_ms("2025-02-29").is_err(), "not a leap year");
        assert!(parse_date_ms("2026-1-01").is_err());
        assert!(parse_date_ms("2026-01-01T10:00:00Z").is_err());
        assert!(parse_date_ms("yesterday").is_err());
        assert_eq!(parse_age_ms("2d").unwrap(), 172_800_000);
        assert_eq!(parse_age_ms("12h").unwrap(), 43_200_000);
        assert_eq!(parse_age_ms("90m").unwrap(), 5_400_000);
        assert_eq!(parse_age_ms("1h 30m").unwrap(), 5_400_000);
        assert_eq!(parse_age_ms("3w").unwrap(), 3 * 7 * 86_400_000);
        let error = parse_age_ms("3x").unwrap_err();
        assert!(error.error.to_string().starts_with("--older-than 3x: "), "{}", error.error);
        assert!(parse_age_ms("").is_err());
        assert!(parse_age_ms("30").is_err(), "a number needs its unit");
    }
}
