//! Chain compression planning: which closed chains become one
//! `<compressed-chain>` message, and with which body.
//!
//! [`plan_chains`] detects chains (with the closing message threaded in),
//! selects the eligible ones (rolling window K, K = 0 for `/pruner compact`,
//! grace deferral), and sorts each into:
//! - **covered**: some per-batch summary covers a result of the chain. Its
//!   body is that summary; two or more distinct summaries become a range
//!   fusion job (one LLM call, summary of summaries), falling back to their
//!   concatenation if fusion fails;
//! - **uncovered**: no summary covers it. Its unindexed results are
//!   backfilled into the index first (so nothing becomes unrecoverable) and
//!   its body is built deterministically, without an LLM;
//! - skipped: fully protected chains silently, chains with nothing to
//!   backfill with a `backfill-empty` diagnostic.
//!
//! [`apply_chains`] takes the fusion results and the spill files the host
//! wrote for oversized backfilled outputs, and returns the entries to append
//! (per chain: the backfill index entry, the chain entry, a stats snapshot).

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use crate::chains::{select_eligible_among, with_closing_message, ChainRange};
use crate::chains_memo::ChainsMemo;
use crate::config::Config;
use crate::diagnostics::{Diagnostic, DiagnosticKind};
use crate::flush::{head_preview, FlushEffect, JobResult, WrittenSpill};
use crate::js::{js_len, js_prefix};
use crate::message::{Message, Role};
use crate::notice::{Notice, NoticeLevel};
use crate::occurrence::OccurrenceKey;
use crate::protect::Protection;
use crate::records::{ChainEntry, ToolCallRecord};
use crate::render::grace::in_grace_keys;
use crate::state::State;

/// First line of a deterministic chain body.
pub const DETERMINISTIC_HEADER: &str = "Deterministic chain compression (no per-batch summary existed for this span; raw outputs recoverable via context_tree_query).";

/// A range fusion the summarizer must run.
#[derive(Debug, Clone, PartialEq)]
pub struct FusionJob {
    /// The distinct per-batch summaries of the chain, oldest first.
    pub summaries: Vec<String>,
}

/// How one eligible chain is compressed.
#[derive(Debug, Clone, PartialEq)]
pub enum ChainWork {
    /// Covered by per-batch summaries.
    Covered {
        /// The chain.
        range: ChainRange,
        /// Its fusion job, when it has two or more distinct summaries.
        fusion: Option<usize>,
        /// Results of the range no summary covers, to backfill (with refs).
        backfill: Vec<ToolCallRecord>,
    },
    /// No summary covers it: backfill, then a deterministic body.
    Uncovered {
        /// The chain.
        range: ChainRange,
        /// Its unindexed results, as records to backfill (`turnIndex` -1).
        backfill: Vec<ToolCallRecord>,
        /// Records already indexed in the chain (for the body).
        indexed: Vec<ToolCallRecord>,
    },
}

/// A chain compression decided without an LLM.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChainPlan {
    /// The chains to compress, oldest first.
    pub work: Vec<ChainWork>,
    /// Fusion jobs, in chain order.
    pub fusion_jobs: Vec<FusionJob>,
    /// Chains skipped because there was nothing to backfill.
    pub diagnostics: Vec<Diagnostic>,
    /// Eligible chains that had no per-batch summary and could not be backfilled.
    pub skipped: usize,
}

impl ChainPlan {
    /// Backfilled records (chain index, record index) whose outputs must go
    /// to spill files first (at least `spillThreshold` chars).
    pub fn spills(&self, config: &Config) -> Vec<(usize, usize, &ToolCallRecord)> {
        let mut out = Vec::new();
        for (w, work) in self.work.iter().enumerate() {
            let backfill = match work {
                ChainWork::Uncovered { backfill, .. } | ChainWork::Covered { backfill, .. } => {
                    backfill
                }
            };
            {
                for (r, rec) in backfill.iter().enumerate() {
                    if js_len(&rec.result_text.to_str()) as u64 >= config.spill_threshold {
                        out.push((w, r, rec));
                    }
                }
            }
        }
        out
    }
}

/// The arguments of each call id's first `toolCall` block in `messages`.
fn call_args(messages: &[Message]) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for m in messages {
        if !m.is(&Role::Assistant) || m.skeleton().tool_calls.is_empty() {
            continue;
        }
        // Unreadable (a number out of range): its calls' args read as `{}`.
        let Ok(v) = m.to_value() else {
            continue;
        };
        for b in v
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if b.get("type").and_then(Value::as_str) != Some("toolCall") {
                continue;
            }
            let Some(id) = b.get("id").and_then(Value::as_str) else {
                continue;
            };
            let args = b
                .get("input")
                .or_else(|| b.get("arguments"))
                .cloned()
                .unwrap_or(Value::Object(Default::default()));
            out.entry(id.to_owned()).or_insert(args);
        }
    }
    out
}

/// The unprotected results of a closed chain: records to backfill (not
/// indexed, or indexed without a short ref, such as eager spills: the model
/// could not name them once the range is gone) and records already indexed
/// with a ref. Protected results are neither: the chain relocates them
/// verbatim into its `<protected-output>` blocks.
///
/// A dedup alias of an indexed original is recoverable under the ref it
/// shares with the original; with `backfill_aliases` false (a covered chain)
/// it is left out, as pi-condense leaves it. An uncovered chain backfills it
/// like pi-condense does (its deterministic body then names the call's own
/// ref; pi-condense's fixture session pins that).
fn chain_records(
    messages: &[Message],
    range: &ChainRange,
    state: &State,
    protection: &Protection,
    backfill_aliases: bool,
) -> (Vec<ToolCallRecord>, Vec<ToolCallRecord>) {
    let end = range.end_index.expect("eligible chains are closed");
    // Arguments by position: a reused provider id elsewhere on the branch
    // must not lend this chain its arguments.
    let args = call_args(&messages[range.start_index..end]);
    let protected: HashSet<&str> = range
        .protected_tool_call_ids
        .iter()
        .map(String::as_str)
        .collect();
    let mut backfill = Vec::new();
    let mut indexed = Vec::new();
    for m in &messages[range.start_index + 1..end] {
        if !m.is(&Role::ToolResult) {
            continue;
        }
        let sk = m.skeleton();
        let (Some(id), Some(ts)) = (sk.tool_call_id.as_deref(), sk.timestamp) else {
            continue;
        };
        if protected.contains(id) {
            continue;
        }
        if let Some(r) = state.record_exact(id, Some(ts)) {
            if state.short_ref(id, Some(ts)).is_some() {
                indexed.push(r.clone());
            } else {
                backfill.push(r.clone());
            }
            continue;
        }
        let call_args = args
            .get(id)
            .cloned()
            .unwrap_or(Value::Object(Default::default()));
        let tool_name = sk.tool_name.clone().unwrap_or_default();
        if protection.is_protected(&tool_name, &call_args) {
            continue;
        }
        let recoverable_alias = state.dedup_original(id, Some(ts)).is_some()
            && state.short_ref(id, Some(ts)).is_some()
            && state.record_for(id, Some(ts)).is_some();
        if recoverable_alias && !backfill_aliases {
            continue;
        }
        backfill.push(ToolCallRecord {
            tool_call_id: id.to_owned(),
            tool_name,
            args: call_args,
            result_text: m.result_text().into(),
            is_error: sk.is_error,
            turn_index: -1,
            timestamp: ts,
            result_timestamp: Some(ts),
            spill_path: None,
            spill_bytes: None,
            result_preview: None,
            content_hash: None,
            extra: Default::default(),
        });
    }
    (backfill, indexed)
}

fn key_texts(keys: &[OccurrenceKey]) -> Vec<String> {
    keys.iter().map(ToString::to_string).collect()
}

/// [`crate::plan_chains`], with the state and its memo apart.
pub(crate) fn plan_chains(
    messages: &[Message],
    closing: Option<&Message>,
    state: &State,
    memo: &ChainsMemo,
    config: &Config,
    protection: &Protection,
    rolling_window: u32,
) -> ChainPlan {
    let messages = with_closing_message(messages, closing);
    // Detected as `detect_chains` does, from the state's memo of the walk.
    let spans = memo.spans(&messages, protection);
    let chains = spans
        .iter()
        .filter(|(_, s)| s.start_ts.is_some())
        .map(|(_, s)| &s.range);
    let grace = in_grace_keys(&messages, config.recovery_grace_turns);
    let eligible = select_eligible_among(chains, state, rolling_window, &grace);
    let mut plan = ChainPlan::default();
    if eligible.is_empty() {
        return plan;
    }

    for range in eligible {
        let keys = key_texts(&range.middle_occurrence_keys);
        let summaries = state.summaries_covering(keys.iter().map(String::as_str));
        if !summaries.is_empty() {
            let fusion = (config.chain_compression.fuse_range_summary && summaries.len() >= 2)
                .then(|| {
                    plan.fusion_jobs.push(FusionJob {
                        summaries: summaries.iter().map(|s| s.to_string()).collect(),
                    });
                    plan.fusion_jobs.len() - 1
                });
            // Results no flush indexed (a trivial or oversized skip, work
            // still pending) would vanish with the range: backfilled, so
            // nothing becomes unrecoverable (pi-condense dropped them). Only
            // those: dedup aliases keep the ref they share.
            let (backfill, _) = chain_records(&messages, range, state, protection, false);
            plan.work.push(ChainWork::Covered {
                range: range.clone(),
                fusion,
                backfill,
            });
            continue;
        }
        // Uncovered: every unprotected result of the range, indexed or not.
        let protected: HashSet<&str> = range
            .protected_tool_call_ids
            .iter()
            .map(String::as_str)
            .collect();
        let (backfill, indexed) = chain_records(&messages, range, state, protection, true);
        if backfill.is_empty() && indexed.is_empty() {
            let fully_protected = !range.middle_tool_call_ids.is_empty()
                && range
                    .middle_tool_call_ids
                    .iter()
                    .all(|id| protected.contains(id.as_str()));
            if !fully_protected {
                plan.skipped += 1;
                plan.diagnostics.push(Diagnostic {
                    kind: DiagnosticKind::BackfillEmpty,
                    key: range.start_user_timestamp.to_string(),
                    detail: format!(
                        "start={} calls={} nothing to backfill",
                        range.start_user_timestamp,
                        range.middle_tool_call_ids.len()
                    ),
                });
            }
            continue;
        }
        plan.work.push(ChainWork::Uncovered {
            range: range.clone(),
            backfill,
            indexed,
        });
    }
    plan
}

fn iso(ms: i64) -> String {
    // Civil date from days since the epoch (proleptic Gregorian, UTC).
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

fn call_line(r: &ToolCallRecord) -> String {
    let args = serde_json::to_string(&r.args).unwrap_or_default();
    let args = if js_len(&args) > 200 {
        format!("{}...", js_prefix(&args, 200))
    } else {
        args
    };
    format!("{} {}", r.tool_name, args)
}

/// The deterministic body of an uncovered chain: how many calls, which
/// tools, the time span, the first and last call, and the refs to recover
/// the outputs with. `records` are in branch order; `refs[i]` is the ref of
/// `records[i]` (its `t<N>`, or its id when it has none).
pub fn deterministic_body(records: &[ToolCallRecord], refs: &[String]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in records {
        *counts.entry(r.tool_name.as_str()).or_default() += 1;
    }
    let mut tools: Vec<(&str, usize)> = counts.into_iter().collect();
    tools.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let tools: Vec<String> = tools.iter().map(|(n, k)| format!("{n} x{k}")).collect();
    let times: Vec<i64> = records
        .iter()
        .map(|r| r.result_timestamp.unwrap_or(r.timestamp))
        .collect();
    let first_ts = times.iter().copied().min().unwrap_or(0);
    let last_ts = times.iter().copied().max().unwrap_or(0);
    let secs = ((last_ts - first_ts) as f64 / 1000.0).round() as i64;
    let mut lines = vec![
        DETERMINISTIC_HEADER.to_owned(),
        format!("Calls: {}", records.len()),
        format!("Tools: {}", tools.join(", ")),
        format!("Span: {} -> {} ({secs}s)", iso(first_ts), iso(last_ts)),
    ];
    if let (Some(first), Some(last)) = (records.first(), records.last()) {
        lines.push(format!("First: {}", call_line(first)));
        lines.push(format!("Last: {}", call_line(last)));
    }
    lines.push(format!("Refs: {}", refs.join(", ")));
    lines.join("\n")
}

/// What applying a chain plan produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChainResult {
    /// Entries to append, in order.
    pub effects: Vec<FlushEffect>,
    /// The chain entries written.
    pub compressed: Vec<ChainEntry>,
    /// Diagnostics (the plan's, and backfill failures).
    pub diagnostics: Vec<Diagnostic>,
    /// What to tell the user.
    pub notices: Vec<Notice>,
}

/// Backfills a chain's records (spilled ones need their file): allocates
/// their refs, appends the backfilled index entry before anything mutates,
/// registers them. `None` (and a warning) when a spill file is missing: the
/// chain is then not compressed, so nothing becomes unrecoverable.
#[allow(clippy::too_many_arguments)]
fn backfill_records(
    w: usize,
    mut backfill: Vec<ToolCallRecord>,
    range: &ChainRange,
    needs_spill: &HashSet<(usize, usize)>,
    spills: &[(usize, usize, WrittenSpill)],
    state: &mut State,
    config: &Config,
    out: &mut ChainResult,
) -> Option<Vec<ToolCallRecord>> {
    for (r, rec) in backfill.iter_mut().enumerate() {
        if !needs_spill.contains(&(w, r)) {
            continue;
        }
        let Some((_, _, file)) = spills.iter().find(|(sw, sr, _)| *sw == w && *sr == r) else {
            out.notices.push(Notice {
                level: NoticeLevel::Warning,
                text: format!(
                    "pruner: chain starting at {} not compressed: a spill file could not be written",
                    range.start_user_timestamp
                ),
            });
            return None;
        };
        let spilled = std::mem::take(&mut rec.result_text);
        let spilled = spilled.to_str();
        rec.result_preview =
            Some(head_preview(&spilled, config.spill_preview_bytes as usize).to_owned());
        rec.content_hash = Some(crate::dedup::content_hash(&rec.tool_name, &spilled));
        rec.spill_path = Some(file.path.clone());
        rec.spill_bytes = Some(file.bytes);
    }
    let keys: Vec<OccurrenceKey> = backfill.iter().map(ToolCallRecord::key).collect();
    let refs = state.allocate_short_refs(&keys);
    if !backfill.is_empty() {
        out.effects.push(FlushEffect::Index {
            records: backfill.clone(),
            backfilled: true,
            refs: Some(refs.clone()),
        });
    }
    state.register_summary_refs(&refs);
    for rec in &backfill {
        state.add_record(rec.clone(), false);
    }
    Some(backfill)
}

/// The short refs of a chain's results, in order.
fn chain_refs(state: &State, range: &ChainRange) -> Vec<String> {
    range
        .middle_occurrence_keys
        .iter()
        .filter_map(|k| {
            state
                .short_ref(&k.id, k.result_timestamp)
                .map(str::to_owned)
        })
        .collect()
}

/// Applies a chain plan: `fusion` has one result per fusion job; `spills`
/// the files the host wrote for [`ChainPlan::spills`] (chain index, record
/// index, file). A backfilled output that had to spill but has no file
/// skips its chain: nothing is compressed that would not be recoverable.
pub fn apply_chains(
    plan: ChainPlan,
    fusion: Vec<JobResult>,
    spills: &[(usize, usize, WrittenSpill)],
    state: &mut State,
    config: &Config,
    now: i64,
) -> ChainResult {
    let mut out = ChainResult {
        diagnostics: plan.diagnostics.clone(),
        ..ChainResult::default()
    };
    let needs_spill: HashSet<(usize, usize)> = plan
        .spills(config)
        .iter()
        .map(|(w, r, _)| (*w, *r))
        .collect();
    let mut fusion: Vec<Option<JobResult>> = fusion.into_iter().map(Some).collect();
    for (w, work) in plan.work.into_iter().enumerate() {
        let (range, range_summary, body_source) = match work {
            ChainWork::Covered {
                range,
                fusion: job,
                backfill,
            } => {
                let Some(_) = backfill_records(
                    w,
                    backfill,
                    &range,
                    &needs_spill,
                    spills,
                    state,
                    config,
                    &mut out,
                ) else {
                    continue;
                };
                let fused = job.and_then(|j| fusion.get_mut(j).and_then(Option::take));
                let text = match fused {
                    Some(JobResult::Summary { text, usage }) => {
                        state.stats_mut().add_usage(&usage);
                        state.stats_mut().ranges_summarized += 1;
                        (!text.trim().is_empty()).then_some(text)
                    }
                    Some(JobResult::Unusable { usage: Some(u) })
                    | Some(JobResult::Failed { usage: Some(u), .. }) => {
                        state.stats_mut().add_usage(&u);
                        None
                    }
                    _ => None,
                };
                (range, text, None)
            }
            ChainWork::Uncovered {
                range,
                backfill,
                indexed,
            } => {
                let Some(backfill) = backfill_records(
                    w,
                    backfill,
                    &range,
                    &needs_spill,
                    spills,
                    state,
                    config,
                    &mut out,
                ) else {
                    continue;
                };
                let mut all: Vec<ToolCallRecord> = indexed.into_iter().chain(backfill).collect();
                all.sort_by_key(|r| r.result_timestamp.unwrap_or(r.timestamp));
                // The chain's refs; bare ids only when it has none at all.
                let mut body_refs = chain_refs(state, &range);
                if body_refs.is_empty() {
                    body_refs = all.iter().map(|r| r.tool_call_id.clone()).collect();
                }
                (
                    range,
                    Some(deterministic_body(&all, &body_refs)),
                    Some("deterministic".to_owned()),
                )
            }
        };
        let tool_refs = chain_refs(state, &range);
        let entry = ChainEntry {
            block_id: state.allocate_block_id(),
            start_user_timestamp: range.start_user_timestamp,
            dropped_tool_call_ids: range.middle_tool_call_ids.clone(),
            final_assistant_timestamp: range.final_assistant_timestamp,
            tool_refs,
            compressed_at: now,
            range_summary_text: range_summary,
            body_source,
            protected_tool_call_ids: (!range.protected_tool_call_ids.is_empty())
                .then(|| range.protected_tool_call_ids.clone()),
            dropped_occurrence_keys: Some(key_texts(&range.middle_occurrence_keys)),
            extra: Default::default(),
        };
        state.register_chain(entry.clone());
        state.stats_mut().chains_compressed += 1;
        out.effects.push(FlushEffect::Chain(entry.clone()));
        out.compressed.push(entry);
    }
    if !out.compressed.is_empty() {
        // One stats snapshot after all the chains, as pi-condense writes it.
        out.effects.push(FlushEffect::Stats(state.stats().clone()));
        let ids: Vec<&str> = out.compressed.iter().map(|c| c.block_id.as_str()).collect();
        let noun = if ids.len() == 1 { "chain" } else { "chains" };
        out.notices.push(Notice {
            level: NoticeLevel::Info,
            text: format!(
                "pruner: compressed {} {noun} ({})",
                ids.len(),
                ids.join(", ")
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_formats_like_javascript() {
        assert_eq!(iso(1_795_969_943_603), "2026-11-29T16:32:23.603Z");
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
