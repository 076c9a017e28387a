//! What the properties feed the parsers: real session files, and arbitrary
//! JSON biased toward the field names condense reads.

use std::path::{Path, PathBuf};

use condense_store::session::Session;
use proptest::prelude::*;
use serde_json::{Map, Value};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Real session files: the pi-condense 2.9.1 session, the hand-made ones,
/// and a generated pruned session with every entry type.
pub fn corpus() -> Vec<String> {
    let mut out: Vec<String> = [
        "pi-condense-2.9.1.jsonl",
        "reused-ids.jsonl",
        "legacy-bare-ids.jsonl",
        "torn-last-line.jsonl",
    ]
    .iter()
    .map(|n| std::fs::read_to_string(fixture_dir().join(n)).expect("fixture"))
    .collect();
    let opts = condense_gen::SynthOptions {
        seed: 3,
        shape: condense_gen::Shape::Realistic { tasks: 4 },
        pruned: true,
        ..Default::default()
    };
    out.push(condense_gen::generate(&opts));
    out
}

/// Keys the decoders look for, so arbitrary objects hit real fields.
pub const KEYS: &[&str] = &[
    "type",
    "id",
    "parentId",
    "timestamp",
    "version",
    "message",
    "role",
    "content",
    "text",
    "customType",
    "data",
    "details",
    "display",
    "toolCalls",
    "toolCallId",
    "toolName",
    "args",
    "arguments",
    "input",
    "resultText",
    "isError",
    "turnIndex",
    "resultTimestamp",
    "spillPath",
    "spillBytes",
    "resultPreview",
    "contentHash",
    "backfilled",
    "refs",
    "shortId",
    "toolCallRefs",
    "toolCallIds",
    "blockId",
    "startUserTimestamp",
    "droppedToolCallIds",
    "finalAssistantTimestamp",
    "toolRefs",
    "compressedAt",
    "rangeSummaryText",
    "droppedOccurrenceKeys",
    "protectedToolCallIds",
    "lastAttemptedToolCallId",
    "lastAttemptedTurnIndex",
    "outcome",
    "totalCost",
    "callCount",
    "newToolCallId",
    "originalToolCallId",
    "newResultTimestamp",
    "contextPrune",
    "enabled",
    "minBatchChars",
    "chainCompression",
    "rollingWindow",
    "protectedPaths",
    "protectedTools",
    "spillThreshold",
    "autoBudgetThreshold",
    "purgeErrors",
    "thinkingStrip",
    "keepLastTurns",
    "firstKeptEntryId",
    "summary",
    "thinking",
    "toolCall",
    "usage",
    "stopReason",
];

const STRINGS: &[&str] = &[
    "",
    "message",
    "custom",
    "custom_message",
    "compaction",
    "branch_summary",
    "session",
    "user",
    "assistant",
    "toolResult",
    "toolCall",
    "text",
    "thinking",
    "bashExecution",
    "context-prune-index",
    "context-prune-summary",
    "context-prune-chain",
    "context-prune-dedup-alias",
    "context-prune-frontier",
    "context-prune-stats",
    "t1",
    "b1",
    "bash_1",
    "bash_1@1796000001150",
    "@",
    "@@1",
    "2026-01-01T00:00:00.000Z",
    "not a date",
    "../../etc/passwd",
    "/etc/passwd",
    "**/skills/**",
    "[",
    "\u{0}",
    "\u{2028}",
    "é😀",
    "summarized",
    "skipped-trivial",
    "agent-message",
    "turn",
    "default",
];

pub fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => "[a-zA-Z]{0,6}",
        1 => any::<String>(),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![
            Just(0i64),
            Just(-1),
            Just(1),
            Just(1_796_000_001_150),
            Just(i64::MAX)
        ]
        .prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop::sample::select(STRINGS).prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ]
}

/// Arbitrary JSON, biased toward the field names condense reads.
pub fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// The corpus, read once per test binary.
pub fn corpus_cached() -> &'static [String] {
    static CORPUS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(corpus)
}

/// The `message` fields of the corpus's message entries, as JSON text.
pub fn corpus_messages() -> &'static [String] {
    static MESSAGES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    MESSAGES.get_or_init(|| {
        corpus_cached()
            .iter()
            .flat_map(|t| {
                Session::parse(t)
                    .entries
                    .iter()
                    .filter_map(|e| e.message.as_ref().map(|m| m.json().to_string()))
                    .collect::<Vec<_>>()
            })
            .collect()
    })
}
