//! The `clio` binary: everything lives in the `clio_cli` library so that it can be
//! tested in-process; this file only hands over the process's arguments and streams, and
//! picks the allocator (docs/decisions.md: a replay decodes and frees every entry of a
//! run, and the system allocator spends most of that time on its own locks).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    clio_cli::main()
}
