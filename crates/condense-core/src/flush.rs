//! Flush planning: from pending batches to the entries a flush appends,
//! with the LLM call left outside.
//!
//! [`plan_flush`] runs everything decided without an LLM (content-hash
//! dedup, the trivial-batch skip) and returns the summarization jobs;
//! a summarizer runs them; [`apply_flush`] takes their results in order and
//! returns the [`FlushEffect`]s to persist (summaries, index records, the
//! frontier, stats) while updating the [`State`]. The first job that fails
//! stops the loop: that batch and every later one go back to pending.

use crate::capture::CapturedBatch;
use crate::config::Config;
use crate::dedup::content_hash;
use crate::js::js_len;
use crate::notice::{Notice, NoticeLevel};
use crate::occurrence::OccurrenceKey;
use crate::records::{
    ChainEntry, Frontier, FrontierOutcome, SummarizerStats, SummaryRef, ToolCallRecord,
};
use crate::refs::{refs_footer, substitute_inline_refs};
use crate::state::State;
use crate::text::SharedText;

/// Token usage and cost of one summarizer call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost in dollars.
    pub cost: f64,
}

impl SummarizerStats {
    /// Adds one call's usage.
    pub fn add_usage(&mut self, u: &Usage) {
        self.total_input_tokens += u.input_tokens;
        self.total_output_tokens += u.output_tokens;
        self.total_cost += u.cost;
        self.call_count += 1;
    }
}

/// What a summarizer made of a job.
#[derive(Debug, Clone, PartialEq)]
pub enum JobResult {
    /// A usable summary.
    Summary {
        /// The model's text.
        text: String,
        /// What the call cost.
        usage: Usage,
    },
    /// Empty, whitespace-only or truncated (`length`) text: a soft failure.
    Unusable {
        /// What the call cost, if it completed.
        usage: Option<Usage>,
    },
    /// The call failed (error, timeout, abort).
    Failed {
        /// Why.
        message: String,
        /// What the call cost, if anything was reported.
        usage: Option<Usage>,
    },
    /// Not attempted (an earlier job failed, or the flush was cancelled).
    NotRun,
}

/// A batch the summarizer must summarize.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryJob {
    /// The batch (duplicates already removed).
    pub batch: CapturedBatch,
}

/// Something a flush or a chain compression asks the host to persist, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum FlushEffect {
    /// A duplicate of an indexed output (`context-prune-dedup-alias`).
    DedupAlias {
        /// The duplicate.
        new: OccurrenceKey,
        /// The indexed original.
        original: OccurrenceKey,
    },
    /// A per-batch summary (a hidden `context-prune-summary` custom message).
    Summary {
        /// The summary text with its refs footer.
        content: String,
        /// Its refs.
        refs: Vec<SummaryRef>,
        /// Tool names of the batch's calls.
        tool_names: Vec<String>,
        /// The batch's turn index.
        turn_index: i64,
        /// The batch's timestamp.
        timestamp: i64,
    },
    /// Indexed records (`context-prune-index`).
    Index {
        /// The records.
        records: Vec<ToolCallRecord>,
        /// Backfilled at chain compression (never dedup canonicals).
        backfilled: bool,
        /// Refs of backfilled records.
        refs: Option<Vec<SummaryRef>>,
    },
    /// A compressed chain (`context-prune-chain`).
    Chain(ChainEntry),
    /// The new frontier (`context-prune-frontier`).
    Frontier(Frontier),
    /// The cumulative stats snapshot (`context-prune-stats`).
    Stats(SummarizerStats),
}

/// How a batch is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Every call duplicated an indexed output.
    Deduped,
    /// Fewer raw chars than `minBatchChars`: no LLM call.
    Trivial,
    /// Summarized by job `n`.
    Summarize(usize),
}

/// One batch of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedBatch {
    /// The batch as captured.
    pub captured: CapturedBatch,
    /// What remains after dedup.
    pub remaining: CapturedBatch,
    /// How it is handled.
    pub slot: Slot,
}

/// Everything a flush decides before any LLM call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlushPlan {
    /// The batches in order.
    pub batches: Vec<PlannedBatch>,
    /// The summarization jobs, in batch order.
    pub jobs: Vec<SummaryJob>,
    /// Duplicates found (`new`, `original`), registered when applied.
    pub aliases: Vec<(OccurrenceKey, OccurrenceKey)>,
    /// Outputs a summary on the branch already covers but no index record
    /// does (a flush stopped between its summary and its index entry):
    /// indexed when applied, never summarized again.
    pub adopted: Vec<CapturedBatch>,
}

impl FlushPlan {
    /// True when there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }
}

/// Whether a flush keeps `batch` raw rather than summarize it: its outputs
/// are under `minBatchChars`, too small for a summary to save what the
/// summarizer's call costs. Estimates of a flush call this so that they
/// charge only what the flush summarizes.
pub fn kept_raw(batch: &CapturedBatch, config: &Config) -> bool {
    kept_raw_chars(batch.raw_chars(), config)
}

/// [`kept_raw`] of a batch whose outputs hold `raw_chars` UTF-16 units
/// ([`CapturedBatch::raw_chars`]), such as batches merged by
/// [`merge_runs`](crate::merge_runs), whose outputs add up.
pub fn kept_raw_chars(raw_chars: usize, config: &Config) -> bool {
    config.min_batch_chars > 0 && (raw_chars as u64) < config.min_batch_chars
}

/// Plans a flush of `batches` (already captured, trimmed and grouped).
pub fn plan_flush(batches: Vec<CapturedBatch>, state: &State, config: &Config) -> FlushPlan {
    let mut plan = FlushPlan::default();
    for captured in batches {
        let mut remaining = captured.clone();
        let mut adopted = Vec::new();
        remaining.calls.retain(|c| {
            let orphaned = !state.is_summarized(&c.tool_call_id, c.result_timestamp)
                && state
                    .short_ref(&c.tool_call_id, c.result_timestamp)
                    .is_some();
            if orphaned {
                adopted.push(c.clone());
            }
            !orphaned
        });
        if !adopted.is_empty() {
            plan.adopted.push(CapturedBatch {
                calls: adopted,
                ..captured.clone()
            });
        }
        if config.dedup_by_content_hash {
            remaining.calls.retain(|c| {
                let key = c.key();
                match state.lookup_by_hash(&content_hash(&c.tool_name, &c.result_text.to_str())) {
                    Some(orig) if *orig != key => {
                        plan.aliases.push((key, orig.clone()));
                        false
                    }
                    _ => true,
                }
            });
        }
        let slot = if remaining.calls.is_empty() {
            Slot::Deduped
        } else if kept_raw(&remaining, config) {
            Slot::Trivial
        } else {
            plan.jobs.push(SummaryJob {
                batch: remaining.clone(),
            });
            Slot::Summarize(plan.jobs.len() - 1)
        };
        plan.batches.push(PlannedBatch {
            captured,
            remaining,
            slot,
        });
    }
    plan
}

/// How a flush ended.
#[derive(Debug, Clone, PartialEq)]
pub enum FlushOutcome {
    /// Nothing was captured.
    Empty,
    /// At least one batch was processed; the frontier's outcome.
    Processed(FrontierOutcome),
    /// No batch could be processed (the first summary failed).
    SummarizerFailed(String),
}

/// What applying a flush produced.
#[derive(Debug, Clone, PartialEq)]
pub struct FlushResult {
    /// Entries to append, in order.
    pub effects: Vec<FlushEffect>,
    /// How it ended.
    pub outcome: FlushOutcome,
    /// Batches that go back to pending (a failure stopped the loop there).
    pub restored: Vec<CapturedBatch>,
    /// Batches processed (summarized or skipped).
    pub processed_batches: usize,
    /// Tool calls summarized.
    pub summarized_calls: usize,
    /// Batches summarized.
    pub summarized_batches: usize,
    /// Chars of the summaries the summarizer returned (oversized ones included).
    pub summary_chars: usize,
    /// Raw chars of the summarized batches.
    pub summarized_raw_chars: usize,
    /// What to tell the user.
    pub notices: Vec<Notice>,
}

/// The index records of a summarized batch's calls.
fn records_of(batch: &CapturedBatch) -> Vec<ToolCallRecord> {
    batch
        .calls
        .iter()
        .map(|c| c.record(batch.turn_index, batch.timestamp))
        .collect()
}

/// `1 tool call`, `2 tool calls`.
fn tool_calls(n: usize) -> String {
    if n == 1 {
        "1 tool call".to_owned()
    } else {
        format!("{n} tool calls")
    }
}

fn skip_notice(config: &Config, text: String, out: &mut Vec<Notice>) {
    if !config.quiet_oversized_skips {
        out.push(Notice {
            level: NoticeLevel::Info,
            text,
        });
    }
}

/// Applies a plan with the summarizer's results (one per job, in order).
/// Updates `state` (aliases, refs, records, summary bodies, frontier, stats)
/// and returns what to persist.
pub fn apply_flush(
    plan: FlushPlan,
    results: Vec<JobResult>,
    state: &mut State,
    config: &Config,
) -> FlushResult {
    let mut r = FlushResult {
        effects: Vec::new(),
        outcome: FlushOutcome::Empty,
        restored: Vec::new(),
        processed_batches: 0,
        summarized_calls: 0,
        summarized_batches: 0,
        summary_chars: 0,
        summarized_raw_chars: 0,
        notices: Vec::new(),
    };
    if plan.is_empty() {
        return r;
    }
    for (new, original) in &plan.aliases {
        state.register_dedup_alias(new, original);
        r.effects.push(FlushEffect::DedupAlias {
            new: new.clone(),
            original: original.clone(),
        });
    }
    for batch in &plan.adopted {
        let records = records_of(batch);
        for rec in &records {
            state.add_record(rec.clone(), true);
        }
        r.effects.push(FlushEffect::Index {
            records,
            backfilled: false,
            refs: None,
        });
    }
    let mut results: Vec<Option<JobResult>> = results.into_iter().map(Some).collect();
    let mut processed: Vec<(&PlannedBatch, FrontierOutcome)> = Vec::new();
    let mut failure: Option<String> = None;
    let mut stats_changed = false;

    for (i, pb) in plan.batches.iter().enumerate() {
        let raw = pb.remaining.raw_chars();
        match pb.slot {
            Slot::Deduped => {
                skip_notice(
                    config,
                    format!(
                        "pruner: deduplicated {} (turn {}, {} raw chars) against earlier prunes; no LLM call made; frontier advanced past this range",
                        tool_calls(pb.captured.calls.len()),
                        pb.captured.turn_index,
                        pb.captured.raw_chars()
                    ),
                    &mut r.notices,
                );
                processed.push((pb, FrontierOutcome::SkippedDeduped));
            }
            Slot::Trivial => {
                skip_notice(
                    config,
                    format!(
                        "pruner: skipped pruning turn {} ({}) — only {} raw chars (< minBatchChars={}); no LLM call made; frontier advanced past this range",
                        pb.remaining.turn_index,
                        tool_calls(pb.remaining.calls.len()),
                        raw,
                        config.min_batch_chars
                    ),
                    &mut r.notices,
                );
                processed.push((pb, FrontierOutcome::SkippedTrivial));
            }
            Slot::Summarize(j) => {
                let result = results
                    .get_mut(j)
                    .and_then(Option::take)
                    .unwrap_or(JobResult::NotRun);
                let (text, usage) = match result {
                    JobResult::Summary { text, usage } => (text, usage),
                    other => {
                        let usage = match &other {
                            JobResult::Unusable { usage } | JobResult::Failed { usage, .. } => {
                                *usage
                            }
                            _ => None,
                        };
                        if let Some(u) = usage {
                            state.stats_mut().add_usage(&u);
                            stats_changed = true;
                        }
                        failure = Some(match other {
                            JobResult::Failed { message, .. } => message,
                            JobResult::Unusable { .. } => {
                                "summary was empty or truncated".to_owned()
                            }
                            _ => "not run".to_owned(),
                        });
                        r.restored = plan.batches[i..]
                            .iter()
                            .map(|b| b.captured.clone())
                            .collect();
                        break;
                    }
                };
                state.stats_mut().add_usage(&usage);
                stats_changed = true;
                let batch = &pb.remaining;
                let keys: Vec<OccurrenceKey> = batch.calls.iter().map(|c| c.key()).collect();
                let names: Vec<String> = batch.calls.iter().map(|c| c.tool_name.clone()).collect();
                // Refs are allocated before the oversized check: a skipped
                // batch burns its numbers, as in pi-condense.
                let refs = state.allocate_short_refs(&keys);
                let content = substitute_inline_refs(&text, &refs, &names) + &refs_footer(&refs);
                // pi-condense counts every summary it got, skipped or not.
                r.summary_chars += js_len(&content);
                if js_len(&content) > raw {
                    skip_notice(
                        config,
                        format!(
                            "pruner: skipped pruning turn {} ({}) — summary was {} chars vs {} raw chars; frontier advanced past this range",
                            batch.turn_index,
                            tool_calls(batch.calls.len()),
                            js_len(&text),
                            raw
                        ),
                        &mut r.notices,
                    );
                    processed.push((pb, FrontierOutcome::SkippedOversized));
                    continue;
                }
                let records = records_of(batch);
                r.effects.push(FlushEffect::Summary {
                    content: content.clone(),
                    refs: refs.clone(),
                    tool_names: names,
                    turn_index: batch.turn_index,
                    timestamp: batch.timestamp,
                });
                state.register_summary_refs(&refs);
                for rec in &records {
                    state.add_record(rec.clone(), true);
                }
                r.effects.push(FlushEffect::Index {
                    records,
                    backfilled: false,
                    refs: None,
                });
                r.summarized_raw_chars += raw;
                r.summarized_calls += batch.calls.len();
                r.summarized_batches += 1;
                state.register_summary_body(keys, content);
                let deduped = pb.captured.calls.len() - batch.calls.len();
                if deduped > 0 {
                    skip_notice(
                        config,
                        format!(
                            "pruner: deduplicated {} against earlier prunes (no LLM call for those); remaining tool calls were summarized normally.",
                            tool_calls(deduped)
                        ),
                        &mut r.notices,
                    );
                }
                processed.push((pb, FrontierOutcome::Summarized));
            }
        }
    }

    r.processed_batches = processed.len();
    if let Some((last, _)) = processed.last() {
        let source = if last.remaining.calls.is_empty() {
            &last.captured
        } else {
            &last.remaining
        };
        let call = source.calls.last().expect("a captured batch has calls");
        let outcome = [
            FrontierOutcome::Summarized,
            FrontierOutcome::SkippedOversized,
            FrontierOutcome::SkippedDeduped,
            FrontierOutcome::SkippedTrivial,
        ]
        .into_iter()
        .find(|o| processed.iter().any(|(_, p)| p == o))
        .expect("at least one processed batch");
        let frontier = Frontier {
            last_attempted_tool_call_id: call.tool_call_id.clone(),
            last_attempted_tool_name: call.tool_name.clone(),
            last_attempted_turn_index: source.turn_index,
            last_attempted_timestamp: source.timestamp,
            attempted_batch_count: processed.len() as u64,
            attempted_tool_call_count: processed
                .iter()
                .map(|(b, _)| b.captured.calls.len() as u64)
                .sum(),
            raw_char_count: processed
                .iter()
                .map(|(b, _)| b.captured.raw_chars() as u64)
                .sum(),
            summary_char_count: r.summary_chars as u64,
            outcome,
            extra: Default::default(),
        };
        state.set_frontier(frontier.clone());
        r.effects.push(FlushEffect::Frontier(frontier));
        r.effects.push(FlushEffect::Stats(state.stats().clone()));
        r.outcome = FlushOutcome::Processed(outcome);
    } else {
        if stats_changed {
            r.effects.push(FlushEffect::Stats(state.stats().clone()));
        }
        r.outcome = FlushOutcome::SummarizerFailed(failure.clone().unwrap_or_default());
    }
    // The failure itself is the summarizer's to report (it knows whether it
    // was an error, a timeout, or a silent unusable answer), as it happens.
    let _ = failure;
    r
}

/// The oversized results of a live turn and the duplicates among them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SpillPlan {
    /// Oversized outputs that duplicate an indexed one: aliased, no file.
    pub aliases: Vec<(OccurrenceKey, OccurrenceKey)>,
    /// Indices (into the batch's calls) of outputs to write to spill files.
    pub spill: Vec<usize>,
}

/// Decides which results of a live turn spill (at least `spillThreshold`
/// chars). Precedence: protected calls never get here; a duplicate of an
/// indexed output becomes an alias; the rest spill.
pub fn plan_spill(batch: &CapturedBatch, state: &State, config: &Config) -> SpillPlan {
    let mut plan = SpillPlan::default();
    for (i, c) in batch.calls.iter().enumerate() {
        if (c.result_text.js_len() as u64) < config.spill_threshold {
            continue;
        }
        if config.dedup_by_content_hash {
            let text = c.result_text.to_str();
            if let Some(orig) = state.lookup_by_hash(&content_hash(&c.tool_name, &text)) {
                if *orig != c.key() {
                    plan.aliases.push((c.key(), orig.clone()));
                    continue;
                }
            }
        }
        plan.spill.push(i);
    }
    plan
}

/// A spill file the host wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenSpill {
    /// Index into the batch's calls.
    pub call: usize,
    /// Where the full output is.
    pub path: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// The head of `text` within `max_bytes` bytes: cut back to the last line
/// break inside the limit when there is one (whole lines read better), else
/// to a char boundary.
pub fn head_preview(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    match head.rfind('\n') {
        Some(nl) if nl > 0 => &head[..nl],
        _ => head,
    }
}

/// Records spills the host wrote (blob first, record after: a failed write
/// is simply absent here and its output stays inline for the next flush)
/// and the aliases of [`plan_spill`]. Returns the effects and the batch
/// without the calls now indexed.
pub fn apply_spill(
    mut batch: CapturedBatch,
    plan: &SpillPlan,
    written: &[WrittenSpill],
    state: &mut State,
    config: &Config,
) -> (Vec<FlushEffect>, CapturedBatch) {
    let mut effects = Vec::new();
    for (new, original) in &plan.aliases {
        state.register_dedup_alias(new, original);
        effects.push(FlushEffect::DedupAlias {
            new: new.clone(),
            original: original.clone(),
        });
    }
    let mut records = Vec::new();
    for w in written {
        let Some(c) = batch.calls.get(w.call) else {
            continue;
        };
        let text = c.result_text.to_str();
        let record = ToolCallRecord {
            tool_call_id: c.tool_call_id.clone(),
            tool_name: c.tool_name.clone(),
            args: serde_json::Value::clone(&c.args),
            result_text: SharedText::new(),
            is_error: c.is_error,
            turn_index: batch.turn_index,
            timestamp: batch.timestamp,
            result_timestamp: c.result_timestamp,
            spill_path: Some(w.path.clone()),
            spill_bytes: Some(w.bytes),
            result_preview: Some(
                head_preview(&text, config.spill_preview_bytes as usize).to_owned(),
            ),
            content_hash: Some(content_hash(&c.tool_name, &text)),
            extra: Default::default(),
        };
        state.add_record(record.clone(), true);
        records.push(record);
    }
    if !records.is_empty() {
        effects.push(FlushEffect::Index {
            records,
            backfilled: false,
            refs: None,
        });
    }
    batch
        .calls
        .retain(|c| !state.is_summarized(&c.tool_call_id, c.result_timestamp));
    (effects, batch)
}
