//! The plain data condense persists: tool-call records, summary refs, chain
//! compressions, the frontier and summarizer stats.
//!
//! Field names follow pi-condense's wire format (camelCase) so entries written
//! by either project load in the other. Every struct keeps fields it does not
//! know in `extra`, so a newer writer's fields survive a rewrite.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::occurrence::OccurrenceKey;

/// One indexed tool call: what the model no longer sees verbatim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    /// The provider's tool-call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The call's arguments as the model sent them.
    #[serde(default)]
    pub args: Value,
    /// The result text ("" when spilled to a sidecar file).
    #[serde(default)]
    pub result_text: String,
    /// Whether the result was an error.
    #[serde(default)]
    pub is_error: bool,
    /// The assistant turn counter of the batch (-1 for backfilled records).
    #[serde(default)]
    pub turn_index: i64,
    /// The batch's timestamp (ms).
    #[serde(default)]
    pub timestamp: i64,
    /// The tool result message's timestamp; absent on legacy records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_timestamp: Option<i64>,
    /// Path of the sidecar file holding the full output, when spilled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_path: Option<String>,
    /// Size of the spilled output in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_bytes: Option<u64>,
    /// The head preview shown in the spill stub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_preview: Option<String>,
    /// SHA-1 content hash (hex) used for dedup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ToolCallRecord {
    /// The record's occurrence key.
    pub fn key(&self) -> OccurrenceKey {
        OccurrenceKey::new(self.tool_call_id.clone(), self.result_timestamp)
    }
}

/// A short ref (`t<N>`) and the occurrence it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryRef {
    /// `t<N>` (legacy summaries may carry the tool-call id itself).
    pub short_id: String,
    /// The tool-call id.
    pub tool_call_id: String,
    /// The result's timestamp; absent on legacy refs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_timestamp: Option<i64>,
}

impl SummaryRef {
    /// The occurrence this ref names.
    pub fn key(&self) -> OccurrenceKey {
        OccurrenceKey::new(self.tool_call_id.clone(), self.result_timestamp)
    }
}

/// A compressed chain (`context-prune-chain`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainEntry {
    /// `b<N>`.
    pub block_id: String,
    /// Timestamp of the user message that starts the chain.
    pub start_user_timestamp: i64,
    /// Bare ids in the range at compression time (diagnostic only).
    #[serde(default)]
    pub dropped_tool_call_ids: Vec<String>,
    /// Timestamp of the final text-only assistant; `null` for an interrupted chain.
    #[serde(default)]
    pub final_assistant_timestamp: Option<i64>,
    /// Short refs of the chain's tool calls.
    #[serde(default)]
    pub tool_refs: Vec<String>,
    /// When the compression was decided (ms); the synthetic message's timestamp.
    #[serde(default)]
    pub compressed_at: i64,
    /// The fused range summary or deterministic body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_summary_text: Option<String>,
    /// `"deterministic"` when the body was built without an LLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_source: Option<String>,
    /// Bare ids of protected results to relocate verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protected_tool_call_ids: Option<Vec<String>>,
    /// Occurrence keys of the dropped results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_occurrence_keys: Option<Vec<String>>,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Why the last flush attempt ended where it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FrontierOutcome {
    /// Summarized by the LLM.
    Summarized,
    /// The summary came back longer than the raw text.
    SkippedOversized,
    /// Under `minBatchChars`.
    SkippedTrivial,
    /// Every call was a duplicate of an indexed one.
    SkippedDeduped,
}

impl FrontierOutcome {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FrontierOutcome::Summarized => "summarized",
            FrontierOutcome::SkippedOversized => "skipped-oversized",
            FrontierOutcome::SkippedTrivial => "skipped-trivial",
            FrontierOutcome::SkippedDeduped => "skipped-deduped",
        }
    }
}

/// The last attempted prune boundary (`context-prune-frontier`; last wins).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Frontier {
    /// The last tool call of the last attempted batch.
    pub last_attempted_tool_call_id: String,
    /// Its tool name (`"unknown"` when an old entry lacks it).
    #[serde(default = "unknown_name")]
    pub last_attempted_tool_name: String,
    /// The batch's turn index.
    #[serde(default)]
    pub last_attempted_turn_index: i64,
    /// The batch's timestamp.
    #[serde(default)]
    pub last_attempted_timestamp: i64,
    /// Batches attempted in the flush.
    #[serde(default)]
    pub attempted_batch_count: u64,
    /// Tool calls attempted in the flush.
    #[serde(default)]
    pub attempted_tool_call_count: u64,
    /// Raw chars of the attempted batches.
    #[serde(default)]
    pub raw_char_count: u64,
    /// Summary chars produced.
    #[serde(default)]
    pub summary_char_count: u64,
    /// The outcome (`summarized` when absent).
    #[serde(default = "summarized")]
    pub outcome: FrontierOutcome,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn unknown_name() -> String {
    "unknown".into()
}

fn summarized() -> FrontierOutcome {
    FrontierOutcome::Summarized
}

/// Cumulative summarizer usage (`context-prune-stats`; a full snapshot, last wins).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SummarizerStats {
    /// Input tokens over every summarizer call.
    #[serde(default)]
    pub total_input_tokens: u64,
    /// Output tokens over every summarizer call.
    #[serde(default)]
    pub total_output_tokens: u64,
    /// Cost in dollars.
    #[serde(default)]
    pub total_cost: f64,
    /// Number of summarizer calls.
    #[serde(default)]
    pub call_count: u64,
    /// Chains compressed.
    #[serde(default)]
    pub chains_compressed: u64,
    /// Range summaries fused.
    #[serde(default)]
    pub ranges_summarized: u64,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_unknown_fields() {
        let text = r#"{"toolCallId":"c","toolName":"bash","args":{"command":"ls"},"resultText":"x","isError":false,"turnIndex":1,"timestamp":2,"resultTimestamp":3,"future":{"a":1}}"#;
        let r: ToolCallRecord = serde_json::from_str(text).unwrap();
        assert_eq!(r.key().to_string(), "c@3");
        assert_eq!(serde_json::to_string(&r).unwrap(), text);
    }

    #[test]
    fn frontier_defaults_missing_fields() {
        let f: Frontier = serde_json::from_str(r#"{"lastAttemptedToolCallId":"x"}"#).unwrap();
        assert_eq!(f.last_attempted_tool_name, "unknown");
        assert_eq!(f.outcome, FrontierOutcome::Summarized);
    }

    #[test]
    fn chain_entry_keeps_null_final() {
        let text = r#"{"blockId":"b1","startUserTimestamp":1,"droppedToolCallIds":[],"finalAssistantTimestamp":null,"toolRefs":[],"compressedAt":5}"#;
        let c: ChainEntry = serde_json::from_str(text).unwrap();
        assert_eq!(c.final_assistant_timestamp, None);
        assert_eq!(serde_json::to_string(&c).unwrap(), text);
    }
}
