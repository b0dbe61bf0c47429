//! `$CLIO_HOME/config.toml`: models and providers, `default_model`, `[limits]` and
//! `[sandbox]`, the precedence of the places models come from (`--models` > config.toml >
//! models.toml), and the errors a bad file gets.

use std::path::Path;

use insta::assert_snapshot;

use crate::support::{ChatServer, Outcome, clio, temp_home, workspace_root};

/// Writes a scripted provider named `name` whose model answers `answer` to anything, as
/// the tables of a models file; the script goes beside `file`.
fn scripted_tables(file: &Path, name: &str, answer: &str) -> String {
    let script = format!("{name}-script.toml");
    let dir = file.parent().unwrap();
    std::fs::write(dir.join(&script), format!("[[script]]\n[[script.turn]]\ntext = {answer:?}\n"))
        .unwrap();
    format!(
        "[[provider]]\nname = \"{name}\"\nkind = \"scripted\"\nscript = \"{script}\"\n\n\
         [[model]]\naccount = \"{name}\"\nid = \"m\"\nprovider = \"{name}\"\n"
    )
}

fn write_models(file: &Path, name: &str, answer: &str) {
    let text = scripted_tables(file, name, answer);
    std::fs::write(file, text).unwrap();
}

/// Runs the minimal agent in `home` with `extra` flags.
fn hello(home: &Path, extra: &[&str]) -> Outcome {
    let h = home.to_str().unwrap();
    let mut args = vec!["--home", h, "run", "examples/agents/minimal.toml", "--input", "Say hello"];
    args.extend(["--quiet"]);
    args.extend(extra.iter().copied());
    clio(&args)
}

fn answer_of(outcome: &Outcome) -> &str {
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    outcome.stdout.trim_end()
}

#[test]
fn models_come_from_the_flag_then_config_toml_then_models_toml() {
    let home = temp_home("config-precedence");
    let elsewhere = home.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let flag = elsewhere.join("flag-models.toml");
    write_models(&flag, "flag", "from the --models file");
    write_models(&home.join("models.toml"), "home", "from models.toml");
    write_models(&home.join("config.toml"), "config", "from config.toml");

    // All three: the flag wins.
    assert_eq!(
        answer_of(&hello(&home, &["--models", flag.to_str().unwrap()])),
        "from the --models file"
    );
    // config.toml and models.toml: config.toml wins.
    assert_eq!(answer_of(&hello(&home, &[])), "from config.toml");
    // config.toml without models (other settings only): models.toml.
    std::fs::write(home.join("config.toml"), "[limits]\nmax_iters = 5\n").unwrap();
    assert_eq!(answer_of(&hello(&home, &[])), "from models.toml");
    // No config.toml at all: models.toml.
    std::fs::remove_file(home.join("config.toml")).unwrap();
    assert_eq!(answer_of(&hello(&home, &[])), "from models.toml");
    // Only config.toml.
    std::fs::remove_file(home.join("models.toml")).unwrap();
    write_models(&home.join("config.toml"), "config", "from config.toml");
    assert_eq!(answer_of(&hello(&home, &[])), "from config.toml");
}

#[test]
fn a_resumed_run_keeps_the_models_file_it_was_started_with() {
    let home = temp_home("config-resume");
    let flag = home.join("flag-models.toml");
    write_models(&flag, "flag", "from the --models file");
    let first = hello(&home, &["--models", flag.to_str().unwrap()]);
    assert_eq!(answer_of(&first), "from the --models file");
    // A config.toml written later does not change what the run was launched with.
    write_models(&home.join("config.toml"), "config", "from config.toml");
    let h = home.to_str().unwrap();
    let again = clio(&["--home", h, "runs", "resume", "1", "--quiet"]);
    assert_eq!(answer_of(&again), "from the --models file");
}

#[test]
fn models_list_names_its_source_and_the_default_model() {
    let home = temp_home("config-list");
    let h = home.to_str().unwrap();
    let config = home.join("config.toml");
    let mut text = String::from("default_model = \"second/m\"\n\n");
    text.push_str(&scripted_tables(&config, "first", "one"));
    text.push_str(
        &scripted_tables(&config, "second", "two").replace("[[provider]]", "\n[[provider]]"),
    );
    text.push_str("\n[tools]\npermissions = { \"write_*\" = \"ask\" }\n");
    std::fs::write(&config, text).unwrap();
    write_models(&home.join("models.toml"), "home", "from models.toml");

    let listed = clio(&["--home", h, "models", "list"]);
    let from_flag =
        clio(&["--home", h, "models", "list", "--models", "examples/models/models.toml"]);
    let all = format!("{}{}", listed.render(), from_flag.render());
    assert_snapshot!(all.replace(h, "[home]"), @r"
    exit: 0
    --- stdout
    first/m                  via first        
    second/m                 via second       
    --- stderr
    models from [home]/config.toml; default second/m
    note: [home]/models.toml is not read: config.toml declares models
    exit: 0
    --- stdout
    offline/demo             via scripted     tools, vision, context 1000000, output 100000
    --- stderr
    models from examples/models/models.toml; default offline/demo
    ");

    // With two models, the default decides the run's model.
    assert_eq!(answer_of(&hello(&home, &[])), "two");
    assert_eq!(answer_of(&hello(&home, &["--model", "first/m"])), "one");
}

#[test]
fn limits_bound_every_run() {
    let home = temp_home("config-limits");
    std::fs::write(home.join("config.toml"), "[limits]\nmax_iters = 1\n").unwrap();
    let h = home.to_str().unwrap();
    // The helper's "add" script calls a tool first, so one model turn cannot answer.
    let outcome = clio(&[
        "--home",
        h,
        "run",
        "examples/agents/minimal.toml",
        "--input",
        "add 2 and 3",
        "--models",
        "examples/models/models.toml",
        "--quiet",
    ]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(outcome.stderr.contains("reached max_iters (1)"), "{}", outcome.render());
}

#[test]
fn a_bad_config_toml_is_named_with_its_line_and_field() {
    let home = temp_home("config-errors");
    let h = home.to_str().unwrap();
    let provider = "[[provider]]\nname = \"local\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\n";
    let model = "[[model]]\naccount = \"local\"\nid = \"qwen\"\nprovider = \"local\"\n";
    let cases: Vec<(&str, String)> = vec![
        ("not TOML", "[[model]\n".to_owned()),
        ("an unknown table", "[[models]]\naccount = \"a\"\n".to_owned()),
        ("an unknown model field", format!("{provider}{model}contex_tokens = 4096\n")),
        (
            "a field of the wrong type",
            format!("{provider}{model}capabilities = {{ tool_calling = \"yes\" }}\n"),
        ),
        ("an undeclared provider", model.replace("provider = \"local\"", "provider = \"vllm\"")),
        ("providers without models", provider.to_owned()),
        ("a provider declared twice", format!("{provider}{provider}{model}")),
        ("an unknown default model", format!("default_model = \"local/llama\"\n{provider}{model}")),
        ("a default model without models", "default_model = \"local/qwen\"\n".to_owned()),
        ("a key variable that is not set", {
            let keyed =
                provider.replace("base_url", "api_key_env = \"CLIO_TEST_UNSET_KEY\"\nbase_url");
            format!("{keyed}{model}")
        }),
        ("a limit of 0", "[limits]\nmax_depth = 0\n".to_owned()),
        ("a limit above the ceiling", "[limits]\nmax_entries = 20000\n".to_owned()),
        ("an unknown limit", "[limits]\nmax_tokens = 5\n".to_owned()),
        ("a bad tool permission", "[tools]\npermissions = { \"x\" = \"maybe\" }\n".to_owned()),
        ("an unknown sandbox key", "[sandbox]\nmode = \"auto\"\nnetwrok = true\n".to_owned()),
        ("an unknown sandbox mode", "[sandbox]\nmode = \"none\"\n".to_owned()),
        ("a relative sandbox read path", "[sandbox]\nread = [\"opt/python\"]\n".to_owned()),
    ];
    let mut all = String::new();
    for (name, text) in cases {
        std::fs::write(home.join("config.toml"), &text).unwrap();
        // The missing key shows when the providers are built, that is when a run starts.
        let outcome = if name.starts_with("a key variable") {
            hello(&home, &[])
        } else {
            clio(&["--home", h, "models", "list"])
        };
        assert_eq!(outcome.code, 1, "{name}: {}", outcome.render());
        all.push_str(&format!("## {name}\n{}", outcome.render()));
    }
    // Models files name themselves the same way.
    std::fs::remove_file(home.join("config.toml")).unwrap();
    let undeclared = model.replace("provider = \"local\"", "provider = \"vllm\"");
    std::fs::write(home.join("models.toml"), &undeclared).unwrap();
    let outcome = clio(&["--home", h, "models", "list"]);
    all.push_str(&format!("## models.toml: an undeclared provider\n{}", outcome.render()));
    let flag = home.join("flag.toml");
    std::fs::write(&flag, "[[model]]\naccount = 3\n").unwrap();
    let outcome = clio(&["--home", h, "models", "list", "--models", flag.to_str().unwrap()]);
    all.push_str(&format!("## --models: a field of the wrong type\n{}", outcome.render()));
    assert_snapshot!(all.replace(h, "[home]"));
}

#[test]
fn a_run_with_the_sandbox_off_says_so_in_its_events() {
    let home = temp_home("config-sandbox-off");
    std::fs::write(home.join("config.toml"), "[sandbox]\nmode = \"off\"\n").unwrap();
    let flag = home.join("models.toml");
    write_models(&flag, "flag", "hello");
    assert_eq!(answer_of(&hello(&home, &[])), "hello");
    let h = home.to_str().unwrap();
    let events = clio(&["--home", h, "runs", "events", "1"]);
    assert_eq!(events.code, 0, "{}", events.render());
    let warnings: Vec<&str> =
        events.stdout.lines().filter(|l| l.contains("warning: the sandbox is off")).collect();
    assert_eq!(warnings.len(), 1, "{}", events.render());
    assert!(warnings[0].contains("[sandbox] mode = \"off\""), "{}", events.render());
}

/// Returns the `toml` block of the README's "On a real model" section.
fn readme_config() -> String {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let section = readme.split("## On a real model").nth(1).unwrap();
    let block = section.split("```toml\n").nth(1).unwrap();
    block.split("```").next().unwrap().to_owned()
}

#[test]
fn the_readmes_config_toml_points_the_main_job_at_an_openai_compatible_server() {
    let server = ChatServer::start(|_| ChatServer::answer("Checked: nothing to add."));
    let home = temp_home("config-readme");
    let h = home.to_str().unwrap();
    let config = readme_config();
    assert!(config.contains("base_url = \"http://127.0.0.1:11434/v1\""), "{config}");
    let config = config.replace("http://127.0.0.1:11434/v1", &server.url);
    std::fs::write(home.join("config.toml"), config).unwrap();

    let listed = clio(&["--home", h, "models", "list"]);
    assert_snapshot!(listed.render().replace(h, "[home]"), @r"
    exit: 0
    --- stdout
    local/qwen               via local        tools, context 32768, output 4096
    --- stderr
    models from [home]/config.toml; default local/qwen
    ");

    // The README's main job, without --models.
    let outcome = clio(&[
        "--home",
        h,
        "workflow",
        "run",
        "examples/workflows/batch7.json",
        "--task",
        "Review batch 7 of the Ti-6Al-4V fatigue campaign",
        "--plugin",
        "examples/marketplace/plugins/materials",
        "--workspace",
        "examples/workspace",
        "--editor",
        "independent_reviewer",
        "--quiet",
    ]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert!(
        outcome.stdout.starts_with("## review (local/qwen)\n\nChecked: nothing to add."),
        "{}",
        outcome.stdout
    );
    let requests = server.requests();
    // One model call per step: the server's answers call no tool.
    assert_eq!(requests.len(), 5, "{requests:?}");
    for request in &requests {
        assert_eq!(request["model"], "qwen2.5:7b", "{request}");
        assert!(request["tools"].is_array(), "the steps are offered their tools: {request}");
    }
}
