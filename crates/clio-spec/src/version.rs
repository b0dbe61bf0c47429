//! Version ranges, plugin versions and ids: node-semver's range grammar (SPEC §11),
//! desugared into comparator sets and evaluated with node-semver's prerelease rule.
//!
//! A [`VersionRange`] keeps its terms as written (`^1.2` prints as `^1.2`) next to their
//! desugared comparator sets (`>=1.2.0 <2.0.0-0`), which [`VersionRange::accepts`]
//! evaluates. Desugaring follows node-semver 7 (`classes/range.js`) with
//! `includePrerelease` off. Parsing fails closed: whatever node-semver's `range.bnf`
//! does not describe, and every refusal listed in SPEC §11, is an error with a byte
//! position. `docs/version-ranges.md` documents the grammar; its example tables are run
//! by the tests.
//!
//! Deliberately not here: `includePrerelease`, node's loose mode, coercion, and any
//! serde derive (references travel as strings).

mod error;
mod parse;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use semver::{Prerelease, Version};

pub use error::{VersionRangeError, VersionRangeErrorKind};
pub(crate) use parse::{id_error_at, parse_range_within};
pub use parse::{parse_plugin_version, validate_id};

/// The longest range or plugin version accepted, in bytes (SPEC §11).
pub(crate) const MAX_RANGE_LEN: usize = 256;
/// The longest id or marketplace name accepted, in bytes (SPEC §11).
pub(crate) const MAX_ID_LEN: usize = 64;
/// The largest numeric version part accepted: `u64::MAX`, the largest that
/// [`semver::Version`] holds.
pub(crate) const MAX_NUMBER: u64 = u64::MAX;

/// Says which versions a plugin reference accepts: node-semver's range grammar.
///
/// Parse one with [`VersionRange::parse`]; it prints back (`Display`) in a canonical form
/// that parses to an equal range, and [`VersionRange::desugared`] shows the comparator
/// sets it stands for (`^1.2` → `>=1.2.0 <2.0.0`). Several references to one plugin
/// combine with [`VersionRange::intersect`].
///
/// A prerelease version is accepted only by a comparator set that names a prerelease of
/// the same `MAJOR.MINOR.PATCH`, so `^1.2.3-beta.2` admits `1.2.3-beta.4` but not
/// `1.2.4-beta.2`, and `*` admits no prerelease at all.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VersionRange {
    // Invariant: at least one set, every set non-empty, and a `Term::Hyphen` is alone in
    // its set.
    sets: Vec<Vec<Term>>,
    // Invariant: `desugared[i]` is the desugaring of `sets[i]`; an empty set is `*`.
    desugared: Vec<Vec<Comparator>>,
}

impl VersionRange {
    /// Parses `s` as a node-semver range, refusing everything SPEC §11 refuses.
    ///
    /// Surrounding whitespace is ignored, as node-semver ignores it. Errors carry the
    /// byte position in `s` and a [`VersionRangeErrorKind`].
    pub fn parse(s: &str) -> Result<VersionRange, VersionRangeError> {
        parse::parse_range(s)
    }

    /// Returns `*`, the range that accepts every version without a prerelease.
    ///
    /// It is what a plugin reference without `@range` means.
    pub fn any() -> VersionRange {
        VersionRange {
            sets: vec![vec![Term::Primitive(Op::Eq, Partial::WILDCARD)]],
            desugared: vec![Vec::new()],
        }
    }

    /// Says whether `version` satisfies this range.
    ///
    /// Build metadata of `version` is ignored, as semver precedence ignores it.
    pub fn accepts(&self, version: &Version) -> bool {
        self.desugared.iter().any(|set| set_accepts(set, version))
    }

    /// Returns the range that accepts exactly the versions both `self` and `other` accept.
    ///
    /// Plugin resolution needs this when several references name one plugin. The result
    /// is built from plain comparators (`>=1.2.0 <1.5.0 || >=2.0.0 <2.1.0`), one set per
    /// pair of sets that overlap, and is `<0.0.0` when nothing is left. Because of the
    /// prerelease rule this is not a plain concatenation of comparators: a prerelease
    /// survives only if both sides admit it. The printed result may be longer than the
    /// 256 bytes [`VersionRange::parse`] accepts.
    pub fn intersect(&self, other: &VersionRange) -> VersionRange {
        let mut sets: Vec<Vec<Comparator>> = Vec::new();
        for a in &self.desugared {
            for b in &other.desugared {
                if let Some(set) = intersect_sets(a, b)
                    && !sets.contains(&set)
                {
                    sets.push(set);
                }
            }
        }
        if sets.is_empty() {
            sets.push(vec![Comparator { op: Op::Lt, version: v0(0, 0, 0) }]);
        }
        VersionRange::from_comparators(sets.iter().map(|set| simplify(set)).collect())
    }

    /// Returns the same range written as plain comparator sets, the way resolution
    /// messages and `docs/version-ranges.md` show it: `^1.2` → `>=1.2.0 <2.0.0`.
    ///
    /// Sugar desugars as in node-semver 7, whose exclusive upper bounds carry `-0`
    /// (`<2.0.0-0`, which rejects every `2.0.0` prerelease). The `-0` is printed only
    /// where another comparator of the set names a prerelease of that version; everywhere
    /// else `<2.0.0` accepts exactly the same versions and reads better.
    pub fn desugared(&self) -> VersionRange {
        VersionRange::from_comparators(self.desugared.iter().map(|set| simplify(set)).collect())
    }

    /// Builds a range from sets of plain comparators; an empty set means `*`.
    fn from_comparators(desugared: Vec<Vec<Comparator>>) -> VersionRange {
        let sets = desugared
            .iter()
            .map(|set| {
                if set.is_empty() {
                    return vec![Term::Primitive(Op::Eq, Partial::WILDCARD)];
                }
                set.iter().map(|c| Term::Primitive(c.op, Partial::from(&c.version))).collect()
            })
            .collect();
        VersionRange { sets, desugared }
    }
}

impl FromStr for VersionRange {
    type Err = VersionRangeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VersionRange::parse(s)
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (set_idx, set) in self.sets.iter().enumerate() {
            if set_idx > 0 {
                f.write_str(" || ")?;
            }
            for (term_idx, term) in set.iter().enumerate() {
                if term_idx > 0 {
                    f.write_str(" ")?;
                }
                write!(f, "{term}")?;
            }
        }
        Ok(())
    }
}

/// One comparator as written: an operator (or none) and a partial version.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Term {
    /// `<`, `<=`, `>`, `>=`, or `=`/nothing (an exact version or an x-range).
    Primitive(Op, Partial),
    /// `~1.2.3`.
    Tilde(Partial),
    /// `^1.2.3`.
    Caret(Partial),
    /// `1.2.3 - 2.3`.
    Hyphen(Partial, Partial),
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Term::Primitive(Op::Eq, p) => write!(f, "{}", p.bare()),
            Term::Primitive(op, p) => write!(f, "{}{}", op.as_str(), p.short()),
            Term::Tilde(p) => write!(f, "~{}", p.short()),
            Term::Caret(p) => write!(f, "^{}", p.short()),
            Term::Hyphen(from, to) => write!(f, "{} - {}", from.short(), to.short()),
        }
    }
}

/// A comparison operator; `Eq` is both `=` and no operator, which mean the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// A version with possibly missing or wildcard parts, as in `1`, `1.x`, `1.2.3-beta`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Partial {
    // Invariant: `None` is a wildcard (or a missing part, which means the same) and every
    // part after a `None` is `None`; `pre` is empty unless all three parts are numbers.
    major: Option<u64>,
    minor: Option<u64>,
    patch: Option<u64>,
    pre: Prerelease,
}

impl Partial {
    const WILDCARD: Partial =
        Partial { major: None, minor: None, patch: None, pre: Prerelease::EMPTY };

    /// Prints the numbers only (`1.2`, `*` when there are none), the form after an
    /// operator and in hyphen ranges.
    fn short(&self) -> PartialDisplay<'_> {
        PartialDisplay { partial: self, wildcard_suffix: false }
    }

    /// Prints an x-range with its wildcard (`1.2.x`, `*`), the form without an operator,
    /// where a bare `1` would read like an exact version.
    fn bare(&self) -> PartialDisplay<'_> {
        PartialDisplay { partial: self, wildcard_suffix: true }
    }
}

impl From<&Version> for Partial {
    fn from(v: &Version) -> Partial {
        Partial {
            major: Some(v.major),
            minor: Some(v.minor),
            patch: Some(v.patch),
            pre: v.pre.clone(),
        }
    }
}

struct PartialDisplay<'a> {
    partial: &'a Partial,
    wildcard_suffix: bool,
}

impl fmt::Display for PartialDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.partial;
        let Some(major) = p.major else { return f.write_str("*") };
        write!(f, "{major}")?;
        let Some(minor) = p.minor else {
            return if self.wildcard_suffix { f.write_str(".x") } else { Ok(()) };
        };
        write!(f, ".{minor}")?;
        let Some(patch) = p.patch else {
            return if self.wildcard_suffix { f.write_str(".x") } else { Ok(()) };
        };
        write!(f, ".{patch}")?;
        if !p.pre.is_empty() {
            write!(f, "-{}", p.pre)?;
        }
        Ok(())
    }
}

/// A desugared comparator: an operator and a full version without build metadata.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Comparator {
    op: Op,
    version: Version,
}

impl Comparator {
    fn test(&self, v: &Version) -> bool {
        let ord = v.cmp_precedence(&self.version);
        match self.op {
            Op::Eq => ord == Ordering::Equal,
            Op::Lt => ord == Ordering::Less,
            Op::Le => ord != Ordering::Greater,
            Op::Gt => ord == Ordering::Greater,
            Op::Ge => ord != Ordering::Less,
        }
    }
}

/// node-semver's `testSet`: every comparator holds, and a prerelease `v` needs a
/// comparator naming a prerelease of the same `MAJOR.MINOR.PATCH`.
fn set_accepts(set: &[Comparator], v: &Version) -> bool {
    if !set.iter().all(|c| c.test(v)) {
        return false;
    }
    v.pre.is_empty() || set.iter().any(|c| !c.version.pre.is_empty() && same_tuple(&c.version, v))
}

fn same_tuple(a: &Version, b: &Version) -> bool {
    (a.major, a.minor, a.patch) == (b.major, b.minor, b.patch)
}

/// Marks a desugaring that would raise a part past [`MAX_NUMBER`]; the parser turns it
/// into [`VersionRangeErrorKind::NumberTooLarge`].
struct Overflow;

fn inc(n: u64) -> Result<u64, Overflow> {
    n.checked_add(1).ok_or(Overflow)
}

fn v(major: u64, minor: u64, patch: u64) -> Version {
    Version::new(major, minor, patch)
}

/// `MAJOR.MINOR.PATCH-0`, the lowest prerelease of a version: `<v0(..)` excludes every
/// prerelease of that version.
fn v0(major: u64, minor: u64, patch: u64) -> Version {
    let mut version = Version::new(major, minor, patch);
    version.pre = prerelease_zero();
    version
}

fn prerelease_zero() -> Prerelease {
    // `0` is a valid prerelease, so this never falls back.
    Prerelease::new("0").unwrap_or(Prerelease::EMPTY)
}

fn cmp(op: Op, version: Version) -> Comparator {
    Comparator { op, version }
}

/// Desugars one term into plain comparators, exactly as node-semver 7 does without
/// `includePrerelease` (`replaceXRange`, `replaceTilde`, `replaceCaret`, `hyphenReplace`).
fn desugar(term: &Term) -> Result<Vec<Comparator>, Overflow> {
    match term {
        Term::Primitive(op, p) => xrange(*op, p),
        Term::Tilde(p) => tilde(p),
        Term::Caret(p) => caret(p),
        Term::Hyphen(from, to) => {
            let mut res = Vec::new();
            res.extend(hyphen_from(from));
            res.extend(hyphen_to(to)?);
            Ok(res)
        }
    }
}

fn full(p: &Partial) -> Option<Version> {
    let (Some(major), Some(minor), Some(patch)) = (p.major, p.minor, p.patch) else {
        return None;
    };
    let mut version = Version::new(major, minor, patch);
    version.pre = p.pre.clone();
    Some(version)
}

fn xrange(op: Op, p: &Partial) -> Result<Vec<Comparator>, Overflow> {
    if let Some(version) = full(p) {
        return Ok(vec![cmp(op, version)]);
    }
    let Some(major) = p.major else {
        // `>*` and `<*` admit nothing; `*`, `>=*`, `<=*` admit everything.
        return Ok(match op {
            Op::Gt | Op::Lt => vec![cmp(Op::Lt, v0(0, 0, 0))],
            Op::Eq | Op::Ge | Op::Le => Vec::new(),
        });
    };
    Ok(match (op, p.minor) {
        (Op::Eq, None) => vec![cmp(Op::Ge, v(major, 0, 0)), cmp(Op::Lt, v0(inc(major)?, 0, 0))],
        (Op::Eq, Some(minor)) => {
            vec![cmp(Op::Ge, v(major, minor, 0)), cmp(Op::Lt, v0(major, inc(minor)?, 0))]
        }
        (Op::Gt, None) => vec![cmp(Op::Ge, v(inc(major)?, 0, 0))],
        (Op::Gt, Some(minor)) => vec![cmp(Op::Ge, v(major, inc(minor)?, 0))],
        (Op::Ge, minor) => vec![cmp(Op::Ge, v(major, minor.unwrap_or(0), 0))],
        (Op::Lt, minor) => vec![cmp(Op::Lt, v0(major, minor.unwrap_or(0), 0))],
        (Op::Le, None) => vec![cmp(Op::Lt, v0(inc(major)?, 0, 0))],
        (Op::Le, Some(minor)) => vec![cmp(Op::Lt, v0(major, inc(minor)?, 0))],
    })
}

fn tilde(p: &Partial) -> Result<Vec<Comparator>, Overflow> {
    let Some(major) = p.major else { return Ok(Vec::new()) };
    let Some(minor) = p.minor else {
        return Ok(vec![cmp(Op::Ge, v(major, 0, 0)), cmp(Op::Lt, v0(inc(major)?, 0, 0))]);
    };
    let lower = full(p).unwrap_or_else(|| v(major, minor, 0));
    Ok(vec![cmp(Op::Ge, lower), cmp(Op::Lt, v0(major, inc(minor)?, 0))])
}

fn caret(p: &Partial) -> Result<Vec<Comparator>, Overflow> {
    let Some(major) = p.major else { return Ok(Vec::new()) };
    let Some(minor) = p.minor else {
        return Ok(vec![cmp(Op::Ge, v(major, 0, 0)), cmp(Op::Lt, v0(inc(major)?, 0, 0))]);
    };
    let upper = match (major, minor, p.patch) {
        (0, 0, Some(patch)) => v0(0, 0, inc(patch)?),
        (0, _, _) => v0(0, inc(minor)?, 0),
        _ => v0(inc(major)?, 0, 0),
    };
    let lower = full(p).unwrap_or_else(|| v(major, minor, 0));
    Ok(vec![cmp(Op::Ge, lower), cmp(Op::Lt, upper)])
}

fn hyphen_from(p: &Partial) -> Option<Comparator> {
    let major = p.major?;
    let lower = full(p).unwrap_or_else(|| v(major, p.minor.unwrap_or(0), 0));
    Some(cmp(Op::Ge, lower))
}

fn hyphen_to(p: &Partial) -> Result<Option<Comparator>, Overflow> {
    let Some(major) = p.major else { return Ok(None) };
    if let Some(version) = full(p) {
        return Ok(Some(cmp(Op::Le, version)));
    }
    Ok(Some(match p.minor {
        None => cmp(Op::Lt, v0(inc(major)?, 0, 0)),
        Some(minor) => cmp(Op::Lt, v0(major, inc(minor)?, 0)),
    }))
}

/// Drops the `-0` of `<X.Y.Z-0` where no other comparator of `set` names a prerelease of
/// `X.Y.Z`: then no prerelease of `X.Y.Z` can pass the set either way, and every other
/// version compares the same against both bounds.
fn simplify(set: &[Comparator]) -> Vec<Comparator> {
    let zero = prerelease_zero();
    set.iter()
        .enumerate()
        .map(|(idx, c)| {
            let named_elsewhere = set.iter().enumerate().any(|(other_idx, other)| {
                other_idx != idx
                    && !other.version.pre.is_empty()
                    && same_tuple(&other.version, &c.version)
            });
            if c.op == Op::Lt && c.version.pre == zero && !named_elsewhere {
                cmp(Op::Lt, v(c.version.major, c.version.minor, c.version.patch))
            } else {
                c.clone()
            }
        })
        .collect()
}

/// One end of a comparator set's interval.
#[derive(Clone, Debug)]
struct Bound {
    version: Version,
    inclusive: bool,
}

/// A comparator set reduced to its interval. The versions it accepts are those in the
/// interval that are releases, or prereleases of a version that `lo` or `hi` names: a
/// comparator that is not the binding bound can only name versions outside the interval.
#[derive(Clone, Debug, Default)]
struct Interval {
    lo: Option<Bound>,
    hi: Option<Bound>,
}

impl Interval {
    fn of(set: &[Comparator]) -> Interval {
        let mut res = Interval::default();
        for c in set {
            let inclusive = matches!(c.op, Op::Eq | Op::Ge | Op::Le);
            let bound = Bound { version: c.version.clone(), inclusive };
            match c.op {
                Op::Gt | Op::Ge => res.raise(bound),
                Op::Lt | Op::Le => res.lower(bound),
                Op::Eq => {
                    res.raise(bound.clone());
                    res.lower(bound);
                }
            }
        }
        res
    }

    fn raise(&mut self, bound: Bound) {
        match &mut self.lo {
            None => self.lo = Some(bound),
            Some(cur) => match bound.version.cmp_precedence(&cur.version) {
                Ordering::Greater => *cur = bound,
                Ordering::Equal => cur.inclusive &= bound.inclusive,
                Ordering::Less => {}
            },
        }
    }

    fn lower(&mut self, bound: Bound) {
        match &mut self.hi {
            None => self.hi = Some(bound),
            Some(cur) => match bound.version.cmp_precedence(&cur.version) {
                Ordering::Less => *cur = bound,
                Ordering::Equal => cur.inclusive &= bound.inclusive,
                Ordering::Greater => {}
            },
        }
    }

    /// Says whether this set admits prereleases of `version`'s `MAJOR.MINOR.PATCH`.
    fn names(&self, version: &Version) -> bool {
        [&self.lo, &self.hi]
            .into_iter()
            .flatten()
            .any(|b| !b.version.pre.is_empty() && same_tuple(&b.version, version))
    }

    fn is_empty(&self) -> bool {
        let (Some(lo), Some(hi)) = (&self.lo, &self.hi) else { return false };
        match lo.version.cmp_precedence(&hi.version) {
            Ordering::Greater => true,
            Ordering::Equal => !(lo.inclusive && hi.inclusive),
            Ordering::Less => false,
        }
    }

    fn comparators(&self) -> Vec<Comparator> {
        if let (Some(lo), Some(hi)) = (&self.lo, &self.hi)
            && lo.inclusive
            && hi.inclusive
            && lo.version.cmp_precedence(&hi.version) == Ordering::Equal
        {
            return vec![cmp(Op::Eq, lo.version.clone())];
        }
        let lo = self
            .lo
            .iter()
            .map(|b| cmp(if b.inclusive { Op::Ge } else { Op::Gt }, b.version.clone()));
        let hi = self
            .hi
            .iter()
            .map(|b| cmp(if b.inclusive { Op::Le } else { Op::Lt }, b.version.clone()));
        lo.chain(hi).collect()
    }
}

/// Intersects two desugared comparator sets; `None` when no version can satisfy both.
fn intersect_sets(a: &[Comparator], b: &[Comparator]) -> Option<Vec<Comparator>> {
    let (a, b) = (Interval::of(a), Interval::of(b));
    let mut res = Interval::default();
    for bound in a.lo.iter().chain(&b.lo) {
        res.raise(bound.clone());
    }
    for bound in a.hi.iter().chain(&b.hi) {
        res.lower(bound.clone());
    }
    // A prerelease end that only one side names would let the other side's prereleases
    // of that version through: move the end past them.
    if let Some(lo) = &mut res.lo
        && !lo.version.pre.is_empty()
        && !(a.names(&lo.version) && b.names(&lo.version))
    {
        *lo = Bound {
            version: v(lo.version.major, lo.version.minor, lo.version.patch),
            inclusive: true,
        };
    }
    if let Some(hi) = &mut res.hi
        && !hi.version.pre.is_empty()
        && !(a.names(&hi.version) && b.names(&hi.version))
    {
        *hi = Bound {
            version: v0(hi.version.major, hi.version.minor, hi.version.patch),
            inclusive: false,
        };
    }
    if res.is_empty() { None } else { Some(res.comparators()) }
}
