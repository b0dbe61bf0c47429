//! Fault injection (placeholder).
