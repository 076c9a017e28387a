//! The index: records by occurrence, and the identity rules (listed in the
//! docs of `state`) that find the record behind a tool result or a query id.

use crate::occurrence::{split_occurrence, OccurrenceKey};
use crate::records::ToolCallRecord;

use super::dedup::record_hash;
use super::State;

impl State {
    /// Indexes a record (a later record with the same key replaces the earlier
    /// one, as a map would). `seed_dedup` makes it a dedup canonical when no
    /// record with the same content hash is known yet (backfilled records never
    /// are). Returns the record's key.
    pub fn add_record(&mut self, record: ToolCallRecord, seed_dedup: bool) -> OccurrenceKey {
        let key = record.key();
        let idx = self.records.len();
        if seed_dedup {
            match self.content_hashes.get_mut() {
                // Already hashed: keep it current (first seen still wins).
                Some(map) => {
                    map.entry(record_hash(&record))
                        .or_insert_with(|| key.clone());
                }
                None => self.dedup_seeds.push(idx),
            }
        }
        if self.records.len() == self.records.capacity() {
            // A session keeps every record, each a few hundred bytes: grow
            // by a quarter, not double, so a long one holds little slack.
            self.records.reserve_exact((self.records.len() / 4).max(16));
        }
        self.records.push(record);
        let switches = self.switches;
        let occ = self.occurrence_mut(&key);
        occ.record = Some(idx);
        occ.since.get_or_insert(switches);
        occ.record_since.get_or_insert(switches);
        key
    }

    /// Every indexed record, in indexing order (replaced ones included).
    pub fn records(&self) -> &[ToolCallRecord] {
        &self.records
    }

    /// Number of distinct indexed occurrences.
    pub fn indexed_count(&self) -> usize {
        self.by_id
            .values()
            .flat_map(|v| v.iter())
            .filter(|o| o.record.is_some())
            .count()
    }

    /// The record stored under exactly this key.
    pub fn record_exact(&self, id: &str, ts: Option<i64>) -> Option<&ToolCallRecord> {
        self.occurrence(id, ts)?.record.map(|i| &self.records[i])
    }

    /// True if exactly this occurrence is indexed or a dedup alias.
    pub fn is_summarized(&self, id: &str, ts: Option<i64>) -> bool {
        self.occurrence(id, ts)
            .is_some_and(|o| o.record.is_some() || o.alias_of.is_some())
    }

    /// True if the bare id has an indexed legacy record and no indexed
    /// occurrence siblings.
    pub fn has_legacy_bare_record(&self, id: &str) -> bool {
        let Some(list) = self.by_id.get(id) else {
            return false;
        };
        let bare = list.iter().any(|o| o.ts.is_none() && o.record.is_some());
        let siblings = list.iter().any(|o| o.ts.is_some() && o.record.is_some());
        bare && !siblings
    }

    /// The key a tool result at (`id`, `ts`) is stubbed under, if any: its
    /// exact occurrence when summarized, else the legacy bare record.
    pub fn lookup_key_for_result(&self, id: &str, ts: Option<i64>) -> Option<Option<i64>> {
        if self.is_summarized(id, ts) {
            Some(ts)
        } else if self.has_legacy_bare_record(id) {
            Some(None)
        } else {
            None
        }
    }

    /// The record behind an occurrence: its own, or its dedup original's.
    pub fn record_for(&self, id: &str, ts: Option<i64>) -> Option<&ToolCallRecord> {
        let occ = self.occurrence(id, ts)?;
        if let Some(i) = occ.record {
            return Some(&self.records[i]);
        }
        let orig = occ.alias_of.as_ref()?;
        self.record_exact(&orig.id, orig.result_timestamp)
    }
}

impl State {
    /// The short ref registered for an occurrence.
    pub fn short_ref(&self, id: &str, ts: Option<i64>) -> Option<&str> {
        self.occurrence(id, ts)?.short_ref.as_deref()
    }

    /// Resolves a query id (occurrence key text, dedup alias, short ref, or a
    /// bare id with exactly one occurrence) to the key of its record.
    pub fn resolve(&self, text: &str) -> Option<OccurrenceKey> {
        let key = OccurrenceKey::parse(text);
        if let Some(occ) = self.occurrence(&key.id, key.result_timestamp) {
            if occ.record.is_some() {
                return Some(key);
            }
            if let Some(orig) = &occ.alias_of {
                return Some(orig.clone());
            }
        }
        if let Some(target) = self.short_refs.get(text) {
            return Some(self.canonical(target));
        }
        if key.result_timestamp.is_none() {
            let list = self.by_id.get(text)?;
            let mut found = list.iter().filter(|o| o.ts.is_some() && o.record.is_some());
            if let (Some(only), None) = (found.next(), found.next()) {
                return Some(OccurrenceKey::new(text, only.ts));
            }
        }
        None
    }

    /// Follows a dedup alias to its original.
    fn canonical(&self, key: &OccurrenceKey) -> OccurrenceKey {
        match self.occurrence(&key.id, key.result_timestamp) {
            Some(o) if o.record.is_none() => o.alias_of.clone().unwrap_or_else(|| key.clone()),
            _ => key.clone(),
        }
    }

    /// Every record a query id names. A bare id with several occurrences
    /// (dedup-alias occurrences included, each labelled with its own result
    /// timestamp) expands to all of them, oldest first; otherwise a single
    /// [`resolve`](Self::resolve) result.
    pub fn records_for_query(&self, text: &str) -> Vec<ToolCallRecord> {
        if split_occurrence(text).is_none() && !self.short_refs.contains_key(text) {
            if let Some(list) = self.by_id.get(text) {
                let mut out: Vec<ToolCallRecord> = list
                    .iter()
                    .filter_map(|o| {
                        if let Some(i) = o.record {
                            return Some(self.records[i].clone());
                        }
                        let orig = o.alias_of.as_ref()?;
                        let mut r = self.record_exact(&orig.id, orig.result_timestamp)?.clone();
                        r.tool_call_id = text.to_owned();
                        r.result_timestamp = o.ts;
                        Some(r)
                    })
                    .collect();
                if out.len() > 1 {
                    out.sort_by_key(|r| r.result_timestamp.unwrap_or(r.timestamp));
                    return out;
                }
            }
        }
        self.resolve(text)
            .and_then(|k| self.record_exact(&k.id, k.result_timestamp).cloned())
            .into_iter()
            .collect()
    }
}
