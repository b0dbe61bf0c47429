//! The server the tests run against, and a fresh database for each test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use clio_journal::Journal;
use clio_postgres::PostgresConfig;

/// The URL of the server's maintenance database.
pub(crate) fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| match std::env::var("CLIO_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => url,
        _ => start_throwaway_cluster(),
    })
}

/// Creates a database of its own for one test and returns its URL.
pub(crate) fn fresh_database() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = format!("clio_t{}_{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
    let mut client = postgres::Client::connect(server_url(), postgres::NoTls)
        .unwrap_or_else(|err| panic!("cannot connect to the test server {}: {err}", server_url()));
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|err| panic!("cannot create database {name}: {err}"));
    with_database(server_url(), &name)
}

/// Returns `url` naming database `name` instead of its own.
pub(crate) fn with_database(url: &str, name: &str) -> String {
    let (base, _) = url.rsplit_once('/').expect("a URL with a database");
    format!("{base}/{name}")
}

/// Opens a journal on a fresh database, with a short lease for the lease tests.
pub(crate) fn fresh_journal() -> Journal {
    let url = fresh_database();
    open(&url)
}

/// Opens the journal at `url` (a second handle on the same database, say).
pub(crate) fn open(url: &str) -> Journal {
    let config = PostgresConfig { connections: 2, ..PostgresConfig::new(url) };
    clio_postgres::open(&config).unwrap_or_else(|err| panic!("cannot open {url}: {err}"))
}

/// Starts a cluster in a temporary folder with `.ci/postgres`, stopped by a watchdog when
/// this test process exits.
fn start_throwaway_cluster() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join(".ci/postgres");
    let dir: PathBuf = std::env::temp_dir().join(format!("clio-pg-test-{}", std::process::id()));
    let out = Command::new("bash")
        .arg(&script)
        .arg("start")
        .arg(&dir)
        .output()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", script.display()));
    assert!(
        out.status.success(),
        "no PostgreSQL server for the tests: set CLIO_TEST_POSTGRES to a server's URL, or \
         install PostgreSQL (apt-get install postgresql) so that {} can start one: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // Stop the cluster once this process is gone.
    let watchdog = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; bash {script} stop {dir}; rm -rf {dir}",
        pid = std::process::id(),
        script = script.display(),
        dir = dir.display(),
    );
    // `setsid -f` leaves the watchdog running in a session of its own and returns.
    Command::new("setsid")
        .args(["-f", "bash", "-c", &watchdog])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the watchdog starts");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
