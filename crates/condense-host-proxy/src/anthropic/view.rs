//! The engine's view of a request: each Messages API message as the pi
//! messages the engine models (an assistant message; one `toolResult` per
//! `tool_result` block; the rest of a user message as a user prompt).
//!
//! A view message's JSON is deterministic in the wire message's content and
//! leaves out what moves between requests (`cache_control`), so the same
//! history gives the same view on every call and after a restart. The
//! timestamp the engine needs is added when a message is first seen
//! ([`with_timestamp`]) and is the JSON's last key, so the view of a
//! message already held is a prefix of what is held ([`held_view`]).

use serde_json::{json, Map, Value};

use super::wire::{Block, WireRequest};

/// The `context_tree_query` tool as Claude Code shows an MCP server's tool.
pub const MCP_QUERY_TOOL: &str = "mcp__condense__context_tree_query";

/// The texts Claude Code leaves in place of a result it cleared itself.
const CLEARED_MARKERS: [&str; 2] = ["[Old tool result content cleared]", "<persisted-output>"];

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
/// they get elsewhere.
fn engine_tool_name(name: &str) -> &str {
    if name == MCP_QUERY_TOOL {
        condense_core::QUERY_TOOL_NAME
    } else {
        name
    }
}

/// The view of every message of `request`, in order.
pub fn units(request: &WireRequest<'_>) -> Vec<Unit> {
    units_from(request, 0)
}

/// The view of the messages of `request` from `first` on (those before it
/// are only read for the tool calls their results answer).
pub fn units_from(request: &WireRequest<'_>, first: usize) -> Vec<Unit> {
    let mut names: std::collections::HashMap<String, (String, std::ops::Range<usize>)> =
        Default::default();
    let mut out = Vec::new();
    for m in &request.messages[..first.min(request.messages.len())] {
        if m.role == "assistant" {
            for (block, _) in &m.blocks {
                if let Block::ToolUse { id, name, input } = block {
                    names.insert(id.to_string(), (name.to_string(), input.clone()));
                }
            }
        }
    }
    for (i, m) in request.messages.iter().enumerate().skip(first) {
        if m.role == "assistant" {
            let mut content = Vec::new();
            let mut calls = false;
            for (block, _) in &m.blocks {
                match block {
                    Block::Text(t) => content.push(json!({"type": "text", "text": t})),
                    Block::Thinking(t) => content.push(json!({"type": "thinking", "thinking": t})),
                    Block::ToolUse { id, name, input } => {
                        calls = true;
                        names.insert(id.to_string(), (name.to_string(), input.clone()));
                        let arguments: Value =
                            serde_json::from_str(&request.body[input.clone()]).unwrap_or_default();
                        content.push(json!({
                            "type": "toolCall",
                            "id": id,
                            "name": engine_tool_name(name),
                            "arguments": arguments,
                        }));
                    }
                    Block::ToolResult { .. } | Block::Other(_) => {}
                }
            }
            let stop = if calls { "toolUse" } else { "stop" };
            out.push(Unit {
                message: i,
                part: Part::Assistant,
                view: to_json(json!({"role": "assistant", "content": content, "stopReason": stop})),
                frozen: false,
                cleared: false,
                call_id: None,
                pending_query: None,
            });
            continue;
        }
        let mut prompt = Vec::new();
        for (b, (block, _)) in m.blocks.iter().enumerate() {
            match block {
                Block::ToolResult {
                    tool_use_id,
                    texts,
                    opaque,
                    is_error,
                    ..
                } => {
                    let (name, input) = names
                        .get(tool_use_id.as_ref())
                        .map_or(("", None), |(n, i)| (n.as_str(), Some(i.clone())));
                    let cleared = texts
                        .iter()
                        .any(|t| CLEARED_MARKERS.iter().any(|c| t.contains(c)));
                    let pending_query = (name == MCP_QUERY_TOOL
                        && texts
                            .first()
                            .is_some_and(|t| t.starts_with(crate::query_tool::PENDING_MARKER)))
                    .then(|| {
                        input
                            .map(|i| request.body[i].to_owned())
                            .unwrap_or_default()
                    });
                    let texts: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
                    out.push(Unit {
                        message: i,
                        part: Part::Result(b),
                        view: result_view(tool_use_id, name, &texts, *is_error),
                        frozen: *opaque || cleared,
                        cleared,
                        call_id: Some(tool_use_id.to_string()),
                        pending_query,
                    });
                }
                Block::Text(t) => prompt.push(json!({"type": "text", "text": t})),
                Block::Thinking(t) => prompt.push(json!({"type": "thinking", "thinking": t})),
                Block::ToolUse { .. } => prompt.push(json!({"type": "toolUse"})),
                Block::Other(kind) => prompt.push(json!({ "type": kind })),
            }
        }
        if !prompt.is_empty() {
            let mut view = Map::new();
            view.insert("role".into(), json!("user"));
            view.insert("content".into(), Value::Array(prompt));
            if m.role != "user" {
                view.insert("wireRole".into(), json!(m.role));
            }
            out.push(Unit {
                message: i,
                part: Part::Prompt,
                view: to_json(Value::Object(view)),
                frozen: false,
                cleared: false,
                call_id: None,
                pending_query: None,
            });
        }
    }
    out
}

fn to_json(v: Value) -> String {
    serde_json::to_string(&v).unwrap_or_else(|_| "{}".to_owned())
}

/// A view message with its timestamp, as it is held and logged.
pub fn with_timestamp(view: &str, ts: i64) -> String {
    with_facts(view, None, ts)
}

/// A view message as it is held and logged: the view, then what the proxy
/// learnt of it (an assistant message's usage, as pi records it), then its
/// timestamp.
pub fn with_facts(view: &str, usage: Option<&super::Usage>, ts: i64) -> String {
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
    use super::super::wire::read_request;
    use super::*;

    #[test]
    fn a_result_is_named_by_its_call_and_the_query_tool_by_its_engine_name() {
        let body = r#"{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"a","name":"mcp__condense__context_tree_query","input":{"refs":["t1"]}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"x","cache_control":{"type":"ephemeral"}},{"type":"text","text":"more"}]}]}"#;
        let r = read_request(body).unwrap();
        let u = units(&r);
        assert_eq!(u.len(), 4);
        assert_eq!(u[1].part, Part::Assistant);
        assert!(u[1].view.contains(r#""name":"context_tree_query""#));
        assert_eq!(
            u[2].view,
            r#"{"role":"toolResult","toolCallId":"a","toolName":"context_tree_query","content":[{"type":"text","text":"x"}],"isError":false}"#
        );
        assert_eq!(u[3].part, Part::Prompt);
        assert_eq!(u[3].message, 2);
    }

    #[test]
    fn cache_control_does_not_change_the_view() {
        let a = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"go","cache_control":{"type":"ephemeral"}}]}]}"#;
        let b = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}]}"#;
        let ua = units(&read_request(a).unwrap());
        let ub = units(&read_request(b).unwrap());
        assert_eq!(ua[0].view, ub[0].view);
    }

    #[test]
    fn a_cleared_result_is_frozen() {
        let body = r#"{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"[Old tool result content cleared]"}]}]}"#;
        let u = units(&read_request(body).unwrap());
        assert!(u[0].frozen && u[0].cleared);
    }

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
        let usage = super::super::Usage {
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
