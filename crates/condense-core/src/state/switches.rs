//! Switches under the cache-aware display policy: what a switch shows, and
//! what is still pending until the next one.

use super::State;

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

    /// The switch count when the chain starting at this timestamp was first
    /// compressed.
    pub(crate) fn chain_since(&self, start_user_timestamp: i64) -> Option<u64> {
        self.chain_since.get(&start_user_timestamp).copied()
    }
}
