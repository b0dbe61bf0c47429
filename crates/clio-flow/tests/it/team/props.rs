//! Property tests of the ownership rules over random session trees: who controls whom,
//! and who may wake whom, checked against the seed's sentences one by one. Also the test
//! model provider of the allowlist test.

use std::sync::{Arc, Mutex};

use clio_flow::{
    FinishReason, ModelError, ModelFuture, ModelInfo, ModelProvider, ModelRequest, ModelResponse,
    SessionTree, Usage, team_rules,
};
use clio_journal::{SessionId, SessionRecord, SessionStatus};
use proptest::prelude::*;

/// A provider that records each call and then answers, or fails like an HTTP 503.
#[derive(Debug)]
pub(crate) struct Provider {
    pub(crate) name: &'static str,
    pub(crate) ok: bool,
    pub(crate) calls: Arc<Mutex<Vec<String>>>,
}

impl ModelProvider for Provider {
    fn name(&self) -> &str {
        self.name
    }

    fn complete<'a>(&'a self, model: &'a ModelInfo, _request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            if let Ok(mut calls) = self.calls.lock() {
                calls.push(self.name.to_owned());
            }
            if !self.ok {
                return Err(ModelError::Status {
                    provider: self.name.to_owned(),
                    url: "http://test".into(),
                    status: 503,
                    body: String::new(),
                    attempts: 3,
                });
            }
            Ok(ModelResponse {
                model: model.name(),
                provider: self.name.to_owned(),
                text: "ok".into(),
                tool_calls: Vec::new(),
                finish: FinishReason::Stop,
                usage: Usage::default(),
            })
        })
    }
}

#[derive(Debug, Clone)]
struct Node {
    parent: Option<usize>,
    managed: bool,
    team: Option<&'static str>,
    status: SessionStatus,
    budget: Option<u64>,
    used: u64,
}

fn node(i: usize) -> impl Strategy<Value = Node> {
    let parent = if i == 0 { Just(None).boxed() } else { proptest::option::of(0..i).boxed() };
    let status = prop_oneof![
        Just(SessionStatus::Running),
        Just(SessionStatus::Idle),
        Just(SessionStatus::Done),
        Just(SessionStatus::Cancelled),
        Just(SessionStatus::Queued),
    ];
    (
        parent,
        any::<bool>(),
        proptest::option::of(prop_oneof![Just("t"), Just("u")]),
        status,
        proptest::option::of(0u64..3),
        0u64..3,
    )
        .prop_map(|(parent, managed, team, status, budget, used)| Node {
            parent,
            managed,
            team,
            status,
            budget,
            used,
        })
}

fn trees() -> impl Strategy<Value = Vec<SessionRecord>> {
    (1usize..10).prop_flat_map(|n| (0..n).map(node).collect::<Vec<_>>()).prop_map(|nodes| {
        let id = |i: usize| SessionId(format!("s{i}"));
        let root = |mut i: usize| {
            while let Some(p) = nodes[i].parent {
                i = p;
            }
            i
        };
        nodes
            .iter()
            .enumerate()
            .map(|(i, n)| SessionRecord {
                id: id(i),
                leader: n.parent.map(|_| id(root(i))),
                parent: n.parent.map(id),
                team: n.team.map(str::to_owned),
                managed: n.managed,
                enabled: None,
                status: n.status,
                iteration_budget: n.budget,
                iterations_used: n.used,
                router_allowlist: None,
                checkpoint: None,
                owner: "p".into(),
                run: None,
                created_at_ms: 0,
                updated_at_ms: 0,
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn controls_follows_the_seed(records in trees()) {
        let tree = SessionTree::new(records.clone());
        for a in &records {
            for t in &records {
                let got = team_rules::controls(&tree, &a.id, &t.id);
                let ancestor = tree.ancestors(&t.id).contains(&a.id);
                if team_rules::is_subagent(a) {
                    // Subagents control themselves and their direct children.
                    prop_assert_eq!(got, a.id == t.id || t.parent.as_ref() == Some(&a.id));
                } else {
                    // Leaders control their descendants.
                    prop_assert_eq!(got, ancestor);
                }
                if tree.ancestors(&a.id).contains(&t.id) {
                    prop_assert!(!got, "nobody controls an ancestor");
                }
            }
        }
    }

    #[test]
    fn wake_allowed_follows_the_seed(records in trees()) {
        let tree = SessionTree::new(records.clone());
        for a in &records {
            for r in &records {
                let got = team_rules::wake_allowed(&tree, &a.id, &r.id);
                let r_sub = team_rules::is_subagent(r);
                let idle_for_good = r.status == SessionStatus::Cancelled || team_rules::is_exhausted(r);
                if a.id == r.id {
                    // Only a managed subagent wakes itself; cancelled or exhausted ones stay idle.
                    prop_assert_eq!(got, r_sub && !idle_for_good);
                    continue;
                }
                if r_sub {
                    if idle_for_good {
                        prop_assert!(!got, "a cancelled or exhausted subagent stays idle");
                    }
                    // A managed session stays under its team rule: no outside pings.
                    let in_team = r.parent.as_ref() == Some(&a.id)
                        || r.leader.as_ref() == Some(&a.id)
                        || a.parent.as_ref() == Some(&r.id)
                        || (team_rules::is_subagent(a) && a.parent == r.parent && a.team.is_some() && a.team == r.team);
                    if got {
                        prop_assert!(in_team);
                    }
                    if team_rules::is_subagent(a) && a.parent == r.parent && a.team != r.team
                        && r.leader.as_ref() != Some(&a.id) && a.parent.as_ref() != Some(&r.id) && r.parent.as_ref() != Some(&a.id)
                    {
                        prop_assert!(!got, "siblings must share a task team");
                    }
                } else if !team_rules::is_subagent(a) {
                    prop_assert!(got, "an explicit ping resumes an independent peer");
                } else {
                    // A child may return to its leader.
                    let returning = a.leader.as_ref() == Some(&r.id) || a.parent.as_ref() == Some(&r.id);
                    prop_assert_eq!(got, returning);
                }
            }
        }
    }
}

proptest! {
    #[test]
    fn orphans_spare_every_live_owner(
        records in trees(),
        live_mask in proptest::collection::vec(any::<bool>(), 10),
    ) {
        let tree = SessionTree::new(records.clone());
        let live: std::collections::HashSet<SessionId> = records
            .iter()
            .zip(&live_mask)
            .filter(|(_, live)| **live)
            .map(|(r, _)| r.id.clone())
            .collect();
        let orphans = team_rules::orphans(&tree, &live);
        for r in &records {
            let owned = live.contains(&r.id)
                || r.leader.as_ref().is_some_and(|l| live.contains(l))
                || tree.ancestors(&r.id).iter().any(|a| live.contains(a));
            let expected = r.parent.is_some() && r.status.is_live() && !owned;
            prop_assert_eq!(orphans.contains(&r.id), expected, "{}", r.id);
        }
    }

    #[test]
    fn descendants_are_exactly_those_with_the_session_as_ancestor(records in trees()) {
        let tree = SessionTree::new(records.clone());
        for a in &records {
            let mut got = tree.descendants(&a.id);
            got.sort();
            let mut want: Vec<SessionId> = records
                .iter()
                .filter(|r| tree.ancestors(&r.id).contains(&a.id))
                .map(|r| r.id.clone())
                .collect();
            want.sort();
            prop_assert_eq!(got, want);
        }
    }
}
