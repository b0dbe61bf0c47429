//! No process of a sandboxed program outlives its call (or its [`Confined`](super::Confined),
//! for a program that is not a call's: a hook, an MCP server).
//!
//! What holds the processes a program starts, on every path:
//! - **Its own process group.** Every program starts as the leader of a new group (under
//!   bubblewrap, bubblewrap does); when its `Confined` is dropped (the call succeeded,
//!   failed, ran out of time or was cancelled) the whole group is sent `SIGKILL`, and its
//!   members (found before the kill) are waited for until they run no more.
//! - **Death with `clio`.** Under bubblewrap, `--die-with-parent` and the pid namespace:
//!   when `clio` dies, bubblewrap's child dies, and with it every process of the namespace
//!   (`setsid` daemons included). Under Landlock and with mode `off`, the program is started
//!   through `setpriv --pdeathsig KILL` (util-linux), so it gets `SIGKILL` when the thread
//!   that started it ends; that thread is a keeper of its own that lives as long as the
//!   `Confined` (a thread that ended right after the start would kill the program at
//!   once), and it ends with `clio` whatever kills `clio`.
//! - **A marker it cannot lose by forking.** Every program gets `CLIO_CALL` in its
//!   environment: the tag of the call it runs for ([`as_call`]: `<owner>/<run>/<task>`,
//!   what the journal records of the call) and `#<pid>.<n>` naming the program. Its
//!   children inherit it, `setsid` or not. When its `Confined` is dropped, after the group
//!   kill, every process of this user whose environment carries that exact marker is sent
//!   `SIGKILL` too, until none is left, and waited for (under bubblewrap too: its pid
//!   namespace ends with it, but the kernel kills the namespace's processes after bubblewrap
//!   has exited, so a call could return while they still run); and a resumed run first kills every process left with its dead owner's prefix
//!   ([`kill_leftovers`]), before it decides what to do with a call cut short.
//!
//! Not covered, under Landlock or mode `off` only: a descendant that both leaves the
//! process group (`setsid`, `setpgid`) and replaces its environment (an `exec` with an
//! environment of its own) is not found, either at the call's end or on resume; nor is one
//! that outlives `clio` when `setpriv` is missing (the group kill and the marker still
//! apply while `clio` lives, and the marker on resume). bubblewrap covers both. Cgroups
//! are not used: `clio` runs as a user without a delegated cgroup in most places.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::SandboxError;

/// The environment variable that marks every process of a sandboxed program.
pub const CALL_VAR: &str = "CLIO_CALL";

/// Numbers the programs this process starts.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// How many passes a kill makes over the process table: a process forked between a pass's
/// read and its kill is found by the next.
const PASSES: usize = 16;

/// How long a kill waits for the processes it killed to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(2);

/// How long a program may have run for its end to look only at the pids handed out after
/// its own: the kernel's counter cannot come round twice (`pid_max` is 32,768 at least)
/// within it short of thousands of processes a second.
const WINDOW_WITHIN: Duration = Duration::from_secs(5);

tokio::task_local! {
    /// The tag of the call whose future is being polled.
    static CALL: String;
}

/// Runs `work` as the call tagged `tag` ([`call_tag`]): every program confined and started
/// while it runs carries the tag, so that a resume can find what the call left.
pub async fn as_call<F: Future>(tag: String, work: F) -> F::Output {
    CALL.scope(tag, work).await
}

/// Returns the tag of call `call` (a task's number, or a call's identity) of run `run`,
/// driven by the process the journal names `owner`.
pub fn call_tag(owner: &str, run: u64, call: &str) -> String {
    format!("{}{call}", run_prefix(owner, run))
}

/// Returns the prefix of the tags of every call of run `run` driven by `owner`.
pub fn run_prefix(owner: &str, run: u64) -> String {
    format!("{owner}/{run}/")
}

/// Kills every process of this user whose marker starts with `prefix` (a [`run_prefix`]
/// or a [`call_tag`] followed by `#`), and waits until they are gone (at most 2 s).
/// Returns how many were killed. Called on resume, before a run goes on, for its dead
/// owner's calls.
pub fn kill_leftovers(prefix: &str) -> usize {
    kill_marked(|marker| marker.starts_with(prefix.as_bytes()), None)
}

/// What keeps one program's processes within its `Confined`.
#[derive(Debug, Default)]
pub(super) struct Lifetime {
    /// The value of [`CALL_VAR`] it was started with.
    marker: String,
    /// Its process group (its first process's id), once started.
    group: Option<u32>,
    /// Whether its processes are looked for by marker when it ends.
    scan: bool,
    /// Dropped to end the thread that started it (`setpriv --pdeathsig` then kills it).
    keeper: Option<std::sync::mpsc::Sender<()>>,
    /// When it started.
    since: Option<Instant>,
}

impl Lifetime {
    /// Marks `command` to start a new process group with a fresh marker; `scan` says
    /// whether its processes are looked for by marker when it ends.
    pub(super) fn prepare(&mut self, command: &mut tokio::process::Command, scan: bool) {
        let tag = CALL.try_with(Clone::clone).unwrap_or_else(|_| "-".to_owned());
        self.marker =
            format!("{tag}#{}.{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        self.scan = scan;
        command.env(CALL_VAR, &self.marker).process_group(0);
    }

    /// Notes that the program started as process `pid`, its thread kept alive by `keeper`.
    pub(super) fn started(
        &mut self,
        pid: Option<u32>,
        keeper: Option<std::sync::mpsc::Sender<()>>,
    ) {
        self.group = pid;
        self.keeper = keeper;
        self.since = Some(Instant::now());
    }

    /// Kills every process of the program: its group, then every process that carries its
    /// marker, and waits until they are gone. Done at most once.
    pub(super) fn end(&mut self) {
        if let Some(group) = self.group.take().and_then(|g| i32::try_from(g).ok())
            && let Some(pid) = rustix::process::Pid::from_raw(group)
        {
            // Its processes were all started after it: after its pid, in the order the
            // kernel hands pids out, when the call was short enough that the counter
            // cannot have come round to it again; else every process is looked at.
            let short = self.since.is_some_and(|t| t.elapsed() < WINDOW_WITHIN);
            let after = u32::try_from(group).ok().filter(|_| short);
            // The group's members are found before the kill: a process that is exiting
            // shows no environment, so the marker's scan would not wait for it.
            let members = group_members(group.unsigned_abs(), after);
            // A group that is gone already is not an error.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            if self.scan {
                let marker = self.marker.as_bytes();
                kill_marked(|found| found == marker, after);
            }
            wait_gone(&members);
        }
        self.keeper = None;
    }
}

impl Drop for Lifetime {
    fn drop(&mut self) {
        self.end();
    }
}

/// Starts `command` from a thread of its own, which first runs `restrict` (Landlock's
/// rules) and then lives until `lifetime` ends: the program's `--pdeathsig` is bound to it.
pub(super) fn spawn_kept<R>(
    command: &mut tokio::process::Command,
    restrict: Option<R>,
    spawn_error: impl Fn(std::io::Error) -> SandboxError + Send + 'static,
    lifetime: &mut Lifetime,
) -> Result<tokio::process::Child, SandboxError>
where
    R: FnOnce() -> Result<(), SandboxError> + Send + 'static,
{
    let runtime = tokio::runtime::Handle::try_current().map_err(|e| {
        spawn_error(std::io::Error::other(format!("no tokio runtime to start it in: {e}")))
    })?;
    let stopped = || std::io::Error::other("the thread that starts it stopped");
    let mut taken = std::mem::replace(command, tokio::process::Command::new(""));
    let (started_tx, started_rx) = std::sync::mpsc::sync_channel(1);
    let (keeper, kept) = std::sync::mpsc::channel::<()>();
    let keep = move || {
        let child = restrict.map_or(Ok(()), |restrict| restrict()).and_then(|()| {
            let _runtime = runtime.enter();
            taken.spawn().map_err(&spawn_error)
        });
        let started = child.is_ok();
        // The caller waits for this; it went away only if it panicked.
        let _ = started_tx.send((child, taken));
        if started {
            // Ends when `lifetime` drops the sender.
            let _ = kept.recv();
        }
    };
    let thread = std::thread::Builder::new()
        .name("clio-sandbox-keeper".into())
        .stack_size(512 * 1024)
        .spawn(keep);
    if let Err(error) = thread {
        return Err(SandboxError::Spawn { program: PathBuf::from("(thread)"), source: error });
    }
    let (child, back) = started_rx.recv().map_err(|_| SandboxError::Spawn {
        program: PathBuf::from("(thread)"),
        source: stopped(),
    })?;
    *command = back;
    let child = child?;
    lifetime.started(child.id(), Some(keeper));
    Ok(child)
}

/// Returns the command that starts `program` so that it dies with the thread that starts
/// it: through `setpriv --pdeathsig KILL` when both can be found (a program that cannot be
/// is started as itself, so that its start fails as it would have).
pub(super) fn command(program: &Path) -> tokio::process::Command {
    let found = super::find_program(program).filter(|found| is_program(found));
    match (setpriv(), found) {
        (Some(setpriv), Some(_)) => {
            let mut command = tokio::process::Command::new(setpriv);
            command.args(["--pdeathsig", "KILL", "--"]).arg(program);
            command
        }
        _ => tokio::process::Command::new(program),
    }
}

/// Returns `setpriv` when it can start a program with `--pdeathsig`: found once per
/// process among the system folders.
pub(super) fn setpriv() -> Option<&'static Path> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            ["/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv"]
                .iter()
                .map(PathBuf::from)
                .find(|p| is_program(p))
        })
        .as_deref()
}

/// Says whether `path` is a file that may be run.
pub(super) fn is_program(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Kills, pass after pass, every process whose marker `matches`, until a pass finds none;
/// then waits until they are gone. Returns how many were killed.
/// With `after`, only the processes started after process `after` are looked at (see
/// [`started_after`]).
fn kill_marked(matches: impl Fn(&[u8]) -> bool, after: Option<u32>) -> usize {
    let me = std::process::id();
    let mut killed: Vec<u32> = Vec::new();
    for _ in 0..PASSES {
        let window = after.and_then(|leader| last_pid().map(|last| (leader, last)));
        let candidate =
            |pid: u32| window.is_none_or(|(leader, last)| started_after(pid, leader, last));
        let found: Vec<u32> =
            marked(&matches, candidate).into_iter().filter(|pid| *pid != me).collect();
        let fresh: Vec<u32> = found.iter().copied().filter(|p| !killed.contains(p)).collect();
        for pid in &found {
            if let Some(pid) = i32::try_from(*pid).ok().and_then(rustix::process::Pid::from_raw) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        killed.extend(fresh);
        if found.is_empty() {
            break;
        }
    }
    wait_gone(&killed);
    killed.len()
}

/// Returns the processes whose environment holds a [`CALL_VAR`] that `matches`. A process
/// that cannot be read (another user's, or one that just ended) is skipped.
/// Reading another process's environment is the slow part (a few microseconds each, and
/// more on a busy machine), so only the `candidate` pids are read.
fn marked(matches: &impl Fn(&[u8]) -> bool, candidate: impl Fn(u32) -> bool) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let key = format!("{CALL_VAR}=");
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| candidate(*pid))
        .filter(|pid| {
            let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else { return false };
            environ
                .split(|b| *b == 0)
                .filter_map(|var| var.strip_prefix(key.as_bytes()))
                .any(matches)
        })
        .collect()
}

/// Says whether `pid` can have been handed out after `leader`, the kernel's last pid being
/// `last`: the kernel hands pids out in increasing order and comes round to the lowest
/// free ones past its maximum, so those from `leader` on, and once it has come round
/// (`last` below `leader`) those up to `last` too.
fn started_after(pid: u32, leader: u32, last: u32) -> bool {
    pid >= leader || (last < leader && pid <= last)
}

/// Returns the last pid the kernel handed out in this process's pid namespace.
fn last_pid() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/ns_last_pid").ok()?.trim().parse().ok()
}

/// Returns the processes of process group `group` (looking, with `after`, only at those
/// started after process `after`, see [`started_after`]).
fn group_members(group: u32, after: Option<u32>) -> Vec<u32> {
    let window = after.and_then(|leader| last_pid().map(|last| (leader, last)));
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| window.is_none_or(|(leader, last)| started_after(*pid, leader, last)))
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // After the command's closing parenthesis: state, parent, group.
            let fields = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace());
            fields.and_then(|mut f| f.nth(2)).and_then(|g| g.parse::<u32>().ok()) == Some(group)
        })
        .collect()
}

/// Waits until every process of `pids` has ended (gone, or a zombie: it runs no more).
fn wait_gone(pids: &[u32]) {
    let deadline = Instant::now() + GONE_WITHIN;
    while pids.iter().any(|pid| running(*pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Says whether process `pid` still runs: it exists and is not a zombie.
fn running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state follows the command's closing parenthesis.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::run_executable as tool;
    use crate::sandbox::{Access, Sandbox, SandboxMode};

    /// A folder of its own with a workspace and the program `leave`, which leaves a forked
    /// child and a `setsid` daemon behind, each writing `late` in the workspace after a
    /// second, and then sleeps `$1` seconds (its first argument, 0 when absent).
    struct Place {
        root: PathBuf,
        workspace: PathBuf,
        program: PathBuf,
    }

    impl Place {
        fn new(name: &str) -> Place {
            use std::os::unix::fs::PermissionsExt;
            let root =
                std::env::temp_dir().join(format!("clio-lifetime-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            let (workspace, bin) = (root.join("workspace"), root.join("bin"));
            std::fs::create_dir_all(&workspace).unwrap();
            std::fs::create_dir_all(&bin).unwrap();
            let program = bin.join("leave");
            let script = "#!/bin/sh\n\
                cat > /dev/null\n\
                ( sleep 1; echo child >> late ) < /dev/null > /dev/null 2>&1 &\n\
                setsid sh -c 'sleep 1; echo daemon >> late' < /dev/null > /dev/null 2>&1 &\n\
                sleep \"${1:-0}\"\n\
                echo '{\"left\": true}'\n";
            std::fs::write(&program, script).unwrap();
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
            Place { root, workspace, program }
        }

        fn access(&self) -> Access {
            Access {
                workspace: Some(self.workspace.clone()),
                read: vec![self.root.join("bin")],
                ..Access::default()
            }
        }

        /// The processes that work in the workspace and still run.
        fn running(&self) -> Vec<u32> {
            let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
                .filter(|pid| {
                    std::fs::read_link(format!("/proc/{pid}/cwd"))
                        .is_ok_and(|cwd| cwd == self.workspace)
                })
                .filter(|pid| running(*pid))
                .collect()
        }

        /// Asserts that nothing of the program runs, and that nothing it left writes later.
        fn assert_nothing_left(&self, what: &str) {
            assert_eq!(self.running(), Vec::<u32>::new(), "{what}: still running");
            std::thread::sleep(Duration::from_millis(1500));
            assert!(!self.workspace.join("late").exists(), "{what}: an effect after the end");
        }
    }

    impl Drop for Place {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }

    /// The modes this machine has: off, and Landlock and bubblewrap when they work here.
    fn modes() -> Vec<SandboxMode> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut modes = vec![SandboxMode::Off];
        for mode in [SandboxMode::Landlock, SandboxMode::Bwrap] {
            let sandbox = Sandbox { mode, ..Sandbox::default() };
            let works = rt.block_on(sandbox.confine(Path::new("/bin/true"), &Access::default()));
            // A mechanism this machine does not have is left out (`.ci/run` has both).
            if works.is_ok() {
                modes.push(mode);
            }
        }
        modes
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
    }

    #[test]
    fn what_a_tool_left_ends_with_its_call_however_the_call_ends() {
        let rt = runtime();
        for mode in modes() {
            let sandbox = Sandbox { mode, ..Sandbox::default() };
            let place = Place::new(&format!("{mode:?}"));
            let (args, access) = (serde_json::json!({}), place.access());
            // The one way a tool's program runs (clio-flow's adversarial test holds the
            // sources to it): through `exec.rs`.
            let call =
                tool("leave", &place.program, &sandbox, &access, &args, Duration::from_secs(30));
            let done = rt.block_on(call);
            assert!(done.is_ok(), "{mode:?}: {done:?}");
            place.assert_nothing_left(&format!("{mode:?}, succeeded"));
        }
    }

    #[test]
    fn what_a_tool_left_ends_when_its_call_times_out_or_is_cancelled() {
        let rt = runtime();
        for mode in modes() {
            let sandbox = Sandbox { mode, ..Sandbox::default() };
            let place = Place::new(&format!("{mode:?}-slow"));
            let (program, access) = (place.program.clone(), place.access());
            let confined_call = |timeout| async move {
                let mut confined = sandbox.confine(&program, &access).await?;
                confined
                    .command()
                    .arg("30")
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .kill_on_drop(true);
                let mut child = confined.spawn()?;
                // Cancelled (dropped) or timed out, as a call's future is.
                let _ = tokio::time::timeout(timeout, child.wait()).await;
                Ok::<_, SandboxError>(())
            };
            let ended = rt.block_on(confined_call(Duration::from_millis(300)));
            assert!(ended.is_ok(), "{mode:?}: {ended:?}");
            place.assert_nothing_left(&format!("{mode:?}, timed out"));
        }
    }

    #[test]
    fn a_resume_finds_what_a_dead_owners_call_left_by_its_tag() {
        let rt = runtime();
        for mode in modes() {
            let sandbox = Sandbox { mode, ..Sandbox::default() };
            let place = Place::new(&format!("{mode:?}-crash"));
            let owner = format!("lifetime-test-{}-{mode:?}", std::process::id());
            let tag = call_tag(&owner, 7, "3");
            // The call starts its program, and its process "dies": nothing of the call
            // ends it (the `Confined` and the child are forgotten, as a SIGKILL would).
            let started = rt.block_on(as_call(tag, async {
                let mut confined = sandbox.confine(&place.program, &place.access()).await?;
                confined
                    .command()
                    .arg("30")
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null());
                let child = confined.spawn()?;
                std::mem::forget(child);
                Ok::<_, SandboxError>(confined)
            }));
            let confined = started.unwrap();
            // The keeper thread is forgotten too: the program stays.
            std::mem::forget(confined);
            wait_until(|| place.running().len() >= 3);
            assert_eq!(kill_leftovers(&run_prefix(&owner, 8)), 0, "another run's tag");
            if mode != SandboxMode::Bwrap {
                assert!(!place.running().is_empty(), "{mode:?}");
            }
            let killed = kill_leftovers(&run_prefix(&owner, 7));
            assert!(killed >= 3, "{mode:?}: killed {killed}");
            place.assert_nothing_left(&format!("{mode:?}, resumed"));
        }
    }

    /// Waits (at most ten seconds) until `ready` holds.
    fn wait_until(ready: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn tags_nest_under_their_run() {
        let tag = call_tag("clio-7", 3, "12");
        assert_eq!(tag, "clio-7/3/12");
        assert!(tag.starts_with(&run_prefix("clio-7", 3)));
        assert!(!tag.starts_with(&run_prefix("clio-7", 31)));
        assert!(!call_tag("clio-7", 31, "1").starts_with(&run_prefix("clio-7", 3)));
    }

    #[test]
    fn the_pids_handed_out_after_a_program_are_its_candidates() {
        // No coming round: from the leader on.
        assert!(started_after(500, 500, 900) && started_after(901, 500, 900));
        assert!(!started_after(499, 500, 900) && !started_after(1, 500, 900));
        // Come round once: from the leader on, and up to the last.
        assert!(started_after(32000, 30000, 100) && started_after(100, 30000, 100));
        assert!(started_after(1, 30000, 100));
        assert!(!started_after(101, 30000, 100) && !started_after(29999, 30000, 100));
        assert!(last_pid().is_some_and(|last| last > 0));
    }

    #[test]
    fn a_process_that_is_not_there_does_not_run() {
        assert!(!running(u32::MAX));
        assert!(running(std::process::id()));
        assert_eq!(kill_leftovers("no-such-owner-ever/1/"), 0);
    }

    /// A group's members are found by their group, the leader and what it forked, and
    /// nothing outside it.
    #[test]
    fn a_groups_members_are_its_leader_and_what_it_forked() {
        use std::os::unix::process::CommandExt;
        let mut leader = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let group = leader.id();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut members = group_members(group, Some(group));
        while members.len() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            members = group_members(group, Some(group));
        }
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_raw(group as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
        let _ = leader.wait();
        assert!(members.contains(&group), "{members:?}");
        assert_eq!(members.len(), 3, "sh and its two sleeps: {members:?}");
        assert!(!members.contains(&std::process::id()));
    }
}
