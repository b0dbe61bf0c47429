//! Tests of the pure parts of a release: the crate order, version rules, the manifest bump
//! and the changelog rewrite. The release build itself is not run here (minutes on two
//! cores); `cargo xtask release VERSION --dry-run` exercises it.

use std::collections::BTreeSet;

use serde_json::json;

use super::*;

fn member(name: &str, deps: &[&str]) -> Member {
    Member {
        name: name.to_owned(),
        version: "0.1.0".to_owned(),
        internal: deps.iter().map(|d| (*d).to_owned()).collect::<BTreeSet<_>>(),
    }
}

fn names(members: &[Member]) -> Vec<&str> {
    members.iter().map(|m| m.name.as_str()).collect()
}

#[test]
fn crates_come_after_what_they_depend_on() {
    let ordered = dependency_order(vec![
        member("clio-cli", &["clio-flow", "clio-spec"]),
        member("clio-flow", &["clio-spec", "clio-models"]),
        member("clio-models", &["clio-spec"]),
        member("clio-spec", &[]),
    ])
    .unwrap();
    assert_eq!(names(&ordered), ["clio-spec", "clio-models", "clio-flow", "clio-cli"]);
}

#[test]
fn a_cycle_is_named() {
    let error = dependency_order(vec![member("a", &["b"]), member("b", &["a"])]).unwrap_err();
    assert!(error.contains("[\"a\", \"b\"]"), "{error}");
}

#[test]
fn unpublished_members_and_outside_crates_are_left_out() {
    let metadata = json!({
        "workspace_members": ["s", "f", "x"],
        "packages": [
            {"id": "s", "name": "clio-spec", "version": "0.1.0", "publish": null,
             "dependencies": [{"name": "serde"}]},
            {"id": "f", "name": "clio-flow", "version": "0.1.0", "publish": null,
             "dependencies": [{"name": "clio-spec"}, {"name": "xtask"}]},
            {"id": "x", "name": "xtask", "version": "0.1.0", "publish": [],
             "dependencies": []},
            {"id": "serde", "name": "serde", "version": "1.0.0", "publish": null,
             "dependencies": []},
        ]
    });
    let members = publishable(&metadata).unwrap();
    assert_eq!(names(&members), ["clio-spec", "clio-flow"]);
    assert_eq!(members[1].internal, BTreeSet::from(["clio-spec".to_owned(), "xtask".to_owned()]));
}

#[test]
fn versions_follow_semver() {
    for good in ["0.1.0", "1.0.0-rc.1", "1.0.0+build.5", "10.20.30-alpha-1.0+x"] {
        assert_eq!(Version::parse(good).unwrap().to_string(), good);
    }
    for bad in ["1.0", "v1.0.0", "01.0.0", "1.0.0-", "1.0.0-rc..1", "1.0.0-01", "1.0.0+", "1.a.0"] {
        assert!(Version::parse(bad).is_err(), "{bad} was accepted");
    }
}

#[test]
fn the_next_version_must_be_greater() {
    assert!(check_next("0.1.0", "0.1.1").is_ok());
    assert!(check_next("0.1.0", "0.2.0-alpha.1").is_ok());
    assert!(check_next("1.0.0-alpha.2", "1.0.0-alpha.10").is_ok());
    assert!(check_next("1.0.0-alpha", "1.0.0-alpha.1").is_ok());
    assert!(check_next("1.0.0-alpha.1", "1.0.0-beta").is_ok());
    assert!(check_next("1.0.0-rc.1", "1.0.0").is_ok());
    let same = check_next("0.1.0", "0.1.0+build").unwrap_err();
    assert!(same.contains("not greater than the current version 0.1.0"), "{same}");
    assert!(check_next("0.2.0", "0.1.9").is_err());
    assert!(check_next("1.0.0", "1.0.0-rc.1").is_err());
    assert!(check_next("0.1.0", "0.2").unwrap_err().contains("three numbers"));
}

#[test]
fn the_next_version_can_be_named_by_its_kind() {
    let next = |current: &str, kind: &str| check_next(current, kind).unwrap().to_string();
    assert_eq!(next("0.1.0", "patch"), "0.1.1");
    assert_eq!(next("0.1.3+build", "minor"), "0.2.0");
    assert_eq!(next("0.9.2", "major"), "1.0.0");
    // A prerelease's own kind of release is the release it leads to.
    assert_eq!(next("1.2.3-rc.1", "patch"), "1.2.3");
    assert_eq!(next("1.3.0-rc.1", "minor"), "1.3.0");
    assert_eq!(next("1.3.1-rc.1", "minor"), "1.4.0");
    assert_eq!(next("2.0.0-alpha", "major"), "2.0.0");
    assert_eq!(next("2.1.0-alpha", "major"), "3.0.0");
}

const MANIFEST: &str = r#"[workspace]
members = ["crates/*", "xtask"]

[workspace.package]
version = "0.1.0"
edition = "2024"

[workspace.dependencies]
clio-spec = { path = "crates/clio-spec", version = "0.1.0" }
clio-flow = { path = "crates/clio-flow", version = "0.1.0" }
serde = { version = "0.1.0" }
"#;

#[test]
fn the_bump_changes_the_workspace_and_internal_versions_only() {
    let bumped = bump_manifest(MANIFEST, "0.1.0", "0.2.0", &["clio-spec", "clio-flow"]).unwrap();
    assert_eq!(
        bumped,
        MANIFEST
            .replace("version = \"0.1.0\"\nedition", "version = \"0.2.0\"\nedition",)
            .replace("clio-spec\", version = \"0.1.0\"", "clio-spec\", version = \"0.2.0\"",)
            .replace("clio-flow\", version = \"0.1.0\"", "clio-flow\", version = \"0.2.0\"",)
    );
    assert!(bumped.contains("serde = { version = \"0.1.0\" }"));
}

#[test]
fn the_bump_refuses_a_crate_without_the_current_version() {
    let no_version = MANIFEST.replace("clio-flow\", version = \"0.1.0\"", "clio-flow\"");
    let error = bump_manifest(&no_version, "0.1.0", "0.2.0", &["clio-spec", "clio-flow"]);
    assert!(error.unwrap_err().contains("gives clio-flow no `version = \"0.1.0\"`"));
    let unlisted = bump_manifest(MANIFEST, "0.1.0", "0.2.0", &["clio-spec", "clio-models"]);
    assert!(unlisted.unwrap_err().contains("clio-models"));
    let other = bump_manifest(MANIFEST, "0.0.9", "0.2.0", &["clio-spec"]);
    assert!(other.unwrap_err().contains("[workspace.package] does not say"));
}

const CHANGELOG: &str = "# Changelog

Intro.

## [Unreleased]

### Journal

- A change.

## [0.1.0] - 2026-01-01

- First.

[Unreleased]: https://example.org/clio/compare/v0.1.0...HEAD
[0.1.0]: https://example.org/clio/releases/tag/v0.1.0
";

#[test]
fn the_changelog_moves_unreleased_entries_under_the_version() {
    let released = release_changelog(CHANGELOG, "0.2.0", "2026-12-01").unwrap();
    let expected = "# Changelog

Intro.

## [Unreleased]

## [0.2.0] - 2026-12-01

### Journal

- A change.

## [0.1.0] - 2026-01-01

- First.

[Unreleased]: https://example.org/clio/compare/v0.2.0...HEAD
[0.2.0]: https://example.org/clio/compare/v0.1.0...v0.2.0
[0.1.0]: https://example.org/clio/releases/tag/v0.1.0
";
    assert_eq!(released, expected);
}

#[test]
fn the_changelog_refuses_nothing_to_release_or_a_repeated_version() {
    let empty = release_changelog(&released_once(), "0.3.0", "2026-12-02").unwrap_err();
    assert!(empty.contains("Unreleased section is empty"), "{empty}");
    let again = release_changelog(CHANGELOG, "0.1.0", "2026-12-01").unwrap_err();
    assert!(again.contains("already has a section for 0.1.0"), "{again}");
    let none = release_changelog("# Changelog\n", "0.2.0", "2026-12-01").unwrap_err();
    assert!(none.contains("no `## [Unreleased]`"), "{none}");
}

fn released_once() -> String {
    release_changelog(CHANGELOG, "0.2.0", "2026-12-01").unwrap()
}

#[test]
fn dates_are_utc_calendar_days() {
    assert_eq!(utc_date(0), "1970-01-01");
    assert_eq!(utc_date(951_782_400), "2000-02-29");
    assert_eq!(utc_date(1_796_105_045), "2026-12-01");
}

#[test]
fn an_archive_missing_a_file_is_named() {
    let stem = "clio-0.1.1-x86_64-unknown-linux-gnu";
    let full: String = std::iter::once(format!("{stem}/"))
        .chain(ARCHIVE_FILES.iter().map(|f| format!("{stem}/{f}")))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(missing_from_archive(&full, stem).is_empty());
    let without_man = full.replace(&format!("{stem}/man/clio.1\n"), "");
    assert_eq!(missing_from_archive(&without_man, stem), [format!("{stem}/man/clio.1")]);
}
