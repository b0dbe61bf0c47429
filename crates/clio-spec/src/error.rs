//! [`AgentDefinitionError`]: everything that can be wrong with an agent definition or a
//! frozen spec, each variant carrying what a person needs to find and fix it.

use crate::version::VersionRangeError;

/// An agent definition that cannot be frozen, or a spec that cannot be read back.
///
/// Every variant names the layer (by id) or the source and the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentDefinitionError {
    /// The text is not valid TOML/JSON, or holds a field of the wrong type or an unknown
    /// field.
    #[error("{source_name}:{line}:{column}: {message}")]
    Parse {
        /// Where the text came from (a path, or `<code>`).
        source_name: String,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What the parser found wrong.
        message: String,
    },
    /// A layer has an empty id.
    #[error("{layer} has an empty `id`; give it an id such as `reviewer`")]
    EmptyId {
        /// The layer, described by its position because it has no id.
        layer: String,
    },
    /// A layer's id is not a valid id.
    #[error("layer `{layer}`: invalid id: {source}")]
    InvalidId {
        /// The offending id.
        layer: String,
        /// Why the id is invalid.
        source: VersionRangeError,
    },
    /// A layer's `version` is not a full semver version.
    #[error("layer `{layer}`: invalid `version` {value:?}: {source}")]
    InvalidVersion {
        /// The layer that set the version.
        layer: String,
        /// The version as written.
        value: String,
        /// Why it does not parse.
        source: VersionRangeError,
    },
    /// A layer's `flow` selection names no valid flow id.
    #[error("layer `{layer}`: invalid `flow` id {value:?}: {source}")]
    InvalidFlow {
        /// The layer that set the flow.
        layer: String,
        /// The flow id as written.
        value: String,
        /// Why it is invalid.
        source: VersionRangeError,
    },
    /// A plugin reference does not parse.
    #[error("layer `{layer}`: plugin reference {value:?} does not parse: {source}")]
    BadReference {
        /// The layer listing the reference.
        layer: String,
        /// The reference as written.
        value: String,
        /// What is wrong with it.
        source: VersionRangeError,
    },
    /// One layer lists the same plugin twice.
    #[error("layer `{layer}` lists plugin `{plugin}` twice: {first:?} and {second:?}; keep one")]
    DuplicatePlugin {
        /// The layer with the duplicate.
        layer: String,
        /// The plugin id listed twice.
        plugin: String,
        /// The first reference.
        first: String,
        /// The second reference.
        second: String,
    },
    /// No layer brings the `core` plugin.
    #[error(
        "no layer lists the `core` plugin (layers {layers:?} list {plugins:?}); add \"core\" to `plugins`"
    )]
    MissingCore {
        /// The chain, base first.
        layers: Vec<String>,
        /// The plugins the layers do list.
        plugins: Vec<String>,
    },
    /// `extends` names a layer that is not defined.
    #[error("layer `{layer}` extends `{extends}`, which is not defined (defined: {known:?})")]
    UnknownLayer {
        /// The layer whose `extends` is wrong.
        layer: String,
        /// The name it extends.
        extends: String,
        /// The layers that are defined.
        known: Vec<String>,
    },
    /// Following `extends` comes back to a layer already in the chain.
    #[error("`extends` forms a cycle: {}", cycle.join(" -> "))]
    ExtendsCycle {
        /// The layers on the cycle, starting and ending with the same one.
        cycle: Vec<String>,
    },
    /// Two layers in one file share an id.
    #[error("layer id `{layer}` is defined twice; give each layer its own id")]
    DuplicateLayer {
        /// The repeated id.
        layer: String,
    },
    /// A spec's recorded checksum does not match its content.
    #[error("checksum mismatch: the spec records {expected} but its content hashes to {actual}")]
    ChecksumMismatch {
        /// The checksum written in the spec.
        expected: String,
        /// The checksum of the content as read.
        actual: String,
    },
    /// A spec document lacks its `checksum`.
    #[error("the spec has no `checksum` field; freeze it again with `clio agent spec`")]
    MissingChecksum,
}

/// Turns a serde_json error into a parse error naming the source.
pub(crate) fn json_parse_error(err: &serde_json::Error, source_name: &str) -> AgentDefinitionError {
    let message = err.to_string();
    // serde_json appends " at line L column C"; the position has fields of its own.
    let message = match message.rfind(" at line ") {
        Some(cut) => message[..cut].to_owned(),
        None => message,
    };
    AgentDefinitionError::Parse {
        source_name: source_name.to_owned(),
        line: err.line(),
        column: err.column(),
        message,
    }
}

/// Refuses a JSON text in which an object names a key twice, as a parse error at the
/// repeat naming the key.
pub(crate) fn refuse_duplicate_keys(
    text: &str,
    source_name: &str,
) -> Result<(), AgentDefinitionError> {
    match crate::json::duplicate_json_key(text) {
        Some(dup) => Err(AgentDefinitionError::Parse {
            source_name: source_name.to_owned(),
            line: dup.line,
            column: dup.column,
            message: format!("duplicate key `{}`: an object may name each key once", dup.key),
        }),
        None => Ok(()),
    }
}
