//! Where the provider's cache was colder than the replay assumes. The
//! replay reads a call's shared prefix from the cache whenever the TTL has
//! not passed; a recording shows the provider evicting sooner. A call is a
//! *miss* when the replay reads a prefix from the cache and the provider
//! reported reading less than half of it. Counted by the gap since the
//! previous call, this is the raw material of a miss model
//! (docs/economy.md, "What the replay does not model").

use condense_core::CallBill;
use serde_json::{json, Value};

use super::replay::SimCall;

/// The gaps' bucket edges, in seconds: under 10, 10 to 30, 30 to 60, 60 to
/// 300, and 300 on (within a longer TTL).
pub const GAP_EDGES_S: [u64; 4] = [10, 30, 60, 300];

/// Calls and misses in each gap bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Misses {
    /// `(calls, misses)` per bucket, [`GAP_EDGES_S`] apart.
    pub buckets: [(usize, usize); GAP_EDGES_S.len() + 1],
}

impl Misses {
    /// The misses among `calls` (one run, in order): every call the replay
    /// reads a prefix from the cache for, whose time, previous call's time
    /// and recorded usage are known.
    pub fn of(calls: &[SimCall]) -> Misses {
        let mut m = Misses::default();
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
            let gap_s = u64::try_from(at.saturating_sub(before)).unwrap_or(0) / 1000;
            let b = GAP_EDGES_S.iter().take_while(|e| gap_s >= **e).count();
            m.buckets[b].0 += 1;
            if recorded.cache_read.saturating_mul(2) < call.bill.cache_read {
                m.buckets[b].1 += 1;
            }
        }
        m
    }

    /// Both counts added.
    pub fn add(&mut self, other: &Misses) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            a.0 += b.0;
            a.1 += b.1;
        }
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
        self.buckets
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
            self.buckets
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

/// The chance the provider misses a prefix the replay would read from its
/// cache, by the gap since the previous call ([`GAP_EDGES_S`] buckets): a
/// miss model, fitted on recorded usage (`--calibrate`) and given to a
/// replay with `--miss-rates`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MissRates(pub [f64; GAP_EDGES_S.len() + 1]);

impl MissRates {
    /// What `--miss-rates` says: one to five shares from 0 to 1, comma
    /// separated, for the buckets in order; the buckets after the last
    /// one given take its share.
    pub fn parse(text: &str) -> Result<MissRates, String> {
        let given: Vec<f64> = text
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=1.0).contains(p))
                    .ok_or_else(|| {
                        format!("--miss-rates: `{}` is not a share from 0 to 1", s.trim())
                    })
            })
            .collect::<Result<_, _>>()?;
        let mut rates = [0.0; GAP_EDGES_S.len() + 1];
        if given.len() > rates.len() {
            return Err(format!(
                "--miss-rates: at most {} shares, one per gap bucket",
                rates.len()
            ));
        }
        let last = *given.last().unwrap_or(&0.0);
        for (i, r) in rates.iter_mut().enumerate() {
            *r = given.get(i).copied().unwrap_or(last);
        }
        Ok(MissRates(rates))
    }

    /// The shares `misses` saw: each bucket's misses over its calls; a
    /// bucket with no call takes the bucket before it (the first: 0).
    pub fn fitted(misses: &Misses) -> MissRates {
        let mut rates = [0.0; GAP_EDGES_S.len() + 1];
        let mut previous = 0.0;
        for (r, (calls, missed)) in rates.iter_mut().zip(misses.buckets) {
            *r = if calls == 0 {
                previous
            } else {
                missed as f64 / calls as f64
            };
            previous = *r;
        }
        MissRates(rates)
    }

    /// The share for a gap of `gap_ms`.
    pub fn at(&self, gap_ms: i64) -> f64 {
        let gap_s = u64::try_from(gap_ms).unwrap_or(0) / 1000;
        self.0[GAP_EDGES_S.iter().take_while(|e| gap_s >= **e).count()]
    }

    /// The `--miss-rates` argument that gives these shares back.
    pub fn arg(&self) -> String {
        self.0
            .iter()
            .map(|r| format!("{:.3}", r))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A call's bill when the provider misses its cached prefix with
    /// chance `p`: `warm` as the replay priced it, `cold` with nothing read
    /// from the cache, weighed by their chances (token counts rounded).
    pub fn expected(warm: &CallBill, cold: &CallBill, p: f64) -> CallBill {
        let mix = |w: u64, c: u64| ((1.0 - p) * w as f64 + p * c as f64).round() as u64;
        CallBill {
            cache_read: mix(warm.cache_read, cold.cache_read),
            cache_write: mix(warm.cache_write, cold.cache_write),
            uncached: mix(warm.uncached, cold.uncached),
            output: warm.output,
            input_units: (1.0 - p) * warm.input_units + p * cold.input_units,
            output_units: warm.output_units,
        }
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
        assert_eq!(m.buckets, [(1, 0), (1, 1), (0, 0), (1, 0), (1, 1)]);
        assert_eq!(
            m.text(),
            "under 10 s 0 of 1 · 10–30 s 1 of 1 · 60–300 s 0 of 1 · 300 s on 1 of 1"
        );
        let mut pooled = m;
        pooled.add(&m);
        assert_eq!(pooled.buckets[1], (2, 2));
        assert_eq!(m.to_json()[4]["gap_to_s"], Value::Null);
        assert_eq!(m.to_json()[1]["gap_from_s"], 10);
    }

    #[test]
    fn miss_rates_are_read_fitted_and_given_back() {
        let r = MissRates::parse("0, 0.1,0.5").unwrap();
        assert_eq!(
            r.0,
            [0.0, 0.1, 0.5, 0.5, 0.5],
            "later buckets take the last"
        );
        assert_eq!(
            (r.at(9_999), r.at(10_000), r.at(45_000), r.at(-5)),
            (0.0, 0.1, 0.5, 0.0)
        );
        assert_eq!(MissRates::parse(&r.arg()).unwrap(), r);
        for bad in ["", "x", "1.5", "-0.1", "0,0,0,0,0,0", "NaN"] {
            assert!(MissRates::parse(bad).is_err(), "{bad:?}");
        }
        // An empty bucket takes the one before it.
        let m = Misses {
            buckets: [(4, 1), (0, 0), (2, 2), (0, 0), (0, 0)],
        };
        assert_eq!(MissRates::fitted(&m).0, [0.25, 0.25, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn a_call_is_billed_at_its_chance_of_a_miss() {
        let warm = CallBill {
            cache_read: 9_000,
            cache_write: 1_000,
            output: 50,
            input_units: 9_000.0 * 0.1 + 1_000.0 * 1.25,
            output_units: 250.0,
            ..CallBill::default()
        };
        let cold = CallBill {
            cache_write: 10_000,
            output: 50,
            input_units: 12_500.0,
            output_units: 250.0,
            ..CallBill::default()
        };
        let b = MissRates::expected(&warm, &cold, 0.25);
        assert_eq!((b.cache_read, b.cache_write, b.output), (6_750, 3_250, 50));
        assert!((b.input_units - (0.75 * 2_150.0 + 0.25 * 12_500.0)).abs() < 1e-9);
        assert_eq!(b.output_units, 250.0);
        assert_eq!(MissRates::expected(&warm, &cold, 0.0), warm);
    }
}
