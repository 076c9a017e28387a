//! Golden tests: condense's entries serialize to the exact bytes pi-condense writes.

mod common;

use condense_core::{
    ChainEntry, Frontier, FrontierOutcome, SummarizerStats, SummaryRef, ToolCallRecord,
};
use condense_store::append::{custom_entry_line, custom_message_entry_line, EntryBase};
use condense_store::entries::*;
use condense_store::session::{EntryType, Session};
use serde_json::{json, Map, Value};

const BASE: EntryBase<'static> = EntryBase {
    id: "0a1b2c3d",
    parent_id: Some("99887766"),
    timestamp: "2026-11-29T16:32:20.870Z",
};
const TAIL: &str =
    r#","id":"0a1b2c3d","parentId":"99887766","timestamp":"2026-11-29T16:32:20.870Z"}"#;

fn custom_line(entry: &CondenseEntry) -> String {
    let data: Value = serde_json::from_str(&entry.payload_json().unwrap()).unwrap();
    custom_entry_line(entry.custom_type(), &data, &BASE).unwrap()
}

fn record(id: &str, ts: i64) -> ToolCallRecord {
    ToolCallRecord {
        tool_call_id: id.into(),
        tool_name: "read".into(),
        args: json!({"path": "a.py"}),
        result_text: "x\ny".into(),
        is_error: false,
        turn_index: 0,
        timestamp: ts - 5,
        result_timestamp: Some(ts),
        spill_path: None,
        spill_bytes: None,
        result_preview: None,
        content_hash: None,
        extra: Map::new(),
    }
}

fn sref(short: &str, id: &str, ts: Option<i64>) -> SummaryRef {
    SummaryRef {
        short_id: short.into(),
        tool_call_id: id.into(),
        result_timestamp: ts,
    }
}

#[test]
fn index_entry() {
    let e = CondenseEntry::Index(IndexEntryData {
        tool_calls: vec![record("call_0", 100)],
        backfilled: None,
        refs: None,
        extra: Map::new(),
    });
    assert_eq!(
        custom_line(&e),
        String::from(
            r#"{"type":"custom","customType":"context-prune-index","data":{"toolCalls":[{"toolCallId":"call_0","toolName":"read","args":{"path":"a.py"},"resultText":"x\ny","isError":false,"turnIndex":0,"timestamp":95,"resultTimestamp":100}]}"#
        ) + TAIL
    );
    let backfilled = CondenseEntry::Index(IndexEntryData {
        tool_calls: vec![],
        backfilled: Some(true),
        refs: Some(vec![sref("t6", "call_6", Some(7))]),
        extra: Map::new(),
    });
    assert_eq!(
        backfilled.payload_json().unwrap(),
        r#"{"toolCalls":[],"backfilled":true,"refs":[{"shortId":"t6","toolCallId":"call_6","resultTimestamp":7}]}"#
    );
}

#[test]
fn summary_custom_message() {
    let details = SummaryMessageDetails {
        tool_call_refs: Some(vec![sref("t1", "call_0", Some(1795969940838))]),
        tool_call_ids: None,
        tool_names: vec!["read".into()],
        turn_index: 0,
        timestamp: 1795969940832,
        extra: Map::new(),
    };
    let line = custom_message_entry_line(
        CUSTOM_TYPE_SUMMARY,
        "- `t1` ran read.",
        false,
        &details,
        &BASE,
    )
    .unwrap();
    assert_eq!(
        line,
        String::from(
            r#"{"type":"custom_message","customType":"context-prune-summary","content":"- `t1` ran read.","display":false,"details":{"toolCallRefs":[{"shortId":"t1","toolCallId":"call_0","resultTimestamp":1795969940838}],"toolNames":["read"],"turnIndex":0,"timestamp":1795969940832}"#
        ) + TAIL
    );
}

#[test]
fn frontier_entry() {
    let e = CondenseEntry::Frontier(Frontier {
        last_attempted_tool_call_id: "call_1".into(),
        last_attempted_tool_name: "read".into(),
        last_attempted_turn_index: 1,
        last_attempted_timestamp: 1795969940847,
        attempted_batch_count: 2,
        attempted_tool_call_count: 2,
        raw_char_count: 10050,
        summary_char_count: 342,
        outcome: FrontierOutcome::SkippedTrivial,
        extra: Map::new(),
    });
    assert_eq!(
        custom_line(&e),
        String::from(
            r#"{"type":"custom","customType":"context-prune-frontier","data":{"lastAttemptedToolCallId":"call_1","lastAttemptedToolName":"read","lastAttemptedTurnIndex":1,"lastAttemptedTimestamp":1795969940847,"attemptedBatchCount":2,"attemptedToolCallCount":2,"rawCharCount":10050,"summaryCharCount":342,"outcome":"skipped-trivial"}"#
        ) + TAIL
    );
}

#[test]
fn dedup_alias_entry() {
    let e = CondenseEntry::DedupAlias(DedupAliasEntryData {
        new_tool_call_id: "call_6".into(),
        original_tool_call_id: "call_0".into(),
        new_result_timestamp: Some(2),
        original_result_timestamp: Some(1),
        hash: None,
        extra: Map::new(),
    });
    assert_eq!(
        custom_line(&e),
        String::from(
            r#"{"type":"custom","customType":"context-prune-dedup-alias","data":{"newToolCallId":"call_6","originalToolCallId":"call_0","newResultTimestamp":2,"originalResultTimestamp":1}"#
        ) + TAIL
    );
}

#[test]
fn chain_entry() {
    let e = CondenseEntry::Chain(ChainEntry {
        block_id: "b1".into(),
        start_user_timestamp: 10,
        dropped_tool_call_ids: vec!["call_0".into()],
        final_assistant_timestamp: None,
        tool_refs: vec!["t1".into()],
        compressed_at: 20,
        range_summary_text: Some("fused".into()),
        dropped_occurrence_keys: Some(vec!["call_0@15".into()]),
        protected_tool_call_ids: None,
        body_source: None,
        extra: Map::new(),
    });
    assert_eq!(
        custom_line(&e),
        String::from(
            r#"{"type":"custom","customType":"context-prune-chain","data":{"blockId":"b1","startUserTimestamp":10,"droppedToolCallIds":["call_0"],"finalAssistantTimestamp":null,"toolRefs":["t1"],"compressedAt":20,"rangeSummaryText":"fused","droppedOccurrenceKeys":["call_0@15"]}"#
        ) + TAIL
    );
}

#[test]
fn stats_entry_writes_integral_cost_as_javascript_does() {
    let mut stats = SummarizerStats {
        total_input_tokens: 1568,
        total_output_tokens: 40,
        call_count: 2,
        ..Default::default()
    };
    let e = CondenseEntry::Stats(stats.clone());
    assert_eq!(
        custom_line(&e),
        String::from(
            r#"{"type":"custom","customType":"context-prune-stats","data":{"totalInputTokens":1568,"totalOutputTokens":40,"totalCost":0,"callCount":2,"chainsCompressed":0,"rangesSummarized":0}"#
        ) + TAIL
    );
    stats.total_cost = 0.0012;
    assert_eq!(
        CondenseEntry::Stats(stats).payload_json().unwrap(),
        r#"{"totalInputTokens":1568,"totalOutputTokens":40,"totalCost":0.0012,"callCount":2,"chainsCompressed":0,"rangesSummarized":0}"#
    );
}

#[test]
fn flush_metrics_entry() {
    let e = CondenseEntry::FlushMetrics(FlushMetricsEntryData {
        ts: 1795969940871,
        trigger: "message-end".into(),
        captured_batches: 2,
        processed_batches: 2,
        outcome: "summarized".into(),
        metrics: FlushMetrics {
            open_cycle_thinking_tokens: 0,
            largest_chain_share_pct: 100.0,
            frontier_gap_tokens: 2658,
            extra: Map::new(),
        },
        extra: Map::new(),
    });
    assert_eq!(
        custom_line(&e),
        String::from(
            r#"{"type":"custom","customType":"context-prune-flush-metrics","data":{"ts":1795969940871,"trigger":"message-end","capturedBatches":2,"processedBatches":2,"outcome":"summarized","metrics":{"openCycleThinkingTokens":0,"largestChainSharePct":100,"frontierGapTokens":2658}}"#
        ) + TAIL
    );
}

#[test]
fn diagnostic_entry() {
    let e = CondenseEntry::Diagnostic(DiagnosticEntryData {
        kind: "orphan-sweep".into(),
        detail: "dropped 1 orphan".into(),
        extra: Map::new(),
    });
    assert_eq!(
        custom_line(&e),
        String::from(
            r#"{"type":"custom","customType":"context-prune-diagnostic","data":{"kind":"orphan-sweep","detail":"dropped 1 orphan"}"#
        ) + TAIL
    );
}

#[test]
fn unknown_payload_fields_survive() {
    let text = r#"{"kind":"x","detail":"y","future":{"z":[1,2.5]}}"#;
    let d: DiagnosticEntryData = serde_json::from_str(text).unwrap();
    assert_eq!(d.extra["future"], json!({"z": [1, 2.5]}));
    assert_eq!(condense_store::json::to_string(&d).unwrap(), text);
}

/// Every condense entry of the fixture, parsed into its type and written
/// back with the entry's own base fields, is byte-identical to its line.
#[test]
fn fixture_entries_round_trip_byte_identically() {
    let s = Session::parse(&common::fixture_text());
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for entry in &s.entries {
        let Some(parsed) = CondenseEntry::from_entry(entry) else {
            assert!(
                !matches!(entry.kind, EntryType::Custom | EntryType::CustomMessage),
                "line {}: a custom entry condense does not read",
                entry.line
            );
            continue;
        };
        let parsed = parsed.unwrap_or_else(|e| panic!("line {}: {e}", entry.line));
        *seen.entry(parsed.custom_type()).or_default() += 1;
        let base = EntryBase {
            id: &entry.id,
            parent_id: entry.parent_id.as_deref(),
            timestamp: &entry.timestamp,
        };
        let payload_text = parsed.payload_json().unwrap();
        let payload: &serde_json::value::RawValue = serde_json::from_str(&payload_text).unwrap();
        let line = match entry.kind {
            EntryType::CustomMessage => {
                let content: Value =
                    serde_json::from_str(entry.raw_field("content").unwrap()).unwrap();
                let display: bool =
                    serde_json::from_str(entry.raw_field("display").unwrap()).unwrap();
                custom_message_entry_line(parsed.custom_type(), &content, display, payload, &base)
                    .unwrap()
            }
            _ => custom_entry_line(parsed.custom_type(), payload, &base).unwrap(),
        };
        if matches!(parsed, CondenseEntry::Chain(_)) && line != entry.raw() {
            // See `fixture_chain_entries_keep_pi_condense_key_order`: until core's
            // `ChainEntry` orders its optional fields as pi-condense does, only
            // the value is compared here.
            let got: Value = serde_json::from_str(&line).unwrap();
            let want: Value = serde_json::from_str(entry.raw()).unwrap();
            assert_eq!(got, want, "line {}", entry.line);
            continue;
        }
        assert_eq!(line, entry.raw(), "line {}", entry.line);
    }
    let expected = [
        (CUSTOM_TYPE_CHAIN, 3),
        (CUSTOM_TYPE_DEDUP_ALIAS, 1),
        (CUSTOM_TYPE_FLUSH_METRICS, 6),
        (CUSTOM_TYPE_FRONTIER, 6),
        (CUSTOM_TYPE_INDEX, 6),
        (CUSTOM_TYPE_STATS, 9),
        (CUSTOM_TYPE_SUMMARY, 5),
    ];
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), expected);
}

/// pi-condense builds a chain entry as `{blockId, startUserTimestamp,
/// droppedToolCallIds, finalAssistantTimestamp, toolRefs, compressedAt,
/// rangeSummaryText?, bodySource?, protectedToolCallIds?,
/// droppedOccurrenceKeys?}`; fixture line 64 has `bodySource` before
/// `droppedOccurrenceKeys`.
#[test]
fn fixture_chain_entries_keep_pi_condense_key_order() {
    let s = Session::parse(&common::fixture_text());
    for entry in s.entries.iter().filter(|e| e.is_custom(CUSTOM_TYPE_CHAIN)) {
        let Some(Ok(parsed)) = CondenseEntry::from_entry(entry) else {
            panic!("line {}", entry.line)
        };
        let payload_text = parsed.payload_json().unwrap();
        let payload: &serde_json::value::RawValue = serde_json::from_str(&payload_text).unwrap();
        let base = EntryBase {
            id: &entry.id,
            parent_id: entry.parent_id.as_deref(),
            timestamp: &entry.timestamp,
        };
        assert_eq!(
            custom_entry_line(CUSTOM_TYPE_CHAIN, payload, &base).unwrap(),
            entry.raw(),
            "line {}",
            entry.line
        );
    }
}

#[test]
fn summary_text_reads_strings_and_blocks() {
    let s = Session::parse(&format!(
        "{}\n{}\n{}\n",
        common::HEADER,
        r#"{"type":"custom_message","customType":"context-prune-summary","content":"plain","display":false,"details":{"toolCallIds":["c"]},"id":"a1","parentId":null,"timestamp":"t"}"#,
        r#"{"type":"custom_message","customType":"context-prune-summary","content":[{"type":"text","text":"x"},{"type":"image","data":"","mimeType":"image/png"},{"type":"text","text":"y"}],"display":false,"id":"a2","parentId":"a1","timestamp":"t"}"#,
    ));
    assert_eq!(summary_text(&s.entries[0]).as_deref(), Some("plain"));
    assert_eq!(summary_text(&s.entries[1]).as_deref(), Some("x\ny"));
    let Some(Ok(CondenseEntry::Summary(d))) = CondenseEntry::from_entry(&s.entries[0]) else {
        panic!()
    };
    assert_eq!(d.refs()[0].short_id, "c");
    // A summary without details reads as an error, not as a panic or a skip.
    assert!(matches!(
        CondenseEntry::from_entry(&s.entries[1]),
        Some(Err(_))
    ));
}
