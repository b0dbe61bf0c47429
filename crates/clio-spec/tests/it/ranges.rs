//! Version ranges and plugin references through the public API: every example and
//! refusal of `docs/version-ranges.md` (read from the file, so doc and tests cannot
//! drift), every example of SPEC §11, error-message snapshots, and property tests that
//! hold `accepts` to an independent reference model of node-semver written here.

use std::cmp::Ordering;

use clio_spec::{
    PluginRef, VersionRange, VersionRangeError, VersionRangeErrorKind, parse_plugin_version,
    validate_id,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use semver::Version;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const DOC: &str = include_str!("../../../../docs/version-ranges.md");

// ---------------------------------------------------------------------------------------
// The tables of docs/version-ranges.md.

/// Returns the rows of the table after `<!-- table: {name} -->`, each as its cells, each
/// cell as the code spans in it (with `\|` read as `|`).
fn doc_table(name: &str) -> Result<Vec<Vec<Vec<String>>>, String> {
    let marker = format!("<!-- table: {name} -->");
    let start = DOC.find(&marker).ok_or(format!("no table {name:?} in the doc"))?;
    let rows: Vec<Vec<Vec<String>>> = DOC[start + marker.len()..]
        .lines()
        .skip_while(|line| line.trim().is_empty())
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .map(|line| {
            let line = line.replace("\\|", "\u{1}");
            let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
            cells.iter().map(|cell| code_spans(&cell.replace('\u{1}', "|"))).collect()
        })
        .collect();
    if rows.is_empty() {
        return Err(format!("table {name:?} has no rows"));
    }
    Ok(rows)
}

fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

fn one(cell: &[String]) -> Result<&str, String> {
    match cell {
        [only] => Ok(only),
        _ => Err(format!("expected one code span, found {cell:?}")),
    }
}

fn plain(cell: &str) -> String {
    cell.trim().to_owned()
}

fn version(s: &str) -> Result<Version, VersionRangeError> {
    parse_plugin_version(s)
}

#[test]
fn doc_examples() -> TestResult {
    let rows = doc_table("examples")?;
    for row in &rows {
        let [range, desugared, accepts, rejects] = &row[..] else {
            return Err(format!("bad row {row:?}").into());
        };
        let range_text = one(range)?;
        let parsed = VersionRange::parse(range_text)?;
        assert_eq!(parsed.desugared().to_string(), one(desugared)?, "desugaring {range_text:?}");
        assert_eq!(VersionRange::parse(&parsed.to_string())?, parsed, "round trip {range_text:?}");
        for v in accepts {
            assert!(parsed.accepts(&version(v)?), "{range_text:?} should accept {v}");
        }
        for v in rejects {
            assert!(!parsed.accepts(&version(v)?), "{range_text:?} should reject {v}");
        }
    }
    assert!(rows.len() >= 25, "the examples table lost rows");
    Ok(())
}

#[test]
fn doc_references() -> TestResult {
    for row in doc_table("references")? {
        let [reference, marketplace, id, range, accepts, rejects] = &row[..] else {
            return Err(format!("bad row {row:?}").into());
        };
        let text = one(reference)?;
        let parsed = PluginRef::parse(text)?;
        assert_eq!(parsed.marketplace(), marketplace.first().map(String::as_str), "{text}");
        assert_eq!(parsed.id(), one(id)?, "{text}");
        assert_eq!(
            parsed.range().map(ToString::to_string).as_deref(),
            range.first().map(String::as_str)
        );
        assert_eq!(PluginRef::parse(&parsed.to_string())?, parsed, "round trip {text:?}");
        for v in accepts {
            assert!(parsed.accepts(v)?, "{text:?} should accept {v}");
        }
        for v in rejects {
            assert!(!parsed.accepts(v)?, "{text:?} should reject {v}");
        }
    }
    Ok(())
}

#[test]
fn doc_intersections() -> TestResult {
    for row in doc_table("intersections")? {
        let [left, right, both] = &row[..] else { return Err(format!("bad row {row:?}").into()) };
        let (left, right) = (VersionRange::parse(one(left)?)?, VersionRange::parse(one(right)?)?);
        assert_eq!(left.intersect(&right).to_string(), one(both)?, "{left} and {right}");
        assert_eq!(right.intersect(&left).to_string(), one(both)?, "{right} and {left}");
    }
    Ok(())
}

#[test]
fn doc_refusals() -> TestResult {
    let rows = doc_table("refusals")?;
    for row in &rows {
        let [input, _, kind, _] = &row[..] else { return Err(format!("bad row {row:?}").into()) };
        let input = one(input)?;
        // The `Parsed as` and `Byte` cells are plain text, so read them from the raw row.
        let line = DOC
            .lines()
            .find(|line| line.starts_with(&format!("| `{}` |", input.replace('|', "\\|"))))
            .ok_or(format!("no raw row for {input:?}"))?;
        let cells: Vec<String> =
            line.replace("\\|", "\u{1}").trim_matches('|').split('|').map(plain).collect();
        let (as_what, byte) = (cells[1].as_str(), cells[3].parse::<usize>()?);
        let err = match as_what {
            "range" => VersionRange::parse(input).err(),
            "reference" => PluginRef::parse(input).err(),
            "version" => parse_plugin_version(input).err(),
            "id" => validate_id(input).err(),
            other => return Err(format!("unknown parser {other:?}").into()),
        }
        .ok_or(format!("{input:?} was accepted as a {as_what}"))?;
        assert_eq!(format!("{:?}", err.kind), one(kind)?, "{input:?}: {err}");
        assert_eq!(err.position, byte, "{input:?}: {err}");
        assert_eq!(err.input, input);
    }
    assert!(rows.len() >= 40, "the refusals table lost rows");
    Ok(())
}

// ---------------------------------------------------------------------------------------
// SPEC §11, example by example.

/// Versions around every bound the SPEC examples use, with and without prereleases.
fn grid() -> Vec<Version> {
    let mut res = Vec::new();
    for major in 0..4 {
        for minor in 0..5 {
            for patch in 0..5 {
                for pre in ["", "-0", "-alpha", "-beta.2", "-beta.4"] {
                    if let Ok(v) = Version::parse(&format!("{major}.{minor}.{patch}{pre}")) {
                        res.push(v);
                    }
                }
            }
        }
    }
    res
}

/// Checks that `sugar` desugars to `plain` and accepts exactly the versions `plain`
/// accepts (parsed as a range of its own).
fn check_equal(sugar: &str, plain: &str) -> TestResult {
    let (a, b) = (VersionRange::parse(sugar)?, VersionRange::parse(plain)?);
    assert_eq!(a.desugared().to_string(), plain, "{sugar}");
    for v in grid() {
        assert_eq!(a.accepts(&v), b.accepts(&v), "{sugar} vs {plain} on {v}");
    }
    Ok(())
}

#[test]
fn spec_caret_minor() -> TestResult {
    check_equal("^1.2", ">=1.2.0 <2.0.0")
}

#[test]
fn spec_caret_zero_major() -> TestResult {
    check_equal("^0.2.3", ">=0.2.3 <0.3.0")
}

#[test]
fn spec_caret_zero_minor() -> TestResult {
    check_equal("^0.0.3", ">=0.0.3 <0.0.4")
}

#[test]
fn spec_tilde_patch() -> TestResult {
    check_equal("~1.2.3", ">=1.2.3 <1.3.0")
}

#[test]
fn spec_tilde_major() -> TestResult {
    check_equal("~1", ">=1.0.0 <2.0.0")
}

#[test]
fn spec_hyphen() -> TestResult {
    check_equal("1.2.3 - 2.3", ">=1.2.3 <2.4.0")
}

#[test]
fn spec_x_range() -> TestResult {
    check_equal("1.x", ">=1.0.0 <2.0.0")
}

#[test]
fn spec_greater_partial() -> TestResult {
    check_equal(">1.2", ">=1.3.0")
}

#[test]
fn spec_less_equal_partial() -> TestResult {
    check_equal("<=1.2", "<1.3.0")
}

#[test]
fn spec_star() -> TestResult {
    let any = VersionRange::parse("*")?;
    assert_eq!(any, VersionRange::any());
    for v in grid() {
        assert_eq!(any.accepts(&v), v.pre.is_empty(), "{v}");
    }
    Ok(())
}

#[test]
fn spec_prerelease_rule() -> TestResult {
    let range = VersionRange::parse("^1.2.3-beta.2")?;
    assert!(range.accepts(&version("1.2.3-beta.4")?));
    assert!(!range.accepts(&version("1.2.4-beta.2")?));
    Ok(())
}

#[test]
fn spec_plugin_ref() -> TestResult {
    let r = PluginRef::parse("clio/pdf@^1.2")?;
    assert_eq!((r.marketplace(), r.id()), (Some("clio"), "pdf"));
    assert_eq!(r.range(), Some(&VersionRange::parse("^1.2")?));
    assert!(r.accepts("1.4.0")?);
    assert_eq!(r.to_string(), "clio/pdf@^1.2");
    Ok(())
}

/// One of the four parsers, reduced to its error.
type Parser = fn(&str) -> Option<VersionRangeError>;

#[test]
fn spec_refusals() -> TestResult {
    use VersionRangeErrorKind as K;
    let cases: [(&str, Parser, K, usize); 8] = [
        ("pdf@", |s| PluginRef::parse(s).err(), K::EmptyRange, 4),
        ("pdf@latest", |s| PluginRef::parse(s).err(), K::Tag, 4),
        ("1.x.3", |s| VersionRange::parse(s).err(), K::WildcardThenNumber, 4),
        ("^1.2-beta", |s| VersionRange::parse(s).err(), K::PrereleaseOnPartial, 4),
        ("^01.2", |s| VersionRange::parse(s).err(), K::LeadingZero, 1),
        ("^1 || || ^2", |s| VersionRange::parse(s).err(), K::EmptyBranch, 6),
        (">=1 <", |s| VersionRange::parse(s).err(), K::DanglingOperator, 4),
        ("v1.2.3", |s| VersionRange::parse(s).err(), K::VPrefix, 0),
    ];
    for (input, parse, kind, position) in cases {
        let err = parse(input).ok_or(format!("{input:?} parsed"))?;
        assert_eq!((err.kind, err.position), (kind, position), "{input:?}");
    }
    Ok(())
}

#[test]
fn length_limits() -> TestResult {
    let long = format!(">=1.0.0{}", " ".repeat(249));
    assert_eq!(long.len(), 256);
    VersionRange::parse(&long)?;
    let too_long = format!("{long} ");
    let err = VersionRange::parse(&too_long).err().ok_or("257 bytes parsed")?;
    assert_eq!((err.kind, err.position), (VersionRangeErrorKind::TooLong, 256));

    let err = PluginRef::parse(&format!("clio/pdf@{too_long}")).err().ok_or("ref parsed")?;
    assert_eq!((err.kind, err.position), (VersionRangeErrorKind::TooLong, 9 + 256));

    let id = "a".repeat(64);
    validate_id(&id)?;
    let err = validate_id(&format!("{id}b")).err().ok_or("65-byte id")?;
    assert_eq!((err.kind, err.position), (VersionRangeErrorKind::InvalidId, 64));

    let pre = "a".repeat(250);
    parse_plugin_version(&format!("1.0.0-{pre}"))?;
    let err = parse_plugin_version(&format!("10.0.0-{pre}")).err().ok_or("257-byte version")?;
    assert_eq!((err.kind, err.position), (VersionRangeErrorKind::TooLong, 256));
    Ok(())
}

#[test]
fn plugin_versions_keep_build_metadata() -> TestResult {
    let v = parse_plugin_version("1.2.3-rc.1+build.007")?;
    assert_eq!((v.major, v.minor, v.patch), (1, 2, 3));
    assert_eq!((v.pre.as_str(), v.build.as_str()), ("rc.1", "build.007"));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Error messages.

fn message(result: Result<impl std::fmt::Debug, VersionRangeError>) -> String {
    match result {
        Ok(value) => format!("unexpectedly parsed: {value:?}"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn error_messages() {
    insta::assert_snapshot!(message(PluginRef::parse("pdf@")), @"empty version range at byte 4 of `pdf@`; write a range such as `^1.2` or `>=1.0.0 <2.0.0`, or leave out `@` to accept any release");
    insta::assert_snapshot!(message(PluginRef::parse("pdf@latest")), @"tag `latest` is not a version range at byte 4 of `pdf@latest`; name versions with a range such as `^1.2`, `~1.2.3` or `*`");
    insta::assert_snapshot!(message(PluginRef::parse("Clio/pdf")), @"invalid id or marketplace name, found `C` at byte 0 of `Clio/pdf`; ids are 1 to 64 characters from `a-z`, `0-9`, `-` and `_`, starting with a letter or digit");
    insta::assert_snapshot!(message(VersionRange::parse("1.x.3")), @"number `3` after a wildcard at byte 4 of `1.x.3`; after `x`, `X` or `*` every part must be a wildcard, as in `1.x`");
    insta::assert_snapshot!(message(VersionRange::parse("^1.2-beta")), @"prerelease `-beta` on a partial version at byte 4 of `^1.2-beta`; a prerelease needs a full MAJOR.MINOR.PATCH, as in `^1.2.0-beta`");
    insta::assert_snapshot!(message(VersionRange::parse("^1.02")), @"number `02` has a leading zero at byte 3 of `^1.02`; write it as `2`");
    insta::assert_snapshot!(message(VersionRange::parse("^1 || || ^2")), @"empty `||` branch at byte 6 of `^1 || || ^2`; put a comparator set on both sides of `||`, as in `^1.2 || ^2`");
    insta::assert_snapshot!(message(VersionRange::parse(">=1 <")), @"operator `<` has no version after it at byte 4 of `>=1 <`; follow it with a version, as in `<2.0.0`");
    insta::assert_snapshot!(message(VersionRange::parse("v1.2.3")), @"version `v1.2.3` has a `v` prefix at byte 0 of `v1.2.3`; write the version without `v`, as in `1.2.3`");
    insta::assert_snapshot!(message(VersionRange::parse("1.2.3+build")), @"build metadata `+build` in a version range at byte 5 of `1.2.3+build`; build metadata never affects which versions match; remove it");
    insta::assert_snapshot!(message(VersionRange::parse(">=1 - 2")), @"misplaced hyphen range at byte 4 of `>=1 - 2`; a hyphen range `A - B` is a whole comparator set: two versions without operators, as in `1.2.3 - 2.3`");
    insta::assert_snapshot!(message(VersionRange::parse("~>1.2")), @"unexpected `>` at byte 1 of `~>1.2`; expected a version such as `1.2.3`, or comparators such as `>=1.2.0 <2.0.0`, `^1.2`, `~1.2.3`, `1.x` or `1.2.3 - 2.3` separated by spaces and joined by `||`");
    insta::assert_snapshot!(message(VersionRange::parse("1.")), @"version ends after `.` at byte 2 of `1.`; after `.` comes a number, `x`, `X` or `*`");
    insta::assert_snapshot!(message(VersionRange::parse("1.2.3-a..b")), @"invalid prerelease, found `.` at byte 8 of `1.2.3-a..b`; a prerelease is `-` then identifiers of `0-9`, `A-Z`, `a-z` and `-`, separated by `.`, as in `1.2.3-beta.2`");
    insta::assert_snapshot!(message(VersionRange::parse("^18446744073709551615")), @"version `18446744073709551615` has a number too large at byte 1 of `^18446744073709551615`; version parts are at most 18446744073709551615, and one less where a range adds one (`^`, `~`, `>` or `<=` on a partial version, x-ranges, the end of a hyphen range)");
    insta::assert_snapshot!(message(VersionRange::parse(&"1".repeat(300))), @"too long (300 bytes) at byte 256 of `11111111111111111111111111111111111111111111111111111111111111111111111111111111…`; ranges and plugin versions are at most 256 bytes");
    insta::assert_snapshot!(message(parse_plugin_version("1.2")), @"invalid plugin version, found the end at byte 3 of `1.2`; a plugin version is a full MAJOR.MINOR.PATCH[-pre][+build], as in `1.4.0`");
    insta::assert_snapshot!(message(parse_plugin_version("1.2.3+")), @"invalid build metadata, found the end at byte 6 of `1.2.3+`; build metadata is `+` then identifiers of `0-9`, `A-Z`, `a-z` and `-`, separated by `.`, as in `1.2.3+build.5`");
    insta::assert_snapshot!(message(validate_id(&"a".repeat(65))), @"id or marketplace name longer than 64 characters at byte 64 of `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa`; ids are 1 to 64 characters from `a-z`, `0-9`, `-` and `_`, starting with a letter or digit");
}

// ---------------------------------------------------------------------------------------
// Property tests against a reference model.

/// A reference version: numbers and prerelease identifiers, compared by the semver
/// specification's rules, implemented here without the `semver` crate.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RefVersion {
    tuple: (u64, u64, u64),
    pre: Vec<String>,
}

impl RefVersion {
    fn new(major: u64, minor: u64, patch: u64, pre: &str) -> RefVersion {
        let pre =
            if pre.is_empty() { Vec::new() } else { pre.split('.').map(str::to_owned).collect() };
        RefVersion { tuple: (major, minor, patch), pre }
    }

    fn text(&self) -> String {
        let (a, b, c) = self.tuple;
        if self.pre.is_empty() {
            format!("{a}.{b}.{c}")
        } else {
            format!("{a}.{b}.{c}-{}", self.pre.join("."))
        }
    }

    fn cmp(&self, other: &RefVersion) -> Ordering {
        self.tuple.cmp(&other.tuple).then_with(|| {
            match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let ord = match (a.parse::<u64>(), b.parse::<u64>()) {
                            (Ok(a), Ok(b)) => a.cmp(&b),
                            (Ok(_), Err(_)) => Ordering::Less,
                            (Err(_), Ok(_)) => Ordering::Greater,
                            (Err(_), Err(_)) => a.cmp(b),
                        };
                        if ord != Ordering::Equal {
                            return ord;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            }
        })
    }
}

/// One generated version part: a number, or a wildcard spelled `x`, `X` or `*`.
#[derive(Clone, Debug)]
enum Xr {
    Num(u64),
    Wild(char),
}

#[derive(Clone, Debug)]
struct GenPartial {
    // Invariant: 1 to 3 parts, no number after a wildcard, `pre` only on 3 numbers.
    parts: Vec<Xr>,
    pre: String,
}

impl GenPartial {
    fn text(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|p| match p {
                Xr::Num(n) => n.to_string(),
                Xr::Wild(c) => c.to_string(),
            })
            .collect();
        let pre = if self.pre.is_empty() { String::new() } else { format!("-{}", self.pre) };
        format!("{}{pre}", parts.join("."))
    }

    /// The numbers before the first wildcard.
    fn nums(&self) -> Vec<u64> {
        self.parts
            .iter()
            .map_while(|p| match p {
                Xr::Num(n) => Some(*n),
                Xr::Wild(_) => None,
            })
            .collect()
    }
}

#[derive(Clone, Debug)]
enum GenTerm {
    Op(&'static str, GenPartial, bool),
    Tilde(GenPartial, bool),
    Caret(GenPartial, bool),
    Hyphen(GenPartial, GenPartial),
}

impl GenTerm {
    fn text(&self) -> String {
        let ws = |space: &bool| if *space { " " } else { "" };
        match self {
            GenTerm::Op(op, p, space) => format!("{op}{}{}", ws(space), p.text()),
            GenTerm::Tilde(p, space) => format!("~{}{}", ws(space), p.text()),
            GenTerm::Caret(p, space) => format!("^{}{}", ws(space), p.text()),
            GenTerm::Hyphen(a, b) => format!("{} - {}", a.text(), b.text()),
        }
    }
}

#[derive(Clone, Debug)]
struct GenRange {
    sets: Vec<Vec<GenTerm>>,
    wide: bool,
}

impl GenRange {
    fn text(&self) -> String {
        let (space, or) = if self.wide { ("  ", "  ||  ") } else { (" ", "||") };
        let sets: Vec<String> = self
            .sets
            .iter()
            .map(|set| set.iter().map(GenTerm::text).collect::<Vec<_>>().join(space))
            .collect();
        sets.join(or)
    }
}

/// A reference comparator: an operator and a version.
type RefComparator = (&'static str, RefVersion);

/// node-semver 7's desugaring, re-derived from its documentation (`README.md`, "Advanced
/// Range Syntax") rather than from the crate's code.
fn reference_desugar(term: &GenTerm) -> Vec<RefComparator> {
    let v = |a: u64, b: u64, c: u64| RefVersion::new(a, b, c, "");
    let v0 = |a: u64, b: u64, c: u64| RefVersion::new(a, b, c, "0");
    let full = |p: &GenPartial| {
        let n = p.nums();
        (n.len() == 3).then(|| RefVersion::new(n[0], n[1], n[2], &p.pre))
    };
    match term {
        GenTerm::Op(op, p, _) => {
            if let Some(version) = full(p) {
                return vec![(if *op == "=" { "" } else { op }, version)];
            }
            let n = p.nums();
            match (*op, n.as_slice()) {
                (">" | "<", []) => vec![("<", v0(0, 0, 0))],
                (_, []) => vec![],
                ("" | "=", [a]) => vec![(">=", v(*a, 0, 0)), ("<", v0(a + 1, 0, 0))],
                ("" | "=", [a, b, ..]) => vec![(">=", v(*a, *b, 0)), ("<", v0(*a, b + 1, 0))],
                (">", [a]) => vec![(">=", v(a + 1, 0, 0))],
                (">", [a, b, ..]) => vec![(">=", v(*a, b + 1, 0))],
                (">=", [a]) => vec![(">=", v(*a, 0, 0))],
                (">=", [a, b, ..]) => vec![(">=", v(*a, *b, 0))],
                ("<", [a]) => vec![("<", v0(*a, 0, 0))],
                ("<", [a, b, ..]) => vec![("<", v0(*a, *b, 0))],
                ("<=", [a]) => vec![("<", v0(a + 1, 0, 0))],
                ("<=", [a, b, ..]) => vec![("<", v0(*a, b + 1, 0))],
                _ => vec![],
            }
        }
        GenTerm::Tilde(p, _) => {
            let n = p.nums();
            match n.as_slice() {
                [] => vec![],
                [a] => vec![(">=", v(*a, 0, 0)), ("<", v0(a + 1, 0, 0))],
                [a, b] => vec![(">=", v(*a, *b, 0)), ("<", v0(*a, b + 1, 0))],
                [a, b, c, ..] => {
                    vec![(">=", RefVersion::new(*a, *b, *c, &p.pre)), ("<", v0(*a, b + 1, 0))]
                }
            }
        }
        GenTerm::Caret(p, _) => {
            let n = p.nums();
            match n.as_slice() {
                [] => vec![],
                [a] => vec![(">=", v(*a, 0, 0)), ("<", v0(a + 1, 0, 0))],
                [0, b] => vec![(">=", v(0, *b, 0)), ("<", v0(0, b + 1, 0))],
                [a, b] => vec![(">=", v(*a, *b, 0)), ("<", v0(a + 1, 0, 0))],
                [a, b, c, ..] => {
                    let lower = RefVersion::new(*a, *b, *c, &p.pre);
                    let upper = match (a, b) {
                        (0, 0) => v0(0, 0, c + 1),
                        (0, _) => v0(0, b + 1, 0),
                        _ => v0(a + 1, 0, 0),
                    };
                    vec![(">=", lower), ("<", upper)]
                }
            }
        }
        GenTerm::Hyphen(from, to) => {
            let mut res = Vec::new();
            match (full(from), from.nums().as_slice()) {
                (Some(version), _) => res.push((">=", version)),
                (None, []) => {}
                (None, [a]) => res.push((">=", v(*a, 0, 0))),
                (None, [a, b, ..]) => res.push((">=", v(*a, *b, 0))),
            }
            match (full(to), to.nums().as_slice()) {
                (Some(version), _) => res.push(("<=", version)),
                (None, []) => {}
                (None, [a]) => res.push(("<", v0(a + 1, 0, 0))),
                (None, [a, b, ..]) => res.push(("<", v0(*a, b + 1, 0))),
            }
            res
        }
    }
}

/// node-semver's `testSet`, on the reference model.
fn reference_accepts(range: &GenRange, version: &RefVersion) -> bool {
    range.sets.iter().any(|set| {
        let comparators: Vec<RefComparator> = set.iter().flat_map(reference_desugar).collect();
        let all = comparators.iter().all(|(op, bound)| {
            let ord = version.cmp(bound);
            match *op {
                "" => ord == Ordering::Equal,
                "<" => ord == Ordering::Less,
                "<=" => ord != Ordering::Greater,
                ">" => ord == Ordering::Greater,
                _ => ord != Ordering::Less,
            }
        });
        all && (version.pre.is_empty()
            || comparators
                .iter()
                .any(|(_, bound)| !bound.pre.is_empty() && bound.tuple == version.tuple))
    })
}

const PRERELEASES: [&str; 7] = ["0", "1", "alpha", "alpha.1", "beta", "beta.2", "rc.1"];

fn pre_strategy() -> impl Strategy<Value = String> {
    prop_oneof![3 => Just(String::new()), 2 => proptest::sample::select(&PRERELEASES[..]).prop_map(str::to_owned)]
}

fn partial_strategy() -> impl Strategy<Value = GenPartial> {
    let xr = prop_oneof![4 => (0u64..3).prop_map(Xr::Num), 1 => proptest::sample::select(vec!['x', 'X', '*']).prop_map(Xr::Wild)];
    (proptest::collection::vec(xr, 1..=3), pre_strategy()).prop_map(|(mut parts, pre)| {
        // No number may follow a wildcard: turn everything after the first one into `x`.
        if let Some(first_wild) = parts.iter().position(|p| matches!(p, Xr::Wild(_))) {
            for p in &mut parts[first_wild..] {
                if let Xr::Num(_) = p {
                    *p = Xr::Wild('x');
                }
            }
        }
        let full = parts.len() == 3 && parts.iter().all(|p| matches!(p, Xr::Num(_)));
        GenPartial { parts, pre: if full { pre } else { String::new() } }
    })
}

fn term_strategy() -> impl Strategy<Value = GenTerm> {
    let op = proptest::sample::select(vec!["", "=", "<", "<=", ">", ">="]);
    prop_oneof![
        (op, partial_strategy(), any::<bool>()).prop_map(|(op, p, space)| GenTerm::Op(
            op,
            p,
            space && !op.is_empty()
        )),
        (partial_strategy(), any::<bool>()).prop_map(|(p, space)| GenTerm::Tilde(p, space)),
        (partial_strategy(), any::<bool>()).prop_map(|(p, space)| GenTerm::Caret(p, space)),
    ]
}

fn set_strategy() -> impl Strategy<Value = Vec<GenTerm>> {
    prop_oneof![
        4 => proptest::collection::vec(term_strategy(), 1..=3),
        1 => (partial_strategy(), partial_strategy()).prop_map(|(a, b)| vec![GenTerm::Hyphen(a, b)]),
    ]
}

fn range_strategy() -> impl Strategy<Value = GenRange> {
    (proptest::collection::vec(set_strategy(), 1..=3), any::<bool>())
        .prop_map(|(sets, wide)| GenRange { sets, wide })
}

fn version_strategy() -> impl Strategy<Value = RefVersion> {
    (0u64..5, 0u64..5, 0u64..5, pre_strategy())
        .prop_map(|(a, b, c, pre)| RefVersion::new(a, b, c, &pre))
}

/// Versions at and next to every version `range` mentions, each with and without
/// prereleases: where desugaring and the prerelease rule can go wrong.
fn edge_versions(range: &GenRange) -> Vec<RefVersion> {
    let mut tuples = Vec::new();
    for term in range.sets.iter().flatten() {
        let partials = match term {
            GenTerm::Op(_, p, _) | GenTerm::Tilde(p, _) | GenTerm::Caret(p, _) => vec![p],
            GenTerm::Hyphen(a, b) => vec![a, b],
        };
        for p in partials {
            let n = p.nums();
            let (a, b, c) = (
                n.first().copied().unwrap_or(0),
                n.get(1).copied().unwrap_or(0),
                n.get(2).copied().unwrap_or(0),
            );
            tuples.extend([(a, b, c), (a, b, c + 1), (a, b + 1, 0), (a + 1, 0, 0)]);
            tuples.extend([(a, b, c.saturating_sub(1)), (a, b.saturating_sub(1), 9)]);
        }
    }
    let mut res = Vec::new();
    for (a, b, c) in tuples {
        for pre in ["", "0", "alpha", "beta.2", "rc.1"] {
            let v = RefVersion::new(a, b, c, pre);
            if !res.contains(&v) {
                res.push(v);
            }
        }
    }
    res
}

fn to_semver(v: &RefVersion) -> Result<Version, TestCaseError> {
    parse_plugin_version(&v.text()).map_err(|e| TestCaseError::fail(e.to_string()))
}

fn parse_gen(range: &GenRange) -> Result<VersionRange, TestCaseError> {
    let text = range.text();
    VersionRange::parse(&text).map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))
}

fn parse_text(text: &str) -> Result<VersionRange, TestCaseError> {
    VersionRange::parse(text).map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))
}

proptest! {
    // Failing seeds go to the crate's `proptest-regressions/` (cargo runs tests from the
    // crate root), where they are committed and re-run first.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/ranges.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn accepts_agrees_with_the_reference_model(
        range in range_strategy(),
        versions in proptest::collection::vec(version_strategy(), 16),
    ) {
        let parsed = parse_gen(&range)?;
        for v in versions.iter().chain(&edge_versions(&range)) {
            prop_assert_eq!(
                parsed.accepts(&to_semver(v)?),
                reference_accepts(&range, v),
                "{:?} on {}", range.text(), v.text()
            );
        }
    }

    #[test]
    fn print_then_parse_round_trips(range in range_strategy()) {
        let parsed = parse_gen(&range)?;
        let printed = parsed.to_string();
        let reparsed = parse_text(&printed)?;
        prop_assert_eq!(&reparsed, &parsed, "{:?} printed as {:?}", range.text(), printed);
        prop_assert_eq!(reparsed.to_string(), printed);
    }

    #[test]
    fn desugared_accepts_the_same(
        range in range_strategy(),
        versions in proptest::collection::vec(version_strategy(), 16),
    ) {
        let parsed = parse_gen(&range)?;
        let desugared = parse_text(&parsed.desugared().to_string())?;
        prop_assert_eq!(&desugared, &parsed.desugared());
        for v in versions.iter().chain(&edge_versions(&range)) {
            let v = to_semver(v)?;
            prop_assert_eq!(desugared.accepts(&v), parsed.accepts(&v), "{} vs {} on {}", parsed, desugared, v);
        }
    }

    #[test]
    fn intersection_accepts_what_both_accept(
        a in range_strategy(),
        b in range_strategy(),
        versions in proptest::collection::vec(version_strategy(), 24),
    ) {
        let edges: Vec<RefVersion> = edge_versions(&a).into_iter().chain(edge_versions(&b)).collect();
        let (a, b) = (parse_gen(&a)?, parse_gen(&b)?);
        let both = a.intersect(&b);
        for v in versions.iter().chain(&edges) {
            let v = to_semver(v)?;
            prop_assert_eq!(both.accepts(&v), a.accepts(&v) && b.accepts(&v), "{} and {} gave {} on {}", a, b, both, v);
        }
        let printed = both.to_string();
        if printed.len() <= 256 {
            prop_assert_eq!(parse_text(&printed)?, both);
        }
    }

    #[test]
    fn plugin_refs_round_trip(
        marketplace in proptest::option::of("[a-z0-9][a-z0-9_-]{0,63}"),
        id in "[a-z0-9][a-z0-9_-]{0,63}",
        range in proptest::option::of(range_strategy()),
    ) {
        let mut text = String::new();
        if let Some(m) = &marketplace {
            text.push_str(m);
            text.push('/');
        }
        text.push_str(&id);
        if let Some(r) = &range {
            text.push('@');
            text.push_str(&r.text());
        }
        let parsed = PluginRef::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.marketplace(), marketplace.as_deref());
        prop_assert_eq!(parsed.id(), id.as_str());
        prop_assert_eq!(parsed.range().is_some(), range.is_some());
        let reparsed = PluginRef::parse(&parsed.to_string()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(reparsed, parsed);
    }

    #[test]
    fn plugin_versions_agree_with_the_semver_crate(text in "[0-9vx.+-]{0,4}[0-9.]{1,8}(-[0-9a-z.-]{0,8})?(\\+[0-9a-z.-]{0,8})?") {
        let ours = parse_plugin_version(&text);
        let theirs = Version::parse(&text);
        prop_assert_eq!(ours.as_ref().ok(), theirs.as_ref().ok(), "{:?}: ours {:?}", text, ours);
    }

    #[test]
    fn parsers_never_panic_and_point_inside_the_input(text in "[0-9xX*.^~<>=| a-z@/_+-]{0,40}|\\PC{0,40}") {
        let results = [
            VersionRange::parse(&text).err(),
            PluginRef::parse(&text).err(),
            parse_plugin_version(&text).err(),
            validate_id(&text).err(),
        ];
        for err in results.into_iter().flatten() {
            prop_assert!(err.position <= text.len(), "{:?}: {}", text, err);
            prop_assert!(text.is_char_boundary(err.position), "{:?}: {}", text, err);
            prop_assert_eq!(&err.input, &text);
            prop_assert!(!err.to_string().is_empty());
        }
    }
}
