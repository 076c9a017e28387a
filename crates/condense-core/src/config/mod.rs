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
//!
//! One concern a file: this one holds the keys' types and defaults;
//! `load.rs` the loader and its warnings, `values.rs` the rule of each kind
//! of value (booleans, names, lists, fractions, integers), `nested.rs` the
//! nested objects merged key by key over their defaults, `save.rs` the block
//! written back over the one loaded.

use crate::economy::{PriceProfile, ProfileOverrides};

mod load;
mod nested;
mod policy;
mod save;
mod values;

pub use load::ConfigWarning;
pub use policy::Policy;
pub use save::replace_context_prune;

/// The key of the condense block in pi's `settings.json`.
pub const SETTINGS_KEY: &str = "contextPrune";

/// `economy.maxExcess` by default: a session may bill at most 2% above
/// what no pruning would have billed so far, prompts, outputs and the
/// summarizer counted together. The share lets a long warm session place
/// its first bets before it has saved anything (docs/economy.md, "The
/// allowance, against the price terms").
pub const DEFAULT_MAX_EXCESS: f64 = 0.02;

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
    /// `economy.policy`: `cache-aware` (show at chosen switches; default)
    /// or `reference` (show at once, pi-condense's behaviour).
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
    /// far, as a share of that (default [`DEFAULT_MAX_EXCESS`]; `0`: never
    /// more); `None` (`null` in the file): no bound, the policy bets on its
    /// projections ([`NoPruningBound`](crate::NoPruningBound)).
    pub max_excess: Option<f64>,
    /// `economy.missRates`: the miss model the cache-aware policy plans
    /// with ([`MissModel`]).
    pub miss_model: MissModel,
    /// `economy.summarizerPrice`, `economy.writePrice`, `economy.readPrice`,
    /// `economy.ttlSeconds` and `economy.minCacheableTokens`: the provider's
    /// terms where they differ from the profile's (`None`, `null` in the
    /// file: the profile's). The output price and the dollar rate are not
    /// settings: the bound prices summaries' output at the profile's.
    pub overrides: ProfileOverrides,
}

impl EconomyConfig {
    /// The prices the cache-aware policy plans with and the status prices
    /// with: the named profile with the configured overrides (validated
    /// when read, so they apply).
    pub fn prices(&self) -> PriceProfile {
        let named = PriceProfile::named_or_default(self.profile);
        named
            .clone()
            .with_overrides(&self.overrides)
            .unwrap_or(named)
    }
}

/// How the cache-aware policy expects the provider's cache to behave
/// (`economy.missRates`): under a miss model it prices calls and switches
/// at their expected cost.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum MissModel {
    /// `null`: the cache holds a prefix for its TTL.
    Ttl,
    /// One to five shares from 0 to 1: the chance the provider misses a
    /// cached prefix before its TTL, by the gap since the previous call
    /// (`condense simulate --calibrate` fits them on recorded usage).
    Rates(crate::MissRates),
    /// `"learn"` (the default): the shares the session's own calls show,
    /// from the usage the host reports; the TTL alone until enough calls
    /// were seen.
    #[default]
    Learned,
}

/// The whole `contextPrune` block, normalized.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `enabled`: master switch (default `false`).
    pub enabled: bool,
    /// `showPruneStatusLine`: show the footer status (default `true`).
    pub show_prune_status_line: bool,
    /// `summarizerModel` as written: `default` (the session's model) or
    /// `provider/id`; [`Config::summarizer`] reads it.
    pub summarizer_model: String,
    /// `summarizerThinking`: a [`ThinkingLevel`](crate::ThinkingLevel)'s
    /// spelling (`default`, …).
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

/// The spelling of `summarizerModel` (and of `llm.complete`'s `model`)
/// that leaves the choice to the host.
pub const HOST_DEFAULT_MODEL: &str = "default";

/// The model `summarizerModel` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummarizerModel<'a> {
    /// `default`: the host's choice: the session's own model in pi and
    /// OpenCode, a cheaper model of the same provider through the proxy.
    HostDefault,
    /// `provider/id`, or whatever else was written, as written.
    Named(&'a str),
}

impl Config {
    /// The model the summarizer runs on.
    pub fn summarizer(&self) -> SummarizerModel<'_> {
        if self.summarizer_model == HOST_DEFAULT_MODEL {
            SummarizerModel::HostDefault
        } else {
            SummarizerModel::Named(&self.summarizer_model)
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: false,
            show_prune_status_line: true,
            summarizer_model: HOST_DEFAULT_MODEL.into(),
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
                policy: Policy::CacheAware,
                pressure_share: 0.8,
                profile: crate::PROFILE_NAMES[0],
                max_excess: Some(DEFAULT_MAX_EXCESS),
                miss_model: MissModel::Learned,
                overrides: ProfileOverrides::default(),
            },
        }
    }
}
