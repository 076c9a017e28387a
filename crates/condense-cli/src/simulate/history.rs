//! A corpus replayed as its user lived it: each session plans with the
//! cache misses the sessions before it showed, as a host finds them in its
//! misses directory (condense-store's `misses`). A session's misses are
//! its `none` replay's ([`Misses::of`]): the calls the cache would serve by
//! the TTL whose recorded usage read under half the prefix.

use condense_store::misses::{ProviderMisses, MAX_FILES};

use super::misses::Misses;
use super::replay::PolicyRun;

/// What the prior of the sessions after it takes from one session.
#[derive(Debug, Clone)]
pub struct SessionMisses {
    /// Its first and last call (ms).
    pub span: (i64, i64),
    /// Its misses, by provider.
    pub counts: ProviderMisses,
}

impl SessionMisses {
    /// A session's `none` replay; `None` when no call has a time.
    pub fn of(none: &PolicyRun) -> Option<SessionMisses> {
        let mut times = none.calls.iter().filter_map(|c| c.at_ms);
        let first = times.next()?;
        let last = times.next_back().unwrap_or(first);
        let mut counts = ProviderMisses::new();
        let ends = none.providers.iter().skip(1).map(|(at, _)| *at);
        for ((from, provider), to) in none.providers.iter().zip(ends.chain([none.calls.len()])) {
            // The calls from `from` on, each with the one before it.
            let calls = none
                .calls
                .get(from.saturating_sub(1)..to)
                .unwrap_or_default();
            counts
                .entry(provider.clone())
                .or_default()
                .add(&Misses::of(calls).0);
        }
        Some(SessionMisses {
            span: (first, last),
            counts,
        })
    }
}

/// Each session's prior: the misses of the newest [`MAX_FILES`] sessions
/// that ended before it began, per provider (a session with no time has
/// none, and gives none).
pub fn priors(sessions: &[Option<SessionMisses>]) -> Vec<ProviderMisses> {
    let mut by_end: Vec<&SessionMisses> = sessions.iter().flatten().collect();
    by_end.sort_by_key(|s| s.span.1);
    sessions
        .iter()
        .map(|s| {
            let mut prior = ProviderMisses::new();
            let Some(s) = s else { return prior };
            let ended = by_end.partition_point(|o| o.span.1 < s.span.0);
            for o in &by_end[ended.saturating_sub(MAX_FILES)..ended] {
                for (provider, counts) in &o.counts {
                    prior.entry(provider.clone()).or_default().add(counts);
                }
            }
            prior
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::MissCounts;

    fn session(span: (i64, i64), provider: &str, misses: u32) -> Option<SessionMisses> {
        let counts = MissCounts::from_pairs([(10, misses), (0, 0), (0, 0), (0, 0), (0, 0)]);
        Some(SessionMisses {
            span,
            counts: [(provider.to_owned(), counts)].into_iter().collect(),
        })
    }

    #[test]
    fn a_session_plans_with_the_misses_of_those_that_ended_before_it_began() {
        let sessions = [
            session((100, 200), "anthropic", 1),
            session((0, 50), "anthropic", 2),
            session((150, 300), "anthropic", 4), // overlaps the first
            session((60, 90), "openai", 8),
            None,
        ];
        let priors = priors(&sessions);
        assert_eq!(priors[1], ProviderMisses::new(), "the first has none");
        assert_eq!(priors[0]["anthropic"].buckets[0], (10, 2));
        assert_eq!(priors[0]["openai"].buckets[0], (10, 8));
        assert_eq!(
            priors[2]["anthropic"].buckets[0],
            (10, 2),
            "the session running beside it is not yet done"
        );
        assert!(priors[4].is_empty());
    }

    #[test]
    fn only_the_newest_sessions_make_a_prior() {
        let mut sessions: Vec<_> = (0..MAX_FILES as i64 + 10)
            .map(|i| session((i * 10, i * 10 + 5), "p", 1))
            .collect();
        sessions.push(session((100_000, 100_001), "p", 0));
        let priors = priors(&sessions);
        let last = priors.last().unwrap();
        assert_eq!(
            last["p"].buckets[0],
            (10 * MAX_FILES as u32, MAX_FILES as u32)
        );
    }
}
