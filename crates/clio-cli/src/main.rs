//! The `clio` binary: parses nothing itself, it hands argv to [`clio_cli::main`].
fn main() {}
