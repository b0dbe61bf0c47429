//! The viewer end to end in a real browser: `tests/e2e/viewer.mjs` drives Debian's
//! Chromium headless with playwright-core through `clio serve` (it submits the main job
//! with --approve-edits, sees the DAG, approves the edit in the page and sees the run
//! finish). It fails, never skips, when node, Chromium or the npm packages are missing:
//! `cargo xtask test` installs them (`apt-get install chromium`, `npm ci` in tests/e2e).

use std::process::Command;

use crate::support::workspace_root;

#[test]
fn the_viewer_approves_an_edit_and_shows_the_run_finish_in_headless_chromium() {
    let dir = workspace_root().join("crates/clio-cli/tests/e2e");
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: `cargo xtask test` installs it (or `apt-get install chromium`)"
    );
    assert!(
        dir.join("node_modules/playwright-core").is_dir(),
        "playwright-core is missing: `cargo xtask test` installs it (or `npm ci` in {})",
        dir.display()
    );
    let output = Command::new("node")
        .arg("viewer.mjs")
        .current_dir(&dir)
        .env("CLIO_BIN", env!("CARGO_BIN_EXE_clio"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run node (install nodejs): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "viewer e2e failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("viewer e2e: ok"), "{stdout}\n{stderr}");
}
