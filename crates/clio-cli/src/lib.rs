//! The `clio` command.
