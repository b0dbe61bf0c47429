//! Embeds the pure-Python files of the `clio_agent` package (`python/clio_agent/` of the
//! repository) in the crate, so that `clio` runs a plugin's Python flows and reads their
//! declarations with nothing installed but `python3` (see `src/python.rs`).
//!
//! The package is written once, in the repository, and is also what `pip install ./python`
//! installs; this script lists its `.py` files at build time, so a module added to the
//! package is carried without a second list to keep. Built outside the repository (from a
//! packaged crate), the folder is absent and the crate carries no package: reading Python
//! flows then fails with an error saying so.

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let package = manifest.join("../../python/clio_agent");
    println!("cargo:rerun-if-changed={}", package.display());
    let mut files = Vec::new();
    collect(&package, &package, &mut files);
    files.sort();
    let mut out = String::from("&[\n");
    for (relative, absolute) in &files {
        println!("cargo:rerun-if-changed={}", absolute.display());
        out.push_str(&format!(
            "    ({relative:?}, include_str!({:?})),\n",
            absolute.display().to_string()
        ));
    }
    out.push_str("]\n");
    let dest =
        PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("python_package.rs");
    std::fs::write(dest, out).expect("OUT_DIR is writable");
}

/// Adds every `.py` file under `dir` (not under `__pycache__`) to `files`, as its path
/// relative to `base` and its absolute path.
fn collect(base: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "__pycache__" {
                println!("cargo:rerun-if-changed={}", path.display());
                collect(base, &path, files);
            }
        } else if name.ends_with(".py") {
            let relative = path.strip_prefix(base).unwrap_or(&path).to_string_lossy().into_owned();
            let absolute = path.canonicalize().unwrap_or(path);
            files.push((relative, absolute));
        }
    }
}
