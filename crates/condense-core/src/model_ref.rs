//! Which model: a provider's name and a model id, as pi names models.

use std::fmt;

/// A model: the identity a summarizer fallback compares, the name notices
/// show, and what a session's `model_change` entries record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelRef {
    /// The provider's name (`anthropic`, `openai`, …).
    pub provider: String,
    /// The model id within the provider.
    pub id: String,
    /// A display name, if the host has one.
    pub name: Option<String>,
}

impl ModelRef {
    /// A model without a display name.
    pub fn new(provider: impl Into<String>, id: impl Into<String>) -> ModelRef {
        ModelRef {
            provider: provider.into(),
            id: id.into(),
            name: None,
        }
    }

    /// The same model with a display name.
    pub fn named(mut self, name: impl Into<String>) -> ModelRef {
        self.name = Some(name.into());
        self
    }

    /// Parses a `summarizerModel` value, `provider/id`, split on the first
    /// `/`. `None` for `default`, or when either side is empty.
    pub fn parse(spec: &str) -> Option<ModelRef> {
        let (provider, id) = spec.split_once('/')?;
        if provider.is_empty() || id.is_empty() {
            return None;
        }
        Some(ModelRef::new(provider, id))
    }

    /// What notices call the model: its display name, else `provider/id`.
    pub fn label(&self) -> String {
        match &self.name {
            Some(name) if !name.is_empty() => name.clone(),
            _ => format!("{}/{}", self.provider, self.id),
        }
    }

    /// Whether `primary` and `session` are genuinely different models (by
    /// provider or id), so falling back from one to the other can help.
    /// `false` when either is unknown.
    pub fn is_distinct(primary: Option<&ModelRef>, session: Option<&ModelRef>) -> bool {
        match (primary, session) {
            (Some(p), Some(s)) => p.provider != s.provider || p.id != s.id,
            _ => false,
        }
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_provider_and_id_on_the_first_slash() {
        assert_eq!(ModelRef::parse("default"), None);
        assert_eq!(ModelRef::parse("/x"), None);
        assert_eq!(ModelRef::parse("x/"), None);
        let m = ModelRef::parse("openrouter/anthropic/claude").unwrap();
        assert_eq!(
            (m.provider.as_str(), m.id.as_str()),
            ("openrouter", "anthropic/claude")
        );
        assert_eq!(m.label(), "openrouter/anthropic/claude");
        assert_eq!(m.named("Claude").to_string(), "Claude");
    }

    #[test]
    fn distinct_only_when_both_known_and_different() {
        let a = ModelRef::new("p", "a");
        let b = ModelRef::new("p", "b");
        assert!(ModelRef::is_distinct(Some(&a), Some(&b)));
        assert!(!ModelRef::is_distinct(
            Some(&a),
            Some(&a.clone().named("A"))
        ));
        assert!(!ModelRef::is_distinct(Some(&a), None));
    }
}
