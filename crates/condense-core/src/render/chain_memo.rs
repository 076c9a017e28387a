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

use crate::fxhash::{FxHashMap, FxHashSet};
use crate::message::{Message, Role};
use crate::occurrence::bare_id;
use crate::records::ChainEntry;

use super::chains::ResolvedRange;

/// The chain phase's cache inside [`State`](crate::state::State). A clone
/// starts empty (it belongs to one state value).
#[derive(Debug, Default)]
pub(crate) struct ChainMemo {
    blocks: Mutex<FxHashMap<String, ChainMemoEntry>>,
    scan: Mutex<Option<Arc<RangeScan>>>,
}

impl Clone for ChainMemo {
    fn clone(&self) -> Self {
        ChainMemo::default()
    }
}

/// One chain's synthetic message and its stripped final assistant. The
/// stripped copy is kept with the original it was made from.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChainMemoEntry {
    pub(crate) generation: u64,
    pub(crate) synthetic: Option<Message>,
    pub(crate) stripped: Option<(Message, Message)>,
}

impl ChainMemo {
    /// The block's entry for `generation`. A stripped copy outlives the
    /// generation it was made in: it depends on its original alone (which
    /// the caller compares), and flushes change the generation at nearly
    /// every call, so dropping it would strip every chain's final assistant
    /// again per render.
    pub(crate) fn get(&self, block: &str, generation: u64) -> ChainMemoEntry {
        let kept = self.blocks.lock().ok().and_then(|m| m.get(block).cloned());
        match kept {
            Some(e) if e.generation == generation => e,
            kept => ChainMemoEntry {
                generation,
                synthetic: None,
                stripped: kept.and_then(|e| e.stripped),
            },
        }
    }

    pub(crate) fn put(&self, block: &str, entry: ChainMemoEntry) {
        if let Ok(mut m) = self.blocks.lock() {
            m.insert(block.to_owned(), entry);
        }
    }

    /// The scan of `chains` over `input`, from the cache when it was made
    /// for this generation, these ranges and these messages.
    pub(crate) fn scan(
        &self,
        generation: u64,
        chains: &[(&ChainEntry, ResolvedRange)],
        input: &[Message],
    ) -> Arc<RangeScan> {
        if let Ok(guard) = self.scan.lock() {
            if let Some(s) = guard.as_ref().filter(|s| s.fits(generation, chains, input)) {
                return Arc::clone(s);
            }
        }
        let s = Arc::new(RangeScan::new(generation, chains, input));
        if let Ok(mut guard) = self.scan.lock() {
            *guard = Some(Arc::clone(&s));
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
    generation: u64,
    /// The accepted chains' block ids and ranges, in order.
    ranges: Vec<(String, ResolvedRange)>,
    /// The input messages strictly inside the ranges, in range order.
    inside: Vec<Message>,
    /// Per accepted chain: (recorded, actual) id counts when the sets differ.
    pub(crate) mismatches: Vec<Option<(usize, usize)>>,
    /// Per accepted chain: positions of the tool results its entry protects.
    pub(crate) protected_at: Vec<Vec<usize>>,
    /// Positions of the tool results the chains drop (all inside the
    /// ranges but the protected ones), for the stub phase to skip.
    pub(crate) unprotected_results_at: Vec<usize>,
    /// Tool results inside the ranges: tool-call id → result timestamps.
    dropped_results: FxHashMap<String, Vec<Option<i64>>>,
    /// Every tool-call id inside the ranges (results and assistants' calls).
    dropped_ids: FxHashSet<String>,
}

impl RangeScan {
    fn new(generation: u64, chains: &[(&ChainEntry, ResolvedRange)], input: &[Message]) -> Self {
        let spanned: usize = chains.iter().map(|(_, r)| r.end - r.start).sum();
        let mut scan = RangeScan {
            generation,
            ranges: Vec::with_capacity(chains.len()),
            inside: Vec::with_capacity(spanned),
            mismatches: Vec::with_capacity(chains.len()),
            protected_at: Vec::with_capacity(chains.len()),
            unprotected_results_at: Vec::with_capacity(spanned / 2),
            dropped_results: FxHashMap::default(),
            dropped_ids: FxHashSet::default(),
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
                        scan.dropped_results
                            .entry(id.to_owned())
                            .or_default()
                            .push(sk.timestamp);
                        scan.dropped_ids.insert(id.to_owned());
                    }
                    Some(Role::Assistant) => {
                        for c in &sk.tool_calls {
                            actual.push(&c.id);
                            scan.dropped_ids.insert(c.id.clone());
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
            scan.ranges.push((entry.block_id.clone(), *r));
        }
        scan
    }

    /// True if this scan was made for exactly these chains over these messages.
    fn fits(
        &self,
        generation: u64,
        chains: &[(&ChainEntry, ResolvedRange)],
        input: &[Message],
    ) -> bool {
        self.generation == generation
            && self.ranges.len() == chains.len()
            && self
                .ranges
                .iter()
                .zip(chains)
                .all(|((block, r), (entry, r2))| r == r2 && *block == entry.block_id)
            && chains
                .iter()
                .flat_map(|(_, r)| input.get(r.start + 1..r.end).unwrap_or_default())
                .eq(self.inside.iter())
    }

    /// True if a tool result with this id and timestamp lies in a range.
    pub(crate) fn drops_result(&self, id: &str, ts: i64) -> bool {
        self.dropped_results
            .get(id)
            .is_some_and(|t| t.contains(&Some(ts)))
    }

    /// True if this tool-call id occurs in a range.
    pub(crate) fn drops_id(&self, id: &str) -> bool {
        self.dropped_ids.contains(id)
    }
}
