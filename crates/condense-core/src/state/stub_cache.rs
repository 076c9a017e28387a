//! The stub phase's view of an occurrence: the last stub rendered for it
//! (a cache cell) and, found with one lookup, everything a stub is built from.

use std::sync::Mutex;

use crate::message::Message;
use crate::records::ToolCallRecord;

use super::State;

/// The last stub rendered for an occurrence, tagged with the state
/// generation and protection fingerprint it was built under. Renders run
/// before every LLM call with the same state, so rebuilding ~1,000 identical
/// stubs each time is the main cost of a render; this makes a repeat render
/// a lookup. A cell is only ever a cache: a miss just builds the stub.
#[derive(Debug, Default)]
pub(crate) struct StubCell(Mutex<Option<CachedStub>>);

#[derive(Debug, Clone)]
pub(crate) struct CachedStub {
    pub(crate) generation: u64,
    pub(crate) protection: u64,
    /// `None`: the record is protected, the result stays verbatim.
    pub(crate) stub: Option<Message>,
}

impl Clone for StubCell {
    fn clone(&self) -> Self {
        StubCell::default()
    }
}

impl StubCell {
    pub(crate) fn get(&self, generation: u64, protection: u64) -> Option<Option<Message>> {
        let guard = self.0.lock().ok()?;
        let c = guard.as_ref()?;
        (c.generation == generation && c.protection == protection).then(|| c.stub.clone())
    }

    pub(crate) fn set(&self, value: CachedStub) {
        if let Ok(mut guard) = self.0.lock() {
            *guard = Some(value);
        }
    }
}

/// What the stub phase needs to know about a tool result's occurrence, found
/// with one lookup.
pub(crate) struct StubTarget<'a> {
    /// The record behind it (its own, or its dedup original's).
    pub(crate) record: Option<&'a ToolCallRecord>,
    /// Its short ref.
    pub(crate) short_ref: Option<&'a str>,
    /// The cache cell (exact occurrences only).
    pub(crate) cell: Option<&'a StubCell>,
    /// The switch count when the occurrence was first summarized.
    pub(crate) since: Option<u64>,
    /// A dedup alias that later got a record of its own (an uncovered
    /// chain's backfill, with a ref of its own): the switch count when that
    /// record was indexed, and the alias's view (the original's record and
    /// ref), which a stub shows until a switch shows the record.
    pub(crate) aliased_before: Option<AliasView<'a>>,
    /// The switch count when its short ref was registered.
    pub(crate) ref_since: Option<u64>,
}

/// What a dedup alias's stub showed before the occurrence was indexed itself.
pub(crate) struct AliasView<'a> {
    /// The switch count when the occurrence's own record was indexed.
    pub(crate) record_since: Option<u64>,
    /// The original's record.
    pub(crate) record: Option<&'a ToolCallRecord>,
    /// The short ref it shared with the original when aliased.
    pub(crate) short_ref: Option<&'a str>,
}

impl State {
    /// One lookup for the stub phase: the key a result at (`id`, `ts`) is
    /// stubbed under, with its record, short ref and cache cell.
    pub(crate) fn stub_target(&self, id: &str, ts: Option<i64>) -> Option<StubTarget<'_>> {
        let list = self.by_id.get(id)?;
        let exact = list
            .iter()
            .find(|o| o.ts == ts && (o.record.is_some() || o.alias_of.is_some()));
        let (occ, cell) = match exact {
            Some(o) => (o, Some(&o.stub)),
            None => {
                let bare = list.iter().find(|o| o.ts.is_none() && o.record.is_some())?;
                if list.iter().any(|o| o.ts.is_some() && o.record.is_some()) {
                    return None;
                }
                (bare, None)
            }
        };
        let record = match (occ.record, &occ.alias_of) {
            (Some(i), _) => Some(&self.records[i]),
            (None, Some(orig)) => self.record_exact(&orig.id, orig.result_timestamp),
            (None, None) => None,
        };
        let aliased_before = match (occ.record, &occ.alias_of) {
            (Some(_), Some(orig)) => Some(AliasView {
                record_since: occ.record_since,
                record: self.record_exact(&orig.id, orig.result_timestamp),
                short_ref: occ.alias_ref.as_deref(),
            }),
            _ => None,
        };
        Some(StubTarget {
            record,
            short_ref: occ.short_ref.as_deref(),
            cell,
            since: occ.since,
            aliased_before,
            ref_since: occ.ref_since,
        })
    }
}
