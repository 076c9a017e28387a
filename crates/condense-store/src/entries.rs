//! pi-condense's session entries, wire-compatible.
//!
//! condense persists its state the way pi-condense 2.9.1 does, as pi
//! `custom` entries (`{"type":"custom","customType":…,"data":…}`) plus one
//! `custom_message` per summarized batch (its `details` carry the refs).
//! The payload types here serialize to the exact bytes pi-condense writes:
//! same field names, same key order, optional fields left out when absent,
//! numbers formatted as JavaScript formats them (see [`crate::json`]).
//! Every type keeps fields it does not know in `extra`, so entries written by
//! a newer pi-condense survive a read and a rewrite.
//!
//! | customType | entry | payload |
//! |---|---|---|
//! | [`CUSTOM_TYPE_SUMMARY`] | `custom_message` (`details`) | [`SummaryMessageDetails`] |
//! | [`CUSTOM_TYPE_INDEX`] | `custom` | [`IndexEntryData`] |
//! | [`CUSTOM_TYPE_FRONTIER`] | `custom` | [`Frontier`] (last wins) |
//! | [`CUSTOM_TYPE_DEDUP_ALIAS`] | `custom` | [`DedupAliasEntryData`] |
//! | [`CUSTOM_TYPE_CHAIN`] | `custom` | [`ChainEntry`] |
//! | [`CUSTOM_TYPE_STATS`] | `custom` | [`SummarizerStats`] (last wins) |
//! | [`CUSTOM_TYPE_FLUSH_METRICS`] | `custom` | [`FlushMetricsEntryData`] (never read back) |
//! | [`CUSTOM_TYPE_DIAGNOSTIC`] | `custom` | [`DiagnosticEntryData`] (never read back) |
//! | [`CUSTOM_TYPE_SWITCH`] | `custom` | [`SwitchEntryData`] (condense only) |
//!
//! The switch entry is condense's own: pi-condense ignores custom types it
//! does not know, so it shows everything summarized, as it always did.

use condense_core::{
    ChainEntry, Frontier, RecordedReason, SummarizerStats, SummaryRef, SwitchReason, ToolCallRecord,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::session::{Entry, EntryType};

/// Per-batch summary messages (`custom_message`, sent to the model).
pub const CUSTOM_TYPE_SUMMARY: &str = condense_core::SUMMARY_CUSTOM_TYPE;
/// Indexed tool calls: what a summary replaced.
pub const CUSTOM_TYPE_INDEX: &str = "context-prune-index";
/// The last attempted prune boundary.
pub const CUSTOM_TYPE_FRONTIER: &str = "context-prune-frontier";
/// A duplicate tool output pointing at its first occurrence.
pub const CUSTOM_TYPE_DEDUP_ALIAS: &str = "context-prune-dedup-alias";
/// A compressed chain.
pub const CUSTOM_TYPE_CHAIN: &str = "context-prune-chain";
/// Cumulative summarizer usage.
pub const CUSTOM_TYPE_STATS: &str = "context-prune-stats";
/// Per-flush-attempt metrics.
pub const CUSTOM_TYPE_FLUSH_METRICS: &str = "context-prune-flush-metrics";
/// A diagnostic report.
pub const CUSTOM_TYPE_DIAGNOSTIC: &str = "context-prune-diagnostic";

/// A cache-aware switch: what was appended before it is shown.
pub const CUSTOM_TYPE_SWITCH: &str = "context-prune-switch";

/// Every `customType` condense (and, but for the switch, pi-condense) writes.
pub const CONDENSE_CUSTOM_TYPES: [&str; 9] = [
    CUSTOM_TYPE_SUMMARY,
    CUSTOM_TYPE_INDEX,
    CUSTOM_TYPE_FRONTIER,
    CUSTOM_TYPE_DEDUP_ALIAS,
    CUSTOM_TYPE_CHAIN,
    CUSTOM_TYPE_STATS,
    CUSTOM_TYPE_FLUSH_METRICS,
    CUSTOM_TYPE_DIAGNOSTIC,
    CUSTOM_TYPE_SWITCH,
];

/// `context-prune-index` data: the tool calls a flush indexed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexEntryData {
    /// The indexed calls, in batch order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// `true` for records backfilled at chain compression (no per-batch
    /// summary exists for them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfilled: Option<bool>,
    /// Short refs issued for backfilled records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refs: Option<Vec<SummaryRef>>,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `details` of a `context-prune-summary` custom message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryMessageDetails {
    /// The refs (`t<N>` → occurrence) the summary covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_refs: Option<Vec<SummaryRef>>,
    /// Legacy form (before short refs): bare tool-call ids. Read, never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_ids: Option<Vec<String>>,
    /// Tool names, aligned with the refs.
    #[serde(default)]
    pub tool_names: Vec<String>,
    /// The batch's turn index.
    #[serde(default)]
    pub turn_index: i64,
    /// The batch's timestamp (ms).
    #[serde(default)]
    pub timestamp: i64,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SummaryMessageDetails {
    /// The refs, normalized as pi-condense's `normalizeSummaryToolCallRefs`:
    /// `toolCallRefs` when present, else each legacy id as its own ref
    /// (`shortId` = `toolCallId`, no result timestamp).
    pub fn refs(&self) -> Vec<SummaryRef> {
        if let Some(refs) = &self.tool_call_refs {
            return refs.clone();
        }
        self.tool_call_ids
            .iter()
            .flatten()
            .map(|id| SummaryRef {
                short_id: id.clone(),
                tool_call_id: id.clone(),
                result_timestamp: None,
            })
            .collect()
    }
}

/// `context-prune-dedup-alias` data: a repeated output and its original.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DedupAliasEntryData {
    /// The duplicate call's id.
    pub new_tool_call_id: String,
    /// The first occurrence's call id.
    pub original_tool_call_id: String,
    /// The duplicate's result timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_result_timestamp: Option<i64>,
    /// The original's result timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_result_timestamp: Option<i64>,
    /// Content hash (written by old versions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The context-pressure figures recorded with each flush attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlushMetrics {
    /// Estimated tokens of thinking blocks in the still-open cycle.
    #[serde(default)]
    pub open_cycle_thinking_tokens: u64,
    /// The largest chain's share of the branch, 0–100.
    #[serde(default)]
    pub largest_chain_share_pct: f64,
    /// Estimated tokens of summarizable results past the frontier.
    #[serde(default)]
    pub frontier_gap_tokens: u64,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context-prune-flush-metrics` data: one per flush attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlushMetricsEntryData {
    /// When the attempt ended (ms).
    pub ts: i64,
    /// What started it: `budget`, `delta`, `message-end`, `manual`, `rearmed`.
    pub trigger: String,
    /// Batches captured.
    #[serde(default)]
    pub captured_batches: u64,
    /// Batches processed.
    #[serde(default)]
    pub processed_batches: u64,
    /// A frontier outcome, or `empty` / `error`.
    pub outcome: String,
    /// Context metrics at the time.
    pub metrics: FlushMetrics,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context-prune-diagnostic` data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiagnosticEntryData {
    /// `unresolved-range`, `range-id-mismatch`, `orphan-sweep`, `backfill-empty`, …
    pub kind: String,
    /// Free text.
    pub detail: String,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context-prune-switch` data: the cache-aware policy showed everything
/// condense appended before this entry, at an LLM call whose context held
/// `messageCount` messages. The figures are the decision's, for
/// `/pruner status` and the simulator; only `messageCount` is read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SwitchEntryData {
    /// Why: `idle-expiry`, `resume`, `model-change`, `compaction`,
    /// `pressure`, `pays`, `start`, `user` (see `condense_core::SwitchReason`);
    /// another spelling is kept as written.
    pub reason: RecordedReason,
    /// The number of messages in the context the switch was decided at:
    /// failed calls among them may have their arguments purged.
    pub message_count: u64,
    /// Tokens of the prompt before the switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// Tokens the switch removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_tokens: Option<u64>,
    /// The rewrite's extra cost (units of one uncached input token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite_cost: Option<f64>,
    /// The projected saving over the expected calls (same units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projected_saving: Option<f64>,
    /// When the switch was decided (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<i64>,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SwitchEntryData {
    /// A switch no cost decision made (`start`, `user`): its reason, the
    /// context's message count and its time, no figures.
    pub fn undecided(
        reason: SwitchReason,
        message_count: usize,
        ts: Option<i64>,
    ) -> SwitchEntryData {
        SwitchEntryData {
            reason: reason.into(),
            message_count: message_count as u64,
            prompt_tokens: None,
            removed_tokens: None,
            rewrite_cost: None,
            projected_saving: None,
            ts,
            extra: Map::new(),
        }
    }
}

/// A condense entry of a session, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum CondenseEntry {
    /// `context-prune-summary` custom message's details.
    Summary(SummaryMessageDetails),
    /// `context-prune-index`
    Index(IndexEntryData),
    /// `context-prune-frontier`
    Frontier(Frontier),
    /// `context-prune-dedup-alias`
    DedupAlias(DedupAliasEntryData),
    /// `context-prune-chain`
    Chain(ChainEntry),
    /// `context-prune-stats`
    Stats(SummarizerStats),
    /// `context-prune-flush-metrics`
    FlushMetrics(FlushMetricsEntryData),
    /// `context-prune-diagnostic`
    Diagnostic(DiagnosticEntryData),
    /// `context-prune-switch`
    Switch(SwitchEntryData),
}

impl CondenseEntry {
    /// Reads a session entry as a condense entry. `None` when the entry is
    /// not one (another type or customType, or a summary `custom` entry
    /// instead of a `custom_message`); `Some(Err)` when its payload does not
    /// fit the type (a missing payload reads as `null`).
    pub fn from_entry(entry: &Entry) -> Option<Result<CondenseEntry, serde_json::Error>> {
        let custom_type = entry.custom_type.as_deref()?;
        let payload = entry.payload_raw().unwrap_or("null");
        let parsed = match (&entry.kind, custom_type) {
            (EntryType::CustomMessage, CUSTOM_TYPE_SUMMARY) => {
                serde_json::from_str(payload).map(CondenseEntry::Summary)
            }
            (EntryType::Custom, CUSTOM_TYPE_INDEX) => {
                serde_json::from_str(payload).map(CondenseEntry::Index)
            }
            (EntryType::Custom, CUSTOM_TYPE_FRONTIER) => {
                serde_json::from_str(payload).map(CondenseEntry::Frontier)
            }
            (EntryType::Custom, CUSTOM_TYPE_DEDUP_ALIAS) => {
                serde_json::from_str(payload).map(CondenseEntry::DedupAlias)
            }
            (EntryType::Custom, CUSTOM_TYPE_CHAIN) => {
                serde_json::from_str(payload).map(CondenseEntry::Chain)
            }
            (EntryType::Custom, CUSTOM_TYPE_STATS) => {
                serde_json::from_str(payload).map(CondenseEntry::Stats)
            }
            (EntryType::Custom, CUSTOM_TYPE_FLUSH_METRICS) => {
                serde_json::from_str(payload).map(CondenseEntry::FlushMetrics)
            }
            (EntryType::Custom, CUSTOM_TYPE_DIAGNOSTIC) => {
                serde_json::from_str(payload).map(CondenseEntry::Diagnostic)
            }
            (EntryType::Custom, CUSTOM_TYPE_SWITCH) => {
                serde_json::from_str(payload).map(CondenseEntry::Switch)
            }
            _ => return None,
        };
        Some(parsed)
    }

    /// The entry's `customType`.
    pub fn custom_type(&self) -> &'static str {
        match self {
            CondenseEntry::Summary(_) => CUSTOM_TYPE_SUMMARY,
            CondenseEntry::Index(_) => CUSTOM_TYPE_INDEX,
            CondenseEntry::Frontier(_) => CUSTOM_TYPE_FRONTIER,
            CondenseEntry::DedupAlias(_) => CUSTOM_TYPE_DEDUP_ALIAS,
            CondenseEntry::Chain(_) => CUSTOM_TYPE_CHAIN,
            CondenseEntry::Stats(_) => CUSTOM_TYPE_STATS,
            CondenseEntry::FlushMetrics(_) => CUSTOM_TYPE_FLUSH_METRICS,
            CondenseEntry::Diagnostic(_) => CUSTOM_TYPE_DIAGNOSTIC,
            CondenseEntry::Switch(_) => CUSTOM_TYPE_SWITCH,
        }
    }

    /// The payload's JSON text as pi-condense writes it (`data`, or the
    /// summary's `details`).
    pub fn payload_json(&self) -> serde_json::Result<String> {
        match self {
            CondenseEntry::Summary(d) => crate::json::to_string(d),
            CondenseEntry::Index(d) => crate::json::to_string(d),
            CondenseEntry::Frontier(d) => crate::json::to_string(d),
            CondenseEntry::DedupAlias(d) => crate::json::to_string(d),
            CondenseEntry::Chain(d) => crate::json::to_string(d),
            CondenseEntry::Stats(d) => crate::json::to_string(d),
            CondenseEntry::FlushMetrics(d) => crate::json::to_string(d),
            CondenseEntry::Diagnostic(d) => crate::json::to_string(d),
            CondenseEntry::Switch(d) => crate::json::to_string(d),
        }
    }
}

/// The text of a summary custom message's `content`, as pi-condense reads it
/// back: the string itself, or the `text` of its text blocks joined with
/// `\n`. `None` when the entry has no readable content.
pub fn summary_text(entry: &Entry) -> Option<String> {
    let raw = entry.raw_field("content")?;
    match serde_json::from_str::<Value>(raw).ok()? {
        Value::String(s) => Some(s),
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            Some(texts.join("\n"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_summary_ids_normalize_to_refs() {
        let d: SummaryMessageDetails = serde_json::from_str(
            r#"{"toolCallIds":["a","b"],"toolNames":["bash","read"],"turnIndex":2,"timestamp":9}"#,
        )
        .unwrap();
        let refs = d.refs();
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].short_id, "a");
        assert_eq!(refs[0].tool_call_id, "a");
        assert_eq!(refs[1].result_timestamp, None);
        assert_eq!(
            crate::json::to_string(&d).unwrap(),
            r#"{"toolCallIds":["a","b"],"toolNames":["bash","read"],"turnIndex":2,"timestamp":9}"#
        );
    }

    #[test]
    fn custom_types_are_distinct_and_prefixed() {
        let mut all = CONDENSE_CUSTOM_TYPES.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 9);
        assert!(all.iter().all(|t| t.starts_with("context-prune-")));
    }
}
