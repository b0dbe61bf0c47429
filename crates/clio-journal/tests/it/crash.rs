//! crash placeholder
