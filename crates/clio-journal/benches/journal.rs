//! The journal benchmark (placeholder until the workloads land).

fn main() {}
