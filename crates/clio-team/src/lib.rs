//! The pure core of subagent teams (SPEC §8): the rules over a snapshot of the sessions
//! and the state a team keeps in the journal beside a session's record.
//!
//! - [`rules`]: who controls whom ([`rules::controls`]), who may wake whom
//!   ([`rules::wake_allowed`]), whether a session may use managed subagents
//!   ([`rules::enabled`]), which children a dead process orphaned ([`rules::orphans`]),
//!   all over a [`SessionTree`] and nothing else.
//! - [`SessionState`] and [`SessionAllowlist`]: the team state in a session's `checkpoint`
//!   value and the router allowlist's encoding, read and written only through this crate.
//! - [`TeamError`]: everything a team operation can refuse or fail with, each with its
//!   stable [`TeamError::reason`].
//!
//! Its one job: say what a team may do and how its state is kept. It does not run a team:
//! the `Team` handle, its sessions' turns, the team tools and the orchestration plugin
//! are clio-flow's, which reads and writes the journal and calls these rules. It spawns
//! nothing, does no I/O and reads no clock.

mod error;
pub mod rules;
mod state;

pub use crate::error::TeamError;
pub use crate::rules::{EnabledConfig, SessionTree};
pub use crate::state::{SessionAllowlist, SessionState, StoredRoute, complete_input};

/// The crate README's example, run as a doctest so that it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
