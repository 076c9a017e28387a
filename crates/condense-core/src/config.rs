//! The `contextPrune` settings block: every key, its default and its
//! normalization rule.
//!
//! TODO(config helper): loading, normalization with warnings, deep merge,
//! unknown-key round trip. The struct below is the shape the engine reads.

/// What `pruneOn` may say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PruneOn {
    /// Flush when the agent answers with text only (default).
    AgentMessage,
    /// Flush only on `/pruner now` or a budget trigger.
    OnDemand,
}

/// What `batchingMode` may say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchingMode {
    /// One batch per assistant turn (default).
    Turn,
    /// Consecutive turns of one user-turn group merge into one batch.
    AgentMessage,
}

/// `chainCompression.*`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainCompressionConfig {
    pub enabled: bool,
    pub rolling_window: u32,
    pub strip_final_assistant_thinking: bool,
    pub fuse_range_summary: bool,
}

/// `purgeErrors.*`.
#[derive(Debug, Clone, PartialEq)]
pub struct PurgeErrorsConfig {
    pub enabled: bool,
    pub cooldown_turns: u32,
    pub min_arg_chars: u64,
}

/// `thinkingStrip.*` (opt-in; see docs/configuration.md for why it is off).
#[derive(Debug, Clone, PartialEq)]
pub struct ThinkingStripConfig {
    pub enabled: bool,
    pub keep_last_turns: u32,
}

/// The whole `contextPrune` block, normalized.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub enabled: bool,
    pub show_prune_status_line: bool,
    pub summarizer_model: String,
    pub summarizer_thinking: String,
    pub prune_on: PruneOn,
    pub batching_mode: BatchingMode,
    pub quiet_oversized_skips: bool,
    pub min_batch_chars: u64,
    pub recovery_grace_turns: u32,
    pub summarizer_idle_timeout_ms: u64,
    pub summarizer_max_timeout_ms: u64,
    pub protected_tools: Vec<String>,
    pub protected_paths: Vec<String>,
    pub dedup_by_content_hash: bool,
    pub auto_budget_threshold: Option<f64>,
    pub spill_threshold: u64,
    pub spill_preview_bytes: u64,
    pub budget_turn_delta: Option<f64>,
    pub chain_compression: ChainCompressionConfig,
    pub purge_errors: PurgeErrorsConfig,
    pub thinking_strip: ThinkingStripConfig,
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
        }
    }
}
