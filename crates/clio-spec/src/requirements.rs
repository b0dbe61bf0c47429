//! What an agent or plugin needs from a model ([`Requires`]) and what it would like
//! ([`Prefers`]).
//!
//! Unset fields require or prefer nothing. Both refuse unknown fields when read, so a
//! typo such as `vison = true` is an error instead of a silently weaker requirement.

use serde::{Deserialize, Serialize};

/// Capabilities a model must have to run an agent.
///
/// `false` and `0` mean "no requirement". Combining two requirements with
/// [`Requires::union`] keeps the stricter of both, field by field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Requires {
    /// The model must support tool calling.
    pub tool_calling: bool,
    /// The model must accept images.
    pub vision: bool,
    /// The smallest context window, in tokens, the model must offer.
    pub context_tokens: u64,
    /// The smallest output budget, in tokens, the model must offer.
    pub output_tokens: u64,
}

impl Requires {
    /// Returns the stricter of `self` and `other`, field by field.
    ///
    /// This is how layers, plugins and subagents combine their needs: a model that
    /// satisfies the union satisfies each of them.
    pub fn union(&self, other: &Requires) -> Requires {
        Requires {
            tool_calling: self.tool_calling || other.tool_calling,
            vision: self.vision || other.vision,
            context_tokens: self.context_tokens.max(other.context_tokens),
            output_tokens: self.output_tokens.max(other.output_tokens),
        }
    }

    /// Returns true when nothing is required.
    pub fn is_empty(&self) -> bool {
        *self == Requires::default()
    }
}

/// Choices an agent would like for its model; advice, never a requirement.
///
/// An empty string means "no preference".
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Prefers {
    /// A preferred model, `account/model` or a catalog id.
    pub model: String,
    /// A preferred provider.
    pub provider: String,
    /// A preferred reasoning effort, such as `low` or `high`.
    pub effort: String,
}

impl Prefers {
    /// Returns `self`'s preferences, with `fallback`'s filling the fields `self` leaves
    /// unset.
    ///
    /// Preferences cannot be "stricter", so the union of two is an overlay: the more
    /// specific side (a derived layer, a call) wins where it says something.
    pub fn union(&self, fallback: &Prefers) -> Prefers {
        fn pick(mine: &str, theirs: &str) -> String {
            if mine.is_empty() { theirs.to_owned() } else { mine.to_owned() }
        }
        Prefers {
            model: pick(&self.model, &fallback.model),
            provider: pick(&self.provider, &fallback.provider),
            effort: pick(&self.effort, &fallback.effort),
        }
    }

    /// Returns true when nothing is preferred.
    pub fn is_empty(&self) -> bool {
        self.model.is_empty() && self.provider.is_empty() && self.effort.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_is_stricter_field_by_field() {
        let a = Requires { tool_calling: true, context_tokens: 8_000, ..Requires::default() };
        let b = Requires { vision: true, context_tokens: 64_000, output_tokens: 10, ..a };
        let u = a.union(&Requires { tool_calling: false, ..b });
        assert_eq!(
            u,
            Requires {
                tool_calling: true,
                vision: true,
                context_tokens: 64_000,
                output_tokens: 10
            }
        );
        assert!(Requires::default().is_empty());
    }

    #[test]
    fn prefers_union_lets_the_specific_side_win() {
        let derived = Prefers { model: "local/qwen".into(), ..Prefers::default() };
        let base =
            Prefers { model: "x/y".into(), provider: "ollama".into(), effort: String::new() };
        let u = derived.union(&base);
        assert_eq!(u.model, "local/qwen");
        assert_eq!(u.provider, "ollama");
        assert!(u.effort.is_empty());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = serde_json::from_str::<Requires>(r#"{"vison": true}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `vison`"), "{err}");
        let err = serde_json::from_str::<Prefers>(r#"{"modle": "x"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `modle`"), "{err}");
    }

    #[test]
    fn a_bool_is_not_a_number() {
        assert!(serde_json::from_str::<Requires>(r#"{"context_tokens": true}"#).is_err());
        assert!(serde_json::from_str::<Requires>(r#"{"vision": 1}"#).is_err());
    }
}
