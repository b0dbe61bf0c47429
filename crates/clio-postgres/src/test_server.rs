//! A PostgreSQL server for tests and benches (feature `test-server`): `$CLIO_TEST_POSTGRES`
//! when it is set (`.ci/run` starts a throwaway cluster and sets it), else a throwaway
//! cluster started here with the machine's PostgreSQL through `.ci/postgres`, stopped by a
//! watchdog once the test process exits. Without either, the caller fails, saying what to
//! install. [`bare_commits`] measures the server's own commit rate for the benches, so that
//! they need not name the driver (which only this crate and the CLI may).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

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

/// Commits `n` transactions of one small row each on each of `clients` connections to
/// `url` at once (a table of its own, created first), and returns the wall time from the
/// first commit to the last: PostgreSQL's own commit rate on this server, the floor of
/// every durable journal write.
///
/// # Panics
/// When the server cannot be reached or refuses.
pub fn bare_commits(url: &str, clients: usize, n: u64) -> Duration {
    let mut setup = connect(url);
    setup
        .batch_execute(
            "DROP TABLE IF EXISTS clio_bare_commits; \
             CREATE TABLE clio_bare_commits (id bigserial PRIMARY KEY, client int NOT NULL, \
             i bigint NOT NULL, payload text NOT NULL)",
        )
        .unwrap_or_else(|err| panic!("cannot create the bare commits table: {err}"));
    let clients = clients.max(1);
    let start = Barrier::new(clients + 1);
    let mut elapsed = Duration::ZERO;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let start = &start;
                scope.spawn(move || {
                    let mut client = connect(url);
                    let insert = client
                        .prepare(
                            "INSERT INTO clio_bare_commits (client, i, payload) VALUES ($1, $2, $3)",
                        )
                        .unwrap_or_else(|err| panic!("cannot prepare the insert: {err}"));
                    let payload = "{\"result\":0}".repeat(8);
                    start.wait();
                    for i in 0..n as i64 {
                        // One row per transaction: BEGIN, INSERT, COMMIT.
                        let mut tx = client.transaction().expect("begin");
                        tx.execute(&insert, &[&(c as i32), &i, &payload]).expect("insert");
                        tx.commit().expect("commit");
                    }
                })
            })
            .collect();
        start.wait();
        let t = Instant::now();
        for handle in handles {
            handle.join().expect("a bare commit client panicked");
        }
        elapsed = t.elapsed();
    });
    setup
        .batch_execute("DROP TABLE clio_bare_commits")
        .unwrap_or_else(|err| panic!("cannot drop the bare commits table: {err}"));
    elapsed
}

/// Returns how many transactions the server has committed in `url`'s database
/// (`pg_stat_database.xact_commit`: writes and reads alone alike), after the statistics
/// of closed connections have been flushed.
///
/// # Panics
/// When the server cannot be reached or refuses.
pub fn server_commits(url: &str) -> u64 {
    let mut client = connect(url);
    // A backend flushes its statistics when it exits or at most once a second; a fresh
    // snapshot then reads what was flushed.
    std::thread::sleep(Duration::from_millis(1_100));
    let row = client
        .query_one(
            "SELECT pg_stat_clear_snapshot(), xact_commit FROM pg_stat_database \
             WHERE datname = current_database()",
            &[],
        )
        .unwrap_or_else(|err| panic!("cannot read pg_stat_database: {err}"));
    row.get::<_, i64>(1) as u64
}

fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls)
        .unwrap_or_else(|err| panic!("cannot connect to the test server {url}: {err}"))
}

/// Starts a cluster in a temporary folder with `.ci/postgres`.
fn start_throwaway_cluster() -> String {
    let dir: PathBuf = std::env::temp_dir().join(format!("clio-pg-test-{}", std::process::id()));
    start_cluster(&dir)
}

/// A throwaway cluster of one test's own, which the test may stop and start again on the
/// same port and data folder (a restart of the server, or an outage, under load): unlike
/// [`url`]'s server, which other tests share. Stopped and removed when dropped, or by a
/// watchdog once the test process is gone.
pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    url: String,
}

impl Cluster {
    /// Creates and starts a cluster in a temporary folder with `.ci/postgres`.
    ///
    /// # Panics
    /// When no PostgreSQL server is installed or it does not start.
    pub fn start(name: &str) -> Cluster {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "clio-pg-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let url = start_cluster(&dir);
        let port = url
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split('/').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in the cluster's URL {url}"));
        Cluster { dir, bin: server_bin(), port, url }
    }

    /// The URL of the cluster's maintenance database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Creates a database of its own in the cluster and returns its URL.
    ///
    /// # Panics
    /// When the server cannot be reached or refuses.
    pub fn database(&self, name: &str) -> String {
        connect(&self.url)
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|err| panic!("cannot create database {name}: {err}"));
        with_database(&self.url, name)
    }

    /// Stops the server at once, as a crash would (`pg_ctl stop -m immediate`): every
    /// connection is cut and nothing is shut down cleanly.
    ///
    /// # Panics
    /// When `pg_ctl` fails.
    pub fn stop_immediate(&self) {
        self.pg_ctl(&["-m", "immediate", "-w", "stop"]);
    }

    /// Starts the server again on its port and data folder (it recovers from its log).
    ///
    /// # Panics
    /// When `pg_ctl` fails.
    pub fn start_again(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("server.log");
        self.pg_ctl(&["-l", &log.to_string_lossy(), "-w", "-o", &options, "start"]);
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.dir.join("data");
        let mut command = as_server_owner(&self.bin.join("pg_ctl"));
        command.arg("-D").arg(&data).args(args).stdout(Stdio::null());
        let out = command.output().unwrap_or_else(|err| panic!("cannot run pg_ctl: {err}"));
        assert!(
            out.status.success(),
            "pg_ctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = as_server_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The folder of the newest PostgreSQL server's programs, as `.ci/postgres` picks it.
fn server_bin() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| dir.flatten().map(|e| e.path().join("bin")).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    found.sort_by_key(|p| {
        p.parent()
            .and_then(Path::file_name)
            .and_then(|v| v.to_str())
            .and_then(|v| v.split('.').next())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(bin) = found.pop() {
        return bin;
    }
    let out = Command::new("sh").args(["-c", "command -v initdb"]).output();
    let path =
        out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default();
    std::fs::canonicalize(&path)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| panic!("no PostgreSQL server found: apt-get install postgresql"))
}

/// A command running `program` as the cluster's owner: `postgres` when this is root (the
/// server refuses to run as root), else this user.
fn as_server_owner(program: &Path) -> Command {
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    if root {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// Starts a cluster in `dir` with `.ci/postgres`, with a watchdog that stops it once this
/// process is gone; returns its URL.
fn start_cluster(dir: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join(".ci/postgres");
    let out = Command::new("bash")
        .arg(&script)
        .arg("start")
        .arg(dir)
        .output()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", script.display()));
    assert!(
        out.status.success(),
        "no PostgreSQL server for the tests: set CLIO_TEST_POSTGRES to a server's URL, or \
         install PostgreSQL (apt-get install postgresql) so that {} can start one: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
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
