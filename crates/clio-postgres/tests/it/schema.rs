//! The schema: created on an empty database, kept on reopening, and a newer one refused
//! without a change; errors name the server without its password.

use clio_journal::{JournalError, RunFilter};
use clio_postgres::{PostgresConfig, SCHEMA_VERSION};

use crate::support::{fresh_database, open};

#[test]
fn an_empty_database_gets_the_schema_and_a_reopened_one_keeps_its_runs() {
    let url = fresh_database();
    let journal = open(&url);
    let run = journal
        .create_run(clio_journal::NewRun {
            flow: "f".into(),
            input: serde_json::json!(1),
            input_digest: "d".into(),
            fingerprint: "x".into(),
            owner: "me".into(),
            launch: None,
        })
        .expect("create");
    drop(journal);
    let again = open(&url);
    assert_eq!(again.runs(&RunFilter::default()).expect("list")[0].id, run);
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let version: i64 = client
        .query_one("SELECT value FROM clio_meta WHERE key = 'schema_version'", &[])
        .expect("the version is kept")
        .get(0);
    assert_eq!(version as u64, SCHEMA_VERSION);
}

#[test]
fn a_newer_schema_is_refused_and_left_as_it_is() {
    let url = fresh_database();
    drop(open(&url));
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let newer = SCHEMA_VERSION as i64 + 1;
    client
        .execute("UPDATE clio_meta SET value = $1 WHERE key = 'schema_version'", &[&newer])
        .expect("set a newer version");
    let err =
        clio_postgres::open(&PostgresConfig::new(&url)).expect_err("a newer schema is refused");
    match &err {
        JournalError::UpgradeRequired { found, supported, .. } => {
            assert_eq!((*found, *supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
        }
        other => panic!("expected UpgradeRequired, got {other:?}"),
    }
    assert!(err.to_string().contains("upgrade clio"), "{err}");
    let version: i64 = client
        .query_one("SELECT value FROM clio_meta WHERE key = 'schema_version'", &[])
        .expect("read")
        .get(0);
    assert_eq!(version, newer, "the refused database is not changed");
}

#[test]
fn an_unreachable_server_is_named_without_its_password() {
    // Tried once: an unreachable server is otherwise waited for (tests/it/outage.rs).
    let config = PostgresConfig {
        reconnect: std::time::Duration::ZERO,
        ..PostgresConfig::new("postgres://ann:s3cret@127.0.0.1:1/clio")
    };
    let err = clio_postgres::open(&config).expect_err("nothing listens on port 1");
    let text = err.to_string();
    assert!(matches!(err, JournalError::Backend { .. }), "{err:?}");
    assert!(text.contains("postgres://ann:***@127.0.0.1:1/clio"), "{text}");
    assert!(!text.contains("s3cret"), "the password must not be shown: {text}");
    assert!(text.contains("cannot connect"), "{text}");
}
