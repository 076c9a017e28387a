//! A miss model: the chance the provider misses a cached prefix before its
//! TTL has passed, by the gap since the previous call. Recordings show
//! providers evicting long before the TTL (docs/economy.md, "What the
//! replay does not model"); the simulator bills with one (`--miss-rates`),
//! and the cache-aware policy plans with one (`economy.missRates`).

use super::bill::CallBill;

/// The gaps' bucket edges, in seconds: under 10, 10 to 30, 30 to 60, 60 to
/// 300, and 300 on (within a longer TTL).
pub const GAP_EDGES_S: [u64; 4] = [10, 30, 60, 300];

/// The [`GAP_EDGES_S`] bucket of a gap of `gap_ms` (a negative gap is the
/// first).
pub fn gap_bucket(gap_ms: i64) -> usize {
    let gap_s = u64::try_from(gap_ms).unwrap_or(0) / 1000;
    GAP_EDGES_S.iter().take_while(|e| gap_s >= **e).count()
}

/// The chance the provider misses a prefix a call would read from its
/// cache, by the gap since the previous call ([`GAP_EDGES_S`] buckets):
/// fitted on recorded usage (`condense simulate --calibrate`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MissRates(pub [f64; GAP_EDGES_S.len() + 1]);

impl MissRates {
    /// One to five shares from 0 to 1, for the buckets in order; the
    /// buckets after the last one given take its share.
    pub fn from_shares(given: &[f64]) -> Result<MissRates, String> {
        let mut rates = [0.0; GAP_EDGES_S.len() + 1];
        if given.is_empty() || given.len() > rates.len() {
            return Err(format!("one to {} shares, one per gap bucket", rates.len()));
        }
        if let Some(bad) = given.iter().find(|p| !(0.0..=1.0).contains(*p)) {
            return Err(format!("`{bad}` is not a share from 0 to 1"));
        }
        let last = given[given.len() - 1];
        for (i, r) in rates.iter_mut().enumerate() {
            *r = given.get(i).copied().unwrap_or(last);
        }
        Ok(MissRates(rates))
    }

    /// [`MissRates::from_shares`] written as `--miss-rates` takes them:
    /// comma separated.
    pub fn parse(text: &str) -> Result<MissRates, String> {
        let given: Vec<f64> = text
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<f64>()
                    .map_err(|_| format!("`{}` is not a share from 0 to 1", s.trim()))
            })
            .collect::<Result<_, _>>()?;
        MissRates::from_shares(&given)
    }

    /// The share for a gap of `gap_ms`.
    pub fn at(&self, gap_ms: i64) -> f64 {
        self.0[gap_bucket(gap_ms)]
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
    /// chance `p`: `warm` as the cache would bill it, `cold` with nothing
    /// read from the cache, weighed by their chances (token counts
    /// rounded).
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

/// Calls whose cached prefix the provider was expected to read, and those
/// it read under half of, per [`GAP_EDGES_S`] bucket: what a miss model is
/// learned from. A host's usage reports fill them as a session runs; a
/// user's earlier sessions, added up, make the prior a new one starts
/// from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MissCounts {
    /// `(calls, misses)` per bucket; never more misses than calls.
    pub buckets: [(u32, u32); GAP_EDGES_S.len() + 1],
}

impl MissCounts {
    /// Counts as read from elsewhere (a file another process wrote):
    /// misses past their calls are cut to them.
    pub fn from_pairs(pairs: [(u32, u32); GAP_EDGES_S.len() + 1]) -> MissCounts {
        MissCounts {
            buckets: pairs.map(|(calls, misses)| (calls, misses.min(calls))),
        }
    }

    /// A call `gap_ms` after the previous one, which missed or not.
    pub fn record(&mut self, gap_ms: i64, missed: bool) {
        let bucket = &mut self.buckets[gap_bucket(gap_ms)];
        bucket.0 = bucket.0.saturating_add(1);
        if missed {
            bucket.1 = bucket.1.saturating_add(1);
        }
    }

    /// Both counts added.
    pub fn add(&mut self, other: &MissCounts) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            a.0 = a.0.saturating_add(b.0);
            a.1 = a.1.saturating_add(b.1);
        }
    }

    /// The calls counted, over every bucket.
    pub fn calls(&self) -> u64 {
        self.buckets.iter().map(|b| u64::from(b.0)).sum()
    }

    /// The shares `own` shows, with `prior` standing in for calls the
    /// session has not made yet: the prior weighs as at most `prior_calls`
    /// calls (its shares kept), so a provider that changed is learned anew
    /// within a few hundred calls. `None` before `min_calls` calls in all;
    /// a bucket of fewer than `min_bucket_calls` takes the share of the
    /// bucket before it (the first: 0).
    pub fn learned_rates(
        own: &MissCounts,
        prior: &MissCounts,
        prior_calls: u32,
        min_calls: u32,
        min_bucket_calls: u32,
    ) -> Option<MissRates> {
        let prior_total = prior.calls();
        let scale = if prior_total > u64::from(prior_calls) {
            f64::from(prior_calls) / prior_total as f64
        } else {
            1.0
        };
        let weighed = |b: usize| {
            let (calls, misses) = own.buckets[b];
            let (p_calls, p_misses) = prior.buckets[b];
            (
                f64::from(calls) + scale * f64::from(p_calls),
                f64::from(misses) + scale * f64::from(p_misses),
            )
        };
        let total: f64 = (0..own.buckets.len()).map(|b| weighed(b).0).sum();
        if total < f64::from(min_calls) {
            return None;
        }
        let mut rates = [0.0; GAP_EDGES_S.len() + 1];
        let mut previous = 0.0;
        for (b, r) in rates.iter_mut().enumerate() {
            let (calls, misses) = weighed(b);
            // A bucket with no calls has no share of its own, whatever the
            // minimum asked.
            *r = if calls < f64::from(min_bucket_calls.max(1)) {
                previous
            } else {
                (misses / calls).clamp(0.0, 1.0)
            };
            previous = *r;
        }
        Some(MissRates(rates))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miss_rates_are_read_and_given_back() {
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
        assert!(MissRates::from_shares(&[]).is_err());
        assert!(MissRates::from_shares(&[f64::INFINITY]).is_err());
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

    #[test]
    fn a_prior_stands_in_for_calls_the_session_has_not_made() {
        let mut own = MissCounts::default();
        for _ in 0..10 {
            own.record(20_000, true); // 10 to 30 s: every call missed
        }
        let none = MissCounts::default();
        assert_eq!(MissCounts::learned_rates(&own, &none, 100, 20, 5), None);
        // A prior of 400 calls, a quarter of them missed, weighs as 100.
        let prior = MissCounts::from_pairs([(200, 0), (200, 200), (0, 0), (0, 0), (0, 0)]);
        let r = MissCounts::learned_rates(&own, &prior, 100, 20, 5).unwrap();
        assert_eq!(r.0[0], 0.0);
        assert!((r.0[1] - (10.0 + 50.0) / (10.0 + 50.0)).abs() < 1e-12);
        assert_eq!(
            r.0[2..],
            [1.0, 1.0, 1.0],
            "empty buckets take the one before"
        );
        // Unscaled when the prior is small.
        let small = MissCounts::from_pairs([(10, 5), (0, 0), (0, 0), (0, 0), (0, 0)]);
        let r = MissCounts::learned_rates(&own, &small, 100, 20, 5).unwrap();
        assert_eq!(r.0[0], 0.5);
        assert_eq!(MissCounts::from_pairs([(1, 9); 5]).buckets[0], (1, 1));
        let mut sum = own;
        sum.add(&small);
        assert_eq!((sum.calls(), sum.buckets[0]), (20, (10, 5)));
    }
}
