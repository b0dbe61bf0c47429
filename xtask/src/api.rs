//! The public API of each publishable crate, listed from its source into a checked-in
//! `crates/<crate>/api.txt`, so that any change to what a crate exposes shows up in review
//! (`cargo xtask api` writes the files, `cargo xtask api --check` and a `#[test]` fail when
//! one is stale).
//!
//! The listing is read from the source, not from rustdoc: rustdoc's JSON needs a nightly
//! toolchain, which this project does not have. It relies on the workspace's
//! `unreachable_pub` lint (an error in CI): an item spelled `pub` is reachable from outside
//! its crate, so the `pub` items of `src/` are the API. For each file it lists the `pub`
//! items with their signatures (up to their body), their `pub` fields, the variants of a
//! `pub enum`, each item's derives, and trait impls, under the `impl` they belong to. Code
//! under `#[cfg(test)]` is left out. What it does not see: macro-generated items, the
//! meaning of a change (it cannot tell a breaking change from an addition, as
//! cargo-semver-checks would), and a type that changes behind a re-export or an alias.

use std::path::{Path, PathBuf};

use crate::{project_root, release, tidy};

/// `cargo xtask api [--check]`.
pub(crate) fn api(args: &[String]) -> Result<(), String> {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => return Err("usage: cargo xtask api [--check]".to_owned()),
    };
    let stale = update(&project_root(), !check)?;
    if check && !stale.is_empty() {
        return Err(format!(
            "the public API changed in {}: run `cargo xtask api` and commit the api.txt files",
            stale.join(", ")
        ));
    }
    Ok(())
}

/// Lists the API of every publishable crate under `root`; writes each `api.txt` that
/// differs when `write`; returns the crates whose file differed.
pub(crate) fn update(root: &Path, write: bool) -> Result<Vec<String>, String> {
    let mut stale = Vec::new();
    for member in release::publishable(&tidy::metadata(root, true)?)? {
        let dir = root.join("crates").join(&member.name);
        let listing = crate_listing(&member.name, &dir.join("src"))?;
        let path = dir.join("api.txt");
        if std::fs::read_to_string(&path).ok().as_deref() != Some(listing.as_str()) {
            stale.push(member.name.clone());
            if write {
                std::fs::write(&path, &listing)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                eprintln!("xtask api: wrote {}", path.display());
            }
        }
    }
    Ok(stale)
}

/// Returns the listing of the crate whose sources are under `src`.
fn crate_listing(name: &str, src: &Path) -> Result<String, String> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("cannot read {dir:?}: {e}"))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut out = format!(
        "# The public API of {name}, listed by `cargo xtask api` from src/ (xtask/src/api.rs\n\
         # says what it covers). Regenerate it with `cargo xtask api` and commit it.\n"
    );
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("cannot read {file:?}: {e}"))?;
        let items = file_items(&text);
        if items.is_empty() {
            continue;
        }
        let shown: PathBuf = file.strip_prefix(src).unwrap_or(&file).to_path_buf();
        out.push_str(&format!("\n{}\n", shown.display()).replace('\\', "/"));
        for item in items {
            out.push_str(&item);
            out.push('\n');
        }
    }
    Ok(out)
}

/// Returns the API lines of one rustfmt-formatted source file.
fn file_items(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut items = Vec::new();
    // The open top-level item: its header line was listed and its members are listed under it.
    let mut open: Option<Open> = None;
    let mut derives: Vec<String> = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let trimmed = line.trim();
        let indent = line.len() - line.trim_start().len();
        index += 1;
        if indent == 0 && trimmed == "#[cfg(test)]" {
            index = skip_item(&lines, index);
            continue;
        }
        if indent == 0 && !trimmed.is_empty() && !trimmed.starts_with("//") {
            open = None;
        }
        if trimmed.starts_with("#[derive(") || trimmed == "#[non_exhaustive]" {
            if indent == 0 {
                derives.push(trimmed.to_owned());
            }
            continue;
        }
        if trimmed.starts_with("#[") || trimmed.starts_with("//") || trimmed.is_empty() {
            continue;
        }
        if indent == 0 {
            let attrs = std::mem::take(&mut derives);
            if is_pub_item(trimmed) {
                let (signature, next) = signature(&lines, index - 1);
                index = next;
                for attr in attrs {
                    items.push(attr);
                }
                items.push(signature.clone());
                open = match () {
                    _ if signature.starts_with("pub enum ") => Some(Open::Enum),
                    _ if signature.starts_with("pub struct ") => Some(Open::Struct),
                    _ if signature.starts_with("pub trait ") => Some(Open::Trait),
                    _ => None,
                };
            } else if trimmed.starts_with("impl") {
                let (signature, next) = signature(&lines, index - 1);
                index = next;
                let is_trait_impl = signature.contains(" for ");
                if is_trait_impl {
                    items.push(signature);
                    open = None;
                } else {
                    open = Some(Open::Impl(signature, false));
                }
            }
            continue;
        }
        if indent != 4 {
            continue;
        }
        match &open {
            Some(Open::Struct) if trimmed.starts_with("pub ") => {
                items.push(format!("    {}", trimmed.trim_end_matches(',')));
            }
            Some(Open::Enum) if trimmed.starts_with(|c: char| c.is_ascii_uppercase()) => {
                if let Some(name) = trimmed.strip_suffix(" {") {
                    // A struct variant: its fields, one per line at the next indentation.
                    let mut fields = Vec::new();
                    while index < lines.len() && lines[index].trim() != "}," {
                        let field = lines[index].trim();
                        let is_field = lines[index].starts_with("        ")
                            && !lines[index].starts_with("         ")
                            && !field.starts_with("//")
                            && !field.starts_with("#[");
                        if is_field {
                            fields.push(field.trim_end_matches(',').to_owned());
                        }
                        index += 1;
                    }
                    index += 1;
                    items.push(format!("    {name} {{ {} }}", fields.join(", ")));
                } else {
                    let (signature, next) = signature(&lines, index - 1);
                    index = next;
                    items.push(format!("    {}", signature.trim_end_matches(',')));
                }
            }
            Some(Open::Trait) if trimmed.starts_with("fn ") || trimmed.starts_with("type ") => {
                let (signature, next) = signature(&lines, index - 1);
                index = next;
                items.push(format!("    {signature}"));
            }
            Some(Open::Impl(header, listed)) if is_pub_item(trimmed) => {
                let (signature, next) = signature(&lines, index - 1);
                index = next;
                if !listed {
                    items.push(header.clone());
                    open = Some(Open::Impl(header.clone(), true));
                }
                items.push(format!("    {signature}"));
            }
            _ => {}
        }
    }
    items
}

/// The kind of top-level item whose members are being listed.
enum Open {
    Struct,
    Enum,
    Trait,
    /// An inherent impl: its header, and whether it was listed (before its first `pub` item).
    Impl(String, bool),
}

/// Says whether `trimmed` starts an item visible outside the crate.
fn is_pub_item(trimmed: &str) -> bool {
    // `pub(crate)` and `pub(super)` do not start with `pub `.
    trimmed.starts_with("pub ")
}

/// Returns the signature starting at line `start` (joined up to its body, a `;` or the
/// end of a one-line variant) and the index of the line after it.
fn signature(lines: &[&str], start: usize) -> (String, usize) {
    let mut joined = String::new();
    let mut index = start;
    while index < lines.len() {
        let part = lines[index].trim();
        index += 1;
        if !joined.is_empty() && !joined.ends_with('(') && !part.starts_with(')') {
            joined.push(' ');
        }
        joined.push_str(part);
        // A `use` list and a `where` clause end only at their `;` or body.
        if joined.starts_with("pub use ") || joined.contains(" where") || part == "where" {
            if part.ends_with(';') || part.ends_with('{') && !joined.starts_with("pub use ") {
                break;
            }
            continue;
        }
        if lines.get(index).is_some_and(|next| next.trim() == "where") {
            continue;
        }
        let ends = part.ends_with('{')
            || part.ends_with(';')
            || part.ends_with(',') && depth(&joined) == 0
            || part.ends_with('}') && depth(&joined) == 0
            || depth(&joined) == 0
                && !part.ends_with('(')
                && !part.ends_with('<')
                && !part.ends_with("where");
        if ends {
            break;
        }
    }
    let body_starts =
        joined.ends_with('{') && !joined.ends_with("{}") && !joined.starts_with("pub use ");
    let signature = if body_starts { joined.trim_end_matches('{').trim_end() } else { &joined };
    let signature = signature.replace(", )", ")").replace(",)", ")");
    (signature, if body_starts { skip_body(lines, index, lines[start]) } else { index })
}

/// Returns how many brackets of `text` are open (parentheses, angle and square brackets).
fn depth(text: &str) -> i32 {
    text.chars().fold(0, |depth, c| match c {
        '(' | '[' => depth + 1,
        ')' | ']' => depth - 1,
        _ => depth,
    })
}

/// Returns the index after the body that opened on the line before `from`: a body of a
/// top-level item ends at a `}` line at column 0, a member's at its own indentation. An
/// enum's, struct's, trait's or impl's body is not skipped: its members are listed.
fn skip_body(lines: &[&str], from: usize, opener: &str) -> usize {
    let indent = opener.len() - opener.trim_start().len();
    let trimmed = opener.trim_start();
    let lists_members = indent == 0
        && ["pub enum ", "pub struct ", "pub trait ", "impl"]
            .iter()
            .any(|p| trimmed.starts_with(p));
    if lists_members {
        return from;
    }
    let close = format!("{}}}", " ".repeat(indent));
    lines[from..]
        .iter()
        .position(|l| {
            l.starts_with(&close)
                && l.trim_start().starts_with('}')
                && l.len() - l.trim_start().len() == indent
        })
        .map_or(lines.len(), |i| from + i + 1)
}

/// Returns the index after the item that starts at `from` (a `mod x;` line or a block
/// ending with a `}` line at column 0).
fn skip_item(lines: &[&str], from: usize) -> usize {
    let mut index = from;
    while index < lines.len() {
        let line = lines[index];
        index += 1;
        if line.starts_with("#[") {
            continue;
        }
        if line.trim_end().ends_with(';') {
            return index;
        }
        if line.starts_with('}') {
            return index;
        }
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_files_are_up_to_date() {
        let stale = update(&project_root(), false).unwrap();
        assert!(stale.is_empty(), "the public API changed in {stale:?}: run `cargo xtask api`");
    }

    #[test]
    fn items_are_listed_with_their_members() {
        let text = r#"//! A module.

use std::fmt;

/// A thing.
#[derive(Debug, Clone)]
pub struct Thing {
    /// Its name.
    pub name: String,
    secret: u8,
}

impl Thing {
    /// Makes one.
    pub fn new(
        name: &str,
    ) -> Thing {
        Thing { name: name.into(), secret: 0 }
    }

    fn private(&self) {}
}

impl fmt::Display for Thing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)
    }
}

pub enum Kind {
    A,
    B { x: u8 },
    C(String),
    D {
        /// A field.
        #[serde(default)]
        y: Vec<u8>,
        z: bool,
    },
}

pub(crate) fn hidden() {}

pub use crate::other::{One, Two};

#[cfg(test)]
mod tests {
    pub fn not_api() {}
}
"#;
        assert_eq!(
            file_items(text),
            [
                "#[derive(Debug, Clone)]",
                "pub struct Thing",
                "    pub name: String",
                "impl Thing",
                "    pub fn new(name: &str) -> Thing",
                "impl fmt::Display for Thing",
                "pub enum Kind",
                "    A",
                "    B { x: u8 }",
                "    C(String)",
                "    D { y: Vec<u8>, z: bool }",
                "pub use crate::other::{One, Two};",
            ]
        );
    }
}
