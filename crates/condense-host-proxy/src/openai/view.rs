//! The engine's view of an OpenAI request ([`crate::view`]): a run of
//! assistant items (reasoning, text, calls) is one assistant message; each
//! tool output is a `toolResult`; each other message a user prompt.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::wire::{ItemsRequest, Side};
use crate::query_tool::PENDING_MARKER;
use crate::view::{engine_tool_name, is_query_tool, result_view, to_json, Part, Unit};

/// The view of every item group of `request`, in order.
pub fn units(request: &ItemsRequest<'_>) -> Vec<Unit> {
    units_from(request, 0)
}

/// The view of the groups of `request` from `first` on (those before it
/// are only read for the calls their outputs answer).
pub fn units_from(request: &ItemsRequest<'_>, first: usize) -> Vec<Unit> {
    let mut calls: HashMap<&str, (&str, &str)> = HashMap::new();
    for group in &request.groups[..first.min(request.groups.len())] {
        for item in &request.items[group.clone()] {
            for c in &item.calls {
                calls.insert(&c.id, (&c.name, &c.arguments));
            }
        }
    }
    let mut out = Vec::new();
    for (g, group) in request.groups.iter().enumerate().skip(first) {
        let items = &request.items[group.clone()];
        let first = &items[0];
        match first.side {
            Side::Assistant => {
                let mut content = Vec::new();
                let mut any_call = false;
                for item in items {
                    for t in &item.texts {
                        content.push(if item.reasoning {
                            json!({"type": "thinking", "thinking": t})
                        } else {
                            json!({"type": "text", "text": t})
                        });
                    }
                    for c in &item.calls {
                        any_call = true;
                        calls.insert(&c.id, (&c.name, &c.arguments));
                        let arguments: Value = serde_json::from_str(&c.arguments)
                            .unwrap_or_else(|_| json!({ "input": c.arguments }));
                        content.push(json!({
                            "type": "toolCall",
                            "id": c.id,
                            "name": engine_tool_name(&c.name),
                            "arguments": arguments,
                        }));
                    }
                }
                let stop = if any_call { "toolUse" } else { "stop" };
                out.push(unit(
                    g,
                    Part::Assistant,
                    to_json(json!({"role": "assistant", "content": content, "stopReason": stop})),
                ));
            }
            Side::Result if first.output.is_some() => {
                let Some(o) = &first.output else { continue };
                let (name, arguments) = calls.get(o.call_id.as_ref()).copied().unwrap_or(("", ""));
                let pending =
                    is_query_tool(name) && o.texts.iter().any(|t| t.contains(PENDING_MARKER));
                let texts: Vec<&str> = o.texts.iter().map(AsRef::as_ref).collect();
                let mut u = unit(
                    g,
                    Part::Result(0),
                    result_view(&o.call_id, name, &texts, false),
                );
                u.frozen = o.opaque;
                u.call_id = Some(o.call_id.to_string());
                u.pending_query = pending.then(|| arguments.to_owned());
                out.push(u);
            }
            Side::Result | Side::Prompt => {
                let mut content: Vec<Value> = first
                    .texts
                    .iter()
                    .map(|t| json!({"type": "text", "text": t}))
                    .collect();
                content.extend(first.parts.iter().map(|k| json!({ "type": k })));
                let mut view = Map::new();
                view.insert("role".into(), json!("user"));
                view.insert("content".into(), Value::Array(content));
                if first.role != "user" {
                    view.insert("wireRole".into(), json!(first.role));
                }
                let mut u = unit(g, Part::Prompt, to_json(Value::Object(view)));
                u.frozen = first.role != "user";
                u.opens_run = first.role == "user";
                out.push(u);
            }
        }
    }
    out
}

fn unit(group: usize, part: Part, view: String) -> Unit {
    Unit {
        message: group,
        part,
        view,
        frozen: false,
        cleared: false,
        call_id: None,
        pending_query: None,
        opens_run: false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::{read_request, Format};
    use super::*;

    #[test]
    fn codex_items_become_pi_messages() {
        let body = r#"{"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},{"type":"reasoning","summary":[{"type":"summary_text","text":"think"}],"encrypted_content":"gAAA"},{"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{\"cmd\":\"ls\"}"},{"type":"function_call_output","call_id":"c1","output":"a"},{"type":"function_call","call_id":"q","name":"context_tree_query","namespace":"mcp__condense","arguments":"{\"toolCallIds\":[\"t1\"]}"},{"type":"function_call_output","call_id":"q","output":"[condense: context_tree_query answer pending] x"}]}"#;
        let r = read_request(body, Format::Responses).unwrap();
        let u = units(&r);
        assert_eq!(u.len(), 6);
        assert!(!u[0].opens_run && u[0].view.contains(r#""wireRole":"developer""#));
        assert!(u[1].opens_run);
        assert_eq!(u[2].part, Part::Assistant);
        assert!(u[2]
            .view
            .contains(r#"{"type":"thinking","thinking":"think"}"#));
        assert!(u[2].view.contains(r#""arguments":{"cmd":"ls"}"#));
        assert_eq!(
            u[3].view,
            r#"{"role":"toolResult","toolCallId":"c1","toolName":"exec_command","content":[{"type":"text","text":"a"}],"isError":false}"#
        );
        assert!(u[4].view.contains(r#""name":"context_tree_query""#));
        assert_eq!(
            u[5].pending_query.as_deref(),
            Some(r#"{"toolCallIds":["t1"]}"#)
        );
    }
}
