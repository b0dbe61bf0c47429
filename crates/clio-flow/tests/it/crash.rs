//! Crash tests with a real process (filled in below).
