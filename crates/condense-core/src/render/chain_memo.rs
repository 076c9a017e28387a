//! What the chain phase keeps between renders.
//!
//! The host renders before every LLM call, and between flushes the
//! compressed history does not change: the same chains resolve to the same
//! ranges over the same messages. Scanning those ranges (thousands of
//! messages at 1M tokens) and building each chain's synthetic would dominate
//! the render, so both are kept here, tagged with the state generation and
//! checked against the very messages they were computed from. A render
//! never depends on this cache being warm: a miss recomputes the same
//! output.

use std::sync::{Arc, Mutex};

use crate::message::{Message, Role};
use crate::occurrence::{bare_id, OccurrenceKey};
use crate::records::ChainEntry;
use crate::state::State;
use rustc_hash::{FxHashMap, FxHashSet};

use super::chains::{BoundaryIndex, ResolvedRange};

/// The chain phase's cache, one of a branch's
/// [`RenderMemos`](super::RenderMemos). A clone starts empty (it belongs to
/// one state value).
#[derive(Debug, Default)]
pub(crate) struct ChainMemo {
    blocks: Mutex<FxHashMap<String, ChainMemoEntry>>,
    /// The latest scans, newest first: the cache-aware policy renders with
    /// and without what is pending at the same call, two sets of chains.
    scans: Mutex<Vec<(u64, Arc<RangeScan>)>>,
    boundaries: Mutex<IndexedMessages>,
}

/// The indexes of the messages last rendered, with those messages.
#[derive(Debug, Default)]
struct IndexedMessages {
    messages: Vec<Message>,
    index: BoundaryIndex,
    ids: IdIndex,
    /// The latest answers of [`ChainMemo::suppressed`], newest first: the
    /// cache-aware policy renders with two sets of chains at one call.
    suppressed: Vec<Suppressed>,
}

impl IndexedMessages {
    /// Indexes `input`: the kept indexes rolled back to the first message
    /// that is not the very one indexed there, then extended with the rest.
    fn sync(&mut self, input: &[Message]) {
        let same = Message::same_prefix(&self.messages, input);
        while self.messages.len() > same {
            if let Some(m) = self.messages.pop() {
                self.index.pop(&m);
                self.ids.pop(&m);
            }
        }
        for s in &mut self.suppressed {
            s.valid = s.valid.min(same);
        }
        for (i, m) in input.iter().enumerate().skip(same) {
            self.index.push(i, m);
            self.ids.push(i, m);
            self.messages.push(m.clone());
        }
    }
}

/// The summaries the chain phase suppressed for one set of accepted ranges.
#[derive(Debug)]
struct Suppressed {
    /// The ranges, sorted.
    ranges: Vec<(usize, usize)>,
    /// How many leading messages are still those the answer was found among.
    valid: usize,
    /// The summaries' positions, in order.
    positions: Vec<usize>,
}

/// Where each tool-call id occurs among the messages, and where condense's
/// summary messages are: what the chain phase asks to suppress the
/// summaries covering a dropped result.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct IdIndex {
    /// Tool results by `toolCallId` (empty when missing): positions and
    /// timestamps, in order.
    results: FxHashMap<String, Vec<(usize, Option<i64>)>>,
    /// Assistants' tool calls by id: positions, in order.
    calls: FxHashMap<String, Vec<usize>>,
    /// Positions of the summary messages, in order.
    pub(crate) summaries: Vec<usize>,
}

/// The indexes of `input`, built anew (a poisoned memo's fallback).
fn fresh_index(input: &[Message]) -> IndexedMessages {
    let mut fresh = IndexedMessages::default();
    for (i, m) in input.iter().enumerate() {
        fresh.index.push(i, m);
        fresh.ids.push(i, m);
    }
    fresh
}

impl IdIndex {
    fn push(&mut self, i: usize, m: &Message) {
        let sk = m.skeleton();
        match m.role() {
            Some(Role::ToolResult) => {
                let id = sk.tool_call_id.as_deref().unwrap_or_default();
                match self.results.get_mut(id) {
                    Some(at) => at.push((i, sk.timestamp)),
                    None => {
                        self.results.insert(id.to_owned(), vec![(i, sk.timestamp)]);
                    }
                }
            }
            Some(Role::Assistant) => {
                for c in &sk.tool_calls {
                    self.calls.entry(c.id.clone()).or_default().push(i);
                }
            }
            _ => {}
        }
        if m.is_summary_message() {
            self.summaries.push(i);
        }
    }

    /// Forgets the last message indexed, `m`.
    fn pop(&mut self, m: &Message) {
        let sk = m.skeleton();
        match m.role() {
            Some(Role::ToolResult) => {
                let id = sk.tool_call_id.as_deref().unwrap_or_default();
                if let Some(at) = self.results.get_mut(id) {
                    at.pop();
                    if at.is_empty() {
                        self.results.remove(id);
                    }
                }
            }
            Some(Role::Assistant) => {
                for c in &sk.tool_calls {
                    if let Some(at) = self.calls.get_mut(&c.id) {
                        at.pop();
                        if at.is_empty() {
                            self.calls.remove(&c.id);
                        }
                    }
                }
            }
            _ => {}
        }
        if m.is_summary_message() {
            self.summaries.pop();
        }
    }

    /// True if a tool result with this id and timestamp is at a position
    /// `inside` accepts.
    pub(crate) fn has_result(&self, id: &str, ts: i64, inside: impl Fn(usize) -> bool) -> bool {
        self.results
            .get(id)
            .is_some_and(|at| at.iter().any(|&(i, t)| t == Some(ts) && inside(i)))
    }

    /// True if a tool result or call with this id is at a position `inside`
    /// accepts.
    pub(crate) fn has_id(&self, id: &str, inside: impl Fn(usize) -> bool) -> bool {
        self.results
            .get(id)
            .is_some_and(|at| at.iter().any(|&(i, _)| inside(i)))
            || self
                .calls
                .get(id)
                .is_some_and(|at| at.iter().any(|&i| inside(i)))
    }
}

/// How many range scans are kept.
const SCANS_KEPT: usize = 2;

impl Clone for ChainMemo {
    fn clone(&self) -> Self {
        ChainMemo::default()
    }
}

/// One chain's synthetic message and its stripped final assistant.
#[derive(Debug, Default)]
struct ChainMemoEntry {
    /// The synthetic as last rendered, while it is still the chain's: see
    /// [`TextInputs`].
    synthetic: Option<(TextInputs, Message)>,
    /// The last synthetic built, with its text and timestamp: a state
    /// change (a flush, at nearly every call) rarely changes a chain's text,
    /// and the text alone decides the message.
    built: Option<(String, i64, Message)>,
    /// The stripped copy, with the original it was made from.
    stripped: Option<(Message, Message)>,
    /// The synthetic of a chain with protected outputs, made in a content
    /// generation from those very output messages: their text is part of
    /// the synthetic's, and a message never changes.
    protected: Option<(u64, Vec<Message>, Message)>,
}

/// What a chain's synthetic text was built from, as far as it can change.
/// Chains and summary bodies are only ever added (a chain registered again
/// under its block replaces it). So the text stays the chain's while no
/// chain was registered since under a block it read (its own, or one its
/// body names, found or not), and no summary body since covers one of the
/// occurrences whose summaries it read.
#[derive(Debug)]
struct TextInputs {
    registrations_seen: usize,
    bodies_seen: usize,
    blocks: Vec<String>,
    occurrences: FxHashSet<OccurrenceKey>,
}

impl TextInputs {
    /// Whether the text is still the chain's in `state`, noting what was
    /// checked so the next render checks only what is newer.
    fn still_hold(&mut self, state: &State) -> bool {
        let registered = state.registered_blocks();
        let bodies = state.summary_bodies();
        let unaffected = registered
            .get(self.registrations_seen..)
            .unwrap_or_default()
            .iter()
            .all(|b| !self.blocks.contains(b))
            && bodies
                .get(self.bodies_seen..)
                .unwrap_or_default()
                .iter()
                .all(|b| b.keys.iter().all(|k| !self.occurrences.contains(k)));
        if unaffected {
            self.registrations_seen = registered.len();
            self.bodies_seen = bodies.len();
        }
        unaffected
    }
}

/// A chain's synthetic text, with what it read: the blocks it looked up
/// (named in its body, found or not) and the occurrences whose summaries
/// it joined.
pub(crate) struct ChainText {
    pub(crate) text: String,
    pub(crate) blocks: Vec<String>,
    pub(crate) occurrences: Vec<OccurrenceKey>,
}

/// `block`'s entry, made empty if missing. Nearly every lookup finds one
/// (each render asks for every chain), so the id is copied only to insert.
/// Always `Some`.
fn block_entry<'m>(
    blocks: &'m mut FxHashMap<String, ChainMemoEntry>,
    block: &str,
) -> Option<&'m mut ChainMemoEntry> {
    if !blocks.contains_key(block) {
        blocks.insert(block.to_owned(), ChainMemoEntry::default());
    }
    blocks.get_mut(block)
}

impl ChainMemo {
    /// The synthetic message of `block` in `state`: kept while the inputs
    /// of its text hold ([`TextInputs`]), else kept when `text` gives the
    /// same text and timestamp as before, or made by `make`. `text` also
    /// returns the blocks it looked up and the occurrences whose summaries
    /// it read.
    pub(crate) fn synthetic(
        &self,
        block: &str,
        state: &State,
        compressed_at: i64,
        text: impl FnOnce() -> ChainText,
        make: impl FnOnce(&str) -> Message,
    ) -> Message {
        let Ok(mut blocks) = self.blocks.lock() else {
            return make(&text().text);
        };
        let Some(entry) = block_entry(&mut blocks, block) else {
            return make(&text().text);
        };
        if let Some((inputs, m)) = &mut entry.synthetic {
            if inputs.still_hold(state) {
                return m.clone();
            }
        }
        let (registrations_seen, bodies_seen) = (
            state.registered_blocks().len(),
            state.summary_bodies().len(),
        );
        let ChainText {
            text,
            mut blocks,
            occurrences,
        } = text();
        blocks.push(block.to_owned());
        let m = match &entry.built {
            Some((t, at, m)) if *t == text && *at == compressed_at => m.clone(),
            _ => {
                let m = make(&text);
                entry.built = Some((text, compressed_at, m.clone()));
                m
            }
        };
        let inputs = TextInputs {
            registrations_seen,
            bodies_seen,
            blocks,
            occurrences: occurrences.into_iter().collect(),
        };
        entry.synthetic = Some((inputs, m.clone()));
        m
    }

    /// The synthetic of `block` quoting the outputs `protected`, in
    /// `generation`: kept while the generation and those very messages are
    /// the same (checked by identity, not text), or made by `make`.
    pub(crate) fn protected_synthetic(
        &self,
        block: &str,
        generation: u64,
        protected: &[&Message],
        make: impl FnOnce() -> Message,
    ) -> Message {
        let Ok(mut blocks) = self.blocks.lock() else {
            return make();
        };
        let Some(entry) = block_entry(&mut blocks, block) else {
            return make();
        };
        if let Some((g, kept, m)) = &entry.protected {
            let same =
                kept.len() == protected.len() && kept.iter().zip(protected).all(|(a, b)| a.same(b));
            if *g == generation && same {
                return m.clone();
            }
        }
        let m = make();
        let kept = protected.iter().map(|&p| p.clone()).collect();
        entry.protected = Some((generation, kept, m.clone()));
        m
    }

    /// The stripped copy of `original`, the final assistant of `block`: kept
    /// (it depends on its original alone, which is compared), or made by
    /// `make` (`None`: nothing to strip).
    pub(crate) fn stripped(
        &self,
        block: &str,
        original: &Message,
        make: impl FnOnce() -> Option<Message>,
    ) -> Option<Message> {
        let Ok(mut blocks) = self.blocks.lock() else {
            return make();
        };
        let Some(entry) = block_entry(&mut blocks, block) else {
            return make();
        };
        if let Some((orig, s)) = &entry.stripped {
            if orig == original {
                return Some(s.clone());
            }
        }
        let s = make()?;
        entry.stripped = Some((original.clone(), s.clone()));
        Some(s)
    }

    /// Runs `f` with the indexes of `input`: the kept ones, rolled back to
    /// the first message that is not the very one indexed there, then
    /// extended with the rest.
    pub(crate) fn with_index<T>(
        &self,
        input: &[Message],
        f: impl FnOnce(&BoundaryIndex, &IdIndex) -> T,
    ) -> T {
        let Ok(mut kept) = self.boundaries.lock() else {
            let fresh = fresh_index(input);
            return f(&fresh.index, &fresh.ids);
        };
        kept.sync(input);
        f(&kept.index, &kept.ids)
    }

    /// The positions, in order, of the summary messages of `input` that
    /// `suppress` (the ids and a summary's position) picks, for the
    /// accepted `ranges` (sorted). A summary before the first message that
    /// changed since an answer for the same ranges, all of them before
    /// that message too, keeps that answer: what decides it (its refs, the
    /// results inside the ranges) lies in those unchanged messages. So a
    /// call that appends asks only about the summaries it appends.
    pub(crate) fn suppressed(
        &self,
        input: &[Message],
        ranges: &[(usize, usize)],
        suppress: impl Fn(&IdIndex, usize) -> bool,
    ) -> Vec<usize> {
        let Ok(mut kept) = self.boundaries.lock() else {
            let fresh = fresh_index(input);
            return fresh
                .ids
                .summaries
                .iter()
                .copied()
                .filter(|&i| suppress(&fresh.ids, i))
                .collect();
        };
        let kept = &mut *kept;
        kept.sync(input);
        let earlier = kept
            .suppressed
            .iter()
            .position(|s| s.ranges == ranges && ranges.iter().all(|&(_, end)| end <= s.valid));
        let (from, mut positions) = match earlier {
            Some(k) => {
                let s = kept.suppressed.remove(k);
                let mut positions = s.positions;
                positions.truncate(positions.partition_point(|&i| i < s.valid));
                (s.valid, positions)
            }
            None => (0, Vec::new()),
        };
        let ids = &kept.ids;
        let first = ids.summaries.partition_point(|&i| i < from);
        positions.extend(
            ids.summaries[first..]
                .iter()
                .copied()
                .filter(|&i| suppress(ids, i)),
        );
        kept.suppressed.insert(
            0,
            Suppressed {
                ranges: ranges.to_vec(),
                valid: input.len(),
                positions: positions.clone(),
            },
        );
        kept.suppressed.truncate(2);
        positions
    }

    /// The scan of `chains` over `input`, from the cache when one was made
    /// for these chains (in this generation, or with the same entries) over
    /// these messages.
    pub(crate) fn scan(
        &self,
        generation: u64,
        chains: &[(&ChainEntry, ResolvedRange)],
        input: &[Message],
    ) -> Arc<RangeScan> {
        if let Ok(mut scans) = self.scans.lock() {
            let hit = scans
                .iter()
                .position(|(g, s)| s.fits(*g == generation, chains, input));
            if let Some(k) = hit {
                let (_, s) = scans.remove(k);
                scans.insert(0, (generation, Arc::clone(&s)));
                return s;
            }
        }
        let s = Arc::new(RangeScan::new(chains, input));
        if let Ok(mut scans) = self.scans.lock() {
            scans.insert(0, (generation, Arc::clone(&s)));
            scans.truncate(SCANS_KEPT);
        }
        s
    }
}

/// What the accepted chains' ranges hold: the ids each chain drops, checked
/// against what its entry recorded, and where its protected outputs are.
///
/// Read from the render's input messages. The stub and purge phases before
/// the chain phase only replace a message's content or a call's arguments,
/// never a role, a tool-call id or a timestamp, so the input tells the same.
/// Protected outputs' texts are not kept: they are read from the working
/// list on every render.
#[derive(Debug)]
pub(crate) struct RangeScan {
    /// The accepted chains' ranges and what the scan read of their entries
    /// (block id, protected ids, dropped ids), in order.
    ranges: Vec<(ScannedEntry, ResolvedRange)>,
    /// The input messages strictly inside the ranges, in range order.
    inside: Vec<Message>,
    /// Per accepted chain: (recorded, actual) id counts when the sets differ.
    pub(crate) mismatches: Vec<Option<(usize, usize)>>,
    /// Per accepted chain: positions of the tool results its entry protects.
    pub(crate) protected_at: Vec<Vec<usize>>,
    /// Positions of the tool results the chains drop (all inside the
    /// ranges but the protected ones), for the stub phase to skip.
    pub(crate) unprotected_results_at: Vec<usize>,
}

impl RangeScan {
    fn new(chains: &[(&ChainEntry, ResolvedRange)], input: &[Message]) -> Self {
        let spanned: usize = chains.iter().map(|(_, r)| r.end - r.start).sum();
        let mut scan = RangeScan {
            ranges: Vec::with_capacity(chains.len()),
            inside: Vec::with_capacity(spanned),
            mismatches: Vec::with_capacity(chains.len()),
            protected_at: Vec::with_capacity(chains.len()),
            unprotected_results_at: Vec::with_capacity(spanned / 2),
        };
        let mut actual: Vec<&str> = Vec::new();
        let mut recorded: Vec<&str> = Vec::new();
        for (entry, r) in chains {
            let protected: FxHashSet<&str> = entry
                .protected_tool_call_ids
                .iter()
                .flatten()
                .map(String::as_str)
                .collect();
            let mut protected_at = Vec::new();
            actual.clear();
            for (i, m) in input.iter().enumerate().take(r.end).skip(r.start + 1) {
                scan.inside.push(m.clone());
                let sk = m.skeleton();
                match m.role() {
                    Some(Role::ToolResult) => {
                        let id = sk.tool_call_id.as_deref().unwrap_or_default();
                        if protected.contains(id) {
                            protected_at.push(i);
                        } else {
                            scan.unprotected_results_at.push(i);
                        }
                        actual.push(id);
                    }
                    Some(Role::Assistant) => {
                        for c in &sk.tool_calls {
                            actual.push(&c.id);
                        }
                    }
                    _ => {}
                }
            }
            actual.sort_unstable();
            actual.dedup();
            recorded.clear();
            recorded.extend(entry.dropped_tool_call_ids.iter().map(|s| bare_id(s)));
            recorded.sort_unstable();
            recorded.dedup();
            scan.mismatches
                .push((recorded != actual).then_some((recorded.len(), actual.len())));
            scan.protected_at.push(protected_at);
            scan.ranges.push((ScannedEntry::of(entry), *r));
        }
        scan
    }

    /// True if this scan was made for exactly these chains over these
    /// messages. `same_generation`: the state has not changed since, so
    /// entries with the scanned block ids are the scanned entries.
    fn fits(
        &self,
        same_generation: bool,
        chains: &[(&ChainEntry, ResolvedRange)],
        input: &[Message],
    ) -> bool {
        self.ranges.len() == chains.len()
            && self
                .ranges
                .iter()
                .zip(chains)
                .all(|((scanned, r), (entry, r2))| {
                    r == r2
                        && scanned.block_id == entry.block_id
                        && (same_generation || scanned.is(entry))
                })
            && chains
                .iter()
                .flat_map(|(_, r)| input.get(r.start + 1..r.end).unwrap_or_default())
                .eq(self.inside.iter())
    }
}

/// What a scan read of a chain entry.
#[derive(Debug)]
struct ScannedEntry {
    block_id: String,
    protected_tool_call_ids: Option<Vec<String>>,
    dropped_tool_call_ids: Vec<String>,
}

impl ScannedEntry {
    fn of(entry: &ChainEntry) -> Self {
        ScannedEntry {
            block_id: entry.block_id.clone(),
            protected_tool_call_ids: entry.protected_tool_call_ids.clone(),
            dropped_tool_call_ids: entry.dropped_tool_call_ids.clone(),
        }
    }

    /// True if `entry` reads as the scanned one.
    fn is(&self, entry: &ChainEntry) -> bool {
        self.block_id == entry.block_id
            && self.protected_tool_call_ids == entry.protected_tool_call_ids
            && self.dropped_tool_call_ids == entry.dropped_tool_call_ids
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::ChainMemo;
    use crate::message::Message;
    use crate::metrics_memo::tests::message;
    use crate::render::chains::BoundaryIndex;

    proptest! {
        /// The kept boundary index, rolled back and extended as the
        /// messages change between renders, is the index of the messages.
        /// Timestamps repeat, so counts above one come and go.
        #[test]
        fn the_kept_boundary_index_is_a_fresh_one(
            steps in proptest::collection::vec(
                (proptest::collection::vec((0u8..8, 0u8..9, 0i64..6), 0..10), 0u8..=100),
                1..16,
            ),
        ) {
            let memo = ChainMemo::default();
            let mut input: Vec<Message> = Vec::new();
            for (append, keep) in steps {
                input.truncate(input.len() * usize::from(keep) / 100);
                input.extend(append.into_iter().map(|(kind, n, ts)| message(kind, n, ts)));
                let fresh = BoundaryIndex::new(input.iter());
                let mut ids = super::IdIndex::default();
                for (i, m) in input.iter().enumerate() {
                    ids.push(i, m);
                }
                prop_assert!(memo.with_index(&input, |kept, kept_ids| *kept == fresh && *kept_ids == ids));
            }
        }

        /// What the memo answers for the suppressed summaries, as the
        /// messages and the accepted ranges change between renders (two
        /// sets of ranges asked in turn, as the cache-aware policy asks),
        /// is what a fresh memo answers.
        #[test]
        fn the_suppressed_summaries_kept_are_a_fresh_answer(
            steps in proptest::collection::vec(
                (
                    proptest::collection::vec((0u8..10, 0u8..9, 0i64..6), 0..10),
                    0u8..=100,
                    proptest::option::of(proptest::collection::vec((0usize..30, 1usize..8), 0..3)),
                ),
                1..16,
            ),
        ) {
            let memo = ChainMemo::default();
            let mut input: Vec<Message> = Vec::new();
            // `None`: the ranges of the step before, over changed messages.
            let mut ranges: Vec<(usize, usize)> = Vec::new();
            for (append, keep, new_ranges) in steps {
                input.truncate(input.len() * usize::from(keep) / 100);
                input.extend(append.into_iter().map(|(kind, n, ts)| with_summaries(kind, n, ts)));
                if let Some(new_ranges) = new_ranges {
                    ranges = new_ranges.into_iter().map(|(start, len)| (start, start + len)).collect();
                    ranges.sort_unstable();
                }
                for asked in [ranges.clone(), Vec::new(), ranges.clone()] {
                    let inside = |i: usize| asked.iter().any(|&(start, end)| start < i && i < end);
                    let suppress = |ids: &super::IdIndex, i: usize| {
                        input[i].skeleton().summary_refs.iter().any(|r| match r.result_timestamp {
                            Some(ts) => ids.has_result(&r.tool_call_id, ts, inside),
                            None => ids.has_id(&r.tool_call_id, inside),
                        })
                    };
                    let fresh = ChainMemo::default().suppressed(&input, &asked, suppress);
                    prop_assert_eq!(memo.suppressed(&input, &asked, suppress), fresh);
                }
            }
        }
    }

    /// [`message`]'s kinds, and summary messages whose refs name its
    /// results (with and without a result timestamp).
    fn with_summaries(kind: u8, n: u8, ts: i64) -> Message {
        if kind < 8 {
            return message(kind, n, ts);
        }
        let result_timestamp = (kind == 8).then_some(ts);
        let refs = serde_json::json!([{"toolCallId": format!("c{}", n % 4), "resultTimestamp": result_timestamp},
            {"toolCallId": format!("d{n}")}]);
        Message::from_value(&serde_json::json!({"role": "custom", "customType": crate::SUMMARY_CUSTOM_TYPE,
            "content": "summary", "display": false, "details": {"toolCallRefs": refs}, "timestamp": ts}))
        .expect("a summary message")
    }
}
