//! The engine's view of a request, whatever its wire format: each wire
//! message (or run of items) as the pi messages the engine models (an
//! assistant message; one `toolResult` per tool result; the rest as a user
//! prompt), and what the proxy adds to one it holds.
//!
//! A view message's JSON is deterministic in the wire content and leaves
//! out what moves between requests (`cache_control`), so the same history
//! gives the same view on every call and after a restart. The timestamp
//! the engine needs is added when a message is first seen
//! ([`with_timestamp`]) and is the JSON's last key, so the view of a
//! message already held is a prefix of what is held ([`held_view`]).

use serde_json::{json, Value};

/// The `context_tree_query` tool as Claude Code shows an MCP server's tool.
pub const MCP_QUERY_TOOL: &str = "mcp__condense__context_tree_query";

/// What one call billed, as the provider reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens not read from or written to the cache.
    pub input: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
    /// Input tokens written to the cache.
    pub cache_write: u64,
    /// Output tokens.
    pub output: u64,
}

/// What part of a wire message a view message stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The whole assistant message.
    Assistant,
    /// The `tool_result` block at this index of a user message.
    Result(usize),
    /// The user message's other blocks (text, images, ...), or a message of
    /// another role (`system`).
    Prompt,
}

/// One view message.
#[derive(Debug, Clone)]
pub struct Unit {
    /// The wire message it comes from.
    pub message: usize,
    /// Which part of it.
    pub part: Part,
    /// The pi message's JSON without its timestamp (ends with `}`).
    pub view: String,
    /// A result condense must send as the client wrote it: one holding more
    /// than text (a `tool_reference`, an image), or one Claude Code cleared.
    pub frozen: bool,
    /// A result Claude Code cleared (`[Old tool result content cleared]`,
    /// `<persisted-output>`).
    pub cleared: bool,
    /// The tool call a result answers.
    pub call_id: Option<String>,
    /// A `context_tree_query` result still holding the MCP server's
    /// placeholder: the call's arguments (JSON), for the proxy to answer.
    pub pending_query: Option<String>,
    /// A user's prompt that starts a run (not text a client puts beside
    /// tool results, nor a system or developer message).
    pub opens_run: bool,
}

impl Unit {
    /// Whether the unit is the held message answering the same call,
    /// whatever its text: a result Claude Code cleared, or a query the
    /// proxy answered in place of the placeholder.
    pub fn matches_by_call(&self) -> bool {
        self.cleared || self.pending_query.is_some()
    }
}

/// The view of a tool result.
pub fn result_view(call_id: &str, tool_name: &str, texts: &[&str], is_error: bool) -> String {
    let content: Vec<Value> = texts
        .iter()
        .map(|t| json!({"type": "text", "text": t}))
        .collect();
    to_json(json!({
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": engine_tool_name(tool_name),
        "content": content,
        "isError": is_error,
    }))
}

/// The tool name the engine is shown: condense's own query tool under the
/// name every host gives it, so its results get the grace and protection
/// they get elsewhere. A client names an MCP server's tool its own way
/// (`mcp__condense__context_tree_query` in Claude Code and Codex,
/// `condense_context_tree_query` in OpenCode).
pub(crate) fn engine_tool_name(name: &str) -> &str {
    if is_query_tool(name) {
        condense_core::QUERY_TOOL_NAME
    } else {
        name
    }
}

/// Whether a client's tool name is condense's query tool.
pub fn is_query_tool(name: &str) -> bool {
    name == MCP_QUERY_TOOL
        || name == condense_core::QUERY_TOOL_NAME
        || name
            .strip_suffix(condense_core::QUERY_TOOL_NAME)
            .is_some_and(|server| server.ends_with("condense_") || server.ends_with("condense__"))
}

pub(crate) fn to_json(v: Value) -> String {
    serde_json::to_string(&v).unwrap_or_else(|_| "{}".to_owned())
}

/// A view message with its timestamp, as it is held and logged.
pub fn with_timestamp(view: &str, ts: i64) -> String {
    with_facts(view, None, ts)
}

/// A view message as it is held and logged: the view, then what the proxy
/// learnt of it (an assistant message's usage, as pi records it), then its
/// timestamp.
pub fn with_facts(view: &str, usage: Option<&Usage>, ts: i64) -> String {
    let mut out = view.strip_suffix('}').unwrap_or(view).to_owned();
    let mut sep = if out.ends_with('{') { "" } else { "," };
    if let Some(u) = usage {
        out.push_str(&format!(
            "{sep}\"usage\":{{\"input\":{},\"output\":{},\"cacheRead\":{},\"cacheWrite\":{},\"totalTokens\":{}}}",
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.input
                .saturating_add(u.output)
                .saturating_add(u.cache_read)
                .saturating_add(u.cache_write)
        ));
        sep = ",";
    }
    out.push_str(&format!("{sep}\"timestamp\":{ts}}}"));
    out
}

/// The view a held message was made from: its JSON without the trailing
/// timestamp [`with_timestamp`] added. `None` for a message condense did
/// not make from the wire (a summary, a message of another shape).
pub fn held_view(json: &str) -> Option<&str> {
    let body = json.strip_suffix('}')?;
    let at = body.rfind(",\"timestamp\":")?;
    let digits = &body[at + 13..];
    let digits = digits.strip_prefix('-').unwrap_or(digits);
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| &json[..at])
}

/// Whether a held message (its JSON) is the view `view`: the view, then
/// only what [`with_facts`] adds.
pub fn holds(json: &str, view: &str) -> bool {
    let Some(open) = view.strip_suffix('}') else {
        return false;
    };
    held_view(json).is_some()
        && json.strip_prefix(open).is_some_and(|rest| {
            rest.starts_with(",\"usage\":")
                || rest.starts_with(",\"timestamp\":")
                || (open.ends_with('{') && rest.starts_with("\""))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_held_view_is_the_view_before_its_timestamp() {
        let view = r#"{"role":"user","content":[]}"#;
        let held = with_timestamp(view, 1700000000000);
        assert_eq!(
            held,
            r#"{"role":"user","content":[],"timestamp":1700000000000}"#
        );
        assert!(holds(&held, view));
        assert!(!holds(&held, r#"{"role":"user","content":[1]}"#));
        assert_eq!(held_view(r#"{"role":"custom","timestamp":"x"}"#), None);
        assert_eq!(with_timestamp("{}", 5), r#"{"timestamp":5}"#);
        let usage = Usage {
            input: 1,
            output: 2,
            cache_read: 3,
            cache_write: 4,
        };
        let logged = with_facts(view, Some(&usage), 9);
        assert_eq!(
            logged,
            r#"{"role":"user","content":[],"usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10},"timestamp":9}"#
        );
        assert!(holds(&logged, view));
        // A view that is the start of another's is not it.
        let system = with_timestamp(r#"{"role":"user","content":[],"wireRole":"system"}"#, 1);
        assert!(!holds(&system, view));
    }
}
