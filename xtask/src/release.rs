//! Releases: `cargo xtask package` (every publishable crate packaged, in dependency order,
//! nothing uploaded), `cargo xtask release VERSION [--dry-run]` (the version bump, the
//! changelog, the release binary and its archive with checksums; never a commit, a tag or
//! an upload — it prints the git and cargo commands a person runs next) and `cargo xtask
//! dist` (the archive alone, of the current version and commit).
//!
//! The crates come from `cargo metadata`, not from a list: a workspace member is published
//! unless its manifest says `publish = false`, and the order is a topological sort of the
//! members' dependencies on one another, so a crate split out of another needs no change
//! here. The text rewrites (`bump_manifest`, `release_changelog`) and the version rules
//! (`Version`) are pure functions with unit tests; CI runs those and the package dry run,
//! not the release build, which takes minutes on two cores.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{cargo, project_root, tidy};

/// A workspace crate that is published, with the members it depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) version: String,
    /// The workspace members it depends on (any kind: normal, build or dev).
    pub(crate) internal: BTreeSet<String>,
}

/// Returns the published workspace members, each after every member it depends on.
pub(crate) fn publishable(metadata: &Value) -> Result<Vec<Member>, String> {
    let ids: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let packages: Vec<&Value> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["id"].as_str().is_some_and(|id| ids.contains(id)))
        .collect();
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let members = packages
        .iter()
        // `publish = false` is an empty list of registries; absent (null) means crates.io.
        .filter(|p| p["publish"].as_array().is_none_or(|registries| !registries.is_empty()))
        .map(|p| Member {
            name: p["name"].as_str().unwrap_or_default().to_owned(),
            version: p["version"].as_str().unwrap_or_default().to_owned(),
            internal: p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d["name"].as_str())
                .filter(|d| names.contains(d))
                .map(str::to_owned)
                .collect(),
        })
        .collect();
    dependency_order(members)
}

/// Sorts `members` so that each comes after the members it depends on (ties by name);
/// a cycle is an error naming the crates in it.
fn dependency_order(members: Vec<Member>) -> Result<Vec<Member>, String> {
    let mut left: BTreeMap<String, Member> =
        members.into_iter().map(|m| (m.name.clone(), m)).collect();
    let mut ordered: Vec<Member> = Vec::new();
    while !left.is_empty() {
        let ready = left
            .values()
            .find(|m| m.internal.iter().all(|d| !left.contains_key(d) || *d == m.name))
            .map(|m| m.name.clone());
        let Some(name) = ready else {
            let stuck: Vec<&str> = left.keys().map(String::as_str).collect();
            return Err(format!("the crates {stuck:?} depend on one another in a cycle"));
        };
        ordered.extend(left.remove(&name));
    }
    Ok(ordered)
}

/// `cargo xtask package`: packages every published crate in dependency order with one
/// `cargo package` (which resolves the workspace's unpublished crates from the packages it
/// just made), without building them unless `--verify` is given.
pub(crate) fn package(args: &[String]) -> Result<(), String> {
    let verify = match args {
        [] => false,
        [flag] if flag == "--verify" => true,
        _ => return Err("usage: cargo xtask package [--verify]".to_owned()),
    };
    let members = publishable(&tidy::metadata(&project_root(), true)?)?;
    let mut command = vec!["package", "--allow-dirty"];
    if !verify {
        command.push("--no-verify");
    }
    for member in &members {
        command.extend(["-p", member.name.as_str()]);
    }
    cargo(&command, &[])?;
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    eprintln!("xtask package: packaged {} (nothing uploaded)", names.join(", "));
    Ok(())
}

/// A semantic version: `MAJOR.MINOR.PATCH`, an optional `-PRERELEASE` and `+BUILD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version {
    core: [u64; 3],
    pre: Vec<String>,
    build: String,
}

impl Version {
    /// Parses `text` by the rules of semver.org (no leading zeros in numbers, identifiers
    /// of ASCII letters, digits and hyphens).
    pub(crate) fn parse(text: &str) -> Result<Version, String> {
        let bad =
            |why: &str| format!("`{text}` is not a semantic version (MAJOR.MINOR.PATCH): {why}");
        let (rest, build) = text.split_once('+').unwrap_or((text, ""));
        let (core, pre) = rest.split_once('-').map_or((rest, None), |(c, p)| (c, Some(p)));
        let numeric = |part: &str| {
            let ok = !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_digit())
                && (part == "0" || !part.starts_with('0'));
            if ok {
                part.parse::<u64>().map_err(|e| bad(&e.to_string()))
            } else {
                Err(bad("bad number"))
            }
        };
        let parts: Vec<&str> = core.split('.').collect();
        let [major, minor, patch] = parts.as_slice() else {
            return Err(bad("it needs three numbers"));
        };
        let identifiers = |list: &str| -> Result<Vec<String>, String> {
            list.split('.')
                .map(|id| {
                    let ok = !id.is_empty()
                        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
                    if ok { Ok(id.to_owned()) } else { Err(bad("bad identifier")) }
                })
                .collect()
        };
        let pre = match pre {
            Some(list) => identifiers(list)?,
            None => Vec::new(),
        };
        for id in &pre {
            if id.len() > 1 && id.starts_with('0') && id.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad("a numeric prerelease identifier has a leading zero"));
            }
        }
        if text.contains('+') {
            identifiers(build)?;
        }
        Ok(Version {
            core: [numeric(major)?, numeric(minor)?, numeric(patch)?],
            pre,
            build: build.to_owned(),
        })
    }

    /// Orders by precedence (semver.org §11): the build is ignored, a prerelease comes
    /// before its release, numeric identifiers compare as numbers and below text ones.
    fn precedence(&self, other: &Version) -> Ordering {
        self.core.cmp(&other.core).then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => {
                for (a, b) in self.pre.iter().zip(&other.pre) {
                    let order = match (a.parse::<u64>(), b.parse::<u64>()) {
                        (Ok(x), Ok(y)) => x.cmp(&y),
                        (Ok(_), Err(_)) => Ordering::Less,
                        (Err(_), Ok(_)) => Ordering::Greater,
                        (Err(_), Err(_)) => a.cmp(b),
                    };
                    if order != Ordering::Equal {
                        return order;
                    }
                }
                self.pre.len().cmp(&other.pre.len())
            }
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [major, minor, patch] = self.core;
        write!(f, "{major}.{minor}.{patch}")?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre.join("."))?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build)?;
        }
        Ok(())
    }
}

/// Returns the version `next` names after `current`, checked to be greater: a version, or
/// `major`, `minor` or `patch` for the next release of that kind. As npm's `semver inc`
/// counts, a prerelease's next release of its own kind is the release it leads to
/// (`1.1.0-rc.1` → `minor` → `1.1.0`), and the bump drops any prerelease and build.
pub(crate) fn check_next(current: &str, next: &str) -> Result<Version, String> {
    let current = Version::parse(current)?;
    let next = match next {
        "major" | "minor" | "patch" => {
            let [major, minor, patch] = current.core;
            let pre = !current.pre.is_empty();
            let core = match next {
                "major" if pre && minor == 0 && patch == 0 => [major, 0, 0],
                "major" => [major + 1, 0, 0],
                "minor" if pre && patch == 0 => [major, minor, 0],
                "minor" => [major, minor + 1, 0],
                _ if pre => [major, minor, patch],
                _ => [major, minor, patch + 1],
            };
            Version { core, pre: Vec::new(), build: String::new() }
        }
        _ => Version::parse(next)?,
    };
    if next.precedence(&current) != Ordering::Greater {
        return Err(format!("{next} is not greater than the current version {current}"));
    }
    Ok(next)
}

/// Returns the root manifest's text with `current` replaced by `next` as
/// `[workspace.package]`'s version and as the version of each `internal` crate in
/// `[workspace.dependencies]`; fails when one of them does not say `current`, so crates
/// never drift apart.
pub(crate) fn bump_manifest(
    text: &str,
    current: &str,
    next: &str,
    internal: &[&str],
) -> Result<String, String> {
    let mut section = String::new();
    let mut bumped_package = false;
    let mut bumped_deps = BTreeSet::new();
    let mut lines = Vec::new();
    let old = format!("version = \"{current}\"");
    let new = format!("version = \"{next}\"");
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            section = trimmed.to_owned();
            lines.push(line.to_owned());
            continue;
        }
        let key = trimmed.split(['=', ' ', '.']).next().unwrap_or_default();
        let line = if section == "[workspace.package]" && key == "version" {
            if !line.contains(&old) {
                return Err(format!("[workspace.package] does not say `{old}`: {trimmed}"));
            }
            bumped_package = true;
            line.replacen(&old, &new, 1)
        } else if section == "[workspace.dependencies]" && internal.contains(&key) {
            if !line.contains(&old) {
                return Err(format!(
                    "[workspace.dependencies] gives {key} no `{old}` beside its path: {trimmed}"
                ));
            }
            bumped_deps.insert(key);
            line.replacen(&old, &new, 1)
        } else {
            line.to_owned()
        };
        lines.push(line);
    }
    if !bumped_package {
        return Err("the root Cargo.toml has no version in [workspace.package]".to_owned());
    }
    let missing: Vec<&&str> = internal.iter().filter(|c| !bumped_deps.contains(*c)).collect();
    if !missing.is_empty() {
        return Err(format!("[workspace.dependencies] does not list {missing:?}"));
    }
    Ok(lines.concat())
}

/// Returns `text` (a Keep a Changelog file) with the `## [Unreleased]` entries moved under
/// `## [VERSION] - DATE` and an empty `## [Unreleased]` left above them. Link definitions
/// at the bottom (`[Unreleased]: …/compare/vX...HEAD`) are moved on too. Fails when there
/// is no Unreleased section or it says nothing.
pub(crate) fn release_changelog(text: &str, version: &str, date: &str) -> Result<String, String> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim().eq_ignore_ascii_case("## [Unreleased]"))
        .ok_or("CHANGELOG.md has no `## [Unreleased]` section")?;
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("## ") || l.starts_with('['))
        .map_or(lines.len(), |i| start + 1 + i);
    let entries = &lines[start + 1..end];
    if entries.iter().all(|l| l.trim().is_empty()) {
        return Err("CHANGELOG.md's Unreleased section is empty: nothing to release".to_owned());
    }
    if lines.iter().any(|l| l.starts_with(&format!("## [{version}]"))) {
        return Err(format!("CHANGELOG.md already has a section for {version}"));
    }
    let mut out: Vec<String> = lines[..=start].iter().map(|l| (*l).to_owned()).collect();
    out.push(String::new());
    out.push(format!("## [{version}] - {date}"));
    let body: Vec<&str> = entries.iter().copied().skip_while(|l| l.trim().is_empty()).collect();
    out.push(String::new());
    out.extend(body.iter().map(|l| (*l).to_owned()));
    for line in &lines[end..] {
        match line.strip_prefix("[Unreleased]: ") {
            Some(url) => match url.rsplit_once("/compare/") {
                Some((base, range)) => {
                    let previous = range.split("...").next().unwrap_or_default();
                    out.push(format!("[Unreleased]: {base}/compare/v{version}...HEAD"));
                    out.push(format!("[{version}]: {base}/compare/{previous}...v{version}"));
                }
                None => out.push((*line).to_owned()),
            },
            None => out.push((*line).to_owned()),
        }
    }
    Ok(out.join("\n") + "\n")
}

/// Returns the UTC date of `seconds` since the Unix epoch as `YYYY-MM-DD` (the civil
/// calendar algorithm of Howard Hinnant's `civil_from_days`).
pub(crate) fn utc_date(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `cargo xtask release VERSION [--dry-run]`.
pub(crate) fn release(args: &[String]) -> Result<(), String> {
    let usage = "usage: cargo xtask release VERSION|major|minor|patch [--dry-run]";
    let dry_run = args.iter().any(|a| a == "--dry-run");
    let positional: Vec<&String> = args.iter().filter(|a| *a != "--dry-run").collect();
    let [next] = positional.as_slice() else { return Err(usage.to_owned()) };
    if next.starts_with('-') {
        return Err(format!("unknown option `{next}`\n{usage}"));
    }
    let root = project_root();
    let metadata = tidy::metadata(&root, true)?;
    let members = publishable(&metadata)?;
    let current = members.first().map(|m| m.version.clone()).ok_or("no crate to release")?;
    if let Some(odd) = members.iter().find(|m| m.version != current) {
        return Err(format!(
            "{} is at {} but {} is at {current}: every crate takes the workspace's version",
            odd.name, odd.version, members[0].name
        ));
    }
    let version = check_next(&current, next)?.to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| format!("the clock is before 1970: {e}"))?;
    let date = utc_date(now.as_secs());

    let manifest_path = root.join("Cargo.toml");
    let changelog_path = root.join("CHANGELOG.md");
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    // The crates another member depends on must be in [workspace.dependencies] with their
    // version; the others (the CLI) need not be.
    let depended_on: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| members.iter().any(|m| m.name != *n && m.internal.contains(*n)))
        .collect();
    let manifest = bump_manifest(&read(&manifest_path)?, &current, &version, &depended_on)?;
    let changelog = release_changelog(&read(&changelog_path)?, &version, &date)?;
    if dry_run {
        eprintln!("xtask release: dry run: Cargo.toml and CHANGELOG.md are left as they are");
    } else {
        write(&manifest_path, &manifest)?;
        write(&changelog_path, &changelog)?;
        // The lock file names the workspace's own versions; bring it along, and nothing else.
        cargo(&["update", "--workspace"], &[])?;
        eprintln!("xtask release: {current} -> {version} in Cargo.toml, Cargo.lock, CHANGELOG.md");
    }

    let expected = if dry_run { &current } else { &version };
    let (archive, shown) = dist_archive(&root, &metadata, &version, expected, &changelog)?;
    eprintln!("xtask release: {} ({})", archive.display(), shown.trim());
    if dry_run {
        eprintln!(
            "xtask release: dry run: the binary reports {current}; the archive is named and its \
             CHANGELOG written as {version} would be"
        );
        return Ok(());
    }
    println!("Review the diff and the changelog, then run:\n");
    println!("  git add Cargo.toml Cargo.lock CHANGELOG.md");
    println!("  git commit -m \"Release {version}\"");
    println!("  git tag -a v{version} -m \"clio {version}\"");
    println!("  cargo xtask dist      # the archive again, its binary naming the release commit");
    println!("  git push origin HEAD v{version}");
    println!(
        "  cargo publish {}",
        names.iter().map(|n| format!("-p {n}")).collect::<Vec<_>>().join(" ")
    );
    println!("\nand attach the archive and SHA256SUMS of target/dist to the release.");
    Ok(())
}

/// `cargo xtask dist`: the release archive of the current version and commit (what
/// `release` builds, again after the release commit, so that `--version` names it).
pub(crate) fn dist(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask dist".to_owned());
    }
    let root = project_root();
    let metadata = tidy::metadata(&root, true)?;
    let members = publishable(&metadata)?;
    let version = members.first().map(|m| m.version.clone()).ok_or("no crate to release")?;
    let changelog = read(&root.join("CHANGELOG.md"))?;
    let (archive, shown) = dist_archive(&root, &metadata, &version, &version, &changelog)?;
    eprintln!("xtask dist: {} ({})", archive.display(), shown.trim());
    Ok(())
}

/// Builds `clio` in release mode, checks that `--version` names `expected`, and makes the
/// archive of `version` in the target directory's `dist`; returns it with the version line.
fn dist_archive(
    root: &Path,
    metadata: &Value,
    version: &str,
    expected: &str,
    changelog: &str,
) -> Result<(PathBuf, String), String> {
    cargo(&["build", "--release", "-p", "clio-cli"], &[])?;
    let target_dir = PathBuf::from(
        metadata["target_directory"].as_str().ok_or("cargo metadata names no target directory")?,
    );
    let binary = target_dir.join("release").join("clio");
    let shown = run_capture(&binary, &["--version"])?;
    if !shown.contains(expected) {
        return Err(format!("`clio --version` says `{}`, not {expected}", shown.trim()));
    }
    if !shown.contains('(') {
        eprintln!("xtask: warning: `clio --version` carries no commit (no git?)");
    }
    let stem = format!("clio-{version}-{}", host_triple()?);
    let archive = build_archive(root, &binary, &target_dir.join("dist"), &stem, changelog)?;
    Ok((archive, shown))
}

/// Lays out `dist/stem/` (the binary, README, LICENSE, CHANGELOG, the man page and the
/// completions), packs it as `dist/stem.tar.gz` and writes `dist/SHA256SUMS`.
fn build_archive(
    root: &Path,
    binary: &Path,
    dist: &Path,
    stem: &str,
    changelog: &str,
) -> Result<PathBuf, String> {
    let stage = dist.join(stem);
    if stage.exists() {
        std::fs::remove_dir_all(&stage).map_err(|e| format!("cannot clear {stage:?}: {e}"))?;
    }
    let completions = stage.join("completions");
    let man = stage.join("man");
    for dir in [&completions, &man] {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {dir:?}: {e}"))?;
    }
    copy(binary, &stage.join("clio"))?;
    copy(&root.join("README.md"), &stage.join("README.md"))?;
    copy(&root.join("LICENSE"), &stage.join("LICENSE"))?;
    write(&stage.join("CHANGELOG.md"), changelog)?;
    // One page per command (clio.1, clio-runs.1, clio-runs-list.1, …), as `clio man --dir`
    // writes them: every page another points at is there.
    let man_dir = man.to_str().ok_or_else(|| format!("{man:?} is not UTF-8"))?;
    run_capture(binary, &["man", "--dir", man_dir])?;
    for (shell, file) in [("bash", "clio.bash"), ("zsh", "_clio"), ("fish", "clio.fish")] {
        write(&completions.join(file), &run_capture(binary, &["completions", shell])?)?;
    }
    let name = format!("{stem}.tar.gz");
    let status = Command::new("tar")
        .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner", "-czf", &name, stem])
        .current_dir(dist)
        .status()
        .map_err(|e| format!("cannot run tar: {e}"))?;
    if !status.success() {
        return Err(format!("tar failed making {name}"));
    }
    let archive = dist.join(&name);
    let bytes = std::fs::read(&archive).map_err(|e| format!("cannot read {archive:?}: {e}"))?;
    let sum: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    write(&dist.join("SHA256SUMS"), &format!("{sum}  {name}\n"))?;
    let listing = run_capture(Path::new("tar"), &["-tzf", &archive.to_string_lossy()])?;
    let missing = missing_from_archive(&listing, stem);
    if !missing.is_empty() {
        return Err(format!("{} lacks {}", archive.display(), missing.join(", ")));
    }
    Ok(archive)
}

/// The files every release archive holds, under its `stem/` folder.
pub(crate) const ARCHIVE_FILES: [&str; 8] = [
    "clio",
    "README.md",
    "LICENSE",
    "CHANGELOG.md",
    "man/clio.1",
    "completions/clio.bash",
    "completions/_clio",
    "completions/clio.fish",
];

/// Returns the files of `ARCHIVE_FILES` that `listing` (`tar -t`'s output) does not name
/// under `stem/`.
pub(crate) fn missing_from_archive(listing: &str, stem: &str) -> Vec<String> {
    let names: BTreeSet<&str> = listing.lines().map(|l| l.trim_end_matches('/')).collect();
    ARCHIVE_FILES
        .iter()
        .map(|file| format!("{stem}/{file}"))
        .filter(|path| !names.contains(path.as_str()))
        .collect()
}

/// Returns the host's target triple, from `rustc -vV`.
fn host_triple() -> Result<String, String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let text = run_capture(Path::new(&rustc), &["-vV"])?;
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV names no host".to_owned())
}

/// Runs `program` with `args` and returns its standard output, failing when it fails.
fn run_capture(program: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if !output.status.success() {
        return Err(format!(
            "`{} {}` failed: {}",
            program.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    String::from_utf8(output.stdout)
        .map_err(|e| format!("{} wrote non-UTF-8: {e}", program.display()))
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

#[cfg(test)]
mod tests;
