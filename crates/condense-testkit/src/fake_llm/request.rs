//! The recorded requests, and what makes one a summary request.

use serde_json::Value;

use super::SUMMARY_MARKERS;
// Named by a doc link only.
#[cfg(doc)]
use super::EXHAUSTED_TEXT;

/// Which script answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A chat request answered from the main script.
    Main,
    /// A chat request recognised as a summarization prompt.
    Summary,
    /// Anything else (wrong path or method, unreadable body): answered 404/400.
    Other,
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// 0-based arrival order over all requests.
    pub seq: usize,
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// Request target, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The headers as received, in order.
    pub headers: Vec<(String, String)>,
    /// Which script answered it.
    pub kind: RequestKind,
    /// The body parsed as JSON (`Value::Null` if it was not JSON).
    pub body: Value,
    /// The body's bytes as received.
    pub raw_body: Vec<u8>,
    /// True if the main script was exhausted and [`EXHAUSTED_TEXT`] was sent.
    pub exhausted: bool,
    /// When the server had read the request's head (ms since the epoch).
    pub received_ms: i64,
}

impl RecordedRequest {
    /// The first header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `messages` array of a chat request (empty if absent).
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// Texts of the messages with this role, in order.
    pub fn texts_of_role(&self, role: &str) -> Vec<String> {
        self.messages()
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some(role))
            .map(message_text)
            .collect()
    }

    /// `(tool_call_id, text)` of every `role: "tool"` message, in order.
    pub fn tool_results(&self) -> Vec<(String, String)> {
        self.messages()
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
            .map(|m| {
                let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
                (id.to_owned(), message_text(m))
            })
            .collect()
    }

    /// The system (or developer) prompt, if any.
    pub fn system_prompt(&self) -> Option<String> {
        self.messages()
            .iter()
            .find(|m| {
                matches!(
                    m.get("role").and_then(Value::as_str),
                    Some("system" | "developer")
                )
            })
            .map(message_text)
    }

    /// Names of the tools declared in the request.
    pub fn tool_names(&self) -> Vec<String> {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }

    /// True if the text of any message (any role, tool-call arguments
    /// included) contains `needle`.
    pub fn any_message_contains(&self, needle: &str) -> bool {
        self.messages()
            .iter()
            .any(|m| message_text(m).contains(needle) || tool_call_arguments(m).contains(needle))
    }
}

/// The text of a chat message: `content` when it is a string, else the
/// concatenated `text` of its parts.
pub fn message_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The concatenated `arguments` of an assistant message's `tool_calls`.
fn tool_call_arguments(message: &Value) -> String {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.pointer("/function/arguments").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("")
}

/// True if `body` looks like a summarization prompt (see [`SUMMARY_MARKERS`]).
pub fn is_summary_request(body: &Value) -> bool {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(message_text)
        .any(|text| SUMMARY_MARKERS.iter().any(|marker| text.contains(marker)))
}
