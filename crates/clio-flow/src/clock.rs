//! The one place that reads the wall clock. Replayed flow code never calls it directly:
//! [`crate::Ctx::now_ms`] reads it inside a recorded step, so a replay sees the same time.

/// Returns the time in milliseconds since the Unix epoch (0 if the clock is before it).
#[allow(clippy::disallowed_methods, reason = "the module that provides time to flows")]
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Returns a monotonic instant, for measuring (the benchmark and timeouts).
#[allow(clippy::disallowed_methods, reason = "the module that provides time to flows")]
pub fn instant() -> std::time::Instant {
    std::time::Instant::now()
}
