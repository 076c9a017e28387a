//! Saving: the normalized config written over the block as loaded, so
//! unknown keys and sub-keys come back unchanged and in place.

use serde_json::{Map, Value};

use super::{Config, SETTINGS_KEY};

impl Config {
    /// The `contextPrune` object to save: `original` (the block as loaded)
    /// with every known key overwritten by its normalized value in camelCase.
    ///
    /// Unknown keys, and unknown sub-keys of the nested objects, are kept
    /// unchanged and in place; known keys missing from `original` are appended
    /// in the documented order. A non-object `original` counts as `{}`.
    pub fn to_settings_value(&self, original: &Value) -> Value {
        let mut out = match original {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        for (key, value) in self.known_entries() {
            let value = match value {
                Known::Leaf(v) => v,
                Known::Nested(entries) => {
                    let mut sub = match out.get(key) {
                        Some(Value::Object(m)) => m.clone(),
                        _ => Map::new(),
                    };
                    for (k, v) in entries {
                        sub.insert(k.to_owned(), v);
                    }
                    Value::Object(sub)
                }
            };
            out.insert(key.to_owned(), value);
        }
        Value::Object(out)
    }

    /// The whole `settings.json` to save: `settings` with its
    /// [`SETTINGS_KEY`] block replaced by
    /// [`to_settings_value`](Config::to_settings_value) of the block it holds.
    /// Every other key of `settings` is kept.
    pub fn to_settings_file_value(&self, settings: &Value) -> Value {
        let original = settings.get(SETTINGS_KEY).unwrap_or(&Value::Null);
        replace_context_prune(settings, self.to_settings_value(original))
    }

    /// Every known key with its normalized JSON value, in the documented order.
    fn known_entries(&self) -> Vec<(&'static str, Known)> {
        use Known::{Leaf, Nested};
        let cc = &self.chain_compression;
        let pe = &self.purge_errors;
        let ts = &self.thinking_strip;
        let ec = &self.economy;
        vec![
            ("enabled", Leaf(self.enabled.into())),
            (
                "showPruneStatusLine",
                Leaf(self.show_prune_status_line.into()),
            ),
            (
                "summarizerModel",
                Leaf(self.summarizer_model.clone().into()),
            ),
            (
                "summarizerThinking",
                Leaf(self.summarizer_thinking.clone().into()),
            ),
            ("pruneOn", Leaf(self.prune_on.name().into())),
            ("batchingMode", Leaf(self.batching_mode.name().into())),
            (
                "quietOversizedSkips",
                Leaf(self.quiet_oversized_skips.into()),
            ),
            ("minBatchChars", Leaf(self.min_batch_chars.into())),
            ("recoveryGraceTurns", Leaf(self.recovery_grace_turns.into())),
            (
                "summarizerIdleTimeoutMs",
                Leaf(self.summarizer_idle_timeout_ms.into()),
            ),
            (
                "summarizerMaxTimeoutMs",
                Leaf(self.summarizer_max_timeout_ms.into()),
            ),
            ("protectedTools", Leaf(self.protected_tools.clone().into())),
            ("protectedPaths", Leaf(self.protected_paths.clone().into())),
            (
                "dedupByContentHash",
                Leaf(self.dedup_by_content_hash.into()),
            ),
            (
                "autoBudgetThreshold",
                Leaf(fraction_value(self.auto_budget_threshold)),
            ),
            ("spillThreshold", Leaf(self.spill_threshold.into())),
            ("spillPreviewBytes", Leaf(self.spill_preview_bytes.into())),
            (
                "budgetTurnDelta",
                Leaf(fraction_value(self.budget_turn_delta)),
            ),
            (
                "chainCompression",
                Nested(vec![
                    ("enabled", cc.enabled.into()),
                    ("rollingWindow", cc.rolling_window.into()),
                    (
                        "stripFinalAssistantThinking",
                        cc.strip_final_assistant_thinking.into(),
                    ),
                    ("fuseRangeSummary", cc.fuse_range_summary.into()),
                ]),
            ),
            (
                "purgeErrors",
                Nested(vec![
                    ("enabled", pe.enabled.into()),
                    ("cooldownTurns", pe.cooldown_turns.into()),
                    ("minArgChars", pe.min_arg_chars.into()),
                ]),
            ),
            (
                "thinkingStrip",
                Nested(vec![
                    ("enabled", ts.enabled.into()),
                    ("keepLastTurns", ts.keep_last_turns.into()),
                ]),
            ),
            (
                "economy",
                Nested(vec![
                    ("policy", ec.policy.name().into()),
                    ("pressureShare", number_value(ec.pressure_share)),
                    ("profile", ec.profile.into()),
                    ("maxExcess", fraction_value(ec.max_excess)),
                    ("missRates", miss_model_value(ec.miss_model)),
                    ("summarizerPrice", fraction_value(ec.overrides.summarizer)),
                    ("writePrice", fraction_value(ec.overrides.write)),
                    ("readPrice", fraction_value(ec.overrides.read)),
                    ("ttlSeconds", fraction_value(ec.overrides.ttl_seconds)),
                    (
                        "minCacheableTokens",
                        ec.overrides
                            .min_cacheable_tokens
                            .map_or(Value::Null, Value::from),
                    ),
                ]),
            ),
        ]
    }
}

/// Returns `settings` with its [`SETTINGS_KEY`] key set to `block`, every
/// other key unchanged and in place (the key keeps its position if present,
/// else it is appended). A non-object `settings` becomes `{"contextPrune": block}`.
pub fn replace_context_prune(settings: &Value, block: Value) -> Value {
    let mut out = match settings {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    out.insert(SETTINGS_KEY.to_owned(), block);
    Value::Object(out)
}

/// A known key's serialized value: a leaf, or a nested object's sub-keys.
enum Known {
    Leaf(Value),
    Nested(Vec<(&'static str, Value)>),
}

/// A fraction key's JSON: `null` when off; `1` rather than `1.0`.
pub(super) fn fraction_value(v: Option<f64>) -> Value {
    match v {
        None => Value::Null,
        Some(f) => number_value(f),
    }
}

/// A miss model as `economy.missRates` writes it: `null`, its five
/// shares, or `"learn"`.
pub(super) fn miss_model_value(m: super::MissModel) -> Value {
    match m {
        super::MissModel::Ttl => Value::Null,
        super::MissModel::Rates(r) => Value::Array(r.0.iter().map(|&f| number_value(f)).collect()),
        super::MissModel::Learned => Value::from("learn"),
    }
}

/// `f` as JSON, written as an integer when it is one.
pub(super) fn number_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        // Exact: integral and well inside f64's integer range.
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}
