//! Plugin references: `id`, `id@range`, `marketplace/id` and `marketplace/id@range`
//! (SPEC §11), the strings agents use to name the plugins they load.
//!
//! A [`PluginRef`] is validated on construction and prints back in canonical form, so
//! the spec stores references as strings and re-parses them without loss. What a
//! reference *means* for resolution (which marketplace, which version) is decided in
//! clio-plugins; this module only parses and matches.

use std::fmt;
use std::str::FromStr;

use semver::Version;

use crate::version::{
    VersionRange, VersionRangeError, VersionRangeErrorKind, parse_plugin_version,
    parse_range_within,
};

/// Names a plugin, optionally in one marketplace and optionally with a version range.
///
/// `clio/pdf@^1.2` has marketplace `clio`, id `pdf` and range `^1.2`. Ids and marketplace
/// names are `[a-z0-9][a-z0-9_-]{0,63}`; the range is a [`VersionRange`]. A reference
/// without a range accepts every version without a prerelease, like `*`: a prerelease
/// is only ever chosen when a range names it, as node-semver does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PluginRef {
    // Invariant: `marketplace` and `id` pass `validate_id`.
    marketplace: Option<String>,
    id: String,
    range: Option<VersionRange>,
}

impl PluginRef {
    /// Parses `s` as `[marketplace/]id[@range]`.
    ///
    /// Errors point into `s`: an invalid id or marketplace name, `@` with nothing after
    /// it ([`VersionRangeErrorKind::EmptyRange`]), or any refusal of the range grammar.
    pub fn parse(s: &str) -> Result<PluginRef, VersionRangeError> {
        let (head, range_start) = match s.find('@') {
            Some(at) => (&s[..at], Some(at + 1)),
            None => (s, None),
        };
        let (marketplace, id, id_start) = match head.find('/') {
            Some(slash) => (Some(&head[..slash]), &head[slash + 1..], slash + 1),
            None => (None, head, 0),
        };
        if let Some(marketplace) = marketplace
            && let Some(position) = crate::version::id_error_at(marketplace)
        {
            return Err(VersionRangeError::new(s, position, VersionRangeErrorKind::InvalidId));
        }
        if let Some(position) = crate::version::id_error_at(id) {
            return Err(VersionRangeError::new(
                s,
                id_start + position,
                VersionRangeErrorKind::InvalidId,
            ));
        }
        let range = match range_start {
            Some(start) => Some(parse_range_within(s, start)?),
            None => None,
        };
        Ok(PluginRef { marketplace: marketplace.map(str::to_owned), id: id.to_owned(), range })
    }

    /// Returns the plugin id, `pdf` in `clio/pdf@^1.2`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Returns the marketplace name, `clio` in `clio/pdf@^1.2`, or `None` when the
    /// reference leaves the marketplace to resolution.
    pub fn marketplace(&self) -> Option<&str> {
        self.marketplace.as_deref()
    }

    /// Returns the version range, `^1.2` in `clio/pdf@^1.2`, or `None` when any release
    /// will do.
    pub fn range(&self) -> Option<&VersionRange> {
        self.range.as_ref()
    }

    /// Says whether a plugin whose own version is `version` satisfies this reference.
    ///
    /// `version` must be a valid plugin version ([`parse_plugin_version`]); an invalid
    /// one is an error rather than `false`, so a typo in a manifest is not mistaken for a
    /// mismatch.
    pub fn accepts(&self, version: &str) -> Result<bool, VersionRangeError> {
        Ok(self.accepts_version(&parse_plugin_version(version)?))
    }

    /// Says whether `version`, already parsed, satisfies this reference: the range's
    /// answer, or "is not a prerelease" when there is no range.
    pub fn accepts_version(&self, version: &Version) -> bool {
        match &self.range {
            Some(range) => range.accepts(version),
            None => version.pre.is_empty(),
        }
    }
}

impl FromStr for PluginRef {
    type Err = VersionRangeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PluginRef::parse(s)
    }
}

impl fmt::Display for PluginRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(marketplace) = &self.marketplace {
            write!(f, "{marketplace}/")?;
        }
        f.write_str(&self.id)?;
        if let Some(range) = &self.range {
            write!(f, "@{range}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn parses_the_four_shapes() -> TestResult {
        let r = PluginRef::parse("clio/pdf@^1.2")?;
        assert_eq!((r.marketplace(), r.id()), (Some("clio"), "pdf"));
        assert_eq!(r.range().map(ToString::to_string).as_deref(), Some("^1.2"));
        assert!(r.accepts("1.4.0")?);
        assert!(!r.accepts("2.0.0")?);

        let r = PluginRef::parse("pdf")?;
        assert_eq!((r.marketplace(), r.id(), r.range()), (None, "pdf", None));
        let r = PluginRef::parse("clio/pdf")?;
        assert_eq!((r.marketplace(), r.id(), r.range()), (Some("clio"), "pdf", None));
        let r = PluginRef::parse("pdf@1.x")?;
        assert_eq!((r.marketplace(), r.id()), (None, "pdf"));
        assert_eq!(r.to_string(), "pdf@1.x");
        Ok(())
    }

    #[test]
    fn no_range_accepts_releases_only() -> TestResult {
        let r = PluginRef::parse("pdf")?;
        assert!(r.accepts("0.0.0")?);
        assert!(r.accepts("9.9.9+build")?);
        assert!(!r.accepts("1.0.0-rc.1")?);
        Ok(())
    }

    #[test]
    fn accepts_refuses_an_invalid_version() -> TestResult {
        let r = PluginRef::parse("pdf@^1")?;
        let err = r.accepts("1.2").err().ok_or("1.2 is not a plugin version")?;
        assert_eq!((err.kind, err.position), (VersionRangeErrorKind::InvalidVersion, 3));
        Ok(())
    }

    #[test]
    fn errors_point_into_the_reference() -> TestResult {
        for (input, kind, position) in [
            ("", VersionRangeErrorKind::InvalidId, 0),
            ("Pdf", VersionRangeErrorKind::InvalidId, 0),
            ("/pdf", VersionRangeErrorKind::InvalidId, 0),
            ("clio/", VersionRangeErrorKind::InvalidId, 5),
            ("a/b/c", VersionRangeErrorKind::InvalidId, 3),
            ("clio/-pdf", VersionRangeErrorKind::InvalidId, 5),
            ("pdf@", VersionRangeErrorKind::EmptyRange, 4),
            ("pdf@  ", VersionRangeErrorKind::EmptyRange, 4),
            ("pdf@latest", VersionRangeErrorKind::Tag, 4),
            ("clio/pdf@1.x.3", VersionRangeErrorKind::WildcardThenNumber, 13),
            ("pdf@^1@2", VersionRangeErrorKind::UnexpectedChar, 6),
            ("pdf ^1", VersionRangeErrorKind::InvalidId, 3),
        ] {
            let err = PluginRef::parse(input).err().ok_or(format!("{input:?} parsed"))?;
            assert_eq!((err.kind, err.position), (kind, position), "{input:?}: {err}");
            assert_eq!(err.input, input);
        }
        Ok(())
    }
}
