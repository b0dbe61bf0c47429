//! Benchmarks of the flow runtime (placeholder until written).

fn main() {}
