//! Agent definitions, frozen specs, checksums, plugin references and version ranges:
//! the pure data at the bottom of CLIO.
//!
//! - [`AgentDef`] is an agent as declared: layers that extend one another, read from
//!   TOML/JSON or built in code. [`AgentDef::spec`] flattens it into an [`AgentSpec`].
//! - [`AgentSpec`] is frozen and checksummed ([`AgentSpec::checksum`], the SHA-256 of a
//!   canonical JSON documented in `canonical.rs`); its JSON form is a stability boundary.
//! - [`Requires`] and [`Prefers`] say what a model must and should be.
//! - [`PluginRef`] and [`VersionRange`] implement plugin references and node-semver
//!   ranges (`docs/version-ranges.md`).
//!
//! - [`read_input`] reads an input file a person names, bounded (a regular file only, at
//!   most [`MAX_INPUT_BYTES`], UTF-8 without a BOM), for every crate above that reads one;
//!   [`duplicate_json_key`] finds a key a JSON object names twice.
//!
//! Invariants: no I/O but [`read_input`]'s (callers pass text and a source name), no
//! async, no clio dependency. Every error names the layer, field or position at fault.

mod agent;
mod canonical;
mod error;
mod input;
mod json;
mod plugin_ref;
mod requirements;
mod selection;
mod spec;
mod version;

pub use agent::{AgentDef, DEFAULT_FLOW, DEFAULT_LAYER, DEFAULT_PLUGINS};
pub use canonical::{canonical_json, canonical_sha256};
pub use error::AgentDefinitionError;
pub use input::{
    FileKind, InputError, MAX_INPUT_BYTES, input_text, read_input, read_input_bytes,
    read_input_within,
};
pub use json::{DuplicateKey, duplicate_json_key, toml_error_message};
pub use plugin_ref::PluginRef;
pub use requirements::{Prefers, Requires};
pub use selection::FlowSelection;
pub use spec::{AgentSpec, SpecPlugin};
pub use version::{
    VersionRange, VersionRangeError, VersionRangeErrorKind, parse_plugin_version, validate_id,
};

/// The crate README's example, run as a doctest so that it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
