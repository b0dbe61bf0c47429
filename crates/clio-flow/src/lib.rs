//! The async flow runtime (SPEC §7 and §8): the `Flow` trait, the flow context `ctx`,
//! tasks, replay from the journal, limits, cancellation, model providers, the react loop,
//! the built-in flows and subagent teams.
//!
//! This is the only library crate that spawns tasks. It may depend on `clio-spec`,
//! `clio-plugins`, `clio-journal` and `clio-workflow`.
//!
//! Not built yet: the runtime arrives with its own issue. Until then the crate exposes
//! nothing, so that nothing can pretend to work.
