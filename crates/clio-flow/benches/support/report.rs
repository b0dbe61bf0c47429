//! The JSON line that the flow crate's bench targets print for each workload (`cargo xtask
//! bench` collects them): the workload's name, how many operations it ran, its total time
//! and the time per operation, then the fields the target adds. Each target includes this
//! file (`#[path]`), so their lines cannot drift apart.

use serde_json::{Value, json};

/// Rounds `x` to two decimals, as ratios and shares are printed.
pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Prints the line of workload `bench`: `n` operations in `ms` milliseconds, then the
/// fields of `fields` (an object) in their order. Every line says what it includes: a line
/// without an `includes` text is a mistake of the bench, and stops it.
pub(crate) fn print_line(bench: &str, n: u64, ms: f64, fields: Value) {
    assert!(
        fields.get("includes").and_then(Value::as_str).is_some_and(|t| !t.trim().is_empty()),
        "the bench line {bench} does not say what it includes"
    );
    let line = json!({
        "bench": bench,
        "n": n,
        "total_ms": (ms * 1000.0).round() / 1000.0,
        "per_op_us": ((ms * 1000.0 / n.max(1) as f64) * 10.0).round() / 10.0,
    });
    println!("{}", merged(line, fields));
}

/// Returns `first` with the fields of `then` after its own.
pub(crate) fn merged(mut first: Value, then: Value) -> Value {
    if let (Some(obj), Value::Object(more)) = (first.as_object_mut(), then) {
        obj.extend(more);
    }
    first
}
