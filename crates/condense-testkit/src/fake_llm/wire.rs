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
