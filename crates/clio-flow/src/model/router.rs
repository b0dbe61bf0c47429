//! [`RouterAllowlist`]: the inherited allowlist of providers and models of SPEC §8
//! (`restrict_router`), applied to every request, every retry and every automatic
//! fallback.
//!
//! An allowlist only ever narrows: a child's allowlist is its leader's
//! [restricted](RouterAllowlist::restrict) by its own, never widened.

use std::collections::BTreeSet;
use std::fmt;

use crate::model::{ModelError, ModelInfo};

/// Which providers and models requests may go to.
///
/// Each side is either unrestricted (the default) or a set of names; a model passes when
/// both its provider and its name (`account/model`, or its id alone) are allowed. An
/// empty set allows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouterAllowlist {
    // `None` means unrestricted; `Some(empty)` allows nothing.
    providers: Option<BTreeSet<String>>,
    models: Option<BTreeSet<String>>,
}

impl RouterAllowlist {
    /// Returns an allowlist that allows everything.
    pub fn unrestricted() -> RouterAllowlist {
        RouterAllowlist::default()
    }

    /// Returns this allowlist allowing only the `providers` named.
    pub fn with_providers<I, S>(mut self, providers: I) -> RouterAllowlist
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.providers = Some(providers.into_iter().map(Into::into).collect());
        self
    }

    /// Returns this allowlist allowing only the `models` named (`account/model` or an
    /// id).
    pub fn with_models<I, S>(mut self, models: I) -> RouterAllowlist
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.models = Some(models.into_iter().map(Into::into).collect());
        self
    }

    /// Returns true when the allowlist restricts nothing.
    pub fn is_unrestricted(&self) -> bool {
        self.providers.is_none() && self.models.is_none()
    }

    /// Returns the allowlist a child inherits: what both `self` (the leader's) and
    /// `child` allow.
    pub fn restrict(&self, child: &RouterAllowlist) -> RouterAllowlist {
        fn both(
            a: &Option<BTreeSet<String>>,
            b: &Option<BTreeSet<String>>,
        ) -> Option<BTreeSet<String>> {
            match (a, b) {
                (None, None) => None,
                (Some(x), None) | (None, Some(x)) => Some(x.clone()),
                (Some(x), Some(y)) => Some(x.intersection(y).cloned().collect()),
            }
        }
        RouterAllowlist {
            providers: both(&self.providers, &child.providers),
            models: both(&self.models, &child.models),
        }
    }

    /// Returns true when requests may go to `model`.
    pub fn allows(&self, model: &ModelInfo) -> bool {
        let provider_ok = self.providers.as_ref().is_none_or(|p| p.contains(&model.provider));
        let model_ok =
            self.models.as_ref().is_none_or(|m| m.contains(&model.name()) || m.contains(&model.id));
        provider_ok && model_ok
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

impl fmt::Display for RouterAllowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn side(set: &Option<BTreeSet<String>>) -> String {
            match set {
                None => "any".into(),
                Some(s) if s.is_empty() => "none".into(),
                Some(s) => s.iter().map(String::as_str).collect::<Vec<_>>().join(", "),
            }
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
                 allowlist (providers: none; models: any)"
                .to_owned())
        );
    }
}
