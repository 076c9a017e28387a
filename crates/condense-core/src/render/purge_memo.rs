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
//!
//! The memo holds its originals, so copies of messages that left the
//! branch (a compaction, a host that rewrote its context) would stay for
//! the session's life: whenever the memo has doubled since it was last
//! trimmed, the copies whose original only the memo still holds go.

use std::sync::Mutex;

use crate::message::Message;
use rustc_hash::FxHashMap;

/// The purge phase's memo, one of a branch's
/// [`RenderMemos`](super::RenderMemos). A clone starts empty (it belongs to
/// one state value).
#[derive(Debug, Default)]
pub(crate) struct PurgeMemo {
    /// By the original's identity ([`Message::identity`]); the entry holds
    /// the original, so the identity cannot be reused while it is kept.
    copies: Mutex<Copies>,
}

#[derive(Debug, Default)]
struct Copies {
    by_identity: FxHashMap<usize, PurgedCopy>,
    /// How many copies were kept after the last trim.
    kept: usize,
}

impl Copies {
    fn insert(&mut self, key: usize, copy: PurgedCopy) {
        self.by_identity.insert(key, copy);
        if self.by_identity.len() > 2 * self.kept.max(8) {
            self.by_identity.retain(|_, c| !c.original.is_unshared());
            self.kept = self.by_identity.len();
        }
    }
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
            if let Some(c) = copies.by_identity.get(&key).filter(|c| {
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

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::PurgeMemo;
    use crate::message::Message;

    fn assistant(n: usize) -> Message {
        Message::from_value(&serde_json::json!({"role": "assistant", "timestamp": n,
            "content": [{"type": "toolCall", "id": "c", "name": "write", "arguments": {}}]}))
        .expect("a message")
    }

    /// Copies of messages nothing else holds any more are dropped as the
    /// memo grows; copies of messages still held stay and are reused.
    #[test]
    fn copies_of_messages_gone_from_the_branch_are_trimmed() {
        let memo = PurgeMemo::default();
        let made = Cell::new(0usize);
        let get = |m: &Message| {
            memo.get_or_make(m, &["c"], 0, || {
                made.set(made.get() + 1);
                None
            })
        };
        let held: Vec<Message> = (0..10).map(assistant).collect();
        for m in &held {
            get(m);
        }
        for n in 10..1000 {
            // Rendered once, then gone (a compaction dropped it).
            get(&assistant(n));
        }
        let kept = memo.copies.lock().expect("lock").by_identity.len();
        assert!(kept <= 2 * 8 + 10, "{kept} copies kept");
        let before = made.get();
        for m in &held {
            get(m);
        }
        assert_eq!(made.get(), before, "the held messages' copies were reused");
    }
}
