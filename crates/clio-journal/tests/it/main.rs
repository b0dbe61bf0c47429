//! The one integration-test binary of this crate: every module under `tests/it` is listed
//! here, and `no_forgotten_test_files` fails when one is not.

mod basics;
mod check;
mod crash;
mod damage;
mod files;
mod log_damage;
mod record_damage;
mod support;
mod upgrade;
mod wal;

#[test]
fn no_forgotten_test_files() {
    let listed: &[&str] = &[
        "basics",
        "check",
        "crash",
        "damage",
        "files",
        "log_damage",
        "record_damage",
        "support",
        "upgrade",
        "wal",
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name == "main.rs" || !name.ends_with(".rs") {
            continue;
        }
        let module = name.trim_end_matches(".rs");
        assert!(listed.contains(&module), "tests/it/{name} is not listed in tests/it/main.rs");
    }
}
