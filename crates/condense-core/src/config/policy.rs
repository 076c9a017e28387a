//! Which display policy a session renders under. The setting lives with the
//! rest of the configuration; the switch decisions it selects are the
//! `policy` module's.

/// Which display policy renders the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// pi-condense's behaviour: everything summarized is shown immediately;
    /// switch entries are ignored.
    Reference,
    /// Summaries are pending until a switch entry; switches are scheduled by
    /// [`decide_switch`](crate::policy::decide_switch).
    CacheAware,
}

impl Policy {
    /// Every policy, default first.
    pub const ALL: [Policy; 2] = [Policy::CacheAware, Policy::Reference];

    /// The settings spelling: `reference` or `cache-aware`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Reference => "reference",
            Policy::CacheAware => "cache-aware",
        }
    }

    /// Parses the settings spelling (case-sensitive); `None` for anything else.
    pub fn from_name(name: &str) -> Option<Policy> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// True when pending content waits for a switch entry.
    pub fn gates_on_switch(self) -> bool {
        self == Policy::CacheAware
    }
}
