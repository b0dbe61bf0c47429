//! Folders no sandboxed program may see ([`Sandbox::hidden`](super::Sandbox::hidden)):
//! the CLI hides `$CLIO_HOME`, whose files (the journal, `config.toml`, the control
//! socket's key, the HTTP API's token) would let plugin code answer its own questions,
//! cancel runs or read them.
//!
//! - A grant that *holds* a hidden folder (is it, or a folder above it: a workspace set to
//!   the person's home, `/` in the deployment's `read` list) is refused under Landlock,
//!   which cannot take back a part of what it grants; under bubblewrap the hidden folder is
//!   covered by an empty one, mounted after the grant.
//! - A grant *inside* a hidden folder is kept when it lies in one of its subfolders (a
//!   plugin installed there, a test's workspace): that subfolder is all it shows. A grant of
//!   a file directly in a hidden folder (or of anything whose path goes through such a
//!   file) is dropped.
//!
//! Paths are compared as the kernel resolves them (symbolic links followed), and as given
//! when they do not exist.

use std::path::{Path, PathBuf};

/// Returns `path` with its symbolic links resolved, or as given when it cannot be.
pub(super) fn resolved(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Returns the hidden folders, resolved.
pub(super) fn folders(hidden: &[PathBuf]) -> Vec<PathBuf> {
    hidden.iter().map(|h| resolved(&super::absolute(h))).collect()
}

/// Returns the first hidden folder that `grant` holds (it, or a folder above it).
pub(super) fn held_by<'h>(grant: &Path, hidden: &'h [PathBuf]) -> Option<&'h PathBuf> {
    let grant = resolved(grant);
    hidden.iter().find(|h| h.starts_with(&grant))
}

/// Says whether `grant` is a hidden folder's own file (directly in it), or below one.
pub(super) fn is_own_file(grant: &Path, hidden: &[PathBuf]) -> bool {
    let grant = resolved(grant);
    hidden.iter().any(|h| {
        let Ok(rest) = grant.strip_prefix(h) else { return false };
        let Some(first) = rest.components().next() else { return false };
        !h.join(first).is_dir()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{Access, Sandbox, SandboxError, SandboxMode};

    #[test]
    fn a_grant_holds_what_is_below_it_and_a_home_keeps_its_files() {
        let root = std::env::temp_dir().join(format!("clio-hidden-{}", std::process::id()));
        let home = root.join("home");
        std::fs::create_dir_all(home.join("plugins/p")).unwrap();
        std::fs::write(home.join("clio.key"), "k").unwrap();
        let hidden = folders(std::slice::from_ref(&home));
        assert!(held_by(&root, &hidden).is_some(), "a folder above it");
        assert!(held_by(&home, &hidden).is_some(), "itself");
        assert!(held_by(&home.join("plugins/p"), &hidden).is_none(), "a folder inside");
        assert!(held_by(&root.join("other"), &hidden).is_none(), "a sibling");
        assert!(is_own_file(&home.join("clio.key"), &hidden));
        assert!(is_own_file(&home.join("clio.key/x"), &hidden));
        assert!(is_own_file(&home.join("journal.redb"), &hidden), "missing: not a folder");
        assert!(!is_own_file(&home.join("plugins/p"), &hidden));
        assert!(!is_own_file(&home, &hidden));
        assert!(!is_own_file(&root, &hidden));
        let _ = std::fs::remove_dir_all(&root);
    }

    /// What `sh -c script` prints, run under `sandbox` with `access`; `Err` when it cannot
    /// be confined.
    fn run(sandbox: &Sandbox, access: &Access, script: &str) -> Result<String, SandboxError> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut confined = sandbox.confine(Path::new("/bin/sh"), access).await?;
            confined.command().args(["-c", script]).stdout(std::process::Stdio::piped());
            let child = confined.spawn()?;
            let out = child.wait_with_output().await.unwrap();
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        })
    }

    #[test]
    fn no_sandbox_shows_a_file_of_a_hidden_folder() {
        let root = std::env::temp_dir().join(format!("clio-hidden-run-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let home = root.join("home");
        std::fs::create_dir_all(home.join("workspace")).unwrap();
        std::fs::write(home.join("clio.key"), "secret").unwrap();
        std::fs::write(home.join("workspace/mine"), "mine").unwrap();
        let script = format!(
            "cat {0}/clio.key 2>/dev/null || echo no-key; cat {0}/workspace/mine 2>/dev/null; echo",
            home.display()
        );
        for mode in [SandboxMode::Bwrap, SandboxMode::Landlock] {
            let sandbox = Sandbox { mode, hidden: vec![home.clone()], ..Sandbox::default() };
            // A workspace inside the home: that folder only.
            let inside = Access { workspace: Some(home.join("workspace")), ..Access::default() };
            let seen = run(&sandbox, &inside, &script).unwrap();
            assert_eq!(seen.trim(), "no-key\nmine", "{mode:?}");
            // A file directly in the home is never granted.
            let file = Access { read: vec![home.join("clio.key")], ..inside.clone() };
            let seen = run(&sandbox, &file, &script).unwrap();
            assert_eq!(seen.trim(), "no-key\nmine", "{mode:?}");
            // A workspace that holds the home: covered under bubblewrap, refused under
            // Landlock, which cannot take a folder back.
            let above = Access { workspace: Some(root.clone()), ..Access::default() };
            match (mode, run(&sandbox, &above, &script)) {
                (SandboxMode::Bwrap, Ok(seen)) => assert_eq!(seen.trim(), "no-key", "{seen}"),
                (SandboxMode::Landlock, Err(SandboxError::LandlockUnavailable { reason })) => {
                    assert!(reason.contains(&format!("{} would be granted", root.display())));
                    assert!(reason.contains(&format!("or holds {}", home.display())), "{reason}");
                }
                (mode, other) => panic!("{mode:?}: {other:?}"),
            }
            // Without the home hidden, the same grant shows the key: the test can fail.
            let open = Sandbox { hidden: Vec::new(), ..sandbox.clone() };
            assert_eq!(run(&open, &above, &script).unwrap().trim(), "secretmine");
        }
        let _ = std::fs::remove_dir_all(&root);
    }
}
