//! The module graph of each crate, for tidy: which top-level modules a crate's modules use
//! (`crate::<module>` paths in code, comments and test modules left out), and the circles
//! in it. A crate's top-level modules must form layers, edges pointing one way, so that a
//! reader can take a crate bottom up; the one knot allowed is clio-flow's engine (`ENGINE`),
//! whose modules are one unit (see `docs/decisions.md`, "Module circles").

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// clio-flow's engine: a flow's `Ctx`, the run's state (`runtime`), the registry of
/// flows and tools, the `Flow` trait and the gate call each other by nature (a flow gets a
/// `Ctx`, whose calls resolve through the registry that holds the flows, and pass the gate,
/// which records through the run's state). They count as one module; nothing else may join
/// a circle, and no engine module may use a module built on the engine.
pub(crate) const ENGINE: (&str, &[&str]) =
    ("clio-flow", &["ctx", "flow", "gate", "registry", "runtime"]);

/// The top-level modules of one crate and, for each, the top-level modules it uses.
pub(crate) type Graph = BTreeMap<String, BTreeSet<String>>;

/// Reads the module graph of the crate whose sources are in `src`: each file belongs to
/// the top-level module its path starts with (`lib.rs` and `main.rs` to the crate root,
/// which is left out: it declares and re-exports everything).
pub(crate) fn graph(src: &Path) -> Result<Graph, String> {
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| format!("{}: cannot be read: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap_or(&path);
            let Some(first) = rel.components().next() else { continue };
            let top = first.as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned();
            if top == "lib" || top == "main" {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("{}: cannot be read: {e}", path.display()))?;
            files.entry(top).or_default().push(text);
        }
    }
    let names: BTreeSet<String> = files.keys().cloned().collect();
    let mut graph = Graph::new();
    for (module, texts) in &files {
        let used = graph.entry(module.clone()).or_default();
        for text in texts {
            for target in crate_paths(&code_of(text)) {
                if target != *module && names.contains(&target) {
                    used.insert(target);
                }
            }
        }
    }
    Ok(graph)
}

/// Returns `text` without its comments and its test module (from `#[cfg(test)]` on):
/// what the module's code uses.
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    code.lines()
        .map(|line| match line.find("//") {
            // A `//` inside a string (a URL) is rare in these crates; a path in such a
            // string would at worst add an edge, never hide one.
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Returns the first segment of every `crate::<segment>` path in `code`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        // `clio_crate::x` or `$crate::x` is not this crate's path.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let segment: String =
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !segment.is_empty() {
            found.insert(segment);
        }
    }
    found
}

/// Returns the circles of `graph` (its strongly connected parts of two or more modules),
/// each sorted, with the modules of `knot` taken as one allowed unit: a circle made only of
/// them is not reported, and the unit joins a circle only through other modules.
pub(crate) fn circles(graph: &Graph, knot: &[&str]) -> Vec<Vec<String>> {
    // Merge the knot into one node.
    let unit = |m: &str| -> String {
        if knot.contains(&m) { format!("{{{}}}", knot.join(", ")) } else { m.to_owned() }
    };
    let mut merged: Graph = Graph::new();
    for (from, targets) in graph {
        let node = merged.entry(unit(from)).or_default();
        for to in targets {
            if unit(to) != unit(from) {
                node.insert(unit(to));
            }
        }
    }
    for targets in graph.values() {
        for to in targets {
            merged.entry(unit(to)).or_default();
        }
    }
    strongly_connected(&merged).into_iter().filter(|part| part.len() > 1).collect()
}

/// Tarjan's algorithm, iteratively; parts come out sorted, in a stable order.
fn strongly_connected(graph: &Graph) -> Vec<Vec<String>> {
    let nodes: Vec<&String> = graph.keys().collect();
    let index_of: BTreeMap<&String, usize> =
        nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let edges: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| graph[*n].iter().filter_map(|t| index_of.get(t).copied()).collect())
        .collect();
    let count = nodes.len();
    let (mut index, mut low) = (vec![usize::MAX; count], vec![0; count]);
    let (mut on_stack, mut stack, mut parts) = (vec![false; count], Vec::new(), Vec::new());
    let mut next = 0;
    for start in 0..count {
        if index[start] != usize::MAX {
            continue;
        }
        // (node, position in its edge list)
        let mut work = vec![(start, 0)];
        while let Some(&mut (node, ref mut pos)) = work.last_mut() {
            if *pos == 0 && index[node] == usize::MAX {
                index[node] = next;
                low[node] = next;
                next += 1;
                stack.push(node);
                on_stack[node] = true;
            }
            if let Some(&to) = edges[node].get(*pos) {
                *pos += 1;
                if index[to] == usize::MAX {
                    work.push((to, 0));
                } else if on_stack[to] {
                    low[node] = low[node].min(index[to]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index[node] {
                let mut part = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    part.push(nodes[member].clone());
                    if member == node {
                        break;
                    }
                }
                part.sort();
                parts.push(part);
            }
        }
    }
    parts.sort();
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph_of(edges: &[(&str, &[&str])]) -> Graph {
        edges
            .iter()
            .map(|(from, to)| {
                ((*from).to_owned(), to.iter().map(|t| (*t).to_owned()).collect::<BTreeSet<_>>())
            })
            .collect()
    }

    #[test]
    fn a_circle_is_found_and_layers_are_not() {
        let layered = graph_of(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &[])]);
        assert!(circles(&layered, &[]).is_empty());
        let circled = graph_of(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
        assert_eq!(circles(&circled, &[]), vec![vec!["a", "b", "c"]]);
    }

    #[test]
    fn the_knot_is_one_unit_that_may_not_join_a_circle() {
        let inside = graph_of(&[("ctx", &["runtime"]), ("runtime", &["ctx"]), ("react", &["ctx"])]);
        assert!(circles(&inside, &["ctx", "runtime"]).is_empty(), "a knot alone is allowed");
        // The engine using a feature built on it is a circle through the feature.
        let upward =
            graph_of(&[("ctx", &["runtime", "react"]), ("runtime", &["ctx"]), ("react", &["ctx"])]);
        assert_eq!(circles(&upward, &["ctx", "runtime"]), vec![vec!["react", "{ctx, runtime}"]]);
    }

    #[test]
    fn paths_are_read_from_code_only() {
        let text = "use crate::gate::Passed; // crate::react is not used\n\
                    fn f() { clio_crate::x(); crate::runtime::blocking(); }\n\
                    #[cfg(test)]\nmod tests { use crate::workflow_flow; }\n";
        let found = crate_paths(&code_of(text));
        assert_eq!(found.into_iter().collect::<Vec<_>>(), ["gate", "runtime"]);
    }

    /// The crates of this workspace as they are now: the check the tidy test runs.
    #[test]
    fn the_workspace_has_no_module_circles() {
        let root = crate::project_root();
        let mut problems = Vec::new();
        crate::tidy::check_module_circles(&root, &mut problems);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
