//! Turn numbers over the whole branch.
//!
//! pi-condense numbers turns by counting every assistant message on
//! `getBranch()`, and writes its frontier in that numbering. pi's context
//! (what the engine holds) leaves out what a compaction summarized, so the
//! engine counts the assistants the context no longer holds
//! (`turns_before`) and adds them: without that, every turn after a
//! compaction would number below the frontier and never be captured.

use condense_core::{Message, Role};

/// The assistant messages among `messages`.
pub(crate) fn assistants(messages: &[Message]) -> i64 {
    let n = messages.iter().filter(|m| m.is(&Role::Assistant)).count();
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A number for the agent run the last of `messages` belongs to: the
/// user prompts the context holds, plus the turns a compaction left out
/// (`turns_before`; a run left out had at least one), so a later run never
/// numbers like an earlier one. Only equality between runs means anything.
pub(crate) fn runs(messages: &[Message], turns_before: i64) -> u32 {
    let users = messages.iter().filter(|m| m.is(&Role::User)).count();
    let before = usize::try_from(turns_before).unwrap_or(0);
    u32::try_from(users.saturating_add(before)).unwrap_or(u32::MAX)
}

/// `turns_before` once the host replaced the whole context (`keep == 0`:
/// pi compacted, or a host resent everything): the new context's first
/// assistant keeps the number it had when the old context held it; one
/// the old context never held comes after all of the old context's turns.
pub(crate) fn turns_before_replacing(old: &[Message], old_before: i64, new: &[Message]) -> i64 {
    let first = new.iter().find(|m| m.is(&Role::Assistant));
    let at = first.and_then(|a| old.iter().position(|m| m.json() == a.json()));
    let before = at.map_or(old, |at| &old[..at]);
    old_before.saturating_add(assistants(before))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(json: &str) -> Message {
        Message::from_json(json).expect("a message")
    }

    fn user(n: u32) -> Message {
        msg(&format!(
            r#"{{"role":"user","content":"u{n}","timestamp":{n}}}"#
        ))
    }

    fn assistant(n: u32) -> Message {
        msg(&format!(
            r#"{{"role":"assistant","content":[{{"type":"text","text":"a{n}"}}],"timestamp":{n}}}"#
        ))
    }

    fn summary() -> Message {
        msg(r#"{"role":"compactionSummary","summary":"s","tokensBefore":9,"timestamp":99}"#)
    }

    #[test]
    fn a_compaction_keeps_the_numbers_of_the_turns_it_kept() {
        let old = [
            user(1),
            assistant(2),
            user(3),
            assistant(4),
            user(5),
            assistant(6),
        ];
        // pi kept from the second user message on.
        let new = [
            summary(),
            user(3),
            assistant(4),
            user(5),
            assistant(6),
            user(7),
        ];
        assert_eq!(turns_before_replacing(&old, 0, &new), 1);
        assert_eq!(turns_before_replacing(&old, 10, &new), 11);
    }

    #[test]
    fn a_context_that_kept_no_old_turn_numbers_after_all_of_them() {
        let old = [user(1), assistant(2), user(3), assistant(4)];
        let new = [summary(), user(5)];
        assert_eq!(turns_before_replacing(&old, 3, &new), 5);
        let new = [summary(), user(5), assistant(6)];
        assert_eq!(turns_before_replacing(&old, 3, &new), 5);
    }

    #[test]
    fn the_same_context_resent_keeps_its_numbers() {
        let old = [user(1), assistant(2), user(3), assistant(4)];
        let mut new = old.to_vec();
        new.push(user(5));
        assert_eq!(turns_before_replacing(&old, 7, &new), 7);
    }
}
