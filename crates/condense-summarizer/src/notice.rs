//! Messages for the user, returned as values for the host to show.
//!
//! The texts follow pi-condense 2.9.1, with the product prefix
//! `pi-condense:` written as `condense:`; `pruner:` (the command's name) is
//! kept.

use std::fmt;

/// How loud a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoticeLevel {
    /// Good news (the summarizer model recovered).
    Info,
    /// Degraded but working (fallback engaged, a call timed out).
    Warning,
    /// A summarization failed.
    Error,
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

    /// The warning that calls now go to the session model.
    pub fn fallback_entered(primary: &str, session: &str) -> Notice {
        Notice::warning(format!(
            "condense: summarizer model {primary} failing, using session model {session} until it recovers"
        ))
    }

    /// The news that the summarizer model works again.
    pub fn fallback_recovered(primary: &str) -> Notice {
        Notice::info(format!("condense: summarizer model {primary} recovered"))
    }

    /// A call abandoned after a timeout (`message` says which).
    pub fn timed_out(message: &str) -> Notice {
        Notice::warning(format!("condense: {message}; summarizer call abandoned"))
    }

    /// A failed summarization.
    pub fn failed(message: &str) -> Notice {
        Notice::error(format!("pruner: summarization failed: {message}"))
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
