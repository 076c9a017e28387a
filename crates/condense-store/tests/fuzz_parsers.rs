//! Parsers never panic (docs/reliability.md): the session reader, the entry
//! decoders and replay, the config loader and `Message::from_json` are fed
//! arbitrary bytes and JSON, and mutated copies of real session files
//! (truncated lines, flipped bytes, changed types, duplicated ids, values of
//! the wrong type in every field). A panic anywhere fails the property.
//!
//! Also here, because they are about crafted input: config saves keep every
//! unknown key, and spill paths read from a crafted session never leave the
//! session's blob directory (through core's query and through `condense
//! query`), nor do blob names written for crafted tool-call ids.

use std::path::{Path, PathBuf};

use condense_core::query;
use condense_core::OccurrenceKey;
use condense_core::{replace_context_prune, Config};
use condense_core::{tool_result_text, Message};
use condense_core::{ChainEntry, Frontier, SummarizerStats, ToolCallRecord};
use condense_store::context::build_context;
use condense_store::entries::{
    CondenseEntry, DedupAliasEntryData, DiagnosticEntryData, FlushMetricsEntryData, IndexEntryData,
    SummaryMessageDetails, CONDENSE_CUSTOM_TYPES,
};
use condense_store::replay::{replay, replay_branch, ReplayEntry};
use condense_store::session::Session;
use condense_store::spill::{blob_dir, read_spill, sanitize_file_stem, write_blob};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{json, Map, Value};

// ---- inputs -----------------------------------------------------------------------------

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Real session files: the pi-condense 2.9.1 session, the hand-made ones,
/// and a generated pruned session with every entry type.
fn corpus() -> Vec<String> {
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
const KEYS: &[&str] = &[
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

fn key() -> impl Strategy<Value = String> {
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
fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// One edit of a session file's lines (indices are taken modulo the line count).
#[derive(Debug, Clone)]
enum Mutation {
    Truncate {
        line: usize,
        at: usize,
    },
    FlipByte {
        line: usize,
        at: usize,
        xor: u8,
    },
    ChangeType {
        line: usize,
        to: &'static str,
    },
    DuplicateId {
        from: usize,
        to: usize,
    },
    DeleteLine {
        line: usize,
    },
    DuplicateLine {
        line: usize,
    },
    SwapLines {
        a: usize,
        b: usize,
    },
    InsertGarbage {
        line: usize,
        bytes: Vec<u8>,
    },
    /// Sets a field of the line (or of its `data`/`message`/`details`, or of
    /// an object inside them) to an arbitrary value.
    SetField {
        line: usize,
        depth: usize,
        key: String,
        value: Value,
    },
    RemoveField {
        line: usize,
        depth: usize,
        key: String,
    },
    NoFinalNewline,
    CrLf,
}

const TYPES: &[&str] = &[
    "message",
    "custom",
    "custom_message",
    "compaction",
    "branch_summary",
    "session",
    "label",
    "model_change",
    "thinking_level_change",
    "session_info",
    "unknown_kind",
    "",
];

fn mutation() -> impl Strategy<Value = Mutation> {
    let n = any::<usize>();
    prop_oneof![
        1 => (n, n).prop_map(|(line, at)| Mutation::Truncate { line, at }),
        1 => (n, n, 1u8..=255).prop_map(|(line, at, xor)| Mutation::FlipByte { line, at, xor }),
        1 => (n, prop::sample::select(TYPES)).prop_map(|(line, to)| Mutation::ChangeType { line, to }),
        1 => (n, n).prop_map(|(from, to)| Mutation::DuplicateId { from, to }),
        1 => n.prop_map(|line| Mutation::DeleteLine { line }),
        1 => n.prop_map(|line| Mutation::DuplicateLine { line }),
        1 => (n, n).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
        1 => (n, prop::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(line, bytes)| Mutation::InsertGarbage { line, bytes }),
        3 => (n, 0usize..3, key(), json_value())
            .prop_map(|(line, depth, key, value)| Mutation::SetField { line, depth, key, value }),
        1 => (n, 0usize..3, key()).prop_map(|(line, depth, key)| Mutation::RemoveField { line, depth, key }),
        1 => Just(Mutation::NoFinalNewline),
        1 => Just(Mutation::CrLf),
    ]
}

/// The object a `SetField`/`RemoveField` of this depth edits.
fn target(v: &mut Value, depth: usize, pick: usize) -> Option<&mut Map<String, Value>> {
    if depth == 0 {
        return v.as_object_mut();
    }
    let nested: Vec<String> = v
        .as_object()?
        .iter()
        .filter(|(_, v)| v.is_object() || v.is_array())
        .map(|(k, _)| k.clone())
        .collect();
    if nested.is_empty() {
        return v.as_object_mut();
    }
    let key = nested[pick % nested.len()].clone();
    let child = v.as_object_mut()?.get_mut(&key)?;
    if let Some(len) = child.as_array().map(Vec::len).filter(|n| *n > 0) {
        return target(&mut child.as_array_mut()?[pick % len], depth - 1, pick);
    }
    target(child, depth - 1, pick)
}

fn apply(text: &str, mutations: &[Mutation]) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = text.lines().map(|l| l.as_bytes().to_vec()).collect();
    let mut final_newline = true;
    let mut crlf = false;
    for m in mutations {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match m {
            Mutation::Truncate { line, at } => {
                let l = &mut lines[line % n];
                let len = l.len();
                l.truncate(at % (len + 1));
            }
            Mutation::FlipByte { line, at, xor } => {
                let l = &mut lines[line % n];
                if !l.is_empty() {
                    let i = at % l.len();
                    l[i] ^= xor;
                }
            }
            Mutation::ChangeType { line, to } => {
                if let Ok(mut v) = serde_json::from_slice::<Value>(&lines[line % n]) {
                    if let Some(o) = v.as_object_mut() {
                        o.insert("type".into(), Value::from(*to));
                        lines[line % n] = v.to_string().into_bytes();
                    }
                }
            }
            Mutation::DuplicateId { from, to } => {
                let id = serde_json::from_slice::<Value>(&lines[from % n])
                    .ok()
                    .and_then(|v| v.get("id").cloned());
                if let (Some(id), Ok(mut v)) = (id, serde_json::from_slice::<Value>(&lines[to % n]))
                {
                    if let Some(o) = v.as_object_mut() {
                        o.insert("id".into(), id);
                        lines[to % n] = v.to_string().into_bytes();
                    }
                }
            }
            Mutation::DeleteLine { line } => {
                lines.remove(line % n);
            }
            Mutation::DuplicateLine { line } => {
                let l = lines[line % n].clone();
                lines.insert(line % n, l);
            }
            Mutation::SwapLines { a, b } => lines.swap(a % n, b % n),
            Mutation::InsertGarbage { line, bytes } => {
                let bytes: Vec<u8> = bytes.iter().copied().filter(|b| *b != b'\n').collect();
                lines.insert(line % (n + 1), bytes);
            }
            Mutation::SetField {
                line,
                depth,
                key,
                value,
            } => {
                if let Ok(mut v) = serde_json::from_slice::<Value>(&lines[line % n]) {
                    if let Some(o) = target(&mut v, *depth, line / n.max(1)) {
                        o.insert(key.clone(), value.clone());
                        lines[line % n] = v.to_string().into_bytes();
                    }
                }
            }
            Mutation::RemoveField { line, depth, key } => {
                if let Ok(mut v) = serde_json::from_slice::<Value>(&lines[line % n]) {
                    if let Some(o) = target(&mut v, *depth, line / n.max(1)) {
                        let k = if o.contains_key(key) {
                            Some(key.clone())
                        } else {
                            o.keys().nth(key.len() % o.len().max(1)).cloned()
                        };
                        if let Some(k) = k {
                            o.remove(&k);
                        }
                        lines[line % n] = v.to_string().into_bytes();
                    }
                }
            }
            Mutation::NoFinalNewline => final_newline = false,
            Mutation::CrLf => crlf = true,
        }
    }
    let sep: &[u8] = if crlf { b"\r\n" } else { b"\n" };
    let mut out = lines.join(sep);
    if final_newline && !out.is_empty() {
        out.extend_from_slice(sep);
    }
    out
}

// ---- what a reader does with a session ----------------------------------------------

/// Everything condense does with a session it reads: the branch, the context,
/// replay, every entry decoder, the render and queries of every record.
fn exercise(session: &Session, bytes: &[u8]) {
    let lines = bytes.iter().filter(|b| **b == b'\n').count() + 1;
    for p in &session.problems {
        assert!(
            p.line <= lines,
            "problem line {} past the file ({lines} lines)",
            p.line
        );
        let _ = p.to_string();
    }
    let _ = session.to_jsonl();
    let _ = session.leaf();
    let branch = session.branch(None);
    let ctx = build_context(&branch);
    assert_eq!(ctx.messages.len(), ctx.entry_ids.len());
    for e in &session.entries {
        let _ = session.branch(Some(&e.id));
        let _ = e.payload::<Value>();
        let _ = e.custom_message_fields();
        let _ = e.raw_field("summary");
        let _ = CondenseEntry::from_entry(e).map(|r| r.map(|c| c.payload_json()));
        let _ = condense_store::entries::summary_text(e);
    }
    let (state, _) = replay_branch(&branch);
    let config = Config {
        enabled: true,
        ..Config::default()
    };
    let protection = condense_core::Protection::new(&config);
    let settings = condense_core::RenderSettings {
        config: &config,
        protection: &protection,
    };
    let r = condense_core::render(&ctx.messages, &state, &settings);
    let _ = r.messages(&ctx.messages);
    let mut ids: Vec<String> = state
        .records()
        .iter()
        .flat_map(|r| [r.tool_call_id.clone(), r.key().to_string()])
        .collect();
    ids.extend(["t1".to_owned(), "nope".to_owned()]);
    let _ = query(&state, &ids, |_| None);
    let _ = condense_core::capture_pending(
        &ctx.messages,
        &vec![None; ctx.messages.len()],
        ctx.turns_before,
        &state,
        &protection,
        config.batching_mode,
        0,
    );
}

fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(n),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[test]
fn the_unmutated_corpus_reads_cleanly() {
    for (i, text) in corpus().iter().enumerate() {
        let s = Session::parse(text);
        let expected_torn = usize::from(i == 3);
        assert_eq!(
            s.problems.len(),
            expected_torn,
            "corpus {i}: {:?}",
            s.problems
        );
        let (_, problems) = replay_branch(&s.branch(None));
        assert!(problems.is_empty(), "corpus {i}: {problems:?}");
        exercise(&s, text.as_bytes());
    }
}

proptest! {
    #![proptest_config(cases(256))]

    /// Arbitrary bytes: the reader reports problems, never panics.
    #[test]
    fn session_reader_takes_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        exercise(&Session::from_bytes(bytes.clone()), &bytes);
    }

    /// Arbitrary lines of arbitrary JSON after a valid header.
    #[test]
    fn session_reader_takes_arbitrary_json_lines(values in prop::collection::vec(json_value(), 0..12)) {
        let mut text = String::from(r#"{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#);
        for v in values {
            text.push('\n');
            text.push_str(&v.to_string());
        }
        exercise(&Session::parse(&text), text.as_bytes());
    }

    /// Real sessions, mutated: truncated lines, flipped bytes, changed types,
    /// duplicate ids, moved lines, wrong-typed fields at every depth.
    #[test]
    fn session_reader_takes_mutated_sessions(
        which in 0usize..5,
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let corpus = corpus_cached();
        let bytes = apply(&corpus[which], &mutations);
        exercise(&Session::from_bytes(bytes.clone()), &bytes);
    }

    /// Replay folds arbitrary payloads under condense's custom types.
    #[test]
    fn replay_takes_arbitrary_payloads(
        entries in prop::collection::vec(
            (prop::sample::select(&CONDENSE_CUSTOM_TYPES[..]), any::<bool>(), json_value(), json_value()),
            0..10,
        ),
    ) {
        let items: Vec<ReplayEntry<'_>> = entries
            .iter()
            .map(|(ct, message, a, b)| {
                if *message {
                    ReplayEntry::CustomMessage { custom_type: ct, content: a, details: b }
                } else {
                    ReplayEntry::Custom { custom_type: ct, data: a }
                }
            })
            .collect();
        let (state, _) = replay(items);
        let _ = query(&state, &["t1".to_owned(), "b1".to_owned()], |_| None);
    }

    /// The entry payload types decode arbitrary JSON without panicking, and
    /// what they decode re-encodes to something they decode the same way.
    #[test]
    fn entry_payload_types_take_arbitrary_json(v in json_value()) {
        fn round<T>(v: &Value) -> Result<(), TestCaseError>
        where
            T: serde::de::DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug,
        {
            if let Ok(t) = serde_json::from_value::<T>(v.clone()) {
                let again: T = serde_json::from_value(serde_json::to_value(&t).expect("serializes"))
                    .map_err(|e| TestCaseError::fail(format!("re-decode: {e}")))?;
                prop_assert_eq!(again, t);
            }
            Ok(())
        }
        round::<IndexEntryData>(&v)?;
        round::<SummaryMessageDetails>(&v)?;
        round::<DedupAliasEntryData>(&v)?;
        round::<FlushMetricsEntryData>(&v)?;
        round::<DiagnosticEntryData>(&v)?;
        round::<ToolCallRecord>(&v)?;
        round::<ChainEntry>(&v)?;
        round::<Frontier>(&v)?;
        round::<SummarizerStats>(&v)?;
        let _ = condense_store::replay::summary_refs_of(&v);
        let _ = condense_store::replay::summary_text_of(&v);
    }

    /// `Message::from_json` on arbitrary text.
    #[test]
    fn message_from_json_takes_arbitrary_text(s in any::<String>()) {
        if let Ok(m) = Message::from_json(&s) {
            exercise_message(&m);
        }
    }

    /// `Message::from_json` on arbitrary JSON values and mutated real messages.
    #[test]
    fn message_from_json_takes_arbitrary_and_mutated_messages(
        v in json_value(),
        which in any::<usize>(),
        mutations in prop::collection::vec(mutation(), 0..4),
    ) {
        if let Ok(m) = Message::from_json(&v.to_string()) {
            exercise_message(&m);
        }
        let messages = corpus_messages();
        let original = &messages[which % messages.len()];
        let mutated = apply(original, &mutations);
        if let Ok(text) = std::str::from_utf8(&mutated) {
            for line in text.lines() {
                if let Ok(m) = Message::from_json(line) {
                    exercise_message(&m);
                }
            }
        }
    }

    /// The config loader takes any settings.json value, and what it saves
    /// reloads to the same config without a warning.
    #[test]
    fn config_loader_takes_arbitrary_settings(v in json_value(), block in json_value()) {
        let _ = Config::from_settings_file_value(&v);
        let _ = Config::from_settings_value(&v);
        let settings = json!({"contextPrune": block});
        let (config, _) = Config::from_settings_file_value(&settings);
        let saved = config.to_settings_file_value(&settings);
        let (again, warnings) = Config::from_settings_file_value(&saved);
        prop_assert_eq!(&again, &config);
        prop_assert!(warnings.is_empty(), "a saved block reloads with warnings: {:?}", warnings);
    }

    /// Saving keeps every key it does not own: other top-level keys (same
    /// values, same order), unknown keys of the block and of its nested
    /// objects.
    #[test]
    fn config_save_keeps_unknown_keys(
        top in prop::collection::vec(("[a-zA-Z]{1,8}", json_value()), 0..6),
        extra in prop::collection::vec(("x[a-zA-Z]{0,8}", json_value()), 0..6),
        nested_extra in prop::collection::vec(("x[a-zA-Z]{0,8}", json_value()), 0..4),
        known in prop::collection::vec((prop::sample::select(KEYS), json_value()), 0..6),
    ) {
        let mut block = Map::new();
        for (k, v) in &known {
            block.insert((*k).to_owned(), v.clone());
        }
        for (k, v) in &extra {
            block.insert(k.clone(), v.clone());
        }
        let nested: Map<String, Value> = nested_extra.iter().cloned().collect();
        block.insert("chainCompression".into(), Value::Object(nested.clone()));
        let mut settings = Map::new();
        for (k, v) in &top {
            if k != "contextPrune" {
                settings.insert(k.clone(), v.clone());
            }
        }
        settings.insert("contextPrune".into(), Value::Object(block.clone()));
        let settings = Value::Object(settings);
        let (config, _) = Config::from_settings_file_value(&settings);
        let saved = config.to_settings_file_value(&settings);
        let (before, after) = (settings.as_object().unwrap(), saved.as_object().unwrap());
        let keys = |m: &Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
        prop_assert_eq!(keys(before), keys(after), "top-level keys and their order");
        for (k, v) in before {
            if k != "contextPrune" {
                prop_assert_eq!(Some(v), after.get(k), "top-level {}", k);
            }
        }
        let saved_block = after["contextPrune"].as_object().unwrap();
        for (k, v) in &block {
            let known_key = Config::default().to_settings_value(&Value::Null).get(k).is_some();
            if !known_key {
                prop_assert_eq!(Some(v), saved_block.get(k), "block key {}", k);
            }
        }
        let saved_nested = saved_block["chainCompression"].as_object().unwrap();
        for (k, v) in &nested {
            prop_assert_eq!(Some(v), saved_nested.get(k), "chainCompression.{}", k);
        }
        // replace_context_prune keeps everything else too.
        let replaced = replace_context_prune(&settings, json!({"enabled": true}));
        prop_assert_eq!(keys(replaced.as_object().unwrap()), keys(before));
    }

    /// Small text parsers: ISO timestamps, occurrence keys, spill file names.
    #[test]
    fn small_parsers_take_arbitrary_text(s in any::<String>()) {
        if let Some(ms) = condense_store::time::parse_iso(&s) {
            let _ = condense_store::time::format_iso(ms);
        }
        let key = OccurrenceKey::parse(&s);
        prop_assert_eq!(OccurrenceKey::parse(&key.to_string()), key);
        let stem = sanitize_file_stem(&s);
        prop_assert!(!stem.is_empty() && !stem.starts_with('.'));
        prop_assert!(stem.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b)));
    }
}

fn exercise_message(m: &Message) {
    let _ = m.skeleton();
    let _ = m.to_exact_value();
    let text = m.result_text();
    let _ = (
        m.size(),
        m.role(),
        m.timestamp(),
        m.is_text_only_assistant(),
        m.is_summary_message(),
    );
    // A value serde cannot hold (a number out of range) is an error, not a
    // panic; one it holds is a message again, with the same text.
    if let Ok(v) = m.to_value() {
        assert_eq!(tool_result_text(&v), text);
        let again = Message::from_value(&v).expect("a message's own value is a message");
        assert_eq!(again.skeleton().role, m.skeleton().role);
    }
}

fn corpus_cached() -> &'static [String] {
    static CORPUS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(corpus)
}

/// The `message` fields of the corpus's message entries, as JSON text.
fn corpus_messages() -> &'static [String] {
    static MESSAGES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    MESSAGES.get_or_init(|| {
        corpus_cached()
            .iter()
            .flat_map(|t| {
                Session::parse(t)
                    .entries
                    .iter()
                    .filter_map(|e| e.message.as_ref().map(|m| m.json().to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect()
    })
}

// ---- crafted sessions: spill paths stay inside the blob directory ------------------

const SECRET: &str = "TOP SECRET outside the blob dir";

/// A session whose index points spill paths outside its blob directory:
/// an absolute path, `..` traversals (absolute and relative), and a symlink
/// inside the blob directory pointing outside. `ok` is a legitimate blob.
struct Crafted {
    _dir: tempfile::TempDir,
    path: PathBuf,
    blobs: PathBuf,
    ids: Vec<(&'static str, String)>,
}

fn crafted_session() -> Crafted {
    let dir = tempfile::tempdir().expect("tempdir");
    let session_id = "0190f5a1-0000-7000-8000-00000000c0de";
    let path = dir.path().join(format!("{session_id}.jsonl"));
    let blobs = blob_dir(&path, session_id);
    std::fs::create_dir_all(&blobs).expect("blob dir");
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, SECRET).expect("secret");
    std::fs::write(blobs.join("ok@2.txt"), "THE LEGITIMATE BLOB").expect("blob");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&secret, blobs.join("link@2.txt")).expect("symlink");
    let ids = vec![
        ("abs", "/etc/passwd".to_owned()),
        ("abs2", secret.display().to_string()),
        ("traversal", format!("{}/../secret.txt", blobs.display())),
        ("relative", "../secret.txt".to_owned()),
        ("link", blobs.join("link@2.txt").display().to_string()),
        ("ok", blobs.join("ok@2.txt").display().to_string()),
    ];
    let records: Vec<Value> = ids
        .iter()
        .map(|(id, spill)| {
            json!({"toolCallId": id, "toolName": "bash", "args": {"command": "cat"}, "resultText": "",
                "isError": false, "turnIndex": 0, "timestamp": 1, "resultTimestamp": 2,
                "spillPath": spill, "spillBytes": 99, "resultPreview": format!("PREVIEW of {id}")})
        })
        .collect();
    let header = json!({"type": "session", "version": 3, "id": session_id,
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
    let index = json!({"type": "custom", "customType": "context-prune-index",
        "data": {"toolCalls": records}, "id": "0000aaaa", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z"});
    std::fs::write(&path, format!("{header}\n{index}\n")).expect("session");
    Crafted {
        _dir: dir,
        path,
        blobs,
        ids,
    }
}

fn expected_body(id: &str) -> String {
    if id == "ok" {
        "THE LEGITIMATE BLOB".to_owned()
    } else {
        format!("PREVIEW of {id}")
    }
}

#[test]
fn crafted_spill_paths_are_refused_by_the_core_query() {
    let c = crafted_session();
    let session = Session::open(&c.path).expect("opens");
    let (state, problems) = replay_branch(&session.branch(None));
    assert!(problems.is_empty(), "{problems:?}");
    for (id, spill) in &c.ids {
        let out = query(&state, &[(*id).to_owned()], |r| read_spill(&c.blobs, r));
        assert!(
            !out.text.contains(SECRET) && !out.text.contains("root:"),
            "{spill} leaked"
        );
        assert!(
            out.text.ends_with(&expected_body(id)),
            "{id} ({spill}): {}",
            out.text
        );
    }
}

/// The `condense` binary next to this test's (built by `cargo test
/// --workspace`); `None` when only this package was built.
fn condense_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.parent()?;
    let bin = dir.join(format!("condense{}", std::env::consts::EXE_SUFFIX));
    bin.is_file().then_some(bin)
}

#[test]
fn crafted_spill_paths_are_refused_by_condense_query() {
    let Some(bin) = condense_binary() else {
        eprintln!("skipped: the condense binary is not built (cargo test --workspace builds it)");
        return;
    };
    let c = crafted_session();
    let agent = tempfile::tempdir().expect("agent dir");
    for (id, spill) in &c.ids {
        let out = std::process::Command::new(&bin)
            .args(["query", c.path.to_str().expect("utf-8"), id])
            .env("PI_CODING_AGENT_DIR", agent.path())
            .output()
            .expect("condense runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !text.contains(SECRET) && !text.contains("root:"),
            "{spill} leaked"
        );
        assert!(
            text.trim_end().ends_with(&expected_body(id)),
            "{id} ({spill}): {text}"
        );
    }
}

/// Crafted tool-call ids never put a blob outside the blob directory.
#[test]
fn blob_names_stay_inside_the_blob_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let blobs = dir.path().join("s-blobs");
    for id in [
        "../../etc/passwd",
        "/abs/path",
        "..",
        ".",
        "",
        ".hidden",
        "a/../../b",
        "c:\\windows\\x",
        "nul\u{0}byte",
        "é😀",
    ] {
        for ts in [None, Some(5)] {
            let key = OccurrenceKey::new(id, ts);
            let b = write_blob(&blobs, &key, "x").unwrap_or_else(|e| panic!("{id:?}: {e}"));
            assert_eq!(
                b.path.parent(),
                Some(blobs.canonicalize().expect("blob dir").as_path()),
                "{id:?}"
            );
            let name = b.path.file_name().and_then(|n| n.to_str()).expect("name");
            assert!(!name.starts_with('.'), "{id:?} gives a hidden name {name}");
        }
    }
}

/// Two different occurrences never share a blob file: sanitizing must not
/// map two keys to one name (a second spill would replace the first's
/// output, and the first record would read back someone else's text).
#[test]
fn different_keys_never_share_a_blob() {
    let dir = tempfile::tempdir().expect("tempdir");
    let blobs = dir.path().join("s-blobs");
    let keys = [
        "w/1",
        "w:1",
        "w_1",
        "w|1",
        "w\\1",
        "call_1|fc_1",
        "call_1_fc_1",
    ];
    let mut paths = Vec::new();
    for k in keys {
        let key = OccurrenceKey::new(k, Some(7));
        let b = write_blob(&blobs, &key, &format!("output of {k}")).expect("write");
        paths.push(b.path);
    }
    for (k, p) in keys.iter().zip(&paths) {
        assert_eq!(
            std::fs::read_to_string(p).expect("blob"),
            format!("output of {k}"),
            "{k}'s blob was overwritten"
        );
    }
    // A very long id still spills (file names are limited to 255 bytes).
    let long = "x".repeat(400);
    let b =
        write_blob(&blobs, &OccurrenceKey::new(long.as_str(), Some(1)), "long").expect("long id");
    assert_eq!(std::fs::read_to_string(b.path).expect("blob"), "long");
}

/// The blob directory comes from the session id in the file's header, which
/// a crafted session controls: it must stay beside the session file.
#[test]
fn a_crafted_session_id_keeps_the_blob_directory_beside_the_session() {
    let session = Path::new("/sessions/project/s.jsonl");
    for id in [
        "/etc/x",
        "../../x",
        "a/b",
        "..",
        "0190f5a1-0000-7000-8000-00000000c0de",
    ] {
        let dir = blob_dir(session, id);
        assert_eq!(
            dir.parent(),
            Some(Path::new("/sessions/project")),
            "{id}: {}",
            dir.display()
        );
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(
            name.ends_with("-blobs") && !name.starts_with('.'),
            "{id}: {name}"
        );
    }
}
