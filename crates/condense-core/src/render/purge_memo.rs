//! What the error purge keeps between renders.
//!
//! A failed call's purged copy is rebuilt from the assistant message's full
//! JSON (parse, replace the arguments, serialize). The host renders before
//! every LLM call, twice under the cache-aware policy, and the same
//! assistant stays ripe for the rest of the session, so without a memo a
//! long session parses every failed call's message again at every call.
//! The copy depends only on the message, which of its calls are ripe and
//! the size threshold, so it is kept under exactly those. A render never
//! depends on the memo being warm: a miss recomputes the same copy.

use std::sync::Mutex;

use crate::fxhash::FxHashMap;
use crate::message::Message;

/// The purge phase's memo inside [`State`](crate::state::State). A clone
/// starts empty (it belongs to one state value).
#[derive(Debug, Default)]
pub(crate) struct PurgeMemo {
    /// By the original's identity ([`Message::identity`]); the entry holds
    /// the original, so the identity cannot be reused while it is kept.
    copies: Mutex<FxHashMap<usize, PurgedCopy>>,
}

impl Clone for PurgeMemo {
    fn clone(&self) -> Self {
        PurgeMemo::default()
    }
}

#[derive(Debug)]
struct PurgedCopy {
    original: Message,
    ripe: Vec<String>,
    min_arg_chars: u64,
    /// `None` when no ripe call's arguments were large enough (or the
    /// message could not be rebuilt exactly): the message stays as it is.
    purged: Option<Message>,
}

impl PurgeMemo {
    /// The purged copy of `original` with calls `ripe` purged at threshold
    /// `min_arg_chars`, from the memo or made by `make`.
    pub(crate) fn get_or_make(
        &self,
        original: &Message,
        ripe: &[&str],
        min_arg_chars: u64,
        make: impl FnOnce() -> Option<Message>,
    ) -> Option<Message> {
        let key = original.identity();
        if let Ok(copies) = self.copies.lock() {
            if let Some(c) = copies.get(&key).filter(|c| {
                c.original.same(original)
                    && c.min_arg_chars == min_arg_chars
                    && c.ripe.iter().map(String::as_str).eq(ripe.iter().copied())
            }) {
                return c.purged.clone();
            }
        }
        let purged = make();
        if let Ok(mut copies) = self.copies.lock() {
            copies.insert(
                key,
                PurgedCopy {
                    original: original.clone(),
                    ripe: ripe.iter().map(|s| (*s).to_owned()).collect(),
                    min_arg_chars,
                    purged: purged.clone(),
                },
            );
        }
        purged
    }
}
