//! Dependency resolution: choose one version of every plugin an agent needs,
//! transitively, so that every range on each plugin is satisfied, preferring the newest.
//!
//! The algorithm is a deterministic depth-first search with forward checking that learns
//! from its conflicts. Plugins are decided in the order they are first required (breadth
//! of the agent's list first, then what each choice brings); each takes the highest
//! version that every range on it so far accepts and whose own requirements fit what is
//! already chosen. Every failure comes back with its *conflict*: the chosen plugins whose
//! versions together caused it (the requirers of a range that rejects a version, a chosen
//! version a new range rejects). A choice outside the conflict of what failed after it
//! cannot help, so the search jumps back past it without trying its other versions
//! (conflict-directed backjumping); and each plugin that runs out of versions is learned
//! as a nogood, "while these plugins keep these versions, this plugin cannot be chosen",
//! so that another branch needing it fails at once instead of searching it again (as
//! PubGrub learns incompatibilities). On the unsatisfiable marketplaces where plain
//! backtracking tried every combination of unrelated versions (5^n), the work is linear
//! in the plugins (`plugins` bench, `unsatisfiable_*`). It is complete (it fails only
//! when no assignment exists) and, on the same index and references, always gives the
//! same answer. A search that takes more than [`MAX_STEPS`] candidate trials stops with
//! [`ResolveError::TooComplex`].
//!
//! When nothing fits, the error is the first plugin the search found missing or without
//! a fitting version (else the first conflict with an earlier choice), with the newest
//! versions tried first, told as a chain: "agent x needs pdf@^1.2; pdf 1.4.0 needs
//! document-runtime@^2; only 1.9.3 is available".
//!
//! Why not the `pubgrub` crate: its version sets must be closed under complement, which
//! node-semver ranges with the prerelease rule are not without re-encoding them as sets
//! of known versions, and then its messages would list versions instead of the ranges
//! people wrote; the learning above keeps the ranges and the chain messages. See
//! `docs/decisions.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use clio_spec::PluginRef;
use semver::Version;

use crate::plugin::Plugin;

/// The most candidate versions one resolution may try before giving up.
pub const MAX_STEPS: usize = 1_000_000;

/// The marketplace name of a plugin folder given by hand (a `--plugin` folder, the folder
/// `plugin check` reads): it stands in for its id whatever marketplace a reference names,
/// while the reference's range still applies.
pub const LOCAL: &str = "local";

/// One version of one plugin that resolution may choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The marketplace it comes from (`builtin` for the built-in plugins).
    pub marketplace: String,
    /// The plugin's id.
    pub id: String,
    /// Its version.
    pub version: Version,
    /// What it needs: its `requires` and, for a pack, its members.
    pub requires: Vec<PluginRef>,
}

impl Candidate {
    /// Returns the candidate of `plugin` from `marketplace`.
    pub fn of(marketplace: &str, plugin: &Plugin) -> Candidate {
        Candidate {
            marketplace: marketplace.to_owned(),
            id: plugin.id.clone(),
            version: plugin.version.clone(),
            requires: plugin.dependencies().cloned().collect(),
        }
    }
}

/// Every plugin version resolution may choose from.
#[derive(Debug, Clone, Default)]
pub struct Index {
    // Invariant: each list is sorted newest first, then by marketplace name, with no two
    // entries of one marketplace and version.
    by_id: BTreeMap<String, Vec<Candidate>>,
}

impl Index {
    /// Returns an empty index.
    pub fn new() -> Index {
        Index::default()
    }

    /// Returns an index holding the built-in plugins (marketplace `builtin`).
    pub fn with_builtins() -> Index {
        let mut index = Index::new();
        for plugin in crate::builtin::builtin_plugins() {
            index.add(Candidate::of("builtin", &plugin));
        }
        index
    }

    /// Adds a candidate; a second one with the same marketplace, id and version replaces
    /// the first.
    pub fn add(&mut self, candidate: Candidate) {
        let list = self.by_id.entry(candidate.id.clone()).or_default();
        list.retain(|c| {
            !(c.marketplace == candidate.marketplace && c.version == candidate.version)
        });
        list.push(candidate);
        list.sort_by(|a, b| {
            b.version.cmp(&a.version).then_with(|| a.marketplace.cmp(&b.marketplace))
        });
    }

    /// Returns the candidates of plugin `id`, newest first.
    pub fn candidates(&self, id: &str) -> &[Candidate] {
        self.by_id.get(id).map_or(&[], Vec::as_slice)
    }

    /// Returns how many candidates the index holds.
    pub fn len(&self) -> usize {
        self.by_id.values().map(Vec::len).sum()
    }

    /// Says whether the index holds no candidate.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// One chosen plugin version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The marketplace it comes from.
    pub marketplace: String,
    /// The plugin's id.
    pub id: String,
    /// The chosen version.
    pub version: Version,
}

impl fmt::Display for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}@{}", self.marketplace, self.id, self.version)
    }
}

/// The outcome of [`resolve`]: one version per needed plugin, sorted by id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resolution {
    /// The chosen plugins, sorted by id.
    pub plugins: Vec<Resolved>,
}

impl Resolution {
    /// Returns the chosen version of plugin `id`, if it was needed.
    pub fn get(&self, id: &str) -> Option<&Resolved> {
        self.plugins.iter().find(|p| p.id == id)
    }
}

/// One step of an explanation: `from` needs `needs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Who needs it: `agent x` or `pdf 1.4.0`.
    pub from: String,
    /// The reference, as written: `document-runtime@^2`.
    pub needs: String,
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} needs {}", self.from, self.needs)
    }
}

/// Why resolution failed, told as chains of who needs what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// No marketplace has a plugin named `id`.
    #[error("{}; no plugin named {id} is available", join_links(chain))]
    NotFound {
        /// How the plugin came to be needed.
        chain: Vec<Link>,
        /// The missing plugin.
        id: String,
    },
    /// No version of `id` satisfies every requirement on it.
    #[error("{}; {}", join_chains(requirements), unsatisfiable_tail(id, requirements.len(), available))]
    Unsatisfiable {
        /// The plugin.
        id: String,
        /// One chain per requirement on it, each ending at that requirement.
        requirements: Vec<Vec<Link>>,
        /// The versions that exist (`1.9.3`, or `clio/1.9.3` when a marketplace was named).
        available: Vec<String>,
    },
    /// A plugin already chosen at `chosen` does not satisfy a later requirement, though
    /// another version would; the search found no way to choose that other version.
    #[error(
        "{}; {id} {chosen} was chosen first and does not satisfy the last of these",
        join_chains(requirements)
    )]
    Conflict {
        /// The plugin.
        id: String,
        /// The version chosen first.
        chosen: String,
        /// One chain per requirement on it.
        requirements: Vec<Vec<Link>>,
    },
    /// The search tried more than [`MAX_STEPS`] candidates.
    #[error("resolution gave up after trying {steps} candidate versions")]
    TooComplex {
        /// How many it tried.
        steps: usize,
    },
}

fn join_links(chain: &[Link]) -> String {
    chain.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

fn join_chains(chains: &[Vec<Link>]) -> String {
    let mut links: Vec<&Link> = Vec::new();
    for link in chains.iter().flatten() {
        if !links.contains(&link) {
            links.push(link);
        }
    }
    links.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

fn unsatisfiable_tail(id: &str, n_requirements: usize, available: &[String]) -> String {
    match (n_requirements, available.len()) {
        (_, 0) => format!("no version of {id} is available"),
        (1, 1) => format!("only {} is available", available[0]),
        (1, _) => format!("only {} are available", available.join(", ")),
        _ => {
            format!("no version of {id} satisfies all of them; available: {}", available.join(", "))
        }
    }
}

/// Who put a requirement on a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
enum From {
    Root,
    Plugin(String),
}

#[derive(Debug, Clone)]
struct Constraint {
    from: From,
    reference: PluginRef,
}

/// The search's state; every change is undone on backtracking.
struct Ctx<'a> {
    index: &'a Index,
    root: &'a str,
    constraints: BTreeMap<String, Vec<Constraint>>,
    chosen: BTreeMap<String, usize>,
    // Invariant: ids in the order they were first required; those before the search's
    // position are exactly the chosen ones.
    order: Vec<String>,
    steps: usize,
    first_failure: Option<ResolveError>,
    nogoods: Vec<Nogood>,
    // For each plugin id, the nogoods that name it (chosen or needed).
    nogood_index: BTreeMap<String, Vec<usize>>,
}

/// A learned fact of one resolution: while every plugin of `assign` keeps its chosen
/// version (an index into its candidates), `needed` cannot be chosen at all, so any
/// choice that requires it fails at once instead of being searched again.
struct Nogood {
    assign: Vec<(String, usize)>,
    needed: String,
}

/// What one resolution did ([`resolve_with_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResolveStats {
    /// The candidate versions tried.
    pub steps: usize,
    /// The nogoods learned from conflicts.
    pub learned: usize,
}

/// Resolves `references`, required by `root` (such as `agent x`), against `index`.
pub fn resolve(
    index: &Index,
    root: &str,
    references: &[PluginRef],
) -> Result<Resolution, ResolveError> {
    resolve_with_stats(index, root, references).0
}

/// Does what [`resolve`] does and also says how much work it took: the candidate versions
/// tried and the conflicts learned (for benchmarks and tests that bound the work).
pub fn resolve_with_stats(
    index: &Index,
    root: &str,
    references: &[PluginRef],
) -> (Result<Resolution, ResolveError>, ResolveStats) {
    let mut ctx = Ctx {
        index,
        root,
        constraints: BTreeMap::new(),
        chosen: BTreeMap::new(),
        order: Vec::new(),
        steps: 0,
        first_failure: None,
        nogoods: Vec::new(),
        nogood_index: BTreeMap::new(),
    };
    let result = ctx.run(references);
    let stats = ResolveStats { steps: ctx.steps, learned: ctx.nogoods.len() };
    (result, stats)
}

impl Ctx<'_> {
    fn run(&mut self, references: &[PluginRef]) -> Result<Resolution, ResolveError> {
        for reference in references {
            self.constrain(
                reference.id().to_owned(),
                Constraint { from: From::Root, reference: reference.clone() },
            );
        }
        if let Some(err) = self.precheck() {
            return Err(err);
        }
        if self.solve(0)?.is_none() {
            let index = self.index;
            let plugins = self
                .chosen
                .iter()
                .map(|(id, &idx)| {
                    let c = &index.candidates(id)[idx];
                    Resolved {
                        marketplace: c.marketplace.clone(),
                        id: c.id.clone(),
                        version: c.version.clone(),
                    }
                })
                .collect();
            return Ok(Resolution { plugins });
        }
        Err(self.first_failure.take().unwrap_or(ResolveError::TooComplex { steps: 0 }))
    }
}

impl Ctx<'_> {
    fn constrain(&mut self, id: String, constraint: Constraint) {
        if !self.constraints.contains_key(&id) {
            self.order.push(id.clone());
        }
        self.constraints.entry(id).or_default().push(constraint);
    }

    /// Checks the root references alone, so that an impossible request fails with its
    /// own message before any search.
    fn precheck(&self) -> Option<ResolveError> {
        self.order.iter().find_map(|id| self.no_fit(id, &self.constraints[id]))
    }

    fn fits(&self, candidate: &Candidate, constraints: &[Constraint]) -> bool {
        constraints.iter().all(|c| {
            c.reference
                .marketplace()
                .is_none_or(|m| m == candidate.marketplace || candidate.marketplace == LOCAL)
                && c.reference.accepts_version(&candidate.version)
        })
    }

    /// Returns the error when no candidate of `id` fits `constraints`.
    fn no_fit(&self, id: &str, constraints: &[Constraint]) -> Option<ResolveError> {
        let candidates = self.index.candidates(id);
        if candidates.iter().any(|c| self.fits(c, constraints)) {
            return None;
        }
        if candidates.is_empty() {
            let chain = constraints.first().map(|c| self.chain(c)).unwrap_or_default();
            return Some(ResolveError::NotFound { chain, id: id.to_owned() });
        }
        let named = constraints.iter().any(|c| c.reference.marketplace().is_some());
        let mut available: Vec<String> = candidates
            .iter()
            .map(|c| {
                if named {
                    format!("{}/{}", c.marketplace, c.version)
                } else {
                    c.version.to_string()
                }
            })
            .collect();
        available.reverse();
        available.dedup();
        Some(ResolveError::Unsatisfiable {
            id: id.to_owned(),
            requirements: constraints.iter().map(|c| self.chain(c)).collect(),
            available,
        })
    }

    /// Returns the chain that ends with `constraint`: how its requirer came to be needed.
    fn chain(&self, constraint: &Constraint) -> Vec<Link> {
        let mut links = vec![self.link(constraint)];
        let mut from = constraint.from.clone();
        let mut guard = 0;
        while let From::Plugin(id) = from {
            guard += 1;
            let Some(first) = self.constraints.get(&id).and_then(|c| c.first()) else { break };
            if guard > self.order.len() {
                break;
            }
            links.push(self.link(first));
            from = first.from.clone();
        }
        links.reverse();
        links
    }

    fn link(&self, constraint: &Constraint) -> Link {
        let from = match &constraint.from {
            From::Root => self.root.to_owned(),
            From::Plugin(id) => match self.chosen.get(id) {
                Some(&idx) => format!("{id} {}", self.index.candidates(id)[idx].version),
                None => id.clone(),
            },
        };
        Link { from, needs: constraint.reference.to_string() }
    }

    /// Keeps the first failure, except that a missing or unsatisfiable plugin (a fact of
    /// the index) replaces a conflict with an earlier choice (an artefact of the order
    /// of the search).
    fn wants_record(&self) -> bool {
        matches!(self.first_failure, None | Some(ResolveError::Conflict { .. }))
    }

    fn record(&mut self, err: ResolveError) {
        let replace = match &self.first_failure {
            None => true,
            Some(ResolveError::Conflict { .. }) => !matches!(err, ResolveError::Conflict { .. }),
            Some(_) => false,
        };
        if replace {
            self.first_failure = Some(err);
        }
    }

    /// Decides `order[pos..]`: `Ok(None)` when every plugin from here is chosen, else
    /// `Ok(Some(conflict))`, the chosen plugins (all before `pos`) whose choices together
    /// leave no assignment from here. A choice that is not in the conflict of what failed
    /// after it cannot help, so the search jumps back past it without trying its other
    /// versions; and each failure is learned as a nogood ([`Nogood`]) so that it is not
    /// searched again in another branch.
    fn solve(&mut self, pos: usize) -> Result<Option<BTreeSet<String>>, ResolveError> {
        let Some(id) = self.order.get(pos).cloned() else { return Ok(None) };
        let index = self.index;
        let n_candidates = index.candidates(&id).len();
        let mut any_fit = false;
        let mut reasons: BTreeSet<String> = BTreeSet::new();
        for idx in 0..n_candidates {
            let candidate = &index.candidates(&id)[idx];
            if !self.fits(candidate, &self.constraints[&id]) {
                reasons.extend(self.rejecters(candidate, &self.constraints[&id]));
                continue;
            }
            any_fit = true;
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return Err(ResolveError::TooComplex { steps: self.steps });
            }
            // Choose it, add what it needs, and check every touched plugin still fits.
            self.chosen.insert(id.clone(), idx);
            let order_len = self.order.len();
            let mut touched = Vec::new();
            for reference in &candidate.requires {
                let dep = reference.id().to_owned();
                self.constrain(
                    dep.clone(),
                    Constraint { from: From::Plugin(id.clone()), reference: reference.clone() },
                );
                touched.push(dep);
            }
            let mut failure = None;
            for dep in &touched {
                let constraints = &self.constraints[dep];
                let chosen = self.chosen.get(dep).copied();
                let broken = match chosen {
                    Some(chosen) => !self.fits(&index.candidates(dep)[chosen], constraints),
                    None => !index.candidates(dep).iter().any(|c| self.fits(c, constraints)),
                };
                if broken {
                    let rejected = match chosen {
                        // The chosen version and the requirements that reject it.
                        Some(chosen) => {
                            let mut conflict =
                                self.rejecters(&index.candidates(dep)[chosen], constraints);
                            conflict.insert(dep.clone());
                            conflict
                        }
                        // Every version of it is rejected: by whom (learned below, once
                        // it is needed).
                        None => {
                            let mut rejecters = BTreeSet::new();
                            for c in index.candidates(dep) {
                                rejecters.extend(self.rejecters(c, constraints));
                            }
                            rejecters
                        }
                    };
                    // Explanations are built only when they may be reported.
                    if self.wants_record() {
                        let err = match chosen {
                            Some(chosen) => self.conflict(dep, chosen, constraints),
                            None => self
                                .no_fit(dep, constraints)
                                .unwrap_or(ResolveError::TooComplex { steps: 0 }),
                        };
                        self.record(err);
                    }
                    failure = Some(match chosen {
                        Some(_) => rejected,
                        None => self.learn(rejected, dep),
                    });
                    break;
                }
            }
            if failure.is_none() {
                failure = self.nogood_hit(&id, &touched);
            }
            let conflict = match failure {
                Some(conflict) => conflict,
                None => match self.solve(pos + 1)? {
                    None => return Ok(None),
                    Some(conflict) => conflict,
                },
            };
            // Undo: requirements this candidate added, then the choice.
            for dep in touched.iter().rev() {
                if let Some(list) = self.constraints.get_mut(dep) {
                    list.pop();
                }
            }
            for dep in self.order.drain(order_len..) {
                self.constraints.remove(&dep);
            }
            self.chosen.remove(&id);
            if !conflict.contains(&id) {
                // The failure does not depend on this choice: no other version helps.
                return Ok(Some(conflict));
            }
            reasons.extend(conflict.into_iter().filter(|r| r != &id));
        }
        if !any_fit {
            let err = self.no_fit(&id, &self.constraints[&id]);
            if let Some(err) = err {
                self.record(err);
            }
        }
        reasons.remove(&id);
        Ok(Some(self.learn(reasons, &id)))
    }

    /// The chosen plugins whose requirements reject `candidate` (the agent's own are no
    /// choice, and not named).
    fn rejecters(&self, candidate: &Candidate, constraints: &[Constraint]) -> BTreeSet<String> {
        constraints
            .iter()
            .filter(|c| !self.fits(candidate, std::slice::from_ref(c)))
            .filter_map(|c| match &c.from {
                From::Plugin(id) => Some(id.clone()),
                From::Root => None,
            })
            .collect()
    }

    /// Records that `needed` cannot be chosen while the plugins in `reasons` keep their
    /// current versions, and returns the conflict that makes: those plugins and every
    /// plugin whose choice requires `needed`.
    fn learn(&mut self, reasons: BTreeSet<String>, needed: &str) -> BTreeSet<String> {
        let assign: Option<Vec<(String, usize)>> =
            reasons.iter().map(|r| self.chosen.get(r).map(|&idx| (r.clone(), idx))).collect();
        // A reason that is not chosen cannot be (every requirement comes from a choice);
        // a nogood missing one would be too strong, so none is learned then.
        if let Some(assign) = assign {
            let at = self.nogoods.len();
            for (r, _) in &assign {
                self.nogood_index.entry(r.clone()).or_default().push(at);
            }
            self.nogood_index.entry(needed.to_owned()).or_default().push(at);
            self.nogoods.push(Nogood { assign, needed: needed.to_owned() });
        }
        let mut conflict = reasons;
        conflict.extend(self.requirers(needed));
        conflict
    }

    /// The plugins whose choices put a requirement on `id`.
    fn requirers(&self, id: &str) -> Vec<String> {
        self.constraints
            .get(id)
            .into_iter()
            .flatten()
            .filter_map(|c| match &c.from {
                From::Plugin(from) => Some(from.clone()),
                From::Root => None,
            })
            .collect()
    }

    /// Returns the conflict of a learned nogood that holds now that `id` is chosen and
    /// `touched` are required.
    fn nogood_hit(&self, id: &str, touched: &[String]) -> Option<BTreeSet<String>> {
        let keys = std::iter::once(id).chain(touched.iter().map(String::as_str));
        for key in keys {
            for &at in self.nogood_index.get(key).into_iter().flatten() {
                let nogood = &self.nogoods[at];
                let holds = self.constraints.contains_key(&nogood.needed)
                    && nogood.assign.iter().all(|(r, idx)| self.chosen.get(r) == Some(idx));
                if holds {
                    let mut conflict: BTreeSet<String> =
                        nogood.assign.iter().map(|(r, _)| r.clone()).collect();
                    conflict.extend(self.requirers(&nogood.needed));
                    return Some(conflict);
                }
            }
        }
        None
    }

    /// The error for an already chosen plugin that a new requirement rejects.
    fn conflict(&self, id: &str, chosen: usize, constraints: &[Constraint]) -> ResolveError {
        self.no_fit(id, constraints).unwrap_or_else(|| ResolveError::Conflict {
            id: id.to_owned(),
            chosen: self.index.candidates(id)[chosen].version.to_string(),
            requirements: constraints.iter().map(|c| self.chain(c)).collect(),
        })
    }
}
