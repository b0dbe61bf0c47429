//! Unit tests of the range scanner, desugaring and intersection internals: the raw
//! desugared comparators (with node-semver's `-0` bounds) that the public API hides.
//! The public behaviour, the documented examples and the property tests live in
//! `tests/it/ranges.rs`.

use super::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Prints the raw desugared sets, as node-semver 7's `new Range(r).range` would.
fn raw(range: &VersionRange) -> String {
    let sets: Vec<String> = range
        .desugared
        .iter()
        .map(|set| {
            if set.is_empty() {
                return "*".to_owned();
            }
            let comparators: Vec<String> =
                set.iter().map(|c| format!("{}{}", c.op.as_str(), c.version)).collect();
            comparators.join(" ")
        })
        .collect();
    sets.join(" || ")
}

#[track_caller]
fn check(input: &str, expected: &str) {
    match VersionRange::parse(input) {
        Ok(range) => assert_eq!(raw(&range), expected, "desugaring of {input:?}"),
        Err(err) => panic!("{input:?} did not parse: {err}"),
    }
}

#[test]
fn desugars_like_node_semver_7() {
    // The expectations are node-semver 7.x's own (`test/fixtures/range-parse.js`).
    for (input, expected) in [
        ("^1.2", ">=1.2.0 <2.0.0-0"),
        ("^0.2.3", ">=0.2.3 <0.3.0-0"),
        ("^0.0.3", ">=0.0.3 <0.0.4-0"),
        ("~1.2.3", ">=1.2.3 <1.3.0-0"),
        ("~1", ">=1.0.0 <2.0.0-0"),
        ("1.2.3 - 2.3", ">=1.2.3 <2.4.0-0"),
        ("1.x", ">=1.0.0 <2.0.0-0"),
        (">1.2", ">=1.3.0"),
        ("<=1.2", "<1.3.0-0"),
        ("*", "*"),
        ("^1.2.3-beta.2", ">=1.2.3-beta.2 <2.0.0-0"),
        ("^0.0", ">=0.0.0 <0.1.0-0"),
        ("^0.x", ">=0.0.0 <1.0.0-0"),
        ("^0", ">=0.0.0 <1.0.0-0"),
        ("^0.0.x", ">=0.0.0 <0.1.0-0"),
        ("^0.1.x", ">=0.1.0 <0.2.0-0"),
        ("^1.x", ">=1.0.0 <2.0.0-0"),
        ("^0.0.0", ">=0.0.0 <0.0.1-0"),
        ("^0.0.3-beta", ">=0.0.3-beta <0.0.4-0"),
        ("^0.2.3-beta", ">=0.2.3-beta <0.3.0-0"),
        ("^*", "*"),
        ("~1.2", ">=1.2.0 <1.3.0-0"),
        ("~0.2", ">=0.2.0 <0.3.0-0"),
        ("~1.2.3-beta.2", ">=1.2.3-beta.2 <1.3.0-0"),
        ("~*", "*"),
        ("~ 1.2", ">=1.2.0 <1.3.0-0"),
        ("1.2.3 - 2", ">=1.2.3 <3.0.0-0"),
        ("1.2 - 2.3.4", ">=1.2.0 <=2.3.4"),
        ("1.2 - 3.4", ">=1.2.0 <3.5.0-0"),
        ("* - 2", "<3.0.0-0"),
        ("1 - *", ">=1.0.0"),
        ("* - *", "*"),
        ("1.2.3-pre - 2.3.4-pre", ">=1.2.3-pre <=2.3.4-pre"),
        ("=1.2.3 - =2", ">=1.2.3 <3.0.0-0"),
        (">=1.2.x", ">=1.2.0"),
        ("<1.x", "<1.0.0-0"),
        ("<1.2", "<1.2.0-0"),
        ("=1.2", ">=1.2.0 <1.3.0-0"),
        ("1.2.x", ">=1.2.0 <1.3.0-0"),
        ("1.2.X", ">=1.2.0 <1.3.0-0"),
        ("1.2.*", ">=1.2.0 <1.3.0-0"),
        ("1.x.x", ">=1.0.0 <2.0.0-0"),
        ("1", ">=1.0.0 <2.0.0-0"),
        ("1.2.3", "1.2.3"),
        ("=1.2.3", "1.2.3"),
        (">= 1.2.3", ">=1.2.3"),
        ("<   1.2.3", "<1.2.3"),
        (">*", "<0.0.0-0"),
        ("<*", "<0.0.0-0"),
        (">=*", "*"),
        ("<=*", "*"),
        ("=*", "*"),
        ("x", "*"),
        ("X", "*"),
        (">1", ">=2.0.0"),
        ("<=1", "<2.0.0-0"),
        ("<1", "<1.0.0-0"),
        (">=1", ">=1.0.0"),
        (">1.2.3", ">1.2.3"),
        ("<=1.2.3", "<=1.2.3"),
        (">=1.2.3 <2", ">=1.2.3 <2.0.0-0"),
        ("1 || 2", ">=1.0.0 <2.0.0-0 || >=2.0.0 <3.0.0-0"),
        ("1||2", ">=1.0.0 <2.0.0-0 || >=2.0.0 <3.0.0-0"),
        ("  ^1.2  ", ">=1.2.0 <2.0.0-0"),
        ("\t>=1.0.0\n<2.0.0 ", ">=1.0.0 <2.0.0"),
    ] {
        check(input, expected);
    }
}

#[test]
fn the_largest_number_parses_where_nothing_raises_it() -> TestResult {
    let max = u64::MAX;
    check(&format!(">={max}.{max}.{max}"), &format!(">={max}.{max}.{max}"));
    check(&format!("<{max}"), &format!("<{max}.0.0-0"));
    let err = VersionRange::parse(&format!("^{max}")).err().ok_or("^max parsed")?;
    assert_eq!((err.kind, err.position), (VersionRangeErrorKind::NumberTooLarge, 1));
    let err = VersionRange::parse(&format!("1.2.3 - 1.{max}")).err().ok_or("hyphen parsed")?;
    assert_eq!((err.kind, err.position), (VersionRangeErrorKind::NumberTooLarge, 8));
    let err = VersionRange::parse("18446744073709551616").err().ok_or("2^64 parsed")?;
    assert_eq!((err.kind, err.position), (VersionRangeErrorKind::NumberTooLarge, 0));
    Ok(())
}

#[test]
fn equal_spellings_parse_to_equal_ranges() -> TestResult {
    for group in [
        &["1.x", "1", "1.X", "1.*", "1.x.x", "=1", "=1.x", " 1.x "][..],
        &["*", "x", "X", "=*", "*.x.x"],
        &["1.2.3", "=1.2.3", "= 1.2.3"],
        &[">=1.2", ">=1.2.x", ">= 1.2.*"],
        &["^1", "^1.x", "^ 1.x.x"],
        &["1.2.3 - 2", "1.2.3   -   2.x", "=1.2.3 - =2"],
    ] {
        let first = VersionRange::parse(group[0])?;
        for other in &group[1..] {
            assert_eq!(VersionRange::parse(other)?, first, "{other:?} vs {:?}", group[0]);
        }
    }
    Ok(())
}

#[test]
fn prints_canonically() -> TestResult {
    for (input, printed) in [
        ("1", "1.x"),
        ("1.2.X", "1.2.x"),
        ("x", "*"),
        ("=1.2.3", "1.2.3"),
        (">= 1.2.x", ">=1.2"),
        ("^ 1.x", "^1"),
        ("~1.2.3-beta.2", "~1.2.3-beta.2"),
        ("1.2.3   -   2.x", "1.2.3 - 2"),
        ("* - 2", "* - 2"),
        ("1||2.x ||  >=3 <4", "1.x || 2.x || >=3 <4"),
    ] {
        assert_eq!(VersionRange::parse(input)?.to_string(), printed, "{input:?}");
    }
    Ok(())
}

#[test]
fn intervals_keep_the_binding_bounds() -> TestResult {
    let range = VersionRange::parse(">=1.0.0-beta >0.5.0 <=2.0.0 <3.0.0-rc =1.5.0")?;
    let interval = Interval::of(&range.desugared[0]);
    let (lo, hi) = (interval.lo.ok_or("lo")?, interval.hi.ok_or("hi")?);
    assert_eq!((lo.version.to_string(), lo.inclusive), ("1.5.0".to_owned(), true));
    assert_eq!((hi.version.to_string(), hi.inclusive), ("1.5.0".to_owned(), true));

    let range = VersionRange::parse(">=1.0.0 >1.0.0 <2.0.0 <=2.0.0")?;
    let interval = Interval::of(&range.desugared[0]);
    assert!(!interval.lo.ok_or("lo")?.inclusive);
    assert!(!interval.hi.ok_or("hi")?.inclusive);
    Ok(())
}

#[test]
fn intersection_needs_both_sides_to_name_a_prerelease() -> TestResult {
    // Concatenating the comparators would give `>=1.0.0 <=1.5.0-beta`, which admits
    // `1.5.0-alpha` because one comparator names `1.5.0`; `>=1.0.0` alone does not.
    let a = VersionRange::parse(">=1.0.0")?;
    let b = VersionRange::parse("<=1.5.0-beta")?;
    let both = a.intersect(&b);
    assert_eq!(both.to_string(), ">=1.0.0 <1.5.0");
    assert!(!both.accepts(&Version::parse("1.5.0-alpha")?));
    assert!(both.accepts(&Version::parse("1.4.9")?));

    let a = VersionRange::parse("^1.2.3-beta.2")?;
    let b = VersionRange::parse(">=1.2.3-alpha <1.2.4")?;
    let both = a.intersect(&b);
    assert_eq!(both.to_string(), ">=1.2.3-beta.2 <1.2.4");
    assert!(both.accepts(&Version::parse("1.2.3-beta.4")?));

    let a = VersionRange::parse("^1.2.3-beta.2")?;
    let b = VersionRange::parse("^1.2.3")?;
    assert_eq!(a.intersect(&b).to_string(), ">=1.2.3 <2.0.0");
    Ok(())
}

#[test]
fn disjoint_ranges_intersect_to_nothing() -> TestResult {
    let none = VersionRange::parse("^1")?.intersect(&VersionRange::parse("^2")?);
    assert_eq!(none.to_string(), "<0.0.0");
    assert!(!none.accepts(&Version::new(0, 0, 0)));
    let none = VersionRange::parse(">1.2.3")?.intersect(&VersionRange::parse("<=1.2.3")?);
    assert_eq!(none.to_string(), "<0.0.0");
    Ok(())
}

#[test]
fn intersection_is_a_union_of_pairwise_sets() -> TestResult {
    let a = VersionRange::parse("^1 || ^3")?;
    let b = VersionRange::parse(">=1.5.0 <3.2.0")?;
    assert_eq!(a.intersect(&b).to_string(), ">=1.5.0 <2.0.0 || >=3.0.0 <3.2.0");
    let exact = VersionRange::parse("1.2.3")?.intersect(&VersionRange::parse("^1")?);
    assert_eq!(exact.to_string(), "1.2.3");
    Ok(())
}

#[test]
fn simplify_keeps_the_zero_where_it_matters() -> TestResult {
    let range = VersionRange::parse("^1.2 <=2.0.0-rc")?;
    assert_eq!(range.desugared().to_string(), ">=1.2.0 <2.0.0-0 <=2.0.0-rc");
    assert!(!range.accepts(&Version::parse("2.0.0-beta")?));
    assert!(!range.desugared().accepts(&Version::parse("2.0.0-beta")?));
    Ok(())
}
