//! The PostgreSQL journal against a real server: the journal contract's conformance suite
//! (the same one the embedded journal passes), the schema's migrations and refusals, and
//! errors that name what is wrong, a server that restarts under a journal's handles
//! (on clusters of their own, which they stop and start), and subagent sessions fenced by
//! their run's lease.
//!
//! The server is `$CLIO_TEST_POSTGRES` (a URL; `.ci/run` starts a throwaway cluster and sets
//! it), or else a throwaway cluster these tests start themselves with the machine's
//! PostgreSQL (`apt-get install postgresql`). Without either they fail, saying so. Each test
//! gets a database of its own.

mod support;

mod batches;
mod conformance;
mod leases;
mod outage;
mod schema;
mod sessions;

/// Every test file of this folder is a module above.
#[test]
fn no_forgotten_test_files() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let listed = [
        "main.rs",
        "support.rs",
        "batches.rs",
        "conformance.rs",
        "leases.rs",
        "outage.rs",
        "schema.rs",
        "sessions.rs",
    ];
    for entry in std::fs::read_dir(&dir).expect("tests/it is readable") {
        let name = entry.expect("an entry").file_name().to_string_lossy().into_owned();
        assert!(listed.contains(&name.as_str()), "tests/it/{name} is not a module of main.rs");
    }
}
