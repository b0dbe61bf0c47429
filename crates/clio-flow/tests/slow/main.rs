//! The slow tier of clio-flow tests (run by `cargo xtask test-long`).
