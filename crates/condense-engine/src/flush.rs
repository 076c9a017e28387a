//! The flush driver: the one sequence from "these batches are pending" to
//! "these entries are appended".
//!
//! A flush is three sans-IO steps, each a type, so no caller can skip or
//! reorder one:
//!
//! 1. [`Flush`]: the plan (content-hash dedup, trivial skips, the
//!    summarization jobs). The caller runs [`Flush::jobs`].
//! 2. [`Flush::apply`] → [`Summarized`]: refs, records, frontier, stats; then
//!    [`Summarized::plan_chains`] → [`Chains`]: chain compression planned
//!    on the messages the caller holds. The caller runs
//!    [`Chains::fusion_jobs`].
//! 3. [`Chains::apply`] → [`FlushReport`]: the chains applied (spilling
//!    what a chain drops through [`Blobs`]), and everything to persist and
//!    to tell the user.
//!
//! [`run_flush`] is the one async runner: it runs the LLM calls of steps 1
//! and 2 with a [`Summarizer`], reports progress, honours cancellation, and
//! calls back into [`FlushSteps`] between them, so whoever holds the state
//! (a lock, in the pi sidecar) holds it only for a step, never while the
//! LLM runs. Callers without an LLM (the session generator) drive the
//! steps themselves with stand-in results.

use condense_core::CapturedBatch;
use condense_core::Config;
use condense_core::ContextMetrics;
use condense_core::Diagnostic;
use condense_core::Message;
use condense_core::OccurrenceKey;
use condense_core::Protection;
use condense_core::TriggerKind;
use condense_core::{apply_chains, plan_chains, ChainPlan, FusionJob};
use condense_core::{
    apply_flush, apply_spill, plan_flush, plan_spill, FlushEffect, FlushOutcome, FlushPlan,
    JobResult, Notice, PlannedBatch, SummaryJob, WrittenSpill,
};
use condense_core::{Branch, State};
use condense_core::{ChainEntry, Frontier};
use condense_store::entries::{FlushMetrics, FlushMetricsEntryData};
use condense_summarizer::{CancelToken, ProgressEvent, RunOptions, Summarizer};
use serde_json::Map;

/// Where spilled outputs go: a blob directory, memory, or nowhere (a dry run).
pub trait Blobs {
    /// Writes `text` as the blob of `key`; `call` is the position the
    /// caller gives the written spill.
    fn write(
        &mut self,
        key: &OccurrenceKey,
        text: &str,
        call: usize,
    ) -> Result<WrittenSpill, String>;
}

/// Blobs written in a session's blob directory (none without one).
pub struct BlobDir<'a>(pub Option<&'a std::path::Path>);

impl Blobs for BlobDir<'_> {
    fn write(
        &mut self,
        key: &OccurrenceKey,
        text: &str,
        call: usize,
    ) -> Result<WrittenSpill, String> {
        let dir = self.0.ok_or_else(|| "no blob directory".to_owned())?;
        condense_store::spill::write_blob(dir, key, text)
            .map(|b| b.to_spill(call))
            .map_err(|e| e.to_string())
    }
}

/// What [`spill_batch`] did.
#[derive(Debug)]
pub struct SpilledBatch {
    /// The entries (index records of the spilled outputs, dedup aliases).
    pub effects: Vec<FlushEffect>,
    /// What is left of the batch to summarize.
    pub rest: CapturedBatch,
    /// Outputs spilled.
    pub spilled: usize,
    /// Duplicates registered.
    pub aliases: usize,
    /// Writes that failed (those outputs stay inline).
    pub failures: Vec<String>,
}

/// Spills a captured batch's oversized outputs (blob first, record after:
/// a failed write leaves the output inline for the next flush) and
/// registers duplicates.
pub fn spill_batch(
    batch: CapturedBatch,
    state: &mut State,
    config: &Config,
    blobs: &mut dyn Blobs,
) -> SpilledBatch {
    let plan = plan_spill(&batch, state, config);
    if plan.spill.is_empty() && plan.aliases.is_empty() {
        return SpilledBatch {
            effects: Vec::new(),
            rest: batch,
            spilled: 0,
            aliases: 0,
            failures: Vec::new(),
        };
    }
    let mut written = Vec::new();
    let mut failures = Vec::new();
    for &i in &plan.spill {
        let Some(c) = batch.calls.get(i) else {
            continue;
        };
        match blobs.write(&c.key(), &c.result_text.to_str(), i) {
            Ok(w) => written.push(w),
            Err(e) => failures.push(format!(
                "spill of {} failed ({e}); it stays inline",
                c.tool_call_id
            )),
        }
    }
    let (effects, rest) = apply_spill(batch, &plan, &written, state, config);
    SpilledBatch {
        effects,
        rest,
        spilled: written.len(),
        aliases: plan.aliases.len(),
        failures,
    }
}

/// When chain compression follows the batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainPolicy {
    /// Never.
    Never,
    /// When the flush had batches, keeping the last `window` closed chains
    /// raw (a live flush with `chainCompression.enabled`).
    AfterBatches(u32),
    /// Always, keeping the last `window` closed chains raw (`/pruner
    /// compact`, `condense compact`).
    Always(u32),
}

/// Step 1: a planned flush.
#[derive(Debug)]
pub struct Flush {
    plan: Option<FlushPlan>,
    captured: usize,
    chains: ChainPolicy,
    trigger: Option<TriggerKind>,
    metrics: ContextMetrics,
    closing: Option<Message>,
}

impl Flush {
    /// Plans the flush of `batches` (captured, trimmed and grouped).
    /// `trigger` and `metrics` go into the flush-metrics entry; `closing`
    /// is the reply an `agent-message` flush runs before pi persists it.
    pub fn plan(
        batches: Vec<CapturedBatch>,
        state: &State,
        config: &Config,
        chains: ChainPolicy,
        trigger: Option<TriggerKind>,
        metrics: ContextMetrics,
        closing: Option<Message>,
    ) -> Flush {
        Flush {
            captured: batches.len(),
            plan: Some(plan_flush(batches, state, config)),
            chains,
            trigger,
            metrics,
            closing,
        }
    }

    /// Chain compression only (no batches), keeping `window` chains raw.
    pub fn chains_only(window: u32) -> Flush {
        Flush {
            plan: None,
            captured: 0,
            chains: ChainPolicy::Always(window),
            trigger: None,
            metrics: ContextMetrics::default(),
            closing: None,
        }
    }

    /// The summarization jobs to run, in order.
    pub fn jobs(&self) -> &[SummaryJob] {
        self.plan.as_ref().map_or(&[], |p| &p.jobs)
    }

    /// The planned batches.
    pub fn batches(&self) -> &[PlannedBatch] {
        self.plan.as_ref().map_or(&[], |p| &p.batches)
    }

    /// Duplicates the plan registers.
    pub fn aliases(&self) -> usize {
        self.plan.as_ref().map_or(0, |p| p.aliases.len())
    }

    /// Whether it has no batches.
    pub fn is_empty(&self) -> bool {
        self.plan.as_ref().is_none_or(FlushPlan::is_empty)
    }

    /// What started it (`None`: a chains-only flush).
    pub fn trigger(&self) -> Option<TriggerKind> {
        self.trigger
    }

    /// Applies the summarizer's results (one per job, in order).
    pub fn apply(self, results: Vec<JobResult>, state: &mut State, config: &Config) -> Summarized {
        let had_batches = !self.is_empty();
        let mut report = FlushReport {
            trigger: self.trigger,
            metrics: self.metrics,
            captured: self.captured,
            failure: failure_of(&results),
            ..FlushReport::default()
        };
        if let Some(plan) = self.plan {
            let r = apply_flush(plan, results, state, config);
            report.outcome = match &r.outcome {
                FlushOutcome::Empty => "empty".to_owned(),
                FlushOutcome::Processed(o) => o.as_str().to_owned(),
                // pi-condense records a failed flush as `error`; the
                // message is in the notices and in `failure`.
                FlushOutcome::SummarizerFailed(_) => "error".to_owned(),
            };
            report.processed = r.processed_batches;
            report.summarized_batches = r.summarized_batches;
            report.summarized_calls = r.summarized_calls;
            report.restored = r.restored;
            report.flush_notices = r.notices;
            report.flush_effects = r.effects;
        }
        let window = match self.chains {
            ChainPolicy::Never => None,
            ChainPolicy::AfterBatches(w) => had_batches.then_some(w),
            ChainPolicy::Always(w) => Some(w),
        };
        Summarized {
            report,
            window,
            closing: self.closing,
        }
    }
}

/// The first failure among a run's results, for the user.
fn failure_of(results: &[JobResult]) -> Option<String> {
    results.iter().find_map(|r| match r {
        JobResult::Failed { message, .. } => Some(message.clone()),
        JobResult::Unusable { .. } => Some("summary was empty or truncated".to_owned()),
        _ => None,
    })
}

/// Step 2: the batches applied; chain compression not yet planned.
#[derive(Debug)]
pub struct Summarized {
    report: FlushReport,
    window: Option<u32>,
    closing: Option<Message>,
}

impl Summarized {
    /// The entries the batches produced so far.
    pub fn effects(&self) -> &[FlushEffect] {
        &self.report.flush_effects
    }

    /// Plans chain compression on `messages` (the branch as the caller
    /// holds it).
    pub fn plan_chains(
        self,
        messages: &[Message],
        state: &Branch,
        config: &Config,
        protection: &Protection,
    ) -> Chains {
        let plan = match self.window {
            Some(window) => plan_chains(
                messages,
                self.closing.as_ref(),
                state,
                config,
                protection,
                window,
            ),
            None => ChainPlan::default(),
        };
        Chains {
            plan,
            report: self.report,
        }
    }
}

/// Step 3: chain compression planned.
#[derive(Debug)]
pub struct Chains {
    plan: ChainPlan,
    report: FlushReport,
}

impl Chains {
    /// The range-fusion jobs to run, in order.
    pub fn fusion_jobs(&self) -> &[FusionJob] {
        &self.plan.fusion_jobs
    }

    /// Takes the batches that go back to pending (a failure stopped the
    /// flush there).
    pub fn take_restored(&mut self) -> Vec<CapturedBatch> {
        std::mem::take(&mut self.report.restored)
    }

    /// Whether there is no chain to compress.
    pub fn is_empty(&self) -> bool {
        self.plan.work.is_empty()
    }

    /// Applies the fusion results (one per job, in order), spilling what a
    /// chain drops through `blobs`, and returns the whole flush's report.
    pub fn apply(
        self,
        fusion: Vec<JobResult>,
        blobs: &mut dyn Blobs,
        state: &mut State,
        config: &Config,
        now: i64,
    ) -> FlushReport {
        let mut report = self.report;
        report.skipped_chains = self.plan.skipped;
        let spills: Vec<(usize, usize, WrittenSpill)> = self
            .plan
            .spills(config)
            .into_iter()
            .filter_map(|(w, r, rec)| {
                blobs
                    .write(&rec.key(), &rec.result_text.to_str(), r)
                    .ok()
                    .map(|s| (w, r, s))
            })
            .collect();
        let r = apply_chains(self.plan, fusion, &spills, state, config, now);
        report.chain_effects = r.effects;
        report.chain_notices = r.notices;
        report.diagnostics = r.diagnostics;
        report.compressed = r.compressed;
        report.ended = now;
        report
    }
}

/// What a flush did, and what to persist and say.
#[derive(Debug, Default)]
pub struct FlushReport {
    /// What started it (`None`: chains only).
    pub trigger: Option<TriggerKind>,
    /// Context metrics when it started.
    pub metrics: ContextMetrics,
    /// Batches captured.
    pub captured: usize,
    /// Batches processed (summarized or skipped).
    pub processed: usize,
    /// Batches summarized.
    pub summarized_batches: usize,
    /// Tool calls summarized.
    pub summarized_calls: usize,
    /// A frontier outcome, `empty`, or `error` (pi-condense's flush-metrics
    /// outcomes).
    pub outcome: String,
    /// The first summarizer failure, if any.
    pub failure: Option<String>,
    /// Batches that go back to pending.
    pub restored: Vec<CapturedBatch>,
    /// The batches' entries, in order.
    pub flush_effects: Vec<FlushEffect>,
    /// What applying the batches says.
    pub flush_notices: Vec<Notice>,
    /// The chains' entries, in order.
    pub chain_effects: Vec<FlushEffect>,
    /// What applying the chains says.
    pub chain_notices: Vec<Notice>,
    /// Chain compression's diagnostics.
    pub diagnostics: Vec<Diagnostic>,
    /// The chains compressed.
    pub compressed: Vec<ChainEntry>,
    /// Closed chains not compressed for want of per-batch summaries.
    pub skipped_chains: usize,
    /// When the flush ended (ms).
    pub ended: i64,
}

impl FlushReport {
    /// Every entry, batches' then chains'.
    pub fn effects(&self) -> impl Iterator<Item = &FlushEffect> {
        self.flush_effects.iter().chain(&self.chain_effects)
    }

    /// The frontier this flush wrote, if any.
    pub fn frontier(&self) -> Option<&Frontier> {
        self.flush_effects.iter().find_map(|e| match e {
            FlushEffect::Frontier(f) => Some(f),
            _ => None,
        })
    }

    /// The `context-prune-flush-metrics` payload, for a flush with a
    /// trigger (chains-only flushes write none, as pi-condense's compact).
    pub fn metrics_entry(&self) -> Option<FlushMetricsEntryData> {
        let trigger = self.trigger?;
        Some(FlushMetricsEntryData {
            ts: self.ended,
            trigger: trigger.as_str().to_owned(),
            captured_batches: self.captured as u64,
            processed_batches: self.processed as u64,
            outcome: self.outcome.clone(),
            metrics: FlushMetrics {
                open_cycle_thinking_tokens: self.metrics.open_cycle_thinking_tokens,
                largest_chain_share_pct: self.metrics.largest_chain_share_pct as f64,
                frontier_gap_tokens: self.metrics.frontier_gap_tokens,
                extra: Map::new(),
            },
            extra: Map::new(),
        })
    }
}

/// Whoever holds the state a flush changes. Each call is one short step;
/// [`run_flush`] awaits the LLM between calls, holding nothing.
pub trait FlushSteps {
    /// What the last step returns.
    type Done;
    /// Step 2: apply the batches' results and plan chain compression.
    fn apply_summaries(&self, flush: Flush, results: Vec<JobResult>) -> Chains;
    /// Step 3: apply the fusion results; the flush's result.
    fn apply_chains(&self, chains: Chains, fusion: Vec<JobResult>, now: i64) -> Self::Done;
    /// The flush was cancelled before step 2 or 3: nothing is persisted.
    fn abandon(&self);
}

/// Why a flush ended without a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

/// Runs a planned flush to the end: the batches' jobs (with `progress`),
/// step 2, the fusion jobs, step 3. Returns the summarizer's notices (in
/// the order they happened) and the last step's result, or [`Cancelled`]
/// if `cancel` fired (after [`FlushSteps::abandon`]).
pub async fn run_flush<S: FlushSteps + ?Sized>(
    steps: &S,
    flush: Flush,
    summarizer: &Summarizer,
    options: RunOptions,
    cancel: &CancelToken,
    progress: &mut (dyn FnMut(ProgressEvent) + Send),
    clock: &(dyn Fn() -> i64 + Sync),
) -> Result<(Vec<Notice>, S::Done), Cancelled> {
    let mut notices = Vec::new();
    let results = if flush.jobs().is_empty() {
        Vec::new()
    } else {
        let report = summarizer
            .run_jobs(flush.jobs(), options, cancel, progress)
            .await;
        notices.extend(report.notices.iter().cloned());
        report.results
    };
    if cancel.is_cancelled() {
        steps.abandon();
        return Err(Cancelled);
    }
    let chains = steps.apply_summaries(flush, results);
    let mut fusion = Vec::new();
    for job in chains.fusion_jobs() {
        let outcome = summarizer.summarize_range(&job.summaries, cancel).await;
        notices.extend(outcome.notices.iter().cloned());
        fusion.push(outcome.result);
    }
    if cancel.is_cancelled() {
        steps.abandon();
        return Err(Cancelled);
    }
    Ok((notices, steps.apply_chains(chains, fusion, clock())))
}
