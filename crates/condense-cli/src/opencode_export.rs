//! An OpenCode session, as `opencode export SESSION` prints it, read as the
//! pi session the simulator replays.
//!
//! The messages become pi's as the OpenCode plugin hands them to the
//! sidecar (`plugin/messages.ts`, `toPi`): one OpenCode assistant message is
//! one LLM call, a pi assistant message (text, thinking and tool calls, with
//! OpenCode's recorded tokens as pi's `usage`) followed by one `toolResult`
//! per finished tool part. Two things differ, because the simulator prices
//! what each policy would have sent rather than what condense saw live:
//!
//! - A tool part OpenCode's own pruning cleared keeps its output (the export
//!   holds it): every policy starts from the session without pruning.
//! - OpenCode's compactions (the user message holding a `compaction` part
//!   and the summary answering it) are left out: the simulator compacts each
//!   policy's context where pi would, as it does for a pi session.
//!
//! `tests/opencode_export.rs` pins the messages against the plugin's own
//! conversion of the same export.

use condense_store::time::format_iso;
use serde_json::{json, Map, Value};

/// Whether `head` (the start of a file) is an OpenCode export: one JSON
/// object whose first key is `info` (OpenCode prints the session's info,
/// then its messages). A pi session's first line is its header, whose
/// first key is `type`.
pub fn looks_like_export(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let rest = text.trim_start();
    rest.strip_prefix('{')
        .is_some_and(|r| r.trim_start().starts_with("\"info\""))
}

/// The export `text` as pi session JSONL (a v3 header, then one `message`
/// entry per pi message, each the child of the one before), or why it is
/// not an export.
pub fn to_pi_session(text: &str) -> Result<String, String> {
    let export = condense_core::parse_json_lossy(text).map_err(|e| format!("not JSON: {e}"))?;
    let info = export
        .get("info")
        .and_then(Value::as_object)
        .ok_or("no session `info` object")?;
    let messages = export
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("no `messages` array")?;
    let id = info.get("id").and_then(Value::as_str).unwrap_or("opencode");
    let created = info
        .get("time")
        .and_then(|t| t.get("created"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let header = json!({
        "type": "session",
        "version": 3,
        "id": id,
        "timestamp": format_iso(created),
        "cwd": info.get("directory").and_then(Value::as_str).unwrap_or(""),
    });
    let mut lines = vec![header.to_string()];
    let mut parent: Option<String> = None;
    for m in messages.iter().filter(|m| !is_compaction(m)) {
        for pi in to_pi(m) {
            let entry_id = format!("m{}", lines.len());
            let ts = pi.get("timestamp").and_then(Value::as_i64).unwrap_or(0);
            let entry = json!({
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": format_iso(ts),
                "message": pi,
            });
            lines.push(entry.to_string());
            parent = Some(entry_id);
        }
    }
    Ok(lines.join("\n") + "\n")
}

fn role(m: &Value) -> &str {
    m["info"]["role"].as_str().unwrap_or("")
}

fn parts(m: &Value) -> impl Iterator<Item = &Value> {
    m["parts"].as_array().into_iter().flatten()
}

/// The user message that starts an OpenCode compaction, or the summary
/// that answers it.
fn is_compaction(m: &Value) -> bool {
    (role(m) == "user" && parts(m).any(|p| p["type"] == "compaction"))
        || (role(m) == "assistant" && m["info"]["summary"] == true)
}

/// The pi messages of one OpenCode message: the message, then its tool
/// results.
fn to_pi(m: &Value) -> Vec<Value> {
    let timestamp = m["info"]["time"]["created"].as_i64().unwrap_or(0);
    if role(m) != "assistant" {
        let content: Vec<Value> = parts(m)
            .filter(|p| p["type"] == "text" && p["ignored"] != true)
            .filter_map(|p| p["text"].as_str())
            .map(|text| json!({ "type": "text", "text": text }))
            .collect();
        return vec![json!({ "role": "user", "content": content, "timestamp": timestamp })];
    }
    let mut content = Vec::new();
    let mut results = Vec::new();
    for p in parts(m) {
        match (p["type"].as_str(), p["text"].as_str()) {
            (Some("text"), Some(text)) => content.push(json!({ "type": "text", "text": text })),
            (Some("reasoning"), Some(text)) => {
                content.push(json!({ "type": "thinking", "thinking": text }));
            }
            (Some("tool"), _) => {
                let (Some(id), Some(tool), Some(state)) = (
                    p["callID"].as_str(),
                    p["tool"].as_str(),
                    p["state"].as_object(),
                ) else {
                    continue;
                };
                let arguments = state.get("input").cloned().unwrap_or_else(|| json!({}));
                content.push(json!({
                    "type": "toolCall", "id": id, "name": tool, "arguments": arguments,
                }));
                if let Some(result) = tool_result(id, tool, state, timestamp) {
                    results.push(result);
                }
            }
            _ => {}
        }
    }
    let has_calls = content.iter().any(|c| c["type"] == "toolCall");
    let mut message = json!({
        "role": "assistant",
        "content": content,
        "provider": m["info"]["providerID"].as_str().unwrap_or(""),
        "model": m["info"]["modelID"].as_str().unwrap_or(""),
        "stopReason": if has_calls { "toolUse" } else { "stop" },
        "timestamp": timestamp,
    });
    if let Some(usage) = usage(&m["info"]) {
        message["usage"] = usage;
    }
    let mut out = vec![message];
    out.extend(results);
    out
}

/// A finished tool part's result message (none while it runs).
fn tool_result(id: &str, tool: &str, state: &Map<String, Value>, created: i64) -> Option<Value> {
    let status = state.get("status").and_then(Value::as_str)?;
    let text = match status {
        "completed" => state.get("output"),
        "error" => state.get("error"),
        _ => return None,
    };
    let text = match text {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let end = state
        .get("time")
        .and_then(|t| t.get("end"))
        .and_then(Value::as_i64)
        .unwrap_or(created);
    Some(json!({
        "role": "toolResult",
        "toolCallId": id,
        "toolName": tool,
        "content": [{ "type": "text", "text": text }],
        "isError": status == "error",
        "timestamp": end,
    }))
}

/// OpenCode's recorded tokens as pi's `usage` (reasoning is output), none
/// when nothing was recorded.
fn usage(info: &Value) -> Option<Value> {
    let t = info.get("tokens")?;
    let count = |v: &Value| v.as_u64().filter(|n| *n <= (1u64 << 53)).unwrap_or(0);
    let input = count(&t["input"]);
    let output = count(&t["output"]) + count(&t["reasoning"]);
    let cache_read = count(&t["cache"]["read"]);
    let cache_write = count(&t["cache"]["write"]);
    let total = input + output + cache_read + cache_write;
    if total == 0 {
        return None;
    }
    let cost = info
        .get("cost")
        .and_then(Value::as_f64)
        .filter(|c| c.is_finite() && *c >= 0.0)
        .unwrap_or(0.0);
    Some(json!({
        "input": input,
        "output": output,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": total,
        "cost": { "total": cost },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_store::session::Session;
    use std::path::Path;

    fn fixture(name: &str) -> String {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../condense-host-opencode/tests/fixtures");
        std::fs::read_to_string(dir.join(name)).expect("the OpenCode fixture")
    }

    /// The messages of the session `to_pi_session` writes, as read back.
    fn messages(jsonl: &str) -> Vec<Value> {
        let session = Session::parse(jsonl);
        assert!(session.problems.is_empty(), "{:?}", session.problems);
        session
            .branch(None)
            .iter()
            .map(|e| serde_json::from_str(e.message.as_ref().unwrap().json()).unwrap())
            .collect()
    }

    #[test]
    fn an_export_reads_as_the_plugin_converts_it() {
        // export.pi.json is the plugin's `convert` of the same export
        // (plugin/export.test.ts pins that side).
        let expected: Value = serde_json::from_str(&fixture("export.pi.json")).unwrap();
        let jsonl = to_pi_session(&fixture("export.json")).unwrap();
        assert_eq!(Value::Array(messages(&jsonl)), expected);
        let header: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
        assert_eq!(header["id"], "ses_fixture01");
        assert_eq!(header["cwd"], "/w");
    }

    fn export(messages: Value) -> String {
        json!({ "info": { "id": "ses_x", "time": { "created": 0 } }, "messages": messages })
            .to_string()
    }

    fn tool(call: &str, state: Value) -> Value {
        json!({ "type": "tool", "tool": "read", "callID": call, "state": state })
    }

    #[test]
    fn cleared_outputs_are_kept_and_compactions_left_out() {
        let cleared = tool(
            "c1",
            json!({ "status": "completed", "input": {}, "output": "the whole file",
                    "time": { "start": 1, "end": 2, "compacted": 3 } }),
        );
        let text = export(json!([
            { "info": { "role": "user", "time": { "created": 1 } },
              "parts": [{ "type": "text", "text": "go" }] },
            { "info": { "role": "assistant", "time": { "created": 2 } }, "parts": [cleared] },
            { "info": { "role": "user", "time": { "created": 3 } },
              "parts": [{ "type": "compaction", "auto": true }] },
            { "info": { "role": "assistant", "summary": true, "time": { "created": 4 } },
              "parts": [{ "type": "text", "text": "Summary of the session." }] },
            { "info": { "role": "user", "time": { "created": 5 } },
              "parts": [{ "type": "text", "text": "again" }] },
        ]));
        let got = messages(&to_pi_session(&text).unwrap());
        let roles: Vec<&str> = got.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "toolResult", "user"]);
        assert_eq!(got[2]["content"][0]["text"], "the whole file");
        assert_eq!(got[3]["content"][0]["text"], "again");
    }

    #[test]
    fn only_an_object_led_by_its_info_is_an_export() {
        assert!(looks_like_export(
            b"{\n  \"info\": {\n    \"id\": \"ses_1\""
        ));
        assert!(looks_like_export(b"  {\"info\":{}"));
        assert!(!looks_like_export(
            br#"{"type":"session","version":3,"id":"x"}"#
        ));
        assert!(!looks_like_export(b"{\"contextPrune\": {}}"));
        assert!(!looks_like_export(b""));
        assert!(to_pi_session("{\"info\": {}}").is_err());
        assert!(to_pi_session("{\"info\": 1, \"messages\": []}").is_err());
        assert!(to_pi_session("{\"info\": {").is_err());
    }
}
