//! Workers sharing one PostgreSQL journal, killed at random: three `clio worker` processes
//! claim 200 workflow runs (each three side-effecting `record` calls, tallied in one
//! ledger) submitted while they work; a killer SIGKILLs a random worker now and then and
//! starts a new one. Every run must finish, no effect may be done twice or lost from a
//! step recorded done, and no run may be driven by two workers at once (its tasks, in
//! creation order, never go back to a worker that drove it before another did).
//!
//! The server is the test server of `clio_postgres::test_server` (`$CLIO_TEST_POSTGRES`,
//! or a throwaway cluster).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{clio, temp_home, workspace_root};

const RUNS: usize = 200;
const WORKERS: usize = 3;
const PARTS: [&str; 3] = ["a", "b", "c"];
const PLUGIN: &str = "crates/clio-cli/tests/data/workers/ledger";
const WORKFLOW: &str = "crates/clio-cli/tests/data/workers/workflow.json";

/// A small deterministic generator for the kill schedule (its seed is printed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 =
            self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

struct Fleet {
    home: PathBuf,
    url: String,
    logs: PathBuf,
    started: usize,
    workers: Vec<Child>,
}

impl Fleet {
    fn start_worker(&mut self) {
        self.start_worker_idle("5");
    }

    /// Starts a worker that exits once nothing was runnable for `idle` seconds.
    fn start_worker_idle(&mut self, idle: &str) {
        let log = std::fs::File::create(self.logs.join(format!("worker-{}.log", self.started)))
            .expect("a worker log");
        let child = Command::new(env!("CARGO_BIN_EXE_clio"))
            .args(["--home", self.home.to_str().unwrap(), "--journal", &self.url, "worker"])
            .args(["--concurrency", "4", "--lease", "2", "--exit-when-idle", idle])
            .current_dir(workspace_root())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("a worker starts");
        self.started += 1;
        self.workers.push(child);
    }

    /// Kills worker `i` with SIGKILL and forgets it.
    fn kill(&mut self, i: usize) {
        let mut child = self.workers.swap_remove(i);
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Waits up to 5 s for workers of this fleet to hold a claim on a run (a live lease a
    /// worker took), and returns one of them at random; `None` when none did.
    fn busy_worker(&self, db: &mut postgres::Client, rng: &mut Lcg) -> Option<usize> {
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let holders: Vec<String> = db
                .query(
                    "SELECT l.worker FROM clio_leases l JOIN clio_runs r ON r.id = l.run \
                     WHERE l.epoch > 1 AND l.expires_at_ms > 0 \
                     AND r.status = 'running'",
                    &[],
                )
                .map(|rows| rows.iter().map(|r| r.get(0)).collect())
                .unwrap_or_default();
            // A worker's name ends with its process id (`<host>-<pid>`).
            let busy: Vec<usize> = (0..self.workers.len())
                .filter(|&i| {
                    let pid = format!("-{}", self.workers[i].id());
                    holders.iter().any(|h| h.ends_with(&pid))
                })
                .collect();
            if !busy.is_empty() {
                return Some(busy[rng.next(busy.len() as u64) as usize]);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Returns whether every worker has exited; reaps those that have.
    fn all_exited(&mut self) -> bool {
        self.workers.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        self.workers.is_empty()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &mut self.workers {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

const SLOW: &str = "crates/clio-cli/tests/data/workers/slow.json";

/// A home with a workspace, on a database of its own.
#[derive(Clone)]
struct Case {
    url: String,
    home: PathBuf,
    workspace: PathBuf,
}

impl Case {
    /// A fresh case named `name`; the ledger plugin is trusted in its home when `trusted`.
    fn new(name: &str, trusted: bool) -> Case {
        let url = clio_postgres::test_server::fresh_database();
        let home = temp_home(name);
        let workspace = home.join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let case = Case { url, home, workspace };
        if trusted {
            let out = clio(&["--home", case.h(), "plugin", "trust", PLUGIN]);
            assert_eq!(out.code, 0, "{}", out.render());
        }
        case
    }

    fn h(&self) -> &str {
        self.home.to_str().unwrap()
    }

    /// Runs `clio` with this case's home and journal and `args`.
    fn clio(&self, args: &[&str]) -> crate::support::Outcome {
        let mut all = vec!["--home", self.h(), "--journal", &self.url];
        all.extend(args);
        clio(&all)
    }

    /// Submits `workflow` with task `label` to the workers (`--detach`), with
    /// `--no-input` unless the run may `ask`; returns the run's id.
    fn submit(&self, workflow: &str, label: &str, ask: bool) -> i64 {
        let ws = self.workspace.to_str().unwrap();
        let mut args = vec!["workflow", "run", workflow, "--task", label, "--plugin", PLUGIN];
        args.extend(["--workspace", ws, "--detach", "--quiet"]);
        if !ask {
            args.push("--no-input");
        }
        let out = self.clio(&args);
        assert_eq!(out.code, 0, "submitting {label}: {}", out.render());
        out.stdout.trim().parse().expect("the run's id")
    }

    /// The workers of this case, whose logs go to `logs`.
    fn fleet(&self, logs: &Path) -> Fleet {
        Fleet {
            home: self.home.clone(),
            url: self.url.clone(),
            logs: logs.to_path_buf(),
            started: 0,
            workers: Vec::new(),
        }
    }

    fn db(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("the test database")
    }

    /// The lines of the ledger: one per side effect.
    fn ledger(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.workspace.join("ledger.log")).unwrap_or_default();
        text.lines().map(str::to_owned).collect()
    }
}

/// Waits until a task (of `run`, or of any run) is active: a process is inside its call.
fn wait_for_active_task(db: &mut postgres::Client, run: Option<i64>) {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        // Before the first process has opened the journal, its tables are not there yet.
        let active: i64 = db
            .query_one(
                "SELECT count(*) FROM clio_tasks WHERE active AND ($1::bigint IS NULL OR run = $1)",
                &[&run],
            )
            .map_or(0, |row| row.get(0));
        if active > 0 {
            return;
        }
        assert!(Instant::now() < end, "no call started in 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[allow(
    clippy::print_stderr,
    reason = "the kill schedule's seed and what the kills did are printed for the record"
)]
fn workers_killed_at_random_finish_every_run_with_each_effect_once() {
    let case = Case::new("workers", true);
    let (url, workspace) = (case.url.clone(), case.workspace.clone());
    let logs = case.home.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
            as u64;
    eprintln!("kill schedule seed: {seed}");
    let mut rng = Lcg(seed);
    let mut fleet = case.fleet(&logs);
    for _ in 0..WORKERS {
        fleet.start_worker();
    }
    // Runs come in from four submitters while the workers work.
    let submitters: Vec<_> = (0..4)
        .map(|s| {
            let case = case.clone();
            std::thread::spawn(move || {
                for i in (s..RUNS).step_by(4) {
                    case.submit(WORKFLOW, &format!("r{i:03}"), false);
                }
            })
        })
        .collect();
    // The killer: every 0.6–1.8 s, a random worker among those holding a claim on a run
    // (a random one when none does within 5 s), replaced at once, while runs remain. Aiming
    // at claims keeps the test from killing only idle workers when submissions are slow.
    let (mut kills, mut aimed) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut submitted = false;
    let mut db = case.db();
    while kills < 12 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(600 + rng.next(1_200)));
        if fleet.workers.is_empty() {
            break;
        }
        let i = match fleet.busy_worker(&mut db, &mut rng) {
            Some(i) => {
                aimed += 1;
                i
            }
            None => rng.next(fleet.workers.len() as u64) as usize,
        };
        fleet.kill(i);
        kills += 1;
        fleet.start_worker();
        if !submitted && submitters.iter().all(std::thread::JoinHandle::is_finished) {
            submitted = true;
        }
        if submitted && finished_runs(&url) == RUNS {
            break;
        }
    }
    for s in submitters {
        s.join().expect("a submitter");
    }
    // No more kills: the workers left finish what remains, then exit once idle.
    while !fleet.all_exited() {
        assert!(
            Instant::now() < deadline,
            "the workers did not finish in time; logs in {}",
            logs.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(kills >= 3, "the test killed only {kills} workers");

    let runs: Vec<(i64, String, String)> = db
        .query("SELECT id, status, record FROM clio_runs ORDER BY id", &[])
        .expect("runs")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(runs.len(), RUNS, "every submitted run is in the journal");
    let effects = crate::workers::ledger_effects(&workspace);
    for ((label, part), n) in &effects {
        assert_eq!(*n, 1, "{label}/{part} was done {n} times; logs in {}", logs.display());
    }
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for (id, status, record) in &runs {
        *statuses.entry(status.clone()).or_default() += 1;
        let record: serde_json::Value = serde_json::from_str(record).unwrap();
        let label = record["input"]["task"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("run {id}'s input names no task: {}", record["input"]));
        assert!(
            status == "succeeded" || status == "failed",
            "run {id} ({label}) did not finish: {status}; logs in {}",
            logs.display()
        );
        // Each step the journal records as done did its effect exactly once.
        let tasks = db
            .query("SELECT record FROM clio_tasks WHERE run = $1 ORDER BY id", &[id])
            .expect("tasks");
        let mut owners: Vec<String> = Vec::new();
        for row in &tasks {
            let task: serde_json::Value = serde_json::from_str(&row.get::<_, String>(0)).unwrap();
            let owner = task["owner"].as_str().unwrap_or_default().to_owned();
            if owners.last() != Some(&owner) {
                assert!(
                    !owners.contains(&owner),
                    "run {id} went back to {owner} after another worker drove it: {owners:?}"
                );
                owners.push(owner);
            }
            if task["target"] == "record" && task["status"] == "succeeded" {
                let part = task["result"]["recorded"].as_str().and_then(|r| r.split('/').nth(1));
                if let Some(part) = part {
                    let n = effects.get(&(label.clone(), part.to_owned())).copied().unwrap_or(0);
                    assert_eq!(
                        n, 1,
                        "run {id}: step {part} is recorded done but its effect happened {n} times"
                    );
                }
            }
        }
        if status == "succeeded" {
            for part in PARTS {
                let n = effects.get(&(label.clone(), part.to_owned())).copied().unwrap_or(0);
                assert_eq!(n, 1, "run {id} ({label}) succeeded but {part} was done {n} times");
            }
        } else {
            // A run fails only by a call a kill cut short, which is reported, never re-run.
            let error = record["error"].as_str().unwrap_or_default();
            assert!(error.contains("interrupted"), "run {id} ({label}) failed otherwise: {error}");
        }
    }
    // How many runs a kill moved to another worker: claimed more than once, and of those,
    // moved in the middle (tasks of two workers).
    let reclaimed: i64 = db
        .query_one("SELECT count(*) FROM clio_leases WHERE epoch > 2", &[])
        .expect("leases")
        .get(0);
    let mid_run: i64 = db
        .query_one(
            "SELECT count(*) FROM (SELECT run FROM clio_tasks GROUP BY run \
             HAVING count(DISTINCT record::json->>'owner') > 1) AS moved",
            &[],
        )
        .expect("tasks")
        .get(0);
    eprintln!(
        "{RUNS} runs, {kills} workers killed ({aimed} while holding a claim), {} started: {statuses:?}; {reclaimed} runs claimed again after a kill, {mid_run} of them moved mid-run; {} effects",
        fleet.started,
        effects.len()
    );
    assert!(reclaimed > 0, "no kill hit a claimed run: the test proved nothing");
    assert!(statuses.get("succeeded").copied().unwrap_or(0) > RUNS / 2, "{statuses:?}");
}

/// Returns how many runs have ended.
fn finished_runs(url: &str) -> usize {
    let Ok(mut db) = postgres::Client::connect(url, postgres::NoTls) else { return 0 };
    db.query_one(
        "SELECT count(*) FROM clio_runs WHERE status IN ('succeeded', 'failed', 'cancelled')",
        &[],
    )
    .map(|r| r.get::<_, i64>(0) as usize)
    .unwrap_or(0)
}

#[test]
fn a_worker_needs_a_shared_journal_and_says_how_to_give_it_one() {
    let home = temp_home("worker-no-journal");
    let out = clio(&["--home", home.to_str().unwrap(), "worker", "--exit-when-idle", "0"]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(out.stderr.contains("a worker needs a shared journal"), "{}", out.stderr);
    assert!(out.stderr.contains("--journal postgres://"), "{}", out.stderr);
}

#[test]
fn a_journal_that_is_not_a_postgres_url_is_refused_by_flag_and_by_config() {
    let home = temp_home("worker-bad-journal");
    let h = home.to_str().unwrap();
    let out = clio(&["--home", h, "--journal", "mysql://db/clio", "runs", "list"]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(out.stderr.contains("\"mysql://db/clio\" is not a PostgreSQL URL"), "{}", out.stderr);
    std::fs::write(home.join("config.toml"), "journal = 5\n").unwrap();
    let out = clio(&["--home", h, "runs", "list"]);
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(out.stderr.contains("config.toml: journal: expected a string"), "{}", out.stderr);
}

/// A shared journal named in config.toml is used; `clio serve` on it serves the viewer and
/// the HTTP API from it (issue 44 item 6: a team on PostgreSQL has a viewer), while workers
/// drive its runs.
#[test]
fn a_shared_journal_from_config_toml_is_used_and_serve_shows_it() {
    use std::io::{BufRead, BufReader, Read, Write};
    let url = clio_postgres::test_server::fresh_database();
    let home = temp_home("worker-config-journal");
    let h = home.to_str().unwrap();
    std::fs::write(home.join("config.toml"), format!("journal = {url:?}\n")).unwrap();
    let out = clio(&["--home", h, "runs", "list"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(!home.join("journal.redb").exists(), "the shared journal is used, not a file");
    // A run submitted to the workers (none runs here: it waits for one).
    let out = clio(&["--home", h, "plugin", "trust", PLUGIN]);
    assert_eq!(out.code, 0, "{}", out.render());
    let ws = home.join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    let submitted = clio(&[
        "--home",
        h,
        "workflow",
        "run",
        WORKFLOW,
        "--task",
        "viewed",
        "--plugin",
        PLUGIN,
        "--workspace",
        ws.to_str().unwrap(),
        "--detach",
        "--quiet",
        "--no-input",
    ]);
    assert_eq!(submitted.code, 0, "{}", submitted.render());
    let run: u64 = submitted.stdout.trim().parse().unwrap();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(["--home", h, "serve", "--port", "0"])
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(serve.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let rest = line.trim().strip_prefix("http://").unwrap_or_else(|| panic!("{line}"));
    let (addr, token) = rest.split_once("/#token=").unwrap();
    let (addr, token) = (addr.to_owned(), token.to_owned());
    let get = |path: &str| -> (u16, String) {
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        (head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), body.to_owned())
    };
    let (code, body) = get("/api/v1/runs");
    let (show_code, show) = get(&format!("/api/v1/runs/{run}"));
    let (events_code, events) = get(&format!("/api/v1/runs/{run}/events?limit=1"));
    let (page_code, page) = get("/");
    // And it steers: a cancel through the API cancels the run in the shared journal.
    let cancelled = {
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        let request = format!(
            "POST /api/v1/runs/{run}/cancel HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    };
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(code, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(list.to_string().contains("viewed"), "{list}");
    assert_eq!(show_code, 200, "{show}");
    let shown: serde_json::Value = serde_json::from_str(&show).unwrap();
    assert_eq!(shown["summary"]["task"], "viewed", "{shown}");
    assert_eq!(events_code, 200, "{events}");
    assert_eq!(page_code, 200, "the viewer's page");
    assert!(
        page.contains("<html") || page.contains("<!doctype") || page.contains("<!DOCTYPE"),
        "{page}"
    );
    assert!(cancelled.contains(" 200 "), "{cancelled}");
    let listed = clio(&["--home", h, "runs", "list", "--json"]);
    assert!(listed.stdout.contains("cancelled"), "{}", listed.render());
}

#[test]
fn an_unreachable_journal_is_named_without_its_password() {
    let home = temp_home("worker-unreachable");
    // Commands wait out a server that may be restarting; a second is enough here.
    std::fs::write(home.join("config.toml"), "[postgres]\nreconnect_secs = 1\n").unwrap();
    let out = clio(&[
        "--home",
        home.to_str().unwrap(),
        "--journal",
        "postgres://ann:s3cret@127.0.0.1:1/clio",
        "runs",
        "list",
    ]);
    assert_ne!(out.code, 0, "{}", out.render());
    assert!(out.stderr.contains("postgres://ann:***@127.0.0.1:1/clio"), "{}", out.stderr);
    assert!(!out.stderr.contains("s3cret"), "{}", out.stderr);
}

/// Waits until run `run` of the database at `url` has `status`, or panics after `limit`.
fn wait_for_status(url: &str, run: i64, status: &str, limit: Duration) {
    let mut db = postgres::Client::connect(url, postgres::NoTls).expect("the test database");
    let end = Instant::now() + limit;
    loop {
        let now: Option<String> = db
            .query_opt("SELECT status FROM clio_runs WHERE id = $1", &[&run])
            .expect("a run's status")
            .map(|r| r.get(0));
        if now.as_deref() == Some(status) {
            return;
        }
        assert!(Instant::now() < end, "run {run} did not become {status} (it is {now:?})");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_answer_from_another_process_wakes_a_run_a_worker_left_waiting() {
    // Not trusted: the run asks the person first, and waits.
    let case = Case::new("worker-answer", false);
    let run = case.submit(WORKFLOW, "ask1", true);
    let mut fleet = case.fleet(&case.home);
    fleet.start_worker();
    wait_for_status(&case.url, run, "awaiting_input", Duration::from_secs(60));
    assert!(case.ledger().is_empty(), "nothing ran before the answer");
    let question: i64 = case
        .db()
        .query_one("SELECT seq FROM clio_entries WHERE run = $1 AND kind = 'question'", &[&run])
        .expect("the run's question")
        .get(0);
    let answered = case.clio(&["runs", "answer", &run.to_string(), &question.to_string(), "yes"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    assert!(answered.stdout.contains("goes on in the next `clio worker`"), "{}", answered.stdout);
    wait_for_status(&case.url, run, "succeeded", Duration::from_secs(60));
    assert_eq!(case.ledger(), ["ask1 a", "ask1 b", "ask1 c"]);
}

#[test]
fn a_worker_paused_past_its_lease_cannot_write_into_the_run_another_worker_took() {
    let case = Case::new("worker-paused", true);
    let run = case.submit(SLOW, "p1", false);
    let start = |name: &str, lease: &str| {
        let log = std::fs::File::create(case.home.join(format!("{name}.log"))).unwrap();
        Command::new(env!("CARGO_BIN_EXE_clio"))
            .args(["--home", case.h(), "--journal", &case.url, "worker", "--lease", lease])
            .args(["--exit-when-idle", "3"])
            .current_dir(workspace_root())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("a worker starts")
    };
    let mut first = start("first", "1");
    // Once the first worker is inside step a's call (a 3 s side effect), it is paused.
    let mut db = case.db();
    wait_for_active_task(&mut db, Some(run));
    let signal = |sig: &str, child: &Child| {
        let status = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap();
        assert!(status.success(), "kill {sig}");
    };
    signal("-STOP", &first);
    // Its lease (1 s) runs out; a second worker claims the run, finds step a cut short
    // (a side effect under way when its worker stopped) and ends the run, never re-running it.
    std::thread::sleep(Duration::from_millis(1_500));
    let mut second = start("second", "5");
    wait_for_status(&case.url, run, "failed", Duration::from_secs(60));
    let _ = second.wait();
    let head = |db: &mut postgres::Client| -> (String, i64) {
        db.query_one("SELECT status, head FROM clio_runs WHERE id = $1", &[&run])
            .map(|r| (r.get(0), r.get(1)))
            .expect("the run")
    };
    let (_, entries_then) = head(&mut db);
    // The first worker wakes up: whatever it tries to write into the run is refused.
    signal("-CONT", &first);
    // It finds out that it was fenced, ends its drive and, idle for 3 s, exits by itself;
    // a loaded machine (the whole suite at once) may take a while, so it gets 60 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while first.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = first.kill();
    let _ = first.wait();
    let (status, entries_now) = head(&mut db);
    assert_eq!(status, "failed", "the second worker's outcome stands");
    assert_eq!(entries_now, entries_then, "nothing of the paused worker's late work was recorded");
    let epoch: i64 = db
        .query_one("SELECT epoch FROM clio_leases WHERE run = $1", &[&run])
        .expect("the lease")
        .get(0);
    assert!(epoch >= 3, "the run was claimed twice (epoch {epoch})");
    let first_log = std::fs::read_to_string(case.home.join("first.log")).unwrap();
    assert!(
        first_log.contains("claimed by another worker") || first_log.contains("lost its lease"),
        "the paused worker says why it stopped: {first_log}"
    );
    // The side effect under way was done at most once: the second worker, on this machine,
    // kills what the paused worker's call left running before it reports the call cut short
    // (so the 3 s effect may never finish), and never runs it again; step b never ran.
    let ledger = case.ledger();
    assert!(ledger.is_empty() || ledger == ["p1 a"], "{ledger:?}");
}

#[test]
fn a_run_cancelled_from_another_process_stops_in_its_worker() {
    let case = Case::new("worker-cancel", true);
    let run = case.submit(SLOW, "c1", false);
    let mut fleet = case.fleet(&case.home);
    fleet.start_worker();
    wait_for_active_task(&mut case.db(), Some(run));
    let cancelled = case.clio(&["runs", "cancel", &run.to_string()]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.render());
    // The worker notices, stops driving the run and, with nothing left, exits once idle.
    let end = Instant::now() + Duration::from_secs(60);
    while !fleet.all_exited() {
        assert!(Instant::now() < end, "the worker did not stop");
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_for_status(&case.url, run, "cancelled", Duration::from_secs(1));
    let log = std::fs::read_to_string(case.home.join("worker-0.log")).unwrap();
    assert!(log.contains(&format!("run {run} was cancelled: stopped driving it")), "{log}");
    assert!(!case.ledger().iter().any(|l| l == "c1 b"), "step b never runs in a cancelled run");
}

#[test]
fn a_run_driven_in_the_foreground_and_killed_goes_to_a_worker_after_its_lease() {
    let case = Case::new("worker-foreground", true);
    // `clio workflow run` without --detach drives the run itself, holding its lease.
    let mut foreground = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(["--home", case.h(), "--journal", &case.url, "workflow", "run", SLOW])
        .args(["--task", "f1", "--plugin", PLUGIN, "--workspace", case.workspace.to_str().unwrap()])
        .args(["--no-input", "--quiet"])
        .current_dir(workspace_root())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the foreground run starts");
    let mut db = case.db();
    wait_for_active_task(&mut db, None);
    let dead = format!("clio-{}", foreground.id());
    let _ = foreground.kill();
    let _ = foreground.wait();
    // A worker started at once finds the run held until the dead process's lease (10 s)
    // runs out, then claims it and ends it: step a was cut short, so it is reported, never
    // re-run.
    let mut fleet = case.fleet(&case.home);
    fleet.start_worker_idle("30");
    wait_for_status(&case.url, 1, "failed", Duration::from_secs(60));
    let (worker, epoch): (String, i64) = db
        .query_one("SELECT worker, epoch FROM clio_leases WHERE run = 1", &[])
        .map(|r| (r.get(0), r.get(1)))
        .expect("the lease");
    assert_eq!(epoch, 2, "the worker's claim is the run's second");
    assert_ne!(worker, dead, "the lease moved from the killed process to the worker");
    let record: String =
        db.query_one("SELECT record FROM clio_runs WHERE id = 1", &[]).unwrap().get(0);
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert!(record["error"].as_str().unwrap_or_default().contains("interrupted"), "{record}");
    let ledger = case.ledger();
    assert!(ledger.iter().filter(|l| *l == "f1 a").count() <= 1, "{ledger:?}");
    assert!(!ledger.iter().any(|l| l == "f1 b"), "{ledger:?}");
}

/// Counts each effect of the ledger the test tools write in `workspace` (`ledger.log`, a
/// `label part` line per effect): the crash tests require each exactly once.
pub(crate) fn ledger_effects(workspace: &Path) -> HashMap<(String, String), usize> {
    let ledger = std::fs::read_to_string(workspace.join("ledger.log")).unwrap_or_default();
    let mut effects: HashMap<(String, String), usize> = HashMap::new();
    for line in ledger.lines() {
        let mut words = line.split_whitespace();
        let (Some(label), Some(part)) = (words.next(), words.next()) else {
            panic!("a ledger line is not `label part`: {line:?}");
        };
        *effects.entry((label.to_owned(), part.to_owned())).or_default() += 1;
    }
    effects
}
