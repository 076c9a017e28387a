//! A received request measured as `condense simulate` measures a session's
//! messages: the content that reaches the model (texts, tool-call names and
//! arguments, tool output) in UTF-16 units, at a linear token model, the
//! system prompt and tool definitions apart as the fixed overhead. The
//! end-to-end tests compare the simulator with what the server received
//! through these.

use serde_json::Value;

use super::RecordedRequest;

/// `simulate`'s token model, as its `--tokens-per-char` and
/// `--tokens-per-message` set it.
#[derive(Debug, Clone, Copy)]
pub struct TokenModel {
    /// Tokens per UTF-16 unit of content.
    pub per_char: f64,
    /// Tokens per message.
    pub per_message: f64,
}

/// A text's length as JavaScript counts it.
pub fn js_len(text: &str) -> u64 {
    text.encode_utf16().count() as u64
}

/// A chat message's `content`: a string, or parts whose `text` counts.
pub fn content_units(content: &Value) -> u64 {
    match content {
        Value::String(s) => js_len(s),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .map(js_len)
            .sum(),
        _ => 0,
    }
}

/// What of a received message reaches the model as the simulator measures a
/// session message: its content, and each tool call's name and arguments.
pub fn message_units(message: &Value) -> u64 {
    let calls: u64 = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let f = &c["function"];
            js_len(f["name"].as_str().unwrap_or("")) + js_len(f["arguments"].as_str().unwrap_or(""))
        })
        .sum();
    content_units(&message["content"]) + calls
}

impl TokenModel {
    /// `simulate`'s calibrated defaults (the tests pass them explicitly).
    pub const SIMULATE_DEFAULTS: TokenModel = TokenModel {
        per_char: 0.3085,
        per_message: 34.51,
    };

    /// A received message's tokens, rounded per message as the simulator
    /// rounds them.
    pub fn message_tokens(&self, message: &Value) -> u64 {
        (self.per_char * message_units(message) as f64 + self.per_message)
            .max(0.0)
            .round() as u64
    }

    /// The tokens of a request's system prompt and tool definitions: the
    /// overhead `simulate` is told.
    pub fn overhead_tokens(&self, request: &RecordedRequest) -> u64 {
        let (system, tools) = fixed_part(request);
        let units: u64 = system
            .iter()
            .map(|m| content_units(&m["content"]))
            .sum::<u64>()
            + if tools.is_null() {
                0
            } else {
                js_len(&tools.to_string())
            };
        (self.per_char * units as f64).round() as u64
    }
}

/// Whether a received message is the system prompt.
pub fn is_system(message: &Value) -> bool {
    matches!(message["role"].as_str(), Some("system" | "developer"))
}

/// The conversation of a request (the system prompt is the overhead).
pub fn conversation(request: &RecordedRequest) -> Vec<&Value> {
    request
        .messages()
        .iter()
        .filter(|m| !is_system(m))
        .collect()
}

/// The system prompt and the tool definitions of a request, as sent.
pub fn fixed_part(request: &RecordedRequest) -> (Vec<&Value>, Value) {
    let system = request.messages().iter().filter(|m| is_system(m)).collect();
    (
        system,
        request.body.get("tools").cloned().unwrap_or(Value::Null),
    )
}
