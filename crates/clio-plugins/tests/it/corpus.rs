//! The data-driven corpus: every folder under `tests/data/valid/` must check ok (warnings
//! allowed) and every one under `tests/data/invalid/` must not; each report is a snapshot
//! beside its folder (`<case>.snap`). Adding a case is adding a folder. A last test
//! asserts that every problem code is produced by at least one case.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clio_plugins::{ProblemCode, Report, check};

fn cases(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(kind);
    let mut folders: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    folders.sort();
    assert!(!folders.is_empty(), "no cases in {}", dir.display());
    folders
}

fn snapshot(kind: &str, path: &Path, report: &Report) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    insta::with_settings!({
        snapshot_path => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(kind),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, report.render());
    });
}

#[test]
fn valid_cases_check_ok() {
    for path in cases("valid") {
        let report = check(&path);
        assert!(report.ok, "{} should be ok:\n{}", path.display(), report.render());
        snapshot("valid", &path, &report);
    }
}

#[test]
fn invalid_cases_report_their_problems() {
    for path in cases("invalid") {
        let report = check(&path);
        assert!(!report.ok, "{} should not be ok", path.display());
        snapshot("invalid", &path, &report);
    }
}

#[test]
fn every_problem_code_is_produced_by_a_case() {
    let mut seen = BTreeSet::new();
    for kind in ["valid", "invalid"] {
        for path in cases(kind) {
            seen.extend(check(&path).problems.iter().map(|p| p.code));
        }
    }
    let missing: Vec<&str> = ProblemCode::ALL
        .iter()
        .filter(|code| !seen.contains(code))
        .map(|code| code.as_str())
        .collect();
    assert!(missing.is_empty(), "no corpus case produces: {missing:?}");
}

#[test]
fn reports_render_as_json_too() {
    let report =
        check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/invalid/not_a_plugin"));
    insta::assert_snapshot!(serde_json::to_string_pretty(&report.to_json()).unwrap(), @r#"
    {
      "ok": false,
      "problems": [
        {
          "code": "not_a_plugin",
          "severity": "error",
          "file": ".",
          "line": null,
          "field": "",
          "message": "a folder without ai.iowarp.clio/ is not a CLIO plugin"
        }
      ],
      "flows": []
    }
    "#);
}

#[test]
fn the_guide_lists_every_problem_code() {
    let guide = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/plugins.md"),
    )
    .unwrap();
    for code in ProblemCode::ALL {
        let row = format!("| `{code}` | {} | {} |", code.severity().as_str(), code.description());
        assert!(guide.contains(&row), "docs/plugins.md lacks the row {row}");
    }
}
