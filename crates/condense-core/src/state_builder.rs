//! Building a [`State`] from what was persisted, without knowing the order
//! replay must apply it in.

use std::collections::HashSet;

use crate::occurrence::OccurrenceKey;
use crate::records::{ChainEntry, Frontier, SummarizerStats, SummaryRef, ToolCallRecord};
use crate::state::State;

/// Builds a [`State`] from persisted pieces, fed in the order they were
/// appended to the branch (root first).
///
/// The builder applies each piece the way pi-condense's reload does, so the
/// caller needs to know nothing of that order:
/// - records, summaries and chains take effect as they come (a later record
///   with the same occurrence replaces an earlier one; short refs `t<N>`
///   and block ids `b<N>` continue after the highest seen);
/// - dedup aliases are applied by [`StateBuilder::build`], after everything
///   else, so an alias finds its original and its short ref whatever the
///   append order (a summary delivered at runtime may land after a later
///   alias of one of its outputs); each keeps its own position for the
///   cache-aware policy's switches, and an alias of an original that had
///   no ref yet (an eager spill) takes none from a chain's backfill after it;
/// - a switch shows, under the cache-aware policy, what came before it;
/// - the last frontier and the last stats snapshot win.
///
/// ```
/// use condense_core::{StateBuilder, SummaryRef, ToolCallRecord};
///
/// let record: ToolCallRecord = serde_json::from_str(
///     r#"{"toolCallId":"c1","toolName":"read","args":{"path":"a.rs"},
///         "resultText":"fn main() {}","isError":false,"turnIndex":1,
///         "timestamp":1000,"resultTimestamp":1001}"#,
/// )?;
/// let key = record.key();
/// let refs = [SummaryRef {
///     short_id: "t1".into(),
///     tool_call_id: "c1".into(),
///     result_timestamp: Some(1001),
/// }];
///
/// let mut builder = StateBuilder::new();
/// builder.record(record, false).summary(&refs, "- read `a.rs`".into());
/// let state = builder.build();
///
/// assert!(state.is_summarized("c1", Some(1001)));
/// assert_eq!(state.short_ref("c1", Some(1001)), Some("t1"));
/// assert_eq!(state.resolve("t1"), Some(key));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct StateBuilder {
    state: State,
    aliases: Vec<PendingAlias>,
    /// Occurrences whose short ref a chain's backfill gave.
    backfilled_refs: HashSet<OccurrenceKey>,
}

/// A dedup alias waiting for [`StateBuilder::build`].
#[derive(Debug)]
struct PendingAlias {
    new: OccurrenceKey,
    original: OccurrenceKey,
    /// Switches recorded before it.
    since: u64,
    /// Whether its original had a short ref at the alias's position: when
    /// not, a ref a backfill gives the original later is not the alias's
    /// (a summary's ref may come later in the file, a backfill's never).
    original_had_ref: bool,
}

impl StateBuilder {
    /// A builder for an empty state.
    pub fn new() -> StateBuilder {
        StateBuilder {
            state: State::new(),
            aliases: Vec::new(),
            backfilled_refs: HashSet::new(),
        }
    }

    /// An index record (`context-prune-index`). A record that was not
    /// `backfilled` seeds dedup: the first record seen with a given content
    /// hash becomes the original later duplicates alias.
    pub fn record(&mut self, record: ToolCallRecord, backfilled: bool) -> &mut StateBuilder {
        self.state.add_record(record, !backfilled);
        self
    }

    /// The short refs a backfilled index entry carries.
    pub fn backfill_refs(&mut self, refs: &[SummaryRef]) -> &mut StateBuilder {
        for r in refs {
            let key = r.key();
            if self
                .state
                .short_ref(&key.id, key.result_timestamp)
                .is_none()
            {
                self.backfilled_refs.insert(key);
            }
        }
        self.state.register_summary_refs(refs);
        self
    }

    /// A per-batch summary (`context-prune-summary`): its refs register short
    /// refs, and its text becomes the summary body of the refs' occurrences.
    pub fn summary(&mut self, refs: &[SummaryRef], text: String) -> &mut StateBuilder {
        self.state.register_summary_refs(refs);
        self.state
            .register_summary_body(refs.iter().map(SummaryRef::key).collect(), text);
        self
    }

    /// A compressed chain (`context-prune-chain`); a later one with the same
    /// start replaces an earlier one.
    pub fn chain(&mut self, entry: ChainEntry) -> &mut StateBuilder {
        self.state.register_chain(entry);
        self
    }

    /// A dedup alias (`context-prune-dedup-alias`): `new` is recovered
    /// through `original`. Applied by [`StateBuilder::build`].
    pub fn dedup_alias(
        &mut self,
        new: OccurrenceKey,
        original: OccurrenceKey,
    ) -> &mut StateBuilder {
        let since = self.state.switch_count();
        let original_had_ref = self
            .state
            .short_ref(&original.id, original.result_timestamp)
            .is_some();
        self.aliases.push(PendingAlias {
            new,
            original,
            since,
            original_had_ref,
        });
        self
    }

    /// A switch (`context-prune-switch`), decided when the context held
    /// `messages` messages: what came before it is shown under the
    /// cache-aware policy.
    pub fn switch(&mut self, messages: usize) -> &mut StateBuilder {
        self.state.record_switch(messages);
        self
    }

    /// A frontier (`context-prune-frontier`); the last one wins.
    pub fn frontier(&mut self, frontier: Frontier) -> &mut StateBuilder {
        self.state.set_frontier(frontier);
        self
    }

    /// A stats snapshot (`context-prune-stats`); the last one wins.
    pub fn stats(&mut self, stats: SummarizerStats) -> &mut StateBuilder {
        self.state.set_stats(stats);
        self
    }

    /// The state, with the dedup aliases applied.
    pub fn build(mut self) -> State {
        for a in &self.aliases {
            let backfilled_after =
                !a.original_had_ref && self.backfilled_refs.contains(&a.original);
            let shared = (!backfilled_after)
                .then(|| {
                    self.state
                        .short_ref(&a.original.id, a.original.result_timestamp)
                        .map(str::to_owned)
                })
                .flatten();
            self.state
                .register_dedup_alias_since(&a.new, &a.original, a.since, shared);
        }
        self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(id: &str, ts: i64, spilled: bool) -> ToolCallRecord {
        serde_json::from_value(json!({
            "toolCallId": id, "toolName": "read", "args": {}, "resultText": "SAME",
            "isError": false, "turnIndex": 0, "timestamp": 1000, "resultTimestamp": ts,
            "spillPath": spilled.then_some("/blobs/x.txt"),
        }))
        .expect("a record")
    }

    fn sref(short: &str, key: &OccurrenceKey) -> SummaryRef {
        SummaryRef {
            short_id: short.into(),
            tool_call_id: key.id.clone(),
            result_timestamp: key.result_timestamp,
        }
    }

    /// Live: an eager spill (no ref), an alias of it (no ref to share), a
    /// chain's backfill giving the original `t3`. Replay must not hand the
    /// alias `t3`: its stub was shown naming its own id.
    #[test]
    fn an_alias_of_an_eager_spill_takes_no_ref_its_originals_later_backfill_gives() {
        let original = OccurrenceKey::parse("g0@1500");
        let alias = OccurrenceKey::parse("g2@9500");
        let mut live = State::new();
        live.add_record(rec("g0", 1500, true), true);
        live.register_dedup_alias(&alias, &original);
        live.register_summary_refs(&[sref("t3", &original)]);

        let mut builder = StateBuilder::new();
        builder
            .record(rec("g0", 1500, true), false)
            .dedup_alias(alias.clone(), original.clone())
            .backfill_refs(&[sref("t3", &original)]);
        let replayed = builder.build();

        for s in [&live, &replayed] {
            assert_eq!(s.short_ref("g0", Some(1500)), Some("t3"));
            assert_eq!(s.short_ref("g2", Some(9500)), None);
            assert_eq!(s.resolve("g2@9500"), Some(original.clone()));
        }
    }

    /// A summary delivered at runtime lands after entries appended later
    /// (a turn-end spill's alias of one of its outputs): the alias still
    /// shares the ref live gave it.
    #[test]
    fn an_alias_written_before_its_originals_summary_shares_its_ref() {
        let original = OccurrenceKey::parse("c1@1500");
        let alias = OccurrenceKey::parse("g2@9500");
        let mut live = State::new();
        live.add_record(rec("c1", 1500, false), true);
        live.register_summary_refs(&[sref("t1", &original)]);
        live.register_dedup_alias(&alias, &original);

        let mut builder = StateBuilder::new();
        builder
            .record(rec("c1", 1500, false), false)
            .dedup_alias(alias.clone(), original.clone())
            .summary(&[sref("t1", &original)], "- read".into());
        let replayed = builder.build();

        for s in [&live, &replayed] {
            assert_eq!(s.short_ref("g2", Some(9500)), Some("t1"));
        }
    }

    /// An alias after the backfill that gave its original a ref shares it.
    #[test]
    fn an_alias_after_its_originals_backfill_shares_its_ref() {
        let original = OccurrenceKey::parse("g0@1500");
        let alias = OccurrenceKey::parse("g2@9500");
        let mut builder = StateBuilder::new();
        builder
            .record(rec("g0", 1500, true), false)
            .backfill_refs(&[sref("t3", &original)])
            .dedup_alias(alias, original);
        assert_eq!(builder.build().short_ref("g2", Some(9500)), Some("t3"));
    }
}
