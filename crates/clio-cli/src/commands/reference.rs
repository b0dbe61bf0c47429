//! The command-line reference in Markdown (`clio man --markdown`): every command's long
//! `--help`, made from the clap definition the parser uses, as the user guide's CLI page
//! (`cargo xtask docs` writes it there).

use std::io::Write;

use clap::CommandFactory;

use crate::args::Cli;
use crate::error::CliError;

/// Writes the reference: a list of the commands, then each command's help, in the order
/// `clio --help` lists them, subcommands after their parent.
pub(crate) fn markdown(out: &mut dyn Write) -> Result<(), CliError> {
    let mut root = Cli::command();
    // Building sets each subcommand's full name (`clio runs show`) for its usage line.
    root.build();
    let mut commands = Vec::new();
    collect(&root, 0, &mut commands);

    let mut page = String::from("# Command-line reference\n\n");
    page.push_str(
        "What `clio COMMAND --help` prints for each command, generated from the command line's \
         definition by `clio man --markdown`.\n\
         The page on the `clio` command says what a program can rely on: exit codes, errors \
         and each command's JSON.\n\n",
    );
    for (command, depth) in &commands {
        let name = full_name(command);
        let about = command.get_about().map(|a| format!(": {a}")).unwrap_or_default();
        let indent = "  ".repeat(depth.saturating_sub(1));
        page.push_str(&format!("{indent}- [`{name}`](#{}){about}\n", anchor(&name)));
    }
    for (command, depth) in &commands {
        let level = if *depth <= 1 { "##" } else { "###" };
        let help = (*command).clone().render_long_help().to_string();
        page.push_str(&format!(
            "\n{level} `{}`\n\n```text\n{}\n```\n",
            full_name(command),
            help.trim_end()
        ));
    }
    out.write_all(page.as_bytes())?;
    Ok(())
}

/// Appends `command` and, after it, every visible subcommand, each with its depth.
fn collect<'a>(
    command: &'a clap::Command,
    depth: usize,
    into: &mut Vec<(&'a clap::Command, usize)>,
) {
    into.push((command, depth));
    for sub in command.get_subcommands() {
        if !sub.is_hide_set() && sub.get_name() != "help" {
            collect(sub, depth + 1, into);
        }
    }
}

/// Returns the name a person types, such as `clio runs show`.
fn full_name(command: &clap::Command) -> String {
    command.get_bin_name().unwrap_or(command.get_name()).to_owned()
}

/// Returns the id a Markdown renderer gives the heading `` `name` `` (mdBook and GitHub
/// alike): lowercase, spaces as hyphens, punctuation dropped.
fn anchor(name: &str) -> String {
    name.chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}
