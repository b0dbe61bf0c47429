//! The answer of bubblewrap's check, kept in a file across processes
//! ([`Sandbox::kept_check`](super::Sandbox::kept_check)).
//!
//! The check starts bubblewrap in the namespaces a sandbox uses, which costs a process and
//! a few milliseconds of the kernel's time; a command line tool that confines a program
//! in every invocation would pay it every time, for an answer that rarely changes. A check
//! that passed is kept together with the facts it depends on, and believed again only
//! while every one of them is unchanged:
//! - the check itself: the bubblewrap program's resolved path, device, inode, size and
//!   change times (a reinstall or an edit changes them), the check's arguments and the
//!   version of this crate;
//! - the kernel: its release and its boot (a reboot may change its settings);
//! - the process: its user; its user, mount, pid and network namespaces (another
//!   container, or a sandbox inside a sandbox, has others); what confines it (its seccomp
//!   mode, `no_new_privs`, its capability bounding set, its AppArmor or SELinux label: a
//!   service or a snap that forbids namespaces keeps the namespaces of the shell);
//! - the kernel's settings for unprivileged user namespaces
//!   (`kernel.unprivileged_userns_clone`, `user.max_user_namespaces`, AppArmor's
//!   `kernel.apparmor_restrict_unprivileged_userns`).
//!
//! Only a pass is kept: a failing check runs again each time (it is quick to fail), so
//! installing bubblewrap or allowing user namespaces takes effect at once. The file is
//! written whole under a fresh temporary name (created new, readable by its owner only)
//! and renamed; a file that is missing, not a regular file, larger than a kept answer can
//! be, or not what this module writes only means the check runs again. Keeping it cannot
//! weaken the sandbox: a program is still started under bubblewrap. A kept pass that is
//! wrong all the same (something the facts do not cover changed) makes that start fail
//! with bubblewrap's own message; [`Confined::ended_with`](super::Confined::ended_with)
//! then drops it, so that the next process checks again (and `auto` falls back to
//! Landlock there).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use serde_json::{Value, json};

/// The version of the kept file's layout; another version is not believed.
const VERSION: u64 = 2;

/// The most a kept file is read of: a kept answer is well under it.
const MOST: u64 = 16 * 1024;

/// Returns what a check of `program` with `args` depends on, or `None` when `program`
/// cannot be found (its check then fails at once, and nothing is kept).
pub(super) fn facts(program: &Path, args: &[OsString]) -> Option<Value> {
    let found = super::find_program(program)?;
    let found = std::fs::canonicalize(found).ok()?;
    let meta = std::fs::metadata(&found).ok()?;
    let me = std::fs::metadata("/proc/self").ok();
    let read = |file: &str| std::fs::read_to_string(file).ok().map(|s| s.trim().to_owned());
    let namespace =
        |file: &str| std::fs::read_link(file).ok().map(|link| link.display().to_string());
    // What confines this process, from its status: the lines that say what it may do.
    let status = read("/proc/self/status").unwrap_or_default();
    let confinement: Vec<&str> = status
        .lines()
        .filter(|line| {
            ["Seccomp:", "Seccomp_filters:", "NoNewPrivs:", "CapBnd:"]
                .iter()
                .any(|field| line.starts_with(field))
        })
        .collect();
    let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    Some(json!({
        "check": args,
        "clio_tools": env!("CARGO_PKG_VERSION"),
        "program": found,
        "device": meta.dev(),
        "inode": meta.ino(),
        "size": meta.size(),
        "modified": [meta.mtime(), meta.mtime_nsec()],
        "changed": [meta.ctime(), meta.ctime_nsec()],
        "kernel": read("/proc/sys/kernel/osrelease"),
        "boot": read("/proc/sys/kernel/random/boot_id"),
        "user": me.map(|m| m.uid()),
        "user_namespace": namespace("/proc/self/ns/user"),
        "mount_namespace": namespace("/proc/self/ns/mnt"),
        "pid_namespace": namespace("/proc/self/ns/pid"),
        "network_namespace": namespace("/proc/self/ns/net"),
        "confinement": confinement,
        "security_label": read("/proc/self/attr/current"),
        "unprivileged_userns_clone": read("/proc/sys/kernel/unprivileged_userns_clone"),
        "max_user_namespaces": read("/proc/sys/user/max_user_namespaces"),
        "apparmor_restrict_unprivileged_userns":
            read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
    }))
}

/// Says whether `file` keeps a passed check made on exactly `facts`. Only a regular file
/// of at most [`MOST`] bytes is read, not a symbolic link, a named pipe or a device in its
/// place (looked at before it is opened, and again once it is).
pub(super) fn passed_before(file: &Path, facts: &Value) -> bool {
    let plain = |meta: &std::fs::Metadata| meta.file_type().is_file() && meta.len() <= MOST;
    if !std::fs::symlink_metadata(file).is_ok_and(|meta| plain(&meta)) {
        return false;
    }
    let Ok(opened) = std::fs::File::open(file) else { return false };
    if !opened.metadata().is_ok_and(|meta| plain(&meta)) {
        return false;
    }
    let mut text = Vec::new();
    if opened.take(MOST).read_to_end(&mut text).is_err() {
        return false;
    }
    let Ok(kept) = serde_json::from_slice::<Value>(&text) else { return false };
    kept["version"] == VERSION && kept["passed"] == *facts
}

/// Drops what `file` keeps, so that the next process checks again.
pub(super) fn forget(file: &Path) {
    let _ = std::fs::remove_file(file);
}

/// Keeps a passed check made on `facts` in `file`, replacing what it held. Best effort: a
/// file that cannot be written only means the next process checks again.
pub(super) fn keep(file: &Path, facts: &Value) {
    let Some(folder) = file.parent() else { return };
    if std::fs::create_dir_all(folder).is_err() {
        return;
    }
    let text = json!({ "version": VERSION, "passed": facts }).to_string();
    // A name no other process picks (its id and the time), created new: never an existing
    // file or a link planted in its place.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut name = file.as_os_str().to_os_string();
    name.push(format!(".{}.{nanos}.tmp", std::process::id()));
    let temporary = std::path::PathBuf::from(name);
    let created =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temporary);
    let Ok(mut created) = created else { return };
    if created.write_all(text.as_bytes()).is_err() || std::fs::rename(&temporary, file).is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_pass_holds_only_for_the_same_facts() {
        let dir = std::env::temp_dir().join(format!("clio-kept-check-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let program = dir.join("bwrap");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = dir.join("cache/sandbox-check.json");
        let args = [OsString::from("--version")];
        let facts = facts(&program, &args).expect("the program is there");
        assert!(!passed_before(&file, &facts), "nothing is kept yet");
        keep(&file, &facts);
        assert!(passed_before(&file, &facts));
        // The same program, changed: its size and change time differ.
        std::fs::write(&program, "#!/bin/sh\nexit 0\n").unwrap();
        let changed = super::facts(&program, &args).expect("the program is there");
        assert_ne!(changed, facts);
        assert!(!passed_before(&file, &changed));
        // Another check of the same program is another question.
        let other = super::facts(&program, &[OsString::from("--help")]).expect("there");
        assert_ne!(other, changed);
        keep(&file, &changed);
        assert!(passed_before(&file, &changed));
        // A link in the file's place is not followed, nor a file too large to be an answer.
        let target = dir.join("target.json");
        std::fs::rename(&file, &target).unwrap();
        std::os::unix::fs::symlink(&target, &file).unwrap();
        assert!(!passed_before(&file, &changed), "a link is not followed");
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, vec![b' '; (MOST + 1) as usize]).unwrap();
        assert!(!passed_before(&file, &changed), "too large");
        let facts = changed;
        // A file of another layout, or not JSON, is not believed.
        std::fs::write(&file, json!({"version": 0, "passed": facts}).to_string()).unwrap();
        assert!(!passed_before(&file, &facts));
        std::fs::write(&file, "not json").unwrap();
        assert!(!passed_before(&file, &facts));
        // A program that is not there has no facts: its check fails and keeps nothing.
        assert_eq!(super::facts(&dir.join("missing"), &args), None);
        forget(&file);
        assert!(!file.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
