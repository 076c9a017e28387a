//! Where the provider's cache was colder than the replay assumes. The
//! replay reads a call's shared prefix from the cache whenever the TTL has
//! not passed; a recording shows the provider evicting sooner. A call is a
//! *miss* when the replay reads a prefix from the cache and the provider
//! reported reading less than half of it. Counted by the gap since the
//! previous call, this is the raw material of a miss model
//! (docs/economy.md, "What the replay does not model").

use condense_core::{MissCounts, MissRates, GAP_EDGES_S};
use serde_json::{json, Value};

use super::replay::SimCall;

/// Calls and misses in each gap bucket: core's [`MissCounts`], as a replay
/// finds them and a report shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Misses(pub MissCounts);

impl Misses {
    /// The misses among `calls` (one run, in order): every call the replay
    /// reads a prefix from the cache for (by the TTL), whose time, previous
    /// call's time and recorded usage are known, missed when the recorded
    /// read is under half its shared prefix.
    pub fn of(calls: &[SimCall]) -> Misses {
        let mut m = MissCounts::default();
        for pair in calls.windows(2) {
            let (previous, call) = (&pair[0], &pair[1]);
            let (Some(before), Some(at), Some(recorded)) =
                (previous.at_ms, call.at_ms, call.recorded)
            else {
                continue;
            };
            if call.bill.cache_read == 0 || recorded.prompt() == 0 || at < before {
                continue;
            }
            // The prefix a warm cache serves, whatever miss model bills
            // the call.
            let missed = recorded.cache_read.saturating_mul(2) < call.shared_prefix;
            m.record(at.saturating_sub(before), missed);
        }
        Misses(m)
    }

    /// The shares these counts saw: each bucket's misses over its calls; a
    /// bucket with no call takes the bucket before it (the first: 0).
    pub fn rates(&self) -> MissRates {
        MissCounts::learned_rates(&self.0, &MissCounts::default(), 0, 0, 1)
            .unwrap_or(MissRates([0.0; GAP_EDGES_S.len() + 1]))
    }

    /// Both counts added.
    pub fn add(&mut self, other: &Misses) {
        self.0.add(&other.0);
    }

    /// Whether any call was counted.
    pub fn any(&self) -> bool {
        self.0.calls() > 0
    }

    fn label(b: usize) -> String {
        match (b.checked_sub(1).map(|i| GAP_EDGES_S[i]), GAP_EDGES_S.get(b)) {
            (None, Some(hi)) => format!("under {hi} s"),
            (Some(lo), Some(hi)) => format!("{lo}–{hi} s"),
            (Some(lo), None) => format!("{lo} s on"),
            (None, None) => String::new(),
        }
    }

    /// One line: each bucket's misses of its calls.
    pub fn text(&self) -> String {
        self.0
            .buckets
            .iter()
            .enumerate()
            .filter(|(_, (calls, _))| *calls > 0)
            .map(|(b, (calls, misses))| format!("{} {misses} of {calls}", Misses::label(b)))
            .collect::<Vec<_>>()
            .join(" · ")
    }

    /// The JSON array docs/cli.md describes.
    pub fn to_json(self) -> Value {
        Value::Array(
            self.0
                .buckets
                .iter()
                .enumerate()
                .map(|(b, (calls, misses))| {
                    json!({
                        "gap_from_s": b.checked_sub(1).map(|i| GAP_EDGES_S[i]).unwrap_or(0),
                        "gap_to_s": GAP_EDGES_S.get(b),
                        "calls": calls,
                        "misses": misses,
                    })
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::{CallBill, RecordedUsage};

    /// A call at `at_s` the replay reads `read` tokens of from the cache,
    /// which the provider reported reading `recorded_read` of.
    fn call(at_s: i64, read: u64, recorded_read: u64) -> SimCall {
        SimCall {
            at_ms: Some(at_s * 1000),
            prompt: read + 100,
            shared_prefix: read,
            messages: 3,
            bill: CallBill {
                cache_read: read,
                cache_write: 100,
                ..CallBill::default()
            },
            summarizer: Default::default(),
            compaction: None,
            summarizer_units: 0.0,
            recorded: Some(RecordedUsage {
                cache_read: recorded_read,
                cache_write: read + 100 - recorded_read,
                ..RecordedUsage::default()
            }),
        }
    }

    #[test]
    fn a_miss_is_a_cached_prefix_the_provider_read_under_half_of() {
        let calls = [
            call(0, 0, 0),           // the first call: no gap
            call(5, 4_000, 4_000),   // 5 s after: a hit
            call(25, 4_000, 1_999),  // 20 s after: a miss
            call(100, 4_000, 2_000), // 75 s after, half read: a hit
            call(500, 4_000, 0),     // 400 s after: a miss
            call(505, 0, 0),         // the replay reads nothing: not counted
        ];
        let m = Misses::of(&calls);
        assert_eq!(m.0.buckets, [(1, 0), (1, 1), (0, 0), (1, 0), (1, 1)]);
        assert_eq!(
            m.text(),
            "under 10 s 0 of 1 · 10–30 s 1 of 1 · 60–300 s 0 of 1 · 300 s on 1 of 1"
        );
        let mut pooled = m;
        pooled.add(&m);
        assert_eq!(pooled.0.buckets[1], (2, 2));
        assert_eq!(m.to_json()[4]["gap_to_s"], Value::Null);
        assert_eq!(m.to_json()[1]["gap_from_s"], 10);
    }

    #[test]
    fn an_empty_bucket_takes_the_rate_before_it() {
        let m = Misses(MissCounts::from_pairs([
            (4, 1),
            (0, 0),
            (2, 2),
            (0, 0),
            (0, 0),
        ]));
        assert_eq!(m.rates().0, [0.25, 0.25, 1.0, 1.0, 1.0]);
        assert_eq!(Misses::default().rates().0, [0.0; 5]);
    }
}
