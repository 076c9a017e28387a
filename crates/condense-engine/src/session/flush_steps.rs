//! The engine's side of a flush: planning it, applying the summarizer's
//! and the chain fusion's results, and the lock the driver steps through.

use std::sync::MutexGuard;

use condense_core::{FlushEffect, JobResult, Message, TriggerKind};
use condense_store::effects::{entry_for, flush_metrics_entry, switch_entry, NewEntry};
use condense_summarizer::prompt::{batch_user_message, range_user_message};

use super::{entries, notices, Engine, ReplyFlush};
use crate::flush::{BlobDir, ChainPolicy, Chains, Flush, FlushReport, FlushSteps};
use crate::protocol::{Delivery, Effect, Effects};

/// A flush's result: what the host carries out, and the report.
#[derive(Debug)]
pub struct FlushDone {
    /// Entries, notices, metrics, cost and footer, in order.
    pub effects: Effects,
    /// What the flush did.
    pub report: FlushReport,
}

/// Something that holds an [`Engine`] behind a lock.
pub trait EngineLock: Sync {
    /// The engine (never held across an `.await`).
    fn engine(&self) -> MutexGuard<'_, Engine>;
}

impl EngineLock for std::sync::Mutex<Engine> {
    fn engine(&self) -> MutexGuard<'_, Engine> {
        // A panic elsewhere must not take the session down with it: the
        // engine's state is consistent between steps, so a poisoned lock
        // is taken over.
        self.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The engine behind its lock, as the flush driver's steps, delivering
/// entries with `delivery`.
pub struct EngineFlush<'a, L: EngineLock + ?Sized> {
    /// The engine's lock.
    pub lock: &'a L,
    /// How the flush's entries are delivered.
    pub delivery: Delivery,
}

impl<L: EngineLock + ?Sized> FlushSteps for EngineFlush<'_, L> {
    type Done = FlushDone;

    fn apply_summaries(&self, flush: Flush, results: Vec<JobResult>) -> Chains {
        self.lock.engine().finish_summaries(flush, results)
    }

    fn apply_chains(&self, chains: Chains, fusion: Vec<JobResult>, now: i64) -> FlushDone {
        self.lock
            .engine()
            .finish_chains(chains, fusion, self.delivery, now)
    }

    fn abandon(&self) {
        self.lock.engine().abandon_flush();
    }
}

impl Engine {
    /// Plans a flush; `None` if one is already running. An empty capture
    /// still yields a plan (its metrics entry records `empty`). The engine
    /// counts as flushing until [`Engine::finish_chains`] or
    /// [`Engine::abandon_flush`].
    pub fn begin_flush(
        &mut self,
        trigger: TriggerKind,
        closing: Option<Message>,
        now: i64,
    ) -> Option<Flush> {
        if self.flushing {
            return None;
        }
        self.rearmed = false;
        self.reply_flush = ReplyFlush::None;
        self.refresh_metrics();
        let unsent_from = self.unsent_from.take();
        let sent = unsent_from.map_or(self.messages.len(), |n| n.min(self.messages.len()));
        let mut batches = self.capture_sent(now, sent);
        let newest_run_from = self.flush_from_turn.take();
        if let Some(from) = newest_run_from {
            batches.retain(|b| b.turn_index >= from);
        }
        let batches = if std::mem::take(&mut self.merge_runs) {
            crate::switch::merged_by_run(batches, &self.config)
        } else {
            batches
        };
        if unsent_from.is_some() {
            // The turn a long run's flush left out stays queued for the next.
            let first_unsent = self.turns_before + crate::turns::assistants(&self.messages[..sent]);
            self.pending.retain(|b| b.turn_index >= first_unsent);
        } else {
            self.pending.clear();
        }
        self.flushing = true;
        self.user_flush = trigger == TriggerKind::Manual;
        // The newest run's flush is paid for a switch that rewrites the end
        // of the prompt (`Engine::flush_affordable`): closed chains
        // compressed with it move that switch's first change back to the
        // oldest of them, a rewrite the bound did not price. Where the
        // session's pauses have outlived the cache, a cold call shows them
        // free; where none has, the switch would wait for that rewrite
        // while the summaries sit beside their outputs.
        let chains_shown = newest_run_from.is_none()
            || crate::switch::seen_idle_expiry(&self.messages, &self.config);
        let chains = if self.config.chain_compression.enabled && chains_shown {
            ChainPolicy::AfterBatches(self.config.chain_compression.rolling_window)
        } else {
            ChainPolicy::Never
        };
        Some(Flush::plan(
            batches,
            &self.state,
            &self.config,
            chains,
            Some(trigger),
            self.metrics,
            closing,
        ))
    }

    /// Plans `/pruner compact`: every eligible closed chain (K = 0), whether
    /// or not `chainCompression.enabled`. `None` while a flush runs.
    pub fn begin_compact(&mut self) -> Option<Flush> {
        if self.flushing {
            return None;
        }
        self.flushing = true;
        self.user_flush = true;
        Some(Flush::chains_only(0))
    }

    /// Flush step 2: applies the summarizer's results and plans chain
    /// compression on the messages the engine holds.
    pub fn finish_summaries(&mut self, flush: Flush, results: Vec<JobResult>) -> Chains {
        let prompts = flush.jobs().iter().map(|j| {
            (
                batch_user_message(&j.batch),
                Some(j.batch.calls.len() as u64),
            )
        });
        self.summarizer_spent(prompts, &results);
        // The flush's records must count as added after the start switch.
        if self.gating_started.is_none() {
            self.gating_started = self.start_gating(None);
        }
        let mut chains = flush
            .apply(results, &mut self.state, &self.config)
            .plan_chains(&self.messages, &self.state, &self.config, &self.protection);
        self.pending.extend(chains.take_restored());
        chains
    }

    /// The summarizer's work, spent from the cache-aware policy's bound
    /// against no pruning: each job's prompt (`jobs`, in the jobs' order,
    /// with the tool calls a batch's summary covers) whose call was billed,
    /// by its result, and the summary it wrote at the output price. The
    /// prompt is counted as the bound counts the main prompts, not as the
    /// provider reports it: the headroom it is paid from is in those
    /// tokens. A batch's summary also sizes the next flush's estimate.
    fn summarizer_spent(
        &mut self,
        jobs: impl Iterator<Item = (String, Option<u64>)>,
        results: &[JobResult],
    ) {
        let profile = self.calls.profile(&self.config);
        let mut units = 0.0;
        for ((prompt, calls), result) in jobs.zip(results) {
            let output = match result {
                JobResult::Summary { text, .. } => {
                    let tokens = condense_core::chars_to_tokens(condense_core::js_len(text));
                    if let Some(calls) = calls {
                        self.calls.summary_written(calls, tokens);
                    }
                    tokens
                }
                JobResult::Unusable { usage: Some(u) }
                | JobResult::Failed { usage: Some(u), .. } => u.output_tokens,
                JobResult::Unusable { usage: None }
                | JobResult::Failed { usage: None, .. }
                | JobResult::NotRun => continue,
            };
            units += crate::switch::summarizer_bound_tokens(&prompt) as f64
                + output as f64 * profile.output;
        }
        self.calls.summarized(units * profile.summarizer);
    }

    /// Flush step 3: applies chain compression and returns every effect of
    /// the flush, entries delivered with `delivery`. A flush with a trigger
    /// ends with its metrics entry and the cost; a chains-only flush
    /// (compact) reports the cost only when it compressed something, and
    /// leaves its notices to the caller (in the report).
    pub fn finish_chains(
        &mut self,
        chains: Chains,
        fusion: Vec<JobResult>,
        delivery: Delivery,
        now: i64,
    ) -> FlushDone {
        let prompts = chains
            .fusion_jobs()
            .iter()
            .map(|j| (range_user_message(&j.summaries), None));
        self.summarizer_spent(prompts, &fusion);
        let started = self.start_to_persist(Some(now));
        let mut blobs = BlobDir(self.blob_dir.as_deref());
        let report = chains.apply(fusion, &mut blobs, &mut self.state, &self.config, now);
        let mut out = Effects::new();
        if let Some(mut start) = started {
            start.ts.get_or_insert(now);
            out.push(Effect::entry(switch_entry(&start), delivery));
        }
        let live = report.trigger.is_some();
        entries(&mut out, &report.flush_effects, delivery);
        self.inject_summaries(&report.flush_effects, now);
        if live {
            notices(&mut out, &report.flush_notices);
        }
        entries(&mut out, &report.chain_effects, delivery);
        self.report_diagnostics(&report.diagnostics, &mut out);
        if live {
            notices(&mut out, &report.chain_notices);
        }
        if let Some(data) = report.metrics_entry() {
            out.push(Effect::entry(flush_metrics_entry(&data), delivery));
        }
        if live || !report.compressed.is_empty() {
            out.push(self.cost_effect());
        }
        self.flushing = false;
        self.user_asked |= std::mem::take(&mut self.user_flush);
        self.refresh_metrics();
        out.push(self.footer());
        FlushDone {
            effects: out,
            report,
        }
    }

    /// The summaries a flush writes join the engine's context now, after
    /// the messages it holds (at a reply, before the reply, which pi
    /// persists after `message_end`): the host's list lacks them until it
    /// rebuilds from the file, or, delivered at runtime, until its next
    /// `context` (pi's agent takes them at once; OpenCode's list never).
    fn inject_summaries(&mut self, effects: &[FlushEffect], now: i64) {
        for effect in effects {
            if let NewEntry::CustomMessage {
                custom_type,
                content,
                display,
                details,
            } = entry_for(effect)
            {
                let message = condense_store::context::custom_message(
                    custom_type,
                    &content,
                    display,
                    &details,
                    now,
                );
                if let Some(m) = message {
                    self.injected
                        .push(&mut self.messages, &mut self.entry_ts, m);
                }
            }
        }
    }

    /// Marks an abandoned flush (no entries were returned for it): its
    /// batches will be captured again by the next flush's rescan.
    pub fn abandon_flush(&mut self) {
        self.flushing = false;
        self.user_flush = false;
    }
}
