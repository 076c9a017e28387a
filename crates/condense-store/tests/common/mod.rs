//! Helpers shared by the integration tests.
#![allow(dead_code)]

#[macro_use]
pub mod cases;

use std::path::PathBuf;

use condense_core::{render, Branch, Config, Message, Protection, RenderSettings};

/// The messages the model is sent for `messages` under `state`, each as its
/// JSON text.
pub fn rendered(messages: &[Message], state: &Branch, config: &Config) -> Vec<String> {
    let protection = Protection::new(config);
    let settings = RenderSettings {
        config,
        protection: &protection,
    };
    render(messages, state, &settings)
        .messages(messages)
        .iter()
        .map(|m| m.json().to_string())
        .collect()
}

/// The crate's copy of the pi-condense 2.9.1 fixture session.
pub fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi-condense-2.9.1.jsonl")
}

/// The fixture session's text.
pub fn fixture_text() -> String {
    std::fs::read_to_string(fixture_path()).expect("fixture copy is in the repo")
}

/// The shared original of the fixture, when the checkout has `shared/` beside it.
pub fn shared_fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/pi-condense-2.9.1")
}

/// A v3 header line.
pub const HEADER: &str = r#"{"type":"session","version":3,"id":"0000-1111","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

/// A `label` entry line with the given id and parent.
pub fn label(id: &str, parent: Option<&str>) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"label","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","targetId":"{id}","label":"l"}}"#
    )
}

/// A user `message` entry line.
pub fn user(id: &str, parent: Option<&str>, ts: i64) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"m{id}","timestamp":{ts}}}}}"#
    )
}
