//! What a rescan read out of each turn, kept between rescans.
//!
//! Every trigger the cache-aware policy weighs rescans the branch for what
//! is pending, and while no flush pays the pending turns pile up: without a
//! memo each ask parses every pending assistant and decodes every result
//! again. What a turn yields before the state and the protection rules
//! filter it (the assistant's prose, each call with its first result)
//! depends only on the assistant and the results it pairs with, and a
//! message never changes, so it is kept under those very messages
//! (compared by identity). A rescan never depends on the memo being warm: a
//! miss reads the same turn again.
//!
//! A turn whose every call is settled (summarized, or unanswered in its
//! turn) is skipped before the memo is asked, so the memo forgets it when
//! a rescan finds it settled: a long session's history is not held a
//! second time as reads. The memo holds its messages, so turns that left
//! the branch (flushed and compacted away) would stay for the session's
//! life: whenever the memo has doubled since it was last trimmed, the turns
//! whose assistant only the memo still holds go.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::CapturedCall;
use crate::message::Message;
use crate::text::SharedText;

/// One call of a turn as read.
#[derive(Debug)]
pub(super) struct CallRead {
    /// The call's id.
    pub(super) id: String,
    /// The first result answering it, and the call captured with it. The
    /// call's text is a window on the result's JSON where it can be; a
    /// decoded text larger than [`KEPT_TEXT_BYTES`] is not kept (the call
    /// holds an empty one): it is decoded again at each use, so a giant
    /// output is not held a second time for the session.
    pub(super) answered: Option<(Message, CapturedCall)>,
}

/// The largest result (its JSON, in bytes) whose decoded text the memo
/// keeps.
pub(super) const KEPT_TEXT_BYTES: usize = 32 * 1024;

/// The text of `result` the memo keeps: empty for a decoded one larger than
/// [`KEPT_TEXT_BYTES`], which [`captured`] reads again.
pub(super) fn kept_text(result: &Message) -> SharedText {
    if result.json().len() > KEPT_TEXT_BYTES && result.own_json_buffer().is_none() {
        // Its text could only be a copy: not even decoded here.
        return SharedText::new();
    }
    let text = super::read::result_text(result);
    if text.is_shared() || result.json().len() <= KEPT_TEXT_BYTES {
        text
    } else {
        SharedText::new()
    }
}

/// `call` as the memo kept it with `result`, its text whole again.
pub(super) fn captured(result: &Message, call: &CapturedCall) -> CapturedCall {
    let mut call = call.clone();
    if !call.result_text.is_shared() && result.json().len() > KEPT_TEXT_BYTES {
        call.result_text = super::read::result_text(result);
    }
    call
}

/// A turn as read, unfiltered.
#[derive(Debug)]
pub(super) struct TurnRead {
    pub(super) assistant: Message,
    /// The assistant's prose.
    pub(super) text: String,
    /// The calls, in block order.
    pub(super) calls: Vec<CallRead>,
}

/// The capture memo, kept beside a state by its [`Branch`](crate::branch::Branch).
/// A clone starts empty (it belongs to one state value).
#[derive(Debug, Default)]
pub(crate) struct CaptureMemo {
    turns: Mutex<Turns>,
}

#[derive(Debug, Default)]
struct Turns {
    /// By the assistant's identity ([`Message::identity`]); the entry holds
    /// the assistant, so the identity cannot be reused while it is kept.
    by_identity: FxHashMap<usize, Arc<TurnRead>>,
    /// How many turns were kept after the last trim.
    kept: usize,
}

impl Clone for CaptureMemo {
    fn clone(&self) -> Self {
        CaptureMemo::default()
    }
}

impl CaptureMemo {
    /// The turn of `assistant`, from the memo when it was read with the
    /// very results `result_of` pairs its calls with now, else read by
    /// `read` and kept.
    pub(super) fn get_or_read<'m>(
        &self,
        assistant: &Message,
        result_of: impl Fn(&str) -> Option<&'m Message>,
        read: impl FnOnce() -> TurnRead,
    ) -> Arc<TurnRead> {
        let key = assistant.identity();
        if let Ok(turns) = self.turns.lock() {
            if let Some(turn) = turns.by_identity.get(&key).filter(|t| {
                t.assistant.same(assistant)
                    && t.calls
                        .iter()
                        .all(|c| match (&c.answered, result_of(&c.id)) {
                            (Some((kept, _)), Some(now)) => kept.same(now),
                            (None, None) => true,
                            _ => false,
                        })
            }) {
                return Arc::clone(turn);
            }
        }
        let turn = Arc::new(read());
        if let Ok(mut turns) = self.turns.lock() {
            turns.by_identity.insert(key, Arc::clone(&turn));
            if turns.by_identity.len() > 2 * turns.kept.max(8) {
                turns.by_identity.retain(|_, t| !t.assistant.is_unshared());
                turns.kept = turns.by_identity.len();
            }
        }
        turn
    }

    /// Drops the turn of `assistant`, settled: no rescan reads it while it
    /// stays so, and one that reads it again reads it whole.
    pub(super) fn forget(&self, assistant: &Message) {
        if let Ok(mut turns) = self.turns.lock() {
            if turns.by_identity.is_empty() {
                return;
            }
            let key = assistant.identity();
            if turns
                .by_identity
                .get(&key)
                .is_some_and(|t| t.assistant.same(assistant))
            {
                turns.by_identity.remove(&key);
            }
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.turns.lock().map_or(0, |t| t.by_identity.len())
    }
}
