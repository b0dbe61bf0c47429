//! [`AgentDef`]: an agent as it is declared — one layer that may extend another — and
//! the flattening of its layer chain into a frozen [`AgentSpec`].
//!
//! In a file, a layer is a TOML (or JSON) table. `extends` names another layer by id;
//! the layers a file needs besides the agent itself are defined in the same file under
//! `[[layer]]`. In code, [`AgentDef::extends`] attaches the parent definition directly.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::{AgentDefinitionError, json_parse_error, refuse_duplicate_keys};
use crate::plugin_ref::PluginRef;
use crate::requirements::{Prefers, Requires};
use crate::selection::FlowSelection;
use crate::spec::{AgentSpec, SpecContent, SpecPlugin};
use crate::version::{parse_plugin_version, validate_id};

/// The plugins an agent carries when no layer lists any.
pub const DEFAULT_PLUGINS: [&str; 2] = ["core", "memory"];

/// The layer name recorded for plugins that come from [`DEFAULT_PLUGINS`].
///
/// It is not a valid id, so it can never be confused with a real layer.
pub const DEFAULT_LAYER: &str = "<default>";

/// The flow an agent runs when no layer selects one.
pub const DEFAULT_FLOW: &str = "react";

/// One layer of an agent definition; unset fields inherit from the layer it extends.
///
/// This is the Rust form of an agent class: build it in code with [`AgentDef::new`], or
/// read it with [`AgentDef::from_toml`] / [`AgentDef::from_json`]. Nothing is checked
/// until [`AgentDef::spec`] freezes it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentDef {
    /// The agent's id (required): lowercase letters, digits, `-`, `_`, up to 64 characters.
    pub id: String,
    /// A full semver version; `"0.0.0"` when no layer sets one.
    pub version: Option<String>,
    /// A display name; the id when no layer sets one.
    pub name: Option<String>,
    /// The agent's role, shown to the model; `""` when unset.
    pub role: Option<String>,
    /// What the agent does; `""` when unset.
    pub description: Option<String>,
    /// The flow the agent runs; `"react"` when unset.
    pub flow: Option<FlowSelection>,
    /// Plugin references this layer adds; `["core", "memory"]` when no layer lists any.
    pub plugins: Option<Vec<String>>,
    /// What this layer requires of a model; the union over all layers applies.
    pub requires: Option<Requires>,
    /// What this layer prefers; more derived layers win field by field.
    pub prefers: Option<Prefers>,
    /// The id of the layer this one extends.
    pub extends: Option<String>,
    /// Other layers that `extends` may name (`[[layer]]` in a file).
    #[serde(default, rename = "layer")]
    pub layers: Vec<AgentDef>,
    /// Where the definition was read from; `<code>` when built in code.
    #[serde(skip)]
    pub source: String,
}

impl AgentDef {
    /// Starts a definition of agent `id`, built in code.
    pub fn new(id: impl Into<String>) -> AgentDef {
        AgentDef { id: id.into(), source: "<code>".to_owned(), ..AgentDef::default() }
    }

    /// Makes this layer extend `parent`, whose own layers come along.
    pub fn extends(mut self, mut parent: AgentDef) -> AgentDef {
        self.extends = Some(parent.id.clone());
        let inherited = std::mem::take(&mut parent.layers);
        self.layers.push(parent);
        self.layers.extend(inherited);
        self
    }

    /// Reads a definition from TOML text; `source_name` is used in errors and recorded
    /// as the spec's source.
    pub fn from_toml(text: &str, source_name: &str) -> Result<AgentDef, AgentDefinitionError> {
        let mut def: AgentDef = toml::from_str(text).map_err(|err| {
            let offset = err.span().map_or(0, |span| span.start);
            let (line, column) = line_column(text, offset);
            AgentDefinitionError::Parse {
                source_name: source_name.to_owned(),
                line,
                column,
                message: crate::json::toml_error_message(text, &err),
            }
        })?;
        def.source = source_name.to_owned();
        Ok(def)
    }

    /// Reads a definition from JSON text; `source_name` is used in errors and recorded
    /// as the spec's source.
    ///
    /// An object that names a key twice is refused with the key and its position.
    pub fn from_json(text: &str, source_name: &str) -> Result<AgentDef, AgentDefinitionError> {
        refuse_duplicate_keys(text, source_name)?;
        let mut def: AgentDef =
            serde_json::from_str(text).map_err(|err| json_parse_error(&err, source_name))?;
        def.source = source_name.to_owned();
        Ok(def)
    }

    /// Flattens the layer chain, base first, into a frozen [`AgentSpec`].
    ///
    /// The most derived layer wins for scalar fields, plugins accumulate with the layer
    /// that added each, `requires` is the union and `prefers` an overlay. Errors name the
    /// layer and the offending value.
    pub fn spec(&self) -> Result<AgentSpec, AgentDefinitionError> {
        let chain = self.chain()?;
        for layer in &chain {
            check_layer(layer)?;
        }

        let mut content = SpecContent {
            id: self.id.clone(),
            version: "0.0.0".to_owned(),
            name: self.id.clone(),
            role: String::new(),
            description: String::new(),
            flow: FlowSelection::new(DEFAULT_FLOW),
            plugins: Vec::new(),
            layers: chain.iter().map(|layer| layer.id.clone()).collect(),
            requires: Requires::default(),
            prefers: Prefers::default(),
        };
        // Base first, so that each more derived layer overwrites what it sets.
        for layer in &chain {
            if let Some(version) = &layer.version {
                content.version = version.clone();
            }
            if let Some(name) = &layer.name {
                content.name = name.clone();
            }
            if let Some(role) = &layer.role {
                content.role = role.clone();
            }
            if let Some(description) = &layer.description {
                content.description = description.clone();
            }
            if let Some(flow) = &layer.flow {
                content.flow = flow.clone();
            }
            if let Some(requires) = &layer.requires {
                content.requires = content.requires.union(requires);
            }
            if let Some(prefers) = &layer.prefers {
                content.prefers = prefers.union(&content.prefers);
            }
        }
        content.plugins = accumulate_plugins(&chain)?;
        if !content.plugins.iter().any(|plugin| plugin_id(&plugin.reference) == "core") {
            return Err(AgentDefinitionError::MissingCore {
                layers: content.layers.clone(),
                plugins: content.plugins.iter().map(|p| p.reference.clone()).collect(),
            });
        }
        Ok(AgentSpec::new(content, self.source.clone()))
    }

    /// Returns the layer chain, base first, following `extends` through the known layers.
    fn chain(&self) -> Result<Vec<&AgentDef>, AgentDefinitionError> {
        if self.id.trim().is_empty() {
            return Err(AgentDefinitionError::EmptyId { layer: "the agent".to_owned() });
        }
        let mut known: BTreeMap<&str, &AgentDef> = BTreeMap::new();
        collect_layers(&self.layers, &mut known)?;

        let mut chain: Vec<&AgentDef> = vec![self];
        let mut current = self;
        while let Some(parent_id) = &current.extends {
            if let Some(pos) = chain.iter().position(|layer| layer.id == *parent_id) {
                let mut cycle: Vec<String> =
                    chain[pos..].iter().map(|layer| layer.id.clone()).collect();
                cycle.push(parent_id.clone());
                return Err(AgentDefinitionError::ExtendsCycle { cycle });
            }
            let parent = known.get(parent_id.as_str()).copied().ok_or_else(|| {
                AgentDefinitionError::UnknownLayer {
                    layer: current.id.clone(),
                    extends: parent_id.clone(),
                    known: known.keys().map(|id| (*id).to_owned()).collect(),
                }
            })?;
            chain.push(parent);
            current = parent;
        }
        chain.reverse();
        Ok(chain)
    }
}

/// Collects every layer defined under `layers`, at any depth, by id.
fn collect_layers<'a>(
    layers: &'a [AgentDef],
    known: &mut BTreeMap<&'a str, &'a AgentDef>,
) -> Result<(), AgentDefinitionError> {
    for (index, layer) in layers.iter().enumerate() {
        if layer.id.trim().is_empty() {
            return Err(AgentDefinitionError::EmptyId {
                layer: format!("layer #{} under [[layer]]", index + 1),
            });
        }
        if let Some(previous) = known.insert(layer.id.as_str(), layer) {
            // The same definition attached twice (say, by two builder calls) is harmless.
            if !same_layer(previous, layer) {
                return Err(AgentDefinitionError::DuplicateLayer { layer: layer.id.clone() });
            }
        }
        collect_layers(&layer.layers, known)?;
    }
    Ok(())
}

fn same_layer(a: &AgentDef, b: &AgentDef) -> bool {
    AgentDef { layers: Vec::new(), source: String::new(), ..a.clone() }
        == AgentDef { layers: Vec::new(), source: String::new(), ..b.clone() }
}

/// Checks what can be checked of one layer on its own.
fn check_layer(layer: &AgentDef) -> Result<(), AgentDefinitionError> {
    validate_id(&layer.id)
        .map_err(|source| AgentDefinitionError::InvalidId { layer: layer.id.clone(), source })?;
    if let Some(version) = &layer.version {
        parse_plugin_version(version).map_err(|source| AgentDefinitionError::InvalidVersion {
            layer: layer.id.clone(),
            value: version.clone(),
            source,
        })?;
    }
    if let Some(flow) = &layer.flow {
        // A flow id may be qualified by its marketplace, like a plugin reference.
        for part in flow.id.split('/') {
            validate_id(part).map_err(|source| AgentDefinitionError::InvalidFlow {
                layer: layer.id.clone(),
                value: flow.id.clone(),
                source,
            })?;
        }
    }
    Ok(())
}

/// Accumulates the plugins of every layer, base first, each with the layer that added it.
///
/// A derived layer may list a plugin a base layer already lists: the derived reference
/// (say, a narrower range) replaces the base one in place and records the derived layer.
///
/// Each reference is parsed once and each plugin found by id in a map, so the work grows
/// with the number of references (n log n), not with its square.
fn accumulate_plugins(chain: &[&AgentDef]) -> Result<Vec<SpecPlugin>, AgentDefinitionError> {
    let mut plugins: Vec<SpecPlugin> = Vec::new();
    // The position in `plugins` of each plugin id.
    let mut at: BTreeMap<String, usize> = BTreeMap::new();
    let mut any_listed = false;
    for layer in chain {
        let Some(references) = &layer.plugins else { continue };
        any_listed = true;
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        for written in references {
            let reference = written.trim();
            let parsed = PluginRef::parse(reference).map_err(|source| {
                AgentDefinitionError::BadReference {
                    layer: layer.id.clone(),
                    value: written.clone(),
                    source,
                }
            })?;
            let id = parsed.id().to_owned();
            if let Some(first) = seen.insert(id.clone(), reference) {
                return Err(AgentDefinitionError::DuplicatePlugin {
                    layer: layer.id.clone(),
                    plugin: id,
                    first: first.to_owned(),
                    second: reference.to_owned(),
                });
            }
            let entry = SpecPlugin { reference: reference.to_owned(), layer: layer.id.clone() };
            match at.get(&id) {
                Some(&existing) => plugins[existing] = entry,
                None => {
                    at.insert(id, plugins.len());
                    plugins.push(entry);
                }
            }
        }
    }
    if !any_listed {
        plugins = DEFAULT_PLUGINS
            .iter()
            .map(|id| SpecPlugin { reference: (*id).to_owned(), layer: DEFAULT_LAYER.to_owned() })
            .collect();
    }
    Ok(plugins)
}

/// Returns the plugin id of a reference already known to parse.
fn plugin_id(reference: &str) -> String {
    PluginRef::parse(reference).map(|r| r.id().to_owned()).unwrap_or_default()
}

/// Returns the 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_from_one() {
        assert_eq!(line_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("ab", 99), (1, 3));
    }
}
