//! `clio runs list|show|tree|events|export|prune`: what the journal holds about runs, for
//! people (tables and trees) and for programs (`--json`, JSON lines). `runs show` and
//! `runs tree` also show a run's subagent team (`clio_flow::run_team`, drawn by
//! `write_team`).

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::anyhow;
use clio_flow::SessionSummary;
use clio_journal::{
    Journal, JournalEntry, RunFilter, RunId, RunRecord, RunStatus, SessionId, TaskRecord,
};
use serde_json::Value;

use super::write_json;
use crate::args::{RunArgs, RunExportArgs, RunShowArgs, RunsListArgs, RunsPruneArgs};
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
    let end = run.finished_at_ms.unwrap_or(run.updated_at_ms);
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

fn no_journal(home: &Home) -> CliError {
    CliError::user(anyhow!(
        "no journal at {}: no run has been recorded there",
        home.journal_path().display()
    ))
    .hint("pass --home DIR (or set CLIO_HOME) if your runs live elsewhere")
}

/// Lists runs, newest first.
pub(super) fn list(home: &Home, args: &RunsListArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let statuses = args.status.iter().map(|s| parse_status(s)).collect::<Result<Vec<_>, _>>()?;
    let runs = match home.reading_journal()? {
        Some(journal) => {
            // A run recorded running is seen as interrupted (see `Home::seen`): asking for
            // interrupted runs asks for those too.
            let mut asked = statuses.clone();
            if asked.contains(&RunStatus::Interrupted) {
                asked.push(RunStatus::Running);
            }
            let filter = RunFilter { statuses: asked, limit: args.limit, ..RunFilter::default() };
            let runs =
                journal.runs(&filter).map_err(journal_error)?.into_iter().map(|r| home.seen(r));
            runs.filter(|r| statuses.is_empty() || statuses.contains(&r.status)).collect()
        }
        None => Vec::new(),
    };
    if args.json {
        let list = runs.iter().map(run_json).collect::<Result<Vec<_>, _>>()?;
        return write_json(out, &Value::Array(list));
    }
    if runs.is_empty() {
        writeln!(out, "no runs in {}", home.journal_path().display())?;
        return Ok(());
    }
    writeln!(out, "{:>5}  {:<15}  {:<24}  {:>9}  answer", "run", "status", "flow", "took")?;
    for run in &runs {
        writeln!(
            out,
            "{:>5}  {:<15}  {:<24}  {:>9}  {}",
            run.id.0,
            status_name(run.status),
            shorten(&flow_label(&run.flow), 24),
            took(run),
            shorten(&answer_text(run.answer.as_ref()), 48)
        )?;
    }
    Ok(())
}

/// Returns the questions of a run not answered yet: each one's id (for `runs answer`)
/// and text.
fn open_questions(entries: &[JournalEntry]) -> Vec<(u64, String)> {
    let answered: std::collections::HashSet<&str> = entries
        .iter()
        .filter(|e| e.kind == clio_journal::EntryKind::Answer)
        .filter_map(|e| e.identity.as_deref())
        .collect();
    entries
        .iter()
        .filter(|e| e.kind == clio_journal::EntryKind::Question)
        .filter(|e| {
            let id = e.identity.as_deref().unwrap_or("");
            !answered.contains(format!("{id}@answer").as_str())
        })
        .map(|e| {
            let text = e.payload.get("question").and_then(Value::as_str).unwrap_or("");
            (e.seq, text.to_owned())
        })
        .collect()
}

/// Shows one run: its record, tasks, team (as `runs tree` draws it), the questions it
/// waits on with the command that answers each, and (with `--entries`) its entries.
/// `--json` gives `{"run": ..., "tasks": [...], "team": [...], "entries": [...]}`.
pub(super) fn show(home: &Home, args: &RunShowArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let (journal, run) = open_run(home, args.run)?;
    let tasks: Vec<TaskRecord> = journal
        .tasks(run.id)
        .map_err(journal_error)?
        .into_iter()
        .map(|t| home.task_seen(t))
        .collect();
    let team = clio_flow::run_team(&journal, run.id).map_err(journal_error)?;
    let entries = journal.entries(run.id).map_err(journal_error)?;
    // Only the launch's agent is shown: a launch record that cannot be read is reported
    // by the commands that need it (resume, answer, replay), not here.
    let launch = Launch::find(home, &run).ok().flatten();
    if args.json {
        let team: Vec<Value> = team.iter().map(SessionSummary::to_json).collect();
        let mut value = serde_json::json!({
            "run": run_json(&run)?, "tasks": tasks_json(&tasks)?, "team": team, "entries": entries
        });
        if let Some(agent) = launch.as_ref().and_then(|l| l.agent.as_ref()) {
            let checksum = launch.as_ref().and_then(|l| l.agent_checksum.clone());
            value["agent"] = serde_json::json!({ "file": agent, "checksum": checksum });
        }
        return write_json(out, &value);
    }
    writeln!(out, "run {}  {}  {}", run.id.0, flow_label(&run.flow), status_name(run.status))?;
    // A workflow run's input is the whole workflow: its task is what a person reads, the
    // steps are in the tree below.
    let workflow_task = run.input.get("workflow").and(run.input.get("task"));
    match workflow_task.and_then(Value::as_str) {
        Some(task) => writeln!(out, "  task:   {}", shorten(task, 100))?,
        None => writeln!(out, "  input:  {}", shorten(&answer_text(Some(&run.input)), 100))?,
    }
    writeln!(out, "  took:   {}", took(&run))?;
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
        for (id, text) in &waiting {
            writeln!(out, "  question {id}: {text}")?;
            writeln!(out, "    answer with: clio runs answer {} {id} \"…\"", run.id.0)?;
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
            "entries: {} in the journal (`clio runs show {} --entries` lists them)",
            entries.len(),
            run.id.0
        )?;
    }
    match run.status {
        RunStatus::AwaitingInput if waiting.is_empty() => writeln!(
            out,
            "hint: its questions are answered: continue it with `clio runs resume {}`",
            run.id.0
        )?,
        RunStatus::AwaitingInput => {
            writeln!(out, "hint: then continue it with `clio runs resume {}`", run.id.0)?
        }
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

/// Lists a run's entries in order.
pub(super) fn events(home: &Home, args: &RunArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let (journal, run) = open_run(home, args.run)?;
    let entries = journal.entries(run.id).map_err(journal_error)?;
    if args.json {
        let value = serde_json::to_value(&entries).map_err(CliError::internal)?;
        return write_json(out, &value);
    }
    let tasks = journal.tasks(run.id).map_err(journal_error)?;
    let numbers = TaskNumbers::of(&tasks);
    for entry in &entries {
        write_entry(entry, &numbers, out)?;
    }
    Ok(())
}

/// Writes a run as JSON lines.
pub(super) fn export(
    home: &Home,
    args: &RunExportArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let (journal, run) = open_run(home, args.run)?;
    journal.export(run.id, out).map_err(journal_error)?;
    Ok(())
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

fn took(run: &RunRecord) -> String {
    let end = run.finished_at_ms.unwrap_or(run.updated_at_ms);
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
    let bad = |why: String| {
        CliError::usage(anyhow!("--before {text}: {why}")).hint("write the date as YYYY-MM-DD")
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

#[cfg(test)]
mod tests {
    use super::*;

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
