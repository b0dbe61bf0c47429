//! Resolution: the chain messages of SPEC §4, backtracking, prerelease and marketplace
//! rules, and a property test against brute force on small generated marketplaces
//! (the result satisfies every range, is deterministic, and resolution fails only when
//! no assignment exists).

use std::collections::BTreeMap;

use clio_plugins::{Candidate, Index, ResolveError, resolve, resolve_with_stats};
use clio_spec::PluginRef;
use proptest::prelude::*;
use semver::Version;

fn refs(list: &[&str]) -> Vec<PluginRef> {
    list.iter().map(|r| PluginRef::parse(r).unwrap()).collect()
}

fn candidate(market: &str, id: &str, version: &str, requires: &[&str]) -> Candidate {
    Candidate {
        marketplace: market.into(),
        id: id.into(),
        version: Version::parse(version).unwrap(),
        requires: refs(requires),
    }
}

fn index(list: &[(&str, &str, &[&str])]) -> Index {
    let mut index = Index::new();
    for (id, version, requires) in list {
        index.add(candidate("clio", id, version, requires));
    }
    index
}

fn chosen(index: &Index, root: &[&str]) -> Vec<String> {
    resolve(index, "agent x", &refs(root))
        .unwrap()
        .plugins
        .iter()
        .map(|p| format!("{}@{}", p.id, p.version))
        .collect()
}

#[test]
fn the_spec_example_reads_as_a_chain() {
    let index =
        index(&[("pdf", "1.4.0", &["document-runtime@^2"]), ("document-runtime", "1.9.3", &[])]);
    let err = resolve(&index, "agent x", &refs(&["pdf@^1.2"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent x needs pdf@^1.2; pdf 1.4.0 needs document-runtime@^2; only 1.9.3 is available"
    );
}

#[test]
fn conflicting_ranges_name_every_requirer() {
    let index = index(&[("a", "1.0.0", &[]), ("a", "2.0.0", &[]), ("b", "1.0.0", &["a@^2"])]);
    let err = resolve(&index, "agent x", &refs(&["a@^1", "b"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent x needs a@^1; agent x needs b; b 1.0.0 needs a@^2; no version of a satisfies all of them; available: 1.0.0, 2.0.0"
    );
    let err = resolve(&index, "agent x", &refs(&["a@^1", "a@^2"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent x needs a@^1; agent x needs a@^2; no version of a satisfies all of them; available: 1.0.0, 2.0.0"
    );
}

#[test]
fn a_missing_plugin_is_told_before_a_conflict_with_an_earlier_choice() {
    let index =
        index(&[("a", "1.0.0", &[]), ("a", "2.0.0", &[]), ("b", "1.0.0", &["a@^1", "c@^5"])]);
    let err = resolve(&index, "agent x", &refs(&["a", "b"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent x needs b; b 1.0.0 needs c@^5; no plugin named c is available"
    );
    // With only a conflict to tell, it says which choice came first.
    let index = self::index(&[("a", "1.0.0", &[]), ("a", "2.0.0", &[]), ("b", "1.0.0", &["a@^1"])]);
    let err =
        resolve(&index, "agent x", &refs(&["a@2.0.0 || 1.0.0", "b"])).map(|r| r.plugins.len());
    assert_eq!(err, Ok(2), "the search backs up from a 2.0.0 to a 1.0.0");
}

#[test]
fn a_missing_plugin_is_named() {
    let err =
        resolve(&index(&[("pdf", "1.0.0", &["fonts"])]), "agent x", &refs(&["pdf"])).unwrap_err();
    assert!(matches!(&err, ResolveError::NotFound { id, .. } if id == "fonts"));
    assert_eq!(
        err.to_string(),
        "agent x needs pdf; pdf 1.0.0 needs fonts; no plugin named fonts is available"
    );
}

#[test]
fn newest_versions_win_and_ranges_intersect() {
    let index = index(&[
        ("pdf", "1.2.0", &[]),
        ("pdf", "1.5.0", &[]),
        ("pdf", "2.0.0", &[]),
        ("viewer", "1.0.0", &["pdf@<1.4"]),
    ]);
    assert_eq!(chosen(&index, &["pdf"]), ["pdf@2.0.0"]);
    assert_eq!(chosen(&index, &["pdf@^1", "viewer"]), ["pdf@1.2.0", "viewer@1.0.0"]);
}

#[test]
fn the_search_backs_up_to_an_older_version() {
    // The newest `app` needs a `lib` that does not exist; the older one works.
    let index = index(&[
        ("app", "2.0.0", &["lib@^3"]),
        ("app", "1.0.0", &["lib@^1"]),
        ("lib", "1.1.0", &[]),
    ]);
    assert_eq!(chosen(&index, &["app"]), ["app@1.0.0", "lib@1.1.0"]);
}

#[test]
fn prereleases_only_when_a_range_names_them() {
    let index = index(&[("pdf", "1.0.0", &[]), ("pdf", "1.1.0-beta.1", &[])]);
    assert_eq!(chosen(&index, &["pdf"]), ["pdf@1.0.0"]);
    assert_eq!(chosen(&index, &["pdf@^1.1.0-beta.0"]), ["pdf@1.1.0-beta.1"]);
}

#[test]
fn a_named_marketplace_restricts_candidates() {
    let mut index = Index::new();
    index.add(candidate("clio", "pdf", "1.0.0", &[]));
    index.add(candidate("other", "pdf", "2.0.0", &[]));
    let res = resolve(&index, "agent x", &refs(&["clio/pdf"])).unwrap();
    assert_eq!(res.plugins[0].to_string(), "clio/pdf@1.0.0");
    let err = resolve(&index, "agent x", &refs(&["clio/pdf@^2"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent x needs clio/pdf@^2; only clio/1.0.0, other/2.0.0 are available"
    );
}

#[test]
fn dependency_cycles_resolve() {
    let index = index(&[("a", "1.0.0", &["b@^1"]), ("b", "1.0.0", &["a@^1"])]);
    assert_eq!(chosen(&index, &["a"]), ["a@1.0.0", "b@1.0.0"]);
}

#[test]
fn builtins_are_always_available() {
    let res =
        resolve(&Index::with_builtins(), "agent x", &refs(&["core", "memory", "orchestration"]))
            .unwrap();
    assert_eq!(res.plugins.len(), 3);
    assert!(res.plugins.iter().all(|p| p.marketplace == "builtin"));
}

// ---- property test against brute force ----

const VERSIONS: [&str; 4] = ["0.1.0", "1.0.0", "1.1.0", "2.0.0"];
const RANGES: [&str; 7] = ["^1", "^2", ">=1.1.0", "<1.0.0", "*", "~0.1", "1.0.0 || 2.0.0"];

/// A dependency or root reference: (id index, range index).
type Dep = (usize, usize);

#[derive(Debug, Clone)]
struct Market {
    // (id index, version index, dependencies)
    plugins: Vec<(usize, usize, Vec<Dep>)>,
    root: Vec<Dep>,
}

fn market() -> impl Strategy<Value = Market> {
    market_of(4, 9, 3)
}

/// Markets over `ids` plugin ids, with fewer than `listings` listed versions, each with
/// fewer than `deps` requirements.
fn market_of(ids: usize, listings: usize, deps: usize) -> impl Strategy<Value = Market> {
    let dep = (0..ids, 0..RANGES.len());
    let plugin = (0..ids, 0..VERSIONS.len(), prop::collection::vec(dep.clone(), 0..deps));
    (prop::collection::vec(plugin, 0..listings), prop::collection::vec(dep, 1..4))
        .prop_map(|(plugins, root)| Market { plugins, root })
}

fn reference(id: usize, range: usize) -> PluginRef {
    PluginRef::parse(&format!("p{id}@{}", RANGES[range])).unwrap()
}

/// For each id index, each version index and what it requires.
type Table = BTreeMap<usize, BTreeMap<usize, Vec<PluginRef>>>;

fn build(m: &Market) -> (Index, Table) {
    let mut index = Index::new();
    let mut table: Table = BTreeMap::new();
    for (id, version, deps) in &m.plugins {
        let requires: Vec<PluginRef> = deps.iter().map(|&(d, r)| reference(d, r)).collect();
        // A later listing of the same version replaces the earlier one, as in the index.
        table.entry(*id).or_default().insert(*version, requires.clone());
        index.add(Candidate {
            marketplace: "m".into(),
            id: format!("p{id}"),
            version: Version::parse(VERSIONS[*version]).unwrap(),
            requires,
        });
    }
    (index, table)
}

/// Says whether some assignment (each plugin absent or at one listed version) satisfies
/// the root and every chosen plugin's requirements.
fn brute_force(
    table: &BTreeMap<usize, BTreeMap<usize, Vec<PluginRef>>>,
    root: &[PluginRef],
) -> bool {
    let ids: Vec<usize> = table.keys().copied().collect();
    let options: Vec<Vec<Option<usize>>> = ids
        .iter()
        .map(|id| std::iter::once(None).chain(table[id].keys().map(|&v| Some(v))).collect())
        .collect();
    let mut counters = vec![0usize; ids.len()];
    loop {
        let assignment: BTreeMap<String, (usize, usize)> = ids
            .iter()
            .zip(&counters)
            .filter_map(|(&id, &c)| {
                options[ids.iter().position(|&i| i == id).unwrap()][c]
                    .map(|v| (format!("p{id}"), (id, v)))
            })
            .collect();
        let satisfied = |r: &PluginRef| {
            assignment
                .get(r.id())
                .is_some_and(|&(_, v)| r.accepts_version(&Version::parse(VERSIONS[v]).unwrap()))
        };
        if root.iter().all(satisfied)
            && assignment.values().all(|&(id, v)| table[&id][&v].iter().all(satisfied))
        {
            return true;
        }
        // Next assignment, odometer style.
        let mut pos = 0;
        loop {
            if pos == counters.len() {
                return false;
            }
            counters[pos] += 1;
            if counters[pos] < options[pos].len() {
                break;
            }
            counters[pos] = 0;
            pos += 1;
        }
    }
}

proptest! {
    #[test]
    fn resolution_agrees_with_brute_force(m in market()) {
        agrees_with_brute_force(&m)?;
    }

    /// Larger markets, where conflicts are learned and the search jumps back over
    /// choices that do not matter: still exactly brute force's answer.
    #[test]
    fn learning_resolution_agrees_with_brute_force(m in market_of(6, 22, 4)) {
        agrees_with_brute_force(&m)?;
    }
}

fn agrees_with_brute_force(m: &Market) -> Result<(), TestCaseError> {
    let (index, table) = build(m);
    let root: Vec<PluginRef> = m.root.iter().map(|&(id, r)| reference(id, r)).collect();
    let first = resolve(&index, "agent x", &root);
    let second = resolve(&index, "agent x", &root);
    prop_assert_eq!(&first, &second, "deterministic");
    let exists = brute_force(&table, &root);
    match first {
        Ok(res) => {
            prop_assert!(exists, "resolved although brute force found nothing");
            let version = |id: &str| res.get(id).map(|p| p.version.clone());
            for r in &root {
                prop_assert!(
                    version(r.id()).is_some_and(|v| r.accepts_version(&v)),
                    "root {} unsatisfied",
                    r
                );
            }
            for p in &res.plugins {
                let id: usize = p.id[1..].parse().unwrap();
                let v =
                    VERSIONS.iter().position(|s| Version::parse(s).unwrap() == p.version).unwrap();
                for r in &table[&id][&v] {
                    prop_assert!(
                        version(r.id()).is_some_and(|v| r.accepts_version(&v)),
                        "{} needs {} unsatisfied",
                        p,
                        r
                    );
                }
            }
        }
        Err(err) => prop_assert!(!exists, "failed ({err}) although an assignment exists"),
    }
    Ok(())
}

// ---- unsatisfiable marketplaces: the work stays bounded and the conflict is told ----

/// The three shapes of the `plugins` bench (benches/plugins.rs), with `n` plugins `p0..`
/// of 5 versions each: each makes a plain backtracking search try all 5^n combinations
/// of the `p` plugins' versions before it can say no.
fn unsatisfiable(shape: &str, n: usize) -> (Index, Vec<PluginRef>) {
    let versions = ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0"];
    let mut list: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut root = Vec::new();
    let mut add = |id: &str, v: &str, requires: &[&str]| {
        list.push((id.into(), v.into(), requires.iter().map(|r| (*r).to_owned()).collect()));
    };
    match shape {
        "late_wipeout" => {
            for i in 0..n {
                versions.iter().for_each(|v| add(&format!("p{i}"), v, &[]));
                root.push(format!("p{i}@^1"));
            }
            versions.iter().for_each(|v| add("z", v, &["w@^2"]));
            add("w", "1.0.0", &[]);
            root.push("z".into());
        }
        "chain_to_conflict" => {
            for i in 0..n {
                let next = if i + 1 < n { format!("p{}@^1", i + 1) } else { "shared@^2".into() };
                versions.iter().for_each(|v| add(&format!("p{i}"), v, &[next.as_str()]));
            }
            versions.iter().chain(&["2.0.0"]).for_each(|v| add("shared", v, &[]));
            root.extend(["shared@^1".to_owned(), "p0".to_owned()]);
        }
        _ => {
            for i in 0..n {
                versions.iter().for_each(|v| add(&format!("p{i}"), v, &[]));
                root.push(format!("p{i}"));
            }
            versions.iter().for_each(|v| add("x", v, &["c@^1"]));
            versions.iter().for_each(|v| add("y", v, &["c@^2"]));
            add("c", "1.0.0", &[]);
            add("c", "2.0.0", &[]);
            root.extend(["x".to_owned(), "y".to_owned()]);
        }
    }
    let mut index = Index::new();
    for (id, v, requires) in &list {
        let requires: Vec<&str> = requires.iter().map(String::as_str).collect();
        index.add(candidate("clio", id, v, &requires));
    }
    let root: Vec<&str> = root.iter().map(String::as_str).collect();
    (index, refs(&root))
}

#[test]
fn unsatisfiable_marketplaces_take_work_linear_in_their_plugins() {
    // Plain backtracking tried 5^n combinations here (more than 30 s at n = 9); learning
    // from each conflict keeps the versions tried within a small multiple of 5n.
    for shape in ["late_wipeout", "chain_to_conflict", "pair_conflict"] {
        for n in [4, 12, 20] {
            let (index, root) = unsatisfiable(shape, n);
            let (result, stats) = resolve_with_stats(&index, "agent x", &root);
            assert!(result.is_err(), "{shape} {n} resolved");
            assert!(!matches!(result, Err(ResolveError::TooComplex { .. })), "{shape} {n} gave up");
            let bound = 6 * 5 * (n + 2);
            assert!(stats.steps <= bound, "{shape} at {n}: {} steps > {bound}", stats.steps);
        }
    }
}

#[test]
fn an_unsatisfiable_marketplace_names_its_conflict() {
    let message = |shape: &str| {
        let (index, root) = unsatisfiable(shape, 3);
        resolve(&index, "agent x", &root).unwrap_err().to_string()
    };
    assert_eq!(
        message("late_wipeout"),
        "agent x needs z; z 1.4.0 needs w@^2; only 1.0.0 is available"
    );
    assert_eq!(
        message("chain_to_conflict"),
        "agent x needs shared@^1; agent x needs p0; p0 1.4.0 needs p1@^1; p1 1.4.0 needs p2@^1; p2 1.4.0 needs shared@^2; no version of shared satisfies all of them; available: 1.0.0, 1.1.0, 1.2.0, 1.3.0, 1.4.0, 2.0.0"
    );
    assert_eq!(
        message("pair_conflict"),
        "agent x needs x; x 1.4.0 needs c@^1; agent x needs y; y 1.4.0 needs c@^2; no version of c satisfies all of them; available: 1.0.0, 2.0.0"
    );
}
