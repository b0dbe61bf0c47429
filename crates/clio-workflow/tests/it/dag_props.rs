//! Property tests of validation on random graphs: every cycle is found and named correctly,
//! every DAG is accepted, and layers respect every edge.

use clio_workflow::{Step, Workflow, WorkflowError};
use proptest::prelude::*;

/// Builds steps `s0..sn` where `edges` (step, dep) means step waits on dep.
fn steps(n: usize, edges: &[(usize, usize)]) -> Vec<Step> {
    (0..n)
        .map(|i| {
            let after: Vec<String> = edges
                .iter()
                .filter(|(step, _)| *step == i)
                .map(|(_, dep)| format!("s{dep}"))
                .collect();
            Step::new(format!("s{i}"), "t").after(after)
        })
        .collect()
}

/// A plain three-colour depth-first search, the reference for "has a cycle".
fn has_cycle(n: usize, edges: &[(usize, usize)]) -> bool {
    fn visit(at: usize, edges: &[(usize, usize)], colour: &mut [u8]) -> bool {
        colour[at] = 1;
        for &(_, dep) in edges.iter().filter(|(step, _)| *step == at) {
            if colour[dep] == 1 || (colour[dep] == 0 && visit(dep, edges, colour)) {
                return true;
            }
        }
        colour[at] = 2;
        false
    }
    let mut colour = vec![0u8; n];
    (0..n).any(|start| colour[start] == 0 && visit(start, edges, &mut colour))
}

fn graph() -> impl Strategy<Value = (usize, Vec<(usize, usize)>)> {
    (1usize..24).prop_flat_map(|n| (Just(n), prop::collection::vec((0..n, 0..n), 0..n * 2)))
}

fn dag() -> impl Strategy<Value = (usize, Vec<(usize, usize)>)> {
    // Edges only from a higher to a lower rank, with ranks shuffled over step positions.
    (1usize..40).prop_flat_map(|n| {
        let edges = prop::collection::vec((0..n, 0..n), 0..n * 3);
        let perm = Just((0..n).collect::<Vec<usize>>()).prop_shuffle();
        (Just(n), edges, perm).prop_map(|(n, edges, perm)| {
            let edges = edges
                .into_iter()
                .filter(|(a, b)| a != b)
                .map(|(a, b)| if a > b { (perm[a], perm[b]) } else { (perm[b], perm[a]) })
                .collect();
            (n, edges)
        })
    })
}

proptest! {
    #[test]
    fn validation_finds_every_cycle((n, edges) in graph()) {
        let res = Workflow::new(steps(n, &edges));
        match res {
            Err(WorkflowError::Cycle { steps: cycle }) => {
                prop_assert!(has_cycle(n, &edges));
                let idx: Vec<usize> = cycle.iter().map(|id| id[1..].parse().unwrap()).collect();
                for (k, &step) in idx.iter().enumerate() {
                    let next = idx[(k + 1) % idx.len()];
                    prop_assert!(edges.contains(&(step, next)), "{step} does not wait on {next}");
                }
                let mut distinct = idx.clone();
                distinct.sort_unstable();
                distinct.dedup();
                prop_assert_eq!(distinct.len(), idx.len());
            }
            Ok(_) => prop_assert!(!has_cycle(n, &edges)),
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }

    #[test]
    fn every_dag_is_accepted_and_layered((n, edges) in dag()) {
        let workflow = Workflow::new(steps(n, &edges));
        prop_assert!(workflow.is_ok(), "{:?}", workflow.err());
        let workflow = workflow.unwrap();
        let layers = workflow.layers();
        let layer_of = |id: &str| layers.iter().position(|layer| layer.contains(&id)).unwrap();
        for (step, dep) in &edges {
            let (dep_layer, step_layer) = (layer_of(&format!("s{dep}")), layer_of(&format!("s{step}")));
            prop_assert!(dep_layer < step_layer);
        }
        prop_assert_eq!(layers.iter().map(Vec::len).sum::<usize>(), n);
        let round = Workflow::from_json(&workflow.to_json().to_string());
        prop_assert_eq!(round.as_ref(), Ok(&workflow));
    }

    #[test]
    fn reading_never_panics(text in ".{0,200}") {
        let _ = Workflow::from_json(&text);
    }
}
