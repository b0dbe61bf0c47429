//! Plugin and pack declarations, plugin folders, marketplaces, the install and trust
//! store, dependency resolution and `plugin check` (SPEC §4).
//!
//! This crate is sync and does file I/O only; it never spawns tasks and never reaches
//! tokio. It may depend on `clio-spec` and no other clio crate.
//!
//! Not built yet: the declarations, folder loading, marketplaces, resolution and the
//! check arrive with their own issue. Until then the crate exposes nothing, so that
//! nothing can pretend to work.
