//! `clio man` and `clio completions`: the manual pages and the shell completions, made
//! from the same clap definition the parser uses.
//!
//! There is one man page per command, as git's and cargo's: `clio(1)`, `clio-runs(1)`,
//! `clio-runs-list(1)`, … Each has clap_mangen's NAME, SYNOPSIS, DESCRIPTION, OPTIONS (the
//! command's own, then the global ones), COMMANDS (the pages of its subcommands, each one
//! a page that exists) and EXAMPLES, then EXIT STATUS, ENVIRONMENT, FILES and SEE ALSO of
//! our own. `clio man` prints clio(1), `clio man runs list` the page of `clio runs list`,
//! `clio man --dir DIR` writes them all.

use std::io::Write;
use std::path::Path;

use anyhow::anyhow;
use clap::CommandFactory;

use crate::args::{Cli, ManArgs};
use crate::error::CliError;

/// Writes the man page `args` asks for on `out`, or every page into `--dir`.
pub(super) fn man(args: &ManArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let pages = pages();
    if let Some(dir) = &args.dir {
        if args.json {
            let mut listed = Vec::new();
            write_all(&pages, dir, &mut listed)?;
            let files: Vec<&str> = std::str::from_utf8(&listed).unwrap_or("").lines().collect();
            return super::write_json(out, &serde_json::json!({ "pages": files }));
        }
        return write_all(&pages, dir, out);
    }
    let mut wanted = vec!["clio".to_owned()];
    wanted.extend(args.command.iter().cloned());
    let Some(page) = pages.iter().find(|p| p.path == wanted) else {
        let name = wanted.join(" ");
        let known: Vec<String> = pages.iter().map(|p| p.path[1..].join(" ")).collect();
        let mut error = CliError::usage(anyhow!("no manual page for `{name}`: no such command"));
        if let Some(close) = crate::suggest::did_you_mean(&wanted[1..].join(" "), known.iter()) {
            error = error.hint(format!("did you mean `clio man {close}`?"));
        }
        return Err(error.hint("`clio --help` lists the commands"));
    };
    let roff = render(page, &pages)?;
    if args.json {
        let text = String::from_utf8_lossy(&roff);
        return super::write_json(out, &serde_json::json!({ "page": page.name(), "roff": text }));
    }
    out.write_all(&roff)?;
    Ok(())
}

/// A command and the words that name it (`["clio", "runs", "list"]`).
pub(crate) struct Page {
    pub(crate) path: Vec<String>,
    pub(crate) command: clap::Command,
}

impl Page {
    /// The page's name and file stem: `clio-runs-list`.
    pub(crate) fn name(&self) -> String {
        self.path.join("-")
    }
}

/// Returns every command's page, the top level first, each group before its commands; clap's
/// own `help` subcommand is left out (its page would say nothing `--help` does not).
pub(crate) fn pages() -> Vec<Page> {
    fn without_help(command: clap::Command) -> clap::Command {
        command.disable_help_subcommand(true).mut_subcommands(without_help)
    }
    let mut root = without_help(Cli::command());
    root.build();
    let mut pages = Vec::new();
    fn walk(command: &clap::Command, path: Vec<String>, pages: &mut Vec<Page>) {
        pages.push(Page { path: path.clone(), command: command.clone() });
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help")
        {
            let mut deeper = path.clone();
            deeper.push(sub.get_name().to_owned());
            walk(sub, deeper, pages);
        }
    }
    walk(&root, vec!["clio".to_owned()], &mut pages);
    pages
}

/// Writes every page as `DIR/<name>.1`, then the list of what was written on `out`.
fn write_all(pages: &[Page], dir: &Path, out: &mut dyn Write) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        CliError::user(anyhow!("cannot create {}: {e}", dir.display()))
            .hint("give --dir a folder you can write")
    })?;
    for page in pages {
        let file = dir.join(format!("{}.1", page.name()));
        std::fs::write(&file, render(page, pages)?)
            .map_err(|e| CliError::user(anyhow!("cannot write {}: {e}", file.display())))?;
        writeln!(out, "{}", file.display())?;
    }
    Ok(())
}

/// Renders one page in roff.
fn render(page: &Page, pages: &[Page]) -> Result<Vec<u8>, CliError> {
    let name = page.name();
    let command = page.command.clone().display_name(name.clone()).bin_name(page.path.join(" "));
    let source = format!("clio {}", command.get_version().unwrap_or_default());
    let man =
        clap_mangen::Man::new(command.clone()).title(name.clone()).manual("clio").source(source);
    let mut roff = Vec::new();
    man.render_title(&mut roff)?;
    man.render_name_section(&mut roff)?;
    man.render_synopsis_section(&mut roff)?;
    man.render_description_section(&mut roff)?;
    if command.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut roff)?;
    }
    if command.has_subcommands() {
        man.render_subcommands_section(&mut roff)?;
    }
    if command.get_after_help().is_some() || command.get_after_long_help().is_some() {
        man.render_extra_section(&mut roff)?;
    }
    roff.extend_from_slice(EXIT_STATUS.as_bytes());
    roff.extend_from_slice(ENVIRONMENT.as_bytes());
    roff.extend_from_slice(FILES.as_bytes());
    roff.extend_from_slice(see_also(page, pages).as_bytes());
    man.render_version_section(&mut roff)?;
    Ok(roff)
}

/// The pages a page points at: its parent's and its subcommands' (every one a page that
/// `clio man --dir` writes), and the top level's.
fn see_also(page: &Page, pages: &[Page]) -> String {
    let mut names: Vec<String> = Vec::new();
    if page.path.len() > 1 {
        names.push(page.path[..page.path.len() - 1].join("-"));
    }
    for other in pages {
        let child = other.path.len() == page.path.len() + 1 && other.path.starts_with(&page.path);
        if child {
            names.push(other.name());
        }
    }
    if page.path.len() > 2 {
        names.insert(0, "clio".to_owned());
    }
    if names.is_empty() {
        return String::new();
    }
    let refs: Vec<String> =
        names.iter().map(|n| format!("\\fB{}\\fR(1)", roff_escape(n))).collect();
    format!(".SH \"SEE ALSO\"\n{}\n", refs.join(", "))
}

/// Escapes the characters roff reads as its own in running text.
fn roff_escape(text: &str) -> String {
    text.replace('\\', "\\e").replace('-', "\\-")
}

/// What every page says of exit codes (`CliError::exit_code`).
const EXIT_STATUS: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
Success; a closed standard output (a broken pipe) also ends quietly with 0.
.TP
\fB1\fR
What was checked is bad (a file, a spec, a plugin, a journal), a run failed, or a run id or question was not found.
.TP
\fB2\fR
The command line is wrong: an unknown command or option, or a value that does not parse.
.TP
\fB130\fR
Interrupted with Ctrl\-C; a run so stopped is resumed with \fBclio runs resume\fR.
.TP
\fB255\fR
An internal error: a fault inside clio or the machine failing.
.PP
With \fB\-\-json\fR, a failure is also printed as JSON on standard output: {"ok": false, "error": {"message", "causes", "hints", "exit_code"}}.
"#;

/// The environment clio reads.
const ENVIRONMENT: &str = r#".SH ENVIRONMENT
.TP
\fBCLIO_HOME\fR
Where clio keeps its journal, store and config when \fB\-\-home\fR is not given (default \fI~/.clio\fR).
.TP
\fBNO_COLOR\fR
When set to anything, \fB\-\-color auto\fR colours nothing.
.TP
\fBRUST_LOG\fR
What to log on standard error, in detail (\fBclio_flow=debug\fR); \fB\-v\fR and \fB\-vv\fR choose clio's own level.
.TP
\fBCLIO_POSTGRES_RECONNECT_SECS\fR
How long a command waits for a shared PostgreSQL journal that cannot be reached before it fails (else \fB[postgres] reconnect_secs\fR in config.toml, else 30).
.TP
\fBCLIO_PYTHON\fR
The Python interpreter that runs Python flows.
.TP
\fBTOKIO_WORKER_THREADS\fR
How many threads drive runs (default: one per CPU).
"#;

/// The files clio keeps in its home.
const FILES: &str = r#".SH FILES
.TP
\fI$CLIO_HOME/journal.redb\fR, \fI$CLIO_HOME/journal.redb\-wal\fR
The journal: every run, its tasks and its history, from which runs are resumed.
.TP
\fI$CLIO_HOME/config.toml\fR
Settings: the default model and the [[model]] tables, the shared journal's URL, permissions, tool environments, workflow limits.
.TP
\fI$CLIO_HOME/models.toml\fR
The models runs may use, when config.toml lists none and \fB\-\-models\fR is not given.
.TP
\fI$CLIO_HOME/plugins/\fR
Installed plugins and their trust records.
.TP
\fI$CLIO_HOME/clio.sock\fR, \fI$CLIO_HOME/clio.key\fR
The socket through which the process holding the journal serves other clio commands, and its key.
"#;

/// Writes the completion script of `shell` for `clio`: clap's script for the commands,
/// options and fixed values (`--status`, `--color`, `--format`), and a wrapper of our own
/// that completes run ids and flow ids from the home (`clio __complete`).
pub(super) fn completions(
    args: &crate::args::CompletionsArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if args.json {
        let mut script = Vec::new();
        completions_of(args.shell, &mut script)?;
        let name = format!("{:?}", args.shell).to_lowercase();
        let value =
            serde_json::json!({ "shell": name, "script": String::from_utf8_lossy(&script) });
        return super::write_json(out, &value);
    }
    completions_of(args.shell, out)
}

/// Writes the completion script of `shell`.
fn completions_of(shell: crate::args::Shell, out: &mut dyn Write) -> Result<(), CliError> {
    use clap_complete::Shell as Target;
    let target = match shell {
        crate::args::Shell::Bash => Target::Bash,
        crate::args::Shell::Zsh => Target::Zsh,
        crate::args::Shell::Fish => Target::Fish,
        crate::args::Shell::Elvish => Target::Elvish,
        crate::args::Shell::Powershell => Target::PowerShell,
    };
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(target, &mut command, "clio", &mut script);
    out.write_all(&script)?;
    match shell {
        crate::args::Shell::Bash => out.write_all(BASH_DYNAMIC.as_bytes())?,
        crate::args::Shell::Fish => out.write_all(FISH_DYNAMIC.as_bytes())?,
        crate::args::Shell::Zsh => out.write_all(ZSH_DYNAMIC.as_bytes())?,
        _ => {}
    }
    Ok(())
}

/// Bash: run ids after a `runs` command that takes one, flow ids after `clio run` and
/// `--flow`; everything else as clap's script completes it.
const BASH_DYNAMIC: &str = r#"
# Run ids and flow ids, read from the home (`clio __complete runs|flows`).
_clio_values() {
    local i words=() home=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            --home|--journal) home+=("${COMP_WORDS[i]}" "${COMP_WORDS[i+1]}"); ((i++)) ;;
            -*) ;;
            *) words+=("${COMP_WORDS[i]}") ;;
        esac
    done
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    if [[ "${prev}" == "--flow" ]]; then
        COMPREPLY=( $(compgen -W "$(clio "${home[@]}" __complete flows 2>/dev/null)" -- "${cur}") )
        return 0
    fi
    if [[ "${cur}" != -* && ${#words[@]} -eq 2 && "${words[0]}" == "runs" ]]; then
        case "${words[1]}" in
            show|tree|events|export|answer|resume|replay|cancel|stop)
                COMPREPLY=( $(compgen -W "$(clio "${home[@]}" __complete runs 2>/dev/null)" -- "${cur}") )
                return 0 ;;
        esac
    fi
    if [[ "${cur}" != -* && ${#words[@]} -eq 1 && "${words[0]}" == "run" ]]; then
        COMPREPLY=( $(compgen -W "$(clio "${home[@]}" __complete flows 2>/dev/null)" -- "${cur}") $(compgen -f -- "${cur}") )
        return 0
    fi
    _clio "$@"
}
if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _clio_values -o nosort -o bashdefault -o default clio
else
    complete -F _clio_values -o bashdefault -o default clio
fi
"#;

/// Fish: run ids and flow ids, from the home.
const FISH_DYNAMIC: &str = r#"
# Run ids and flow ids, read from the home (`clio __complete runs|flows`).
complete -c clio -n "__fish_clio_using_subcommand runs; and __fish_seen_subcommand_from show tree events export answer resume replay cancel stop" -f -a "(clio __complete runs 2>/dev/null)"
complete -c clio -n "__fish_clio_using_subcommand run" -a "(clio __complete flows 2>/dev/null)"
complete -c clio -l flow -f -a "(clio __complete flows 2>/dev/null)"
"#;

/// Zsh: run ids and flow ids, from the home, ahead of clap's completion.
const ZSH_DYNAMIC: &str = r#"
# Run ids and flow ids, read from the home (`clio __complete runs|flows`).
_clio_values() {
    local -a plain
    plain=(${words:#-*})
    if [[ "${words[CURRENT-1]}" == "--flow" ]]; then
        compadd -- ${(f)"$(clio __complete flows 2>/dev/null)"}
        return
    fi
    if [[ "${plain[2]}" == "runs" && ${#plain} -eq 4 && "${words[CURRENT]}" != -* ]]; then
        case "${plain[3]}" in
            show|tree|events|export|answer|resume|replay|cancel|stop)
                compadd -- ${(f)"$(clio __complete runs 2>/dev/null)"}
                return ;;
        esac
    fi
    if [[ "${plain[2]}" == "run" && ${#plain} -eq 3 && "${words[CURRENT]}" != -* ]]; then
        compadd -- ${(f)"$(clio __complete flows 2>/dev/null)"}
        _files
        return
    fi
    _clio "$@"
}
if [ "$funcstack[1]" = "_clio" ]; then
    _clio_values "$@"
else
    compdef _clio_values clio
fi
"#;

/// Prints the values `clio __complete KIND` completes, one a line: the home's run ids
/// (newest first, each with its status and flow for shells that show descriptions), or
/// the flow ids of its runs and of its installed, trusted plugins. Nothing when there is
/// no journal; never an error worth a shell's attention.
pub(super) fn values(
    home: &crate::home::Home,
    kind: crate::args::CompleteKind,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    use crate::args::CompleteKind;
    let journal = home.reading_journal().ok().flatten();
    let runs = journal
        .as_ref()
        .and_then(|j| j.runs(&clio_journal::RunFilter::default()).ok())
        .unwrap_or_default();
    match kind {
        CompleteKind::Runs => {
            for run in runs {
                writeln!(out, "{}", run.id.0)?;
            }
        }
        CompleteKind::Flows => {
            let mut flows: Vec<String> =
                runs.iter().map(|r| super::runs::flow_id(&r.flow)).collect();
            flows.extend(installed_flow_ids(home));
            flows.retain(|f| f != "workflow" && !f.is_empty() && !f.starts_with('{'));
            flows.sort();
            flows.dedup();
            for flow in flows {
                writeln!(out, "{flow}")?;
            }
        }
        CompleteKind::Statuses => {
            for status in crate::args::RUN_STATUSES {
                writeln!(out, "{status}")?;
            }
        }
    }
    Ok(())
}

/// Returns the flow ids of the home's installed, trusted plugins.
fn installed_flow_ids(home: &crate::home::Home) -> Vec<String> {
    let store = clio_plugins::Store::new(home.root());
    let mut ids = Vec::new();
    for installed in store.list().unwrap_or_default() {
        if !store.is_trusted(&installed).unwrap_or(false) {
            continue;
        }
        if let Ok(plugin) = clio_plugins::load_plugin(&installed.path) {
            ids.extend(plugin.flows.iter().map(|f| f.id.clone()));
        }
    }
    ids
}
