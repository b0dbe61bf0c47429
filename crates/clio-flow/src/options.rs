//! Typed flow options: [`OptionSpec`] declares one (name, [`OptionType`], default), and
//! [`check_options`] checks given values against the declarations, converts them where it
//! can, fills defaults and names **every** bad option with the type it needs. A bool is
//! never accepted for a number; an option no declaration names is refused; an option
//! declared [`OptionType::Any`] passes unchecked (the seed's unannotated attribute).

use serde_json::{Map, Number, Value};

use crate::error::{FlowError, OptionProblem};

/// The type an option needs.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionType {
    /// Anything; passes unchecked.
    Any,
    /// `true` or `false`.
    Bool,
    /// An integer within the optional bounds (inclusive). A float with an integral value
    /// converts; a bool never does.
    Int {
        /// The smallest value allowed.
        min: Option<i64>,
        /// The largest value allowed.
        max: Option<i64>,
    },
    /// A number; an integer converts. A bool never does.
    Float,
    /// Text.
    Str,
    /// One of these texts.
    OneOf(Vec<String>),
    /// A list whose items have the inner type (a tuple in the seed).
    List(Box<OptionType>),
    /// A mapping.
    Map,
    /// The inner type, or null.
    Optional(Box<OptionType>),
}

impl OptionType {
    /// Returns an integer type without bounds.
    pub fn int() -> OptionType {
        OptionType::Int { min: None, max: None }
    }

    /// Returns a list of texts.
    pub fn strings() -> OptionType {
        OptionType::List(Box::new(OptionType::Str))
    }

    /// Returns the type's name as the problems report it.
    pub fn describe(&self) -> String {
        match self {
            OptionType::Any => "anything".into(),
            OptionType::Bool => "a bool".into(),
            OptionType::Int { min: None, max: None } => "an integer".into(),
            OptionType::Int { min: Some(lo), max: None } => format!("an integer >= {lo}"),
            OptionType::Int { min: None, max: Some(hi) } => format!("an integer <= {hi}"),
            OptionType::Int { min: Some(lo), max: Some(hi) } => {
                format!("an integer from {lo} to {hi}")
            }
            OptionType::Float => "a number".into(),
            OptionType::Str => "text".into(),
            OptionType::OneOf(items) => format!("one of {}", items.join(", ")),
            OptionType::List(inner) => format!("a list of {}", inner.describe()),
            OptionType::Map => "a mapping".into(),
            OptionType::Optional(inner) => format!("{} or null", inner.describe()),
        }
    }

    /// Returns `value` converted to this type, or `None` when it does not fit.
    pub fn convert(&self, value: &Value) -> Option<Value> {
        match (self, value) {
            (OptionType::Any, v) => Some(v.clone()),
            (OptionType::Bool, Value::Bool(b)) => Some(Value::Bool(*b)),
            (OptionType::Int { min, max }, Value::Number(n)) => {
                let i = n.as_i64().or_else(|| {
                    n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i64)
                })?;
                let in_range = min.is_none_or(|lo| i >= lo) && max.is_none_or(|hi| i <= hi);
                in_range.then(|| Value::Number(i.into()))
            }
            (OptionType::Float, Value::Number(n)) => {
                n.as_f64().and_then(Number::from_f64).map(Value::Number)
            }
            (OptionType::Str, Value::String(s)) => Some(Value::String(s.clone())),
            (OptionType::OneOf(items), Value::String(s)) => {
                items.contains(s).then(|| Value::String(s.clone()))
            }
            (OptionType::List(inner), Value::Array(items)) => items
                .iter()
                .map(|item| inner.convert(item))
                .collect::<Option<Vec<_>>>()
                .map(Value::Array),
            (OptionType::Map, Value::Object(m)) => Some(Value::Object(m.clone())),
            (OptionType::Optional(_), Value::Null) => Some(Value::Null),
            (OptionType::Optional(inner), v) => inner.convert(v),
            _ => None,
        }
    }
}

/// One declared option of a flow.
#[derive(Debug, Clone, PartialEq)]
pub struct OptionSpec {
    /// Its name.
    pub name: String,
    /// The type it needs.
    pub ty: OptionType,
    /// Its default value.
    pub default: Value,
}

impl OptionSpec {
    /// Declares option `name` of type `ty` with `default`.
    pub fn new(name: impl Into<String>, ty: OptionType, default: Value) -> OptionSpec {
        OptionSpec { name: name.into(), ty, default }
    }
}

/// The names of the four limits, which every flow accepts as options.
pub const LIMIT_NAMES: [&str; 4] =
    ["max_depth", "max_concurrency", "max_model_calls", "budget_tokens"];

/// Checks `given` against `specs` for flow `flow`: returns every declared option, converted,
/// with defaults for those not given, plus any of the four limits given; or
/// [`FlowError::OptionsInvalid`] naming every bad or unknown option.
pub fn check_options(
    flow: &str,
    specs: &[OptionSpec],
    given: &Map<String, Value>,
) -> Result<Map<String, Value>, FlowError> {
    let mut out = Map::new();
    let mut problems = Vec::new();
    for spec in specs {
        out.insert(spec.name.clone(), spec.default.clone());
    }
    for (name, value) in given {
        let ty = match specs.iter().find(|s| &s.name == name) {
            Some(spec) => spec.ty.clone(),
            None if LIMIT_NAMES.contains(&name.as_str()) => {
                OptionType::Int { min: Some(0), max: None }
            }
            None => {
                problems.push(OptionProblem {
                    option: name.clone(),
                    needs: "no such option".into(),
                    got: value.clone(),
                });
                continue;
            }
        };
        match ty.convert(value) {
            Some(v) => {
                out.insert(name.clone(), v);
            }
            None => problems.push(OptionProblem {
                option: name.clone(),
                needs: ty.describe(),
                got: value.clone(),
            }),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(FlowError::OptionsInvalid { flow: flow.to_owned(), problems })
    }
}
