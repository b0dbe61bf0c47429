//! `cargo xtask docs`: the user guide, the command-line reference and the API docs, built
//! into one folder a person opens (`target/site/index.html`), with every link checked.
//!
//! - The guide is `docs/` as mdBook reads it (`docs/book.toml`, `docs/SUMMARY.md`): the
//!   pages stay where code and the README point at them. They are staged first into
//!   `target/guide-src`, where the generated pages join them (`cli-reference.md`, the help
//!   of every command from `clio man --markdown`, `api.md`, the index of the API docs,
//!   and `python-reference.md`, the Python package's docstrings), and where links are rewritten for the site: a link to another page of the
//!   guide is pointed at that page's place in the guide, a link to any other file of the
//!   repository (a source file, a crate's README) at the file in the repository online.
//! - The API docs are `cargo doc --no-deps --workspace` with rustdoc's warnings denied,
//!   copied to `target/site/api`.
//! - mdBook is pinned (`MDBOOK_VERSION`) and installed with `cargo install --locked` into
//!   a cache outside the clone when it is missing: `$CLIO_TOOLS_CACHE`, else
//!   `~/.cache/clio-tools`.
//! - Links are checked twice (see `links.rs`): in the Markdown sources (README, CHANGELOG,
//!   the crates' READMEs and `docs/`), before anything is built, naming the file and line;
//!   then in the built HTML, naming the page. Either kind of broken link fails the build.

mod links;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

use crate::release::{self, Member};
use crate::{cargo, project_root, tidy};

/// The mdBook release the guide is built with (docs/decisions.md says why this one).
const MDBOOK_VERSION: &str = "0.5.4";

/// The pages of the guide that `cargo xtask docs` writes rather than `docs/` holding them.
const GENERATED: [&str; 3] = ["cli-reference.md", "api.md", "python-reference.md"];

/// `cargo xtask docs`.
pub(crate) fn docs(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask docs".to_owned());
    }
    let started = Instant::now();
    let root = project_root();
    let metadata = tidy::metadata(&root, true)?;
    let target = PathBuf::from(
        metadata["target_directory"].as_str().ok_or("cargo metadata names no target directory")?,
    );

    let sources = markdown_sources(&root)?;
    let generated: BTreeSet<PathBuf> =
        GENERATED.iter().map(|p| Path::new("docs").join(p)).collect();
    let broken = links::check_markdown(&root, &sources, &generated);
    fail_on(&broken, "in the Markdown sources")?;
    eprintln!("xtask docs: {} Markdown files, their links resolve", sources.len());

    api_docs()?;
    let reference = clio_reference(&root)?;
    let python = python_reference(&root)?;
    let mdbook = mdbook()?;

    let site = target.join("site");
    remove_dir(&site)?;
    let stage = target.join("guide-src");
    let members = release::publishable(&metadata)?;
    let repository = repository_url(&metadata)?;
    let generated =
        Generated { reference: &reference, api: &api_page(&metadata, &members), python: &python };
    stage_guide(&root, &stage, &repository, &generated)?;
    let guide = site.join("guide");
    eprintln!("$ {} build {} --dest-dir {}", mdbook.display(), stage.display(), guide.display());
    let status = Command::new(&mdbook)
        .arg("build")
        .arg(&stage)
        .arg("--dest-dir")
        .arg(&guide)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", mdbook.display()))?;
    if !status.success() {
        return Err(format!("mdbook build of {} failed", stage.display()));
    }
    // mdBook copies every file of its source folder but the pages, book.toml included.
    std::fs::remove_file(guide.join("book.toml"))
        .map_err(|e| format!("cannot remove {}: {e}", guide.join("book.toml").display()))?;
    let api = site.join("api");
    copy_dir(&target.join("doc"), &api)?;
    // rustdoc's help and settings pages link `./index.html`, which it leaves to us.
    write(&api.join("index.html"), &index_page(&metadata, &members, "API documentation", ""))?;
    write(
        &site.join("index.html"),
        &index_page(&metadata, &members, "CLIO documentation", "api/"),
    )?;

    let report = links::check_site(&site, &api)?;
    fail_on(&report.broken, &format!("in the site ({})", site.display()))?;
    eprintln!(
        "xtask docs: {} links checked in the site ({} in other crates' docs left as written); \
         built in {:.0?}\n\
         xtask docs: open {} (the guide: {}, the API: {})",
        report.checked,
        report.unresolved,
        started.elapsed(),
        site.join("index.html").display(),
        guide.join("index.html").display(),
        site.join("api").display(),
    );
    Ok(())
}

/// Fails with every link of `broken` (the first 40) when there is one.
fn fail_on(broken: &[links::Broken], place: &str) -> Result<(), String> {
    if broken.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = broken.iter().take(40).map(ToString::to_string).collect();
    if broken.len() > 40 {
        lines.push(format!("… and {} more", broken.len() - 40));
    }
    Err(format!("{} broken link(s) {place}:\n{}", broken.len(), lines.join("\n")))
}

/// Returns the Markdown files whose links are checked, relative to `root`: the README,
/// the changelog, each crate's README and every page under `docs/`.
fn markdown_sources(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("CHANGELOG.md")];
    let crates = root.join("crates");
    for entry in read_dir(&crates)? {
        let readme = entry.join("README.md");
        if readme.is_file() {
            files.push(readme.strip_prefix(root).unwrap_or(&readme).to_path_buf());
        }
    }
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for path in read_dir(&dir)? {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Builds the API docs of every workspace crate with rustdoc's warnings denied.
fn api_docs() -> Result<(), String> {
    cargo(&["doc", "--no-deps", "--workspace"], &[("RUSTDOCFLAGS", "-D warnings")])
}

/// Returns the Python reference: the `clio_agent` package's docstrings and signatures, as
/// `python/clio_agent/_apidoc.py` renders them (standard library only; the native module is
/// not needed).
fn python_reference(root: &Path) -> Result<String, String> {
    let script = root.join("python/clio_agent/_apidoc.py");
    eprintln!("$ python3 -I {}", script.display());
    let output = Command::new("python3")
        .arg("-I")
        .arg(&script)
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run python3 for the Python reference: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    String::from_utf8(output.stdout)
        .map_err(|e| format!("{} wrote non-UTF-8: {e}", script.display()))
}

/// Returns `clio man --markdown`: every command's help, from clap.
fn clio_reference(root: &Path) -> Result<String, String> {
    eprintln!("$ cargo run --quiet -p clio-cli -- man --markdown");
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(["run", "--quiet", "-p", "clio-cli", "--", "man", "--markdown"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "clio man --markdown failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    String::from_utf8(output.stdout)
        .map_err(|e| format!("clio man --markdown wrote non-UTF-8: {e}"))
}

/// Returns where the pinned mdBook is kept: `$CLIO_TOOLS_CACHE/mdbook-VERSION`, else
/// `~/.cache/clio-tools/mdbook-VERSION`.
fn mdbook_root() -> Result<PathBuf, String> {
    let cache = match std::env::var_os("CLIO_TOOLS_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let home = std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .ok_or("neither CLIO_TOOLS_CACHE nor HOME is set: no place for mdbook")?;
            PathBuf::from(home).join(".cache").join("clio-tools")
        }
    };
    Ok(cache.join(format!("mdbook-{MDBOOK_VERSION}")))
}

/// Returns whether `program --version` says it is mdBook `MDBOOK_VERSION`.
fn is_pinned_mdbook(program: &Path) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|out| {
        out.status.success()
            && String::from_utf8_lossy(&out.stdout).trim() == format!("mdbook v{MDBOOK_VERSION}")
    })
}

/// Returns the pinned mdBook: the cached one, else one on `PATH` of that version, else
/// one installed now into the cache (`cargo install --locked`, its progress shown).
fn mdbook() -> Result<PathBuf, String> {
    let root = mdbook_root()?;
    let cached = root.join("bin").join("mdbook");
    if is_pinned_mdbook(&cached) {
        return Ok(cached);
    }
    if is_pinned_mdbook(Path::new("mdbook")) {
        return Ok(PathBuf::from("mdbook"));
    }
    eprintln!(
        "xtask docs: mdbook {MDBOOK_VERSION} is not in {}; installing it from crates.io \
         (once; it takes a few minutes on two cores)",
        root.display()
    );
    let started = Instant::now();
    // Without the default `serve` and `watch` features: `build` needs neither, and they
    // would add a web server and a file watcher to compile.
    let root_arg = root.to_string_lossy().into_owned();
    cargo(
        &[
            "install",
            "--locked",
            "mdbook",
            "--version",
            MDBOOK_VERSION,
            "--no-default-features",
            "--features",
            "search",
            "--root",
            &root_arg,
        ],
        &[],
    )
    .map_err(|e| format!("{e}: mdbook {MDBOOK_VERSION} could not be installed"))?;
    if !is_pinned_mdbook(&cached) {
        return Err(format!("{} does not report mdbook v{MDBOOK_VERSION}", cached.display()));
    }
    eprintln!(
        "xtask docs: installed mdbook {MDBOOK_VERSION} in {:.0?} (xtask runs it from there: \
         it need not be on PATH)",
        started.elapsed()
    );
    Ok(cached)
}

/// Returns the repository URL of the workspace's crates (`[workspace.package]`).
fn repository_url(metadata: &Value) -> Result<String, String> {
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|p| p["repository"].as_str())
        .map(|url| url.trim_end_matches('/').to_owned())
        .ok_or_else(|| "no workspace crate names its repository".to_owned())
}

/// A page of the guide: where its text comes from in the repository, and its path in
/// the staged book.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Page {
    /// Relative to the repository's root; for a generated page, where it would be.
    source: PathBuf,
    /// Relative to the staged book's root.
    staged: PathBuf,
}

/// Returns the pages `summary` (the text of `docs/SUMMARY.md`) lists, and SUMMARY.md
/// itself. A page under `docs/` keeps its path; one elsewhere in the repository (the
/// README, the changelog) goes to the book's root under its file name.
fn guide_pages(summary: &str) -> Result<Vec<Page>, String> {
    let docs = Path::new("docs");
    let mut pages = vec![Page { source: docs.join("SUMMARY.md"), staged: "SUMMARY.md".into() }];
    for link in links::markdown_links(summary) {
        if links::is_external(&link.target) {
            continue;
        }
        let (path, _) = links::split_target(&link.target);
        let source = links::join_normalized(docs, path).ok_or_else(|| {
            format!("docs/SUMMARY.md:{}: `{}` is outside the repository", link.line, link.target)
        })?;
        let staged = match source.strip_prefix(docs) {
            Ok(inside) => inside.to_path_buf(),
            Err(_) => PathBuf::from(source.file_name().ok_or("a SUMMARY.md link names no file")?),
        };
        if let Some(other) = pages.iter().find(|p| p.staged == staged && p.source != source) {
            return Err(format!(
                "docs/SUMMARY.md: {} and {} would both be the guide's {}",
                other.source.display(),
                source.display(),
                staged.display()
            ));
        }
        if !pages.iter().any(|p| p.source == source) {
            pages.push(Page { source, staged });
        }
    }
    Ok(pages)
}

/// Returns `text` (the page `from`) with each relative link rewritten for the staged
/// book: to a page of the guide, the path from `from` to it; to any other file of the
/// repository (SUMMARY.md included: it is the book's contents, not a page), that file
/// under `repository`.
fn rewrite_links(text: &str, from: &Page, pages: &[Page], repository: &str) -> String {
    // SUMMARY.md is the book's table of contents, not a page of it.
    let by_source: BTreeMap<&Path, &Path> = pages
        .iter()
        .filter(|p| p.staged != Path::new("SUMMARY.md"))
        .map(|p| (p.source.as_path(), p.staged.as_path()))
        .collect();
    let source_dir = from.source.parent().unwrap_or(Path::new(""));
    let staged_dir = from.staged.parent().unwrap_or(Path::new(""));
    let mut out = text.to_owned();
    for link in links::markdown_links(text).into_iter().rev() {
        let (path, fragment) = links::split_target(&link.target);
        if links::is_external(&link.target) || path.is_empty() {
            continue;
        }
        let Some(target) = links::join_normalized(source_dir, path) else { continue };
        let fragment = fragment.map(|f| format!("#{f}")).unwrap_or_default();
        let new = match by_source.get(target.as_path()) {
            Some(staged) => format!("{}{fragment}", relative(staged_dir, staged).display()),
            None => format!("{repository}/blob/HEAD/{}{fragment}", slashed(&target)),
        };
        out.replace_range(link.range, &new);
    }
    out
}

/// Returns `path` with `/` between its parts, as a URL wants.
fn slashed(path: &Path) -> String {
    path.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// Returns the relative path from folder `from` to `to` (both relative to one root).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<_> = from.components().collect();
    let to_parts: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to_parts).take_while(|(a, b)| a == b).count();
    let mut path = PathBuf::new();
    for _ in common..from.len() {
        path.push("..");
    }
    for part in &to_parts[common..] {
        path.push(part);
    }
    path
}

/// The guide's generated pages.
struct Generated<'a> {
    /// `cli-reference.md`: every command's help.
    reference: &'a str,
    /// `api.md`: the crates' API pages.
    api: &'a str,
    /// `python-reference.md`: the Python package's docstrings.
    python: &'a str,
}

/// Lays out the guide's sources in `stage`: `docs/book.toml`, each page `SUMMARY.md`
/// lists with its links rewritten, and the generated pages. Fails when a page under
/// `docs/` is missing from SUMMARY.md, so none is left out of the guide unnoticed, or has
/// the name of a generated page, which would hide it.
fn stage_guide(
    root: &Path,
    stage: &Path,
    repository: &str,
    generated: &Generated<'_>,
) -> Result<(), String> {
    remove_dir(stage)?;
    create_dir(stage)?;
    if let Some(clash) = GENERATED.iter().find(|page| root.join("docs").join(page).exists()) {
        return Err(format!("docs/{clash} is a page `cargo xtask docs` writes; rename it"));
    }
    let summary = read(&root.join("docs/SUMMARY.md"))?;
    let pages = guide_pages(&summary)?;
    let listed: BTreeSet<&Path> = pages.iter().map(|p| p.source.as_path()).collect();
    let unlisted: Vec<String> = markdown_sources(root)?
        .into_iter()
        .filter(|f| f.starts_with("docs") && !listed.contains(f.as_path()))
        .map(|f| f.display().to_string())
        .collect();
    if !unlisted.is_empty() {
        return Err(format!(
            "docs/SUMMARY.md does not list {}: add each to the guide",
            unlisted.join(", ")
        ));
    }
    std::fs::copy(root.join("docs/book.toml"), stage.join("book.toml"))
        .map_err(|e| format!("cannot copy docs/book.toml: {e}"))?;
    for page in &pages {
        let name = page.staged.to_string_lossy();
        // The generated pages link only within the site, as they are.
        let text = match name.as_ref() {
            "cli-reference.md" => generated.reference.to_owned(),
            "api.md" => generated.api.to_owned(),
            "python-reference.md" => generated.python.to_owned(),
            _ => rewrite_links(&read(&root.join(&page.source))?, page, &pages, repository),
        };
        let staged = stage.join(&page.staged);
        if let Some(dir) = staged.parent() {
            create_dir(dir)?;
        }
        write(&staged, &text)?;
    }
    Ok(())
}

/// Returns the folder rustdoc gives `package`'s library (`clio-spec` → `clio_spec`).
fn rustdoc_dir(package: &str) -> String {
    package.replace('-', "_")
}

/// Returns the description `cargo metadata` gives `package`.
fn description<'a>(metadata: &'a Value, package: &str) -> &'a str {
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == package)
        .and_then(|p| p["description"].as_str())
        .unwrap_or_default()
}

/// Returns the guide's `api.md`: a link to each crate's API docs in the site.
fn api_page(metadata: &Value, members: &[Member]) -> String {
    let mut page = String::from(
        "# API documentation\n\n\
         The API of each crate, as `cargo doc --no-deps --workspace` documents it, in this \
         site next to the guide.\n\
         The crates are listed bottom up: each after the crates it depends on.\n\n",
    );
    for member in members {
        page.push_str(&format!(
            "- [`{}`](../api/{}/index.html): {}\n",
            member.name,
            rustdoc_dir(&member.name),
            description(metadata, &member.name)
        ));
    }
    page
}

/// Returns an HTML page titled `title` linking each crate's API docs (under `api`, the
/// path from the page to rustdoc's folder) and, on the site's front page (`api` not
/// empty), the guide and the command-line reference.
fn index_page(metadata: &Value, members: &[Member], title: &str, api: &str) -> String {
    let mut items = String::new();
    if !api.is_empty() {
        items.push_str(
            "      <li><a href=\"guide/index.html\">The user guide</a>, with the \
             <a href=\"guide/cli-reference.html\">command-line reference</a></li>\n      \
             <li>The API of each crate:</li>\n",
        );
    }
    items.push_str("      <li><ul>\n");
    for member in members {
        items.push_str(&format!(
            "        <li><a href=\"{api}{}/index.html\"><code>{}</code></a>: {}</li>\n",
            rustdoc_dir(&member.name),
            member.name,
            escape(description(metadata, &member.name))
        ));
    }
    items.push_str("      </ul></li>\n");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n  <head>\n    <meta charset=\"utf-8\">\n    \
         <title>{title}</title>\n    <style>body {{ font-family: sans-serif; max-width: 46em; \
         margin: 2em auto; line-height: 1.5; }} li {{ list-style: none; }}</style>\n  </head>\n  \
         <body>\n    <h1>{title}</h1>\n    <ul>\n{items}    </ul>\n  </body>\n</html>\n"
    )
}

/// Escapes text for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Copies the folder `from` to `to` (which must not exist), file by file.
fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    create_dir(to)?;
    for path in read_dir(from)? {
        let dest = to.join(path.file_name().ok_or("a file with no name")?);
        if path.is_dir() {
            copy_dir(&path, &dest)?;
        } else {
            std::fs::copy(&path, &dest).map_err(|e| {
                format!("cannot copy {} to {}: {e}", path.display(), dest.display())
            })?;
        }
    }
    Ok(())
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    Ok(paths)
}

fn remove_dir(dir: &Path) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove {}: {e}", dir.display())),
    }
}

fn create_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests;
