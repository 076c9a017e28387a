//! Named price profiles: how a provider bills prompt caching.
//!
//! Every price is in units of the main model's price for one uncached input
//! token, so a profile compares policies without knowing a model's list
//! price; `usd_per_mtok_input` turns units into money for the report.

/// How a provider's prompt cache bills and how long it lives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheTerms {
    /// How long a cached prefix lives after the call that last used it (ms).
    pub ttl_ms: i64,
    /// Price of a token written to the cache.
    pub write: f64,
    /// Price of a token read from the cache.
    pub read: f64,
    /// Prompts shorter than this (tokens) are neither cached nor read.
    pub min_cacheable_tokens: u64,
}

/// A named way of billing calls.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceProfile {
    /// The profile's name (`anthropic-5m`, …).
    pub name: String,
    /// Prompt caching, or `None` when every prompt token is billed at 1.
    pub cache: Option<CacheTerms>,
    /// Price of an output token.
    pub output: f64,
    /// The summarizer's token prices relative to the main model's (its
    /// input tokens cost `summarizer`, its output `summarizer · output`).
    /// 1 by default: pi-condense summarizes with the session's own model.
    pub summarizer: f64,
    /// US dollars per million uncached input tokens of the main model.
    pub usd_per_mtok_input: f64,
}

/// The names [`PriceProfile::named`] knows, the default first.
pub const PROFILE_NAMES: [&str; 4] = ["anthropic-5m", "anthropic-1h", "openai", "no-cache"];

/// A profile name or override that does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProfileError {
    /// No profile has this name.
    #[error("unknown price profile `{0}` (known: anthropic-5m, anthropic-1h, openai, no-cache)")]
    UnknownProfile(String),
    /// A price or duration that is negative, not a number, or past
    /// 1,000,000.
    #[error("{0} must be a number from 0 to 1000000")]
    BadValue(&'static str),
    /// A cache setting on a profile that has no cache.
    #[error("{0} needs a profile with prompt caching")]
    NoCache(&'static str),
}

/// The largest price, ratio, dollar figure or TTL (seconds) an override
/// takes: a million times an input token's price, eleven days. Past it,
/// products of prices and token counts leave `f64`'s range.
pub const MAX_OVERRIDE: f64 = 1_000_000.0;

/// Anthropic's minimum cacheable prompt for Sonnet and Opus models.
const ANTHROPIC_MIN_CACHEABLE: u64 = 1024;
/// OpenAI caches prompts of 1,024 tokens and more.
const OPENAI_MIN_CACHEABLE: u64 = 1024;
const MINUTE_MS: i64 = 60_000;

impl PriceProfile {
    /// The profile called `name` (see [`PROFILE_NAMES`]).
    ///
    /// - `anthropic-5m`: 5-minute TTL, writes 1.25, reads 0.1, output 5
    ///   (Claude Sonnet and Opus price output at five times input), $3/MTok.
    /// - `anthropic-1h`: the same with the 1-hour TTL, whose writes cost 2.
    /// - `openai`: automatic caching with no write premium, reads 0.1 (the
    ///   GPT-5 family's cached-input price), a 1,024-token minimum, kept
    ///   about 5 minutes idle; output 8, $1.25/MTok.
    /// - `no-cache`: every prompt token at 1, output 5, $3/MTok.
    pub fn named(name: &str) -> Result<PriceProfile, ProfileError> {
        let anthropic = |ttl_min: i64, write: f64| PriceProfile::anthropic(name, ttl_min, write);
        match name {
            "anthropic-5m" => Ok(anthropic(5, 1.25)),
            "anthropic-1h" => Ok(anthropic(60, 2.0)),
            "openai" => Ok(PriceProfile {
                name: name.to_owned(),
                cache: Some(CacheTerms {
                    ttl_ms: 5 * MINUTE_MS,
                    write: 1.0,
                    read: 0.1,
                    min_cacheable_tokens: OPENAI_MIN_CACHEABLE,
                }),
                output: 8.0,
                summarizer: 1.0,
                usd_per_mtok_input: 1.25,
            }),
            "no-cache" => Ok(PriceProfile {
                name: name.to_owned(),
                cache: None,
                output: 5.0,
                summarizer: 1.0,
                usd_per_mtok_input: 3.0,
            }),
            other => Err(ProfileError::UnknownProfile(other.to_owned())),
        }
    }

    fn anthropic(name: &str, ttl_min: i64, write: f64) -> PriceProfile {
        PriceProfile {
            name: name.to_owned(),
            cache: Some(CacheTerms {
                ttl_ms: ttl_min * MINUTE_MS,
                write,
                read: 0.1,
                min_cacheable_tokens: ANTHROPIC_MIN_CACHEABLE,
            }),
            output: 5.0,
            summarizer: 1.0,
            usd_per_mtok_input: 3.0,
        }
    }

    /// The profile a setting names, or the default for a name
    /// [`named`](Self::named) does not know (settings are validated when
    /// read, so that is only a caller's fallback).
    pub fn named_or_default(name: &str) -> PriceProfile {
        Self::named(name).unwrap_or_default()
    }

    /// Applies overrides; each `None` keeps the profile's value.
    pub fn with_overrides(mut self, o: &ProfileOverrides) -> Result<PriceProfile, ProfileError> {
        fn check(v: Option<f64>, what: &'static str) -> Result<Option<f64>, ProfileError> {
            match v {
                Some(x) if !x.is_finite() || !(0.0..=MAX_OVERRIDE).contains(&x) => {
                    Err(ProfileError::BadValue(what))
                }
                v => Ok(v),
            }
        }
        let output = check(o.output, "output price")?;
        let summarizer = check(o.summarizer, "summarizer price ratio")?;
        let usd = check(o.usd_per_mtok_input, "dollars per million input tokens")?;
        let write = check(o.write, "cache write price")?;
        let read = check(o.read, "cache read price")?;
        let ttl = check(o.ttl_seconds, "cache TTL")?;
        self.output = output.unwrap_or(self.output);
        self.summarizer = summarizer.unwrap_or(self.summarizer);
        self.usd_per_mtok_input = usd.unwrap_or(self.usd_per_mtok_input);
        let cache_set =
            write.is_some() || read.is_some() || ttl.is_some() || o.min_cacheable_tokens.is_some();
        match self.cache.as_mut() {
            Some(c) => {
                c.write = write.unwrap_or(c.write);
                c.read = read.unwrap_or(c.read);
                if let Some(s) = ttl {
                    c.ttl_ms = (s * 1000.0).round() as i64;
                }
                c.min_cacheable_tokens = o.min_cacheable_tokens.unwrap_or(c.min_cacheable_tokens);
            }
            None if cache_set => return Err(ProfileError::NoCache("a cache override")),
            None => {}
        }
        Ok(self)
    }
}

impl Default for PriceProfile {
    /// `anthropic-5m`, the first of [`PROFILE_NAMES`].
    fn default() -> Self {
        PriceProfile::anthropic(PROFILE_NAMES[0], 5, 1.25)
    }
}

/// Changes to a named profile (from the command line).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileOverrides {
    /// Cache write price.
    pub write: Option<f64>,
    /// Cache read price.
    pub read: Option<f64>,
    /// Cache time to live, in seconds.
    pub ttl_seconds: Option<f64>,
    /// Minimum cacheable prompt, in tokens.
    pub min_cacheable_tokens: Option<u64>,
    /// Output token price.
    pub output: Option<f64>,
    /// Summarizer price ratio.
    pub summarizer: Option<f64>,
    /// Dollars per million uncached input tokens.
    pub usd_per_mtok_input: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_is_a_profile_and_others_are_refused() {
        for name in PROFILE_NAMES {
            assert_eq!(
                PriceProfile::named(name).map(|p| p.name),
                Ok(name.to_owned())
            );
        }
        assert_eq!(
            PriceProfile::named("anthropic"),
            Err(ProfileError::UnknownProfile("anthropic".into()))
        );
    }

    #[test]
    fn anthropic_ttls_differ_in_write_price_and_lifetime() {
        let five = PriceProfile::named("anthropic-5m").unwrap().cache.unwrap();
        let hour = PriceProfile::named("anthropic-1h").unwrap().cache.unwrap();
        assert_eq!((five.write, five.read, five.ttl_ms), (1.25, 0.1, 300_000));
        assert_eq!((hour.write, hour.read, hour.ttl_ms), (2.0, 0.1, 3_600_000));
        let openai = PriceProfile::named("openai").unwrap().cache.unwrap();
        assert_eq!((openai.write, openai.min_cacheable_tokens), (1.0, 1024));
    }

    #[test]
    fn overrides_replace_only_what_they_name() {
        let p = PriceProfile::named("anthropic-5m")
            .unwrap()
            .with_overrides(&ProfileOverrides {
                read: Some(0.2),
                ttl_seconds: Some(90.0),
                summarizer: Some(0.25),
                ..ProfileOverrides::default()
            })
            .unwrap();
        let c = p.cache.unwrap();
        assert_eq!((c.write, c.read, c.ttl_ms), (1.25, 0.2, 90_000));
        assert_eq!((p.summarizer, p.output), (0.25, 5.0));
    }

    #[test]
    fn bad_overrides_are_refused() {
        let base = PriceProfile::named("anthropic-5m").unwrap();
        let negative = ProfileOverrides {
            write: Some(-1.0),
            ..Default::default()
        };
        assert_eq!(
            base.clone().with_overrides(&negative),
            Err(ProfileError::BadValue("cache write price"))
        );
        let nan = ProfileOverrides {
            output: Some(f64::NAN),
            ..Default::default()
        };
        assert!(base.with_overrides(&nan).is_err());
        let none = PriceProfile::named("no-cache").unwrap();
        let ttl = ProfileOverrides {
            ttl_seconds: Some(60.0),
            ..Default::default()
        };
        assert!(matches!(
            none.with_overrides(&ttl),
            Err(ProfileError::NoCache(_))
        ));
    }
}
