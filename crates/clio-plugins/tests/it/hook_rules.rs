//! Hook ordering and decision merging (SPEC §11), one named test per rule, including the
//! error paths: ordering cycles, two `modify` answers, and decision JSON that is not one.

use clio_plugins::{
    DecisionError, DecisionKind, Hook, HookAnswer, HookEvent, HookEventKind, HookOrderError,
    HookOutcome, HookRef, HookResult, MergeError, Permission, merge_decisions, order_hooks,
};
use serde_json::json;

fn event(name: &str) -> HookEventKind {
    HookEventKind::from_name(name).unwrap()
}

fn answered(hook: &str, json: &str) -> HookResult {
    HookResult {
        hook: hook.to_owned(),
        fail_closed: false,
        outcome: HookOutcome::Answered(Box::new(HookAnswer::parse(json).unwrap())),
    }
}

fn failed(hook: &str, fail_closed: bool) -> HookResult {
    HookResult {
        hook: hook.to_owned(),
        fail_closed,
        outcome: HookOutcome::Failed { reason: "timed out after 30 s".into() },
    }
}

fn hook(id: &str, before: &[&str], after: &[&str]) -> Hook {
    let mut h = Hook::new(event("PreToolUse"), id);
    h.before = before.iter().map(|s| s.to_string()).collect();
    h.after = after.iter().map(|s| s.to_string()).collect();
    h
}

#[test]
fn order_is_topological_with_ties_by_plugin_order_then_id() {
    let (z, a, m, b) = (
        hook("z", &[], &[]),
        hook("a", &[], &["p2/m"]),
        hook("m", &[], &[]),
        hook("b", &["z"], &[]),
    );
    let refs = [
        HookRef { plugin: "p1", plugin_order: 0, hook: &z },
        HookRef { plugin: "p1", plugin_order: 0, hook: &a },
        HookRef { plugin: "p2", plugin_order: 1, hook: &m },
        HookRef { plugin: "p2", plugin_order: 1, hook: &b },
    ];
    let order: Vec<&str> =
        order_hooks(&refs).unwrap().into_iter().map(|i| refs[i].hook.id.as_str()).collect();
    // `b` must precede `z` and `a` must follow `m`; among the hooks free to run next,
    // the lowest plugin order, then the lowest id, goes first.
    assert_eq!(order, ["b", "z", "m", "a"]);
}

#[test]
fn an_ordering_cycle_is_an_error_naming_its_hooks() {
    let (a, b) = (hook("a", &["b"], &[]), hook("b", &["a"], &[]));
    let refs = [
        HookRef { plugin: "p", plugin_order: 0, hook: &a },
        HookRef { plugin: "p", plugin_order: 0, hook: &b },
    ];
    let err = order_hooks(&refs).unwrap_err();
    assert_eq!(
        err,
        HookOrderError::Cycle { hooks: vec!["p/a".into(), "p/b".into(), "p/a".into()] }
    );
    assert_eq!(err.to_string(), "hook ordering cycle: p/a -> p/b -> p/a");
}

#[test]
fn the_most_restrictive_answer_wins() {
    let results = [
        answered("p/allow", r#"{"decision": "allow"}"#),
        answered("p/modify", r#"{"decision": "modify", "input": {"x": 1}}"#),
        answered("p/synth", r#"{"decision": "synthesize", "result": 3}"#),
        answered("p/ask", r#"{"decision": "ask", "reason": "check with the person"}"#),
        answered("p/defer", r#"{"decision": "defer"}"#),
    ];
    let v = merge_decisions(event("PreToolUse"), None, &results).unwrap();
    assert_eq!((v.decision, v.decided_by.as_deref()), (DecisionKind::Defer, Some("p/defer")));
    let mut with_deny = results.to_vec();
    with_deny.insert(0, answered("p/deny", r#"{"decision": "deny", "reason": "no"}"#));
    let v = merge_decisions(event("PreToolUse"), None, &with_deny).unwrap();
    assert_eq!((v.decision, v.reason.as_deref()), (DecisionKind::Deny, Some("no")));
    let v = merge_decisions(event("PreToolUse"), None, &results[..3]).unwrap();
    assert_eq!((v.decision, v.result.clone()), (DecisionKind::Synthesize, Some(json!(3))));
    let v = merge_decisions(event("PreToolUse"), None, &results[..2]).unwrap();
    assert_eq!((v.decision, v.input.clone()), (DecisionKind::Modify, Some(json!({"x": 1}))));
}

#[test]
fn two_modify_answers_are_an_error() {
    let results = [
        answered("p/one", r#"{"decision": "modify", "input": {}}"#),
        answered("q/two", r#"{"decision": "modify", "input": {}}"#),
    ];
    let err = merge_decisions(event("PreToolUse"), None, &results).unwrap_err();
    assert_eq!(err, MergeError::TwoModify { first: "p/one".into(), second: "q/two".into() });
}

#[test]
fn a_failure_denies_only_when_fail_closed_on_an_event_that_can_deny() {
    let v = merge_decisions(event("PreToolUse"), None, &[failed("p/guard", true)]).unwrap();
    assert_eq!(v.decision, DecisionKind::Deny);
    assert_eq!(v.reason.as_deref(), Some("hook p/guard failed: timed out after 30 s"));
    let v = merge_decisions(event("PreToolUse"), None, &[failed("p/guard", false)]).unwrap();
    assert_eq!(v.decision, DecisionKind::Allow);
    assert_eq!(v.warnings, ["hook p/guard failed and was skipped: timed out after 30 s"]);
    let v = merge_decisions(event("PostToolUse"), None, &[failed("p/guard", true)]).unwrap();
    assert_eq!(v.decision, DecisionKind::Allow, "PostToolUse cannot deny");
}

#[test]
fn hooks_only_tighten_a_permission() {
    let allow = [answered("p/ok", r#"{"decision": "allow"}"#)];
    let v = merge_decisions(event("PreToolUse"), Some(Permission::Deny), &allow).unwrap();
    assert_eq!((v.decision, v.decided_by), (DecisionKind::Deny, None));
    let v = merge_decisions(event("PreToolUse"), Some(Permission::Ask), &allow).unwrap();
    assert_eq!(v.decision, DecisionKind::Ask);
    let modify = [answered("p/fix", r#"{"decision": "modify", "input": {"safe": true}}"#)];
    let v = merge_decisions(event("PreToolUse"), Some(Permission::Ask), &modify).unwrap();
    assert_eq!(
        (v.decision, v.input),
        (DecisionKind::Ask, Some(json!({"safe": true}))),
        "the person is asked about the modified call"
    );
    let deny = [answered("p/no", r#"{"decision": "deny"}"#)];
    let v = merge_decisions(event("PreToolUse"), Some(Permission::Allow), &deny).unwrap();
    assert_eq!(v.decision, DecisionKind::Deny);
}

#[test]
fn observing_events_ignore_decisions_but_keep_context() {
    let results = [
        answered("p/a", r#"{"decision": "deny", "additional_context": "first"}"#),
        answered(
            "p/b",
            r#"{"additional_context": "second", "updated_output": {"text": "redacted"}}"#,
        ),
    ];
    let v = merge_decisions(event("PostToolUse"), None, &results).unwrap();
    assert_eq!(v.decision, DecisionKind::Allow);
    assert_eq!(v.additional_context, "first\n\nsecond");
    assert_eq!(v.updated_output, Some(json!({"text": "redacted"})));
    assert_eq!(v.warnings, ["hook p/a answered deny on PostToolUse, which cannot act on it"]);
}

#[test]
fn stop_may_ask_for_one_more_turn_only() {
    let results = [answered("p/more", r#"{"decision": "deny", "reason": "tests still fail"}"#)];
    let v = merge_decisions(event("Stop"), None, &results).unwrap();
    assert_eq!(v.decision, DecisionKind::Deny);
    let results = [answered("p/ask", r#"{"decision": "ask"}"#)];
    assert_eq!(
        merge_decisions(event("Stop"), None, &results).unwrap().decision,
        DecisionKind::Allow
    );
}

#[test]
fn exit_status_becomes_an_outcome() {
    assert_eq!(
        HookOutcome::from_exit(Some(0), "", ""),
        HookOutcome::Answered(Box::new(HookAnswer::allow()))
    );
    assert_eq!(
        HookOutcome::from_exit(Some(2), "", "not here\n"),
        HookOutcome::Answered(Box::new(HookAnswer::deny("not here")))
    );
    assert_eq!(
        HookOutcome::from_exit(Some(1), "", "boom"),
        HookOutcome::Failed { reason: "exited with status 1: boom".into() }
    );
    assert!(matches!(HookOutcome::from_exit(Some(0), "{not json", ""), HookOutcome::Failed { .. }));
    assert!(matches!(HookOutcome::from_exit(None, "", ""), HookOutcome::Failed { .. }));
}

#[test]
fn decision_json_errors_name_what_is_wrong() {
    assert_eq!(
        HookAnswer::parse(r#"{"decision": "block"}"#).unwrap_err(),
        DecisionError::UnknownDecision { value: "block".into() }
    );
    assert_eq!(
        HookAnswer::parse(r#"{"decision": "block"}"#).unwrap_err().to_string(),
        r#"unknown decision "block", expected one of: allow, deny, ask, modify, synthesize, defer"#
    );
    assert_eq!(
        HookAnswer::parse(r#"{"decision": "modify"}"#).unwrap_err(),
        DecisionError::MissingField { decision: "modify", field: "input" }
    );
    assert_eq!(
        HookAnswer::parse(r#"{"decision": "synthesize"}"#).unwrap_err(),
        DecisionError::MissingField { decision: "synthesize", field: "result" }
    );
    assert!(matches!(
        HookAnswer::parse(r#"{"verdict": "allow"}"#),
        Err(DecisionError::Invalid { .. })
    ));
}

#[test]
fn hook_event_json_has_the_documented_fields() {
    let mut ev = HookEvent::new(event("PreToolUse"), "guard");
    ev.tool_name = Some("write_file".into());
    ev.tool_input = Some(json!({"path": "a.txt"}));
    insta::assert_snapshot!(serde_json::to_string(&ev.to_json()).unwrap(), @r#"{"schema_version":1,"hook_id":"guard","event":"PreToolUse","session_id":"","turn_id":"","cwd":"","tool_name":"write_file","tool_input":{"path":"a.txt"},"prompt":null,"payload":null,"answer":null}"#);
}
