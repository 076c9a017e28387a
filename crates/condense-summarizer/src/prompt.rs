//! What the summarizer model is sent.
//!
//! Two prompts, both sent as a single user message with the instructions on
//! top (the shape pi-condense used, kept so summaries read the same):
//!
//! - a batch: [`BATCH_PROMPT`], a blank line, then the serialized batch
//!   ([`serialize_batch`]) inside `<tool-call-batch>` tags;
//! - a range fusion: [`RANGE_PROMPT`], a blank line, then a chain's per-batch
//!   summaries joined by a blank line inside `<sub-task-summaries>` tags.
//!
//! Each call in a batch is labelled `[[N:toolname]]` (N counts from 1 in
//! batch order) and the prompt asks the model to start the call's first
//! bullet with that label; `condense_core::substitute_inline_refs`
//! later turns the labels into short refs. Labels, tags and the truncation
//! marker are contracts; the instruction wording is this project's own.

use condense_core::{js_len, js_prefix};
use condense_core::{CapturedBatch, SharedText};
use serde_json::Value;

/// Instructions for summarizing one batch of tool calls.
pub const BATCH_PROMPT: &str = "\
You are condensing tool calls that an AI coding agent has already finished, so the agent can keep \
working with a smaller context. Each call in the batch below starts with a label such as [[1:read]].

For each call worth remembering, write 1-3 short bullet points: what the call did, whether it \
succeeded, and what it returned that later work will need.
- Begin the first bullet of every call with that call's label, copied exactly (for example \
\"- [[1:read]] read src/main.rs: ...\").
- Copy file paths, identifiers, commands and error messages character for character.
- Leave out calls that produced nothing worth keeping.
- Reply with the bullets only.";

/// Instructions for fusing a closed chain's per-batch summaries into one.
pub const RANGE_PROMPT: &str = "\
Each summary below covers one step of a single, finished sub-task carried out by an AI coding \
agent. Rewrite them as one compact summary of the whole sub-task.
- State each fact once: merge steps that overlap or repeat.
- Keep outcomes, decisions, file paths, identifiers and whatever later work may rely on.
- Leave reference tokens such as `t7` or `b2` exactly as they are.
- Prefer a short paragraph or a few grouped bullets to one bullet per step.";

/// Results longer than this many UTF-16 units are cut in the prompt.
pub const RESULT_CUT: usize = 2000;

/// The label of the call at `index` (0-based) named `tool_name`:
/// `[[index+1:tool_name]]`.
pub fn call_label(index: usize, tool_name: &str) -> String {
    format!("[[{}:{}]]", index + 1, tool_name)
}

/// A result as the prompt shows it: at most [`RESULT_CUT`] UTF-16 units,
/// then ` ...[<k> chars truncated]` where `k` is the number of units left
/// out. The cut never splits a surrogate pair (it may keep one unit fewer).
pub fn cut_result(text: &str) -> String {
    let mut out = String::new();
    write_cut_result(text, &mut out);
    out
}

/// Serializes a batch for the summarizer: `Assistant said: <text>\n` when
/// the turn had prose, then each call as
/// `[[N:tool]] Tool: tool(<args, 2-space JSON>)\nResult (OK|ERROR): <cut result>`,
/// the calls joined by `\n---\n`.
pub fn serialize_batch(batch: &CapturedBatch) -> String {
    let mut out = String::new();
    write_batch(std::slice::from_ref(batch), &mut out);
    out
}

/// The whole user message for a batch.
pub fn batch_user_message(batch: &CapturedBatch) -> String {
    let mut out = String::new();
    write_user_message(std::slice::from_ref(batch), &mut out);
    out
}

/// The length in UTF-16 units of the [`batch_user_message`] of `batches`
/// merged into one, as `condense_core::merge_runs` merges a run (their
/// prose joined by a blank line, their calls in order), counted without
/// building either. Of one batch, the length of its message. Estimates
/// price many prompts they never send, and a prompt as long as its
/// arguments' JSON is not worth building for its length.
pub fn batch_user_message_len(batches: &[CapturedBatch]) -> usize {
    let mut len = Utf16Len(0);
    write_user_message(batches, &mut len);
    len.0
}

/// Where a prompt is written: a string, or a count of its UTF-16 units.
trait Sink {
    fn put(&mut self, s: &str);
    /// `s` as a JSON string literal, as serde_json writes one.
    fn put_json_string(&mut self, s: &str);
    /// A result as [`cut_result`] writes it.
    fn put_result(&mut self, text: &SharedText)
    where
        Self: Sized,
    {
        write_cut_result(&text.to_str(), self);
    }
    /// A line break, then `depth` levels of two-space indent.
    fn newline(&mut self, depth: usize) {
        self.put("\n");
        for _ in 0..depth {
            self.put("  ");
        }
    }
}

impl Sink for String {
    fn put(&mut self, s: &str) {
        self.push_str(s);
    }

    fn put_json_string(&mut self, s: &str) {
        // Serializing a `str` cannot fail.
        if let Ok(json) = serde_json::to_string(s) {
            self.push_str(&json);
        }
    }
}

/// The UTF-16 length of what was written.
struct Utf16Len(usize);

impl Sink for Utf16Len {
    fn put(&mut self, s: &str) {
        self.0 += js_len(s);
    }

    /// From the text's remembered lengths: an estimate weighs every
    /// pending output at each ask, and a text held as a window on its
    /// message would otherwise be decoded each time.
    fn put_result(&mut self, text: &SharedText) {
        let len = text.js_len();
        if len <= RESULT_CUT {
            self.0 += len;
        } else {
            self.0 += text.js_prefix_len(RESULT_CUT);
            self.put(&format!(" ...[{} chars truncated]", len - RESULT_CUT));
        }
    }

    fn put_json_string(&mut self, s: &str) {
        // serde_json escapes the quote, the backslash and the control
        // characters (seven by letter, the rest as `\u00XX`), and writes
        // everything else as it is.
        let body: usize = s
            .bytes()
            .map(|b| match b {
                b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 2,
                0x00..=0x1f => 6,
                // A continuation byte: its character is counted by its lead.
                0x80..=0xbf => 0,
                // A four-byte character: a surrogate pair.
                0xf0..=0xff => 2,
                _ => 1,
            })
            .sum();
        self.0 += body + 2;
    }

    fn newline(&mut self, depth: usize) {
        self.0 += 1 + 2 * depth;
    }
}

fn write_user_message(batches: &[CapturedBatch], out: &mut impl Sink) {
    out.put(BATCH_PROMPT);
    out.put("\n\n<tool-call-batch>\n");
    write_batch(batches, out);
    out.put("\n</tool-call-batch>");
}

fn write_batch(batches: &[CapturedBatch], out: &mut impl Sink) {
    let mut texts = batches
        .iter()
        .map(|b| b.assistant_text.as_str())
        .filter(|t| !t.is_empty())
        .peekable();
    if texts.peek().is_some() {
        out.put("Assistant said: ");
        for (i, text) in texts.enumerate() {
            if i > 0 {
                out.put("\n\n");
            }
            out.put(text);
        }
        out.put("\n\n");
    }
    for (i, call) in batches.iter().flat_map(|b| &b.calls).enumerate() {
        if i > 0 {
            out.put("\n---\n");
        }
        out.put(&call_label(i, &call.tool_name));
        out.put(" Tool: ");
        out.put(&call.tool_name);
        out.put("(");
        write_json(&call.args, 0, out);
        out.put(")\nResult (");
        out.put(if call.is_error { "ERROR" } else { "OK" });
        out.put("): ");
        out.put_result(&call.result_text);
    }
}

fn write_cut_result(text: &str, out: &mut impl Sink) {
    let len = js_len(text);
    if len <= RESULT_CUT {
        out.put(text);
    } else {
        out.put(js_prefix(text, RESULT_CUT));
        out.put(&format!(" ...[{} chars truncated]", len - RESULT_CUT));
    }
}

/// The whole user message for fusing `summaries` (joined by a blank line).
pub fn range_user_message<S: AsRef<str>>(summaries: &[S]) -> String {
    let joined: Vec<&str> = summaries.iter().map(AsRef::as_ref).collect();
    format!(
        "{RANGE_PROMPT}\n\n<sub-task-summaries>\n{}\n</sub-task-summaries>",
        joined.join("\n\n")
    )
}

/// `JSON.stringify(value, null, 2)`.
pub fn pretty_json(value: &Value) -> String {
    let mut out = String::new();
    write_json(value, 0, &mut out);
    out
}

fn write_json(value: &Value, depth: usize, out: &mut impl Sink) {
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.put("[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.put(",");
                }
                out.newline(depth + 1);
                write_json(item, depth + 1, out);
            }
            out.newline(depth);
            out.put("]");
        }
        Value::Object(map) if !map.is_empty() => {
            out.put("{");
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.put(",");
                }
                out.newline(depth + 1);
                out.put_json_string(key);
                out.put(": ");
                write_json(item, depth + 1, out);
            }
            out.newline(depth);
            out.put("}");
        }
        Value::Number(n) => match (n.is_f64(), n.as_f64()) {
            (true, Some(f)) => out.put(&js_float(f)),
            _ => out.put(&n.to_string()),
        },
        Value::String(s) => out.put_json_string(s),
        // Booleans, null, `[]` and `{}` print as serde_json does.
        other => out.put(&other.to_string()),
    }
}

/// A float as JavaScript prints it (close enough for tool arguments: the
/// digits are Rust's shortest round-trip form, the layout JavaScript's).
fn js_float(f: f64) -> String {
    if !f.is_finite() {
        return "null".into();
    }
    if f == 0.0 {
        return "0".into();
    }
    let abs = f.abs();
    if (1e-6..1e21).contains(&abs) {
        return f.to_string();
    }
    let sci = format!("{f:e}");
    match sci.split_once('e') {
        Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
        _ => sci,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pretty_json_matches_javascript() {
        assert_eq!(pretty_json(&json!({})), "{}");
        assert_eq!(pretty_json(&json!([])), "[]");
        assert_eq!(pretty_json(&json!(null)), "null");
        assert_eq!(
            pretty_json(&json!({"path": "a/b.rs", "n": 3, "list": [1, {"x": []}], "o": {}})),
            "{\n  \"path\": \"a/b.rs\",\n  \"n\": 3,\n  \"list\": [\n    1,\n    {\n      \"x\": []\n    }\n  ],\n  \"o\": {}\n}"
        );
        assert_eq!(pretty_json(&json!("a\"\n\u{1b}")), "\"a\\\"\\n\\u001b\"");
    }

    #[test]
    fn floats_print_as_javascript_does() {
        for (f, s) in [
            (1.0, "1"),
            (-2.0, "-2"),
            (0.5, "0.5"),
            (-0.0, "0"),
            (1e21, "1e+21"),
            (1.5e-7, "1.5e-7"),
            (123.25, "123.25"),
            (1e-6, "0.000001"),
        ] {
            assert_eq!(js_float(f), s, "{f}");
        }
    }
}
