//! The DAG core on petgraph: cycle detection with the steps on the cycle, topological order,
//! layers and ancestry. Steps are indices; petgraph types stay inside this module.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use petgraph::algo::{tarjan_scc, toposort};
use petgraph::graph::{DiGraph, NodeIndex};

/// Builds the graph with an edge from each step to each step it waits on.
fn waits_on_graph(deps: &[Vec<usize>]) -> DiGraph<(), ()> {
    let n_edges = deps.iter().map(Vec::len).sum();
    let mut graph = DiGraph::with_capacity(deps.len(), n_edges);
    for _ in 0..deps.len() {
        graph.add_node(());
    }
    for (step, step_deps) in deps.iter().enumerate() {
        for &dep in step_deps {
            graph.add_edge(NodeIndex::new(step), NodeIndex::new(dep), ());
        }
    }
    graph
}

/// Returns a cycle if `deps` has one: the steps on it, each waiting on the next and the last
/// waiting on the first.
///
/// The cycle reported goes through the earliest step (by index) that is on any cycle, and is
/// a shortest cycle through it, so the same workflow always names the same cycle.
pub(crate) fn find_cycle(deps: &[Vec<usize>]) -> Option<Vec<usize>> {
    let graph = waits_on_graph(deps);
    if toposort(&graph, None).is_ok() {
        return None;
    }
    let mut component = vec![usize::MAX; deps.len()];
    let mut start = None;
    for (idx, scc) in tarjan_scc(&graph).into_iter().enumerate() {
        let cyclic =
            scc.len() > 1 || scc.iter().any(|node| deps[node.index()].contains(&node.index()));
        if !cyclic {
            continue;
        }
        for node in &scc {
            component[node.index()] = idx;
        }
        let first = scc.iter().map(|node| node.index()).min();
        start = match (start, first) {
            (Some(a), Some(b)) => Some(usize::min(a, b)),
            (a, b) => a.or(b),
        };
    }
    let start = start?;
    // A breadth-first search inside the component finds a shortest way back to `start`.
    let mut parent = vec![usize::MAX; deps.len()];
    let mut queue = VecDeque::from([start]);
    while let Some(step) = queue.pop_front() {
        for &dep in &deps[step] {
            if component[dep] != component[start] {
                continue;
            }
            if dep == start {
                let mut cycle = vec![step];
                let mut at = step;
                while at != start {
                    at = parent[at];
                    cycle.push(at);
                }
                cycle.reverse();
                return Some(cycle);
            }
            if parent[dep] == usize::MAX {
                parent[dep] = step;
                queue.push_back(dep);
            }
        }
    }
    debug_assert!(false, "a strongly connected component without a cycle");
    None
}

/// Returns a topological order (every step after the steps it waits on), ties broken by
/// index; `None` when there is a cycle.
pub(crate) fn topo_order(deps: &[Vec<usize>]) -> Option<Vec<usize>> {
    let n = deps.len();
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependents = vec![Vec::new(); n];
    for (step, step_deps) in deps.iter().enumerate() {
        for &dep in step_deps {
            dependents[dep].push(step);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&step| waiting[step] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(step)) = ready.pop() {
        order.push(step);
        for &next in &dependents[step] {
            waiting[next] -= 1;
            if waiting[next] == 0 {
                ready.push(Reverse(next));
            }
        }
    }
    (order.len() == n).then_some(order)
}

/// Returns each step's layer: 0 for a step that waits on nothing, else one more than the
/// deepest step it waits on. Expects no cycle.
pub(crate) fn layers(deps: &[Vec<usize>]) -> Vec<usize> {
    let mut layer = vec![0; deps.len()];
    for step in topo_order(deps).unwrap_or_default() {
        layer[step] = deps[step].iter().map(|&dep| layer[dep] + 1).max().unwrap_or(0);
    }
    layer
}

/// Answers "does this step wait on that one, directly or transitively?" for one step after
/// another, with one allocation for all of them.
///
/// For each step the search is incremental: the steps found to be waited on so far stay
/// found, and a later question about the same step goes on from where the last one
/// stopped. So all the questions about one step together scan each edge it can reach at
/// most once, and a question about a direct dependency scans nothing.
pub(crate) struct Ancestry<'a> {
    deps: &'a [Vec<usize>],
    // Invariant: `found[s] == step + 1` when `s` is known to be waited on by `step`, the
    // step being asked about (0 is no step).
    found: Vec<usize>,
    // The found steps whose own dependencies are not scanned yet.
    stack: Vec<usize>,
    // The step the search is about, plus one (0 before the first question).
    step: usize,
    // Edges scanned so far, over every step: the measure of the work done.
    scanned: u64,
}

impl<'a> Ancestry<'a> {
    /// Starts answering questions about the graph `deps`.
    pub(crate) fn new(deps: &'a [Vec<usize>]) -> Ancestry<'a> {
        Ancestry { deps, found: vec![0; deps.len()], stack: Vec::new(), step: 0, scanned: 0 }
    }

    /// Returns whether `step` waits on `ancestor`, directly or transitively.
    pub(crate) fn waits_on(&mut self, step: usize, ancestor: usize) -> bool {
        let mark = step + 1;
        if self.step != mark {
            // A new step: its direct dependencies are found, and to be scanned.
            self.step = mark;
            self.stack.clear();
            for &dep in &self.deps[step] {
                self.scanned += 1;
                if self.found[dep] != mark {
                    self.found[dep] = mark;
                    self.stack.push(dep);
                }
            }
        }
        while self.found[ancestor] != mark {
            let Some(at) = self.stack.pop() else { return false };
            for &dep in &self.deps[at] {
                self.scanned += 1;
                if self.found[dep] != mark {
                    self.found[dep] = mark;
                    self.stack.push(dep);
                }
            }
        }
        true
    }

    /// Returns how many edges were scanned so far.
    #[cfg(test)]
    pub(crate) fn scanned(&self) -> u64 {
        self.scanned
    }
}

/// Returns whether `step` waits on `ancestor`, directly or transitively.
#[cfg(test)]
pub(crate) fn waits_on(deps: &[Vec<usize>], step: usize, ancestor: usize) -> bool {
    Ancestry::new(deps).waits_on(step, ancestor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles() {
        assert_eq!(find_cycle(&[vec![], vec![0], vec![1]]), None);
        assert_eq!(find_cycle(&[vec![0]]), Some(vec![0]));
        assert_eq!(find_cycle(&[vec![], vec![2], vec![3], vec![1]]), Some(vec![1, 2, 3]));
    }

    #[test]
    fn orders_and_layers() {
        let deps = vec![vec![2], vec![], vec![1], vec![0, 1]];
        assert_eq!(topo_order(&deps), Some(vec![1, 2, 0, 3]));
        assert_eq!(layers(&deps), vec![2, 0, 1, 3]);
        assert!(waits_on(&deps, 3, 1));
        assert!(!waits_on(&deps, 1, 3));
    }

    /// A chain of 20,000 steps and questions from its last step about every other one:
    /// a search per question would scan 2 * 10^8 edges; the incremental one scans each
    /// edge once.
    #[test]
    fn questions_about_one_step_scan_each_edge_once() {
        let n = 20_000;
        let deps: Vec<Vec<usize>> =
            (0..n).map(|i| if i == 0 { vec![] } else { vec![i - 1] }).collect();
        let mut ancestry = Ancestry::new(&deps);
        for ancestor in 0..n - 1 {
            assert!(ancestry.waits_on(n - 1, ancestor));
        }
        assert!(!ancestry.waits_on(n - 1, n - 1));
        assert!(ancestry.scanned() <= n as u64, "{} edges scanned", ancestry.scanned());
        // Another step starts afresh, and the answers stay right.
        assert!(ancestry.waits_on(5, 0));
        assert!(!ancestry.waits_on(5, 6));
        assert!(!ancestry.waits_on(0, 1));
    }
}
