//! The `contextPrune` settings block: every key, its default and its
//! normalization rule.
//!
//! The block lives under [`SETTINGS_KEY`] in pi's `settings.json`. Loading
//! never fails: [`Config::from_settings_value`] replaces each bad value by its
//! default (or clamps it) and reports a [`ConfigWarning`] for it.
//!
//! Nested objects (`chainCompression`, `purgeErrors`, `thinkingStrip`) are
//! merged key by key over their defaults, so a partial object keeps the
//! defaults of the sub-keys it leaves out.
//!
//! Unknown keys are not stored in [`Config`]. Saving goes through
//! [`Config::to_settings_value`], which takes the block as it was loaded and
//! writes every known key over it, so unknown keys and unknown nested sub-keys
//! come back unchanged and in their original position.
//!
//! `docs/configuration.md` has the user-facing table of keys.

use std::fmt;

use serde_json::{Map, Value};

use crate::policy::Policy;
use crate::thinking_level::ThinkingLevel;

/// The key of the condense block in pi's `settings.json`.
pub const SETTINGS_KEY: &str = "contextPrune";

/// What `pruneOn` may say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PruneOn {
    /// Flush when the agent answers with text only (default).
    AgentMessage,
    /// Flush only on `/pruner now` or a budget trigger.
    OnDemand,
}

impl PruneOn {
    /// Every mode, default first.
    pub const ALL: [PruneOn; 2] = [PruneOn::AgentMessage, PruneOn::OnDemand];

    /// The settings spelling: `agent-message` or `on-demand`.
    pub fn name(self) -> &'static str {
        match self {
            PruneOn::AgentMessage => "agent-message",
            PruneOn::OnDemand => "on-demand",
        }
    }

    /// Parses the settings spelling (case-sensitive); `None` for anything else.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// What `batchingMode` may say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchingMode {
    /// One batch per assistant turn (default).
    Turn,
    /// Consecutive turns of one user-turn group merge into one batch.
    AgentMessage,
}

impl BatchingMode {
    /// Every mode, default first.
    pub const ALL: [BatchingMode; 2] = [BatchingMode::Turn, BatchingMode::AgentMessage];

    /// The settings spelling: `turn` or `agent-message`.
    pub fn name(self) -> &'static str {
        match self {
            BatchingMode::Turn => "turn",
            BatchingMode::AgentMessage => "agent-message",
        }
    }

    /// Parses the settings spelling (case-sensitive); `None` for anything else.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// `chainCompression.*`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainCompressionConfig {
    /// `chainCompression.enabled`: compress closed chains (default `true`).
    pub enabled: bool,
    /// `chainCompression.rollingWindow`: recent turns a compressed chain keeps
    /// verbatim; integer `>= 1` (default `3`).
    pub rolling_window: u32,
    /// `chainCompression.stripFinalAssistantThinking`: drop thinking blocks
    /// of a chain's kept final assistant message (default `true`).
    pub strip_final_assistant_thinking: bool,
    /// `chainCompression.fuseRangeSummary`: fuse the range's batch summaries
    /// into the synthetic chain body (default `true`).
    pub fuse_range_summary: bool,
}

/// `purgeErrors.*`.
#[derive(Debug, Clone, PartialEq)]
pub struct PurgeErrorsConfig {
    /// `purgeErrors.enabled`: purge the arguments of failed calls (default `true`).
    pub enabled: bool,
    /// `purgeErrors.cooldownTurns`: turns to wait before purging; integer
    /// `>= 1` (default `2`).
    pub cooldown_turns: u32,
    /// `purgeErrors.minArgChars`: smallest argument size worth purging, in
    /// characters; integer `>= 0` (default `500`).
    pub min_arg_chars: u64,
}

/// `thinkingStrip.*` (opt-in; see docs/configuration.md for why it is off).
#[derive(Debug, Clone, PartialEq)]
pub struct ThinkingStripConfig {
    /// `thinkingStrip.enabled`: strip thinking from older assistant turns
    /// (default `false`).
    pub enabled: bool,
    /// `thinkingStrip.keepLastTurns`: assistant turns that keep their
    /// thinking; clamped to `>= 1` (default `16`).
    pub keep_last_turns: u32,
}

/// `economy.*`: when flushed content is shown (condense only; pi-condense
/// ignores the key).
#[derive(Debug, Clone, PartialEq)]
pub struct EconomyConfig {
    /// `economy.policy`: `reference` (show at once, pi-condense's behaviour;
    /// default) or `cache-aware` (show at chosen switches).
    pub policy: Policy,
    /// `economy.pressureShare`: share of the context window, in `(0, 1]`, at
    /// which the cache-aware policy switches whatever it costs (default `0.8`).
    pub pressure_share: f64,
    /// `economy.profile`: how the provider bills prompt caching, one of
    /// [`PROFILE_NAMES`](crate::PROFILE_NAMES) (default `anthropic-5m`); the
    /// cache-aware policy plans with it and the status prices with it.
    pub profile: &'static str,
    /// `economy.maxExcess`: a number `>= 0`, the most the cache-aware
    /// policy may ever bill beyond what no pruning would have billed so
    /// far, as a share of that (`0`: never more); `None` (the default): no
    /// bound, the policy bets on its projections
    /// ([`NoPruningBound`](crate::NoPruningBound)).
    pub max_excess: Option<f64>,
}

/// The whole `contextPrune` block, normalized.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `enabled`: master switch (default `false`).
    pub enabled: bool,
    /// `showPruneStatusLine`: show the footer status (default `true`).
    pub show_prune_status_line: bool,
    /// `summarizerModel`: `default` (the session's model) or `provider/id`.
    pub summarizer_model: String,
    /// `summarizerThinking`: a [`ThinkingLevel`]'s spelling (`default`, …).
    pub summarizer_thinking: String,
    /// `pruneOn`: when a flush happens.
    pub prune_on: PruneOn,
    /// `batchingMode`: how turns group into batches.
    pub batching_mode: BatchingMode,
    /// `quietOversizedSkips`: hide the oversized-summary skip notice.
    pub quiet_oversized_skips: bool,
    /// `minBatchChars`: batches smaller than this are not summarized; `0`
    /// disables the check.
    pub min_batch_chars: u64,
    /// `recoveryGraceTurns`: user-turn groups a recovered output stays
    /// verbatim; `0` disables.
    pub recovery_grace_turns: u32,
    /// `summarizerIdleTimeoutMs`: summarizer idle timeout; `0` disables.
    pub summarizer_idle_timeout_ms: u64,
    /// `summarizerMaxTimeoutMs`: summarizer total timeout; `0` disables.
    pub summarizer_max_timeout_ms: u64,
    /// `protectedTools`: tool names whose outputs are never pruned.
    pub protected_tools: Vec<String>,
    /// `protectedPaths`: globs on `args.path` whose outputs are never pruned.
    pub protected_paths: Vec<String>,
    /// `dedupByContentHash`: reuse the summary of identical outputs.
    pub dedup_by_content_hash: bool,
    /// `autoBudgetThreshold`: context fraction in `(0, 1]` that forces a
    /// flush; `None` is off.
    pub auto_budget_threshold: Option<f64>,
    /// `spillThreshold`: outputs larger than this (UTF-16 units) spill to disk;
    /// integer `>= 1`.
    pub spill_threshold: u64,
    /// `spillPreviewBytes`: preview kept in context for a spilled output.
    pub spill_preview_bytes: u64,
    /// `budgetTurnDelta`: context-fraction growth in `(0, 1]` since the last
    /// flush that forces one; `None` is off.
    pub budget_turn_delta: Option<f64>,
    /// `chainCompression.*`.
    pub chain_compression: ChainCompressionConfig,
    /// `purgeErrors.*`.
    pub purge_errors: PurgeErrorsConfig,
    /// `thinkingStrip.*`.
    pub thinking_strip: ThinkingStripConfig,
    /// `economy.*`.
    pub economy: EconomyConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: false,
            show_prune_status_line: true,
            summarizer_model: "default".into(),
            summarizer_thinking: "default".into(),
            prune_on: PruneOn::AgentMessage,
            batching_mode: BatchingMode::Turn,
            quiet_oversized_skips: false,
            min_batch_chars: 1000,
            recovery_grace_turns: 3,
            summarizer_idle_timeout_ms: 20_000,
            summarizer_max_timeout_ms: 180_000,
            protected_tools: Vec::new(),
            protected_paths: vec!["**/skills/**/*.md".into()],
            dedup_by_content_hash: true,
            auto_budget_threshold: None,
            spill_threshold: 65_536,
            spill_preview_bytes: 2048,
            budget_turn_delta: None,
            chain_compression: ChainCompressionConfig {
                enabled: true,
                rolling_window: 3,
                strip_final_assistant_thinking: true,
                fuse_range_summary: true,
            },
            purge_errors: PurgeErrorsConfig {
                enabled: true,
                cooldown_turns: 2,
                min_arg_chars: 500,
            },
            thinking_strip: ThinkingStripConfig {
                enabled: false,
                keep_last_turns: 16,
            },
            economy: EconomyConfig {
                policy: Policy::Reference,
                pressure_share: 0.8,
                profile: crate::PROFILE_NAMES[0],
                max_excess: None,
            },
        }
    }
}

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
fn fraction_value(v: Option<f64>) -> Value {
    match v {
        None => Value::Null,
        Some(f) => number_value(f),
    }
}

/// `f` as JSON, written as an integer when it is one.
fn number_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        // Exact: integral and well inside f64's integer range.
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}

/// What an integer key does with a value below its minimum.
#[derive(Clone, Copy)]
enum BelowMin {
    /// Use the default (pi-condense's rule for most keys).
    Default,
    /// Use the minimum (`thinkingStrip.keepLastTurns`).
    Clamp,
}

/// The rule of one integer key.
#[derive(Clone, Copy)]
struct IntRule {
    default: u64,
    min: u64,
    max: u64,
    below_min: BelowMin,
}

impl IntRule {
    /// `>= 0`, default on negatives, saturating at `u64::MAX`.
    const fn non_negative(default: u64) -> Self {
        IntRule {
            default,
            min: 0,
            max: u64::MAX,
            below_min: BelowMin::Default,
        }
    }

    /// `>= 0`, default on negatives, saturating at `u32::MAX`.
    const fn u32_non_negative(default: u32) -> Self {
        IntRule {
            default: default as u64,
            min: 0,
            max: u32::MAX as u64,
            below_min: BelowMin::Default,
        }
    }

    /// `>= 1`, saturating at `u32::MAX`.
    const fn u32_at_least_one(default: u32, below_min: BelowMin) -> Self {
        IntRule {
            default: default as u64,
            min: 1,
            max: u32::MAX as u64,
            below_min,
        }
    }
}

/// Collects warnings while reading one block.
#[derive(Default)]
struct Normalizer {
    warnings: Vec<ConfigWarning>,
}

impl Normalizer {
    fn warn(&mut self, key: &str, bad: &Value, used: Value) {
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

    fn economy(&mut self, obj: &Map<String, Value>, de: &EconomyConfig) -> EconomyConfig {
        let sub = self.nested(obj, "economy");
        EconomyConfig {
            policy: self.choice(
                sub,
                "economy.policy",
                de.policy,
                Policy::from_name,
                Policy::name,
            ),
            pressure_share: match Self::lookup(sub, "economy.pressureShare") {
                None => de.pressure_share,
                Some(v) => match v.as_f64() {
                    Some(f) if f > 0.0 && f <= 1.0 => f,
                    _ => {
                        self.warn("economy.pressureShare", v, number_value(de.pressure_share));
                        de.pressure_share
                    }
                },
            },
            profile: self.choice(
                sub,
                "economy.profile",
                de.profile,
                |name| crate::PROFILE_NAMES.into_iter().find(|p| *p == name),
                |name| name,
            ),
            max_excess: match Self::lookup(sub, "economy.maxExcess") {
                None | Some(Value::Null) => None,
                Some(v) => match v.as_f64() {
                    Some(f) if f >= 0.0 && f.is_finite() => Some(f),
                    _ => {
                        self.warn("economy.maxExcess", v, Value::Null);
                        None
                    }
                },
            },
        }
    }

    fn chain_compression(
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

    fn purge_errors(
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

    fn thinking_strip(
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

    /// The value of `path`'s last segment in `obj`, if both exist.
    fn lookup<'v>(obj: Option<&'v Map<String, Value>>, path: &str) -> Option<&'v Value> {
        let field = path.rsplit('.').next().unwrap_or(path);
        obj?.get(field)
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

    fn boolean(&mut self, obj: Option<&Map<String, Value>>, key: &str, default: bool) -> bool {
        match Self::lookup(obj, key) {
            None => default,
            Some(Value::Bool(b)) => *b,
            Some(bad) => {
                self.warn(key, bad, default.into());
                default
            }
        }
    }

    fn string(&mut self, obj: Option<&Map<String, Value>>, key: &str, default: &str) -> String {
        match Self::lookup(obj, key) {
            None => default.to_owned(),
            Some(Value::String(s)) => s.clone(),
            Some(bad) => {
                self.warn(key, bad, default.into());
                default.to_owned()
            }
        }
    }

    /// A string that must be one of a fixed set of names.
    fn choice<T: Copy, S: Into<String>>(
        &mut self,
        obj: Option<&Map<String, Value>>,
        key: &str,
        default: T,
        parse: impl Fn(&str) -> Option<T>,
        name: impl Fn(T) -> S,
    ) -> T {
        match Self::lookup(obj, key) {
            None => default,
            Some(v) => match v.as_str().and_then(&parse) {
                Some(t) => t,
                None => {
                    self.warn(key, v, Value::String(name(default).into()));
                    default
                }
            },
        }
    }

    /// An array of strings: a non-array gives the default, non-string
    /// elements are dropped. Either is reported.
    fn string_list(
        &mut self,
        obj: Option<&Map<String, Value>>,
        key: &str,
        default: &[String],
    ) -> Vec<String> {
        match Self::lookup(obj, key) {
            None => default.to_vec(),
            Some(list @ Value::Array(items)) => {
                let kept: Vec<String> = items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect();
                if kept.len() != items.len() {
                    self.warn(key, list, kept.clone().into());
                }
                kept
            }
            Some(bad) => {
                self.warn(key, bad, default.to_vec().into());
                default.to_vec()
            }
        }
    }

    /// A fraction in `(0, 1]` or off: `null` and `0` mean off silently;
    /// anything else outside the range is off with a warning.
    fn fraction(&mut self, obj: Option<&Map<String, Value>>, key: &str) -> Option<f64> {
        match Self::lookup(obj, key) {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_f64() {
                Some(f) if (0.0..=1.0).contains(&f) => (f > 0.0).then_some(f),
                _ => {
                    self.warn(key, v, Value::Null);
                    None
                }
            },
        }
    }

    /// An integer key: numbers are floored, then checked against the rule;
    /// non-numbers take the default. Any change is reported.
    fn integer(&mut self, obj: Option<&Map<String, Value>>, key: &str, rule: IntRule) -> u64 {
        let Some(v) = Self::lookup(obj, key) else {
            return rule.default;
        };
        let below = match rule.below_min {
            BelowMin::Default => rule.default,
            BelowMin::Clamp => rule.min,
        };
        let used = match v {
            Value::Number(n) => {
                let floored = if let Some(u) = n.as_u64() {
                    Some(u)
                } else if n.as_i64().is_some() {
                    None // negative integer
                } else {
                    let f = n.as_f64().unwrap_or(-1.0);
                    if f < 0.0 {
                        None
                    } else if f.floor() >= u64::MAX as f64 {
                        Some(u64::MAX)
                    } else {
                        Some(f.floor() as u64)
                    }
                };
                match floored {
                    None => below,
                    Some(x) if x < rule.min => below,
                    Some(x) => x.min(rule.max),
                }
            }
            _ => rule.default,
        };
        // Silent only when the value already was exactly `used`.
        let exact = v.as_u64() == Some(used)
            || (v.is_f64()
                && v.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f == used as f64));
        if !exact {
            self.warn(key, v, used.into());
        }
        used
    }
}

/// Narrows a value already clamped to `u32::MAX`.
fn to_u32(x: u64) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}
