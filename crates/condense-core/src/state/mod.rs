//! The pruning state: what has been indexed, under which refs, which chains
//! are compressed, and where the last flush stopped.
//!
//! Everything here is rebuilt by folding a branch's entries (see
//! `condense-store`'s replay) and extended by flushes. Lookups that run on
//! every render take borrowed ids, so rendering allocates no keys.
//!
//! Identity rules (pi-condense ≥ 2.6):
//! - a record is keyed by its [`OccurrenceKey`] `id@resultTimestamp`, or by the
//!   bare id for legacy records;
//! - [`State::is_summarized`] is strict: an exact key in the index or a dedup
//!   alias, nothing else;
//! - the legacy bare fallback applies only when the bare id has an indexed
//!   bare record and no indexed occurrence siblings (fail closed);
//! - [`State::resolve`] tries exact key → dedup alias → short ref → a bare id
//!   with exactly one occurrence.

mod chains;
mod dedup;
mod index;
mod short_refs;
mod stub_cache;
mod summaries;
mod switches;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use crate::occurrence::OccurrenceKey;
use crate::records::{ChainEntry, Frontier, SummarizerStats, ToolCallRecord};

pub(crate) use stub_cache::CachedStub;
use stub_cache::StubCell;
pub use summaries::SummaryBody;

/// Per-occurrence facts, grouped under the bare id.
#[derive(Debug, Clone, Default)]
struct Occurrence {
    ts: Option<i64>,
    record: Option<usize>,
    alias_of: Option<OccurrenceKey>,
    short_ref: Option<String>,
    /// The short ref a dedup alias shared with its original when it was
    /// aliased: none when the original had none yet (an eager spill, whose
    /// later ref from a chain's backfill the alias never takes). What its
    /// stub names until its own record, if it gets one, is shown.
    alias_ref: Option<String>,
    summary_bodies: Vec<usize>,
    stub: StubCell,
    /// The number of switches recorded when this occurrence was first
    /// summarized (indexed or aliased): it is shown once a later switch
    /// exists (under the cache-aware policy).
    since: Option<u64>,
    /// The number of switches recorded when its own record was first
    /// indexed: later than `since` for a dedup alias an uncovered chain
    /// backfilled, whose stub shows the alias until a switch shows the record.
    record_since: Option<u64>,
    /// The number of switches recorded when its short ref was registered:
    /// later than `since` for an eager spill (indexed without a ref) a
    /// chain's backfill gave a ref, whose stub names the raw id until a
    /// switch shows the ref.
    ref_since: Option<u64>,
}

/// The pruning state of one branch.
#[derive(Debug, Clone, Default)]
pub struct State {
    records: Vec<ToolCallRecord>,
    by_id: FxHashMap<String, Vec<Occurrence>>,
    generation: u64,
    /// Increases with `generation` on every change but a switch.
    content_generation: u64,
    /// The blocks registrations added or replaced, in order (see
    /// [`State::registered_blocks`]).
    registered_blocks: Vec<String>,
    short_refs: HashMap<String, OccurrenceKey>,
    next_short_ref: u64,
    /// Records that seed dedup, in indexing order; hashed on first lookup
    /// (a reload that never flushes never pays for SHA-1 over every output).
    dedup_seeds: Vec<usize>,
    content_hashes: OnceLock<FxHashMap<String, OccurrenceKey>>,
    summary_bodies: Vec<SummaryBody>,
    chains: BTreeMap<i64, ChainEntry>,
    /// Per chain start: the switch count when it was first compressed.
    chain_since: BTreeMap<i64, u64>,
    next_block: u64,
    /// Switch entries recorded on the branch so far.
    switches: u64,
    /// The number of messages the context held at the last switch.
    purge_horizon: Option<usize>,
    /// The last attempted prune boundary.
    frontier: Option<Frontier>,
    /// Cumulative summarizer usage.
    stats: SummarizerStats,
}

impl State {
    /// An empty state.
    pub fn new() -> Self {
        State {
            next_short_ref: 1,
            next_block: 1,
            ..State::default()
        }
    }

    // ---- frontier and stats --------------------------------------------------

    /// The last attempted prune boundary, if a flush ever attempted one.
    pub fn frontier(&self) -> Option<&Frontier> {
        self.frontier.as_ref()
    }

    /// Records the last attempted prune boundary (replacing the previous one).
    pub fn set_frontier(&mut self, frontier: Frontier) {
        self.frontier = Some(frontier);
    }

    /// Cumulative summarizer usage.
    pub fn stats(&self) -> &SummarizerStats {
        &self.stats
    }

    /// Replaces the cumulative summarizer usage (with a persisted snapshot).
    pub fn set_stats(&mut self, stats: SummarizerStats) {
        self.stats = stats;
    }

    /// The cumulative usage, for a flush to add its calls to.
    pub(crate) fn stats_mut(&mut self) -> &mut SummarizerStats {
        &mut self.stats
    }

    fn occurrence(&self, id: &str, ts: Option<i64>) -> Option<&Occurrence> {
        self.by_id.get(id)?.iter().find(|o| o.ts == ts)
    }

    fn occurrence_mut(&mut self, key: &OccurrenceKey) -> &mut Occurrence {
        self.changed();
        // Looked up before inserting so a known id is not copied again.
        if !self.by_id.contains_key(key.id.as_str()) {
            self.by_id.insert(key.id.clone(), Vec::new());
        }
        let list = self.by_id.get_mut(key.id.as_str()).expect("inserted above");
        let pos = match list.iter().position(|o| o.ts == key.result_timestamp) {
            Some(p) => p,
            None => {
                // Nearly every id has one occurrence: grow one at a time
                // rather than to `Vec`'s first capacity of four.
                list.reserve_exact(1);
                list.push(Occurrence {
                    ts: key.result_timestamp,
                    ..Occurrence::default()
                });
                list.len() - 1
            }
        };
        &mut list[pos]
    }

    /// Changes on every change that can alter a render.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Changes on every change but a switch: what the state holds, as
    /// opposed to what it shows (a chain's text depends on this alone).
    pub(crate) fn content_generation(&self) -> u64 {
        self.content_generation
    }

    fn changed(&mut self) {
        self.generation = next_generation();
        self.content_generation = self.generation;
    }
}

/// A generation no state has had. Generations are drawn from one counter
/// for the whole process, not counted per state, so the memos the phases
/// keep beside a state (`Branch`) key on them soundly: a state put in
/// place of another never meets an entry the other left under the same
/// number. Two states share a generation only as a clone and its original
/// before either changes, when they hold the same facts.
fn next_generation() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::SummaryRef;
    use serde_json::json;

    fn rec(id: &str, ts: Option<i64>, text: &str) -> ToolCallRecord {
        serde_json::from_value(json!({
            "toolCallId": id, "toolName": "bash", "args": {}, "resultText": text,
            "isError": false, "turnIndex": 0, "timestamp": 1000,
            "resultTimestamp": ts,
        }))
        .unwrap()
    }

    fn sref(short: &str, id: &str, ts: Option<i64>) -> SummaryRef {
        SummaryRef {
            short_id: short.into(),
            tool_call_id: id.into(),
            result_timestamp: ts,
        }
    }

    #[test]
    fn occurrences_of_a_reused_id_stay_apart() {
        let mut s = State::new();
        s.add_record(rec("bash_23", Some(1150), "FIRST"), true);
        s.add_record(rec("bash_23", Some(2150), "SECOND"), true);
        assert!(s.is_summarized("bash_23", Some(1150)));
        assert!(!s.is_summarized("bash_23", Some(3150)));
        assert!(!s.is_summarized("bash_23", None));
        assert_eq!(s.resolve("bash_23"), None, "ambiguous bare id");
        let all = s.records_for_query("bash_23");
        assert_eq!(
            all.iter()
                .map(|r| r.result_text.to_str())
                .collect::<Vec<_>>(),
            ["FIRST", "SECOND"]
        );
    }

    #[test]
    fn single_occurrence_resolves_from_bare_id_but_is_not_summarized_by_it() {
        let mut s = State::new();
        s.add_record(rec("bash_23", Some(1150), "FIRST"), true);
        assert!(!s.is_summarized("bash_23", None));
        assert_eq!(s.resolve("bash_23").unwrap().to_string(), "bash_23@1150");
    }

    #[test]
    fn legacy_bare_fallback_fails_closed_when_mixed() {
        let mut s = State::new();
        s.add_record(rec("b1", None, "OLD"), true);
        assert!(s.has_legacy_bare_record("b1"));
        s.add_record(rec("b3", None, "OLD"), true);
        s.add_record(rec("b3", Some(2150), "NEW"), true);
        assert!(!s.has_legacy_bare_record("b3"));
        s.add_record(rec("b2", Some(1), "NEW"), true);
        assert!(!s.has_legacy_bare_record("b2"));
    }

    #[test]
    fn short_refs_and_dedup_aliases() {
        let mut s = State::new();
        s.add_record(rec("bash_23", Some(1150), "SAME"), true);
        s.register_summary_refs(&[sref("t1", "bash_23", Some(1150))]);
        s.register_dedup_alias(
            &OccurrenceKey::parse("bash_99@4150"),
            &OccurrenceKey::parse("bash_23@1150"),
        );
        assert!(s.is_summarized("bash_99", Some(4150)));
        assert_eq!(s.short_ref("bash_99", Some(4150)), Some("t1"));
        assert_eq!(s.resolve("t1").unwrap().to_string(), "bash_23@1150");
        assert_eq!(
            s.resolve("bash_99@4150").unwrap().to_string(),
            "bash_23@1150"
        );
        assert_eq!(s.next_short_ref(), 2);
        let refs = s.allocate_short_refs(&[OccurrenceKey::parse("x@1")]);
        assert_eq!(refs[0].short_id, "t2");
    }

    /// Live: an output is aliased to an earlier one (at capture), a switch
    /// shows it, and a later flush indexes the same occurrence with a short
    /// ref of its own. Replay applies the alias after its walk, so it sees
    /// the record first: the alias's earlier position and the record's ref
    /// must still win, or a reload renders a pending output and another ref.
    #[test]
    fn an_alias_replayed_after_a_later_record_of_its_occurrence_keeps_the_live_order() {
        let new = OccurrenceKey::parse("bash_99@4150");
        let original = OccurrenceKey::parse("bash_23@1150");
        let mut live = State::new();
        live.add_record(rec("bash_23", Some(1150), "SAME"), true);
        live.register_summary_refs(&[sref("t1", "bash_23", Some(1150))]);
        live.register_dedup_alias(&new, &original);
        live.record_switch(10);
        live.add_record(rec("bash_99", Some(4150), "SAME"), true);
        live.register_summary_refs(&[sref("t2", "bash_99", Some(4150))]);
        live.record_switch(20);

        let mut replay = State::new();
        replay.add_record(rec("bash_23", Some(1150), "SAME"), true);
        replay.register_summary_refs(&[sref("t1", "bash_23", Some(1150))]);
        replay.record_switch(10);
        replay.add_record(rec("bash_99", Some(4150), "SAME"), true);
        replay.register_summary_refs(&[sref("t2", "bash_99", Some(4150))]);
        replay.record_switch(20);
        // The alias entry sat before the first switch.
        replay.register_dedup_alias_since(&new, &original, 0, Some("t1".into()));

        for s in [&live, &replay] {
            let target = s.stub_target("bash_99", Some(4150)).unwrap();
            assert_eq!(target.since, Some(0));
            assert_eq!(target.short_ref, Some("t2"));
        }
    }

    #[test]
    fn alias_occurrence_of_same_bare_id_is_listed_with_its_own_timestamp() {
        let mut s = State::new();
        s.add_record(rec("bash_23", Some(1150), "SAME"), true);
        s.register_dedup_alias(
            &OccurrenceKey::parse("bash_23@9150"),
            &OccurrenceKey::parse("bash_23@1150"),
        );
        let all = s.records_for_query("bash_23");
        assert_eq!(
            all.iter().map(|r| r.result_timestamp).collect::<Vec<_>>(),
            [Some(1150), Some(9150)]
        );
    }

    #[test]
    fn summary_bodies_are_occurrence_keyed_and_distinct() {
        let mut s = State::new();
        s.register_summary_body(vec![OccurrenceKey::parse("a@1")], "S1".into());
        s.register_summary_body(
            vec![OccurrenceKey::parse("b@2"), OccurrenceKey::parse("c@3")],
            "S2".into(),
        );
        s.register_summary_body(vec![OccurrenceKey::parse("c@3")], "S1".into());
        assert_eq!(s.summaries_covering(["a@1", "c@3"]), ["S1", "S2"]);
        assert!(s.summaries_covering(["a@9"]).is_empty());
        assert!(s.summaries_covering(["a"]).is_empty());
    }

    #[test]
    fn block_ids_continue_after_the_highest() {
        let mut s = State::new();
        let chain: ChainEntry = serde_json::from_value(json!({
            "blockId": "b7", "startUserTimestamp": 1, "droppedToolCallIds": [],
            "finalAssistantTimestamp": 2, "toolRefs": [], "compressedAt": 3
        }))
        .unwrap();
        s.register_chain(chain);
        assert_eq!(s.allocate_block_id(), "b8");
    }
}
