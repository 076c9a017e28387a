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
//! `cache-aware`, a settings file) are `engine_policy::EnginePolicy`: a
//! `condense_engine::drive::Driver` fed the entries, which makes the live
//! sidecar's calls and flushes through the engine's own driver. Which
//! policy a name means is `super::policy` (the registry, in `mod.rs`).

use std::borrow::Cow;

use condense_core::Message;
use condense_store::session::Entry;

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

    /// The agent run ended with `entries` (recorded since the previous
    /// call, through the run's last message; not passed again), the last
    /// call's tokens being `last_usage`: whether the policy asks pi to
    /// compact now, as pi's `agent_end` handlers may before its own check.
    fn end_run(&mut self, entries: &[&Entry], last_usage: Option<u64>) -> Result<bool, String> {
        let _ = (entries, last_usage);
        Ok(false)
    }

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
