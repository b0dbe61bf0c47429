//! The slow tier of clio-flow's tests (`test = false`; run by `cargo xtask test-long` or
//! `cargo test -p clio-flow --test slow`): the crash scenarios of `tests/it/crash.rs`
//! with many SIGKILLs at pseudo-random points and several seeds.

#[path = "../it/crash.rs"]
mod crash;
#[allow(dead_code, reason = "the slow tier uses only some of the shared helpers")]
#[path = "../it/support.rs"]
mod support;

#[test]
fn many_kills_in_every_scenario() {
    for seed in 10..14 {
        for scenario in ["seq", "fan", "workflow"] {
            crash::crash_scenario(scenario, 12, seed);
        }
    }
}
