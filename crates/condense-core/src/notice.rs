//! Messages for the user, as values: whoever produces one (a flush, the
//! summarizer) returns it, and the host decides how to show it.

use std::fmt;

/// How loud a notice is. On the wire (the sidecar protocol's `notify`
/// effect) it is spelled as [`NoticeLevel::as_str`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoticeLevel {
    /// Informational, or good news (the summarizer model recovered).
    Info,
    /// Degraded but working (fallback engaged, a call timed out).
    Warning,
    /// Something failed (a summarization, a chain compression).
    Error,
}

impl NoticeLevel {
    /// The level as pi's `ui.notify` spells it: `info`, `warning`, `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeLevel::Info => "info",
            NoticeLevel::Warning => "warning",
            NoticeLevel::Error => "error",
        }
    }
}

/// A message for the user.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Notice {
    /// How loud.
    pub level: NoticeLevel,
    /// What to say.
    pub text: String,
}

impl Notice {
    /// An info notice.
    pub fn info(text: impl Into<String>) -> Notice {
        Notice {
            level: NoticeLevel::Info,
            text: text.into(),
        }
    }

    /// A warning.
    pub fn warning(text: impl Into<String>) -> Notice {
        Notice {
            level: NoticeLevel::Warning,
            text: text.into(),
        }
    }

    /// An error.
    pub fn error(text: impl Into<String>) -> Notice {
        Notice {
            level: NoticeLevel::Error,
            text: text.into(),
        }
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
