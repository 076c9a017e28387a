//! The engine-driven policies: `reference`, `cache-aware` and a user's
//! settings file, each a `condense_engine::drive::Driver` (the live
//! sidecar's calls, triggers and flushes) behind [`PromptSource`].
//!
//! Summaries come from the extractive summarizer, or from it padded to an
//! LLM's output size ([`SummaryModel`]); the driver counts the
//! summarizer's input and output tokens with the simulator's token model.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use condense_engine::drive::{Driver, DriverOptions};
use condense_engine::CallFacts;
use condense_store::misses::ProviderMisses;
use condense_store::session::Entry;
use condense_summarizer::{
    Completion, CompletionRequest, EventSink, Extractive, Provider, ProviderError,
};
use serde_json::{json, Value};

use super::policy::{CallInput, Finish, Prompt, PromptSource, SummarizerWork};

/// What the simulated summarizer answers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SummaryModel {
    /// The extractive summarizer (condense-summarizer's offline default).
    Extractive,
    /// An LLM's output size: the extractive bullets, lengthened to this
    /// many characters per summarized call (a fused range counts as one).
    Sized {
        /// Characters per call.
        chars_per_call: usize,
    },
}

/// The extractive answer, lengthened to an LLM's size.
struct SizedSummaries {
    chars_per_call: usize,
}

/// Filler that reads like a summary's prose (it only has to have a size).
const FILLER: &str = "the call read its inputs and reported what it found ";

#[async_trait]
impl Provider for SizedSummaries {
    async fn complete(
        &self,
        request: CompletionRequest,
        _events: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let mut text = Extractive::answer(&request.user);
        if !text.is_empty() {
            let calls = text
                .lines()
                .filter(|l| l.starts_with("- [["))
                .count()
                .max(1);
            let want = calls * self.chars_per_call;
            let have = condense_core::js_len(&text);
            if have < want {
                text.push_str("\n- notes: ");
                let mut left = want - have;
                while left > 0 {
                    let take = left.min(FILLER.len());
                    text.push_str(&FILLER[..take]);
                    left -= take;
                }
            }
        }
        Ok(Completion {
            text,
            stop_reason: condense_summarizer::StopReason::Stop,
            usage: Default::default(),
        })
    }
}

/// Settings for a built-in policy: pruning on, the policy named, planning
/// with the price terms in `economy` (its other keys).
pub fn builtin_settings(policy: &str, economy: &serde_json::Map<String, Value>) -> Value {
    let mut economy = economy.clone();
    economy.insert("policy".into(), policy.into());
    json!({"contextPrune": {"enabled": true, "economy": economy}})
}

/// Spill directories, one per simulated session, under the system's temp
/// directory; removed when the policy is done. The numbers are zero-padded
/// because the path is part of every spilled output's stub: a name whose
/// length followed the pid's digits made the same session's token counts
/// differ between runs.
fn spill_root() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "condense-simulate-{:010}-{:010}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// An engine-driven policy over one session.
pub struct EnginePolicy {
    name: String,
    settings: Value,
    summaries: SummaryModel,
    context_window: u64,
    driver: Option<Driver>,
    spill_dir: PathBuf,
    reported: condense_engine::drive::SummarizerTokens,
    miss_prior: ProviderMisses,
}

impl EnginePolicy {
    /// A policy called `name` with these settings.json contents, planning
    /// with the cache misses `miss_prior` holds of the sessions before.
    pub fn new(
        name: &str,
        settings: Value,
        summaries: SummaryModel,
        context_window: u64,
        miss_prior: ProviderMisses,
    ) -> EnginePolicy {
        EnginePolicy {
            name: name.to_owned(),
            settings,
            summaries,
            context_window,
            driver: None,
            spill_dir: spill_root(),
            reported: Default::default(),
            miss_prior,
        }
    }

    fn driver(&mut self, tokens: &dyn super::tokens::TokenCount) -> Result<&mut Driver, String> {
        if self.driver.is_none() {
            let summarizer: Arc<dyn Provider> = match self.summaries {
                SummaryModel::Extractive => Arc::new(Extractive::new()),
                SummaryModel::Sized { chars_per_call } => {
                    Arc::new(SizedSummaries { chars_per_call })
                }
            };
            self.driver = Some(Driver::new(DriverOptions {
                settings: self.settings.clone(),
                summarizer,
                tokens: tokens.text_counter(),
                session_dir: Some(self.spill_dir.clone()),
                // In memory: the corpus gives each session its prior.
                miss_prior: Some(std::mem::take(&mut self.miss_prior)),
            })?);
        }
        self.driver
            .as_mut()
            .ok_or_else(|| "the engine did not start".to_owned())
    }

    /// The summarizer's work since the last report.
    fn work_since(&mut self) -> SummarizerWork {
        let Some(driver) = &self.driver else {
            return SummarizerWork::default();
        };
        let now = driver.summarizer_tokens();
        let work = SummarizerWork {
            input: now.input - self.reported.input,
            output: now.output - self.reported.output,
        };
        self.reported = now;
        work
    }
}

impl Drop for EnginePolicy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.spill_dir);
    }
}

impl PromptSource for EnginePolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn prompt<'a>(&mut self, call: &CallInput<'a>) -> Result<Prompt<'a>, String> {
        let window = self.context_window;
        let driver = self.driver(call.tokens)?;
        driver.feed(call.new_entries, call.previous_usage, window);
        let messages = driver.context(
            call.context,
            &CallFacts {
                now_ms: call.at_ms,
                model: call.model.clone(),
                // The run's terms reach the engine as settings.
                summarizer_price: None,
            },
        );
        Ok(Prompt {
            messages: Cow::Owned(messages),
            summarizer: self.work_since(),
        })
    }

    fn end_run(&mut self, entries: &[&Entry], last_usage: Option<u64>) -> Result<bool, String> {
        let window = self.context_window;
        let Some(driver) = self.driver.as_mut() else {
            return Ok(false);
        };
        Ok(driver.end_run(entries, last_usage, window))
    }

    fn finish(
        &mut self,
        trailing_entries: &[&Entry],
        last_usage: Option<u64>,
    ) -> Result<Finish, String> {
        let Some(driver) = self.driver.as_mut() else {
            return Ok(Finish::default());
        };
        driver.finish(trailing_entries, last_usage);
        let (flushes, switches) = (driver.flushes(), driver.switches());
        // Both checks only read the finished run; a core the other policies
        // have left idle takes one (a tenth of a long session's replay).
        let driver = &*driver;
        let (unrecoverable, reload_mismatch) = rayon::join(
            || driver.unrecoverable(),
            || driver.reload_renders_the_same().err(),
        );
        Ok(Finish {
            summarizer: self.work_since(),
            unrecoverable_outputs: unrecoverable,
            flushes,
            switches,
            reload_mismatch,
            reload_checked: true,
        })
    }
}
