//! Phase 5 (opt-in, off by default): thinking blocks are kept only on the
//! last `keepLastTurns` assistant messages.
//!
//! Off by default because sliding the window re-writes an older turn on
//! every request, which pi-condense's authors measured as +33% cost from
//! prompt-cache misses. See docs/configuration.md.

use crate::message::{Message, Role};

use super::Working;

/// A copy of an assistant message without its thinking blocks.
pub fn without_thinking(m: &Message) -> Option<Message> {
    let mut value = m.to_exact_value().ok()?;
    let blocks = value.get_mut("content")?.as_array_mut()?;
    blocks.retain(|b| b.get("type").and_then(|t| t.as_str()) != Some("thinking"));
    Message::from_value(&value).ok()
}

pub(crate) fn apply(work: &mut Working<'_>, keep_last: usize) {
    let assistants: Vec<usize> = (0..work.len())
        .filter(|&i| work.get(i).is(&Role::Assistant))
        .collect();
    if assistants.len() <= keep_last {
        return;
    }
    let cut = assistants.len() - keep_last;
    for &i in &assistants[..cut] {
        if work.get(i).skeleton().thinking_blocks == 0 {
            continue;
        }
        if let Some(stripped) = without_thinking(work.get(i)) {
            work.replace(i, stripped);
        }
    }
}
