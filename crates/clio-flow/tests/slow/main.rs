//! The slow tier of clio-flow's tests (`test = false`; run by `cargo xtask test-long` or
//! `cargo test -p clio-flow --test slow`): the crash scenarios of `tests/it/crash.rs`
//! with many SIGKILLs at pseudo-random points and several seeds, and the 9,000-step chain
//! workflow that must fit the 10,000-entry cap (issue 24; about 25 s in a debug build).

#[path = "../it/crash.rs"]
mod crash;
#[path = "../it/scale.rs"]
mod scale;
#[allow(dead_code, reason = "the slow tier uses only some of the shared helpers")]
#[path = "../it/support.rs"]
mod support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_24_a_9000_step_chain_fits_the_entry_cap() {
    scale::a_chain_fits(9_000).await;
}

#[test]
fn many_kills_in_every_scenario() {
    for seed in 10..14 {
        for scenario in ["seq", "fan", "workflow"] {
            crash::crash_scenario(scenario, 12, seed);
        }
    }
}
