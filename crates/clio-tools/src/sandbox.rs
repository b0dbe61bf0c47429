//! The sandbox for code that runs on the person's machine: `run_code` scripts and the
//! executables plugins bring (tools and script bindings).
//!
//! A sandboxed program may write only to its workspace, to the folders its runner hands
//! it (a script's scratch folder) and to a private temporary folder; it may read only
//! those, the folders it is given to read (its plugin's folder, an interpreter installed
//! outside the system folders, the deployment's `read` list), the system's read-only
//! folders (`/usr`, `/bin`, `/sbin`, `/lib*`) and a short list of `/etc` files (the
//! linker's cache, certificates, time zone, users and groups, Python's configuration:
//! [`ETC`]); and it reaches no network unless it declares that it needs one *and* the
//! deployment allows it ([`Sandbox::network`]). So a script cannot read a secret beside the
//! workspace, nor run another plugin's executable by its path: neither exists for it.
//!
//! Two mechanisms, in the order [`SandboxMode::Auto`] tries them:
//! - bubblewrap (`bwrap`): the program runs in new namespaces (mount, pid, network, ipc,
//!   uts, and user where needed) with every capability dropped, over an empty root on
//!   which only what is granted is mounted. What is not granted does not exist; without
//!   network the program has only a loopback of its own. Its pid namespace also keeps it
//!   from signalling the person's other processes, clio included.
//! - Landlock: the kernel's access control, applied to a thread that does nothing but
//!   start the program, which inherits it; what is not granted is refused (`EACCES`). It
//!   denies TCP (Landlock ABI 4, Linux 6.7) but not UDP (a seccomp filter of ours closes
//!   that, `seccomp.rs`), and the program sees the real
//!   process table (signals out of the sandbox are refused from ABI 6), so it comes
//!   second.
//!
//! With neither, code is refused with an error that says how to install bubblewrap or how
//! to turn the sandbox off (`[sandbox] mode = "off"`, which the runtime records as a
//! `sandbox_off` event in every run; see `docs/run_code.md`).
//!
//! Every program starts from the sandbox's short environment, not this process's: `PATH`,
//! `HOME` and `TMPDIR` of its own, the locale, and only the variables the deployment allows
//! it by name ([`EnvRule`], `env.rs`); it runs under memory, process, CPU-time and
//! file-size limits ([`SandboxLimits`], `limits.rs`); and under Landlock without network a
//! seccomp filter refuses what Landlock does not rule, UDP first (`seccomp.rs`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Component, Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::AsyncReadExt;

mod env;
mod hidden;
mod kept;
mod lifetime;
mod limits;
mod seccomp;

pub use self::env::{EnvRule, is_env_name, is_locale};
pub use self::lifetime::{CALL_VAR, as_call, call_tag, kill_leftovers, run_prefix};
pub use self::limits::{
    DEFAULT_CPU_SECONDS, DEFAULT_FILE_SIZE, DEFAULT_MEMORY, DEFAULT_PROCESSES, SandboxLimits,
    parse_bytes, show_bytes,
};

/// The system folders every sandboxed program may read and run programs from.
const SYSTEM_DIRS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// The files and folders of `/etc` a program may read: what the dynamic linker, TLS,
/// time zones, user and group names (never `shadow`), MIME types and Debian's Python need.
/// Not the rest of `/etc` (`hostname`, `machine-id`, credentials some tools keep there).
pub const ETC: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/mime.types",
];

/// The files of `/etc` a program that may use the network also reads: name resolution.
pub const ETC_NETWORK: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
];

/// The devices a program under Landlock may read and write (bubblewrap gives its own
/// minimal `/dev`).
const DEVICES_RW: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// The devices a program under Landlock may read.
const DEVICES_READ: &[&str] = &["/dev/random", "/dev/urandom"];

/// The `PATH` of a program whose environment its runner rebuilt: inside the sandbox only
/// the system folders hold programs.
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Numbers private temporary folders within this process.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// What the probe of each bubblewrap program found, once per process: whether it works
/// is a fact of the machine, and the probe starts a process.
/// Each probe is one cell, filled by whichever caller gets there first: one started ahead
/// ([`Sandbox::probe_ahead`]) and one that needs its answer share the same run.
static BWRAP_PROBES: Mutex<BTreeMap<PathBuf, ProbeCell>> = Mutex::new(BTreeMap::new());

/// A probe's answer: `Ok(true)` for a pass believed from a kept file, `Ok(false)` for one
/// checked in this process.
type ProbeCell = std::sync::Arc<tokio::sync::OnceCell<Result<bool, BwrapTrouble>>>;

/// How code that runs on the person's machine is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// bubblewrap if it works here, else Landlock if the kernel has it, else refuse.
    #[default]
    Auto,
    /// bubblewrap only.
    Bwrap,
    /// The kernel's Landlock only.
    Landlock,
    /// No sandbox: code runs with the process's rights, and every run records a
    /// `sandbox_off` event.
    Off,
}

/// The deployment's sandbox policy: how code is confined and what every sandboxed
/// program may reach besides what its runner grants it ([`Access`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Which mechanism confines code.
    pub mode: SandboxMode,
    /// Whether code that declares it needs the network (a plugin tool's `network = true`)
    /// gets it; code that does not declare it never does.
    pub network: bool,
    /// Folders every sandboxed program may also read, such as an interpreter installed in
    /// the person's home; absolute paths (a missing one grants nothing).
    pub read: Vec<PathBuf>,
    /// The bubblewrap program: a path, or a name found on `PATH`.
    pub bwrap: PathBuf,
    /// The folder under which a program under Landlock gets its private temporary folder
    /// (bubblewrap mounts a fresh `/tmp` instead). The caller chooses it (the CLI passes
    /// the system's temporary folder).
    pub temp: PathBuf,
    /// A file that keeps a passed check of bubblewrap across processes, with the facts it
    /// depends on (the program, the kernel and its boot, this process's user and
    /// namespaces, the kernel's user-namespace settings); while they are unchanged, a
    /// process believes it instead of checking again, which starts a process of its own.
    /// `None` (the default): every process checks once.
    pub kept_check: Option<PathBuf>,
    /// The variables of `clio`'s environment each program may have (`[tools] env`);
    /// nothing else of it but the locale reaches a sandboxed program (see [`EnvRule`]).
    pub env: Vec<EnvRule>,
    /// The memory, process, CPU-time and file-size limits of every program ([`SandboxLimits`]).
    pub limits: SandboxLimits,
    /// Folders no sandboxed program may see, whatever it is granted: the CLI hides
    /// `$CLIO_HOME` (its journal, its control socket's key, its HTTP API's token). A grant
    /// that holds one is refused under Landlock and has it covered by an empty folder
    /// under bubblewrap; a file directly in one is never granted; a folder inside one may
    /// be (a plugin installed there). See `hidden.rs`.
    pub hidden: Vec<PathBuf>,
}

impl Default for Sandbox {
    /// Returns mode `auto`, no network, nothing more to read, `bwrap` from `PATH`, and
    /// private temporary folders under `/tmp`.
    fn default() -> Self {
        Sandbox {
            mode: SandboxMode::Auto,
            network: false,
            read: Vec::new(),
            bwrap: PathBuf::from("bwrap"),
            temp: PathBuf::from("/tmp"),
            kept_check: None,
            env: Vec::new(),
            limits: SandboxLimits::default(),
            hidden: Vec::new(),
        }
    }
}

/// What one sandboxed program may reach besides the system's read-only folders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// The workspace: read and written, and the program's working folder (without one,
    /// the program works in its private temporary folder).
    pub workspace: Option<PathBuf>,
    /// Folders and files it may read (and run programs from).
    pub read: Vec<PathBuf>,
    /// Folders it may read and write besides the workspace.
    pub write: Vec<PathBuf>,
    /// Whether it declares that it needs the network; it gets it only when the
    /// deployment allows it too.
    pub network: bool,
    /// The variables of `clio`'s environment it gets besides the sandbox's short list
    /// (their values are read when it starts): what the deployment allows it
    /// ([`Sandbox::env_for`]).
    pub env: Vec<String>,
}

/// Why code could not be confined, or its program not started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// Mode `bwrap`, and the bubblewrap program does not exist.
    #[error(
        "the sandbox needs bubblewrap and {} is not installed: install it (Debian, Ubuntu: \
         `sudo apt-get install bubblewrap`; Fedora: `sudo dnf install bubblewrap`), or set \
         `[sandbox] mode = \"landlock\"` (the kernel's Landlock) or `mode = \"off\"` (code runs \
         with your own rights, and every run records that) in $CLIO_HOME/config.toml",
        program.display()
    )]
    BwrapMissing {
        /// The program looked for.
        program: PathBuf,
    },
    /// Mode `bwrap`, and bubblewrap cannot make a sandbox on this machine (user
    /// namespaces disabled, a container without the rights, …).
    #[error(
        "bubblewrap ({}) cannot make a sandbox on this machine: {message}; allow unprivileged \
         user namespaces (for example `sysctl kernel.unprivileged_userns_clone=1`), or set \
         `[sandbox] mode = \"landlock\"` or `mode = \"off\"` in $CLIO_HOME/config.toml",
        program.display()
    )]
    BwrapBroken {
        /// The program.
        program: PathBuf,
        /// What bubblewrap said.
        message: String,
    },
    /// Mode `landlock`, and the kernel's Landlock cannot confine the code.
    #[error(
        "the kernel's Landlock cannot confine code here: {reason}; install bubblewrap (Debian, \
         Ubuntu: `sudo apt-get install bubblewrap`) and set `[sandbox] mode = \"bwrap\"`, or set \
         `mode = \"off\"` in $CLIO_HOME/config.toml (code then runs with your own rights)"
    )]
    LandlockUnavailable {
        /// Why.
        reason: String,
    },
    /// Mode `auto`, and neither mechanism works here.
    #[error(
        "no sandbox is available to run code: bubblewrap: {bwrap}; Landlock: {landlock}. \
         Install bubblewrap (Debian, Ubuntu: `sudo apt-get install bubblewrap`; Fedora: \
         `sudo dnf install bubblewrap`), or set `[sandbox] mode = \"off\"` in \
         $CLIO_HOME/config.toml to run code with your own rights (every run then records that \
         the sandbox was off)"
    )]
    Unavailable {
        /// Why bubblewrap did not do.
        bwrap: String,
        /// Why Landlock did not do.
        landlock: String,
    },
    /// The private temporary folder could not be made.
    #[error("cannot make the sandbox's private temporary folder {}: {source}", path.display())]
    TempDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The program did not start.
    #[error("cannot start {}: {source}", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl SandboxError {
    /// Says whether the error means no sandbox can be had (as opposed to a program that
    /// did not start): such a call is refused, not failed.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            SandboxError::BwrapMissing { .. }
                | SandboxError::BwrapBroken { .. }
                | SandboxError::LandlockUnavailable { .. }
                | SandboxError::Unavailable { .. }
        )
    }
}

/// Why a bubblewrap program did not do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum BwrapTrouble {
    /// It does not exist.
    Missing,
    /// It exists and cannot make a sandbox; what it said.
    Broken(String),
}

impl BwrapTrouble {
    fn into_error(self, program: &Path) -> SandboxError {
        match self {
            BwrapTrouble::Missing => SandboxError::BwrapMissing { program: program.to_path_buf() },
            BwrapTrouble::Broken(message) => {
                SandboxError::BwrapBroken { program: program.to_path_buf(), message }
            }
        }
    }

    fn describe(&self, program: &Path) -> String {
        match self {
            BwrapTrouble::Missing => format!("{} is not installed", program.display()),
            BwrapTrouble::Broken(message) => {
                format!("{} cannot make a sandbox here ({message})", program.display())
            }
        }
    }
}

/// How a [`Confined`] program is confined.
enum How {
    Bwrap,
    /// The ruleset, until the program is started.
    Landlock(Option<LandlockRules>),
    Off,
}

/// A private temporary folder, removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        // A folder left behind holds only what the program wrote there; nothing reads it.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A program ready to start inside the sandbox. Set its arguments, environment and pipes
/// on [`command`](Confined::command), start it with [`spawn`](Confined::spawn), and keep
/// the `Confined` until the program has ended: it owns the program's private temporary
/// folder.
pub struct Confined {
    /// What kills its processes when it is dropped; first, so that it is dropped first.
    lifetime: lifetime::Lifetime,
    command: tokio::process::Command,
    program: PathBuf,
    how: How,
    /// Held for its removal when the program is done with it.
    _temp: Option<TempDir>,
    temp_seen: Option<PathBuf>,
    /// The file a kept pass of bubblewrap's check was believed from, if one was.
    believed: Option<PathBuf>,
    /// The limits the program runs under, and its cgroup (removed when dropped).
    bounds: Option<limits::Bounds>,
}

impl std::fmt::Debug for Confined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confined")
            .field("program", &self.program)
            .field("mode", &self.mode())
            .field("temp", &self.temp_seen)
            .finish()
    }
}

impl Confined {
    /// Returns the command to add the program's arguments, environment and pipes to
    /// (its program and working folder are set).
    pub fn command(&mut self) -> &mut tokio::process::Command {
        &mut self.command
    }

    /// Returns the mechanism that confines the program: `Bwrap`, `Landlock` or `Off`.
    pub fn mode(&self) -> SandboxMode {
        match self.how {
            How::Bwrap => SandboxMode::Bwrap,
            How::Landlock(_) => SandboxMode::Landlock,
            How::Off => SandboxMode::Off,
        }
    }

    /// Tells the sandbox how the program ended, by the start of its standard error: when
    /// bubblewrap itself could not make the sandbox (it says `bwrap: ...` and exits before
    /// the program runs) while this process believed a kept pass of its check, the kept
    /// pass is dropped, so that the next process checks again (and `auto` falls back to
    /// Landlock there if bubblewrap no longer works). Returns whether it was dropped.
    pub fn ended_with(&self, stderr: &str) -> bool {
        let Some(kept) = &self.believed else { return false };
        if !matches!(self.how, How::Bwrap) || !stderr.trim_start().starts_with("bwrap:") {
            return false;
        }
        kept::forget(kept);
        true
    }

    /// Returns the program's private temporary folder as the program sees it (`TMPDIR` is
    /// set to it); `None` without a sandbox.
    pub fn temp_dir(&self) -> Option<&Path> {
        self.temp_seen.as_deref()
    }

    /// Starts the program, as the leader of a process group of its own, which ends with the
    /// `Confined` (see the `lifetime` module). Under Landlock and with mode `off` it is
    /// started from a thread of its own, which takes the restrictions first (Landlock's
    /// reach only the program, nothing else of this process) and lives until the
    /// `Confined` is dropped: the program dies with it.
    ///
    /// Needs a tokio runtime, as `tokio::process::Command::spawn` does.
    pub fn spawn(&mut self) -> Result<tokio::process::Child, SandboxError> {
        let program = self.program.clone();
        let spawn_error = move |source| SandboxError::Spawn { program: program.clone(), source };
        let bwrap = matches!(self.how, How::Bwrap);
        let rules = match &mut self.how {
            How::Landlock(rules) => {
                Some(rules.take().ok_or_else(|| SandboxError::LandlockUnavailable {
                    reason: "its program was started already".into(),
                })?)
            }
            How::Bwrap | How::Off => None,
        };
        // Under bubblewrap too: its namespace ends with it, but not before the call returns.
        self.lifetime.prepare(&mut self.command, true);
        if bwrap {
            // In the program's cgroup (v1) while it starts, so that it is born there.
            let entered = self.bounds.as_ref().and_then(limits::Bounds::enter_for_start);
            let child = self.command.spawn().map_err(spawn_error);
            drop(entered);
            let child = child?;
            self.lifetime.started(child.id(), None);
            if let Some(bounds) = &self.bounds {
                bounds.started(child.id());
            }
            return Ok(child);
        }
        let entry = self.bounds.as_ref().map(limits::Bounds::thread_entry);
        let restrict = move || {
            if let Some(entry) = entry {
                entry().map_err(|reason| SandboxError::LandlockUnavailable { reason })?;
            }
            rules.map_or(Ok(()), LandlockRules::restrict_this_thread)
        };
        let child = lifetime::spawn_kept(
            &mut self.command,
            Some(restrict),
            spawn_error,
            &mut self.lifetime,
        )?;
        if let Some(bounds) = &self.bounds {
            bounds.started(child.id());
        }
        Ok(child)
    }

    /// Kills every process of the program now, as dropping the `Confined` does: its process
    /// group, and every process that carries its marker, `setsid` daemons included (see the `lifetime` module).
    pub fn end(&mut self) {
        self.lifetime.end();
    }

    /// Returns the signal that ended the program, if one did. bubblewrap cannot pass a
    /// signal on and exits with 128 + its number instead, so under bubblewrap such an exit
    /// code also counts as that signal; a caller that can tell a real exit code from it
    /// (`run_code`'s report of how the script ended) should ask that first.
    pub fn signal(&self, status: ExitStatus) -> Option<i32> {
        if let Some(signal) = status.signal() {
            return Some(signal);
        }
        match (&self.how, status.code()) {
            (How::Bwrap, Some(code)) if (129..=128 + 64).contains(&code) => Some(code - 128),
            _ => None,
        }
    }
}

impl Sandbox {
    /// Returns the sandbox policy that confines nothing (mode `off`).
    pub fn off() -> Sandbox {
        Sandbox { mode: SandboxMode::Off, ..Sandbox::default() }
    }

    /// Starts the check of bubblewrap that confining a program under this policy makes
    /// (once per process), without waiting for it: a command that will start confined
    /// programs calls it first, so that the check (a process of its own, about 4 ms) runs
    /// while the command opens its journal and reads its plugins. Does nothing outside a
    /// tokio runtime, or when the mode does not use bubblewrap.
    pub fn probe_ahead(&self) {
        if !matches!(self.mode, SandboxMode::Bwrap | SandboxMode::Auto) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (bwrap, kept) = (self.bwrap.clone(), self.kept_check.clone());
        // Its answer is kept for `confine`; an error is reported there, when it matters.
        runtime.spawn(async move {
            let _ = probe_bwrap(&bwrap, kept.as_deref()).await;
        });
    }

    /// Prepares `program` to run under this policy with `access`: finds the mechanism
    /// the mode asks for (probing bubblewrap once per process), and builds the command,
    /// with the sandbox's environment (`PATH`, `HOME`, `TMPDIR`, the locale and the
    /// variables `access` is allowed; nothing else of this process's), its [`SandboxLimits`]
    /// and, under Landlock without network, the filter that closes UDP.
    pub async fn confine(&self, program: &Path, access: &Access) -> Result<Confined, SandboxError> {
        let mut confined = self.confine_by_mode(program, access).await?;
        confined.bound(self, access);
        Ok(confined)
    }

    /// Returns the variables of `clio`'s environment that the deployment allows program
    /// `name` of plugin `plugin` (a tool's name; `mcp:<server>` for an MCP server,
    /// `binding:<name>` for a script binding), from [`Sandbox::env`].
    pub fn env_for(&self, plugin: &str, name: &str) -> Vec<String> {
        env::allowed(&self.env, plugin, name)
    }

    async fn confine_by_mode(
        &self,
        program: &Path,
        access: &Access,
    ) -> Result<Confined, SandboxError> {
        let network = access.network && self.network;
        let grants = || Grants::new(self, access, network);
        let landlock = |grants: &Grants| self.landlock_command(program, grants, network);
        match self.mode {
            SandboxMode::Off => Ok(Self::unconfined(program, access)),
            SandboxMode::Bwrap => {
                let believed = probe_bwrap(&self.bwrap, self.kept_check.as_deref())
                    .await
                    .map_err(|t| t.into_error(&self.bwrap))?;
                Ok(self.bwrap_command(program, &grants(), network, believed))
            }
            SandboxMode::Landlock => landlock(&grants()).map_err(|trouble| match trouble {
                Trouble::Landlock(reason) => SandboxError::LandlockUnavailable { reason },
                Trouble::Other(err) => err,
            }),
            SandboxMode::Auto => {
                let bwrap = match probe_bwrap(&self.bwrap, self.kept_check.as_deref()).await {
                    Ok(believed) => {
                        return Ok(self.bwrap_command(program, &grants(), network, believed));
                    }
                    Err(trouble) => trouble.describe(&self.bwrap),
                };
                landlock(&grants()).map_err(|trouble| match trouble {
                    Trouble::Landlock(landlock) => SandboxError::Unavailable { bwrap, landlock },
                    Trouble::Other(err) => err,
                })
            }
        }
    }

    fn unconfined(program: &Path, access: &Access) -> Confined {
        let mut command = lifetime::command(program);
        if let Some(workspace) = &access.workspace {
            command.current_dir(workspace);
        }
        Confined {
            lifetime: lifetime::Lifetime::default(),
            command,
            program: program.to_path_buf(),
            how: How::Off,
            _temp: None,
            temp_seen: None,
            believed: None,
            bounds: None,
        }
    }

    /// Builds the bubblewrap command line: an empty root with the system folders and the
    /// `/etc` files read-only, a fresh `/dev`, `/proc` and `/tmp`, then the granted
    /// folders, a mount over its parent always coming after the parent's own.
    fn bwrap_command(
        &self,
        program: &Path,
        grants: &Grants,
        network: bool,
        believed: bool,
    ) -> Confined {
        let mut args: Vec<OsString> =
            ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
                .iter()
                .map(OsString::from)
                .collect();
        if network {
            args.push("--share-net".into());
        }
        // (depth, order, arguments): sorted by depth, in order within one depth.
        let mut mounts: Vec<(usize, usize, Vec<OsString>)> = Vec::new();
        let mut add = |path: &Path, parts: Vec<OsString>| {
            let order = mounts.len();
            mounts.push((depth(path), order, parts));
        };
        for dir in SYSTEM_DIRS {
            let dir = Path::new(dir);
            match std::fs::symlink_metadata(dir) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    if let Ok(target) = std::fs::read_link(dir) {
                        add(dir, vec!["--symlink".into(), target.into(), dir.into()]);
                    }
                }
                Ok(meta) if meta.is_dir() => {
                    add(dir, vec!["--ro-bind".into(), dir.into(), dir.into()]);
                }
                _ => {}
            }
        }
        add(Path::new("/dev"), vec!["--dev".into(), "/dev".into()]);
        add(Path::new("/proc"), vec!["--proc".into(), "/proc".into()]);
        add(Path::new("/tmp"), vec!["--tmpfs".into(), "/tmp".into()]);
        for path in &grants.read {
            add(path, vec!["--ro-bind-try".into(), path.into(), path.into()]);
        }
        for path in &grants.write {
            add(path, vec!["--bind".into(), path.into(), path.into()]);
        }
        // A hidden folder a grant holds is covered after it (folders inside it that are
        // granted come later still, being deeper).
        for (_, hidden) in grants.held(&[]) {
            add(hidden, vec!["--tmpfs".into(), hidden.into()]);
        }
        mounts.sort_by_key(|(depth, order, _)| (*depth, *order));
        args.extend(mounts.into_iter().flat_map(|(_, _, parts)| parts));
        let temp = PathBuf::from("/tmp");
        let cwd = grants.workspace.clone().unwrap_or_else(|| temp.clone());
        args.extend(["--chdir".into(), cwd.into_os_string(), "--".into()]);
        args.push(program.into());
        let mut command = tokio::process::Command::new(&self.bwrap);
        command.args(args).env("TMPDIR", &temp);
        Confined {
            lifetime: lifetime::Lifetime::default(),
            command,
            program: program.to_path_buf(),
            how: How::Bwrap,
            _temp: None,
            temp_seen: Some(temp),
            believed: self.kept_check.clone().filter(|_| believed),
            bounds: None,
        }
    }

    fn landlock_command(
        &self,
        program: &Path,
        grants: &Grants,
        network: bool,
    ) -> Result<Confined, Trouble> {
        let system: Vec<PathBuf> = SYSTEM_DIRS.iter().map(PathBuf::from).collect();
        if let Some((grant, hidden)) = grants.held(&system).first() {
            return Err(Trouble::Landlock(format!(
                "{} would be granted, and it is or holds {}, which no sandboxed program may see \
                 (Landlock cannot take back a folder inside one it grants); choose a \
                 workspace and `read` folders that do not hold it",
                grant.display(),
                hidden.display()
            )));
        }
        let temp = private_temp(&self.temp).map_err(Trouble::Other)?;
        let mut read = grants.read.clone();
        read.extend(SYSTEM_DIRS.iter().map(PathBuf::from));
        read.extend(DEVICES_READ.iter().map(PathBuf::from));
        let mut write = grants.write.clone();
        write.extend(DEVICES_RW.iter().map(PathBuf::from));
        write.push(temp.0.clone());
        let rules = LandlockRules::new(&read, &write, network).map_err(Trouble::Landlock)?;
        let mut command = lifetime::command(program);
        command.current_dir(grants.workspace.as_deref().unwrap_or(&temp.0)).env("TMPDIR", &temp.0);
        let seen = temp.0.clone();
        Ok(Confined {
            lifetime: lifetime::Lifetime::default(),
            command,
            program: program.to_path_buf(),
            how: How::Landlock(Some(rules)),
            _temp: Some(temp),
            temp_seen: Some(seen),
            believed: None,
            bounds: None,
        })
    }
}

/// Why Landlock did not do: the kernel's answer, or a failure of our own.
enum Trouble {
    Landlock(String),
    Other(SandboxError),
}

/// The absolute paths a program is granted, beside the system's folders.
struct Grants {
    workspace: Option<PathBuf>,
    /// Read-only: the `/etc` list, the deployment's and the runner's.
    read: Vec<PathBuf>,
    /// Read-write: the workspace and the runner's.
    write: Vec<PathBuf>,
    /// The sandbox's hidden folders, resolved.
    hidden: Vec<PathBuf>,
}

impl Grants {
    fn new(sandbox: &Sandbox, access: &Access, network: bool) -> Grants {
        let workspace = access.workspace.as_deref().map(absolute);
        let mut read: Vec<PathBuf> = ETC.iter().map(PathBuf::from).collect();
        read.extend(python_etc());
        if network {
            read.extend(ETC_NETWORK.iter().map(PathBuf::from));
        }
        read.retain(|p| p.exists());
        read.extend(sandbox.read.iter().chain(&access.read).map(|p| absolute(p)));
        let mut write: Vec<PathBuf> = workspace.iter().cloned().collect();
        write.extend(access.write.iter().map(|p| absolute(p)));
        let hidden = hidden::folders(&sandbox.hidden);
        read.retain(|p| !hidden::is_own_file(p, &hidden));
        write.retain(|p| !hidden::is_own_file(p, &hidden));
        Grants { workspace, read, write, hidden }
    }

    /// Returns the hidden folders a grant holds, each once, with the first such grant.
    fn held<'g>(&'g self, more: &'g [PathBuf]) -> Vec<(&'g Path, &'g PathBuf)> {
        let mut held: Vec<(&Path, &PathBuf)> = Vec::new();
        for grant in self.read.iter().chain(&self.write).chain(more) {
            if let Some(h) = hidden::held_by(grant, &self.hidden)
                && !held.iter().any(|(_, seen)| *seen == h)
            {
                held.push((grant, h));
            }
        }
        held
    }
}

/// Returns Debian's Python configuration folders (`/etc/python3`, `/etc/python3.11`):
/// its standard library links files there.
fn python_etc() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/etc") else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("python3")))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// Returns `path` made absolute against the current folder (lexically: symbolic links
/// are left for the kernel to follow, so the program sees the path it was given).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Returns how many named components `path` has: a mount must come after the mounts of
/// the folders above it.
fn depth(path: &Path) -> usize {
    path.components().filter(|c| matches!(c, Component::Normal(_))).count()
}

/// Makes a private temporary folder under `base`, readable by its owner only.
fn private_temp(base: &Path) -> Result<TempDir, SandboxError> {
    use std::os::unix::fs::DirBuilderExt;
    loop {
        let n = TEMP_SEQ.fetch_add(1, Ordering::SeqCst);
        let path = base.join(format!("clio-sandbox-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(TempDir(path)),
            // Left by an earlier process with this id: take the next number.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(SandboxError::TempDir { path, source }),
        }
    }
}

/// Checks once per process that `program` can make the sandbox we ask of it: the same
/// namespaces, `/dev`, `/proc` and `/tmp`, running bubblewrap's own `--version` inside;
/// or believes a pass that `kept` holds from an earlier process on the same facts.
async fn probe_bwrap(program: &Path, kept: Option<&Path>) -> Result<bool, BwrapTrouble> {
    let cell = std::sync::Arc::clone(
        BWRAP_PROBES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(program.to_path_buf())
            .or_default(),
    );
    cell.get_or_init(|| probe_or_believe(program, kept)).await.clone()
}

/// Runs the check of `program`, unless `kept` holds a pass on the same facts (then
/// `Ok(true)`); keeps a new pass there.
async fn probe_or_believe(program: &Path, kept: Option<&Path>) -> Result<bool, BwrapTrouble> {
    let checked = |answer: Result<(), BwrapTrouble>| answer.map(|()| false);
    let Some(kept) = kept else { return checked(run_probe(program).await) };
    let Some(facts) = kept::facts(program, &probe_args(program)) else {
        return checked(run_probe(program).await);
    };
    if kept::passed_before(kept, &facts) {
        return Ok(true);
    }
    let answer = run_probe(program).await;
    if answer.is_ok() {
        kept::keep(kept, &facts);
    }
    checked(answer)
}

/// The arguments of the check of `program`: the namespaces, `/dev`, `/proc` and `/tmp` a
/// sandbox uses, running bubblewrap's own `--version` inside.
fn probe_args(program: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    args.push(program.into());
    args.push("--version".into());
    args
}

async fn run_probe(program: &Path) -> Result<(), BwrapTrouble> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(probe_args(program))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BwrapTrouble::Missing),
        Err(e) => return Err(BwrapTrouble::Broken(e.to_string())),
    };
    let mut said = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        // What it says is only for the message; a failed read leaves it short.
        let _ = stderr.take(4096).read_to_end(&mut said).await;
    }
    match child.wait().await {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => {
            let said = String::from_utf8_lossy(&said).trim().to_owned();
            Err(BwrapTrouble::Broken(if said.is_empty() { status.to_string() } else { said }))
        }
        Err(e) => Err(BwrapTrouble::Broken(e.to_string())),
    }
}

/// A Landlock ruleset ready to be applied to the thread that starts a program.
#[cfg(target_os = "linux")]
struct LandlockRules(landlock::RulesetCreated);

#[cfg(target_os = "linux")]
impl LandlockRules {
    /// Builds the ruleset: `read` read-only (and executable), `write` read-write, and no
    /// TCP unless `network`. File confinement (ABI 1) and, without network, TCP denial
    /// (ABI 4) are required; the rest of what the kernel offers (truncation, device
    /// ioctls, no signals or abstract sockets out of the sandbox) is taken when present.
    fn new(read: &[PathBuf], write: &[PathBuf], network: bool) -> Result<LandlockRules, String> {
        use landlock::{
            ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
            RulesetCreatedAttr, Scope, path_beneath_rules,
        };
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1))
            .map_err(|e| format!("the kernel has no Landlock ({e})"))?;
        if !network {
            ruleset = ruleset.handle_access(AccessNet::from_all(ABI::V4)).map_err(|e| {
                format!("the kernel's Landlock cannot deny the network (it needs Linux 6.7: {e})")
            })?;
        }
        let created = ruleset
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(ABI::V5))
            .and_then(|r| r.scope(Scope::from_all(ABI::V6)))
            .and_then(Ruleset::create)
            .and_then(|r| r.add_rules(path_beneath_rules(read, AccessFs::from_read(ABI::V5))))
            .and_then(|r| r.add_rules(path_beneath_rules(write, AccessFs::from_all(ABI::V5))))
            .map_err(|e| format!("cannot build the Landlock ruleset: {e}"))?;
        Ok(LandlockRules(created))
    }

    /// Applies the ruleset to the calling thread (and so to what it starts after).
    fn restrict_this_thread(self) -> Result<(), SandboxError> {
        let unavailable = |reason: String| SandboxError::LandlockUnavailable { reason };
        let status = self
            .0
            .restrict_self()
            .map_err(|e| unavailable(format!("cannot apply the Landlock ruleset: {e}")))?;
        if status.ruleset == landlock::RulesetStatus::NotEnforced {
            return Err(unavailable("the kernel did not enforce the Landlock ruleset".into()));
        }
        Ok(())
    }
}

/// Landlock exists only on Linux.
#[cfg(not(target_os = "linux"))]
struct LandlockRules;

#[cfg(not(target_os = "linux"))]
impl LandlockRules {
    fn new(_read: &[PathBuf], _write: &[PathBuf], _network: bool) -> Result<LandlockRules, String> {
        Err("Landlock is a Linux facility".into())
    }

    fn restrict_this_thread(self) -> Result<(), SandboxError> {
        Err(SandboxError::LandlockUnavailable { reason: "Landlock is a Linux facility".into() })
    }
}

/// Returns the folders a program installed outside the system folders needs to run: the
/// installation prefix of its path (`/opt/py` for `/opt/py/bin/python3`) and of its real
/// path when that differs (a virtual environment's interpreter links to its base). A
/// program named without a folder is looked up on `PATH` first, as starting it would.
pub fn program_prefixes(program: &Path) -> Vec<PathBuf> {
    let Some(found) = find_program(program) else { return Vec::new() };
    let mut out = Vec::new();
    for path in [Some(found.clone()), std::fs::canonicalize(&found).ok()].into_iter().flatten() {
        let Some(prefix) = path.parent().and_then(Path::parent) else { continue };
        let system = SYSTEM_DIRS.iter().any(|d| prefix.starts_with(d));
        if prefix != Path::new("/") && !system && !out.contains(&prefix.to_path_buf()) {
            out.push(prefix.to_path_buf());
        }
    }
    out
}

/// Returns the path `program` starts from: itself when it names a folder, else the first
/// executable file of that name on `PATH`.
pub fn find_program(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.components().count() > 1 {
        return Some(absolute(program));
    }
    // Starting a program named without a folder searches `PATH` too; this finds the same.
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_started_ahead_is_the_one_confining_waits_for() {
        // A stand-in for bubblewrap that notes each time it runs: the probe started ahead
        // and the two programs confined after it share one run of it.
        let dir = std::env::temp_dir().join(format!("clio-probe-ahead-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (fake, runs) = (dir.join("bwrap"), dir.join("runs"));
        std::fs::write(&fake, format!("#!/bin/sh\necho run >> {}\n", runs.display())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let sandbox = Sandbox { mode: SandboxMode::Bwrap, bwrap: fake, ..Sandbox::default() };
        // Outside a runtime it does nothing, and does not panic.
        sandbox.probe_ahead();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            sandbox.probe_ahead();
            for _ in 0..2 {
                let confined = sandbox.confine(Path::new("/bin/true"), &Access::default()).await;
                assert!(confined.is_ok(), "{:?}", confined.err());
            }
        });
        let noted = std::fs::read_to_string(&runs).unwrap_or_default();
        assert_eq!(noted.lines().count(), 1, "the probe ran once: {noted:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_kept_pass_spares_the_next_process_its_check_and_a_failure_is_not_kept() {
        // Each call of `probe_or_believe` stands for a new process (the per-process memo is
        // around it): the first checks and keeps its pass, the next believes it.
        let dir = std::env::temp_dir().join(format!("clio-kept-probe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let runs = dir.join("runs");
        let fake = |name: &str, exit: u8| {
            let fake = dir.join(name);
            let script = format!("#!/bin/sh\necho {name} >> {}\nexit {exit}\n", runs.display());
            std::fs::write(&fake, script).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
            fake
        };
        let (works, broken) = (fake("works", 0), fake("broken", 1));
        let kept = dir.join("kept/sandbox-check.json");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let noted = || std::fs::read_to_string(&runs).unwrap_or_default();
        rt.block_on(async {
            assert_eq!(probe_or_believe(&works, Some(&kept)).await, Ok(false), "checked");
            for _ in 0..2 {
                assert_eq!(probe_or_believe(&works, Some(&kept)).await, Ok(true), "believed");
            }
            assert_eq!(noted(), "works\n", "checked once, then believed");
            // Without a file to keep it in, every process checks.
            assert_eq!(probe_or_believe(&works, None).await, Ok(false));
            assert_eq!(noted(), "works\nworks\n");
            // A failing check is not kept: it runs again, and the pass of another program
            // is not its answer.
            for _ in 0..2 {
                let answer = probe_or_believe(&broken, Some(&kept)).await;
                assert!(matches!(answer, Err(BwrapTrouble::Broken(_))), "{answer:?}");
            }
            assert_eq!(noted(), "works\nworks\nbroken\nbroken\n");
            // A missing program is missing, whatever is kept.
            let missing = probe_or_believe(&dir.join("absent"), Some(&kept)).await;
            assert_eq!(missing, Err(BwrapTrouble::Missing));
            // A program confined on a believed pass that ends with bubblewrap's own
            // complaint drops the pass, so the next process checks again; any other end
            // keeps it.
            let sandbox = Sandbox {
                mode: SandboxMode::Bwrap,
                bwrap: works.clone(),
                kept_check: Some(kept.clone()),
                ..Sandbox::default()
            };
            let confined = sandbox.bwrap_command(
                Path::new("/bin/true"),
                &Grants::new(&sandbox, &Access::default(), false),
                false,
                true,
            );
            assert!(!confined.ended_with("Traceback (most recent call last):"));
            assert!(kept.exists());
            assert!(confined.ended_with("bwrap: setting up uid map: Permission denied"));
            assert!(!kept.exists(), "the pass was dropped");
            assert_eq!(probe_or_believe(&works, Some(&kept)).await, Ok(false), "checked again");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn deeper_mounts_come_later() {
        assert_eq!(depth(Path::new("/")), 0);
        assert_eq!(depth(Path::new("/tmp")), 1);
        assert_eq!(depth(Path::new("/tmp/a/b")), 3);
    }

    #[test]
    fn a_system_interpreter_needs_no_prefix() {
        assert_eq!(program_prefixes(Path::new("/usr/bin/python3")), Vec::<PathBuf>::new());
        assert_eq!(
            program_prefixes(Path::new("/definitely/not/here/bin/python3")),
            vec![PathBuf::from("/definitely/not/here")]
        );
    }
}
