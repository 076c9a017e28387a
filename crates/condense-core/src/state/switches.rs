//! Switches under the cache-aware display policy: what a switch shows, and
//! what is still pending until the next one.

use super::{Occurrence, State};
use crate::message::{Message, Role};

impl State {
    /// Records a switch (`context-prune-switch`): everything summarized,
    /// aliased or compressed so far is shown from now on under the
    /// cache-aware policy, and failed calls among the first `messages`
    /// messages of the context may have their arguments purged.
    pub fn record_switch(&mut self, messages: usize) {
        // What is shown changes, not what the state holds.
        self.generation = super::next_generation();
        self.switches += 1;
        self.purge_horizon = Some(messages);
    }

    /// Switch entries recorded so far.
    pub fn switch_count(&self) -> u64 {
        self.switches
    }

    /// The number of messages the context held at the last switch.
    pub fn purge_horizon(&self) -> Option<usize> {
        self.purge_horizon
    }

    /// Occurrences and chains added since the last switch: what the next
    /// switch would show under the cache-aware policy. None before the
    /// first switch: a branch without one renders everything.
    pub fn pending_count(&self) -> usize {
        if self.switches == 0 {
            return 0;
        }
        let occurrences = self
            .by_id
            .values()
            .flat_map(|v| v.iter())
            .filter(|o| o.since.is_some_and(|s| s >= self.switches))
            .count();
        let chains = self
            .chain_since
            .values()
            .filter(|s| **s >= self.switches)
            .count();
        occurrences + chains
    }

    /// Where the next switch would first change a prompt of `messages`: the
    /// first tool result it would show summarized, or the first user
    /// message whose chain it would show compressed. None before the first
    /// switch (a branch without one shows each flush at once) and when
    /// nothing waits for one. A flush that will be shown by the same
    /// switch as these rewrites the prompt from there, not from its own
    /// first output.
    pub fn first_unshown(&self, messages: &[Message]) -> Option<usize> {
        if self.switches == 0 {
            return None;
        }
        let unshown = |o: &Occurrence| {
            [o.since, o.record_since, o.ref_since]
                .iter()
                .any(|s| s.is_some_and(|s| s >= self.switches))
        };
        messages.iter().position(|m| {
            let skeleton = m.skeleton();
            if m.is(&Role::ToolResult) {
                skeleton
                    .tool_call_id
                    .as_deref()
                    .and_then(|id| self.by_id.get(id))
                    .is_some_and(|list| list.iter().any(unshown))
            } else if m.is(&Role::User) {
                m.timestamp()
                    .and_then(|ts| self.chain_since(ts))
                    .is_some_and(|s| s >= self.switches)
            } else {
                false
            }
        })
    }

    /// The switch count when the chain starting at this timestamp was first
    /// compressed.
    pub(crate) fn chain_since(&self, start_user_timestamp: i64) -> Option<u64> {
        self.chain_since.get(&start_user_timestamp).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{ChainEntry, ToolCallRecord};
    use crate::OccurrenceKey;
    use serde_json::json;

    /// Two turns, each a read of `c<n>` answered at timestamp `10n + 3`.
    fn two_turns() -> Vec<Message> {
        let mut out = Vec::new();
        for n in [1, 2] {
            let t = 10 * n;
            let id = format!("c{n}");
            for v in [
                json!({"role":"user","content":"go","timestamp":t + 1}),
                json!({"role":"assistant","content":[{"type":"toolCall","id":id,"name":"read","arguments":{}}],"timestamp":t + 2}),
                json!({"role":"toolResult","toolCallId":id,"toolName":"read","content":[{"type":"text","text":"x"}],"isError":false,"timestamp":t + 3}),
            ] {
                out.push(Message::from_value(&v).unwrap());
            }
        }
        out
    }

    fn summarize(state: &mut State, n: i64) {
        let record: ToolCallRecord = serde_json::from_value(json!({
            "toolCallId": format!("c{n}"), "toolName": "read", "args": {}, "resultText": "x",
            "isError": false, "turnIndex": n, "timestamp": 10 * n + 2, "resultTimestamp": 10 * n + 3
        }))
        .unwrap();
        let key = state.add_record(record, false);
        state.register_summary_body(vec![key], "S".to_owned());
    }

    #[test]
    fn the_next_switch_changes_the_prompt_from_the_oldest_output_it_shows() {
        let messages = two_turns();
        let mut state = State::default();
        summarize(&mut state, 1);
        assert_eq!(
            state.first_unshown(&messages),
            None,
            "no switch yet: shown at once"
        );
        state.record_switch(messages.len());
        assert_eq!(state.first_unshown(&messages), None, "the switch showed it");
        summarize(&mut state, 2);
        assert_eq!(state.first_unshown(&messages), Some(5), "c2's output waits");
        state.record_switch(messages.len());
        assert_eq!(state.first_unshown(&messages), None);
    }

    #[test]
    fn a_chain_compressed_after_the_last_switch_waits_from_its_user_message() {
        let messages = two_turns();
        let mut state = State::default();
        state.record_switch(0);
        summarize(&mut state, 2);
        let chain: ChainEntry = serde_json::from_value(json!({
            "blockId": "b1", "startUserTimestamp": 11, "droppedToolCallIds": ["c1"],
            "droppedOccurrenceKeys": [OccurrenceKey::new("c1", Some(13)).to_string()],
            "finalAssistantTimestamp": 12, "toolRefs": [], "compressedAt": 9
        }))
        .unwrap();
        state.register_chain(chain);
        assert_eq!(state.first_unshown(&messages), Some(0));
    }
}
