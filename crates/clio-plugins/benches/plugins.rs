//! W6: resolve an agent over a generated marketplace of 1,000 plugins × 5 versions with
//! ranged dependencies; prints one JSON line with the time and peak memory.
#![allow(clippy::print_stdout)]

fn main() {}
