//! The cache-aware policy's promise: a session never bills more than it
//! would have without pruning.
//!
//! Pruning is a bet under prompt caching: a summary costs its summarizer
//! call now, and a switch rewrites the cached prefix now, while what they
//! save comes on later calls that may never happen. No policy can know
//! whether they will. What it can know is what it has already saved: each
//! call, the prompt it sent against the prompt the same call would have
//! sent with nothing pruned, both priced with the same cache. The
//! difference is the session's *headroom*, and a bet is placed only when
//! the headroom covers its worst case (the session ending right after it).
//! So at every call, and therefore at the session's end, what was billed
//! (prompts, outputs and the summarizer's input and output: the report's
//! `total_units`) is at most what no pruning would have billed, and with
//! `economy.maxExcess` at most that share of it above.
//!
//! A bet that costs nothing beyond not acting needs no headroom: showing
//! summaries when the cache is cold anyway, or any step that makes this
//! call cheaper than keeping the prompt as it was.
//!
//! No pruning compacts where the host would have (the caller prices that
//! prompt). A session that pruned runs on past that point with a longer
//! prompt, and the calls until the host compacts it owe the difference
//! whatever condense does next: [`NoPruningBound::reserve`] keeps that out
//! of the headroom. A bet placed before no pruning's compaction is not
//! covered for those calls: a host that compacts on request is asked to
//! where they would owe more than the headroom (condense-engine's
//! `Engine::agent_end`); on any other host that is the promise's one known
//! gap.

use super::bill::{bill_call, CallTokens, PreviousCall};
use super::price::PriceProfile;

/// Running totals of what the session's calls billed as sent, and what the
/// same calls would have billed with nothing pruned, in units of one
/// uncached input token.
///
/// The bound may allow an excess: a share of what no pruning would have
/// billed so far that bets may lose beyond the savings (`Some(0.0)`: none;
/// `None`: no bound at all, every bet allowed).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NoPruningBound {
    /// The prompts as sent and the calls' outputs, plus the summarizer's
    /// input and output.
    spent: f64,
    /// The same calls' prompts with nothing pruned, and their outputs.
    unpruned: f64,
    /// The excess allowed, as a share of `unpruned`.
    max_excess: Option<f64>,
    /// The latest call: its prompt as sent and unpruned.
    last_call: (f64, f64),
    /// The calls added.
    calls: u64,
    /// What the calls ahead are already expected to bill beyond no pruning
    /// (units): kept out of the headroom, so no bet spends it.
    reserved: f64,
}

impl NoPruningBound {
    /// A session with no calls yet, allowed `max_excess` (`None`: unbounded).
    pub fn new(max_excess: Option<f64>) -> Self {
        NoPruningBound {
            max_excess,
            ..Self::default()
        }
    }

    /// Changes the excess allowed (the settings changed), keeping the totals.
    pub fn set_max_excess(&mut self, max_excess: Option<f64>) {
        self.max_excess = max_excess;
    }

    /// What no pruning would have billed so far, with the excess allowed,
    /// less what was billed: the most a bet may lose and keep the session
    /// within the bound (infinite without a bound).
    pub fn headroom(&self) -> f64 {
        match self.max_excess {
            Some(share) => self.unpruned * (1.0 + share) - self.spent - self.reserved,
            None => f64::INFINITY,
        }
    }

    /// Keeps `units` out of the headroom: what the calls ahead are expected
    /// to bill beyond no pruning whatever condense does now (a session
    /// running on past the point where no pruning compacted). Replaces the
    /// previous reserve; a negative or non-finite figure reserves nothing.
    pub fn reserve(&mut self, units: f64) {
        self.reserved = if units.is_finite() {
            units.max(0.0)
        } else {
            0.0
        };
    }

    /// What no pruning would have billed so far, less what was billed
    /// (units; negative when pruning cost more).
    pub fn saved(&self) -> f64 {
        self.unpruned - self.spent
    }

    /// Adds one call: its prompt as sent and the same call unpruned, priced.
    pub fn add_call(&mut self, sent: f64, unpruned: f64) {
        self.spent += sent;
        self.unpruned += unpruned;
        self.last_call = (sent, unpruned);
        self.calls += 1;
    }

    /// What a call adds to the headroom while nothing changes (units;
    /// negative when calls bill more than their allowance over the same
    /// calls unpruned): the lower of the latest call's and the session's
    /// average, so one cold call's saving is not taken for a trend.
    pub fn gain_per_call(&self) -> f64 {
        let Some(share) = self.max_excess else {
            return f64::INFINITY;
        };
        let (sent, unpruned) = self.last_call;
        let last = unpruned * (1.0 + share) - sent;
        let average = self.headroom() / self.calls.max(1) as f64;
        last.min(average)
    }

    /// Adds the summarizer's work (units).
    pub fn add_summarizer(&mut self, units: f64) {
        self.spent += units;
    }

    /// Adds a call's output (units): billed alike with or without pruning,
    /// it counts in the total the allowed excess is a share of.
    pub fn add_output(&mut self, units: f64) {
        self.spent += units;
        self.unpruned += units;
    }

    /// Whether a step that makes this call bill `with` instead of
    /// `without` (units), the unpruned call billing `unpruned`, keeps the
    /// session within the bound: it costs no more than not taking it, or
    /// the headroom after this call covers it.
    pub fn allows_call(&self, with: f64, without: f64, unpruned: f64) -> bool {
        with <= without || self.headroom() + unpruned - with >= 0.0
    }

    /// Whether the headroom pays a summarizer call of `cost` units, less
    /// `saved_at_once`: what showing its result saves at the very next call
    /// when that call finds the cache cold anyway (certainly, by the clock;
    /// or with the chance a miss model gives, in expectation, as the bound
    /// then prices every call).
    pub fn allows_summary(&self, cost: f64, saved_at_once: f64) -> bool {
        self.headroom() + saved_at_once - cost >= 0.0
    }
}

/// A prompt's size against the previous call's, for [`prompt_units`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PromptShape {
    /// Tokens of the whole prompt.
    pub tokens: u64,
    /// Tokens of its prefix equal to the previous call's prompt (0 when the
    /// cache cannot apply: the first call, a resume, a model change).
    pub shared_prefix: u64,
}

/// What a prompt bills at a call made at `now_ms`, the previous call (if
/// the cache may still hold it) at `previous_ms`: the input price of
/// [`bill_call`].
pub fn prompt_units(
    profile: &PriceProfile,
    previous_ms: Option<Option<i64>>,
    now_ms: Option<i64>,
    prompt: PromptShape,
) -> f64 {
    bill_call(
        profile,
        previous_ms.map(|at_ms| PreviousCall { at_ms }),
        CallTokens {
            at_ms: now_ms,
            prompt: prompt.tokens,
            shared_prefix: prompt.shared_prefix,
            output: 0,
        },
    )
    .input_units
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anthropic() -> PriceProfile {
        PriceProfile::named("anthropic-5m").unwrap()
    }

    #[test]
    fn a_reserve_is_kept_out_of_the_headroom_not_the_savings() {
        let mut bound = NoPruningBound::new(Some(0.0));
        bound.add_call(100.0, 1_000.0);
        bound.reserve(600.0);
        assert_eq!(bound.headroom(), 300.0);
        assert_eq!(bound.saved(), 900.0);
        assert!(!bound.allows_summary(400.0, 0.0));
        bound.reserve(f64::NAN);
        assert_eq!(bound.headroom(), 900.0);
        bound.reserve(-5.0);
        assert_eq!(bound.headroom(), 900.0);
        assert_eq!(NoPruningBound::new(None).headroom(), f64::INFINITY);
    }

    #[test]
    fn a_calls_gain_is_the_lower_of_the_latest_and_the_average() {
        let mut bound = NoPruningBound::new(Some(0.0));
        assert_eq!(bound.gain_per_call(), 0.0);
        // A cold call pruning saved 900; then a warm one saving 100.
        bound.add_call(100.0, 1_000.0);
        assert_eq!(bound.gain_per_call(), 900.0);
        bound.add_call(400.0, 500.0);
        assert_eq!(bound.gain_per_call(), 100.0);
        // A switch's rewrite: the latest call lost 300, the average is 233.
        bound.add_call(800.0, 500.0);
        assert_eq!(bound.gain_per_call(), -300.0);
        // A share of the unpruned calls is allowed on top.
        let mut allowed = NoPruningBound::new(Some(0.1));
        allowed.add_call(1_000.0, 1_000.0);
        assert!((allowed.gain_per_call() - 100.0).abs() < 1e-9);
        assert_eq!(NoPruningBound::new(None).gain_per_call(), f64::INFINITY);
    }

    #[test]
    fn a_warm_call_reads_its_shared_prefix_and_writes_the_rest() {
        let units = prompt_units(
            &anthropic(),
            Some(Some(0)),
            Some(60_000),
            PromptShape {
                tokens: 10_000,
                shared_prefix: 8_000,
            },
        );
        // 8,000 read at 0.1 and 2,000 written at 1.25.
        assert!((units - (800.0 + 2_500.0)).abs() < 1e-9, "{units}");
    }

    #[test]
    fn a_call_past_the_ttl_writes_everything() {
        let units = prompt_units(
            &anthropic(),
            Some(Some(0)),
            Some(6 * 60_000),
            PromptShape {
                tokens: 10_000,
                shared_prefix: 8_000,
            },
        );
        assert!((units - 12_500.0).abs() < 1e-9, "{units}");
    }

    #[test]
    fn headroom_is_what_no_pruning_billed_less_what_was_billed() {
        let mut b = NoPruningBound::new(Some(0.0));
        b.add_call(1_000.0, 1_500.0);
        b.add_summarizer(200.0);
        assert!((b.headroom() - 300.0).abs() < 1e-9);
        assert!((b.saved() - 300.0).abs() < 1e-9);
        b.set_max_excess(Some(0.1));
        assert!((b.headroom() - 450.0).abs() < 1e-9);
        b.set_max_excess(None);
        assert!(b.headroom().is_infinite() && b.allows_summary(1e12, 0.0));
    }

    #[test]
    fn a_step_that_costs_no_more_than_not_taking_it_needs_no_headroom() {
        let b = NoPruningBound::new(Some(0.0));
        assert!(b.allows_call(900.0, 1_000.0, 1_000.0));
        assert!(!b.allows_call(1_100.0, 1_000.0, 1_000.0));
    }

    #[test]
    fn a_costly_step_is_allowed_up_to_the_headroom_after_the_call() {
        let mut b = NoPruningBound::new(Some(0.0));
        b.add_call(1_000.0, 1_300.0);
        // Headroom 300; this call unpruned 1,000: the step may bill 1,300.
        assert!(b.allows_call(1_300.0, 1_000.0, 1_000.0));
        assert!(!b.allows_call(1_301.0, 1_000.0, 1_000.0));
    }

    #[test]
    fn a_summary_is_paid_from_the_headroom_or_an_immediate_cold_saving() {
        let mut b = NoPruningBound::new(Some(0.0));
        assert!(!b.allows_summary(100.0, 0.0));
        assert!(b.allows_summary(100.0, 100.0));
        b.add_call(0.0, 100.0);
        assert!(b.allows_summary(100.0, 0.0));
        assert!(!b.allows_summary(101.0, 0.0));
    }
}
