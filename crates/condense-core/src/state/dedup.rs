//! Dedup aliases: occurrences whose content an earlier record already holds,
//! and the content-hash map that finds that record.

use crate::occurrence::OccurrenceKey;
use crate::records::ToolCallRecord;
use rustc_hash::FxHashMap;

use super::State;

/// A record's content hash: the persisted one, else computed.
pub(super) fn record_hash(r: &ToolCallRecord) -> String {
    r.content_hash
        .clone()
        .unwrap_or_else(|| crate::dedup::content_hash(&r.tool_name, &r.result_text.to_str()))
}

impl State {
    /// Registers `new` as a duplicate of `original`: it is summarized,
    /// resolves to the original's record and shares the original's short
    /// ref as it stands now (an original without one yet, an eager spill,
    /// leaves the alias without one: a ref a chain's backfill gives the
    /// original later is not the alias's).
    pub fn register_dedup_alias(&mut self, new: &OccurrenceKey, original: &OccurrenceKey) {
        let switches = self.switches;
        let shared = self
            .occurrence(&original.id, original.result_timestamp)
            .and_then(|o| o.short_ref.clone());
        self.register_dedup_alias_since(new, original, switches, shared);
    }

    /// [`register_dedup_alias`](Self::register_dedup_alias) for an alias
    /// persisted when `since` switches had been recorded and its original's
    /// short ref was `shared` (replay applies aliases after its walk, but
    /// each is shown by its own position and with the ref it was shown with).
    pub(crate) fn register_dedup_alias_since(
        &mut self,
        new: &OccurrenceKey,
        original: &OccurrenceKey,
        since: u64,
        shared: Option<String>,
    ) {
        if new == original {
            return;
        }
        let occ = self.occurrence_mut(new);
        // Replay applies aliases after its walk, so an index record of the
        // same occurrence written *after* the alias (a later flush indexing
        // it) is already there: live, that record came second and set the
        // short ref, and the alias's earlier position decided when it was
        // shown. So the earliest position wins, and a record's own short ref
        // stays. (Live, an occurrence with a record is never aliased after.)
        occ.since = Some(occ.since.map_or(since, |s| s.min(since)));
        let own_record = occ.record.is_some();
        occ.alias_of = Some(original.clone());
        if !own_record {
            if let Some(s) = &shared {
                occ.short_ref = Some(s.clone());
            }
        }
        occ.alias_ref = shared;
    }

    /// The dedup original of an occurrence, if it is an alias.
    pub fn dedup_original(&self, id: &str, ts: Option<i64>) -> Option<&OccurrenceKey> {
        self.occurrence(id, ts)?.alias_of.as_ref()
    }

    /// The canonical record key for identical content, if an earlier flush
    /// indexed it.
    pub fn lookup_by_hash(&self, hash: &str) -> Option<&OccurrenceKey> {
        self.content_hashes
            .get_or_init(|| {
                let mut map = FxHashMap::default();
                for &i in &self.dedup_seeds {
                    let r = &self.records[i];
                    map.entry(record_hash(r)).or_insert_with(|| r.key());
                }
                map
            })
            .get(hash)
    }
}
