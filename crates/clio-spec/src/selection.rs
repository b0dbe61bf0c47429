//! [`FlowSelection`]: a flow chosen by id, with its options, as agent definitions and
//! frozen specs name it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A flow chosen by id, with options for it: `"react"` or `{id = "campaign", options = {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "FlowSelectionRepr")]
pub struct FlowSelection {
    /// The flow's id.
    pub id: String,
    /// The options passed to the flow; checked by the flow when it runs.
    pub options: Map<String, Value>,
}

impl FlowSelection {
    /// Selects flow `id` with no options.
    pub fn new(id: impl Into<String>) -> FlowSelection {
        FlowSelection { id: id.into(), options: Map::new() }
    }
}

#[derive(Deserialize)]
#[serde(untagged, expecting = "a flow id such as \"react\", or a table with `id` and `options`")]
enum FlowSelectionRepr {
    Id(String),
    Selection {
        id: String,
        #[serde(default)]
        options: Map<String, Value>,
    },
}

impl From<FlowSelectionRepr> for FlowSelection {
    fn from(repr: FlowSelectionRepr) -> FlowSelection {
        match repr {
            FlowSelectionRepr::Id(id) => FlowSelection::new(id),
            FlowSelectionRepr::Selection { id, options } => FlowSelection { id, options },
        }
    }
}
