//! Building a [`State`] from what was persisted, without knowing the order
//! replay must apply it in.

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
///   else, so an alias finds its original whatever the append order (each
///   keeps its own position for the cache-aware policy's switches);
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
    aliases: Vec<(OccurrenceKey, OccurrenceKey, u64)>,
}

impl StateBuilder {
    /// A builder for an empty state.
    pub fn new() -> StateBuilder {
        StateBuilder {
            state: State::new(),
            aliases: Vec::new(),
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
        self.aliases.push((new, original, since));
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
        for (new, original, since) in &self.aliases {
            self.state.register_dedup_alias_since(new, original, *since);
        }
        self.state
    }
}
