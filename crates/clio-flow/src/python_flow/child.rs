//! The process that runs a plugin's Python flows: `python3 -I -B <package>/clio_agent/
//! _flow_host.py` in the sandbox, speaking the line protocol of `docs/python-flows.md` on
//! its stdin and stdout. One child serves every instance of its plugin's flows in this
//! process (see [`super::Pool`]); its messages are sent to the instance they name.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clio_tools::{Access, Confined, Sandbox, SandboxMode};
use serde_json::Value;
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWriteExt as _, BufReader,
};
use tokio::sync::{mpsc, oneshot};

/// The protocol version this host speaks.
pub(crate) const PROTOCOL: u64 = 1;

/// The longest line the host reads from the child (a large result travels in one line).
const MAX_LINE: usize = 1 << 30;

/// How much of the child's standard error is kept, to show with a child that died.
const STDERR_TAIL: usize = 8 * 1024;

/// How long a child may take to say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// What an instance hears from its child.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A message naming the instance.
    Message(Value),
    /// The child cannot serve it any more: it died, or spoke outside the protocol.
    Lost(Loss),
}

/// Why a child stopped serving its instances.
#[derive(Debug, Clone)]
pub(crate) enum Loss {
    /// The process ended (killed, crashed, exited): `why`, with the end of its stderr.
    Died(String),
    /// It wrote a line that is no message of the protocol (quoted, 200 bytes at most).
    Garbage(String),
}

/// How to start a child.
pub(crate) struct Spawn {
    pub(crate) interpreter: PathBuf,
    pub(crate) plugin: String,
    pub(crate) root: PathBuf,
    pub(crate) workspace: Option<PathBuf>,
    pub(crate) sandbox: Sandbox,
    pub(crate) network: bool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running child.
pub(crate) struct Child {
    lines: mpsc::UnboundedSender<String>,
    instances: Mutex<HashMap<String, mpsc::UnboundedSender<Incoming>>>,
    lost: Mutex<Option<Loss>>,
    alive: AtomicBool,
    next: AtomicU64,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    /// Killing it: dropping the sandbox's handle kills every process of the child.
    confined: Mutex<Option<Confined>>,
    pid: Option<u32>,
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child").field("pid", &self.pid).finish()
    }
}

impl Child {
    /// Starts a child as `spawn` says and waits for its `ready`; an error says why it did
    /// not start, with what it printed.
    pub(crate) async fn start(spawn: &Spawn) -> Result<Arc<Child>, String> {
        let package = clio_plugins::python::package_dir().map_err(|e| e.to_string())?;
        let interpreter = match spawn.sandbox.mode {
            SandboxMode::Off => spawn.interpreter.clone(),
            _ => clio_tools::find_program(&spawn.interpreter)
                .unwrap_or_else(|| spawn.interpreter.clone()),
        };
        let mut read = vec![spawn.root.clone(), package.to_path_buf()];
        read.extend(clio_tools::program_prefixes(&interpreter));
        let access = Access {
            workspace: spawn.workspace.clone(),
            read,
            write: Vec::new(),
            network: spawn.network,
            env: spawn.sandbox.env_for(&spawn.plugin, "flows"),
        };
        let mut confined = spawn
            .sandbox
            .confine(&interpreter, &access)
            .await
            .map_err(|e| format!("the sandbox for plugin {}'s flows: {e}", spawn.plugin))?;
        confined
            .command()
            .arg("-I")
            .arg("-B")
            .arg("-u")
            .arg(package.join("clio_agent").join("_flow_host.py"))
            .env("PYTHONUTF8", "1")
            .env("PYTHONIOENCODING", "utf-8")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut process = confined.spawn().map_err(|e| {
            format!("cannot start the Python interpreter {:?}: {e}", spawn.interpreter)
        })?;
        let pid = process.id();
        let stdin = process.stdin.take();
        let stdout = process.stdout.take();
        let stderr_pipe = process.stderr.take();
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(pipe) = stderr_pipe {
            tokio::spawn(keep_tail(pipe, Arc::clone(&stderr)));
        }
        let (lines, mut to_child) = mpsc::unbounded_channel::<String>();
        if let Some(mut stdin) = stdin {
            tokio::spawn(async move {
                while let Some(mut line) = to_child.recv().await {
                    line.push('\n');
                    if stdin.write_all(line.as_bytes()).await.is_err() {
                        break;
                    }
                    // Several queued lines go out in one write.
                    if to_child.is_empty() && stdin.flush().await.is_err() {
                        break;
                    }
                }
            });
        }
        let child = Arc::new(Child {
            lines,
            instances: Mutex::new(HashMap::new()),
            lost: Mutex::new(None),
            alive: AtomicBool::new(true),
            next: AtomicU64::new(0),
            stderr,
            confined: Mutex::new(Some(confined)),
            pid,
        });
        let (ready_tx, ready_rx) = oneshot::channel::<Result<(), String>>();
        let Some(stdout) = stdout else {
            return Err("the Python interpreter's stdout could not be read".into());
        };
        tokio::spawn(read_messages(Arc::clone(&child), stdout, process, ready_tx));
        match tokio::time::timeout(READY_WITHIN, ready_rx).await {
            Ok(Ok(Ok(()))) => Ok(child),
            Ok(Ok(Err(why))) => Err(why),
            Ok(Err(_)) => Err(format!("it ended before it was ready{}", child.stderr_note())),
            Err(_) => {
                child.kill();
                Err(format!(
                    "it did not say it was ready within {} s{}",
                    READY_WITHIN.as_secs(),
                    child.stderr_note()
                ))
            }
        }
    }

    /// Says whether the child still serves instances.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Returns a new instance id and the channel its messages arrive on (always `Some`: a
    /// child already gone tells the instance why as its first message).
    pub(crate) fn open(&self, run: u64) -> Option<(String, mpsc::UnboundedReceiver<Incoming>)> {
        // Under the loss's lock: `lose` records the loss before it tells the instances, so
        // an instance either is told, or opens after the loss and hears it here at once. A
        // child lost as the instance opens (garbage right after `ready`, an exit) is so
        // reported with its own reason, never left unheard.
        let lost = lock(&self.lost);
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let id = format!("r{run}/i{n}");
        let (tx, rx) = mpsc::unbounded_channel();
        match lost.as_ref() {
            Some(loss) => drop(tx.send(Incoming::Lost(loss.clone()))),
            None => drop(lock(&self.instances).insert(id.clone(), tx)),
        }
        Some((id, rx))
    }

    /// Forgets instance `id` (it ended).
    pub(crate) fn close(&self, id: &str) {
        lock(&self.instances).remove(id);
    }

    /// Sends `message` (one line of compact JSON).
    pub(crate) fn send(&self, message: &Value) {
        let _ = self.lines.send(message.to_string());
    }

    /// Kills the child and every process it started.
    pub(crate) fn kill(&self) {
        self.alive.store(false, Ordering::SeqCst);
        if let Some(mut confined) = lock(&self.confined).take() {
            confined.end();
        }
    }

    /// Returns the end of what the child printed on stderr, as a note to add to an error.
    pub(crate) fn stderr_note(&self) -> String {
        let bytes: Vec<u8> = lock(&self.stderr).iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if text.is_empty() { String::new() } else { format!("; it printed: {text}") }
    }

    /// Tells every instance the child is lost, once.
    fn lose(&self, loss: Loss) {
        self.alive.store(false, Ordering::SeqCst);
        {
            let mut lost = lock(&self.lost);
            if lost.is_some() {
                return;
            }
            *lost = Some(loss.clone());
        }
        let instances: Vec<_> = lock(&self.instances).drain().collect();
        for (_, tx) in instances {
            let _ = tx.send(Incoming::Lost(loss.clone()));
        }
    }
}

/// Keeps the last [`STDERR_TAIL`] bytes of `pipe` in `tail`.
async fn keep_tail(mut pipe: impl AsyncRead + Unpin, tail: Arc<Mutex<VecDeque<u8>>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut tail = lock(&tail);
        tail.extend(&buf[..n]);
        while tail.len() > STDERR_TAIL {
            tail.pop_front();
        }
    }
}

/// Reads the child's messages and sends each to its instance, until the child ends.
async fn read_messages(
    child: Arc<Child>,
    stdout: tokio::process::ChildStdout,
    mut process: tokio::process::Child,
    ready: oneshot::Sender<Result<(), String>>,
) {
    let mut ready = Some(ready);
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let loss = loop {
        line.clear();
        match (&mut reader).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break None,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            if line.len() > MAX_LINE {
                break Some(Loss::Garbage(format!("a line longer than {MAX_LINE} bytes")));
            }
            // A last line cut off by the child's end.
            break None;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(text) {
            Ok(message @ Value::Object(_)) => message,
            _ => break Some(Loss::Garbage(quote(text))),
        };
        let kind = message.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "ready" {
            let protocol = message.get("protocol").and_then(Value::as_u64);
            if let Some(ready) = ready.take() {
                let answer = if protocol == Some(PROTOCOL) {
                    Ok(())
                } else {
                    Err(format!("it speaks protocol {protocol:?}, this clio speaks {PROTOCOL}"))
                };
                let _ = ready.send(answer);
            }
            continue;
        }
        if let Some(ready) = ready.take() {
            let _ = ready.send(Err(format!("it wrote {} before saying it was ready", quote(text))));
            break None;
        }
        if kind == "protocol_error" {
            let said = message.get("message").and_then(Value::as_str).unwrap_or("").to_owned();
            break Some(Loss::Died(format!("the runner stopped: {said}")));
        }
        let instance = match message.get("instance") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => break Some(Loss::Garbage(quote(text))),
        };
        let target = lock(&child.instances).get(&instance).cloned();
        // A message for an instance that ended is ignored (replies may cross).
        if let Some(tx) = target {
            let _ = tx.send(Incoming::Message(message));
        }
    };
    if let Some(Loss::Garbage(_)) = &loss {
        child.kill();
    }
    let status = tokio::time::timeout(Duration::from_secs(2), process.wait()).await;
    if status.is_err() {
        child.kill();
    }
    // Its stderr's last words arrive with its end.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let how = match status {
        Ok(Ok(status)) => match status.code() {
            Some(code) => format!("exited with status {code}"),
            None => format!("was killed ({status})"),
        },
        _ => "stopped answering".to_owned(),
    };
    let loss = loss.unwrap_or_else(|| Loss::Died(format!("it {how}{}", child.stderr_note())));
    if let Some(ready) = ready.take() {
        let why = match &loss {
            Loss::Died(why) => why.clone(),
            Loss::Garbage(line) => format!("it wrote {line}"),
        };
        let _ = ready.send(Err(why));
    }
    child.lose(loss);
    child.kill();
}

/// Returns the first 200 bytes of `text`, quoted.
pub(crate) fn quote(text: &str) -> String {
    let mut end = text.len().min(200);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let more = if end < text.len() { "…" } else { "" };
    format!("{:?}{more}", &text[..end])
}
