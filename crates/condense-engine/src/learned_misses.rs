//! The miss model a session learns (`economy.missRates: "learn"`): which
//! calls the provider was expected to read a cached prefix for, and which
//! of them it read under half of, by provider and by the gap since the
//! previous call. A session starts from what the user's other sessions saw
//! of the same provider (condense-store's `misses`), weighed as at most
//! [`PRIOR_CALLS`] calls, so the first calls of a session plan with the
//! provider's misses instead of waiting to see twenty of them.

use condense_core::{MissCounts, MissRates};
use condense_store::misses::{provider_of, ProviderMisses};

/// Calls the session and its prior must have counted before misses are
/// taken for a model, and calls a gap bucket needs for its own share (else
/// it takes the share of the bucket before it).
const LEARN_MIN_CALLS: u32 = 20;
const LEARN_MIN_BUCKET_CALLS: u32 = 5;
/// The most calls the other sessions' counts weigh as: enough to plan a
/// session's first calls, few enough that a provider that changed is
/// learned anew within a session.
pub(crate) const PRIOR_CALLS: u32 = 100;

#[derive(Debug, Clone, Default)]
pub(crate) struct LearnedMisses {
    /// This session's counts.
    own: ProviderMisses,
    /// The other sessions' counts.
    prior: ProviderMisses,
    /// The provider of the call about to be made (`provider` of its
    /// `provider/id`; empty when the host did not say).
    provider: String,
    /// The latest call's expected read (tokens) and gap (ms), until the
    /// host reports its usage.
    expected: Option<(u64, i64)>,
    /// Own counts changed since [`LearnedMisses::take_changed`].
    changed: bool,
}

impl LearnedMisses {
    /// A session that starts from `own` (what it counted before a restart)
    /// and `prior` (the other sessions').
    ///
    /// Until a call names its model, the provider is the one the session
    /// counted most calls of, else the one the other sessions did.
    pub(crate) fn new(own: ProviderMisses, prior: ProviderMisses) -> LearnedMisses {
        let busiest = |m: &ProviderMisses| {
            m.iter()
                .filter(|(_, c)| c.calls() > 0)
                .max_by_key(|(_, c)| c.calls())
                .map(|(p, _)| p.clone())
        };
        let provider = busiest(&own)
            .or_else(|| busiest(&prior))
            .unwrap_or_default();
        LearnedMisses {
            own,
            prior,
            provider,
            ..LearnedMisses::default()
        }
    }

    /// Another session begins in this process, with no history on disk:
    /// what this one counted becomes part of the prior.
    pub(crate) fn into_prior(self) -> LearnedMisses {
        let mut prior = self.prior;
        for (provider, counts) in self.own {
            prior.entry(provider).or_default().add(&counts);
        }
        LearnedMisses::new(ProviderMisses::new(), prior)
    }

    /// The call about to be made goes to `model` (`provider/id`); a call
    /// that does not say keeps the provider.
    pub(crate) fn model(&mut self, model: Option<&str>) {
        if model.is_none() {
            return;
        }
        let provider = provider_of(model);
        if provider != self.provider {
            provider.clone_into(&mut self.provider);
        }
    }

    /// The call just sent was expected to read `read` tokens from the
    /// cache, `gap_ms` after the previous one (`None`: nothing to learn).
    pub(crate) fn expect(&mut self, expected: Option<(u64, i64)>) {
        self.expected = expected;
    }

    /// The host reported the latest call reading `cache_read` tokens.
    pub(crate) fn observe(&mut self, cache_read: u64) {
        let Some((read, gap_ms)) = self.expected.take() else {
            return;
        };
        let missed = cache_read.saturating_mul(2) < read;
        self.own
            .entry(self.provider.clone())
            .or_default()
            .record(gap_ms, missed);
        self.changed = true;
    }

    /// The shares seen for the current provider, once enough calls were.
    pub(crate) fn rates(&self) -> Option<MissRates> {
        let none = MissCounts::default();
        MissCounts::learned_rates(
            self.own.get(&self.provider).unwrap_or(&none),
            self.prior.get(&self.provider).unwrap_or(&none),
            PRIOR_CALLS,
            LEARN_MIN_CALLS,
            LEARN_MIN_BUCKET_CALLS,
        )
    }

    /// The calls counted for the current provider: this session's, and
    /// the other sessions' (unweighed).
    pub(crate) fn counted(&self) -> (u64, u64) {
        let calls = |m: &ProviderMisses| m.get(&self.provider).map_or(0, MissCounts::calls);
        (calls(&self.own), calls(&self.prior))
    }

    /// This session's counts.
    pub(crate) fn own(&self) -> &ProviderMisses {
        &self.own
    }

    /// Whether this session's counts changed since last taken.
    pub(crate) fn changed(&self) -> bool {
        self.changed
    }

    /// This session's counts, if they changed since last asked.
    pub(crate) fn take_changed(&mut self) -> Option<&ProviderMisses> {
        std::mem::take(&mut self.changed).then_some(&self.own)
    }

    /// Forgets the call awaiting its usage (the engine restarted).
    pub(crate) fn restarted(&mut self) {
        self.expected = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(seen: &mut LearnedMisses, read: u64, gap_s: i64, reported: u64) {
        seen.expect(Some((read, gap_s * 1000)));
        seen.observe(reported);
    }

    #[test]
    fn a_sessions_misses_are_learned_from_the_usage_the_host_reports() {
        let mut seen = LearnedMisses::default();
        seen.model(Some("anthropic/claude"));
        // 16 quick calls read as expected, one of them under half.
        for _ in 0..15 {
            call(&mut seen, 10_000, 5, 10_000);
        }
        call(&mut seen, 10_000, 5, 4_999);
        // Three calls after 20 s, too few for the bucket's own share.
        for _ in 0..3 {
            call(&mut seen, 10_000, 20, 0);
        }
        assert_eq!(seen.rates(), None, "19 calls: too few to learn from");
        // Five after two minutes, four of them missed.
        for reported in [0, 0, 1_000, 5_000, 0] {
            call(&mut seen, 10_000, 120, reported);
        }
        let rates = seen.rates().expect("24 calls");
        assert_eq!(rates.0, [1.0 / 16.0, 1.0 / 16.0, 1.0 / 16.0, 0.8, 0.8]);
        // A usage report with no call expected to read is no evidence.
        seen.observe(0);
        assert_eq!(seen.rates(), Some(rates));
        assert_eq!(
            seen.take_changed().map(|o| o["anthropic"].calls()),
            Some(24)
        );
        assert!(seen.take_changed().is_none(), "nothing new since");
        // Another provider starts from nothing; a call that names no model
        // keeps the provider.
        seen.model(Some("openai/gpt"));
        assert_eq!(seen.rates(), None);
        seen.model(None);
        assert_eq!(seen.counted(), (0, 0));
        // Restarted with these counts, it plans for the busiest provider
        // before any call names one.
        let restarted = LearnedMisses::new(seen.own().clone(), ProviderMisses::new());
        assert_eq!(
            (restarted.counted(), restarted.rates()),
            ((24, 0), Some(rates))
        );
    }

    #[test]
    fn a_new_session_plans_with_the_misses_its_provider_showed_before() {
        let mut before = LearnedMisses::default();
        before.model(Some("anthropic/a"));
        for i in 0..400 {
            call(
                &mut before,
                10_000,
                120,
                if i % 2 == 0 { 0 } else { 10_000 },
            );
        }
        let mut seen = before.into_prior();
        seen.model(Some("anthropic/b"));
        let rates = seen.rates().expect("the prior is enough to plan with");
        assert_eq!(rates.0[3], 0.5);
        // The prior weighs as 100 calls: 100 of this session's own, none
        // missed, halve the share.
        for _ in 0..100 {
            call(&mut seen, 10_000, 120, 10_000);
        }
        assert!((seen.rates().unwrap().0[3] - 0.25).abs() < 1e-12);
        seen.model(Some("openai/gpt"));
        assert_eq!(
            seen.rates(),
            None,
            "another provider's misses are not this one's"
        );
    }
}
