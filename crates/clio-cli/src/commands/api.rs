//! What `clio serve`'s HTTP API answers (`crate::serve::http`, docs/http-api.md), as JSON
//! values: each view is the `--json` output of the `runs` command that shows the same
//! thing (`runs list|show|tree|events|answer|cancel|resume`, `workflow check`, `plugin
//! list`), produced by the same function on the journal this process holds, with what a
//! viewer needs besides (a run's questions, its workflow as it stands, its error with the
//! whole cause). A request that cannot be answered is an [`ApiFailure`]: the HTTP status
//! that says why, and the error as the CLI would print it.

use std::io::Write;

use anyhow::anyhow;
use clio_flow::FlowError;
use clio_journal::{RunId, RunRecord, RunStatus};
use serde_json::{Value, json};

use super::{plugin, run, runs, workflow};
use crate::args::{JsonArgs, RunAnswerArgs, RunArgs, RunResumeArgs, RunsListArgs};
use crate::error::{CliError, ErrorKind, journal_error};
use crate::home::Home;

/// A request the API refuses: its HTTP status and the error.
#[derive(Debug)]
pub(crate) struct ApiFailure {
    /// 400 bad input, 404 no such run or question, 409 the run's state forbids it, 500
    /// trouble on this side.
    pub(crate) status: u16,
    pub(crate) error: CliError,
}

impl ApiFailure {
    fn new(status: u16, error: CliError) -> ApiFailure {
        ApiFailure { status, error }
    }

    /// A failure of bad input (400).
    pub(crate) fn bad_input(message: String) -> ApiFailure {
        ApiFailure::new(400, CliError::usage(anyhow!(message)))
    }

    /// A command's own error: the person's mistake is 400, trouble here is 500.
    fn of(error: CliError) -> ApiFailure {
        let status = match error.kind {
            ErrorKind::User | ErrorKind::Usage => 400,
            ErrorKind::Interrupted | ErrorKind::Internal => 500,
        };
        ApiFailure { status, error }
    }
}

impl From<CliError> for ApiFailure {
    fn from(error: CliError) -> ApiFailure {
        ApiFailure::of(error)
    }
}

type Answer = Result<Value, ApiFailure>;

/// Runs a command that writes JSON on `out` and returns that JSON.
fn captured(
    command: impl FnOnce(&mut dyn Write, &mut dyn Write) -> Result<(), CliError>,
) -> Answer {
    let mut out = Vec::new();
    command(&mut out, &mut std::io::sink())?;
    serde_json::from_slice(&out).map_err(|e| ApiFailure::of(CliError::internal(e)))
}

/// Returns the record of run `id`, or the 404 that names it.
fn existing(home: &Home, id: u64) -> Result<RunRecord, ApiFailure> {
    let journal = home.reading_journal()?;
    let record = match journal {
        Some(journal) => journal.run(RunId(id)).map_err(journal_error)?,
        None => None,
    };
    record.map(|r| home.seen(r)).ok_or_else(|| {
        let error =
            CliError::user(anyhow!("run {id} not found in {}", home.journal_path().display()))
                .hint("GET /api/v1/runs lists the runs there are");
        ApiFailure::new(404, error)
    })
}

/// Refuses (409) to `what` run `record` when it has ended.
fn refuse_ended(record: &RunRecord, what: &str) -> Result<(), ApiFailure> {
    if record.status.is_finished() {
        let status = runs::status_name(record.status);
        let error =
            CliError::user(anyhow!("cannot {what} run {}: it has ended ({status})", record.id.0));
        return Err(ApiFailure::new(409, error));
    }
    Ok(())
}

/// `GET runs`: every run, newest first, as `runs list --json` gives it, each with its
/// flow's name, agent file, models and age beside.
pub(crate) fn list(home: &Home, limit: Option<usize>) -> Answer {
    let args = RunsListArgs {
        status: Vec::new(),
        agent: None,
        flow: None,
        since: None,
        limit,
        page: None,
        json: true,
    };
    let mut value = captured(|out, _| runs::list(home, &args, out))?;
    let now = runs::now_ms();
    let journal = home.reading_journal()?;
    if let (Some(list), Some(journal)) = (value.as_array_mut(), journal) {
        for item in list {
            let Some(id) = item.get("id").and_then(Value::as_u64) else { continue };
            let Some(record) = journal.run(RunId(id)).map_err(journal_error)? else { continue };
            let tasks = journal.tasks(record.id).map_err(journal_error)?;
            let mut summary = runs::summary_json(home, &record, &tasks);
            summary["age_ms"] = json!(now.saturating_sub(record.updated_at_ms));
            if let (Value::Object(item), Value::Object(summary)) = (&mut *item, summary) {
                item.extend(summary);
            }
        }
    }
    Ok(value)
}

/// `GET runs/{id}`: the run as `runs show --json` gives it, with its summary (flow,
/// agent, models, tokens, duration), its error with its whole cause, the questions it
/// waits on and, for a workflow, the workflow as it stands.
pub(crate) fn show(home: &Home, id: u64) -> Answer {
    let record = existing(home, id)?;
    let mut value = runs::show_json_without_entries(home, id)?;
    let journal =
        home.reading_journal()?.ok_or_else(|| ApiFailure::bad_input("no journal".into()))?;
    let tasks = journal.tasks(record.id).map_err(journal_error)?;
    value["summary"] = runs::summary_json(home, &record, &tasks);
    value["error"] = record.error.as_deref().map_or(Value::Null, error_json);
    value["questions"] = questions_of(home, id)?;
    value["workflow"] = clio_flow::workflow_state(&journal, record.id)
        .map_err(|e| ApiFailure::of(CliError::from(e)))?
        .unwrap_or(Value::Null);
    // The entries are at `events`; the run page reads them from there.
    if let Value::Object(map) = &mut value {
        map.remove("entries");
    }
    Ok(value)
}

/// Returns a recorded error (the JSON a `FlowError` is stored as) with its message and
/// every cause, as the CLI prints them.
fn error_json(text: &str) -> Value {
    let Ok(recorded) = serde_json::from_str::<Value>(text) else {
        return json!({ "message": text, "causes": [], "recorded": text });
    };
    let error = FlowError::from_json(&recorded);
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    json!({ "message": error.to_string(), "causes": causes, "recorded": recorded })
}

/// `GET runs/{id}/tasks`: the task tree and team as `runs tree --json` gives them.
pub(crate) fn tasks(home: &Home, id: u64) -> Answer {
    existing(home, id)?;
    let args = RunArgs { run: id, json: true };
    let mut value = captured(|out, _| runs::tree(home, &args, out))?;
    value["run"] = json!(id);
    Ok(value)
}

/// `GET runs/{id}/events?after=SEQ&limit=N`: the entries after `after` (from the first
/// without it), at most `limit` of them (all without it), as `runs events --json` gives
/// them; with `limit`, `next_after` is the `after` of the next page (`null` once the page
/// reached the last entry). A page reads only its entries, not the run's.
pub(crate) fn events(home: &Home, id: u64, after: Option<u64>, limit: Option<usize>) -> Answer {
    let record = existing(home, id)?;
    let journal =
        home.reading_journal()?.ok_or_else(|| ApiFailure::bad_input("no journal".into()))?;
    let from = after.map_or(0, |a| a.saturating_add(1));
    let entries = match limit {
        Some(limit) => journal.entries_page(record.id, from, limit),
        None => journal.entries_from(record.id, from),
    }
    .map_err(journal_error)?;
    let next_after = match (limit, entries.last()) {
        (Some(limit), Some(last)) if entries.len() == limit => Some(last.seq),
        _ => None,
    };
    let entries =
        serde_json::to_value(&entries).map_err(|e| ApiFailure::of(CliError::internal(e)))?;
    let status = runs::status_name(record.status);
    let mut answer = json!({ "run": id, "status": status, "entries": entries });
    if limit.is_some() {
        answer["next_after"] = json!(next_after);
    }
    Ok(answer)
}

/// Returns the entries of run `id` after `after` (all with `None`), and whether the run
/// had ended before they were read (so that no entry comes after them): the event stream.
pub(crate) fn entries_after(
    home: &Home,
    id: u64,
    after: Option<u64>,
) -> Result<(Vec<Value>, Option<&'static str>), ApiFailure> {
    let record = existing(home, id)?;
    let ended = record.status.is_finished().then(|| runs::status_name(record.status));
    let journal =
        home.reading_journal()?.ok_or_else(|| ApiFailure::bad_input("no journal".into()))?;
    let from = after.map_or(0, |a| a + 1);
    let entries = journal.entries_from(record.id, from).map_err(journal_error)?;
    let values = entries
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ApiFailure::of(CliError::internal(e)))?;
    Ok((values, ended))
}

/// `GET runs/{id}/questions`: the questions run `id` waits on.
pub(crate) fn questions(home: &Home, id: u64) -> Answer {
    existing(home, id)?;
    Ok(json!({ "run": id, "questions": questions_of(home, id)? }))
}

fn questions_of(home: &Home, id: u64) -> Answer {
    let list = match home.held() {
        Some(held) => held.runtime.questions(RunId(id)),
        // A shared journal's serve drives nothing: the questions are read from the journal.
        None => {
            let journal = home
                .reading_journal()?
                .ok_or_else(|| ApiFailure::bad_input("no journal".into()))?;
            let runtime = clio_flow::Runtime::new(
                journal,
                clio_flow::Registry::new(),
                clio_flow::RuntimeConfig::default(),
            );
            runtime.questions(RunId(id))
        }
    }
    .map_err(|e| ApiFailure::of(e.into()))?;
    Ok(Value::Array(list.iter().map(run::question_json).collect()))
}

/// `POST runs/{id}/answer` with `{"question": ID, "answer": TEXT}`: answers as `runs
/// answer --json` does, and the run goes on in this process; on a shared journal, in the
/// workers (`continues`: the run's questions are all answered).
pub(crate) fn answer(home: &Home, id: u64, body: &[u8]) -> Answer {
    let body_bytes = body;
    let record = existing(home, id)?;
    let body: Value = serde_json::from_slice(body)
        .map_err(|e| ApiFailure::bad_input(format!("the body of answer is not JSON: {e}")))?;
    // A key named twice is refused, not read with the last value.
    if let Some(dup) = std::str::from_utf8(body_bytes).ok().and_then(clio_spec::duplicate_json_key)
    {
        return Err(ApiFailure::bad_input(format!("the body of answer: {dup}")));
    }
    let question = body.get("question").and_then(Value::as_u64).ok_or_else(|| {
        ApiFailure::bad_input("the body of answer needs `question`, a question's id".into())
    })?;
    let text = match body.get("answer") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Bool(yes)) => if *yes { "yes" } else { "no" }.to_owned(),
        _ => {
            return Err(ApiFailure::bad_input(
                "the body of answer needs `answer`, the answer's text".into(),
            ));
        }
    };
    refuse_ended(&record, "answer a question of")?;
    let open = questions_of(home, id)?;
    let is_open = open.as_array().is_some_and(|l| l.iter().any(|q| q["id"] == question));
    if !is_open {
        let journal = home.reading_journal()?;
        let asked = match journal {
            Some(journal) => journal
                .entry(record.id, question)
                .map_err(journal_error)?
                .is_some_and(|e| e.kind == clio_journal::EntryKind::Question),
            None => false,
        };
        let error = if asked {
            ApiFailure::new(
                409,
                CliError::user(anyhow!("question {question} of run {id} is answered already")),
            )
        } else {
            ApiFailure::new(404, CliError::user(anyhow!("run {id} has no question {question}")))
        };
        return Err(error);
    }
    let args = RunAnswerArgs {
        run: id,
        words: Vec::new(),
        question,
        text,
        accept_changed_agent: false,
        record_only: true,
        json: true,
    };
    captured(|out, err| run::answer(home, &args, out, err))
}

/// `POST runs/{id}/cancel`: cancels as `runs cancel --json` does.
pub(crate) fn cancel(home: &Home, id: u64) -> Answer {
    let record = existing(home, id)?;
    refuse_ended(&record, "cancel")?;
    let args = RunArgs { run: id, json: true };
    captured(|out, _| run::cancel(home, &args, out))
}

/// `POST runs` with `{"target", "input", "options", "plugins", "workspace", "models",
/// "model"}`: creates a run of `target` (an agent file, or a flow id such as `workflow`) and
/// has this serve drive it, as `clio run TARGET --input-json INPUT --detach --json` does:
/// `{"run": ID, "status": "submitted", "process": PID}`. `input` is the run's input as it
/// is, any JSON value: text, or an object or list (a workflow's fields, say, as a flow
/// calls the workflow flow with); the other fields are the flags of `clio run`.
pub(crate) fn create(home: &Home, body: &[u8]) -> Answer {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct NewRun {
        target: String,
        #[serde(default)]
        input: Value,
        #[serde(default)]
        options: serde_json::Map<String, Value>,
        #[serde(default)]
        plugins: Vec<std::path::PathBuf>,
        workspace: Option<std::path::PathBuf>,
        models: Option<std::path::PathBuf>,
        model: Option<String>,
    }
    let new: NewRun = serde_json::from_slice(body).map_err(|e| {
        ApiFailure::bad_input(format!(
            "the body is not a new run ({{\"target\", \"input\", \"options\", \"plugins\", \"workspace\", \"models\", \"model\"}}): {e}"
        ))
    })?;
    let args = crate::args::RunCommandArgs {
        target: new.target,
        input: None,
        input_json: Some(new.input.to_string()),
        options: new.options.iter().map(|(key, value)| format!("{key}={value}")).collect(),
        drive: crate::args::DriveArgs {
            plugins: new.plugins,
            workspace: new.workspace,
            models: new.models,
            model: new.model,
            json: true,
            no_input: false,
            trust: false,
            detach: true,
        },
    };
    captured(|out, err| run::run(home, &args, true, run::quiet_paint(), out, err))
}

/// `POST runs/{id}/stop` with an optional `{"task": n}`: ends the model's current turn (every
/// live one, or task `n`'s), as `runs stop --json` does: `{"run", "stopped": [task ids]}`.
/// Its calls fail with `call_stopped`; started flows keep running. On a shared journal the
/// request goes to the worker driving the run through the journal (`super::stop`).
pub(crate) fn stop(home: &Home, id: u64, task: Option<u64>) -> Answer {
    let record = existing(home, id)?;
    refuse_ended(&record, "stop")?;
    let request = super::stop::StopRequest { run: id, task, json: true };
    captured(|out, _| super::stop::stop(home, request, out))
}

/// `POST runs/{id}/resume`: has this process drive the run again, as `runs resume --json`
/// does when served.
pub(crate) fn resume(home: &Home, id: u64) -> Answer {
    let record = existing(home, id)?;
    refuse_ended(&record, "resume")?;
    if home.held().is_none() && home.shared_journal().is_some() {
        return resume_for_workers(home, &record);
    }
    let live = home.held().and_then(|h| h.drivers.as_ref()).is_some_and(|d| d.is_live(record.id));
    if live || record.status == RunStatus::Running {
        let error = CliError::user(anyhow!("run {id} is running already, in this process"));
        return Err(ApiFailure::new(409, error));
    }
    let args = RunResumeArgs { run: id, json: true, accept_changed_agent: false };
    captured(|out, err| run::resume(home, &args, true, run::quiet_paint(), out, err))
}

/// `POST runs/{id}/resume` on a shared journal, whose runs `clio worker`s drive (serve
/// drives none: a run is driven by one process at a time, the one holding its lease): a
/// run that nobody drives (interrupted, or running under a lease that has lapsed, its
/// worker gone) is claimed here and given up at once, which records what its last
/// driver left active as cut short and makes it claimable now; the next worker to look
/// (woken by the commit's notice) claims it and goes on. Answers `{"run", "status":
/// "resumed", "continues": "workers"}`; 409 when a live worker holds the run or it waits
/// for answers.
fn resume_for_workers(home: &Home, record: &RunRecord) -> Answer {
    let id = record.id.0;
    let journal =
        home.reading_journal()?.ok_or_else(|| ApiFailure::bad_input("no journal".into()))?;
    if record.status == RunStatus::AwaitingInput {
        let error = CliError::user(anyhow!("run {id} waits for answers to its questions"))
            .hint(format!("answer them with POST /api/v1/runs/{id}/answer; a worker then goes on"));
        return Err(ApiFailure::new(409, error));
    }
    let claimer = format!("clio-serve-{}", std::process::id());
    let claimed = journal
        .claim_this_run(record.id, &claimer, std::time::Duration::from_secs(10))
        .map_err(journal_error)?;
    if claimed.is_none() {
        let error = CliError::user(anyhow!(
            "run {id} is being driven by a worker that holds its lease"
        ))
        .hint(format!(
            "a worker that dies gives it up once its lease lapses; GET /api/v1/runs/{id} shows how far it is"
        ));
        return Err(ApiFailure::new(409, error));
    }
    journal.release_run(record.id).map_err(journal_error)?;
    Ok(json!({ "run": id, "status": "resumed", "continues": "workers" }))
}

/// `POST workflows/check` with a workflow's text (JSON, or TOML): what `workflow check
/// --json` says of it.
pub(crate) fn check_workflow(body: &[u8]) -> Answer {
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiFailure::bad_input(format!("the workflow is not UTF-8 text: {e}")))?;
    Ok(workflow::check_text(text))
}

/// `GET plugins`: the installed plugins as `plugin list --json` gives them.
pub(crate) fn plugins(home: &Home) -> Answer {
    let value = captured(|out, _| plugin::list(home, &JsonArgs { json: true }, out))?;
    Ok(json!({ "plugins": value }))
}
