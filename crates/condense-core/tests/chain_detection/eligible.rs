//! The `select_eligible` inputs: chain ranges of each shape the table needs,
//! a state with some chains compressed, and the row type.

use condense_core::ChainEntry;
use condense_core::ChainRange;
use condense_core::OccurrenceKey;
use condense_core::State;

pub fn closed(ts: i64, ids: &[&str]) -> ChainRange {
    ChainRange {
        start_user_timestamp: ts,
        start_index: 0,
        end_index: Some(1),
        last_index: 1,
        final_assistant_timestamp: Some(ts + 100),
        middle_tool_call_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
        middle_occurrence_keys: ids
            .iter()
            .map(|id| OccurrenceKey::new(*id, Some(ts + 50)))
            .collect(),
        protected_tool_call_ids: vec![],
    }
}

pub fn tools(ts: i64) -> ChainRange {
    closed(ts, &[&format!("tc-{ts}")])
}

pub fn interrupted(ts: i64) -> ChainRange {
    ChainRange {
        end_index: None,
        final_assistant_timestamp: None,
        ..tools(ts)
    }
}

pub fn no_final_ts(ts: i64) -> ChainRange {
    ChainRange {
        final_assistant_timestamp: None,
        ..tools(ts)
    }
}

pub fn state_with_compressed(starts: &[i64]) -> State {
    let mut state = State::new();
    for (i, ts) in starts.iter().enumerate() {
        state.register_chain(ChainEntry {
            block_id: format!("b{}", i + 1),
            start_user_timestamp: *ts,
            dropped_tool_call_ids: vec![],
            final_assistant_timestamp: Some(ts + 100),
            tool_refs: vec![],
            compressed_at: 0,
            range_summary_text: None,
            body_source: None,
            protected_tool_call_ids: None,
            dropped_occurrence_keys: None,
            extra: Default::default(),
        });
    }
    state
}

pub struct Eligible {
    pub name: &'static str,
    pub chains: Vec<ChainRange>,
    pub window: u32,
    pub compressed: &'static [i64],
    pub grace: Vec<OccurrenceKey>,
    pub expected: &'static [i64],
}
