//! The slow tier of the journal's tests (run by `cargo xtask test-long`): many SIGKILLs.
