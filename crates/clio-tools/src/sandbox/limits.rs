//! Memory, process, CPU-time and file-size limits for every program the sandbox starts.
//!
//! Each limit is set twice where the machine allows:
//! - as a resource limit, set by util-linux's `prlimit` program, which starts the program
//!   (or bubblewrap) with the limits already in force, so they hold for it and everything
//!   it starts (where `prlimit` is not installed, they are set on the started process
//!   right after it starts, which leaves it a moment without them): `RLIMIT_DATA` for memory (the heap and
//!   every private writable mapping since Linux 4.7: an allocation past it fails),
//!   `RLIMIT_CPU` (`SIGXCPU` at the limit, `SIGKILL` five seconds later), `RLIMIT_FSIZE`
//!   (`SIGXFSZ`, a write past it fails), `RLIMIT_CORE` 0 (no core files in the
//!   workspace), and `RLIMIT_NPROC` for processes, which needs care: the kernel counts
//!   every process and thread of the *user*, not of the program, and never applies it to
//!   root. So it is set only for a user other than root, to the number of threads that
//!   user runs when the program starts plus the limit, and only when no cgroup could be
//!   made (below); the person's other programs starting meanwhile count against it too.
//! - as a cgroup of the program's own, when `clio` may make one (a writable cgroup v1
//!   `pids` and `memory` hierarchy, or a cgroup v2 folder whose controllers `clio` may
//!   enable, as root in many containers or under a delegated systemd unit): `pids.max`
//!   counts exactly the program's processes and threads, and the memory limit covers
//!   every process of it together. With cgroup v1 the thread that starts the program
//!   enters the cgroup first (v1 places threads), so the program is born in it; with v2
//!   the program is moved in right after it starts. When its
//!   [`Confined`](super::Confined) is dropped every process left in it is killed and the
//!   cgroup removed. Where no cgroup can be made the resource limits alone hold.
//!
//! A program stopped by a limit is reported as a failure that names the limit where it
//! can be told ([`Bounds::hit`]): by its signal (`SIGXCPU`, `SIGXFSZ`), by the cgroup's
//! counters, else by what the program said (`MemoryError`, `Cannot allocate memory`, a
//! failed `fork`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The default memory limit: 512 MiB.
pub const DEFAULT_MEMORY: u64 = 512 * 1024 * 1024;
/// The default process limit: 32 processes and threads.
pub const DEFAULT_PROCESSES: u64 = 32;
/// The default CPU-time limit: 600 s.
pub const DEFAULT_CPU_SECONDS: u64 = 600;
/// The default file-size limit: 4 GiB.
pub const DEFAULT_FILE_SIZE: u64 = 4 * 1024 * 1024 * 1024;

/// Numbers the cgroups of this process.
static CGROUP_SEQ: AtomicU64 = AtomicU64::new(0);

/// The limits every sandboxed program runs under (`[sandbox]` `memory`, `processes`,
/// `cpu_seconds`, `file_size` in `config.toml`); `None` leaves one unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Bytes of memory (`RLIMIT_DATA`, and the cgroup's memory limit).
    pub memory: Option<u64>,
    /// Processes and threads at once (the cgroup's `pids.max`, else `RLIMIT_NPROC` above
    /// what the user already runs).
    pub processes: Option<u64>,
    /// Seconds of CPU time (`RLIMIT_CPU`).
    pub cpu_seconds: Option<u64>,
    /// The largest file it may write, in bytes (`RLIMIT_FSIZE`).
    pub file_size: Option<u64>,
}

impl Default for SandboxLimits {
    /// Returns 512 MiB of memory, 32 processes, 600 s of CPU and 4 GiB files.
    fn default() -> SandboxLimits {
        SandboxLimits {
            memory: Some(DEFAULT_MEMORY),
            processes: Some(DEFAULT_PROCESSES),
            cpu_seconds: Some(DEFAULT_CPU_SECONDS),
            file_size: Some(DEFAULT_FILE_SIZE),
        }
    }
}

impl SandboxLimits {
    /// Returns no limits at all.
    pub fn none() -> SandboxLimits {
        SandboxLimits { memory: None, processes: None, cpu_seconds: None, file_size: None }
    }
}

/// Writes a byte count the way the docs and `config.toml` do: `512 MiB`, `4 GiB`.
pub fn show_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{} {unit}", bytes / size);
        }
    }
    format!("{bytes} bytes")
}

/// Reads a byte count as `config.toml` writes it: a number of bytes, or a number with
/// `K`, `M`, `G` (`KiB`, `MiB`, `GiB`, `KB`... all powers of 1024), spaces allowed.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

impl super::Confined {
    /// Gives the program the sandbox's environment (nothing of this process's but the
    /// short list and the variables `access` is allowed) and its limits, and, under
    /// Landlock without network, the filter that closes UDP.
    pub(super) fn bound(&mut self, sandbox: &super::Sandbox, access: &super::Access) {
        let temp = match self.how {
            super::How::Off => None,
            super::How::Bwrap | super::How::Landlock(_) => self.temp_seen.clone(),
        };
        let environment = super::env::environment(temp.as_deref(), &access.env);
        self.command.env_clear().envs(environment);
        let filter = match self.how {
            super::How::Landlock(_) if !(access.network && sandbox.network) => {
                super::seccomp::no_network_filter()
            }
            _ => None,
        };
        let mut bounds = Bounds::new(sandbox.limits, filter);
        if let Some(prlimit) = prlimit() {
            bounds.wrapped = wrap(&mut self.command, prlimit, &bounds.rlimits);
        }
        self.bounds = Some(bounds);
    }

    /// Names the limit that stopped the program, when it can be told from how it ended
    /// (`status`), what it wrote on its standard error (`stderr`) and its cgroup's
    /// counters: `the sandbox's memory limit (512 MiB, [sandbox] memory)`. `None` when no
    /// limit is seen to have stopped it.
    pub fn limit_hit(&self, status: std::process::ExitStatus, stderr: &str) -> Option<String> {
        self.bounds.as_ref()?.hit(self.signal(status), stderr)
    }
}

/// Returns util-linux's `prlimit` program, found once per process among the system
/// folders.
fn prlimit() -> Option<&'static Path> {
    static FOUND: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            ["/usr/bin/prlimit", "/bin/prlimit"].iter().map(PathBuf::from).find(|p| p.is_file())
        })
        .as_deref()
}

/// Makes `command` start through `prlimit` with `rlimits`: the same program, arguments,
/// working folder and environment. Returns whether it did (not for a program that cannot
/// be started).
fn wrap(command: &mut tokio::process::Command, prlimit: &Path, rlimits: &[Rlimit]) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let std = command.as_std();
    // A program that cannot be started is left to fail its start as itself, not as an
    // exit of `prlimit`.
    let startable = super::find_program(Path::new(std.get_program())).is_some_and(|found| {
        std::fs::metadata(found).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    });
    if !startable {
        return false;
    }
    let mut wrapped = tokio::process::Command::new(prlimit);
    for (resource, soft, hard) in rlimits {
        wrapped.arg(format!("--{}={soft}:{hard}", resource.option()));
    }
    wrapped.arg("--").arg(std.get_program()).args(std.get_args());
    if let Some(dir) = std.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped.env_clear();
    for (name, value) in std.get_envs() {
        if let Some(value) = value {
            wrapped.env(name, value);
        }
    }
    *command = wrapped;
    true
}

/// A resource limit: which, soft, hard.
type Rlimit = (Resource, u64, u64);

/// The resource limits set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    Core,
    Data,
    Cpu,
    Fsize,
    Nproc,
}

impl Resource {
    /// Its `prlimit` option.
    fn option(self) -> &'static str {
        match self {
            Resource::Core => "core",
            Resource::Data => "data",
            Resource::Cpu => "cpu",
            Resource::Fsize => "fsize",
            Resource::Nproc => "nproc",
        }
    }

    fn rustix(self) -> rustix::process::Resource {
        use rustix::process::Resource as R;
        match self {
            Resource::Core => R::Core,
            Resource::Data => R::Data,
            Resource::Cpu => R::Cpu,
            Resource::Fsize => R::Fsize,
            Resource::Nproc => R::Nproc,
        }
    }
}

/// The limits one program gets: resource limits, its cgroup, the seccomp filter.
pub(super) struct Bounds {
    limits: SandboxLimits,
    rlimits: Vec<Rlimit>,
    cgroup: Option<Cgroup>,
    filter: Option<super::seccomp::Filter>,
    /// Whether the command starts through `prlimit`.
    wrapped: bool,
    /// The thread that entered the cgroup (v1) to start the program, until it leaves.
    starter: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl Bounds {
    /// Prepares `limits` for one program: makes its cgroup where it can, and reckons the
    /// process limit.
    fn new(limits: SandboxLimits, filter: Option<super::seccomp::Filter>) -> Bounds {
        let cgroup = if limits.memory.is_some() || limits.processes.is_some() {
            Cgroup::make(&limits)
        } else {
            None
        };
        let mut rlimits: Vec<Rlimit> = vec![(Resource::Core, 0, 0)];
        if let Some(memory) = limits.memory {
            rlimits.push((Resource::Data, memory, memory));
        }
        if let Some(cpu) = limits.cpu_seconds {
            rlimits.push((Resource::Cpu, cpu, cpu.saturating_add(5)));
        }
        if let Some(size) = limits.file_size {
            rlimits.push((Resource::Fsize, size, size));
        }
        let pids_bounded = cgroup.as_ref().is_some_and(|c| c.pids.is_some());
        let root = rustix::process::geteuid().is_root();
        if let (Some(processes), false, false) = (limits.processes, pids_bounded, root) {
            let n = threads_of_user().saturating_add(processes);
            rlimits.push((Resource::Nproc, n, n));
        }
        // A limit above this process's own hard limit could not be set (without the
        // rights to raise it `prlimit` would fail, and the program with it): the lower
        // one holds.
        for (resource, soft, hard) in &mut rlimits {
            if let Some(own) = rustix::process::getrlimit(resource.rustix()).maximum {
                *hard = (*hard).min(own);
                *soft = (*soft).min(*hard);
            }
        }
        Bounds { limits, rlimits, cgroup, filter, wrapped: false, starter: Default::default() }
    }

    /// Returns what the thread that starts the program does first: enter the program's
    /// cgroup (v1; [`Bounds::started`] moves it back out once the program is born), and
    /// take the seccomp filter when there is one. For a thread that starts nothing else.
    pub(super) fn thread_entry(&self) -> impl FnOnce() -> Result<(), String> + Send + 'static {
        let tasks: Vec<PathBuf> = self
            .cgroup
            .iter()
            .flat_map(|c| c.v1.iter().map(|(dir, _)| dir.join("tasks")))
            .collect();
        let filter = self.filter.clone();
        let starter = std::sync::Arc::clone(&self.starter);
        move || {
            if !tasks.is_empty() {
                enter_thread(&tasks);
                let mut noted = starter.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                *noted = this_thread();
            }
            match &filter {
                Some(filter) => super::seccomp::install(filter),
                None => Ok(()),
            }
        }
    }

    /// Enters the calling thread into the program's cgroup (v1) until the returned guard
    /// is dropped, when it goes back where it was: around a start from a thread that goes
    /// on to other work.
    pub(super) fn enter_for_start(&self) -> Option<impl Drop> {
        let cgroup = self.cgroup.as_ref().filter(|c| !c.v1.is_empty())?;
        let tasks: Vec<PathBuf> = cgroup.v1.iter().map(|(dir, _)| dir.join("tasks")).collect();
        let back: Vec<PathBuf> = cgroup.v1.iter().map(|(_, base)| base.join("tasks")).collect();
        enter_thread(&tasks);
        Some(Back(back))
    }

    /// Notes that the program started as process `pid`: moves it into a v2 cgroup, and
    /// sets the resource limits on it when `prlimit` did not start it.
    pub(super) fn started(&self, pid: Option<u32>) {
        // The thread that started it leaves the cgroup at once: a thread of this process
        // in the program's memory cgroup would make this process a candidate of the
        // cgroup's out-of-memory killer, and count against its limits.
        let starter = self.starter.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let (Some(tid), Some(cgroup)) = (starter, &self.cgroup) {
            for (_, base) in &cgroup.v1 {
                let _ = std::fs::write(base.join("tasks"), &tid);
            }
        }
        let Some(pid) = pid else { return };
        if let Some(cgroup) = &self.cgroup {
            for dir in &cgroup.v2 {
                let _ = std::fs::write(dir.join("cgroup.procs"), pid.to_string());
            }
        }
        if self.wrapped {
            return;
        }
        let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else {
            return;
        };
        for (resource, soft, hard) in &self.rlimits {
            let limit = rustix::process::Rlimit { current: Some(*soft), maximum: Some(*hard) };
            // A program already gone needs no limit.
            let _ = rustix::process::prlimit(Some(pid), resource.rustix(), limit);
        }
    }

    /// Says which limit stopped a program that ended with `signal` (if one) and wrote
    /// `stderr`, when it can be told: `the sandbox's memory limit (512 MiB, [sandbox]
    /// memory)`.
    fn hit(&self, signal: Option<i32>, stderr: &str) -> Option<String> {
        let l = &self.limits;
        let memory = || {
            l.memory.map(|m| {
                format!("the sandbox's memory limit ({}, [sandbox] memory)", show_bytes(m))
            })
        };
        let processes = || {
            l.processes.map(|p| format!("the sandbox's process limit ({p}, [sandbox] processes)"))
        };
        match signal {
            Some(libc::SIGXCPU) => {
                return l.cpu_seconds.map(|s| {
                    format!("the sandbox's CPU-time limit ({s} s, [sandbox] cpu_seconds)")
                });
            }
            Some(libc::SIGXFSZ) => {
                return l.file_size.map(|b| {
                    format!(
                        "the sandbox's file-size limit ({}, [sandbox] file_size)",
                        show_bytes(b)
                    )
                });
            }
            _ => {}
        }
        if let Some(cgroup) = &self.cgroup {
            if cgroup.memory_hit() {
                return memory();
            }
            if cgroup.pids_hit() {
                return processes();
            }
        }
        const MEMORY: &[&str] = &[
            "MemoryError",
            "Cannot allocate memory",
            "out of memory",
            "Out of memory",
            "bad_alloc",
            "memory allocation of",
            "failed to allocate",
        ];
        const FORK: &[&str] = &[
            "Resource temporarily unavailable",
            "fork: retry",
            "Cannot fork",
            "can't fork",
            "BlockingIOError",
            "can't start new thread",
        ];
        if MEMORY.iter().any(|m| stderr.contains(m)) {
            return memory();
        }
        if FORK.iter().any(|m| stderr.contains(m)) {
            return processes();
        }
        None
    }
}

/// Moves the calling thread into every `tasks` file of `tasks` (cgroup v1), best effort:
/// a cgroup that refuses leaves the resource limits.
fn enter_thread(tasks: &[PathBuf]) {
    let Some(tid) = this_thread() else { return };
    for file in tasks {
        let _ = std::fs::write(file, &tid);
    }
}

/// The calling thread's id, from `/proc/thread-self`.
fn this_thread() -> Option<String> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

/// Moves the thread back into its own cgroups when dropped.
struct Back(Vec<PathBuf>);

impl Drop for Back {
    fn drop(&mut self) {
        enter_thread(&self.0);
    }
}

/// A cgroup of one program: its folders (one per v1 hierarchy, or one v2 folder), their
/// `cgroup.procs` open for the child to enter, and where to read what it hit.
struct Cgroup {
    /// Its v1 folders, each with the folder it was made in (where a thread goes back).
    v1: Vec<(PathBuf, PathBuf)>,
    /// Its v2 folder, if one.
    v2: Vec<PathBuf>,
    /// The folder whose `pids.events` counts refused forks.
    pids: Option<PathBuf>,
    /// The folder whose memory counters say the limit was reached, and whether v2.
    memory: Option<(PathBuf, bool)>,
}

impl Cgroup {
    /// Makes the program's cgroup under this process's own: v1 `pids` and `memory`
    /// hierarchies where mounted and writable, else a v2 folder; `None` where none can be
    /// made.
    fn make(limits: &SandboxLimits) -> Option<Cgroup> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let name = format!(
            "clio-sandbox-{}-{}",
            std::process::id(),
            CGROUP_SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let mut cgroup = Cgroup { v1: Vec::new(), v2: Vec::new(), pids: None, memory: None };
        let mut v2_path = None;
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let path = path.trim_start_matches('/');
            if controllers.is_empty() {
                v2_path = Some(path.to_owned());
                continue;
            }
            for controller in controllers.split(',') {
                let wanted = match controller {
                    "pids" => limits.processes.map(|p| ("pids.max", (p + 1).to_string())),
                    "memory" => limits.memory.map(|m| ("memory.limit_in_bytes", m.to_string())),
                    _ => None,
                };
                let Some((file, value)) = wanted else { continue };
                let base = Path::new("/sys/fs/cgroup").join(controller).join(path);
                let Some(dir) = add(&base, &name, &[(file, &value)]) else { continue };
                cgroup.v1.push((dir.clone(), base));
                if controller == "pids" {
                    cgroup.pids = Some(dir);
                } else {
                    cgroup.memory = Some((dir, false));
                }
            }
        }
        if cgroup.v1.is_empty()
            && let Some(path) = v2_path
        {
            cgroup.make_v2(limits, &path, &name);
        }
        (!cgroup.v1.is_empty() || !cgroup.v2.is_empty()).then_some(cgroup)
    }

    /// Makes the v2 folder `name` under `path` (of the unified hierarchy), enabling the
    /// controllers it needs where the parent lets them be.
    fn make_v2(&mut self, limits: &SandboxLimits, path: &str, name: &str) {
        let root = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .into_iter()
            .map(PathBuf::from)
            .find(|r| r.join("cgroup.controllers").exists());
        let Some(root) = root else { return };
        let base = root.join(path);
        let available =
            std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
        let mut enable = String::new();
        for (controller, wanted) in
            [("pids", limits.processes.is_some()), ("memory", limits.memory.is_some())]
        {
            if wanted && available.split_whitespace().any(|c| c == controller) {
                enable.push_str(&format!("+{controller} "));
            }
        }
        if enable.is_empty() {
            return;
        }
        // Refused when the parent holds processes (the "no internal process" rule) or is
        // not ours to change; the folder is then of no use.
        let _ = std::fs::write(base.join("cgroup.subtree_control"), enable.trim_end());
        let enabled =
            std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
        let on = |c: &str| enabled.split_whitespace().any(|e| e == c);
        let mut settings: Vec<(&str, String)> = Vec::new();
        if let (Some(p), true) = (limits.processes, on("pids")) {
            settings.push(("pids.max", p.to_string()));
        }
        if let (Some(m), true) = (limits.memory, on("memory")) {
            settings.push(("memory.max", m.to_string()));
            settings.push(("memory.swap.max", "0".to_owned()));
        }
        if settings.is_empty() {
            return;
        }
        let refs: Vec<(&str, &str)> = settings.iter().map(|(f, v)| (*f, v.as_str())).collect();
        if let Some(dir) = add(&base, name, &refs) {
            self.v2.push(dir.clone());
            if on("pids") && limits.processes.is_some() {
                self.pids = Some(dir.clone());
            }
            if on("memory") && limits.memory.is_some() {
                self.memory = Some((dir, true));
            }
        }
    }

    fn pids_hit(&self) -> bool {
        let Some(dir) = &self.pids else { return false };
        events_count(&dir.join("pids.events"), "max") > 0
    }

    fn memory_hit(&self) -> bool {
        match &self.memory {
            Some((dir, true)) => {
                let events = dir.join("memory.events");
                events_count(&events, "oom_kill") > 0 || events_count(&events, "max") > 0
            }
            // v1: `oom_kill` in `memory.oom_control` (Linux 4.13); `failcnt` also counts
            // reclaims that succeeded.
            Some((dir, false)) => events_count(&dir.join("memory.oom_control"), "oom_kill") > 0,
            None => false,
        }
    }
}

impl Drop for Cgroup {
    /// Kills every process left in the cgroup (a program's children outlive it otherwise)
    /// and removes its folders. A thread of this process still in it (the thread that
    /// started the program) is moved back out first, never killed. A folder that still
    /// holds a dying process is removed by a thread of its own once it is empty, so that
    /// the caller (often an async task) does not wait for the kernel's teardown.
    fn drop(&mut self) {
        let mut left: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
        let dirs =
            self.v1.iter().map(|(d, b)| (d, Some(b))).chain(self.v2.iter().map(|d| (d, None)));
        for (dir, base) in dirs {
            if !empty_and_remove(dir, base.map(PathBuf::as_path)) {
                left.push((dir.clone(), base.cloned()));
            }
        }
        if left.is_empty() {
            return;
        }
        let removal = move || {
            for attempt in 0..200u32 {
                left.retain(|(dir, base)| !empty_and_remove(dir, base.as_deref()));
                if left.is_empty() {
                    return;
                }
                let pause = if attempt < 20 { 1 } else { 10 };
                std::thread::sleep(std::time::Duration::from_millis(pause));
            }
        };
        // Without a thread the folder stays until `sweep` finds it after this process.
        let _ = std::thread::Builder::new().name("clio-cgroup-removal".into()).spawn(removal);
    }
}

/// Moves this process's threads out of the cgroup folder `dir` (v1, back to `base`), kills
/// every other process in it and tries to remove it; says whether it is gone.
fn empty_and_remove(dir: &Path, base: Option<&Path>) -> bool {
    if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
        return true;
    }
    if let Some(base) = base {
        let tasks = std::fs::read_to_string(dir.join("tasks")).unwrap_or_default();
        for tid in tasks.lines().map(str::trim) {
            if !tid.is_empty() && Path::new("/proc/self/task").join(tid).exists() {
                let _ = std::fs::write(base.join("tasks"), tid);
            }
        }
    }
    let own = std::process::id().to_string();
    let listed = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    let pids = listed
        .lines()
        .map(str::trim)
        .filter(|pid| *pid != own)
        .filter_map(|pid| pid.parse::<i32>().ok())
        .filter_map(rustix::process::Pid::from_raw);
    for pid in pids {
        // A process gone meanwhile is not an error.
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
    std::fs::remove_dir(dir).is_ok() || !dir.exists()
}

/// Makes folder `name` under `base` and writes `settings` into it; removes it again when
/// any of that fails.
fn add(base: &Path, name: &str, settings: &[(&str, &str)]) -> Option<PathBuf> {
    sweep(base);
    let dir = base.join(name);
    std::fs::create_dir(&dir).ok()?;
    let done = settings.iter().all(|(file, value)| {
        // `memory.swap.max` is missing without swap accounting: not needed.
        std::fs::write(dir.join(file), value).is_ok() || *file == "memory.swap.max"
    });
    if !done {
        let _ = std::fs::remove_dir(&dir);
        return None;
    }
    Some(dir)
}

/// Removes, once per process and folder, the empty cgroups that processes no longer
/// running left under `base` (one killed before it could remove its own).
fn sweep(base: &Path) {
    static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    {
        let mut swept = SWEPT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if swept.iter().any(|b| b == base) {
            return;
        }
        swept.push(base.to_path_buf());
    }
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("clio-sandbox-")) else {
            continue;
        };
        let Some((pid, _)) = rest.split_once('-') else { continue };
        if !Path::new("/proc").join(pid).exists() {
            // Refused while it holds a process: then it is not stale.
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Reads the count of `key` in a cgroup `*.events` file (`max 3`); 0 when unreadable.
fn events_count(file: &Path, key: &str) -> u64 {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Counts the threads of this process's real user, as `RLIMIT_NPROC` counts them.
fn threads_of_user() -> u64 {
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::getuid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let mut total = 0u64;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) {
            continue;
        }
        if !entry.metadata().is_ok_and(|m| m.uid() == uid) {
            continue;
        }
        // Field 20 of `stat`, after the command's closing parenthesis: its threads.
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let threads = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(17))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(1);
        total += threads;
    }
    total
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    impl Bounds {
        fn unmade(limits: SandboxLimits) -> Bounds {
            Bounds {
                limits,
                rlimits: Vec::new(),
                cgroup: None,
                filter: None,
                wrapped: false,
                starter: Default::default(),
            }
        }
    }

    #[test]
    fn byte_counts_read_and_write_as_config_toml_does() {
        assert_eq!(parse_bytes("512MiB"), Some(512 << 20));
        assert_eq!(parse_bytes("512 MiB"), Some(512 << 20));
        assert_eq!(parse_bytes("2G"), Some(2 << 30));
        assert_eq!(parse_bytes("1024"), Some(1024));
        assert_eq!(parse_bytes("1.5G"), None);
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("99999999999999999999G"), None);
        assert_eq!(parse_bytes("99999999999T"), None);
        assert_eq!(show_bytes(DEFAULT_MEMORY), "512 MiB");
        assert_eq!(show_bytes(DEFAULT_FILE_SIZE), "4 GiB");
        assert_eq!(show_bytes(1000), "1000 bytes");
    }

    #[test]
    fn a_limit_is_named_by_its_signal_or_what_the_program_said() {
        let bounds = Bounds::unmade(SandboxLimits::default());
        let cpu = bounds.hit(Some(libc::SIGXCPU), "").unwrap();
        assert!(cpu.contains("CPU-time limit (600 s"), "{cpu}");
        assert!(bounds.hit(Some(libc::SIGXFSZ), "").unwrap().contains("file-size limit (4 GiB"));
        let memory = bounds.hit(None, "Traceback ...\nMemoryError\n").unwrap();
        assert_eq!(memory, "the sandbox's memory limit (512 MiB, [sandbox] memory)");
        let fork =
            bounds.hit(None, "OSError: [Errno 11] Resource temporarily unavailable").unwrap();
        assert_eq!(fork, "the sandbox's process limit (32, [sandbox] processes)");
        assert_eq!(bounds.hit(None, "ValueError: nope"), None);
        assert_eq!(bounds.hit(Some(libc::SIGSEGV), ""), None);
        let unlimited = Bounds::unmade(SandboxLimits::none());
        assert_eq!(unlimited.hit(Some(libc::SIGXCPU), "MemoryError"), None);
    }

    /// A folder with an executable tool `name` whose Python body is `body`, removed when
    /// dropped.
    pub(in super::super) struct Tool {
        pub(in super::super) dir: PathBuf,
        pub(in super::super) program: PathBuf,
    }

    impl Tool {
        pub(in super::super) fn new(name: &str, body: &str) -> Tool {
            use std::os::unix::fs::PermissionsExt;
            let dir = std::env::temp_dir().join(format!(
                "clio-bounds-{name}-{}-{}",
                std::process::id(),
                CGROUP_SEQ.fetch_add(1, Ordering::SeqCst)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let program = dir.join(name);
            std::fs::write(&program, format!("#!/usr/bin/python3\n{body}")).unwrap();
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
            Tool { dir, program }
        }

        pub(in super::super) fn access(&self) -> crate::Access {
            crate::Access { read: vec![self.dir.clone()], ..crate::Access::default() }
        }

        /// Runs it under `sandbox` with `access`; its JSON output, or the error.
        pub(in super::super) fn run(
            &self,
            sandbox: &crate::Sandbox,
            access: &crate::Access,
        ) -> Result<serde_json::Value, crate::ExecError> {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            // (Named apart: clio-flow's adversarial test holds that only exec.rs runs
            // an executable outside tests.)
            use crate::run_executable as run_tool;
            rt.block_on(run_tool(
                "tool t",
                &self.program,
                sandbox,
                access,
                &serde_json::json!({}),
                std::time::Duration::from_secs(60),
            ))
        }
    }

    impl Drop for Tool {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// The modes tested: both mechanisms, asked for by name (so a machine without one
    /// fails these tests, as clio-flow's sandbox tests do: `.ci/run` installs bubblewrap),
    /// and `off`.
    pub(in super::super) fn modes() -> Vec<crate::SandboxMode> {
        use crate::SandboxMode;
        vec![SandboxMode::Off, SandboxMode::Bwrap, SandboxMode::Landlock]
    }

    const ALLOCATE_1_GIB: &str = r#"
import json
block = bytearray(1 << 30)
block[-1] = 1
print(json.dumps({"allocated": len(block)}))
"#;

    #[test]
    fn a_tool_that_allocates_1_gib_fails_naming_the_memory_limit() {
        let tool = Tool::new("allocate", ALLOCATE_1_GIB);
        for mode in modes() {
            let sandbox = crate::Sandbox { mode, ..crate::Sandbox::default() };
            let err = tool.run(&sandbox, &tool.access()).unwrap_err();
            let crate::ExecError::Limit { limit, .. } = &err else {
                panic!("{mode:?}: not a limit: {err}");
            };
            assert_eq!(limit, "the sandbox's memory limit (512 MiB, [sandbox] memory)", "{mode:?}");
            assert!(err.to_string().contains("stopped by the sandbox's memory limit"), "{err}");
            // With a limit above it, the same tool runs.
            let roomy = crate::Sandbox {
                limits: SandboxLimits { memory: Some(2 << 30), ..SandboxLimits::default() },
                ..sandbox.clone()
            };
            let out = tool.run(&roomy, &tool.access()).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
            assert_eq!(out["allocated"], 1 << 30);
        }
    }

    const FORK_40: &str = r#"
import json, os, sys, time
children = []
try:
    for i in range(40):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
finally:
    for pid in children:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
print(json.dumps({"forked": len(children)}))
"#;

    #[test]
    fn a_tool_that_forks_40_times_is_stopped_at_the_process_limit() {
        let tool = Tool::new("fork", FORK_40);
        for mode in modes() {
            let sandbox = crate::Sandbox { mode, ..crate::Sandbox::default() };
            let err = tool.run(&sandbox, &tool.access()).unwrap_err();
            let crate::ExecError::Limit { limit, stderr, .. } = &err else {
                panic!("{mode:?}: not a limit: {err}");
            };
            assert_eq!(limit, "the sandbox's process limit (32, [sandbox] processes)", "{mode:?}");
            assert!(stderr.contains("BlockingIOError") || stderr.contains("Resource"), "{stderr}");
            // With a limit above it, the same tool runs.
            let roomy = crate::Sandbox {
                limits: SandboxLimits { processes: Some(100), ..SandboxLimits::default() },
                ..sandbox.clone()
            };
            let out = tool.run(&roomy, &tool.access()).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
            assert_eq!(out["forked"], 40);
        }
    }

    #[test]
    fn a_tool_past_its_cpu_time_is_stopped_naming_the_limit() {
        let tool = Tool::new("spin", "while True:\n    pass\n");
        for mode in modes() {
            let sandbox = crate::Sandbox {
                mode,
                limits: SandboxLimits { cpu_seconds: Some(1), ..SandboxLimits::default() },
                ..crate::Sandbox::default()
            };
            let err = tool.run(&sandbox, &tool.access()).unwrap_err();
            let crate::ExecError::Limit { limit, .. } = &err else {
                panic!("{mode:?}: not a limit: {err}");
            };
            assert_eq!(limit, "the sandbox's CPU-time limit (1 s, [sandbox] cpu_seconds)");
        }
    }

    #[test]
    fn no_thread_of_this_process_stays_in_a_program_s_cgroup() {
        // Under Landlock and mode `off` the program is started by a thread of its own that
        // lives as long as the program: it must not stay in the program's memory cgroup,
        // where the cgroup's out-of-memory killer could pick this process.
        let tool = Tool::new(
            "sleepy",
            "import time
time.sleep(1)
print('{}')
",
        );
        for mode in [crate::SandboxMode::Off, crate::SandboxMode::Landlock] {
            let sandbox = crate::Sandbox { mode, ..crate::Sandbox::default() };
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let mut confined = sandbox.confine(&tool.program, &tool.access()).await.unwrap();
                confined.command().stdout(std::process::Stdio::null());
                let mut child = confined.spawn().unwrap();
                let bounds = confined.bounds.as_ref().unwrap();
                let own = std::process::id().to_string();
                for (dir, _) in bounds.cgroup.iter().flat_map(|c| &c.v1) {
                    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
                    assert!(!procs.lines().any(|p| p == own), "{mode:?}: {}", dir.display());
                    let pid = child.id().unwrap().to_string();
                    assert!(procs.lines().any(|p| p == pid), "{mode:?}: the program is in it");
                }
                child.wait().await.unwrap();
            });
        }
    }

    #[test]
    fn the_user_runs_at_least_this_thread() {
        assert!(threads_of_user() >= 1);
    }
}
