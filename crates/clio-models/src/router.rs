//! [`RouterAllowlist`]: the inherited allowlist of providers and models of SPEC §8
//! (`restrict_router`), applied to every request, every retry and every automatic
//! fallback.
//!
//! An allowlist only ever narrows: a child's allowlist is its leader's
//! [restricted](RouterAllowlist::restrict) by its own, never widened.

use std::collections::BTreeSet;
use std::fmt;

use crate::{ModelError, ModelInfo};

/// Which providers and models requests may go to.
///
/// Each side is either unrestricted (the default) or restricted by one or more sets of
/// names, one per layer that narrowed it; a name passes a side when every set holds it.
/// A model passes when its provider passes and its name (`account/model`, or its id
/// alone) passes. An empty set allows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouterAllowlist {
    // Invariant: each set is one restriction; no sets means unrestricted. The sets are
    // kept apart rather than intersected because one model has two names (`acct/x` and
    // `x`): a leader allowing `x` and a child allowing `acct/x` both allow that model,
    // while the intersection of their sets would be empty.
    providers: Vec<BTreeSet<String>>,
    models: Vec<BTreeSet<String>>,
}

impl RouterAllowlist {
    /// Returns an allowlist that allows everything.
    pub fn unrestricted() -> RouterAllowlist {
        RouterAllowlist::default()
    }

    /// Returns this allowlist narrowed to the `providers` named.
    pub fn with_providers<I, S>(mut self, providers: I) -> RouterAllowlist
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        push_unique(&mut self.providers, providers.into_iter().map(Into::into).collect());
        self
    }

    /// Returns this allowlist narrowed to the `models` named (`account/model` or an id).
    pub fn with_models<I, S>(mut self, models: I) -> RouterAllowlist
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        push_unique(&mut self.models, models.into_iter().map(Into::into).collect());
        self
    }

    /// Returns true when the allowlist restricts nothing.
    pub fn is_unrestricted(&self) -> bool {
        self.providers.is_empty() && self.models.is_empty()
    }

    /// Returns the allowlist a child inherits: what both `self` (the leader's) and
    /// `child` allow.
    pub fn restrict(&self, child: &RouterAllowlist) -> RouterAllowlist {
        let mut both = self.clone();
        for set in &child.providers {
            push_unique(&mut both.providers, set.clone());
        }
        for set in &child.models {
            push_unique(&mut both.models, set.clone());
        }
        both
    }

    /// Returns true when requests may go to `model`.
    pub fn allows(&self, model: &ModelInfo) -> bool {
        let name = model.name();
        self.providers.iter().all(|set| set.contains(&model.provider))
            && self.models.iter().all(|set| set.contains(&name) || set.contains(&model.id))
    }

    /// Checks that requests may go to `model`, or returns [`ModelError::NotAllowed`].
    pub fn check(&self, model: &ModelInfo) -> Result<(), ModelError> {
        if self.allows(model) {
            Ok(())
        } else {
            Err(ModelError::NotAllowed {
                model: model.name(),
                provider: model.provider.clone(),
                allowed: self.to_string(),
            })
        }
    }
}

fn push_unique(sets: &mut Vec<BTreeSet<String>>, set: BTreeSet<String>) {
    if !sets.contains(&set) {
        sets.push(set);
    }
}

impl fmt::Display for RouterAllowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn side(sets: &[BTreeSet<String>]) -> String {
            if sets.is_empty() {
                return "any".into();
            }
            let shown: Vec<String> = sets
                .iter()
                .map(|s| {
                    if s.is_empty() {
                        "none".into()
                    } else {
                        s.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
                    }
                })
                .collect();
            if shown.len() == 1 { shown.join("") } else { format!("[{}]", shown.join("] and [")) }
        }
        write!(f, "providers: {}; models: {}", side(&self.providers), side(&self.models))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlists_only_narrow() {
        let local = ModelInfo::new("local", "qwen", "ollama");
        let hosted = ModelInfo::new("work", "big", "openai");
        let leader = RouterAllowlist::unrestricted().with_providers(["ollama", "vllm"]);
        assert!(leader.allows(&local) && !leader.allows(&hosted));
        let child = RouterAllowlist::unrestricted().with_providers(["openai", "ollama"]);
        let inherited = leader.restrict(&child);
        assert!(inherited.allows(&local) && !inherited.allows(&hosted));
        let by_model = inherited.restrict(&RouterAllowlist::unrestricted().with_models(["qwen"]));
        assert!(by_model.allows(&local));
        let nothing = leader.restrict(&RouterAllowlist::unrestricted().with_providers(["openai"]));
        assert!(!nothing.allows(&local));
        assert_eq!(
            nothing.check(&local).map_err(|e| e.to_string()),
            Err("model `local/qwen` of provider `ollama` is not allowed by the router \
                 allowlist (providers: [ollama, vllm] and [openai]; models: any)"
                .to_owned())
        );
    }
}
