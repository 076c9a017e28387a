//! Loading the block: each bad value replaced by its default (or clamped)
//! and reported as a [`ConfigWarning`], never an error.

use std::fmt;

use serde_json::{Map, Value};

use super::values::{BelowMin, IntRule};
use super::{BatchingMode, Config, PruneOn, SETTINGS_KEY};
use crate::thinking_level::ThinkingLevel;

/// One bad value met while loading the block, and what was used instead.
///
/// Displays as `contextPrune.<key>: invalid value <value>; using <used>`, e.g.
/// `contextPrune.minBatchChars: invalid value -5; using 1000`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// Dotted path of the key inside the block, e.g.
    /// `chainCompression.rollingWindow`; empty for the block itself.
    pub key: String,
    /// The value found, as compact JSON text.
    pub value: String,
    /// The value used instead, as compact JSON text.
    pub used: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SETTINGS_KEY)?;
        if !self.key.is_empty() {
            write!(f, ".{}", self.key)?;
        }
        write!(f, ": invalid value {}; using {}", self.value, self.used)
    }
}

impl Config {
    /// Loads the `contextPrune` object itself (not the whole `settings.json`).
    ///
    /// Missing keys take their default silently. Every present key that is
    /// not valid is replaced by its default, or clamped, and reported; see
    /// `docs/configuration.md` for each rule. A non-object gives the defaults
    /// and one warning with an empty key.
    pub fn from_settings_value(block: &Value) -> (Config, Vec<ConfigWarning>) {
        let mut n = Normalizer::default();
        let config = match block {
            Value::Object(obj) => n.config(obj),
            other => {
                n.warn("", other, Value::Object(Map::new()));
                Config::default()
            }
        };
        (config, n.warnings)
    }

    /// Loads from the whole `settings.json` value: picks [`SETTINGS_KEY`].
    ///
    /// A missing key, or a root that is not an object, gives the defaults
    /// with no warning (pi-condense's behaviour for a missing or unreadable
    /// file). A present key is loaded by [`Config::from_settings_value`].
    pub fn from_settings_file_value(settings: &Value) -> (Config, Vec<ConfigWarning>) {
        match settings.get(SETTINGS_KEY) {
            Some(block) => Config::from_settings_value(block),
            None => (Config::default(), Vec::new()),
        }
    }
}

/// Collects warnings while reading one block.
#[derive(Default)]
pub(super) struct Normalizer {
    pub(super) warnings: Vec<ConfigWarning>,
}

impl Normalizer {
    pub(super) fn warn(&mut self, key: &str, bad: &Value, used: Value) {
        self.warnings.push(ConfigWarning {
            key: key.to_owned(),
            value: bad.to_string(),
            used: used.to_string(),
        });
    }

    fn config(&mut self, obj: &Map<String, Value>) -> Config {
        let d = Config::default();
        Config {
            enabled: self.boolean(Some(obj), "enabled", d.enabled),
            show_prune_status_line: self.boolean(
                Some(obj),
                "showPruneStatusLine",
                d.show_prune_status_line,
            ),
            summarizer_model: self.string(Some(obj), "summarizerModel", &d.summarizer_model),
            summarizer_thinking: self
                .choice(
                    Some(obj),
                    "summarizerThinking",
                    d.summarizer_thinking.as_str(),
                    |s| ThinkingLevel::parse(s).map(ThinkingLevel::as_str),
                    |l| l,
                )
                .to_owned(),
            prune_on: self.choice(
                Some(obj),
                "pruneOn",
                d.prune_on,
                PruneOn::from_name,
                PruneOn::name,
            ),
            batching_mode: self.choice(
                Some(obj),
                "batchingMode",
                d.batching_mode,
                BatchingMode::from_name,
                BatchingMode::name,
            ),
            quiet_oversized_skips: self.boolean(
                Some(obj),
                "quietOversizedSkips",
                d.quiet_oversized_skips,
            ),
            min_batch_chars: self.integer(
                Some(obj),
                "minBatchChars",
                IntRule::non_negative(d.min_batch_chars),
            ),
            recovery_grace_turns: to_u32(self.integer(
                Some(obj),
                "recoveryGraceTurns",
                IntRule::u32_non_negative(d.recovery_grace_turns),
            )),
            summarizer_idle_timeout_ms: self.integer(
                Some(obj),
                "summarizerIdleTimeoutMs",
                IntRule::non_negative(d.summarizer_idle_timeout_ms),
            ),
            summarizer_max_timeout_ms: self.integer(
                Some(obj),
                "summarizerMaxTimeoutMs",
                IntRule::non_negative(d.summarizer_max_timeout_ms),
            ),
            protected_tools: self.string_list(Some(obj), "protectedTools", &d.protected_tools),
            protected_paths: self.string_list(Some(obj), "protectedPaths", &d.protected_paths),
            dedup_by_content_hash: self.boolean(
                Some(obj),
                "dedupByContentHash",
                d.dedup_by_content_hash,
            ),
            auto_budget_threshold: self.fraction(Some(obj), "autoBudgetThreshold"),
            spill_threshold: self.integer(
                Some(obj),
                "spillThreshold",
                IntRule {
                    default: d.spill_threshold,
                    min: 1,
                    max: u64::MAX,
                    below_min: BelowMin::Default,
                },
            ),
            spill_preview_bytes: self.integer(
                Some(obj),
                "spillPreviewBytes",
                IntRule::non_negative(d.spill_preview_bytes),
            ),
            budget_turn_delta: self.fraction(Some(obj), "budgetTurnDelta"),
            chain_compression: self.chain_compression(obj, &d.chain_compression),
            purge_errors: self.purge_errors(obj, &d.purge_errors),
            thinking_strip: self.thinking_strip(obj, &d.thinking_strip),
            economy: self.economy(obj, &d.economy),
        }
    }
}

/// Narrows a value already clamped to `u32::MAX`.
pub(super) fn to_u32(x: u64) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}
