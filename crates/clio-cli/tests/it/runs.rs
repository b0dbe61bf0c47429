//! `clio runs list|show|tree|events|export|prune` on a journal written through the
//! journal library: the tables and trees a person reads are snapshots (times redacted),
//! and a missing run or journal says what to do next.

use clio_journal::{
    EntryKind, Journal, JournalConfig, NewEntry, NewRun, NewTask, RunStatus, RunUpdate, TaskKind,
    TaskStatus, TaskUpdate,
};
use insta::assert_snapshot;
use serde_json::json;

use crate::support::{clio, temp_home};

/// Writes two runs: a finished workflow with a task tree, and one awaiting input.
fn populate(home: &std::path::Path) {
    let journal = Journal::open(home.join("journal.redb"), JournalConfig::default()).unwrap();
    let run = journal
        .create_run(NewRun {
            flow: "workflow".into(),
            input: json!("Review batch 7"),
            input_digest: "d1".into(),
            fingerprint: "f1".into(),
            owner: "test".into(),
            launch: None,
        })
        .unwrap();
    let task = |parent, kind, target: &str| NewTask {
        run,
        parent,
        kind,
        target: target.into(),
        label: String::new(),
        status: TaskStatus::Running,
        model: Some("scripted/demo".into()),
        owner: "test".into(),
        call: None,
    };
    let root = journal.create_task(task(None, TaskKind::Flow, "workflow")).unwrap();
    let survey = journal.create_task(task(Some(root), TaskKind::Subagent, "survey")).unwrap();
    let tool = journal.create_task(task(Some(survey), TaskKind::Tool, "read_file")).unwrap();
    let review = journal.create_task(task(Some(root), TaskKind::Subagent, "review")).unwrap();
    for (id, tokens) in [(tool, 0), (survey, 120), (review, 80), (root, 0)] {
        let update = TaskUpdate {
            status: Some(TaskStatus::Succeeded),
            input_tokens: Some(tokens),
            output_tokens: Some(tokens / 2),
            ..TaskUpdate::default()
        };
        journal.update_task(id, update).unwrap();
    }
    journal
        .append(run, NewEntry::new(EntryKind::Call, json!({"target": "survey"})).with_task(survey))
        .unwrap();
    journal
        .append(run, NewEntry::new(EntryKind::Event, json!({"event": "step_finished"})))
        .unwrap();
    journal
        .update_run(
            run,
            RunUpdate {
                status: Some(RunStatus::Succeeded),
                answer: Some(json!({"answer": "Batch 7 passes review.\nTwo caveats."})),
                ..RunUpdate::default()
            },
        )
        .unwrap();

    let waiting = journal
        .create_run(NewRun {
            flow: "campaign".into(),
            input: json!({"task": "x"}),
            input_digest: "d2".into(),
            fingerprint: "f2".into(),
            owner: "test".into(),
            launch: None,
        })
        .unwrap();
    journal
        .append(waiting, NewEntry::new(EntryKind::Question, json!({"question": "Proceed?"})))
        .unwrap();
    journal
        .update_run(
            waiting,
            RunUpdate { status: Some(RunStatus::AwaitingInput), ..RunUpdate::default() },
        )
        .unwrap();
    journal.close().unwrap();
}

/// Replaces durations (`12ms`, `1.5s`) and the padding before them, so that snapshots do
/// not depend on timing.
/// Returns `text` with its two subagent task lines, which the subagents' tasks write in
/// whichever order they start, numbered `#n` and drawn in session order.
fn in_task_order(text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let at: Vec<usize> =
        (0..lines.len()).filter(|&i| lines[i].contains("\"subagent run-")).collect();
    assert_eq!(at.len(), 2, "two subagent tasks in {text}");
    let mut tails: Vec<String> = at
        .iter()
        .map(|&i| {
            let line = &lines[i];
            let tail = &line[line.find(" agent ").unwrap()..];
            tail.to_owned()
        })
        .collect();
    tails.sort_by_key(|t| t[t.find("\"subagent").unwrap()..].to_owned());
    for (n, (&i, tail)) in at.iter().zip(tails).enumerate() {
        let branch = if n == 0 { "├─" } else { "└─" };
        let indent = &lines[i][..lines[i].find(['├', '└']).unwrap()];
        lines[i] = format!("{indent}{branch} #n{tail}");
    }
    lines.join("\n") + "\n"
}

fn redact_times(text: &str) -> String {
    let mut redacted = redact_time_words(text);
    while redacted.contains("  [t]") {
        redacted = redacted.replace("  [t]", " [t]");
    }
    redacted
}

fn redact_time_words(text: &str) -> String {
    text.split('\n')
        .map(|line| {
            line.split(' ')
                .map(|word| {
                    // A time of day (`runs events`): `07:37:19.015`.
                    let clock = word.len() == 12
                        && word.char_indices().all(|(i, c)| match i {
                            2 | 5 => c == ':',
                            8 => c == '.',
                            _ => c.is_ascii_digit(),
                        });
                    if clock {
                        return "[clock]";
                    }
                    // A time since the run started (`runs events`): `+1ms`, `+2.5s`.
                    let word = word.trim_start_matches('+');
                    let digits = word.trim_end_matches("ms").trim_end_matches('s');
                    let is_time = (word.ends_with("ms") || word.ends_with('s'))
                        && !digits.is_empty()
                        && digits.chars().all(|c| c.is_ascii_digit() || c == '.');
                    if is_time { "[t]" } else { word }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn list_show_tree_and_events() {
    let home = temp_home("runs");
    populate(&home);
    let home_arg = home.to_str().unwrap();
    let mut all = String::new();
    for args in [
        vec!["runs", "list"],
        vec!["runs", "list", "--status", "awaiting_input"],
        vec!["runs", "show", "1"],
        vec!["runs", "tree", "1"],
        vec!["runs", "events", "2"],
        vec!["runs", "show", "2"],
    ] {
        let mut full = vec!["--home", home_arg];
        full.extend(args.iter().copied());
        let outcome = clio(&full);
        assert_eq!(outcome.code, 0, "{args:?}: {}", outcome.render());
        all.push_str(&format!("## clio {}\n{}", args.join(" "), outcome.stdout));
    }
    assert_snapshot!(redact_times(&all));
}

#[test]
fn json_and_export_are_data() {
    let home = temp_home("runs-json");
    populate(&home);
    let home_arg = home.to_str().unwrap();
    let list = clio(&["--home", home_arg, "runs", "list", "--json"]);
    let runs: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 2);
    assert_eq!(runs[0]["status"], "awaiting_input", "newest first");

    let export = clio(&["--home", home_arg, "runs", "export", "1"]);
    assert_eq!(export.code, 0, "{}", export.render());
    let lines: Vec<serde_json::Value> =
        export.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let records: Vec<&str> = lines.iter().map(|l| l["record"].as_str().unwrap()).collect();
    assert_eq!(records, ["run", "task", "task", "task", "task", "entry", "entry"]);
}

#[test]
fn prune_removes_finished_runs_only() {
    let home = temp_home("runs-prune");
    populate(&home);
    let home_arg = home.to_str().unwrap();
    let pruned = clio(&["--home", home_arg, "runs", "prune", "--before", "9999-01-01"]);
    assert_eq!(pruned.code, 0, "{}", pruned.render());
    assert!(pruned.stdout.starts_with("pruned 1 run(s), with "), "{}", pruned.stdout);
    let list = clio(&["--home", home_arg, "runs", "list", "--json"]);
    let runs: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1, "the run awaiting input stays");
}

#[test]
fn errors_say_what_to_do_next() {
    let home = temp_home("runs-errors");
    let home_arg = home.to_str().unwrap();
    let mut all = String::new();
    let empty = clio(&["--home", home_arg, "runs", "list"]);
    assert_eq!(empty.code, 0);
    all.push_str(&format!("## list, no journal\n{}", empty.render()));
    let missing = clio(&["--home", home_arg, "runs", "show", "7"]);
    assert_eq!(missing.code, 1);
    all.push_str(&format!("## show, no journal\n{}", missing.render()));
    populate(&home);
    let missing = clio(&["--home", home_arg, "runs", "show", "7"]);
    assert_eq!(missing.code, 1);
    all.push_str(&format!("## show, unknown run\n{}", missing.render()));
    let bad_status = clio(&["--home", home_arg, "runs", "list", "--status", "done"]);
    assert_eq!(bad_status.code, 2);
    all.push_str(&format!("## bad status\n{}", bad_status.render()));
    let bad_age = clio(&["--home", home_arg, "runs", "prune", "--older-than", "3x"]);
    assert_eq!(bad_age.code, 2);
    all.push_str(&format!("## bad age\n{}", bad_age.render()));
    let bad_date = clio(&["--home", home_arg, "runs", "prune", "--before", "2026-02-30"]);
    assert_eq!(bad_date.code, 2);
    all.push_str(&format!("## bad date\n{}", bad_date.render()));
    let no_bound = clio(&["--home", home_arg, "runs", "prune"]);
    assert_eq!(no_bound.code, 2);
    std::fs::write(home.join("journal.redb"), "not a journal").unwrap();
    let corrupt = clio(&["--home", home_arg, "runs", "list"]);
    assert_eq!(corrupt.code, 1);
    all.push_str(&format!("## not a journal\n{}", corrupt.render()));
    assert_snapshot!(all.replace(home_arg, "[home]"));
}

/// A journal written by a newer format, or damaged, is refused with a clear error by every
/// command that opens it, and the file is left exactly as it was.
#[test]
fn a_newer_or_damaged_journal_is_refused_and_left_untouched() {
    let newer =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/journal-format-4.redb");
    let mut all = String::new();
    for (name, bytes) in [
        ("newer format", std::fs::read(&newer).unwrap()),
        ("damaged header", {
            let mut bytes = std::fs::read(&newer).unwrap();
            for b in &mut bytes[16..512] {
                *b ^= 0x5a;
            }
            bytes
        }),
    ] {
        let home = temp_home(&format!("runs-{}", name.replace(' ', "-")));
        let h = home.to_str().unwrap();
        let path = home.join("journal.redb");
        std::fs::write(&path, &bytes).unwrap();
        for args in [
            vec!["runs", "list"],
            vec!["runs", "show", "1"],
            vec!["runs", "resume", "1"],
            vec![
                "run",
                "examples/agents/minimal.toml",
                "--input",
                "x",
                "--models",
                "examples/models/models.toml",
            ],
        ] {
            let mut full = vec!["--home", h];
            full.extend(args.iter().copied());
            let outcome = clio(&full);
            assert_eq!(outcome.code, 1, "{name} {args:?}: {}", outcome.render());
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name} {args:?} changed the file");
            // The home folder's name holds the test process id.
            let shown = outcome.render().replace(h, "[home]");
            all.push_str(&format!("## {name}: clio {}\n{shown}", args.join(" ")));
        }
    }
    assert_snapshot!(all);
}

/// Writes an agent carrying the orchestration plugin, and a scripted model on which it
/// runs two subagents with `council_run` and then answers; the subagents answer by task.
fn write_team_lead(home: &std::path::Path) {
    let agent = "id = \"team_lead\"\nrole = \"Splits a task among subagents.\"\n\
                 plugins = [\"core\", \"orchestration\"]\n";
    std::fs::write(home.join("team_lead.toml"), agent).unwrap();
    let models = "[[provider]]\nname = \"scripted\"\nkind = \"scripted\"\nscript = \"script.toml\"\n\n\
                  [[model]]\naccount = \"offline\"\nid = \"demo\"\nprovider = \"scripted\"\n\
                  capabilities = { tool_calling = true }\n";
    std::fs::write(home.join("models.toml"), models).unwrap();
    let script = r#"
[[script]]
agent = "team_lead"
prompt = "Summarise the batch 7 data"

[[script.turn]]
text = "Two subagents will read the files."
tool_calls = [{ name = "council_run", arguments = { tasks = ["Summarise micrographs.txt", { task = "Summarise fatigue.csv" }] } }]
usage = { input_tokens = 100, output_tokens = 20 }

[[script.turn]]
text = "Grain size 11 um; the S-N curve fits Basquin's law."
usage = { input_tokens = 300, output_tokens = 15 }

[[script]]
prompt = "Summarise micrographs.txt"

[[script.turn]]
text = "Mean alpha grain size is 11 um; porosity is about 0.3 % by area."
usage = { input_tokens = 40, output_tokens = 18 }

[[script]]
prompt = "Summarise fatigue.csv"

[[script.turn]]
text = "Eight specimens; a Basquin fit gives S = 1310 * N^-0.0575 MPa."
usage = { input_tokens = 40, output_tokens = 19 }

[[script]]

[[script.turn]]
text = "No script for this."
"#;
    std::fs::write(home.join("script.toml"), script).unwrap();
}

/// Returns the `team` array of a `runs tree --json` or `runs show --json`, one line per
/// session.
fn team_lines(json: &str) -> Vec<String> {
    let value: serde_json::Value = serde_json::from_str(json).unwrap();
    value["team"]
        .as_array()
        .unwrap_or_else(|| panic!("no team array in {value}"))
        .iter()
        .map(|s| {
            format!(
                "{} leader={} parent={} {} {} {}",
                s["session_id"].as_str().unwrap_or(""),
                s["leader"].as_str().unwrap_or("-"),
                s["parent"].as_str().unwrap_or("-"),
                s["status"].as_str().unwrap_or(""),
                s["model"].as_str().unwrap_or(""),
                s["answer"].as_str().unwrap_or("-"),
            )
        })
        .collect()
}

/// An agent with the orchestration plugin runs a team with `council_run` on the scripted
/// model; `runs tree` shows the subagent sessions under their leader (the run's session),
/// and `--json` holds them beside the tasks. `runs show` draws the same team between the
/// tasks and the entries, and its `--json` has the same `team` array.
#[test]
fn tree_shows_the_team_a_run_started() {
    let home = temp_home("runs-team");
    write_team_lead(&home);
    let h = home.to_str().unwrap();
    let agent = home.join("team_lead.toml");
    let models = home.join("models.toml");
    let run = clio(&[
        "--home",
        h,
        "run",
        agent.to_str().unwrap(),
        "--input",
        "Summarise the batch 7 data",
        "--models",
        models.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(run.code, 0, "{}", run.render());
    assert_eq!(run.stdout, "Grain size 11 um; the S-N curve fits Basquin's law.\n");

    let tree = clio(&["--home", h, "runs", "tree", "1"]);
    assert_eq!(tree.code, 0, "{}", tree.render());
    assert_snapshot!(in_task_order(&tree.stdout));

    let json = clio(&["--home", h, "runs", "tree", "1", "--json"]);
    assert_eq!(json.code, 0, "{}", json.render());
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert!(value["tasks"].as_array().is_some_and(|t| !t.is_empty()), "{value}");
    let team = team_lines(&json.stdout);
    assert_eq!(
        team,
        [
            "run-1 leader=- parent=- idle  -",
            "run-1.1 leader=run-1 parent=run-1 done offline/demo Mean alpha grain size is 11 um; porosity is about 0.3 % by area.",
            "run-1.2 leader=run-1 parent=run-1 done offline/demo Eight specimens; a Basquin fit gives S = 1310 * N^-0.0575 MPa.",
        ]
    );

    let show = clio(&["--home", h, "runs", "show", "1", "--entries"]);
    assert_eq!(show.code, 0, "{}", show.render());
    assert!(show.stdout.contains(&tree.stdout[tree.stdout.find("team (").unwrap()..]));
    // The two subagents write their entries at the same time: only the count is stable.
    let show_text = in_task_order(&show.stdout);
    let entries = show_text.find("entries (").unwrap();
    let header = &show_text[entries..show_text[entries..].find('\n').unwrap() + entries];
    assert_eq!(header, "entries (12):");
    assert_snapshot!(
        "show_shows_the_team_a_run_started",
        redact_times(&show_text[..entries]).replace(h, "[home]")
    );

    let show_json = clio(&["--home", h, "runs", "show", "1", "--json"]);
    assert_eq!(show_json.code, 0, "{}", show_json.render());
    assert_eq!(team_lines(&show_json.stdout), team);
}
