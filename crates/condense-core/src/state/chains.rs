//! Compressed chains, their block ids (`b<N>`) and the text each renders as.

use crate::occurrence::OccurrenceKey;
use crate::records::ChainEntry;

use super::State;

impl State {
    /// Registers a compressed chain (keyed by its start timestamp; last wins).
    pub fn register_chain(&mut self, entry: ChainEntry) {
        self.changed();
        // The block an entry replaces is gone from the lookup too.
        if let Some(replaced) = self.chains.get(&entry.start_user_timestamp) {
            self.registered_blocks.push(replaced.block_id.clone());
        }
        self.registered_blocks.push(entry.block_id.clone());
        if let Some(n) = entry
            .block_id
            .strip_prefix('b')
            .and_then(|d| d.parse::<u64>().ok())
        {
            self.next_block = self.next_block.max(n + 1);
        }
        self.chain_since
            .entry(entry.start_user_timestamp)
            .or_insert(self.switches);
        self.chains.insert(entry.start_user_timestamp, entry);
    }

    /// Compressed chains sorted by start timestamp.
    pub fn chains(&self) -> impl ExactSizeIterator<Item = &ChainEntry> {
        self.chains.values()
    }

    /// The chain entry with a block id.
    pub fn chain_by_block(&self, block_id: &str) -> Option<&ChainEntry> {
        self.chains.values().find(|c| c.block_id == block_id)
    }

    /// True if a chain starting at this user timestamp is compressed.
    pub fn is_chain_compressed(&self, start_user_timestamp: i64) -> bool {
        self.chains.contains_key(&start_user_timestamp)
    }

    /// Allocates the next block id (`b<N>`).
    pub fn allocate_block_id(&mut self) -> String {
        let n = self.next_block;
        self.next_block += 1;
        format!("b{n}")
    }

    /// The block id of every chain registered so far, and of every entry
    /// a registration replaced, in order: a chain's synthetic text depends
    /// on its own entry and the chains it names, which change only by a
    /// registration.
    pub(crate) fn registered_blocks(&self) -> &[String] {
        &self.registered_blocks
    }

    /// The occurrences whose summaries [`State::chain_body`] reads for
    /// `entry` (none when its body is fixed): a summary body registered for
    /// other occurrences leaves that body as it was.
    pub(crate) fn chain_body_keys(&self, entry: &ChainEntry) -> Vec<OccurrenceKey> {
        if entry.range_summary_text.is_some() {
            return Vec::new();
        }
        body_key_texts(entry)
            .into_iter()
            .map(OccurrenceKey::parse)
            .collect()
    }

    /// The text a compressed chain renders as: its range summary, else the
    /// distinct per-batch summaries of its dropped occurrences joined by a
    /// blank line.
    pub fn chain_body(&self, entry: &ChainEntry) -> String {
        if let Some(t) = &entry.range_summary_text {
            return t.clone();
        }
        self.summaries_covering(body_key_texts(entry)).join("\n\n")
    }
}

/// The occurrence keys (or, in older entries, bare ids) of the results a
/// chain dropped, as its entry records them.
fn body_key_texts(entry: &ChainEntry) -> Vec<&str> {
    match &entry.dropped_occurrence_keys {
        Some(k) => k.iter().map(String::as_str).collect(),
        None => entry
            .dropped_tool_call_ids
            .iter()
            .map(String::as_str)
            .collect(),
    }
}
