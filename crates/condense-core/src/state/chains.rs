//! Compressed chains, their block ids (`b<N>`) and the text each renders as.

use crate::records::ChainEntry;

use super::State;

impl State {
    /// Registers a compressed chain (keyed by its start timestamp; last wins).
    pub fn register_chain(&mut self, entry: ChainEntry) {
        self.changed();
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

    /// The text a compressed chain renders as: its range summary, else the
    /// distinct per-batch summaries of its dropped occurrences joined by a
    /// blank line.
    pub fn chain_body(&self, entry: &ChainEntry) -> String {
        if let Some(t) = &entry.range_summary_text {
            return t.clone();
        }
        let keys: Vec<&str> = match &entry.dropped_occurrence_keys {
            Some(k) => k.iter().map(String::as_str).collect(),
            None => entry
                .dropped_tool_call_ids
                .iter()
                .map(String::as_str)
                .collect(),
        };
        self.summaries_covering(keys).join("\n\n")
    }
}
