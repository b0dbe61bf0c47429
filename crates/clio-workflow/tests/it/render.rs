//! The renderings the CLI prints, on the seed's batch7 example: layered text, Mermaid and
//! DOT (the corpus snapshots them for every valid file too).

use crate::support::workflow;

const BATCH7: &str = include_str!("../data/valid/batch7.json");

#[test]
fn batch7_text_layers() {
    let text = clio_workflow::render_text(&workflow(BATCH7));
    insta::assert_snapshot!(text);
}

#[test]
fn batch7_mermaid() {
    insta::assert_snapshot!(clio_workflow::render_mermaid(&workflow(BATCH7)));
}

#[test]
fn batch7_dot() {
    insta::assert_snapshot!(clio_workflow::render_dot(&workflow(BATCH7)));
}

#[test]
fn labels_are_escaped() {
    let wf = workflow(r#"[{"id": "a", "target": "say \"hi\" <b>"}]"#);
    let mermaid = clio_workflow::render_mermaid(&wf);
    assert!(mermaid.contains("say #quot;hi#quot; #lt;b#gt;"), "{mermaid}");
    let dot = clio_workflow::render_dot(&wf);
    assert!(dot.contains(r#"say \"hi\" <b>"#), "{dot}");
}
