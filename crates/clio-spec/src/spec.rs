//! [`AgentSpec`]: the frozen, checksummed description of an agent — the spec format,
//! one of the project's two stability boundaries.
//!
//! The JSON form holds the content fields (`id`, `version`, `name`, `role`,
//! `description`, `flow`, `plugins`, `layers`, `requires`, `prefers`), then `source` and
//! `checksum`. The checksum covers the content fields only (see [`crate::canonical`]):
//! `source` says where the definition was read from, so moving a file does not change
//! what the agent is.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::canonical_sha256;
use crate::error::AgentDefinitionError;
use crate::error::{json_parse_error, refuse_duplicate_keys};
use crate::plugin_ref::PluginRef;
use crate::requirements::{Prefers, Requires};
use crate::selection::FlowSelection;

/// A plugin reference in a spec, with the layer that added it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecPlugin {
    /// The reference as written, such as `clio/pdf@^1.2`.
    pub reference: String,
    /// The id of the layer that added it (or `<default>`).
    pub layer: String,
}

/// The checksummed content of a spec. Field order here is the order of the JSON form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpecContent {
    pub(crate) id: String,
    pub(crate) version: String,
    pub(crate) name: String,
    pub(crate) role: String,
    pub(crate) description: String,
    pub(crate) flow: FlowSelection,
    pub(crate) plugins: Vec<SpecPlugin>,
    pub(crate) layers: Vec<String>,
    pub(crate) requires: Requires,
    pub(crate) prefers: Prefers,
}

/// The JSON document of a spec as read back: the content, `source` and `checksum`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecDocument {
    id: String,
    version: String,
    name: String,
    role: String,
    description: String,
    flow: FlowSelection,
    plugins: Vec<SpecPlugin>,
    layers: Vec<String>,
    requires: Requires,
    prefers: Prefers,
    #[serde(default)]
    source: String,
    checksum: Option<String>,
}

/// The frozen description of an agent, produced by [`crate::AgentDef::spec`].
///
/// It cannot be changed once built; its [`AgentSpec::checksum`] identifies its content.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    content: SpecContent,
    source: String,
    // Invariant: the checksum of `content`, computed once at construction.
    checksum: String,
}

impl AgentSpec {
    pub(crate) fn new(content: SpecContent, source: String) -> AgentSpec {
        let checksum = canonical_sha256(&content_value(&content));
        AgentSpec { content, source, checksum }
    }

    /// Returns the agent's id.
    pub fn id(&self) -> &str {
        &self.content.id
    }

    /// Returns the agent's version.
    pub fn version(&self) -> &str {
        &self.content.version
    }

    /// Returns the display name.
    pub fn name(&self) -> &str {
        &self.content.name
    }

    /// Returns the role.
    pub fn role(&self) -> &str {
        &self.content.role
    }

    /// Returns the description.
    pub fn description(&self) -> &str {
        &self.content.description
    }

    /// Returns the selected flow and its options.
    pub fn flow(&self) -> &FlowSelection {
        &self.content.flow
    }

    /// Returns the plugins, in the order the layers added them, base first.
    pub fn plugins(&self) -> &[SpecPlugin] {
        &self.content.plugins
    }

    /// Returns the plugin references parsed.
    ///
    /// Every reference in a spec parses: [`crate::AgentDef::spec`] and
    /// [`AgentSpec::from_json`] both check them.
    pub fn plugin_refs(&self) -> Vec<PluginRef> {
        self.content.plugins.iter().filter_map(|p| PluginRef::parse(&p.reference).ok()).collect()
    }

    /// Returns the ids of the layers, base first.
    pub fn layers(&self) -> &[String] {
        &self.content.layers
    }

    /// Returns the union of every layer's requirements.
    pub fn requires(&self) -> &Requires {
        &self.content.requires
    }

    /// Returns the preferences, most derived layer first.
    pub fn prefers(&self) -> &Prefers {
        &self.content.prefers
    }

    /// Returns where the definition was read from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Returns the lowercase hex SHA-256 of the canonical JSON of the content.
    pub fn checksum(&self) -> &str {
        &self.checksum
    }

    /// Returns the spec as JSON: the content, then `source` and `checksum`.
    pub fn to_json(&self) -> Value {
        let mut value = content_value(&self.content);
        if let Value::Object(map) = &mut value {
            map.insert("source".to_owned(), Value::String(self.source.clone()));
            map.insert("checksum".to_owned(), Value::String(self.checksum.clone()));
        }
        value
    }

    /// Reads a spec written by [`AgentSpec::to_json`].
    ///
    /// Refuses a key named twice in an object, unknown fields, a missing checksum, a checksum that does not match the
    /// content, and plugin references that do not parse.
    pub fn from_json(text: &str) -> Result<AgentSpec, AgentDefinitionError> {
        refuse_duplicate_keys(text, "<spec>")?;
        let doc: SpecDocument =
            serde_json::from_str(text).map_err(|err| json_parse_error(&err, "<spec>"))?;
        let expected = doc.checksum.ok_or(AgentDefinitionError::MissingChecksum)?;
        let content = SpecContent {
            id: doc.id,
            version: doc.version,
            name: doc.name,
            role: doc.role,
            description: doc.description,
            flow: doc.flow,
            plugins: doc.plugins,
            layers: doc.layers,
            requires: doc.requires,
            prefers: doc.prefers,
        };
        let spec = AgentSpec::new(content, doc.source);
        if spec.checksum != expected {
            return Err(AgentDefinitionError::ChecksumMismatch { expected, actual: spec.checksum });
        }
        for plugin in &spec.content.plugins {
            PluginRef::parse(&plugin.reference).map_err(|source| {
                AgentDefinitionError::BadReference {
                    layer: plugin.layer.clone(),
                    value: plugin.reference.clone(),
                    source,
                }
            })?;
        }
        Ok(spec)
    }
}

fn content_value(content: &SpecContent) -> Value {
    // Serialising plain strings, numbers and maps into a `Value` cannot fail.
    serde_json::to_value(content).unwrap_or(Value::Null)
}
