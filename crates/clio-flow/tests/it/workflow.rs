//! The built-in `workflow` flow.
