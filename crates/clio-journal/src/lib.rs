//! The durable journal of CLIO runs on one redb file (SPEC §5): runs, tasks, per-run
//! entries, subagent sessions and the format version.
//!
//! Sync core; no knowledge of flows; no redb type in its public API. It may depend on
//! `clio-spec` at most, and only for identity types.
//!
//! Not built yet: the journal arrives with its own issue.
