//! The answer bodies, as OpenAI streams and sends them and as Anthropic's
//! Messages API sends them.

use std::io::{self, Write};
use std::net::TcpStream;

use serde_json::{json, Value};

use super::Reply;

/// Splits `text` into pieces of at most `chars` characters.
fn fragments(text: &str, chars: usize) -> Vec<String> {
    let all: Vec<char> = text.chars().collect();
    all.chunks(chars.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

/// The `data:` payloads of a streamed reply, without the final `[DONE]`.
fn sse_chunks(reply: &Reply, id: &str, model: &str, request_bytes: usize) -> Vec<Value> {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut chunks = vec![chunk(json!({"role": "assistant"}), Value::Null)];
    if let Some(reasoning) = &reply.reasoning {
        for piece in fragments(reasoning, reply.fragment_chars) {
            chunks.push(chunk(json!({"reasoning_content": piece}), Value::Null));
        }
    }
    if let Some(text) = &reply.text {
        for piece in fragments(text, reply.fragment_chars) {
            chunks.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        chunks.push(chunk(
            json!({"tool_calls": [{
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}),
            Value::Null,
        ));
        for piece in fragments(&call.arguments, reply.fragment_chars) {
            chunks.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    chunks.push(chunk(json!({}), json!(reply.finish_reason())));
    chunks.push(json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [],
        "usage": reply.usage_json(request_bytes),
    }));
    chunks
}

pub(super) fn write_sse(
    out: &mut TcpStream,
    reply: &Reply,
    id: &str,
    model: &str,
    request_bytes: usize,
) -> io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
          Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
    )?;
    let events = sse_chunks(reply, id, model, request_bytes)
        .into_iter()
        .map(|c| format!("data: {c}\n\n"))
        .chain(std::iter::once("data: [DONE]\n\n".to_owned()));
    for event in events {
        write!(out, "{:x}\r\n{event}\r\n", event.len())?;
        out.flush()?;
    }
    out.write_all(b"0\r\n\r\n")?;
    out.flush()?;
    let _ = out.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// The events of a streamed Anthropic Messages API answer for `reply`:
/// `message_start`, a text block and a `tool_use` block per call (its
/// input as `input_json_delta` fragments), `message_delta` with the stop
/// reason and output tokens, `message_stop`.
fn anthropic_events(reply: &Reply, id: &str, model: &str, request_bytes: usize) -> Vec<Value> {
    let usage = reply.usage_json(request_bytes);
    let mut events = vec![json!({
        "type": "message_start",
        "message": {
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": usage["prompt_tokens"],
                "cache_read_input_tokens": usage["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0),
                "cache_creation_input_tokens": usage["prompt_tokens_details"]["cache_write_tokens"].as_u64().unwrap_or(0),
                "output_tokens": 1,
            },
        },
    })];
    let mut index = 0;
    if let Some(text) = &reply.text {
        events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}));
        for piece in fragments(text, reply.fragment_chars) {
            events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    for call in &reply.tool_calls {
        events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}));
        for piece in fragments(&call.arguments, reply.fragment_chars) {
            events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    let stop = if reply.tool_calls.is_empty() {
        if reply.finish_reason() == "length" {
            "max_tokens"
        } else {
            "end_turn"
        }
    } else {
        "tool_use"
    };
    events.push(json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": usage["completion_tokens"]},
    }));
    events.push(json!({"type": "message_stop"}));
    events
}

/// A streamed Anthropic Messages API answer (server-sent events).
pub(super) fn write_anthropic_sse(
    out: &mut TcpStream,
    reply: &Reply,
    id: &str,
    model: &str,
    request_bytes: usize,
) -> io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
          Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
    )?;
    for event in anthropic_events(reply, id, model, request_bytes) {
        let text = format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap_or("")
        );
        write!(out, "{:x}\r\n{text}\r\n", text.len())?;
        out.flush()?;
    }
    out.write_all(b"0\r\n\r\n")?;
    out.flush()?;
    let _ = out.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// A non-streaming Anthropic Messages API answer for `reply` (its text).
pub(super) fn anthropic_message(
    reply: &Reply,
    id: &str,
    model: &str,
    request_bytes: usize,
) -> Value {
    let usage = reply.usage_json(request_bytes);
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": reply.text.as_deref().unwrap_or("")}],
        "stop_reason": if reply.finish_reason() == "length" { "max_tokens" } else { "end_turn" },
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "output_tokens": usage["completion_tokens"],
        },
    })
}

/// A non-streaming `chat.completion` object for `reply`.
pub(super) fn completion_object(
    reply: &Reply,
    id: &str,
    model: &str,
    request_bytes: usize,
) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.text});
    if let Some(reasoning) = &reply.reasoning {
        message["reasoning_content"] = json!(reasoning);
    }
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = reply
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect();
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason()}],
        "usage": reply.usage_json(request_bytes),
    })
}

/// The output items of a Responses API answer for `reply`: reasoning (its
/// summary, and an opaque `encrypted_content` the client must send back
/// as it came), the text as a message, each call as a `function_call`. A
/// call named `mcp__<server>__<tool>` is an MCP tool as Codex calls it:
/// `<tool>` in the namespace `mcp__<server>`; a call named `tool_search`
/// is a client-side `tool_search_call` (Codex loads deferred MCP tools
/// with it), its arguments an object.
fn responses_output(reply: &Reply, id: &str) -> Vec<Value> {
    let mut items = Vec::new();
    if let Some(reasoning) = &reply.reasoning {
        items.push(json!({
            "type": "reasoning", "id": format!("rs_{id}"),
            "summary": [{"type": "summary_text", "text": reasoning}],
            "encrypted_content": format!("enc:{id}:{}", reasoning.len()),
        }));
    }
    if let Some(text) = &reply.text {
        items.push(json!({
            "type": "message", "id": format!("msg_{id}"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }));
    }
    for (n, call) in reply.tool_calls.iter().enumerate() {
        if call.name == "tool_search" {
            let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or(json!({}));
            items.push(json!({
                "type": "tool_search_call", "id": format!("ts_{id}_{n}"), "status": "completed",
                "call_id": call.id, "execution": "client", "arguments": arguments,
            }));
            continue;
        }
        let mut item = json!({
            "type": "function_call", "id": format!("fc_{id}_{n}"), "status": "completed",
            "call_id": call.id, "name": call.name, "arguments": call.arguments,
        });
        if let Some(rest) = call.name.strip_prefix("mcp__") {
            if let Some((server, tool)) = rest.split_once("__") {
                item["namespace"] = json!(format!("mcp__{server}"));
                item["name"] = json!(tool);
            }
        }
        items.push(item);
    }
    items
}

/// The Responses API usage of `reply`: input tokens include the cached.
fn responses_usage(reply: &Reply, request_bytes: usize) -> Value {
    let u = reply.usage_json(request_bytes);
    let cached = u["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    let input = u["prompt_tokens"].as_u64().unwrap_or(0);
    let output = u["completion_tokens"].as_u64().unwrap_or(0);
    json!({
        "input_tokens": input + cached,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + cached + output,
    })
}

/// A whole Responses API `response` object for `reply`.
pub(super) fn response_object(reply: &Reply, id: &str, model: &str, request_bytes: usize) -> Value {
    json!({
        "id": id, "object": "response", "created_at": 0, "status": "completed",
        "model": model, "output": responses_output(reply, id),
        "usage": responses_usage(reply, request_bytes),
    })
}

/// A streamed Responses API answer (server-sent events, what Codex reads):
/// `response.created`, each output item added (text as
/// `response.output_text.delta` fragments) and done, `response.completed`
/// with the usage.
pub(super) fn write_responses_sse(
    out: &mut TcpStream,
    reply: &Reply,
    id: &str,
    model: &str,
    request_bytes: usize,
) -> io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
          Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
    )?;
    let mut events = vec![json!({
        "type": "response.created",
        "response": {"id": id, "object": "response", "status": "in_progress", "model": model, "output": []},
    })];
    for (index, item) in responses_output(reply, id).into_iter().enumerate() {
        let mut added = item.clone();
        if item["type"] == "message" {
            added["content"] = json!([]);
        }
        events.push(
            json!({"type": "response.output_item.added", "output_index": index, "item": added}),
        );
        if item["type"] == "message" {
            let text = item["content"][0]["text"].as_str().unwrap_or("");
            for piece in fragments(text, reply.fragment_chars) {
                events.push(json!({
                    "type": "response.output_text.delta", "output_index": index,
                    "item_id": item["id"], "content_index": 0, "delta": piece,
                }));
            }
        }
        events.push(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }
    events.push(json!({
        "type": "response.completed",
        "response": response_object(reply, id, model, request_bytes),
    }));
    for event in events {
        let text = format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap_or("")
        );
        write!(out, "{:x}\r\n{text}\r\n", text.len())?;
        out.flush()?;
    }
    out.write_all(b"0\r\n\r\n")?;
    out.flush()?;
    let _ = out.shutdown(std::net::Shutdown::Write);
    Ok(())
}
