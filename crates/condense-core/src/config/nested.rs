//! The nested objects (`economy`, `chainCompression`, `purgeErrors`,
//! `thinkingStrip`), merged key by key over their defaults: a partial
//! object keeps the defaults of the sub-keys it leaves out.

use serde_json::{Map, Value};

use super::load::{to_u32, Normalizer};
use super::save::{fraction_value, miss_model_value, number_value};
use super::values::{BelowMin, IntRule};
use super::{
    ChainCompressionConfig, Config, EconomyConfig, PurgeErrorsConfig, ThinkingStripConfig,
};
use super::{MissModel, Policy};
use crate::economy::{MissRates, PriceProfile, ProfileOverrides};

/// The largest `economy.maxExcess`.
const MAX_EXCESS: f64 = 1_000_000.0;

impl Normalizer {
    pub(super) fn economy(
        &mut self,
        obj: &Map<String, Value>,
        de: &EconomyConfig,
    ) -> EconomyConfig {
        let sub = self.nested(obj, "economy");
        // Read in the order of the table in docs/configuration.md, which is
        // the order warnings are reported in.
        let policy = self.choice(
            sub,
            "economy.policy",
            de.policy,
            Policy::from_name,
            Policy::name,
        );
        let pressure_share = match Self::lookup(sub, "economy.pressureShare") {
            None => de.pressure_share,
            Some(v) => match v.as_f64() {
                Some(f) if f > 0.0 && f <= 1.0 => f,
                _ => {
                    self.warn("economy.pressureShare", v, number_value(de.pressure_share));
                    de.pressure_share
                }
            },
        };
        let profile = self.choice(
            sub,
            "economy.profile",
            de.profile,
            |name| crate::PROFILE_NAMES.into_iter().find(|p| *p == name),
            |name| name,
        );
        let max_excess = match Self::lookup(sub, "economy.maxExcess") {
            None => de.max_excess,
            Some(Value::Null) => None,
            Some(v) => match v.as_f64() {
                // A share past a million times what no pruning bills is no
                // bound worth the name (`null` says "none").
                Some(f) if (0.0..=MAX_EXCESS).contains(&f) => Some(f),
                _ => {
                    self.warn("economy.maxExcess", v, fraction_value(de.max_excess));
                    de.max_excess
                }
            },
        };
        let miss_model = match Self::lookup(sub, "economy.missRates") {
            None => de.miss_model,
            Some(Value::Null) => MissModel::Ttl,
            Some(Value::String(s)) if s == "learn" => MissModel::Learned,
            Some(v) => {
                let shares: Option<Vec<f64>> = v
                    .as_array()
                    .map(|a| a.iter().map(Value::as_f64).collect::<Option<_>>())
                    .unwrap_or_default();
                match shares.and_then(|s| MissRates::from_shares(&s).ok()) {
                    Some(rates) => MissModel::Rates(rates),
                    None => {
                        self.warn("economy.missRates", v, miss_model_value(de.miss_model));
                        de.miss_model
                    }
                }
            }
        };
        EconomyConfig {
            policy,
            pressure_share,
            profile,
            max_excess,
            miss_model,
            overrides: self.price_overrides(sub, profile, &de.overrides),
        }
    }

    /// The price keys of `economy`, each a number from 0 to
    /// [`crate::economy::MAX_OVERRIDE`] or `null` (the profile's). The cache's keys need a profile with a cache; under
    /// `no-cache` each set one is reported and left out.
    fn price_overrides(
        &mut self,
        sub: Option<&Map<String, Value>>,
        profile: &str,
        de: &ProfileOverrides,
    ) -> ProfileOverrides {
        let cached = PriceProfile::named_or_default(profile).cache.is_some();
        let mut price =
            |key: &str, default: Option<f64>, needs_cache: bool| match Self::lookup(sub, key) {
                None => default,
                Some(Value::Null) => None,
                Some(v) => match v.as_f64() {
                    Some(f)
                        if (0.0..=crate::economy::MAX_OVERRIDE).contains(&f)
                            && (cached || !needs_cache) =>
                    {
                        Some(f)
                    }
                    _ => {
                        self.warn(key, v, fraction_value(default));
                        default
                    }
                },
            };
        let summarizer = price("economy.summarizerPrice", de.summarizer, false);
        let write = price("economy.writePrice", de.write, true);
        let read = price("economy.readPrice", de.read, true);
        let ttl_seconds = price("economy.ttlSeconds", de.ttl_seconds, true);
        let min_cacheable = price(
            "economy.minCacheableTokens",
            de.min_cacheable_tokens.map(|t| t as f64),
            true,
        );
        // Prompts are counted in whole tokens: a fraction rounds down, and
        // is reported as every rounding is.
        if let Some(t) = min_cacheable.filter(|t| t.fract() != 0.0) {
            self.warn(
                "economy.minCacheableTokens",
                &serde_json::json!(t),
                serde_json::json!(t.floor() as u64),
            );
        }
        ProfileOverrides {
            summarizer,
            write,
            read,
            ttl_seconds,
            min_cacheable_tokens: min_cacheable.map(|t| t as u64),
            output: None,
            usd_per_mtok_input: None,
        }
    }

    pub(super) fn chain_compression(
        &mut self,
        obj: &Map<String, Value>,
        dc: &ChainCompressionConfig,
    ) -> ChainCompressionConfig {
        let sub = self.nested(obj, "chainCompression");
        ChainCompressionConfig {
            enabled: self.boolean(sub, "chainCompression.enabled", dc.enabled),
            rolling_window: to_u32(self.integer(
                sub,
                "chainCompression.rollingWindow",
                IntRule::u32_at_least_one(dc.rolling_window, BelowMin::Default),
            )),
            strip_final_assistant_thinking: self.boolean(
                sub,
                "chainCompression.stripFinalAssistantThinking",
                dc.strip_final_assistant_thinking,
            ),
            fuse_range_summary: self.boolean(
                sub,
                "chainCompression.fuseRangeSummary",
                dc.fuse_range_summary,
            ),
        }
    }

    pub(super) fn purge_errors(
        &mut self,
        obj: &Map<String, Value>,
        dp: &PurgeErrorsConfig,
    ) -> PurgeErrorsConfig {
        let sub = self.nested(obj, "purgeErrors");
        PurgeErrorsConfig {
            enabled: self.boolean(sub, "purgeErrors.enabled", dp.enabled),
            cooldown_turns: to_u32(self.integer(
                sub,
                "purgeErrors.cooldownTurns",
                IntRule::u32_at_least_one(dp.cooldown_turns, BelowMin::Default),
            )),
            min_arg_chars: self.integer(
                sub,
                "purgeErrors.minArgChars",
                IntRule::non_negative(dp.min_arg_chars),
            ),
        }
    }

    pub(super) fn thinking_strip(
        &mut self,
        obj: &Map<String, Value>,
        dt: &ThinkingStripConfig,
    ) -> ThinkingStripConfig {
        let sub = self.nested(obj, "thinkingStrip");
        ThinkingStripConfig {
            enabled: self.boolean(sub, "thinkingStrip.enabled", dt.enabled),
            keep_last_turns: to_u32(self.integer(
                sub,
                "thinkingStrip.keepLastTurns",
                IntRule::u32_at_least_one(dt.keep_last_turns, BelowMin::Clamp),
            )),
        }
    }

    /// A nested object: `None` (all sub-defaults) when missing or not an
    /// object; the latter is reported with the default object as used value.
    fn nested<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        key: &str,
    ) -> Option<&'v Map<String, Value>> {
        match obj.get(key) {
            None => None,
            Some(Value::Object(sub)) => Some(sub),
            Some(bad) => {
                let defaults = Config::default().to_settings_value(&Value::Null);
                self.warn(key, bad, defaults[key].clone());
                None
            }
        }
    }
}
