//! Placeholder, filled by its owner.
