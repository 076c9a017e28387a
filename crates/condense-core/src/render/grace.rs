//! Recovery grace window: `context_tree_query` output stays verbatim for a
//! few user-turn groups after it was recovered.
//!
//! Computed positionally on every render, never stored: a recovery result
//! preceded by `seen` user messages is in grace while
//! `total_user_messages - seen <= grace_turns`. Only recovery output gets a
//! grace window; a global window would keep most sessions (one user turn)
//! verbatim.

use std::collections::HashSet;

use crate::message::{Message, Role};
use crate::occurrence::OccurrenceKey;

/// The name of condense's recovery tool.
pub const QUERY_TOOL_NAME: &str = "context_tree_query";

/// Calls `f(position, message)` for each recovery result in grace.
pub(crate) fn for_each_in_grace<'m, I>(
    messages: I,
    grace_turns: u32,
    mut f: impl FnMut(usize, &'m Message),
) where
    I: Iterator<Item = &'m Message> + Clone,
{
    if grace_turns == 0 {
        return;
    }
    let now = messages.clone().filter(|m| m.is(&Role::User)).count();
    let mut seen = 0usize;
    for (i, m) in messages.enumerate() {
        if m.is(&Role::User) {
            seen += 1;
        } else if m.is(&Role::ToolResult)
            && m.skeleton().tool_name.as_deref() == Some(QUERY_TOOL_NAME)
            && now - seen <= grace_turns as usize
        {
            f(i, m);
        }
    }
}

/// Occurrence keys of the recovery results in grace (used by chain
/// eligibility, which defers chains holding one).
pub fn in_grace_keys(messages: &[Message], grace_turns: u32) -> HashSet<OccurrenceKey> {
    let mut out = HashSet::new();
    for_each_in_grace(messages.iter(), grace_turns, |_, m| {
        if let Some(id) = &m.skeleton().tool_call_id {
            out.insert(OccurrenceKey::new(id.clone(), m.timestamp()));
        }
    });
    out
}
