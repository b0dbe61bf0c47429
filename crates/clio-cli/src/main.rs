//! The `clio` binary: everything lives in the `clio_cli` library so that it can be
//! tested in-process; this file only hands over the process's arguments and streams.

fn main() -> std::process::ExitCode {
    clio_cli::main()
}
