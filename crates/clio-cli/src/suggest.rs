//! "Did you mean": the name a person most likely meant, among the names a command knows
//! (targets, flows, editors, models, plugins, run ids, commands), by Jaro-Winkler
//! similarity (strsim); only a close one is offered. [`Context::improve`] adds them to
//! the errors that name such a name, and says what works instead of a generic hint.

use crate::error::CliError;

/// How close a known name must be to be offered (Jaro-Winkler, 1.0 the same name).
const CLOSE: f64 = 0.8;

/// Returns the known name closest to `given`, if one is close enough and not `given`
/// itself. Case is ignored in the comparison; the known name is returned as written.
pub(crate) fn did_you_mean<'a, I, S>(given: &str, known: I) -> Option<String>
where
    I: IntoIterator<Item = &'a S>,
    S: AsRef<str> + ?Sized + 'a,
{
    let given_lower = given.to_lowercase();
    let mut best: Option<(f64, &str)> = None;
    for name in known {
        let name = name.as_ref();
        if name == given {
            continue;
        }
        let score = strsim::jaro_winkler(&given_lower, &name.to_lowercase());
        if score >= CLOSE && best.is_none_or(|(b, _)| score > b) {
            best = Some((score, name));
        }
    }
    best.map(|(_, name)| name.to_owned())
}

/// Returns the hint that offers the known name closest to `given`, `did you mean `NAME`?`.
pub(crate) fn hint<'a, I, S>(given: &str, known: I) -> Option<String>
where
    I: IntoIterator<Item = &'a S>,
    S: AsRef<str> + ?Sized + 'a,
{
    did_you_mean(given, known).map(|name| format!("did you mean `{name}`?"))
}

/// Returns the run id closest to `given` among `known`: a run id off by a digit (`21`
/// for `12`, `103` for `13`), by their decimal spellings.
pub(crate) fn run_id(given: u64, known: &[u64]) -> Option<u64> {
    let text = given.to_string();
    // Any one-digit id is one edit from any other: no guess is worth offering.
    if text.len() < 2 {
        return None;
    }
    let spelled: Vec<String> = known.iter().map(u64::to_string).collect();
    let close = spelled
        .iter()
        .filter(|k| strsim::levenshtein(k, &text) == 1 || strsim::osa_distance(k, &text) == 1)
        .min_by_key(|k| given.abs_diff(k.parse().unwrap_or(u64::MAX)))?;
    close.parse().ok()
}

/// What a command line said that a better hint needs: the home, the plugins passed, and
/// whether it drives a run here.
#[derive(Debug, Clone, Default)]
pub(crate) struct Context {
    home: Option<std::path::PathBuf>,
    journal: Option<String>,
    plugins: Vec<std::path::PathBuf>,
    /// `clio run` or `clio workflow run` without `--detach`.
    pub(crate) drives_a_run: bool,
}

impl Context {
    /// Returns what `cli` says that the hints need.
    pub(crate) fn of(cli: &crate::args::Cli) -> Context {
        use crate::args::{Command, WorkflowCommand};
        let drive = match &cli.command {
            Command::Run(a) => Some(&a.drive),
            Command::Workflow(WorkflowCommand::Run(a)) => Some(&a.drive),
            _ => None,
        };
        Context {
            home: cli.home.clone(),
            journal: cli.journal.clone(),
            plugins: drive.map(|d| d.plugins.clone()).unwrap_or_default(),
            drives_a_run: drive.is_some_and(|d| !d.detach),
        }
    }

    fn home(&self) -> Option<crate::home::Home> {
        crate::home::Home::locate(self.home.as_deref(), self.journal.as_deref()).ok()
    }

    /// Adds to `error` the hint of the name it most likely meant (a target, flow, editor,
    /// model, plugin or run id) and, for an unknown target with plugins passed, says what
    /// those plugins provide instead of asking for a plugin that was given.
    pub(crate) fn improve(&self, mut error: CliError) -> CliError {
        let message = error.error.chain().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        let quoted = |after: &str, open: char, close: char| -> Option<String> {
            let at = message.find(after)? + after.len();
            let rest = message[at..].strip_prefix(open)?;
            Some(rest[..rest.find(close)?].to_owned())
        };
        let mut hints: Vec<String> = Vec::new();
        let target = quoted("unknown call target ", '"', '"')
            .or_else(|| quoted("names unknown target ", '`', '`'));
        if let Some(target) = target {
            let names = self.known_targets();
            hints.extend(hint(&target, names.iter()));
            if !self.plugins.is_empty() {
                let passed: Vec<String> =
                    self.plugins.iter().map(|p| p.display().to_string()).collect();
                error.hints.retain(|h| !h.starts_with("pass the plugin that provides it"));
                let mut shown: Vec<&str> = names.iter().map(String::as_str).take(12).collect();
                if names.len() > 12 {
                    shown.push("…");
                }
                hints.push(format!(
                    "no plugin passed with --plugin ({}) nor any installed one provides `{target}`; they provide: {}",
                    passed.join(", "),
                    shown.join(", ")
                ));
            }
        }
        if let Some(editor) = message.strip_prefix("--editor ").and_then(|m| m.split(':').next())
            && message.contains("no agent, subagent or flow of that name")
        {
            hints.extend(hint(editor, self.known_targets().iter()));
        }
        if let Some(model) = message.strip_prefix("--model ").and_then(|m| m.split(':').next())
            && let Some(known) = quoted("(known: ", ' ', ')').or_else(|| {
                let at = message.find("(known: ")? + "(known: ".len();
                Some(message[at..message[at..].find(')')? + at].to_owned())
            })
        {
            let known: Vec<&str> = known.split(", ").collect();
            hints.extend(hint(model, known.iter()));
        }
        if let Some(run) = message.strip_prefix("run ").and_then(|m| m.split(' ').next())
            && message.contains(" not found in ")
            && let Ok(run) = run.parse::<u64>()
            && let Some(home) = self.home()
            && let Ok(Some(journal)) = home.reading_journal()
        {
            let ids: Vec<u64> = journal
                .runs(&clio_journal::RunFilter::default())
                .map(|runs| runs.iter().map(|r| r.id.0).collect())
                .unwrap_or_default();
            if let Some(close) = run_id(run, &ids) {
                hints.push(format!("did you mean run {close}?"));
            }
        }
        if let Some((plugin, _)) =
            message.split_once(' ').filter(|_| message.ends_with(" is not installed"))
            && let Some(home) = self.home()
        {
            let store = clio_plugins::Store::new(home.root());
            let installed: Vec<String> = store
                .list()
                .unwrap_or_default()
                .iter()
                .map(|i| format!("{}/{}", i.marketplace, i.id))
                .collect();
            hints.extend(hint(plugin, installed.iter()));
        }
        for (i, line) in hints.into_iter().enumerate() {
            error.hints.insert(i, line);
        }
        error
    }

    /// The names a step, a `clio run` or an `--editor` may target: the tools, subagents and
    /// flows of the plugins passed and of the installed, trusted ones, sorted.
    fn known_targets(&self) -> Vec<String> {
        let mut folders = self.plugins.clone();
        if let Some(home) = self.home() {
            let store = clio_plugins::Store::new(home.root());
            for installed in store.list().unwrap_or_default() {
                if store.is_trusted(&installed).unwrap_or(false) {
                    folders.push(installed.path.clone());
                }
            }
        }
        let mut names = Vec::new();
        for folder in folders {
            let Ok(plugin) = clio_plugins::load_plugin(&folder) else { continue };
            names.extend(plugin.tools.iter().map(|t| t.name.clone()));
            names.extend(plugin.subagents.iter().map(|s| s.id.clone()));
            names.extend(plugin.flows.iter().map(|f| f.id.clone()));
        }
        names.sort();
        names.dedup();
        names
    }
}

/// Returns the hint for a run command refused because a process serves the journal: with
/// `clio serve` there, the command that works is the same one with `--detach`.
pub(crate) fn served_run_hint(home: &crate::home::Home) -> Option<String> {
    let argv = ["clio".to_owned(), "runs".to_owned(), "__owner".to_owned()];
    let reply = crate::serve::forward(home, &argv, false)?;
    let owner: serde_json::Value = serde_json::from_str(&reply.stdout).ok()?;
    let pid = owner["pid"].as_u64().unwrap_or(0);
    Some(if owner["serve"].as_bool() == Some(true) {
        format!(
            "`clio serve` (process {pid}) holds this journal: add --detach to submit the run to it, then follow it with `clio runs events N --follow`"
        )
    } else {
        format!(
            "process {pid} drives a run on this journal; wait for it to end (`clio runs list` shows it), or use --home for another home"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_target_is_offered_its_name() {
        let known = ["evidence_researcher", "characterization_expert", "independent_reviewer"];
        assert_eq!(
            did_you_mean("evidence_reseacher", known.iter()).as_deref(),
            Some("evidence_researcher")
        );
        assert_eq!(
            did_you_mean("batch8", ["batch7", "batch7-flow"].iter()).as_deref(),
            Some("batch7")
        );
        assert_eq!(did_you_mean("zzz", known.iter()), None, "nothing close");
        assert_eq!(did_you_mean("batch7", ["batch7"].iter()), None, "the name itself");
        assert_eq!(
            did_you_mean("Independent_Reviewer", known.iter()).as_deref(),
            Some("independent_reviewer")
        );
    }

    #[test]
    fn a_run_id_off_by_a_digit_is_offered() {
        assert_eq!(run_id(12, &[21, 3, 4]), Some(21));
        assert_eq!(run_id(13, &[2, 103]), Some(103));
        assert_eq!(run_id(9, &[1, 2, 3]), None, "one digit: every id is one edit away");
        assert_eq!(run_id(500, &[1, 2, 3]), None);
    }
}
