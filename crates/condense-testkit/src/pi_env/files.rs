//! The files pi reads and writes: `models.json` for the fake provider,
//! extensions, and session JSONL.

use std::fs;
use std::path::Path;

use serde_json::{json, Value};

use super::{MODEL, PROVIDER};

/// The default `models.json` for provider [`PROVIDER`] / model [`MODEL`]
/// served at `base_url` (e.g. [`crate::fake_llm::FakeLlm::base_url`]).
pub fn models_json(base_url: &str) -> Value {
    json!({
        "providers": {
            PROVIDER: {
                "baseUrl": base_url,
                "api": "openai-completions",
                "apiKey": "sk-fake-e2e",
                "compat": {"supportsDeveloperRole": false, "supportsStore": false},
                "models": [{"id": MODEL, "contextWindow": 32000, "maxTokens": 4096}],
            }
        }
    })
}

/// Deep-merges `patch` into `base` (objects merge key by key; anything else
/// replaces).
pub fn merge_json(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, value) in patch {
                merge_json(base.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (base, patch) => *base = patch.clone(),
    }
}

/// Writes a pi extension package into `dir`: a `package.json` whose
/// `pi.extensions` is `["./index.ts"]`, plus `files` (`(relative path,
/// contents)`, which should include `index.ts`).
pub fn write_extension(dir: &Path, files: &[(&str, &str)]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let manifest = json!({
        "name": "condense-e2e-extension",
        "private": true,
        "type": "module",
        "pi": {"extensions": ["./index.ts"]},
    });
    fs::write(
        dir.join("package.json"),
        serde_json::to_string_pretty(&manifest)?,
    )?;
    for (path, contents) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(path, contents)?;
    }
    Ok(())
}

/// Reads a JSONL file (a pi session) into values; panics on unreadable
/// files or lines that are not JSON.
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text =
        fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| {
                panic!("{} line {}: not JSON ({e}): {l}", path.display(), i + 1)
            })
        })
        .collect()
}

/// The `message` payloads of a session's `type: "message"` entries, in file
/// order.
pub fn session_messages(entries: &[Value]) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("message"))
        .filter_map(|e| e.get("message").cloned())
        .collect()
}

/// The text of a pi message's `content` (a string, or the `text` of its
/// parts joined).
pub fn pi_message_text(message: &Value) -> String {
    crate::fake_llm::message_text(message)
}
