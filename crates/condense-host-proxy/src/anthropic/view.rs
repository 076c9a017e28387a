//! The engine's view of a Messages API request ([`crate::view`]): an
//! assistant message is one view message; a user message is one
//! `toolResult` per `tool_result` block and the rest as a user prompt.

use serde_json::{json, Map, Value};

use super::wire::{Block, WireRequest};
use crate::view::{engine_tool_name, result_view, to_json, Part, Unit, MCP_QUERY_TOOL};

/// The texts Claude Code leaves in place of a result it cleared itself.
const CLEARED_MARKERS: [&str; 2] = ["[Old tool result content cleared]", "<persisted-output>"];

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
                opens_run: false,
            });
            continue;
        }
        let mut prompt = Vec::new();
        let beside_results = m
            .blocks
            .iter()
            .any(|(b, _)| matches!(b, Block::ToolResult { .. }));
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
                        opens_run: false,
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
                // Text Claude Code puts beside tool results (system
                // reminders) and its `system` messages start no run.
                opens_run: m.role == "user" && !beside_results,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::wire::read_request;
    use super::*;
    use crate::view::Part;

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
}
