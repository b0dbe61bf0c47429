//! Workflows as data (SPEC §6): steps, validation, the DAG, the scheduling state machine,
//! input references, the editor proposal engine and result assembly.
//!
//! Pure: no tokio, no I/O, no clock. It may depend on `clio-spec` at most.
//!
//! Not built yet: the engine arrives with its own issue.
