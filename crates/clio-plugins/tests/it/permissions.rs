//! Permission resolution (SPEC §4, §11), one named test per rule: deployment settings
//! over the person's rules over the tool's default over the confirmation policy; unset
//! follows `read_only`; deny → ask → allow within a layer; deny hides.

use clio_plugins::{
    Callers, CallersRule, Permission, PermissionRule, PermissionSettings, PermissionSource,
    ToolFacts, ToolOptions, resolve_callers, resolve_defer, resolve_permission,
};

fn tool(read_only: bool, permission: Option<Permission>) -> ToolFacts<'static> {
    ToolFacts {
        plugin: "files",
        name: "write_file",
        read_only,
        options: ToolOptions { permission, ..ToolOptions::default() },
    }
}

fn rule(tool: &str, permission: Permission) -> PermissionRule {
    PermissionRule { tool: tool.to_owned(), permission }
}

#[test]
fn unset_follows_read_only() {
    let settings = PermissionSettings::default();
    let read = resolve_permission(&settings, &tool(true, None));
    assert_eq!((read.permission, read.source), (Permission::Allow, PermissionSource::ReadOnly));
    let write = resolve_permission(&settings, &tool(false, None));
    assert_eq!((write.permission, write.source), (Permission::Ask, PermissionSource::ReadOnly));
}

#[test]
fn confirmation_policy_applies_when_the_tool_says_nothing() {
    let settings =
        PermissionSettings { confirmation: Some(Permission::Allow), ..Default::default() };
    let res = resolve_permission(&settings, &tool(false, None));
    assert_eq!((res.permission, res.source), (Permission::Allow, PermissionSource::Confirmation));
}

#[test]
fn tool_default_overrides_confirmation_policy() {
    let settings =
        PermissionSettings { confirmation: Some(Permission::Allow), ..Default::default() };
    let res = resolve_permission(&settings, &tool(false, Some(Permission::Ask)));
    assert_eq!((res.permission, res.source), (Permission::Ask, PermissionSource::Tool));
}

#[test]
fn person_rule_overrides_tool_default() {
    let settings = PermissionSettings {
        person: vec![rule("write_*", Permission::Allow)],
        ..Default::default()
    };
    let res = resolve_permission(&settings, &tool(false, Some(Permission::Deny)));
    assert_eq!((res.permission, res.source), (Permission::Allow, PermissionSource::Person));
    assert_eq!(res.rule.as_deref(), Some("write_*"));
}

#[test]
fn deployment_deny_cannot_be_lifted_by_a_person() {
    let settings = PermissionSettings {
        deployment: vec![rule("files/*", Permission::Deny)],
        person: vec![rule("write_file", Permission::Allow)],
        ..Default::default()
    };
    let res = resolve_permission(&settings, &tool(true, Some(Permission::Allow)));
    assert_eq!((res.permission, res.source), (Permission::Deny, PermissionSource::Deployment));
    assert!(res.hidden(), "deny hides the tool");
}

#[test]
fn deployment_setting_overrides_the_person_in_both_directions() {
    let settings = PermissionSettings {
        deployment: vec![rule("write_file", Permission::Allow)],
        person: vec![rule("write_file", Permission::Deny)],
        ..Default::default()
    };
    let res = resolve_permission(&settings, &tool(false, None));
    assert_eq!((res.permission, res.source), (Permission::Allow, PermissionSource::Deployment));
}

#[test]
fn within_a_layer_deny_beats_ask_beats_allow() {
    let settings = PermissionSettings {
        person: vec![
            rule("*", Permission::Allow),
            rule("write_*", Permission::Ask),
            rule("nothing", Permission::Deny),
        ],
        ..Default::default()
    };
    assert_eq!(resolve_permission(&settings, &tool(false, None)).permission, Permission::Ask);
    let settings = PermissionSettings {
        person: vec![
            rule("*", Permission::Allow),
            rule("write_file", Permission::Ask),
            rule("files/write_*", Permission::Deny),
        ],
        ..Default::default()
    };
    assert_eq!(resolve_permission(&settings, &tool(false, None)).permission, Permission::Deny);
}

#[test]
fn rules_of_another_plugin_do_not_match() {
    let settings = PermissionSettings {
        person: vec![rule("other/write_file", Permission::Deny)],
        ..Default::default()
    };
    let res = resolve_permission(&settings, &tool(true, None));
    assert_eq!(res.source, PermissionSource::ReadOnly);
}

#[test]
fn callers_follow_deployment_then_tool_then_both() {
    let mut facts = tool(false, None);
    let settings = PermissionSettings::default();
    assert_eq!(resolve_callers(&settings, &facts), Callers::Both);
    facts.options.callers = Some(Callers::Code);
    assert_eq!(resolve_callers(&settings, &facts), Callers::Code);
    let settings = PermissionSettings {
        deployment_callers: vec![CallersRule { tool: "write_*".into(), callers: Callers::Direct }],
        ..Default::default()
    };
    assert_eq!(resolve_callers(&settings, &facts), Callers::Direct);
}

#[test]
fn defer_follows_tool_then_plugin_then_not_deferred() {
    let mut facts = tool(false, None);
    assert!(!resolve_defer(None, &facts));
    assert!(resolve_defer(Some(true), &facts));
    facts.options.defer = Some(false);
    assert!(!resolve_defer(Some(true), &facts));
}
