//! The summarizer's messages for the user, as core [`Notice`] values for
//! the host to show.
//!
//! The texts follow pi-condense 2.9.1, with the product prefix
//! `pi-condense:` written as `condense:`; `pruner:` (the command's name) is
//! kept.

use condense_core::Notice;

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
