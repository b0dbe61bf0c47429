//! The one error of ranges, plugin versions, ids and plugin references: what is wrong
//! ([`VersionRangeErrorKind`]), at which byte of which input, and what would be valid.
//!
//! The message is rendered from those three fields only, so callers that want to draw a
//! caret under the input (the CLI) read `input` and `position` instead of the text.

use std::fmt;

use super::{MAX_ID_LEN, MAX_NUMBER, MAX_RANGE_LEN};

/// Says why a version range, plugin version, id or plugin reference was refused, and where.
///
/// Plugin references, agent layers and marketplaces all name versions with these strings,
/// so one error type serves them all; `kind` lets callers (and tests) match on the reason
/// without parsing the message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(.input, *.position, *.kind))]
pub struct VersionRangeError {
    /// The whole text that was parsed: the reference, range, version or id as given.
    pub input: String,
    /// The byte offset in `input` where the problem starts (`input.len()` when the text
    /// ends too early).
    pub position: usize,
    /// What is wrong.
    pub kind: VersionRangeErrorKind,
}

/// Names what is wrong in a refused range, version, id or reference.
///
/// Each variant is one refusal of `docs/version-ranges.md`, so tests and callers can tell
/// a tag (`latest`) from a typo without reading the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VersionRangeErrorKind {
    /// An id or marketplace name is not `[a-z0-9][a-z0-9_-]{0,63}`.
    InvalidId,
    /// Nothing (or only whitespace) where a range was expected, as in `pdf@`.
    EmptyRange,
    /// A word such as `latest` where a version was expected: tags are not ranges.
    Tag,
    /// A `v` before a version (`v1.2.3`), which node-semver's grammar does not have.
    VPrefix,
    /// A number after a wildcard, as in `1.x.3`.
    WildcardThenNumber,
    /// A prerelease on a version that is not a full `MAJOR.MINOR.PATCH`, as in `^1.2-beta`.
    PrereleaseOnPartial,
    /// Build metadata (`+build`) in a range, where it could never affect matching.
    BuildMetadata,
    /// A numeric part with a leading zero, as in `01.2.3` or `1.2.3-beta.01`.
    LeadingZero,
    /// A number too large to be a version part (or to be raised by one when desugaring).
    NumberTooLarge,
    /// A prerelease that is empty or has an empty or invalid identifier, as in `1.2.3-a..b`.
    InvalidPrerelease,
    /// Build metadata that is empty or has an empty or invalid identifier, as in `1.2.3+`.
    InvalidBuild,
    /// An empty branch of `||`, as in `^1 || || ^2` or `^1 ||`.
    EmptyBranch,
    /// An operator with no version after it, as in `>=1 <` or `1.2.3 -`.
    DanglingOperator,
    /// A hyphen range that is not a whole comparator set of two operator-free versions.
    InvalidHyphenRange,
    /// A range or version over 256 bytes.
    TooLong,
    /// A version that stops after a `.`, as in `1.`.
    IncompleteVersion,
    /// A plugin's own version that is not a full `MAJOR.MINOR.PATCH[-pre][+build]`.
    InvalidVersion,
    /// A character that no rule of the grammar allows here.
    UnexpectedChar,
}

impl VersionRangeError {
    pub(crate) fn new(input: &str, position: usize, kind: VersionRangeErrorKind) -> Self {
        VersionRangeError { input: input.to_owned(), position, kind }
    }

    /// Moves the error into a larger text: `input` becomes `outer` and `position` is
    /// shifted by `offset`, the byte where the inner text starts in `outer`.
    pub(crate) fn within(mut self, outer: &str, offset: usize) -> Self {
        self.input = outer.to_owned();
        self.position += offset;
        self
    }
}

/// The longest input quoted whole in a message; longer inputs are cut, so an error about
/// a megabyte of garbage stays a one-line message.
const QUOTE_LIMIT: usize = 80;

fn render(input: &str, position: usize, kind: VersionRangeErrorKind) -> String {
    use VersionRangeErrorKind as K;
    let token = |pred: fn(u8) -> bool| Token { input, position, pred };
    let found = format!(", found {}", describe(input, position));
    let (problem, found, hint): (String, &str, String) = match kind {
        K::InvalidId
            if input
                .as_bytes()
                .get(position)
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) =>
        {
            (
                format!("id or marketplace name longer than {MAX_ID_LEN} characters"),
                "",
                format!(
                    "ids are 1 to {MAX_ID_LEN} characters from `a-z`, `0-9`, `-` and `_`, \
                 starting with a letter or digit"
                ),
            )
        }
        K::InvalidId => (
            "invalid id or marketplace name".to_owned(),
            &found,
            format!(
                "ids are 1 to {MAX_ID_LEN} characters from `a-z`, `0-9`, `-` and `_`, \
                 starting with a letter or digit"
            ),
        ),
        K::EmptyRange => (
            "empty version range".to_owned(),
            "",
            "write a range such as `^1.2` or `>=1.0.0 <2.0.0`, or leave out `@` to accept \
             any release"
                .to_owned(),
        ),
        K::Tag => (
            format!("tag `{}` is not a version range", token(is_word)),
            "",
            "name versions with a range such as `^1.2`, `~1.2.3` or `*`".to_owned(),
        ),
        K::VPrefix => (
            format!("version `{}` has a `v` prefix", token(is_word)),
            "",
            "write the version without `v`, as in `1.2.3`".to_owned(),
        ),
        K::WildcardThenNumber => (
            format!("number `{}` after a wildcard", token(is_digit)),
            "",
            "after `x`, `X` or `*` every part must be a wildcard, as in `1.x`".to_owned(),
        ),
        K::PrereleaseOnPartial => (
            format!("prerelease `{}` on a partial version", token(is_pre)),
            "",
            "a prerelease needs a full MAJOR.MINOR.PATCH, as in `^1.2.0-beta`".to_owned(),
        ),
        K::BuildMetadata => (
            format!("build metadata `{}` in a version range", token(is_pre)),
            "",
            "build metadata never affects which versions match; remove it".to_owned(),
        ),
        K::LeadingZero => {
            let digits = token(is_digit).to_string();
            let trimmed = digits.trim_start_matches('0');
            let fixed = if trimmed.is_empty() { "0" } else { trimmed };
            (format!("number `{digits}` has a leading zero"), "", format!("write it as `{fixed}`"))
        }
        K::NumberTooLarge => (
            format!("version `{}` has a number too large", token(is_word)),
            "",
            format!(
                "version parts are at most {MAX_NUMBER}, and one less where a range adds one \
                 (`^`, `~`, `>` or `<=` on a partial version, x-ranges, the end of a hyphen range)"
            ),
        ),
        K::InvalidPrerelease => (
            "invalid prerelease".to_owned(),
            &found,
            "a prerelease is `-` then identifiers of `0-9`, `A-Z`, `a-z` and `-`, \
             separated by `.`, as in `1.2.3-beta.2`"
                .to_owned(),
        ),
        K::InvalidBuild => (
            "invalid build metadata".to_owned(),
            &found,
            "build metadata is `+` then identifiers of `0-9`, `A-Z`, `a-z` and `-`, \
             separated by `.`, as in `1.2.3+build.5`"
                .to_owned(),
        ),
        K::EmptyBranch => (
            "empty `||` branch".to_owned(),
            "",
            "put a comparator set on both sides of `||`, as in `^1.2 || ^2`".to_owned(),
        ),
        K::DanglingOperator => (
            format!("operator `{}` has no version after it", token(is_operator)),
            "",
            "follow it with a version, as in `<2.0.0`".to_owned(),
        ),
        K::InvalidHyphenRange => (
            "misplaced hyphen range".to_owned(),
            "",
            "a hyphen range `A - B` is a whole comparator set: two versions without \
             operators, as in `1.2.3 - 2.3`"
                .to_owned(),
        ),
        K::TooLong => (
            format!("too long ({} bytes)", input.len()),
            "",
            format!("ranges and plugin versions are at most {MAX_RANGE_LEN} bytes"),
        ),
        K::IncompleteVersion => (
            "version ends after `.`".to_owned(),
            "",
            "after `.` comes a number, `x`, `X` or `*`".to_owned(),
        ),
        K::InvalidVersion => (
            "invalid plugin version".to_owned(),
            &found,
            "a plugin version is a full MAJOR.MINOR.PATCH[-pre][+build], as in `1.4.0`".to_owned(),
        ),
        K::UnexpectedChar => (
            format!("unexpected {}", describe(input, position)),
            "",
            "expected a version such as `1.2.3`, or comparators such as `>=1.2.0 <2.0.0`, \
             `^1.2`, `~1.2.3`, `1.x` or `1.2.3 - 2.3` separated by spaces and joined by `||`"
                .to_owned(),
        ),
    };
    format!("{problem}{found} at byte {position} of {}; {hint}", Quoted(input))
}

/// Names the character at `position`: `` `c` ``, `whitespace ' '` or `the end`.
fn describe(input: &str, position: usize) -> String {
    match input.get(position..).and_then(|rest| rest.chars().next()) {
        Some(c) if c.is_whitespace() => format!("whitespace {c:?}"),
        Some(c) => format!("`{c}`"),
        None => "the end".to_owned(),
    }
}

/// The run of bytes from `position` that `pred` accepts (at least one character), cut
/// to a few dozen bytes: the offending word a message quotes.
struct Token<'a> {
    input: &'a str,
    position: usize,
    pred: fn(u8) -> bool,
}

impl fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(rest) = self.input.get(self.position..) else { return Ok(()) };
        let mut end = rest.bytes().take(32).take_while(|b| (self.pred)(*b)).count();
        if end == 0 {
            end = rest.chars().next().map_or(0, char::len_utf8);
        }
        f.write_str(rest.get(..end).unwrap_or(""))
    }
}

fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+' | b'*')
}

fn is_pre(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+')
}

fn is_operator(b: u8) -> bool {
    matches!(b, b'<' | b'>' | b'=' | b'~' | b'^' | b'-')
}

/// The input in backticks, cut after [`QUOTE_LIMIT`] bytes.
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() <= QUOTE_LIMIT {
            return write!(f, "`{}`", self.0);
        }
        let mut cut = QUOTE_LIMIT;
        while !self.0.is_char_boundary(cut) {
            cut -= 1;
        }
        write!(f, "`{}…`", &self.0[..cut])
    }
}
