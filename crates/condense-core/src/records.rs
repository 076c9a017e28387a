//! The plain data condense persists: tool-call records, summary refs, chain
//! compressions, the frontier and summarizer stats.
//!
//! Field names follow pi-condense's wire format (camelCase) so entries written
//! by either project load in the other. Every struct keeps fields it does not
//! know in `extra`, so a newer writer's fields survive a rewrite.

use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::occurrence::OccurrenceKey;
use crate::text::{Buffer, SharedText};

/// One indexed tool call: what the model no longer sees verbatim.
///
/// Deserialized through `RecordFields` (the field attributes for reading
/// live there); [`ToolCallRecord::from_shared`] reads one without copying
/// its result text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    /// The provider's tool-call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The call's arguments as the model sent them.
    pub args: Value,
    /// The result text ("" when spilled to a sidecar file). Shared with the
    /// session file's buffer when the record was read from it.
    pub result_text: SharedText,
    /// Whether the result was an error.
    pub is_error: bool,
    /// The assistant turn counter of the batch (-1 for backfilled records).
    pub turn_index: i64,
    /// The batch's timestamp (ms).
    pub timestamp: i64,
    /// The tool result message's timestamp; absent on legacy records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_timestamp: Option<i64>,
    /// Path of the sidecar file holding the full output, when spilled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spill_path: Option<String>,
    /// Size of the spilled output in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spill_bytes: Option<u64>,
    /// The head preview shown in the spill stub.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_preview: Option<String>,
    /// SHA-1 content hash (hex) used for dedup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// Fields condense does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The wire form of a [`ToolCallRecord`], generic over how `resultText` is
/// read: decoded into a [`SharedText`] by `Deserialize`, or left as raw
/// JSON by [`ToolCallRecord::from_shared`] so it can stay in the buffer.
/// One definition serves both, so they cannot drift apart; the container
/// name keeps serde's messages saying `struct ToolCallRecord`.
#[derive(Deserialize)]
#[serde(rename = "ToolCallRecord", rename_all = "camelCase")]
struct RecordFields<T> {
    tool_call_id: String,
    tool_name: String,
    #[serde(default, deserialize_with = "compact_value")]
    args: Value,
    #[serde(default)]
    result_text: T,
    #[serde(default)]
    is_error: bool,
    #[serde(default)]
    turn_index: i64,
    #[serde(default)]
    timestamp: i64,
    #[serde(default)]
    result_timestamp: Option<i64>,
    #[serde(default)]
    spill_path: Option<String>,
    #[serde(default)]
    spill_bytes: Option<u64>,
    #[serde(default)]
    result_preview: Option<String>,
    #[serde(default)]
    content_hash: Option<String>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// A value read without the spare room deserializing leaves in its maps
/// and arrays (a map reserves space for three entries on its first insert;
/// most arguments have one or two), since records live as long as the
/// session.
fn compact_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    fn compact(value: Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (k, v) in map {
                    out.insert(k, compact(v));
                }
                Value::Object(out)
            }
            Value::Array(items) => {
                let mut items: Vec<Value> = items.into_iter().map(compact).collect();
                items.shrink_to_fit();
                Value::Array(items)
            }
            other => other,
        }
    }
    Value::deserialize(d).map(compact)
}

impl<T> RecordFields<T> {
    fn with_text(self, result_text: SharedText) -> ToolCallRecord {
        ToolCallRecord {
            tool_call_id: self.tool_call_id,
            tool_name: self.tool_name,
            args: self.args,
            result_text,
            is_error: self.is_error,
            turn_index: self.turn_index,
            timestamp: self.timestamp,
            result_timestamp: self.result_timestamp,
            spill_path: self.spill_path,
            spill_bytes: self.spill_bytes,
            result_preview: self.result_preview,
            content_hash: self.content_hash,
            extra: self.extra,
        }
    }
}

impl<'de> Deserialize<'de> for ToolCallRecord {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut fields = RecordFields::<SharedText>::deserialize(d)?;
        let text = std::mem::take(&mut fields.result_text);
        Ok(fields.with_text(text))
    }
}

/// `resultText` as raw JSON of any type (`None` when absent).
#[derive(Default)]
struct RawText<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for RawText<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&RawValue>::deserialize(d).map(|raw| RawText(Some(raw)))
    }
}

impl ToolCallRecord {
    /// The record's occurrence key.
    pub fn key(&self) -> OccurrenceKey {
        OccurrenceKey::new(self.tool_call_id.clone(), self.result_timestamp)
    }

    /// Reads a record whose JSON is `buf[range]`, its result text left in
    /// the buffer (see [`SharedText`]): for a reader that holds a whole
    /// session file in one buffer (condense-store); otherwise deserialize
    /// with serde. The result, or the error, is what `serde_json::from_str`
    /// gives for the same text.
    pub fn from_shared(buf: &Arc<String>, range: Range<usize>) -> serde_json::Result<Self> {
        let json = buf.get(range).unwrap_or_default();
        let shared = serde_json::from_str::<RecordFields<RawText<'_>>>(json)
            .ok()
            .and_then(|fields| {
                let text = match fields.result_text.0 {
                    None => SharedText::new(),
                    Some(raw) if raw.get().starts_with('"') => {
                        let at = raw.get().as_ptr() as usize - buf.as_ptr() as usize;
                        SharedText::from_checked_literal(
                            &Buffer::File(Arc::clone(buf)),
                            buf,
                            at..at + raw.get().len(),
                        )
                        .ok()?
                    }
                    // Not a string: the plain read reports it.
                    Some(_) => return None,
                };
                Some(fields.with_text(text))
            });
        match shared {
            Some(record) => Ok(record),
            None => serde_json::from_str(json),
        }
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

    /// `text` as the whole of a shared buffer, read both ways.
    fn both_ways(
        text: &str,
    ) -> (
        serde_json::Result<ToolCallRecord>,
        serde_json::Result<ToolCallRecord>,
    ) {
        let buf = Arc::new(text.to_owned());
        (
            ToolCallRecord::from_shared(&buf, 0..buf.len()),
            serde_json::from_str(text),
        )
    }

    #[test]
    fn shared_record_reads_like_an_owned_one() {
        for text in [
            r#"{"toolCallId":"c","toolName":"bash","args":{"command":"ls","env":[1,{"a":null}]},"resultText":"a\nb \"q\" é 😀 \u00e9","isError":true,"turnIndex":1,"timestamp":2,"resultTimestamp":3,"contentHash":"ab","future":{"a":1}}"#,
            r#"{"toolCallId":"c","toolName":"read","resultText":"plain"}"#,
            r#"{"toolCallId":"c","toolName":"read","resultText":""}"#,
            r#"{"toolCallId":"c","toolName":"read","spillPath":"/x","spillBytes":9,"resultPreview":"p"}"#,
            r#"{"toolCallId":"c","toolName":"read","resultText":"pair \ud83d\ude00"}"#,
        ] {
            let (shared, owned) = both_ways(text);
            let (shared, owned) = (shared.unwrap(), owned.unwrap());
            assert_eq!(shared, owned, "{text}");
            assert_eq!(
                serde_json::to_string(&shared).unwrap(),
                serde_json::to_string(&owned).unwrap()
            );
            assert!(!owned.result_text.is_shared());
        }
        let (shared, _) = both_ways(r#"{"toolCallId":"c","toolName":"bash","resultText":"x\ny"}"#);
        let shared = shared.unwrap();
        assert!(shared.result_text.is_shared());
        assert_eq!(shared.result_text, "x\ny");
    }

    #[test]
    fn shared_record_fails_as_an_owned_one_does() {
        for text in [
            r#"{"toolCallId":"c","toolName":"bash","resultText":null}"#,
            r#"{"toolCallId":"c","toolName":"bash","resultText":7}"#,
            r#"{"toolCallId":"c","toolName":"bash","resultText":"lone \ud83d"}"#,
            r#"{"toolCallId":"c","resultText":"x"}"#,
            r#"{"toolCallId":"c","toolName":"bash","resultText":"x","resultText":"y"}"#,
            r#"{"toolCallId":"c","toolName":"bash","turnIndex":"1"}"#,
            r#"["c"]"#,
        ] {
            let (shared, owned) = both_ways(text);
            assert_eq!(
                shared.map_err(|e| e.to_string()),
                owned.map_err(|e| e.to_string()),
                "{text}"
            );
        }
    }

    #[test]
    fn arguments_keep_their_order_and_values() {
        let text = r#"{"toolCallId":"c","toolName":"edit","args":{"path":"a","edits":[{"old":"x","new":"y"}],"n":1.5}}"#;
        let r: ToolCallRecord = serde_json::from_str(text).unwrap();
        assert_eq!(
            serde_json::to_string(&r.args).unwrap(),
            r#"{"path":"a","edits":[{"old":"x","new":"y"}],"n":1.5}"#
        );
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
