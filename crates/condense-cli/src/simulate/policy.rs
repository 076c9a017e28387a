//! What a simulated policy answers for each LLM call: the prompt source.
//!
//! The replay ([`super::replay`]) walks a session's branch and, before every
//! assistant message (one LLM call), asks the policy what the model would be
//! sent. A policy sees what pi's extension would: the `context` messages
//! (pi's `buildSessionContext` of the branch so far, compaction summaries
//! included) and the entries recorded since the previous call, from which it
//! can tell turn ends and the final reply to fire its triggers. It answers
//! with the rendered messages and the summarizer work it did on the way.
//!
//! `none` is [`NoPruning`]. The engine-driven policies (`reference`,
//! `cache-aware`, a settings file) are [`EnginePolicy`]: a
//! `condense_engine::drive::Driver` fed the entries, which makes the live
//! sidecar's calls and flushes through the engine's own driver.

use std::borrow::Cow;

use condense_core::Message;
use condense_store::session::Entry;

use super::compaction::CompactionSettings;
use super::engine_policy::{builtin_settings, EnginePolicy, SummaryModel};
use super::tokens::TokenCount;

/// Everything a policy may look at before one call.
pub struct CallInput<'a> {
    /// When the call was made (ms since the epoch), if known.
    pub at_ms: Option<i64>,
    /// What pi hands the `context` event for this call.
    pub context: &'a [Message],
    /// The branch entries recorded since the previous call (for the first
    /// call, from the root), ending with the entry before this call's
    /// assistant message.
    pub new_entries: &'a [&'a Entry],
    /// How the simulator counts tokens (for summarizer work a policy models).
    pub tokens: &'a dyn TokenCount,
    /// The call's model (`provider/id`), if recorded.
    pub model: Option<String>,
    /// The previous call's tokens as the harness reports them (its prompt
    /// as this policy sent it, and its output).
    pub previous_usage: Option<u64>,
}

/// The summarizer's work, in tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SummarizerWork {
    /// Prompt tokens the summarizer was sent.
    pub input: u64,
    /// Tokens it produced.
    pub output: u64,
}

/// A policy's answer for one call.
pub struct Prompt<'a> {
    /// The messages the model is sent (the rendered context).
    pub messages: Cow<'a, [Message]>,
    /// Summarizer work done since the previous call (flushes the triggers
    /// fired before this call).
    pub summarizer: SummarizerWork,
}

/// What a policy reports once the branch has been replayed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Finish {
    /// Summarizer work after the last call (e.g. an agent-end flush).
    pub summarizer: SummarizerWork,
    /// Tool outputs the model can no longer see verbatim nor page back in
    /// (`context_tree_query`); condense's invariant says 0.
    pub unrecoverable_outputs: u64,
    /// Flushes that ran.
    pub flushes: u64,
    /// Switches the cache-aware policy made.
    pub switches: u64,
    /// Why a reload of the session the run would have left renders
    /// otherwise than the run did (`None`: the same, or not checked).
    pub reload_mismatch: Option<String>,
    /// The reload was checked (engine-driven policies).
    pub reload_checked: bool,
}

/// A pruning policy as the simulator drives it.
pub trait PromptSource {
    /// The policy's name in reports (`none`, `reference`, …).
    fn name(&self) -> &str;

    /// The prompt of the call described by `call`.
    fn prompt<'a>(&mut self, call: &CallInput<'a>) -> Result<Prompt<'a>, String>;

    /// Called once after the last call, with the entries recorded after it
    /// and the last call's tokens (as [`CallInput::previous_usage`]).
    fn finish(
        &mut self,
        trailing_entries: &[&Entry],
        last_usage: Option<u64>,
    ) -> Result<Finish, String> {
        let _ = (trailing_entries, last_usage);
        Ok(Finish::default())
    }
}

/// No pruning: the model sees the branch as pi builds it.
#[derive(Debug, Default)]
pub struct NoPruning;

impl PromptSource for NoPruning {
    fn name(&self) -> &str {
        "none"
    }

    fn prompt<'a>(&mut self, call: &CallInput<'a>) -> Result<Prompt<'a>, String> {
        Ok(Prompt {
            messages: Cow::Borrowed(call.context),
            summarizer: SummarizerWork::default(),
        })
    }
}

/// The built-in policies, by name, in report order.
pub const POLICY_NAMES: [&str; 3] = ["none", "reference", "cache-aware"];

/// The name a settings file's policy goes by.
pub const SETTINGS_POLICY: &str = "settings";

/// What every policy of a run shares.
#[derive(Debug, Clone)]
pub struct PolicySetup {
    /// The models' context window, for the budget gates and pressure.
    pub context_window: u64,
    /// What the summarizer answers.
    pub summaries: SummaryModel,
    /// The settings.json of `--settings`, when given.
    pub settings_file: Option<serde_json::Value>,
    /// pi's auto-compaction (`None`: `--no-compaction`).
    pub compaction: Option<CompactionSettings>,
    /// The `economy` keys of the run's price terms, which the built-in
    /// policies plan with (a settings file is simulated as it is).
    pub economy: serde_json::Map<String, serde_json::Value>,
}

/// A fresh instance of the policy called `name` (one per session replayed).
pub fn policy(name: &str, setup: &PolicySetup) -> Option<Box<dyn PromptSource + Send>> {
    let engine = |settings| -> Box<dyn PromptSource + Send> {
        Box::new(EnginePolicy::new(
            name,
            settings,
            setup.summaries,
            setup.context_window,
        ))
    };
    match name {
        "none" => Some(Box::new(NoPruning)),
        "reference" | "cache-aware" => Some(engine(builtin_settings(name, &setup.economy))),
        SETTINGS_POLICY => setup.settings_file.clone().map(engine),
        _ => None,
    }
}
