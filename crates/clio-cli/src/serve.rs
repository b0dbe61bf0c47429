//! The journal's owner serves the other `clio` processes: the journal is one process's
//! file, so while a run holds it, `clio runs list|show|tree|events|export|answer|cancel|
//! prune|replay|resume` from another terminal are run by that process, on its open journal
//! and runtime, and print what they would print had they opened the journal themselves.
//!
//! The endpoint is a unix socket, `$CLIO_HOME/clio.sock` (mode 0600; a peer of another
//! user is refused by its credentials), made by whichever process holds the journal while
//! it drives a run ([`Endpoint`], removed when it is dropped). Since that process holds the
//! journal's lock, a socket file found there when it starts is a dead owner's, and is
//! replaced. The socket is the person's, not the plugins': a sandboxed tool runs as the
//! same user, and under Landlock it can connect to the socket, so the user's credentials
//! prove nothing. Every request carries the endpoint's key, 32 random bytes made afresh by
//! each endpoint and kept in `$CLIO_HOME/clio.key` (mode 0600), which only the person's own
//! `clio` can read: no sandbox ever shows a file of `$CLIO_HOME` (`Sandbox::hidden`,
//! docs/decisions.md). A request without it is refused and runs nothing.
//! The protocol is one JSON line each way: the client sends [`Request`] (the key, its
//! argv, its home, whether its stderr is a terminal), the owner parses the argv as `clio`
//! would, runs the same command with its output captured, and answers [`Reply`] (stdout,
//! stderr and the exit code), which the client prints and exits with. The output is the
//! same by construction: it is the same code writing it.
//!
//! `clio serve` also drives runs ([`Drivers`](crate::drivers::Drivers): submitted with `--detach`, resumed, left
//! interrupted by a crash, or answered) and serves the HTTP API and the run viewer beside
//! the socket, on the same journal and drivers (`http`, with its token in `token`).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::home::{Held, Home};

pub(crate) mod token;

/// The longest request line read, in bytes: argv is small, a larger line is refused.
const MAX_REQUEST: u64 = 1 << 20;

/// What a client asks the journal's owner: run this command line for me.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Request {
    /// The endpoint's key, read from `$CLIO_HOME/clio.key`: it proves that the request
    /// comes from the person's own `clio`.
    #[serde(default)]
    pub(crate) key: String,
    /// The command line, program name first.
    pub(crate) argv: Vec<String>,
    /// The client's home folder, made absolute: it must be the owner's.
    pub(crate) home: PathBuf,
    /// Whether the client's stderr is a terminal, for colour.
    #[serde(default)]
    pub(crate) tty: bool,
    /// The client's working folder, absolute: the relative paths of a run it submits
    /// (`--detach`) are read from there.
    #[serde(default)]
    pub(crate) cwd: Option<PathBuf>,
}

/// What the owner answers: what the command printed and its exit code.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Reply {
    /// What the command wrote on stdout.
    pub(crate) stdout: String,
    /// What the command wrote on stderr.
    pub(crate) stderr: String,
    /// The command's exit code.
    pub(crate) exit: u8,
}

impl Reply {
    /// A reply that refuses the request with `message` and `code`, as a command's error
    /// is printed.
    fn refusal(message: &str, code: u8) -> Reply {
        Reply { stdout: String::new(), stderr: format!("error: {message}\n"), exit: code }
    }
}

/// The listening end, alive while this process holds the journal and drives a run.
pub(crate) struct Endpoint {
    path: PathBuf,
    key_path: PathBuf,
    task: tokio::task::JoinHandle<()>,
    busy: Arc<Busy>,
}

/// The number of requests being served, so that the endpoint's end waits for their
/// replies: a cancel that ends this process's run must still answer its client.
#[derive(Default)]
struct Busy {
    count: Mutex<usize>,
    idle: Condvar,
}

impl Busy {
    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.count.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn enter(&self) {
        *self.lock() += 1;
    }

    fn leave(&self) {
        let mut count = self.lock();
        *count = count.saturating_sub(1);
        self.idle.notify_all();
    }

    /// Waits until no request is being served, for at most `limit`.
    fn wait_idle(&self, limit: Duration) {
        let count = self.lock();
        let _ = self.idle.wait_timeout_while(count, limit, |count| *count > 0);
    }
}

impl Endpoint {
    /// Listens on `$CLIO_HOME/clio.sock` for the commands of other processes, serving
    /// them with `held` (this process's journal and runtime) on `rt`'s threads. A socket
    /// file already there is a dead owner's: this process holds the journal's lock.
    pub(crate) fn start(
        rt: &tokio::runtime::Runtime,
        home: &Home,
        held: Arc<Held>,
    ) -> std::io::Result<Endpoint> {
        let path = home.socket_path();
        let key_path = key_path(home);
        // The key first: a client that finds the socket finds its key.
        let key = Arc::new(make_key(&key_path)?);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        let listener = {
            let _context = rt.enter();
            tokio::net::UnixListener::bind(&path)?
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        // The socket is this process's file: its owner is this process's user.
        let uid = std::fs::metadata(&path)?.uid();
        let home = home.holding(held);
        let busy = Arc::new(Busy::default());
        let task = rt.spawn(accept(listener, home, uid, key, Arc::clone(&busy)));
        Ok(Endpoint { path, key_path, task, busy })
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(&self.key_path);
        // Requests in flight get their replies before the process ends.
        self.busy.wait_idle(Duration::from_secs(30));
    }
}

/// Accepts connections until the endpoint is dropped; each is served on a thread of its
/// own, where the command may start a runtime of its own as it does in its own process.
async fn accept(
    listener: tokio::net::UnixListener,
    home: Home,
    uid: u32,
    key: Arc<String>,
    busy: Arc<Busy>,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of descriptors, say: try again shortly rather than spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let same_user = stream.peer_cred().is_ok_and(|peer| peer.uid() == uid);
        let Ok(stream) = stream.into_std() else { continue };
        let home = home.clone();
        let busy = Arc::clone(&busy);
        let key = Arc::clone(&key);
        busy.enter();
        std::thread::spawn(move || {
            serve_one(stream, &home, &key, same_user);
            busy.leave();
        });
    }
}

/// Reads one request from `stream`, runs it and writes the reply.
fn serve_one(stream: UnixStream, home: &Home, key: &str, same_user: bool) {
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    let reply = if same_user {
        let mut line = String::new();
        let mut reader = BufReader::new((&stream).take(MAX_REQUEST));
        match reader.read_line(&mut line) {
            Ok(_) => answer(&line, home, key),
            Err(error) => Reply::refusal(&format!("cannot read the request: {error}"), 2),
        }
    } else {
        Reply::refusal("the process holding this journal serves only its own user", 1)
    };
    if let Ok(mut text) = serde_json::to_string(&reply) {
        text.push('\n');
        let mut stream = &stream;
        let _ = stream.write_all(text.as_bytes());
        let _ = stream.flush();
    }
}

/// Runs the command a request line names, with this process's journal and runtime.
fn answer(line: &str, home: &Home, key: &str) -> Reply {
    let request: Request = match serde_json::from_str(line) {
        Ok(request) => request,
        Err(error) => {
            return Reply::refusal(
                &format!("malformed request to the process holding the journal: {error}"),
                2,
            );
        }
    };
    if !same_key(&request.key, key) {
        return Reply::refusal(
            &format!(
                "the process holding this journal runs commands only for your own clio: this \
                 request does not carry the key of {}",
                key_path(home).display()
            ),
            1,
        );
    }
    let same_home = match (request.home.canonicalize(), home.root().canonicalize()) {
        (Ok(asked), Ok(held)) => asked == held,
        _ => false,
    };
    if !same_home {
        return Reply::refusal(
            &format!(
                "this process holds the journal of {}, not of {}",
                home.root().display(),
                request.home.display()
            ),
            2,
        );
    }
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let exit = crate::run_served(
        &request.argv,
        home,
        request.tty,
        request.cwd.as_deref(),
        &mut stdout,
        &mut stderr,
    );
    Reply {
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        exit,
    }
}

/// Says whether a process serves the journal of `home` now.
pub(crate) fn is_served(home: &Home) -> bool {
    UnixStream::connect(home.socket_path()).is_ok()
}

/// Asks the process that holds the journal of `home` to run `argv`; `None` when no such
/// process answers (no socket, or a dead owner's), and the command runs here.
pub(crate) fn forward(home: &Home, argv: &[String], tty: bool) -> Option<Reply> {
    let root = home.root().canonicalize().ok()?;
    let mut stream = UnixStream::connect(home.socket_path()).ok()?;
    // Read after the connection, so that it is the key of the endpoint connected to. One
    // that cannot be read is sent empty: the owner refuses and says why.
    let key = read_key(&key_path(home)).unwrap_or_default();
    let cwd = std::env::current_dir().ok();
    let request = Request { key, argv: argv.to_vec(), home: root, tty, cwd };
    let mut line = serde_json::to_string(&request).ok()?;
    line.push('\n');
    stream.write_all(line.as_bytes()).ok()?;
    let mut answer = String::new();
    BufReader::new(&stream).read_line(&mut answer).ok()?;
    serde_json::from_str(&answer).ok()
}

/// Returns where the endpoint of `home` keeps its key.
pub(crate) fn key_path(home: &Home) -> PathBuf {
    home.root().join("clio.key")
}

/// Makes a fresh key and writes it to `path` (mode 0600 from its creation, under a fresh
/// name renamed over the old key): 32 random bytes as hex.
fn make_key(path: &std::path::Path) -> std::io::Result<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let key: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let fresh = path.with_extension(format!("key.{}", std::process::id()));
    let _ = std::fs::remove_file(&fresh);
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&fresh)?;
    file.write_all(key.as_bytes())?;
    drop(file);
    std::fs::rename(&fresh, path)?;
    Ok(key)
}

/// Reads the key at `path`: a regular file of this user's only, at most 64 bytes.
fn read_key(path: &std::path::Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
        return None;
    }
    let mut key = String::new();
    file.take(64).read_to_string(&mut key).ok()?;
    Some(key.trim().to_owned())
}

/// Compares two keys in a time that does not depend on where they differ.
fn same_key(given: &str, key: &str) -> bool {
    let (given, key) = (given.as_bytes(), key.as_bytes());
    let differ = given.iter().zip(key).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    !key.is_empty() && given.len() == key.len() && differ == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_request_gets_an_error_reply() {
        let home =
            Home::locate(Some(std::path::Path::new("/nonexistent-clio-home")), None).unwrap();
        for line in ["", "not json", "{\"argv\": 3}", "{\"argv\": [], \"home\": \"/\", \"x\": 1}"] {
            let reply = answer(line, &home, "k");
            assert_eq!(reply.exit, 2, "{line}");
            assert!(reply.stderr.starts_with("error: "), "{line}: {}", reply.stderr);
        }
    }

    #[test]
    fn a_request_without_the_key_runs_nothing() {
        let home =
            Home::locate(Some(std::path::Path::new("/nonexistent-clio-home")), None).unwrap();
        // The home does not exist: a request let through would fail on it with exit 2,
        // and one refused for its key exits 1 before anything is looked at.
        for key in ["", "wrong", "kk", "K"] {
            let line = serde_json::json!({
                "key": key, "argv": ["clio", "runs", "answer", "1", "3", "yes"], "home": "/",
            });
            let reply = answer(&line.to_string(), &home, "k");
            assert_eq!(reply.exit, 1, "{key}: {}", reply.stderr);
            assert!(reply.stderr.contains("does not carry the key of"), "{}", reply.stderr);
            assert!(reply.stderr.contains("clio.key"), "{}", reply.stderr);
        }
        let without = r#"{"argv": ["clio", "runs", "cancel", "1"], "home": "/"}"#;
        assert_eq!(answer(without, &home, "k").exit, 1);
        let keyed = serde_json::json!({"key": "k", "argv": ["clio"], "home": "/"});
        let reply = answer(&keyed.to_string(), &home, "k");
        assert!(!reply.stderr.contains("does not carry the key"), "{}", reply.stderr);
    }

    #[test]
    fn the_key_is_fresh_and_the_users_only() {
        let dir = std::env::temp_dir().join(format!("clio-serve-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("clio.key");
        let first = make_key(&path).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(read_key(&path).as_deref(), Some(first.as_str()));
        let second = make_key(&path).unwrap();
        assert_ne!(first, second, "each endpoint makes its own");
        assert_eq!(read_key(&path).as_deref(), Some(second.as_str()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read_key(&path), None, "a key others may read is no key");
        assert!(same_key("abc", "abc"));
        assert!(!same_key("abd", "abc") && !same_key("ab", "abc") && !same_key("", ""));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
