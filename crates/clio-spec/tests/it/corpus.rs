//! The data-driven corpus: every `tests/data/valid/*.toml` must freeze, and its spec is
//! a snapshot beside it (checksum included, so a change to the canonical form shows);
//! every `tests/data/invalid/*.toml` must fail, and its error is a snapshot beside it.
//! Adding a case is adding a file.

use std::path::{Path, PathBuf};

use clio_spec::AgentDef;

fn cases(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", dir.display());
    files
}

fn freeze(
    path: &Path,
    kind: &str,
) -> Result<clio_spec::AgentSpec, clio_spec::AgentDefinitionError> {
    let text = std::fs::read_to_string(path).unwrap();
    let name = format!("{kind}/{}", path.file_name().unwrap().to_string_lossy());
    AgentDef::from_toml(&text, &name)?.spec()
}

fn snapshot(kind: &str, path: &Path, text: String) {
    let name = path.file_stem().unwrap().to_string_lossy().into_owned();
    insta::with_settings!({
        snapshot_path => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(kind),
        prepend_module_to_snapshot => false,
        input_file => path,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn valid_definitions_freeze() {
    for path in cases("valid") {
        let spec = freeze(&path, "valid")
            .unwrap_or_else(|err| panic!("{} should freeze: {err}", path.display()));
        // The frozen JSON reads back to the same spec.
        let json = serde_json::to_string_pretty(&spec.to_json()).unwrap();
        let back = clio_spec::AgentSpec::from_json(&json).unwrap();
        assert_eq!(back, spec, "{}", path.display());
        snapshot("valid", &path, json);
    }
}

#[test]
fn invalid_definitions_fail_with_their_error() {
    for path in cases("invalid") {
        match freeze(&path, "invalid") {
            Ok(spec) => panic!("{} should fail, froze to {:?}", path.display(), spec.to_json()),
            Err(err) => snapshot("invalid", &path, err.to_string()),
        }
    }
}
