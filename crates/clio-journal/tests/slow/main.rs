//! The slow tier of the journal's tests, run by `cargo xtask test-long` with
//! `cargo test -p clio-journal --test slow`: many SIGKILLs of a real appending process.
//!
//! It reuses the default tier's crash module (whose child entry point it must also carry,
//! under the same test name) with more kills and other seeds.

#[path = "../it/crash.rs"]
mod crash;
#[path = "../it/support.rs"]
#[allow(dead_code, reason = "shared with the default tier, which uses all of it")]
mod support;

#[test]
fn fifty_sigkills_leave_prefixes_with_every_acknowledged_entry() -> support::TestResult {
    crash::kill_rounds(50, 0x5eed_0050)
}

#[test]
fn a_second_seed_of_fifty_sigkills() -> support::TestResult {
    crash::kill_rounds(50, 0x5eed_0051)
}
