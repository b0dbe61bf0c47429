//! A PostgreSQL server for tests (feature `test-server`): `$CLIO_TEST_POSTGRES` when it is
//! set (`.ci/run` starts a throwaway cluster and sets it), else a throwaway cluster started
//! here with the machine's PostgreSQL through `.ci/postgres`, stopped by a watchdog once the
//! test process exits. Without either, the caller fails, saying what to install.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Returns the URL of the server's maintenance database, starting a cluster if needed.
///
/// # Panics
/// When there is no server to use and none can be started: tests need a real one.
pub fn url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| match std::env::var("CLIO_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => url,
        _ => start_throwaway_cluster(),
    })
}

/// Creates a database of its own for one test and returns its URL.
///
/// # Panics
/// When the server cannot be reached or refuses.
pub fn fresh_database() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = format!("clio_t{}_{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
    let mut client = postgres::Client::connect(url(), postgres::NoTls)
        .unwrap_or_else(|err| panic!("cannot connect to the test server {}: {err}", url()));
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|err| panic!("cannot create database {name}: {err}"));
    with_database(url(), &name)
}

/// Returns `url` naming database `name` instead of its own.
pub fn with_database(url: &str, name: &str) -> String {
    match url.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{name}"),
        None => format!("{url} dbname={name}"),
    }
}

/// Starts a cluster in a temporary folder with `.ci/postgres`.
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
    // The watchdog stops the cluster once this process is gone; `setsid -f` leaves it
    // running in a session of its own and returns.
    let watchdog = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; bash {script} stop {dir}; rm -rf {dir}",
        pid = std::process::id(),
        script = script.display(),
        dir = dir.display(),
    );
    let started = Command::new("setsid")
        .args(["-f", "bash", "-c", &watchdog])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(started.is_ok_and(|s| s.success()), "the cluster's watchdog does not start");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
