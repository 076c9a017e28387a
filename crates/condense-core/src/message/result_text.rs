//! The text a tool result carries, read from its JSON or from a `Value`.

use serde::Deserialize;
use serde_json::Value;

use super::skeleton::{raw_str, ContentDe};

/// `content` alone, read with the skeleton's lenient block reader.
#[derive(Deserialize)]
struct ContentOnlyDe<'a> {
    #[serde(borrow, default)]
    content: Option<ContentDe<'a>>,
}

/// [`Message::result_text`](super::Message::result_text) on one JSON text; `None` when a text block's
/// string cannot be decoded (a lone surrogate).
pub(super) fn result_text_of(json: &str) -> Option<String> {
    let parsed: ContentOnlyDe = serde_json::from_str(json).ok()?;
    match parsed.content {
        Some(ContentDe::Text(s)) => Some(s.into_owned()),
        Some(ContentDe::Blocks(blocks)) => {
            let mut out = String::new();
            let mut first = true;
            for b in blocks {
                if raw_str(b.kind).as_deref() != Some("text") {
                    continue;
                }
                let Some(text) = b.text.filter(|t| t.get().starts_with('"')) else {
                    continue;
                };
                let text: String = serde_json::from_str(text.get()).ok()?;
                if !first {
                    out.push('\n');
                }
                out.push_str(&text);
                first = false;
            }
            Some(out)
        }
        _ => Some(String::new()),
    }
}

/// The text a tool result carries: its text blocks joined with `\n`, or the
/// string content as is. This is what capture indexes and what protected
/// outputs relocate, so both see the same text.
pub fn tool_result_text(value: &Value) -> String {
    match value.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => {
            let mut out = String::new();
            let mut first = true;
            for b in blocks {
                if b.get("type").and_then(Value::as_str) == Some("text") {
                    if let Some(t) = b.get("text").and_then(Value::as_str) {
                        if !first {
                            out.push('\n');
                        }
                        out.push_str(t);
                        first = false;
                    }
                }
            }
            out
        }
        _ => String::new(),
    }
}
