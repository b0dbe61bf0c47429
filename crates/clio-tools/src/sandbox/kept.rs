//! The answer of bubblewrap's check, kept in a file across processes
//! ([`Sandbox::kept_check`](super::Sandbox::kept_check)).
//!
//! The check starts bubblewrap in the namespaces a sandbox uses, which costs a process and
//! a few milliseconds of the kernel's time; a command line tool that confines a program
//! in every invocation would pay it every time, for an answer that rarely changes. A check
//! that passed is kept together with the facts it depends on, and believed again only
//! while every one of them is unchanged:
//! - the bubblewrap program: its resolved path, device, inode, size and change times (a
//!   reinstall or an edit changes them);
//! - the kernel: its release and its boot (a reboot may change its settings);
//! - the process: its user, and its user, mount, pid and network namespaces (another
//!   container, or a sandbox inside a sandbox, has others);
//! - the kernel's settings for unprivileged user namespaces
//!   (`kernel.unprivileged_userns_clone`, `user.max_user_namespaces`, AppArmor's
//!   `kernel.apparmor_restrict_unprivileged_userns`).
//!
//! Only a pass is kept: a failing check runs again each time (it is quick to fail), so
//! installing bubblewrap or allowing user namespaces takes effect at once. The file is
//! written whole under a temporary name and renamed; a file that is missing, unreadable
//! or not what this module writes only means the check runs again. Keeping it cannot
//! weaken the sandbox: a program is still started under bubblewrap, and if a kept answer
//! were wrong, the program's start would fail with bubblewrap's own message.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::{Value, json};

/// The version of the kept file's layout; another version is not believed.
const VERSION: u64 = 1;

/// Returns what a check of `program` depends on, or `None` when `program` cannot be
/// found (its check then fails at once, and nothing is kept).
pub(super) fn facts(program: &Path) -> Option<Value> {
    let found = super::find_program(program)?;
    let found = std::fs::canonicalize(found).ok()?;
    let meta = std::fs::metadata(&found).ok()?;
    let me = std::fs::metadata("/proc/self").ok();
    let read = |file: &str| std::fs::read_to_string(file).ok().map(|s| s.trim().to_owned());
    let namespace =
        |file: &str| std::fs::read_link(file).ok().map(|link| link.display().to_string());
    Some(json!({
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
        "unprivileged_userns_clone": read("/proc/sys/kernel/unprivileged_userns_clone"),
        "max_user_namespaces": read("/proc/sys/user/max_user_namespaces"),
        "apparmor_restrict_unprivileged_userns":
            read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
    }))
}

/// Says whether `file` keeps a passed check made on exactly `facts`.
pub(super) fn passed_before(file: &Path, facts: &Value) -> bool {
    let Ok(text) = std::fs::read(file) else { return false };
    let Ok(kept) = serde_json::from_slice::<Value>(&text) else { return false };
    kept["version"] == VERSION && kept["passed"] == *facts
}

/// Keeps a passed check made on `facts` in `file`, replacing what it held. Best effort: a
/// file that cannot be written only means the next process checks again.
pub(super) fn keep(file: &Path, facts: &Value) {
    let Some(folder) = file.parent() else { return };
    if std::fs::create_dir_all(folder).is_err() {
        return;
    }
    let text = json!({ "version": VERSION, "passed": facts }).to_string();
    let mut name = file.as_os_str().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    let temporary = std::path::PathBuf::from(name);
    if std::fs::write(&temporary, text).is_err() || std::fs::rename(&temporary, file).is_err() {
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
        let facts = facts(&program).expect("the program is there");
        assert!(!passed_before(&file, &facts), "nothing is kept yet");
        keep(&file, &facts);
        assert!(passed_before(&file, &facts));
        // The same program, changed: its size and change time differ.
        std::fs::write(&program, "#!/bin/sh\nexit 0\n").unwrap();
        let changed = super::facts(&program).expect("the program is there");
        assert_ne!(changed, facts);
        assert!(!passed_before(&file, &changed));
        // A file of another layout, or not JSON, is not believed.
        std::fs::write(&file, json!({"version": 0, "passed": facts}).to_string()).unwrap();
        assert!(!passed_before(&file, &facts));
        std::fs::write(&file, "not json").unwrap();
        assert!(!passed_before(&file, &facts));
        // A program that is not there has no facts: its check fails and keeps nothing.
        assert_eq!(super::facts(&dir.join("missing")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
