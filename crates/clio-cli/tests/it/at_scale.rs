//! The `clio` command at scale (issue 47), through the built binary: the live view on a
//! pseudo-terminal, `runs list`'s filters and pages, `runs events` for people and
//! `--follow`, answering in one step, `--json` for every parse error, "did you mean", the
//! help's global heading and examples, one man page per command, and completions of run
//! ids and flows.

use std::process::Command;

use clio_journal::{EntryKind, Journal, JournalConfig, NewEntry, NewRun, RunStatus, RunUpdate};
use serde_json::{Value, json};

use crate::support::{clio, temp_home, workspace_root};

const PLUGIN: &str = "examples/marketplace/plugins/materials";
const MODELS: &str = "examples/models/models.toml";

/// Writes 21 runs: three of each status but `running`, with errors, questions and answers.
fn populate(home: &std::path::Path) {
    let journal = Journal::open(home.join("journal.redb"), JournalConfig::default()).unwrap();
    let statuses = [
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::AwaitingInput,
        RunStatus::Cancelled,
        RunStatus::Interrupted,
        RunStatus::Succeeded,
        RunStatus::Failed,
    ];
    for i in 0..21usize {
        let status = statuses[i % statuses.len()];
        let flow = if i % 2 == 0 { "workflow" } else { "campaign" };
        let input = if flow == "workflow" {
            json!({"workflow": {"steps": []}, "task": format!("Review batch {i}")})
        } else {
            json!(format!("Plan campaign {i}"))
        };
        let run = journal
            .create_run(NewRun {
                flow: flow.into(),
                input,
                input_digest: format!("d{i}"),
                fingerprint: "f".into(),
                owner: "test".into(),
                launch: None,
            })
            .unwrap();
        let mut update = RunUpdate { status: Some(status), ..RunUpdate::default() };
        match status {
            RunStatus::Failed => {
                let retry = json!({"event": "model_retry", "provider": "local", "attempt": 2, "error": "refused", "wait_ms": 500});
                journal.append(run, NewEntry::new(EntryKind::Event, retry)).unwrap();
                update.error = Some(format!(
                    "step s{i} failed: tool csv_stats exited with code 1\nmore detail"
                ));
            }
            RunStatus::Succeeded => {
                update.answer = Some(json!({"answer": format!("Batch {i} passes.\nTwo caveats.")}))
            }
            RunStatus::AwaitingInput => {
                let question =
                    json!({"question": format!("Proceed with batch {i}?"), "schema": "bool"});
                journal.append(run, NewEntry::new(EntryKind::Question, question)).unwrap();
            }
            _ => {}
        }
        journal.update_run(run, update).unwrap();
    }
    journal.close().unwrap();
}

#[test]
fn runs_list_shows_start_duration_task_error_and_question() {
    let home = temp_home("scale-list");
    populate(&home);
    let h = home.to_str().unwrap();
    let list = clio(&["--home", h, "runs", "list"]);
    assert_eq!(list.code, 0, "{}", list.render());
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert!(lines[0].starts_with("RUN  STATUS"), "{}", list.stdout);
    for column in ["STARTED", "TOOK", "WHAT", "TASK", "ERROR / QUESTION / ANSWER"] {
        assert!(lines[0].contains(column), "{column}: {}", list.stdout);
    }
    assert_eq!(lines.len(), 22, "a header and 21 runs: {}", list.stdout);
    let row =
        |id: &str| *lines.iter().find(|l| l.trim_start().starts_with(&format!("{id} "))).unwrap();
    // Run 2 failed: its error's first line; run 3 waits: its question; run 1: its answer.
    assert!(row("2").contains("step s1 failed: tool csv_stats exited with code 1"), "{}", row("2"));
    assert!(!row("2").contains("more detail"), "{}", row("2"));
    assert!(row("3").contains("? Proceed with batch 2?"), "{}", row("3"));
    assert!(row("1").contains("Batch 0 passes."), "{}", row("1"));
    assert!(row("1").contains("Review batch 0") && row("1").contains("workflow"), "{}", row("1"));
    assert!(row("2").contains("Plan campaign 1") && row("2").contains("campaign"), "{}", row("2"));
    assert!(row("1").contains("just now") || row("1").contains("s ago"), "{}", row("1"));
}

#[test]
fn runs_list_filters_by_status_flow_and_time_and_pages() {
    let home = temp_home("scale-filters");
    populate(&home);
    let h = home.to_str().unwrap();
    let ids = |args: &[&str]| -> Vec<u64> {
        let mut full = vec!["--home", h, "runs", "list", "--json"];
        full.extend(args);
        let out = clio(&full);
        assert_eq!(out.code, 0, "{args:?}: {}", out.render());
        let runs: Value = serde_json::from_str(&out.stdout).unwrap();
        runs.as_array().unwrap().iter().map(|r| r["id"].as_u64().unwrap()).collect()
    };
    assert_eq!(ids(&["--status", "failed"]), [21, 16, 14, 9, 7, 2]);
    assert_eq!(ids(&["--status", "failed", "--flow", "campaign"]), [16, 14, 2]);
    assert_eq!(ids(&["--since", "1h"]).len(), 21);
    assert_eq!(ids(&["--since", "2999-01-01"]), Vec::<u64>::new());
    assert_eq!(ids(&["--limit", "5", "--page", "2"]), [16, 15, 14, 13, 12]);

    // A table's page says where the next one is.
    let page = clio(&["--home", h, "runs", "list", "--limit", "5"]);
    assert!(
        page.stdout.ends_with("runs 1–5 of 21; next page: `clio runs list --limit 5 --page 2`\n"),
        "{}",
        page.stdout
    );
    // An empty filter says what it filtered, and that there are runs.
    let none = clio(&["--home", h, "runs", "list", "--status", "running"]);
    assert_eq!(none.code, 0, "{}", none.render());
    assert!(
        none.stdout.starts_with("no runs match --status running (21 run(s) in "),
        "{}",
        none.stdout
    );
    let bad = clio(&["--home", h, "runs", "list", "--status", "done"]);
    assert_eq!(bad.code, 2, "{}", bad.render());
    assert!(bad.stderr.contains("possible values: running, awaiting_input"), "{}", bad.stderr);
    let bad = clio(&["--home", h, "runs", "list", "--since", "yesterday"]);
    assert_eq!(bad.code, 2, "{}", bad.render());
    assert!(bad.stderr.contains("--since yesterday"), "{}", bad.stderr);
}

#[test]
fn runs_events_prints_one_line_per_event_with_its_time() {
    let home = temp_home("scale-events");
    populate(&home);
    let h = home.to_str().unwrap();
    let events = clio(&["--home", h, "runs", "events", "3"]);
    assert_eq!(events.code, 0, "{}", events.render());
    let lines: Vec<&str> = events.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", events.stdout);
    let words: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(words[0], "0");
    assert_eq!(words[1].len(), 12, "a time of day: {}", lines[0]);
    assert!(words[2].starts_with('+'), "the time since the start: {}", lines[0]);
    assert!(lines[0].ends_with("question 1: Proceed with batch 2?"), "{}", lines[0]);
    // --json: the raw entries; --follow on an ended run prints them and ends.
    let raw = clio(&["--home", h, "runs", "events", "2", "--json"]);
    let raw: Value = serde_json::from_str(&raw.stdout).unwrap();
    assert!(raw.is_array(), "{raw}");
    let followed = clio(&["--home", h, "runs", "events", "2", "--follow", "--json"]);
    assert_eq!(followed.code, 0, "{}", followed.render());
    let entry: Value = serde_json::from_str(followed.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(entry["kind"], "event", "JSON lines: {}", followed.stdout);
    let missing = clio(&["--home", h, "runs", "events", "99", "--follow", "--json"]);
    assert_eq!(missing.code, 1, "{}", missing.render());
    let error: Value = serde_json::from_str(&missing.stdout).unwrap();
    assert_eq!(error["ok"], false, "{error}");
}

#[test]
fn runs_events_follow_waits_for_a_run_until_it_ends() {
    let home = temp_home("scale-follow");
    populate(&home);
    let h = home.to_str().unwrap();
    // Run 5 is interrupted: followed, it prints what it has and waits; its end ends it.
    let mut child = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(["--home", h, "runs", "events", "5", "--follow"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert!(child.try_wait().unwrap().is_none(), "it waits while the run may go on");
    let journal = Journal::open(home.join("journal.redb"), JournalConfig::default());
    // The follower reads in short passes: the journal is free between them.
    let journal = match journal {
        Ok(journal) => journal,
        Err(_) => {
            std::thread::sleep(std::time::Duration::from_millis(100));
            Journal::open(home.join("journal.redb"), JournalConfig::default()).unwrap()
        }
    };
    let run = clio_journal::RunId(5);
    let event = json!({"event": "run_suspended", "message": "the provider stayed unreachable"});
    journal.append(run, NewEntry::new(EntryKind::Event, event)).unwrap();
    let done = RunUpdate { status: Some(RunStatus::Failed), ..RunUpdate::default() };
    journal.update_run(run, done).unwrap();
    journal.close().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("suspended: the provider stayed unreachable"), "{text}");
}

#[test]
fn answering_takes_one_step_and_continues_the_run() {
    let home = temp_home("scale-answer");
    let h = home.to_str().unwrap();
    let ask =
        ["--home", h, "run", "batch7", "--plugin", PLUGIN, "--input", "x", "--models", MODELS];
    let waiting = clio(&ask);
    assert_eq!(waiting.code, 0, "{}", waiting.render());
    // The command shows the answer's form, with no question number for the only one.
    assert!(waiting.stdout.contains("question 1: trust plugin materials"), "{}", waiting.stdout);
    assert!(
        waiting.stdout.contains("answer with: clio runs answer 1 yes|no"),
        "{}",
        waiting.stdout
    );
    let show = clio(&["--home", h, "runs", "show", "1"]);
    assert!(show.stdout.contains("answer with: clio runs answer 1 yes|no"), "{}", show.stdout);

    // A question the run does not have is refused, naming the ones it has.
    let wrong = clio(&["--home", h, "runs", "answer", "1", "7", "yes"]);
    assert_eq!(wrong.code, 1, "{}", wrong.render());
    assert!(
        wrong.stderr.contains("question 7 of run 1 is not one of its questions"),
        "{}",
        wrong.stderr
    );
    assert!(wrong.stderr.contains("clio runs answer 1 yes|no"), "{}", wrong.stderr);

    let answered = clio(&["--home", h, "runs", "answer", "1", "yes"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    assert!(
        answered.stdout.starts_with("answered question 1 of run 1 with true"),
        "{}",
        answered.stdout
    );
    let list = clio(&["--home", h, "runs", "list", "--json"]);
    let runs: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(runs[0]["status"], "succeeded", "the answer continued the run: {runs}");

    // --record-only: the run is left waiting for `runs resume` (in a home where the plugin
    // is not trusted yet, so that the run asks again).
    let home = temp_home("scale-answer-record");
    let h = home.to_str().unwrap();
    let ask =
        ["--home", h, "run", "batch7", "--plugin", PLUGIN, "--input", "x", "--models", MODELS];
    let waiting = clio(&ask);
    assert_eq!(waiting.code, 0, "{}", waiting.render());
    let recorded = clio(&["--home", h, "runs", "answer", "1", "no", "--record-only", "--json"]);
    assert_eq!(recorded.code, 0, "{}", recorded.render());
    let value: Value = serde_json::from_str(&recorded.stdout).unwrap();
    assert_eq!(
        (value["number"].as_u64(), value["answer"].as_bool()),
        (Some(1), Some(false)),
        "{value}"
    );
    let list = clio(&["--home", h, "runs", "list", "--json", "--limit", "1"]);
    let runs: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(runs[0]["status"], "awaiting_input", "{runs}");
}

/// Every command's path of words (`["runs", "list"]`), leaves only.
fn leaf_commands() -> Vec<Vec<String>> {
    fn walk(command: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        let subs: Vec<&clap::Command> = command
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            .collect();
        if subs.is_empty() && !path.is_empty() {
            out.push(path);
            return;
        }
        for sub in subs {
            let mut deeper = path.clone();
            deeper.push(sub.get_name().to_owned());
            walk(sub, deeper, out);
        }
    }
    let mut out = Vec::new();
    walk(&clap_command(), Vec::new(), &mut out);
    out
}

/// The command line's definition, read from `clio man --markdown`'s list of commands
/// (the definition is the binary's; the test sees its output).
fn clap_command() -> clap::Command {
    let page = clio(&["man", "--markdown"]);
    let mut root = clap::Command::new("clio");
    for line in page.stdout.lines() {
        let Some(rest) = line.trim_start().strip_prefix("- [`clio ") else { continue };
        let Some(name) = rest.split('`').next() else { continue };
        let words: Vec<&str> = name.split(' ').collect();
        root = add(root, &words);
    }
    fn add(command: clap::Command, words: &[&str]) -> clap::Command {
        let Some((first, rest)) = words.split_first() else { return command };
        // clap's names are `&'static str` without its `string` feature; a test may leak them.
        let first: &'static str = Box::leak((*first).to_owned().into_boxed_str());
        if command.find_subcommand(first).is_some() {
            command.mut_subcommand(first, |sub| add(sub, rest))
        } else {
            command.subcommand(add(clap::Command::new(first), rest))
        }
    }
    root
}

#[test]
fn every_commands_parse_error_is_json_on_stdout_with_json() {
    let home = temp_home("scale-json");
    let h = home.to_str().unwrap();
    let commands = leaf_commands();
    assert!(commands.len() >= 25, "{commands:?}");
    for path in commands {
        let mut args = vec!["--home", h];
        args.extend(path.iter().map(String::as_str));
        args.extend(["--json", "--no-such-flag"]);
        let out = clio(&args);
        assert_eq!(out.code, 2, "{path:?}: {}", out.render());
        let value: Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{path:?}: stdout is not JSON ({e}): {}", out.render()));
        assert_eq!(value["ok"], false, "{path:?}: {value}");
        assert_eq!(value["error"]["exit_code"], 2, "{path:?}: {value}");
        // Every command takes --json: the flag clap does not know is the one named.
        let message = value["error"]["message"].as_str().unwrap();
        assert!(message.contains("--no-such-flag"), "{path:?}: {value}");
    }
    // The cases: a bad value, a missing argument, and flags that exist now.
    for args in [vec!["runs", "list", "--limit", "x", "--json"], vec!["runs", "prune", "--json"]] {
        let out = clio(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.render());
        let value: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(value["ok"], false, "{value}");
    }
    let shown = clio(&["workflow", "show", "examples/workflows/batch7.json", "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.render());
    let value: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(value["steps"].as_array().map(Vec::len), Some(5), "{value}");
    assert!(value["drawing"].as_str().unwrap().contains("survey"), "{value}");
    let export = clio(&["--home", h, "runs", "export", "3", "--json"]);
    assert_eq!(export.code, 1, "{}", export.render());
    let value: Value = serde_json::from_str(&export.stdout).unwrap();
    assert_eq!(value["ok"], false, "{value}");
}

#[test]
fn runs_export_json_is_one_document() {
    let home = temp_home("scale-export");
    populate(&home);
    let h = home.to_str().unwrap();
    let export = clio(&["--home", h, "runs", "export", "3", "--json"]);
    assert_eq!(export.code, 0, "{}", export.render());
    let value: Value = serde_json::from_str(&export.stdout).unwrap();
    assert_eq!(value["run"]["id"], 3, "{value}");
    assert_eq!(value["entries"].as_array().map(Vec::len), Some(1), "{value}");
    assert!(value["tasks"].is_array(), "{value}");
}

#[test]
fn a_misspelt_target_flow_editor_or_model_gets_did_you_mean() {
    let home = temp_home("scale-dym");
    let h = home.to_str().unwrap();
    let flow = clio(&[
        "--home", h, "run", "batch8", "--plugin", PLUGIN, "--input", "x", "--models", MODELS,
    ]);
    assert_eq!(flow.code, 1, "{}", flow.render());
    assert!(flow.stderr.contains("hint: did you mean `batch7`?"), "{}", flow.stderr);
    // The plugin was passed: the hint says what it provides, not to pass it.
    assert!(!flow.stderr.contains("pass the plugin that provides it"), "{}", flow.stderr);
    assert!(flow.stderr.contains("they provide: batch7, batch7-flow"), "{}", flow.stderr);

    let mut workflow: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace_root().join("examples/workflows/batch7.json")).unwrap(),
    )
    .unwrap();
    workflow["steps"][0]["target"] = json!("evidence_reseacher");
    let file = home.join("typo.json");
    std::fs::write(&file, workflow.to_string()).unwrap();
    let target = clio(&[
        "--home",
        h,
        "workflow",
        "run",
        file.to_str().unwrap(),
        "--task",
        "x",
        "--plugin",
        PLUGIN,
        "--models",
        MODELS,
    ]);
    assert_eq!(target.code, 1, "{}", target.render());
    assert!(
        target.stderr.contains("hint: did you mean `evidence_researcher`?"),
        "{}",
        target.stderr
    );

    let editor = clio(&[
        "--home",
        h,
        "workflow",
        "run",
        "examples/workflows/batch7.json",
        "--task",
        "x",
        "--plugin",
        PLUGIN,
        "--models",
        MODELS,
        "--editor",
        "independent_reviewr",
    ]);
    assert_eq!(editor.code, 1, "{}", editor.render());
    assert!(
        editor.stderr.contains("hint: did you mean `independent_reviewer`?"),
        "{}",
        editor.stderr
    );

    let model = clio(&[
        "--home",
        h,
        "run",
        "examples/agents/minimal.toml",
        "--input",
        "x",
        "--models",
        MODELS,
        "--model",
        "offline/dmo",
    ]);
    assert_eq!(model.code, 1, "{}", model.render());
    assert!(model.stderr.contains("hint: did you mean `offline/demo`?"), "{}", model.stderr);
}

#[test]
fn a_misspelt_run_id_plugin_or_manual_page_gets_did_you_mean() {
    let home = temp_home("scale-dym-runs");
    populate(&home);
    let h = home.to_str().unwrap();
    let run = clio(&["--home", h, "runs", "show", "31"]);
    assert_eq!(run.code, 1, "{}", run.render());
    assert!(run.stderr.contains("hint: did you mean run 21?"), "{}", run.stderr);
    let page = clio(&["man", "rns", "lst"]);
    assert_eq!(page.code, 2, "{}", page.render());
    assert!(page.stderr.contains("did you mean `clio man runs list`?"), "{}", page.stderr);
    let trusted =
        clio(&["--home", h, "plugin", "install", "examples/marketplace", "materials@^0.1"]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    let list = clio(&["--home", h, "plugin", "list", "--json"]);
    let installed: Value = serde_json::from_str(&list.stdout).unwrap();
    let name = installed[0]["marketplace"].as_str().unwrap().to_owned() + "/materails";
    let removed = clio(&["--home", h, "plugin", "remove", &name, "0.1.0"]);
    assert_eq!(removed.code, 1, "{}", removed.render());
    assert!(removed.stderr.contains("did you mean `"), "{}", removed.stderr);
    assert!(removed.stderr.contains("/materials`?"), "{}", removed.stderr);
}

#[test]
fn help_puts_global_flags_under_their_own_heading_with_examples_everywhere() {
    let top = clio(&["--help"]);
    assert!(top.stdout.contains("\nGlobal options:\n"), "{}", top.stdout);
    assert!(top.stdout.contains("\nExamples:\n"), "{}", top.stdout);
    for group in ["plugin", "agent", "workflow", "models", "runs", "journal"] {
        let help = clio(&[group, "--help"]);
        assert!(help.stdout.contains("\nExamples:\n"), "{group}: {}", help.stdout);
    }
    for path in leaf_commands() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = clio(&args);
        assert_eq!(help.code, 0, "{path:?}: {}", help.render());
        let (own, global) = help.stdout.split_once("\nGlobal options:\n").unwrap_or_else(|| {
            panic!("{path:?}: no global heading: {}", help.stdout);
        });
        // An option line: `  -h, --help  …` or `      --home <DIR>  …`.
        let option = |line: &str, flag: &str| {
            let line = line.trim_start();
            let line = match line.get(..4) {
                Some(short) if short.starts_with('-') && short.ends_with(", ") => &line[4..],
                _ => line,
            };
            line == flag
                || line.starts_with(&format!("{flag} "))
                || line.starts_with(&format!("{flag}..."))
        };
        for flag in
            ["--home", "--journal", "--color", "--verbose", "--quiet", "--help", "--version"]
        {
            assert!(
                !own.lines().any(|l| option(l, flag)),
                "{path:?}: {flag} among its own options: {own}"
            );
            assert!(global.contains(flag), "{path:?}: {flag} not under the global heading");
        }
        assert!(help.stdout.contains("Example"), "{path:?}: no example: {}", help.stdout);
    }
}

#[test]
fn every_command_has_a_man_page_with_exit_status_environment_and_files() {
    let dir = temp_home("scale-man");
    let written = clio(&["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(written.code, 0, "{}", written.render());
    let pages: Vec<String> = written.stdout.lines().map(str::to_owned).collect();
    assert_eq!(pages.len(), leaf_commands().len() + 7, "a page per command and group, and clio(1)");
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for section in
            [".SH NAME", ".SH SYNOPSIS", ".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH FILES"]
        {
            assert!(text.contains(section), "{page}: no {section}");
        }
        // Every page named, as `name(1)`, is one that was written.
        for (at, _) in text.match_indices("clio") {
            let rest = &text[at..];
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '\\' || c == '-'))
                .unwrap_or(rest.len());
            let (token, after) = rest.split_at(len);
            let token = token.trim_end_matches("\\fR").trim_end_matches('\\');
            if !(after.starts_with("(1)")
                || after.starts_with("fR(1)")
                || rest[len..].starts_with("\\fR(1)"))
            {
                continue;
            }
            let name = token.replace("\\-", "-").replace("\\fR", "");
            assert!(
                dir.join(format!("{name}.1")).exists(),
                "{page} points at {name}(1), which is not there"
            );
        }
    }
    let one = clio(&["man", "runs", "list"]);
    assert_eq!(one.code, 0, "{}", one.render());
    assert!(one.stdout.contains(".TH clio-runs-list 1"), "{}", one.stdout);
}

#[test]
fn completions_complete_run_ids_statuses_and_flows() {
    let home = temp_home("scale-complete");
    populate(&home);
    let h = home.to_str().unwrap();
    let runs = clio(&["--home", h, "__complete", "runs"]);
    assert_eq!(runs.code, 0, "{}", runs.render());
    assert_eq!(runs.stdout.lines().count(), 21, "{}", runs.stdout);
    assert_eq!(runs.stdout.lines().next(), Some("21"), "newest first");
    let flows = clio(&["--home", h, "__complete", "flows"]);
    assert_eq!(flows.stdout, "campaign\n", "{}", flows.render());
    let bash = clio(&["completions", "bash"]);
    assert!(bash.stdout.contains("__complete runs"), "run ids complete");
    assert!(
        bash.stdout.contains("running awaiting_input succeeded failed cancelled interrupted"),
        "statuses complete"
    );
    let fish = clio(&["completions", "fish"]);
    assert!(fish.stdout.contains("__complete runs"), "run ids complete in fish");
    // The script is valid bash, and its function offers the run ids after `runs show`.
    let script = home.join("clio.bash");
    std::fs::write(&script, &bash.stdout).unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_clio")).parent().unwrap();
    let probe = format!(
        "source {}; COMP_WORDS=(clio --home {h} runs show 2); COMP_CWORD=5; _clio_values clio 2 show; echo \"${{COMPREPLY[*]}}\"",
        script.display()
    );
    let out = Command::new("bash")
        .args(["-c", &probe])
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
        .output()
        .unwrap();
    let offered = String::from_utf8_lossy(&out.stdout);
    assert_eq!(offered.trim(), "21 20 2", "{offered} {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_live_view_on_a_pseudo_terminal_is_bounded_and_ends_with_the_run() {
    if Command::new("script").arg("--version").output().is_err() {
        return; // util-linux `script` gives the pseudo-terminal; without it there is none.
    }
    let home = temp_home("scale-pty");
    let h = home.to_str().unwrap();
    let trusted = clio(&["--home", h, "plugin", "trust", PLUGIN]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    let command = format!(
        "stty rows 30 cols 100; exec {} --home {h} workflow run examples/workflows/batch7.json --task 'Review batch 7' --plugin {PLUGIN} --models {MODELS} --workspace examples/workspace",
        env!("CARGO_BIN_EXE_clio")
    );
    let out = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .current_dir(workspace_root())
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // The view: a header with counts, and the tasks that ended; cursor moves redraw it in
    // place rather than growing it.
    assert!(text.contains("task(s) done ("), "{text}");
    assert!(text.contains("ended lately:"), "{text}");
    assert!(text.contains("\u{1b}["), "drawn with cursor moves: {text}");
    let plain = console::strip_ansi_codes(&text);
    assert!(plain.contains("run 1 succeeded after"), "{plain}");
    // Each drawing is bounded: the view never holds more task lines than its room, however
    // many tasks the run has (the unit tests of progress.rs check its width and height).
    assert!(plain.matches("ended lately:").count() >= 1, "{plain}");
}

#[test]
fn runs_events_pages_with_after_and_limit() {
    let home = temp_home("scale-events-pages");
    let journal = Journal::open(home.join("journal.redb"), JournalConfig::default()).unwrap();
    let run = journal
        .create_run(NewRun {
            flow: "campaign".into(),
            input: json!("a long run"),
            input_digest: "d".into(),
            fingerprint: "f".into(),
            owner: "test".into(),
            launch: None,
        })
        .unwrap();
    for n in 0..25 {
        let event = json!({"command": {"command": "event", "event": {"kind": "note", "n": n}}, "result": null});
        journal.append(run, NewEntry::new(EntryKind::Event, event)).unwrap();
    }
    drop(journal);
    let h = home.to_str().unwrap();
    let page = clio(&["--home", h, "runs", "events", "1", "--limit", "10"]);
    assert_eq!(page.code, 0, "{}", page.render());
    let lines: Vec<&str> = page.stdout.lines().collect();
    assert_eq!(lines.len(), 11, "ten events and where the next page starts: {}", page.stdout);
    assert_eq!(lines[10], "(more: clio runs events 1 --after 9 --limit 10)");
    let next =
        clio(&["--home", h, "runs", "events", "1", "--after", "9", "--limit", "10", "--json"]);
    let next: Value = serde_json::from_str(&next.stdout).unwrap();
    let seqs: Vec<u64> =
        next.as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (10..20).collect::<Vec<_>>());
    let last = clio(&["--home", h, "runs", "events", "1", "--after", "19", "--limit", "10"]);
    assert_eq!(last.stdout.lines().count(), 5, "the last page, without a next: {}", last.stdout);
    let conflict = clio(&["--home", h, "runs", "events", "1", "--after", "3", "--follow"]);
    assert_eq!(conflict.code, 2, "{}", conflict.render());
}
