//! Parsers never panic (docs/reliability.md): the session reader, the entry
//! decoders and replay, the config loader and `Message::from_json` are fed
//! arbitrary bytes and JSON, and mutated copies of real session files
//! (truncated lines, flipped bytes, changed types, duplicated ids, values of
//! the wrong type in every field). A panic anywhere fails the property.
//!
//! Also here, because they are about arbitrary input: config saves keep every
//! unknown key. Crafted spill paths are `crafted_spill_paths.rs`'s.

mod exercise;
mod inputs;
mod mutation;

use condense_core::query;
use condense_core::OccurrenceKey;
use condense_core::{replace_context_prune, Config};
use condense_core::{ChainEntry, Frontier, Message, SummarizerStats, ToolCallRecord};
use condense_store::entries::{
    DedupAliasEntryData, DiagnosticEntryData, FlushMetricsEntryData, IndexEntryData,
    SummaryMessageDetails, CONDENSE_CUSTOM_TYPES,
};
use condense_store::replay::{replay, replay_branch, ReplayEntry};
use condense_store::session::Session;
use condense_store::spill::sanitize_file_stem;
use exercise::{exercise, exercise_message};
use inputs::{corpus, corpus_cached, corpus_messages, json_value, KEYS};
use mutation::{apply, mutation};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{json, Map, Value};

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
