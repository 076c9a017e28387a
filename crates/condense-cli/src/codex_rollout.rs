//! A Codex rollout (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread>.jsonl`)
//! read as the pi session the simulator replays.
//!
//! A rollout's `response_item` lines are the Responses API items Codex
//! sends again with every call, in order; each `token_usage_record` (or,
//! in a rollout without them, `event_msg` `token_count`'s
//! `last_token_usage`) is what the call whose answer came just before it
//! billed. The items become the pi messages the proxy shows the engine
//! (`condense_host_proxy::openai::units`), so the simulator replays what
//! `condense proxy` would have; each call's usage goes on the assistant
//! message it answered with (pi's `usage`, what `--calibrate` fits).

use condense_host_proxy::openai::{self, Format, Side};
use condense_host_proxy::view::{Part, Usage};

use crate::pi_session;
use condense_store::time::parse_iso;
use serde_json::{json, Value};

/// Whether `head` (the start of a file) is a Codex rollout: its first line
/// a `session_meta` record.
pub fn looks_like_rollout(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let first = text.trim_start_matches('\u{feff}').trim_start();
    first.starts_with('{') && {
        let line = first.lines().next().unwrap_or("");
        line.contains("\"type\":\"session_meta\"")
    }
}

/// A usage object as Codex records it: input tokens include the cached.
fn usage_of(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("cached_input_tokens");
    let written = n("cache_write_input_tokens");
    Usage {
        input: n("input_tokens").saturating_sub(cached.saturating_add(written)),
        cache_read: cached,
        cache_write: written,
        output: n("output_tokens"),
    }
}

/// The rollout `text` as pi session JSONL (a v3 header, then one `message`
/// entry per pi message, each the child of the one before), or why it is
/// not one.
pub fn to_pi_session(text: &str) -> Result<String, String> {
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let has_records = lines.iter().any(|e| e["type"] == "token_usage_record");
    let mut session = String::from("codex");
    let mut items: Vec<Value> = Vec::new();
    let mut at: Vec<i64> = Vec::new();
    // The usage of each call, by the index of the last item before it was
    // recorded.
    let mut usages: Vec<(usize, Usage)> = Vec::new();
    for e in &lines {
        let ts = e["timestamp"].as_str().and_then(parse_iso).unwrap_or(0);
        let payload = &e["payload"];
        match e["type"].as_str().unwrap_or("") {
            "session_meta" => {
                if let Some(id) = payload["id"].as_str() {
                    session = id.to_owned();
                }
            }
            "response_item" if payload.is_object() => {
                let mut item = payload.clone();
                // Codex's own bookkeeping, never sent to the model.
                if let Some(o) = item.as_object_mut() {
                    o.remove("internal_chat_message_metadata_passthrough");
                }
                items.push(item);
                at.push(ts);
            }
            "token_usage_record" if payload["usage"].is_object() => {
                usages.push((items.len(), usage_of(&payload["usage"])));
            }
            "event_msg" if !has_records && payload["type"] == "token_count" => {
                let last = &payload["info"]["last_token_usage"];
                if last.is_object() {
                    usages.push((items.len(), usage_of(last)));
                }
            }
            _ => {}
        }
    }
    if items.is_empty() {
        return Err("no conversation items".into());
    }
    let body = json!({ "input": items }).to_string();
    let request = openai::read_request(&body, Format::Responses)
        .map_err(|e| format!("an item Codex recorded does not read: {e}"))?;
    let units = openai::units(&request);

    // Each usage goes on the assistant group holding the last assistant
    // item before it was recorded.
    let mut usage_of_group = vec![None; request.groups.len()];
    for (end, usage) in usages {
        let group = request
            .groups
            .iter()
            .rposition(|g| g.start < end && request.items[g.start].side == Side::Assistant);
        if let Some(g) = group {
            usage_of_group[g] = Some(usage);
        }
    }

    let first_at = at.first().copied().unwrap_or(0);
    let recorded = units.iter().map(|unit| pi_session::Recorded {
        view: &unit.view,
        usage: (unit.part == Part::Assistant)
            .then(|| usage_of_group[unit.message])
            .flatten(),
        at: at[request.groups[unit.message].start],
    });
    pi_session::write(&session, first_at, recorded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_items_become_pi_messages_with_each_calls_usage() {
        let t = "2026-12-05T05:09:50.000Z";
        let usage = |i: u64| json!({"input_tokens": 1000 + i, "cached_input_tokens": 600, "cache_write_input_tokens": 0, "output_tokens": 10, "total_tokens": 1010});
        let lines = [
            json!({"timestamp": t, "type": "session_meta", "payload": {"id": "th-1", "cwd": "/w"}}),
            json!({"timestamp": t, "type": "response_item", "payload": {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]}}),
            json!({"timestamp": t, "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "read a"}]}}),
            json!({"timestamp": t, "type": "turn_context", "payload": {"cwd": "/w"}}),
            json!({"timestamp": t, "type": "response_item", "payload": {"type": "reasoning", "summary": [], "encrypted_content": "x"}}),
            json!({"timestamp": t, "type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\":\"cat a\"}", "call_id": "c1", "internal_chat_message_metadata_passthrough": {"turn_id": "1"}}}),
            json!({"timestamp": t, "type": "token_usage_record", "payload": {"response_id": "r0", "usage": usage(0)}}),
            json!({"timestamp": t, "type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": usage(0)}}}),
            json!({"timestamp": t, "type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "A"}}),
            json!({"timestamp": t, "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}}),
            json!({"timestamp": t, "type": "token_usage_record", "payload": {"response_id": "r1", "usage": usage(1)}}),
        ]
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
        assert!(looks_like_rollout(text_head(&lines)));
        let jsonl = to_pi_session(&lines).unwrap();
        let session = condense_store::session::Session::parse(&jsonl);
        assert!(session.problems.is_empty(), "{:?}", session.problems);
        let ctx = session.context(None);
        let msgs: Vec<Value> = ctx
            .messages
            .iter()
            .map(|m| serde_json::from_str(&m.json()).unwrap())
            .collect();
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(
            roles,
            ["user", "user", "assistant", "toolResult", "assistant"]
        );
        assert_eq!(msgs[2]["usage"]["input"], 400);
        assert_eq!(msgs[2]["usage"]["cacheRead"], 600);
        assert_eq!(
            msgs[4]["usage"]["input"], 401,
            "each call's own usage, once"
        );
        assert!(!jsonl.contains("internal_chat_message"));
        assert!(!looks_like_rollout(br#"{"type":"session","version":3}"#));
    }

    fn text_head(s: &str) -> &[u8] {
        &s.as_bytes()[..s.len().min(4096)]
    }
}
