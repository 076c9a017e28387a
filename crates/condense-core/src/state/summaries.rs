//! Per-batch summary bodies and the occurrences each covers.

use std::collections::HashSet;

use crate::occurrence::OccurrenceKey;

use super::State;

/// A per-batch summary body and the occurrences it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryBody {
    /// The occurrences the summary covers.
    pub keys: Vec<OccurrenceKey>,
    /// The summary's markdown text (with its refs footer).
    pub text: String,
}

impl State {
    /// Stores a per-batch summary body keyed by the occurrences it covers.
    pub fn register_summary_body(&mut self, keys: Vec<OccurrenceKey>, text: String) {
        self.changed();
        if text.is_empty() || keys.is_empty() {
            return;
        }
        let idx = self.summary_bodies.len();
        for k in &keys {
            let occ = self.occurrence_mut(k);
            if occ.summary_bodies.last() != Some(&idx) {
                occ.summary_bodies.push(idx);
            }
        }
        self.summary_bodies.push(SummaryBody { keys, text });
    }

    /// Every summary body, in registration order.
    pub fn summary_bodies(&self) -> &[SummaryBody] {
        &self.summary_bodies
    }

    /// The distinct per-batch summary texts covering any of `keys` (key texts,
    /// matched exactly), in registration order.
    pub fn summaries_covering<'a, I>(&self, keys: I) -> Vec<&str>
    where
        I: IntoIterator<Item = &'a str>,
    {
        let mut idxs: Vec<usize> = Vec::new();
        for text in keys {
            let k = OccurrenceKey::parse(text);
            if let Some(o) = self.occurrence(&k.id, k.result_timestamp) {
                idxs.extend_from_slice(&o.summary_bodies);
            }
        }
        idxs.sort_unstable();
        idxs.dedup();
        let mut seen = HashSet::new();
        idxs.into_iter()
            .map(|i| self.summary_bodies[i].text.as_str())
            .filter(|t| seen.insert(*t))
            .collect()
    }
}
