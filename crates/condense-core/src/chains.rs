//! Chain detection: which spans of a branch are finished tasks.
//!
//! A chain is one user request and the agent's work on it:
//!
//! ```text
//! [user] → [assistant with tool calls, tool results]… → [text-only assistant]
//! ```
//!
//! The text-only assistant (an assistant message with no `toolCall` block)
//! closes the chain. Detection is a single forward walk:
//!
//! - a user message starts a chain. A user message that is itself a
//!   `<compressed-chain>` synthetic ([`Skeleton::is_synthetic_chain`]) is
//!   ignored entirely: it neither starts nor interrupts a chain;
//! - a new user message arriving while a chain is open emits the open chain
//!   as *interrupted* (no final assistant) and starts the next one;
//! - inside a chain, assistants with tool calls and tool results contribute
//!   their ids; every other role (custom, bash execution, summaries, unknown)
//!   is ignored;
//! - a chain still open at the end of the input is in flight and is not
//!   emitted.
//!
//! Closed chains beyond the rolling window are what chain compression folds
//! into one `<compressed-chain>` message; see [`select_eligible`].
//!
//! [`Skeleton::is_synthetic_chain`]: crate::message::Skeleton::is_synthetic_chain

use std::borrow::Cow;
#[cfg(test)]
use std::collections::HashMap;
use std::collections::HashSet;

use crate::message::{Message, Role};
use crate::occurrence::OccurrenceKey;
use crate::protect::Protection;
use crate::state::State;

/// One detected chain.
///
/// A chain is identified on the wire by the timestamps of its two boundary
/// messages (pi messages have no ids); the indices locate it in the slice it
/// was detected in and are only meaningful for that slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainRange {
    /// Timestamp of the user message that starts the chain.
    ///
    /// A user message without an integral timestamp cannot be named by a
    /// `context-prune-chain` entry, so [`detect_chains`] never emits a chain
    /// starting at one (it still ends the chain before it, as any user
    /// message does).
    pub start_user_timestamp: i64,
    /// Index of the start user message.
    pub start_index: usize,
    /// Index of the closing text-only assistant; `None` for an interrupted
    /// chain.
    pub end_index: Option<usize>,
    /// Index of the last message the chain spans: the closing assistant, or,
    /// for an interrupted chain, the message just before the user message
    /// that interrupted it.
    pub last_index: usize,
    /// Timestamp of the closing text-only assistant. `None` for an
    /// interrupted chain, and also for a closed chain whose closing assistant
    /// has no integral timestamp (such a chain cannot be resolved later, so
    /// it is treated like an interrupted one: never compressed).
    pub final_assistant_timestamp: Option<i64>,
    /// Distinct tool-call ids of the chain's middle, in first-seen order:
    /// the ids of assistant `toolCall` blocks and the `toolCallId`s of tool
    /// results.
    pub middle_tool_call_ids: Vec<String>,
    /// Distinct occurrence keys (`toolCallId` + the result's own timestamp)
    /// of the middle's tool results, in order. A result without a timestamp
    /// gives a bare key.
    pub middle_occurrence_keys: Vec<OccurrenceKey>,
    /// The middle ids whose calls are protected, in first-seen order: an
    /// assistant `toolCall` block is checked by its name and arguments
    /// (`input`, else `arguments`); a tool result by its `toolName` alone
    /// (results carry no arguments, and the call that precedes a result has
    /// already been checked with them).
    pub protected_tool_call_ids: Vec<String>,
}

impl ChainRange {
    /// True if a text-only assistant closed the chain.
    pub fn is_closed(&self) -> bool {
        self.end_index.is_some()
    }

    /// True if the chain can be compressed: closed, with a final timestamp
    /// to name its end by.
    pub fn is_resolvable(&self) -> bool {
        self.end_index.is_some() && self.final_assistant_timestamp.is_some()
    }
}

/// A chain under construction (the start timestamp may be missing).
#[derive(Debug, Clone)]
struct OpenChain {
    start_ts: Option<i64>,
    start_index: usize,
    ids: Vec<String>,
    id_set: HashSet<String>,
    keys: Vec<OccurrenceKey>,
    key_set: HashSet<OccurrenceKey>,
    protected: Vec<String>,
    protected_set: HashSet<String>,
}

impl OpenChain {
    fn new(start_ts: Option<i64>, start_index: usize) -> Self {
        OpenChain {
            start_ts,
            start_index,
            ids: Vec::new(),
            id_set: HashSet::new(),
            keys: Vec::new(),
            key_set: HashSet::new(),
            protected: Vec::new(),
            protected_set: HashSet::new(),
        }
    }

    fn add_id(&mut self, id: &str) {
        if self.id_set.insert(id.to_owned()) {
            self.ids.push(id.to_owned());
        }
    }

    fn add_key(&mut self, key: OccurrenceKey) {
        if self.key_set.insert(key.clone()) {
            self.keys.push(key);
        }
    }

    fn add_protected(&mut self, id: &str) {
        if self.protected_set.insert(id.to_owned()) {
            self.protected.push(id.to_owned());
        }
    }

    fn finish(self, end: Option<usize>, last_index: usize, final_ts: Option<i64>) -> Span {
        Span {
            start_ts: self.start_ts,
            range: ChainRange {
                start_user_timestamp: self.start_ts.unwrap_or_default(),
                start_index: self.start_index,
                end_index: end,
                last_index,
                final_assistant_timestamp: final_ts,
                middle_tool_call_ids: self.ids,
                middle_occurrence_keys: self.keys,
                protected_tool_call_ids: self.protected,
            },
        }
    }
}

/// A detected span, before the missing-start-timestamp filter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Span {
    pub(crate) start_ts: Option<i64>,
    pub(crate) range: ChainRange,
}

/// The detection walk, one message at a time (so a walk can be resumed
/// where it stopped when the branch grows).
#[derive(Debug, Default)]
pub(crate) struct Detector {
    open: Option<OpenChain>,
}

impl Detector {
    /// Feeds the message at index `i`; returns the span it ends, if any.
    /// With `protection` `None` the protected ids are not computed (no
    /// argument is parsed).
    pub(crate) fn step(
        &mut self,
        i: usize,
        m: &Message,
        protection: Option<&Protection>,
    ) -> Option<Span> {
        let sk = m.skeleton();
        match sk.role.as_ref() {
            Some(Role::User) => {
                if sk.is_synthetic_chain {
                    return None;
                }
                // `i > 0`: an open chain started at an earlier index.
                let ended = self
                    .open
                    .take()
                    .map(|chain| chain.finish(None, i - 1, None));
                self.open = Some(OpenChain::new(m.timestamp(), i));
                ended
            }
            Some(Role::Assistant) => {
                let chain = self.open.as_mut()?;
                if !sk.has_tool_call_block {
                    let chain = self.open.take()?;
                    return Some(chain.finish(Some(i), i, m.timestamp()));
                }
                for call in &sk.tool_calls {
                    chain.add_id(&call.id);
                }
                if let Some(p) = protection {
                    // Arguments are parsed only when a name alone does not
                    // settle every call; ids are added in block order.
                    if sk.tool_calls.iter().all(|c| p.is_protected_tool(&c.name)) {
                        for c in &sk.tool_calls {
                            chain.add_protected(&c.id);
                        }
                    } else {
                        for call in m.call_args() {
                            if p.is_protected_call(&call.name, call.path.as_deref()) {
                                chain.add_protected(&call.id);
                            }
                        }
                    }
                }
                None
            }
            Some(Role::ToolResult) => {
                let chain = self.open.as_mut()?;
                let id = sk.tool_call_id.as_deref().filter(|id| !id.is_empty())?;
                chain.add_id(id);
                chain.add_key(OccurrenceKey::new(id, m.timestamp()));
                if let Some(p) = protection {
                    if p.is_protected_tool(sk.tool_name.as_deref().unwrap_or("")) {
                        chain.add_protected(id);
                    }
                }
                None
            }
            _ => None,
        }
    }
}

/// Walks the messages once and returns every closed or interrupted span,
/// including spans whose start user message has no timestamp. With
/// `protection` `None` the protected ids are not computed (no argument is
/// parsed).
pub(crate) fn detect_spans(messages: &[Message], protection: Option<&Protection>) -> Vec<Span> {
    let mut detector = Detector::default();
    // A chain still open at the end is in flight: not emitted.
    messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| detector.step(i, m, protection))
        .collect()
}

/// Detects the closed and interrupted chains of a branch, oldest first.
///
/// Chains whose start user message has no integral timestamp are left out
/// (see [`ChainRange::start_user_timestamp`]). `protection` decides
/// [`ChainRange::protected_tool_call_ids`].
pub fn detect_chains(messages: &[Message], protection: &Protection) -> Vec<ChainRange> {
    detect_spans(messages, Some(protection))
        .into_iter()
        .filter(|s| s.start_ts.is_some())
        .map(|s| s.range)
        .collect()
}

/// The branch with the message that triggered a flush appended.
///
/// pi hands `message_end` to extensions before it persists the message, so
/// at an agent-message flush the just-finished text-only assistant is not
/// yet on the branch; without it the newest chain reads as open and the
/// rolling window keeps one chain too many. The closing message is appended
/// unless the branch already ends with a message of the same role and
/// timestamp (so a host that persists first makes this a no-op). Borrows the
/// input whenever nothing is appended.
pub fn with_closing_message<'a>(
    messages: &'a [Message],
    closing: Option<&Message>,
) -> Cow<'a, [Message]> {
    let Some(closing) = closing else {
        return Cow::Borrowed(messages);
    };
    if let Some(last) = messages.last() {
        let (a, b) = (last.skeleton(), closing.skeleton());
        if a.role == b.role && a.timestamp == b.timestamp && a.timestamp_other == b.timestamp_other
        {
            return Cow::Borrowed(messages);
        }
    }
    let mut out = Vec::with_capacity(messages.len() + 1);
    out.extend_from_slice(messages);
    out.push(closing.clone());
    Cow::Owned(out)
}

/// The chains chain compression should fold now, oldest first.
///
/// 1. Candidates: chains that are closed with a final timestamp
///    ([`ChainRange::is_resolvable`]), not already compressed
///    ([`State::is_chain_compressed`] on the start timestamp), and with a
///    non-empty middle.
/// 2. Rolling window: the newest `rolling_window` **candidates** stay raw and
///    the older ones are selected (`0` selects all). The window is counted
///    after the filter of step 1, so compressed chains, interrupted chains,
///    the open chain and conversational chains without tool calls never
///    occupy a slot (pi-condense `selectEligible`, src/chain-compressor.ts:
///    `candidates.slice(0, candidates.length - rollingWindow)` over the
///    filtered list).
/// 3. Grace deferral: a selected chain whose middle holds a recovery result
///    still in its grace window (`in_grace`, from
///    [`in_grace_keys`](crate::render::grace::in_grace_keys)) is deferred.
///    Deferral happens after the window cut, so a deferred chain does not
///    pull a newer chain out of the window (pi-condense's chain-compressor
///    test "defers only the grace chain without shrinking the
///    rolling-window buffer").
///
/// `chains` must be in branch order, as [`detect_chains`] returns them.
pub fn select_eligible<'c>(
    chains: &'c [ChainRange],
    state: &State,
    rolling_window: u32,
    in_grace: &HashSet<OccurrenceKey>,
) -> Vec<&'c ChainRange> {
    select_eligible_among(chains.iter(), state, rolling_window, in_grace)
}

/// [`select_eligible`] over chains held anywhere.
pub(crate) fn select_eligible_among<'c>(
    chains: impl Iterator<Item = &'c ChainRange>,
    state: &State,
    rolling_window: u32,
    in_grace: &HashSet<OccurrenceKey>,
) -> Vec<&'c ChainRange> {
    let candidates: Vec<&ChainRange> = chains
        .filter(|c| {
            c.is_resolvable()
                && !state.is_chain_compressed(c.start_user_timestamp)
                && !c.middle_tool_call_ids.is_empty()
        })
        .collect();
    let take = candidates.len().saturating_sub(rolling_window as usize);
    candidates
        .into_iter()
        .take(take)
        .filter(|c| {
            in_grace.is_empty()
                || !c
                    .middle_occurrence_keys
                    .iter()
                    .any(|k| in_grace.contains(k))
        })
        .collect()
}

/// Lazily parsed tool-call arguments of a branch's assistant messages,
/// looked up by the position of a tool result: the call with the result's id
/// in the nearest preceding assistant that has one.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct ArgsLookup {
    /// For each tool-call id, the index of the latest assistant (so far in
    /// the walk) with a block of that id.
    latest: HashMap<String, usize>,
}

#[cfg(test)]
impl ArgsLookup {
    /// Records an assistant message met in a forward walk.
    pub(crate) fn see_assistant(&mut self, index: usize, message: &Message) {
        for call in &message.skeleton().tool_calls {
            self.latest.insert(call.id.clone(), index);
        }
    }

    /// The `path` argument of the call `id` in the nearest assistant seen
    /// so far that has one.
    pub(crate) fn path(&mut self, messages: &[Message], id: &str) -> Option<String> {
        let index = *self.latest.get(id)?;
        messages
            .get(index)?
            .call_args()
            .iter()
            .find(|c| c.id == id)?
            .path
            .clone()
    }
}
