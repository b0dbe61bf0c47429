//! The hand-written scanner for ranges, plugin versions and ids.
//!
//! It walks bytes left to right without backtracking, so every error knows the byte
//! where it starts. Only ASCII is ever consumed; any other character stops the scan
//! at a character boundary and is reported as unexpected.

use semver::{BuildMetadata, Prerelease, Version};

use super::error::{VersionRangeError, VersionRangeErrorKind as Kind};
use super::{MAX_ID_LEN, MAX_RANGE_LEN, Op, Partial, Term, VersionRange, desugar};

/// Checks that `s` is an id or marketplace name: `[a-z0-9][a-z0-9_-]{0,63}`.
///
/// Ids end up in paths, journal keys and messages, so the alphabet is kept small and
/// lowercase; the error points at the first byte that breaks the rule.
pub fn validate_id(s: &str) -> Result<(), VersionRangeError> {
    match id_error_at(s) {
        Some(position) => Err(VersionRangeError::new(s, position, Kind::InvalidId)),
        None => Ok(()),
    }
}

/// Returns the byte where `s` stops being a valid id, or `None` when it is one.
pub(crate) fn id_error_at(s: &str) -> Option<usize> {
    if s.is_empty() {
        return Some(0);
    }
    for (idx, b) in s.bytes().enumerate() {
        if idx >= MAX_ID_LEN {
            return Some(idx);
        }
        let ok =
            b.is_ascii_lowercase() || b.is_ascii_digit() || (idx > 0 && matches!(b, b'-' | b'_'));
        if !ok {
            return Some(idx);
        }
    }
    None
}

/// Parses a plugin's own version: a full `MAJOR.MINOR.PATCH[-pre][+build]`.
///
/// Stricter than a range on purpose: no `v`, no wildcard, no missing part, no
/// surrounding whitespace, no leading zero, at most 256 bytes. Build metadata is kept
/// (it is part of what the plugin says it is) but never affects matching.
pub fn parse_plugin_version(s: &str) -> Result<Version, VersionRangeError> {
    if s.len() > MAX_RANGE_LEN {
        return Err(VersionRangeError::new(s, MAX_RANGE_LEN, Kind::TooLong));
    }
    let mut sc = Scanner::new(s);
    let mut parts = [0u64; 3];
    for (idx, slot) in parts.iter_mut().enumerate() {
        if idx > 0 {
            if sc.peek() != Some(b'.') {
                return Err(sc.err(sc.pos, Kind::InvalidVersion));
            }
            sc.pos += 1;
        }
        match sc.peek() {
            Some(b'0'..=b'9') => *slot = sc.number()?,
            Some(b'v' | b'V') if idx == 0 && sc.peek_at(1).is_some_and(|b| b.is_ascii_digit()) => {
                return Err(sc.err(sc.pos, Kind::VPrefix));
            }
            _ => return Err(sc.err(sc.pos, Kind::InvalidVersion)),
        }
    }
    let mut version = Version::new(parts[0], parts[1], parts[2]);
    if sc.peek() == Some(b'-') {
        sc.pos += 1;
        version.pre = sc.prerelease()?;
    }
    if sc.peek() == Some(b'+') {
        sc.pos += 1;
        version.build = sc.build()?;
    }
    match sc.peek() {
        None => Ok(version),
        Some(b'.') => Err(sc.err(sc.pos, Kind::InvalidVersion)),
        Some(_) => Err(sc.err(sc.pos, Kind::UnexpectedChar)),
    }
}

/// Parses a whole range: `set ( "||" set )*`, surrounded by optional whitespace.
pub(super) fn parse_range(input: &str) -> Result<VersionRange, VersionRangeError> {
    if input.len() > MAX_RANGE_LEN {
        return Err(VersionRangeError::new(input, MAX_RANGE_LEN, Kind::TooLong));
    }
    let mut sc = Scanner::new(input);
    sc.skip_ws();
    if sc.at_end() {
        return Err(sc.err(0, Kind::EmptyRange));
    }
    let mut sets = Vec::new();
    let mut desugared = Vec::new();
    loop {
        sc.skip_ws();
        if sc.at_end() || sc.at_or() {
            return Err(sc.err(sc.pos, Kind::EmptyBranch));
        }
        let (terms, comparators) = sc.set()?;
        sets.push(terms);
        desugared.push(comparators);
        sc.skip_ws();
        if sc.at_end() {
            break;
        }
        if !sc.at_or() {
            return Err(sc.err(sc.pos, Kind::UnexpectedChar));
        }
        sc.pos += 2;
    }
    Ok(VersionRange { sets, desugared })
}

/// Parses a range that starts at byte `offset` of `outer` (the text after `@` in a plugin
/// reference), reporting errors against `outer`.
pub(crate) fn parse_range_within(
    outer: &str,
    offset: usize,
) -> Result<VersionRange, VersionRangeError> {
    let inner = outer.get(offset..).unwrap_or("");
    parse_range(inner).map_err(|e| e.within(outer, offset))
}

struct Scanner<'a> {
    input: &'a str,
    bytes: &'a [u8],
    // Invariant: `pos <= bytes.len()` and sits on a character boundary, because only
    // ASCII bytes are ever stepped over.
    pos: usize,
}

impl<'a> Scanner<'a> {
    fn new(input: &'a str) -> Self {
        Scanner { input, bytes: input.as_bytes(), pos: 0 }
    }

    fn err(&self, position: usize, kind: Kind) -> VersionRangeError {
        VersionRangeError::new(self.input, position, kind)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn at_or(&self) -> bool {
        self.bytes[self.pos.min(self.bytes.len())..].starts_with(b"||")
    }

    /// Says whether the scan is at the end of a comparator set: the end, or a `|`.
    fn at_set_end(&self) -> bool {
        matches!(self.peek(), None | Some(b'|'))
    }

    /// Skips whitespace and says whether there was any.
    fn skip_ws(&mut self) -> bool {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
        self.pos > start
    }

    /// Parses one comparator set, `hyphen | term ( ws term )*`, with its desugaring.
    fn set(&mut self) -> Result<(Vec<Term>, Vec<super::Comparator>), VersionRangeError> {
        let mut terms: Vec<Term> = Vec::new();
        let mut comparators = Vec::new();
        loop {
            let (term, partial_start) = self.term()?;
            let desugared =
                desugar(&term).map_err(|_| self.err(partial_start, Kind::NumberTooLarge))?;
            comparators.extend(desugared);
            terms.push(term);
            let had_ws = self.skip_ws();
            if self.at_set_end() {
                return Ok((terms, comparators));
            }
            if !had_ws {
                return Err(self.err(self.pos, Kind::UnexpectedChar));
            }
            if self.peek() == Some(b'-') && self.lone_dash() {
                return self.hyphen(terms);
            }
        }
    }

    /// Says whether the `-` at the scan position stands alone, as in `1 - 2` (and `1 -`).
    fn lone_dash(&self) -> bool {
        self.peek_at(1).is_none_or(|b| b.is_ascii_whitespace() || b == b'|')
    }

    /// Finishes a hyphen range `A - B` whose `A` is the only term parsed so far.
    fn hyphen(
        &mut self,
        mut terms: Vec<Term>,
    ) -> Result<(Vec<Term>, Vec<super::Comparator>), VersionRangeError> {
        let dash = self.pos;
        let from = match (terms.pop(), terms.is_empty()) {
            (Some(Term::Primitive(Op::Eq, from)), true) => from,
            _ => return Err(self.err(dash, Kind::InvalidHyphenRange)),
        };
        self.pos += 1;
        self.skip_ws();
        if self.at_set_end() {
            return Err(self.err(dash, Kind::DanglingOperator));
        }
        let to_start = self.pos;
        // `range.bnf` allows no operator here; node-semver allows `=`, which means nothing.
        if self.peek() == Some(b'=') {
            self.pos += 1;
        }
        if matches!(self.peek(), Some(b'<' | b'>' | b'=' | b'~' | b'^')) {
            return Err(self.err(self.pos, Kind::InvalidHyphenRange));
        }
        let to = self.partial()?;
        let term = Term::Hyphen(from, to);
        let comparators = desugar(&term).map_err(|_| self.err(to_start, Kind::NumberTooLarge))?;
        self.skip_ws();
        if !self.at_set_end() {
            return Err(self.err(self.pos, Kind::InvalidHyphenRange));
        }
        Ok((vec![term], comparators))
    }

    /// Parses `op? ws* partial`, where `op` is one of `< <= > >= = ~ ^`, and returns the
    /// term with the byte where its version starts.
    fn term(&mut self) -> Result<(Term, usize), VersionRangeError> {
        let start = self.pos;
        enum Sugar {
            Primitive(Op),
            Tilde,
            Caret,
        }
        let (sugar, len) = match (self.peek(), self.peek_at(1)) {
            (Some(b'<'), Some(b'=')) => (Some(Sugar::Primitive(Op::Le)), 2),
            (Some(b'>'), Some(b'=')) => (Some(Sugar::Primitive(Op::Ge)), 2),
            (Some(b'<'), _) => (Some(Sugar::Primitive(Op::Lt)), 1),
            (Some(b'>'), _) => (Some(Sugar::Primitive(Op::Gt)), 1),
            (Some(b'='), _) => (Some(Sugar::Primitive(Op::Eq)), 1),
            (Some(b'~'), _) => (Some(Sugar::Tilde), 1),
            (Some(b'^'), _) => (Some(Sugar::Caret), 1),
            (Some(b'-'), _) if self.lone_dash() => {
                return Err(self.err(start, Kind::InvalidHyphenRange));
            }
            _ => (None, 0),
        };
        self.pos += len;
        if sugar.is_some() {
            let had_ws = self.skip_ws();
            let next_is_operator = matches!(self.peek(), Some(b'<' | b'>' | b'=' | b'~' | b'^'));
            if self.at_set_end() || (had_ws && next_is_operator) {
                return Err(self.err(start, Kind::DanglingOperator));
            }
        }
        let partial_start = self.pos;
        let partial = self.partial()?;
        let term = match sugar {
            None => Term::Primitive(Op::Eq, partial),
            Some(Sugar::Primitive(op)) => Term::Primitive(op, partial),
            Some(Sugar::Tilde) => Term::Tilde(partial),
            Some(Sugar::Caret) => Term::Caret(partial),
        };
        Ok((term, partial_start))
    }

    /// Parses `xr ( "." xr ( "." xr ( "-" pre )? )? )?` and refuses build metadata.
    fn partial(&mut self) -> Result<Partial, VersionRangeError> {
        let start = self.pos;
        match (self.peek(), self.peek_at(1)) {
            (Some(b'v' | b'V'), Some(b'0'..=b'9')) => return Err(self.err(start, Kind::VPrefix)),
            (Some(b'x' | b'X'), Some(next)) if next.is_ascii_alphabetic() => {
                return Err(self.err(start, Kind::Tag));
            }
            (Some(b'x' | b'X'), _) => {}
            (Some(b), _) if b.is_ascii_alphabetic() => return Err(self.err(start, Kind::Tag)),
            _ => {}
        }
        let mut parts: [Option<u64>; 3] = [None; 3];
        let mut seen_wildcard = false;
        let mut n_parts = 0;
        while n_parts < 3 {
            if n_parts > 0 {
                if self.peek() != Some(b'.') {
                    break;
                }
                self.pos += 1;
            }
            let part_start = self.pos;
            let part = self.part()?;
            match part {
                Some(_) if seen_wildcard => {
                    return Err(self.err(part_start, Kind::WildcardThenNumber));
                }
                Some(_) => {}
                None => seen_wildcard = true,
            }
            parts[n_parts] = part;
            n_parts += 1;
        }
        let is_full = n_parts == 3 && !seen_wildcard;
        let mut pre = Prerelease::EMPTY;
        match self.peek() {
            Some(b'.') if n_parts == 3 => return Err(self.err(self.pos, Kind::UnexpectedChar)),
            Some(b'-') if !is_full => return Err(self.err(self.pos, Kind::PrereleaseOnPartial)),
            Some(b'-') => {
                self.pos += 1;
                pre = self.prerelease()?;
            }
            _ => {}
        }
        if self.peek() == Some(b'+') {
            return Err(self.err(self.pos, Kind::BuildMetadata));
        }
        let [major, minor, patch] = parts;
        Ok(Partial { major, minor, patch, pre })
    }

    /// Parses one `xr`: a number, or `x`, `X`, `*` (returned as `None`).
    fn part(&mut self) -> Result<Option<u64>, VersionRangeError> {
        match self.peek() {
            Some(b'0'..=b'9') => self.number().map(Some),
            Some(b'x' | b'X' | b'*') => {
                self.pos += 1;
                Ok(None)
            }
            Some(b) if !(b.is_ascii_whitespace() || b == b'|') => {
                Err(self.err(self.pos, Kind::UnexpectedChar))
            }
            _ => Err(self.err(self.pos, Kind::IncompleteVersion)),
        }
    }

    /// Parses a decimal number without leading zeros that fits a `u64`.
    fn number(&mut self) -> Result<u64, VersionRangeError> {
        let start = self.pos;
        let mut value: u64 = 0;
        let mut overflow = false;
        while let Some(b @ b'0'..=b'9') = self.peek() {
            if self.pos > start && self.bytes[start] == b'0' {
                return Err(self.err(start, Kind::LeadingZero));
            }
            match value.checked_mul(10).and_then(|v| v.checked_add(u64::from(b - b'0'))) {
                Some(next) => value = next,
                None => overflow = true,
            }
            self.pos += 1;
        }
        if overflow {
            return Err(self.err(start, Kind::NumberTooLarge));
        }
        Ok(value)
    }

    /// Parses dot-separated identifiers after `-`; numeric ones may not have leading zeros.
    fn prerelease(&mut self) -> Result<Prerelease, VersionRangeError> {
        let text = self.identifiers(Kind::InvalidPrerelease, true)?;
        Prerelease::new(text).map_err(|_| self.err(self.pos, Kind::InvalidPrerelease))
    }

    /// Parses dot-separated identifiers after `+`; leading zeros are allowed there.
    fn build(&mut self) -> Result<BuildMetadata, VersionRangeError> {
        let text = self.identifiers(Kind::InvalidBuild, false)?;
        BuildMetadata::new(text).map_err(|_| self.err(self.pos, Kind::InvalidBuild))
    }

    fn identifiers(
        &mut self,
        kind: Kind,
        numeric_no_leading_zero: bool,
    ) -> Result<&'a str, VersionRangeError> {
        let start = self.pos;
        loop {
            let ident_start = self.pos;
            while self.peek().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'-') {
                self.pos += 1;
            }
            let ident = &self.bytes[ident_start..self.pos];
            if ident.is_empty() {
                return Err(self.err(ident_start, kind));
            }
            if numeric_no_leading_zero
                && ident.len() > 1
                && ident[0] == b'0'
                && ident.iter().all(u8::is_ascii_digit)
            {
                return Err(self.err(ident_start, Kind::LeadingZero));
            }
            if self.peek() != Some(b'.') {
                break;
            }
            self.pos += 1;
        }
        Ok(&self.input[start..self.pos])
    }
}
