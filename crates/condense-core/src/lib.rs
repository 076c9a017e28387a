//! condense-core: the engine's logic, with no I/O, no clock and no threads.
//!
//! Given a branch's messages and its [`Branch`] (the pruning [`State`]
//! with the memos the phases keep beside it), [`render()`] computes exactly what the model should see, as an edit plan over the
//! input. Time and ids come in as values, so the same inputs always give
//! byte-identical outputs; that is what keeps the provider's prompt cache
//! warm.
//!
//! # Rendering a session
//!
//! Messages are pi's JSON ([`Message::from_json`]); the state comes from
//! what was persisted ([`StateBuilder`], in append order); the
//! [`Config`] is the `contextPrune` settings block.
//!
//! ```
//! use condense_core::{render, Branch, Config, Message, Protection, RenderSettings, StateBuilder};
//!
//! let branch = [
//!     r#"{"role":"user","content":[{"type":"text","text":"what is in a.rs?"}],"timestamp":1}"#,
//!     r#"{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a.rs"}}],"timestamp":2}"#,
//!     r#"{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"fn main() {}"}],"isError":false,"timestamp":3}"#,
//!     r#"{"role":"assistant","content":[{"type":"text","text":"An empty main."}],"timestamp":4}"#,
//! ];
//! let messages: Vec<Message> = branch.iter().map(|m| Message::from_json(m)).collect::<Result<_, _>>()?;
//!
//! // What a flush persisted: the result's record and a summary naming it `t1`.
//! let record = serde_json::from_str(r#"{"toolCallId":"c1","toolName":"read","args":{"path":"a.rs"},
//!     "resultText":"fn main() {}","isError":false,"turnIndex":1,"timestamp":2,"resultTimestamp":3}"#)?;
//! let refs = serde_json::from_str::<Vec<_>>(r#"[{"shortId":"t1","toolCallId":"c1","resultTimestamp":3}]"#)?;
//! let mut state = StateBuilder::new();
//! state.record(record, false).summary(&refs, "- `t1` a.rs holds an empty main".into());
//! let branch = Branch::from(state.build());
//!
//! let config = Config::default();
//! let settings = RenderSettings { config: &config, protection: &Protection::new(&config) };
//! let seen = render(&messages, &branch, &settings).messages(&messages);
//! assert!(seen[2].json().contains("ref `t1`"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Beyond rendering, the crate plans and applies flushes
//! ([`capture_turn`], [`plan_flush`], [`apply_flush`], [`plan_chains`],
//! [`apply_chains`]): a flush returns [`FlushEffect`]s saying *what* to
//! persist, and the caller (condense-store) decides how. [`query`] answers
//! `context_tree_query`.
//!
//! See `docs/ARCHITECTURE.md` for the map of modules.

#![warn(missing_docs)]

mod branch;
mod budget;
mod capture;
mod chains;
mod chains_memo;
mod compress;
mod config;
mod dedup;
mod diagnostics;
mod economy;
mod flush;
mod format;
mod js;
mod js_json;
mod ledger;
mod message;
mod metrics;
mod metrics_memo;
mod model_ref;
mod notice;
mod occurrence;
mod parked;
mod policy;
mod protect;
mod query;
mod records;
mod refs;
mod render;
mod state;
mod state_builder;
mod surrogates;
mod text;
mod thinking_level;
mod token_estimate;

/// Tool-call ids a lookup scans before it hashes them: an assistant opens
/// a handful of calls, where a scan beats hashing, and a hostile message
/// of thousands of calls stays linear. One figure for every such lookup
/// (the render's id sets, capture's results, the metrics' arguments).
const ID_SCAN_LIMIT: usize = 32;

// The message model.
pub use message::{
    tool_result_text, visit_prompt_text, Message, MessageError, MessageSummaryRef, Role, Skeleton,
    ToolCallBlock, IMAGE_PROMPT_CHARS, SUMMARY_CUSTOM_TYPE,
};
pub use occurrence::OccurrenceKey;
pub use parked::{JsonStr, ParkedText};
pub use text::SharedText;

// Settings and protection.
pub use config::{
    replace_context_prune, BatchingMode, ChainCompressionConfig, Config, ConfigWarning,
    EconomyConfig, MissModel, PruneOn, PurgeErrorsConfig, SummarizerModel, ThinkingStripConfig,
    DEFAULT_MAX_EXCESS, HOST_DEFAULT_MODEL, SETTINGS_KEY,
};
pub use model_ref::ModelRef;
pub use protect::{Protection, MAX_PROTECTED_PATTERNS};
pub use thinking_level::ThinkingLevel;

// The pruning state and what is persisted of it.
pub use records::{
    ChainEntry, Frontier, FrontierOutcome, SummarizerStats, SummaryRef, ToolCallRecord,
};
pub use state::{State, SummaryBody};

// A branch: its state and the phases' memos, and the entry points that
// read them.
pub use branch::{
    capture_branch, capture_pending, compute_context_metrics, plan_chains, render,
    render_after_switch, Branch,
};
pub use state_builder::StateBuilder;
pub use token_estimate::chars_to_tokens;

// Rendering what the model sees.
pub use diagnostics::{Diagnostic, DiagnosticKind, DiagnosticSink};
pub use render::{
    apply_steps, array_chars, in_grace_keys, neutralize_closing_tags, PlanStep, Render, RenderPlan,
    RenderSettings,
};

// Recovery: `context_tree_query`.
pub use query::{
    page as query_page, query, query_with, truncate_head, Page as QueryPage, PageRequest,
    QueryOptions, QueryOutput, MAX_ANSWER_BYTES as QUERY_MAX_ANSWER_BYTES,
    MAX_BYTES as QUERY_MAX_BYTES, MAX_LINES as QUERY_MAX_LINES, QUERY_TOOL_NAME,
    SPILL_PREVIEW_ONLY, SPILL_UNAVAILABLE, SPLIT_BYTES as QUERY_SPLIT_BYTES,
};

// Flushing: capture, summarization jobs, persisted effects.
pub use capture::{
    capture_turn, group_by_mode, merge_runs, run_groups, trim_to_pending, without_protected,
    CapturedBatch, CapturedCall,
};
pub use dedup::{content_hash, normalize as normalize_for_hash};
pub use flush::{
    apply_flush, apply_spill, kept_raw, kept_raw_chars, plan_flush, plan_spill, FlushEffect,
    FlushOutcome, FlushPlan, FlushResult, JobResult, PlannedBatch, Slot, SpillPlan, SummaryJob,
    Usage, WrittenSpill,
};
pub use refs::substitute_inline_refs;

// Chains: detection, eligibility, compression.
pub use chains::{detect_chains, select_eligible, with_closing_message, ChainRange};
pub use compress::{apply_chains, ChainPlan, ChainResult, ChainWork, FusionJob};

// Budget gates and context metrics.
pub use budget::{
    budget_hit, flush_trigger, usage_fraction, BudgetDecision, BudgetGate, TriggerKind,
    MAX_BUDGET_WINDOW,
};
pub use metrics::ContextMetrics;

// The display policy: when flushed content is shown (cache economics).
pub use config::Policy;
pub use policy::{
    budget_threshold, call_history, calls_before_compaction, cold_share, decide_summarize,
    decide_switch, expected_calls, is_idle_expired, switch_sizes, under_pressure, warm_rewrite,
    ColdEvent, Hold, RecordedReason, SummarizeDecision, SummarizeInputs, SwitchDecision,
    SwitchInputs, SwitchReason, SwitchSizes, BUDGET_HEADROOM, COMPACTION_KEEP_RECENT_TOKENS,
    COMPACTION_RESERVE_TOKENS, COMPACTION_SUMMARY_TOKENS, EXPECTED_CALLS_FACTOR,
};

// What the user is told, and how numbers read.
pub use format::format_count;
pub use notice::{Notice, NoticeLevel};

// JavaScript string lengths, the unit every threshold shared with pi-condense
// is measured in.
pub use js::{js_len, js_prefix};
// Settings as JavaScript hands them on: a string cut inside a surrogate pair
// and a number past f64's range are valid JSON that serde refuses.
pub use js_json::parse_lossy as parse_json_lossy;
// A fast deterministic hasher for maps keyed by tool-call ids (the engine's
// driver consults one for every output a prompt leaves out).
pub use rustc_hash::{FxHashMap, FxHashSet};

// Prompt-cache economics: price profiles and what each call bills.
pub use economy::{
    bill_call, gap_bucket, prompt_units, recorded_bill, BillTotals, CacheTerms, CallBill,
    CallTokens, MissCounts, MissRates, NoPruningBound, PreviousCall, PriceProfile, ProfileError,
    ProfileOverrides, PromptShape, RecordedUsage, GAP_EDGES_S, MAX_RECORDED_TOKENS, PROFILE_NAMES,
};
pub use ledger::{
    AgainstNoPruning, EconomyReport, Holding, PlannedMisses, SessionEconomy, SwitchRecord,
};
