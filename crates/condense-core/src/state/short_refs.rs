//! Short refs (`t<N>`): registered from summaries, allocated by flushes.

use crate::occurrence::OccurrenceKey;
use crate::records::SummaryRef;

use super::State;

impl State {
    /// Registers short refs read from a summary (or allocated by a flush).
    /// A ref whose short id equals its tool-call id (legacy) registers no alias.
    pub fn register_summary_refs(&mut self, refs: &[SummaryRef]) {
        for r in refs {
            if r.short_id.is_empty() || r.tool_call_id.is_empty() {
                continue;
            }
            if r.short_id != r.tool_call_id {
                let key = r.key();
                self.short_refs.insert(r.short_id.clone(), key.clone());
                let switches = self.switches;
                let occ = self.occurrence_mut(&key);
                occ.short_ref = Some(r.short_id.clone());
                occ.ref_since.get_or_insert(switches);
            }
            if let Some(n) = r.short_id.strip_prefix('t').and_then(|d| {
                (!d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| d.parse::<u64>().ok())
                    .flatten()
            }) {
                self.next_short_ref = self.next_short_ref.max(n + 1);
            }
        }
    }

    /// Allocates the next `count` short refs (`t<N>`, monotonic) for keys, in order.
    pub fn allocate_short_refs(&mut self, keys: &[OccurrenceKey]) -> Vec<SummaryRef> {
        keys.iter()
            .map(|k| {
                let n = self.next_short_ref;
                self.next_short_ref += 1;
                SummaryRef {
                    short_id: format!("t{n}"),
                    tool_call_id: k.id.clone(),
                    result_timestamp: k.result_timestamp,
                }
            })
            .collect()
    }

    /// The number the next short ref will carry.
    pub fn next_short_ref(&self) -> u64 {
        self.next_short_ref
    }
}
