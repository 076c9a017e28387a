//! A Claude Code transcript (`~/.claude/projects/<cwd-slug>/<session>.jsonl`)
//! read as the pi session the simulator replays.
//!
//! The conversation is the main chain from the last message back through
//! `parentUuid` (sub-agents' `isSidechain` entries and Claude Code's own
//! bookkeeping lines left out); an assistant message Claude Code recorded
//! one content block a line is joined back by its `message.id`, carrying
//! the usage the provider reported (pi's `usage`, what `--calibrate` fits).
//! Each message becomes the pi messages the proxy shows the engine
//! (`condense_host_proxy::anthropic::units`), so the simulator replays what
//! `condense proxy` would have. Attachments Claude Code renders into a
//! request (system reminders) are not in the conversation: they are part
//! of the fixed overhead the calibration fits.

use std::collections::HashMap;

use condense_host_proxy::anthropic;
use condense_host_proxy::view::{Part, Usage};

use crate::pi_session;
use condense_store::time::parse_iso;
use serde_json::{json, Value};

/// Whether `head` (the start of a file) is a Claude Code transcript: its
/// first line a JSON object, not a pi header, naming a session or an entry
/// of Claude Code's (`sessionId`, `parentUuid`, or the `leafUuid` of the
/// summary line older versions begin with).
pub fn looks_like_transcript(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let first = text
        .trim_start_matches('\u{feff}')
        .lines()
        .next()
        .unwrap_or("");
    first.trim_start().starts_with('{')
        && !first.contains("\"type\":\"session\"")
        && ["\"sessionId\"", "\"parentUuid\"", "\"leafUuid\""]
            .iter()
            .any(|k| first.contains(k))
}

/// One conversation line of the transcript.
struct Line {
    parent: Option<String>,
    role: String,
    message: Value,
    at: i64,
}

/// The transcript `text` as pi session JSONL (a v3 header, then one
/// `message` entry per pi message, each the child of the one before), or
/// why it is not one.
pub fn to_pi_session(text: &str) -> Result<String, String> {
    let mut lines: HashMap<String, Line> = HashMap::new();
    let mut parents: HashMap<String, Option<String>> = HashMap::new();
    let mut leaf = None;
    let mut session = String::from("claude-code");
    for raw in text.lines() {
        let Ok(e) = serde_json::from_str::<Value>(raw) else {
            continue;
        };
        if let Some(id) = e.get("sessionId").and_then(Value::as_str) {
            session = id.to_owned();
        }
        let Some(uuid) = e.get("uuid").and_then(Value::as_str) else {
            continue;
        };
        let parent = e
            .get("parentUuid")
            .and_then(Value::as_str)
            .map(str::to_owned);
        parents.insert(uuid.to_owned(), parent.clone());
        let kind = e.get("type").and_then(Value::as_str).unwrap_or("");
        let sidechain = e.get("isSidechain").and_then(Value::as_bool) == Some(true);
        if !(kind == "user" || kind == "assistant") || sidechain {
            continue;
        }
        let Some(message) = e.get("message").filter(|m| m.is_object()) else {
            continue;
        };
        let at = e
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_iso)
            .unwrap_or(0);
        lines.insert(
            uuid.to_owned(),
            Line {
                parent,
                role: kind.to_owned(),
                message: message.clone(),
                at,
            },
        );
        leaf = Some(uuid.to_owned());
    }
    let leaf = leaf.ok_or("no user or assistant message")?;
    // The main chain, root first, through the bookkeeping lines between.
    let mut chain = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut at = Some(leaf);
    while let Some(uuid) = at {
        if !seen.insert(uuid.clone()) {
            break;
        }
        if let Some(line) = lines.get(&uuid) {
            chain.push(line);
            at = line.parent.clone();
        } else {
            at = parents.get(&uuid).cloned().flatten();
        }
    }
    chain.reverse();

    // Assistant lines of one answer (one `message.id`) joined back.
    struct Turn<'a> {
        role: &'a str,
        content: Vec<Value>,
        usage: Option<Usage>,
        at: i64,
        id: Option<&'a str>,
    }
    let mut turns: Vec<Turn<'_>> = Vec::new();
    for line in chain {
        let content = match line.message.get("content") {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(blocks)) => blocks.clone(),
            _ => Vec::new(),
        };
        let id = line.message.get("id").and_then(Value::as_str);
        let usage = line.message.get("usage").map(|u| {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            Usage {
                input: n("input_tokens"),
                cache_read: n("cache_read_input_tokens"),
                cache_write: n("cache_creation_input_tokens"),
                output: n("output_tokens"),
            }
        });
        match turns.last_mut() {
            Some(t)
                if line.role == "assistant"
                    && t.role == "assistant"
                    && id.is_some()
                    && t.id == id =>
            {
                t.content.extend(content);
                t.usage = usage.or(t.usage);
            }
            _ => turns.push(Turn {
                role: &line.role,
                content,
                usage,
                at: line.at,
                id,
            }),
        }
    }

    let messages: Vec<Value> = turns
        .iter()
        .map(|t| json!({"role": t.role, "content": t.content}))
        .collect();
    let body = json!({ "messages": messages }).to_string();
    let request = anthropic::read_request(&body)
        .map_err(|e| format!("a message Claude Code recorded does not read: {e}"))?;
    let units = anthropic::units(&request);

    let first_at = turns.first().map_or(0, |t| t.at);
    let mut last_assistant = None;
    let recorded = units.iter().map(|unit| {
        let turn = &turns[unit.message];
        // A message Claude Code split into several units carries its
        // call's usage once, on the first.
        let usage = (unit.part == Part::Assistant && last_assistant != Some(unit.message))
            .then_some(turn.usage)
            .flatten();
        if unit.part == Part::Assistant {
            last_assistant = Some(unit.message);
        }
        pi_session::Recorded {
            view: &unit.view,
            usage,
            at: turn.at,
        }
    });
    pi_session::write(&session, first_at, recorded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(v: Value) -> String {
        v.to_string()
    }

    #[test]
    fn the_main_chain_becomes_pi_messages_with_the_recorded_usage() {
        let usage = json!({"input_tokens": 10, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 30, "output_tokens": 5});
        let text = [
            line(json!({"type": "queue-operation", "sessionId": "s1", "timestamp": "2026-12-05T01:00:00.000Z"})),
            line(json!({"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": "s1", "timestamp": "2026-12-05T01:00:00.000Z", "message": {"role": "user", "content": "count"}})),
            line(json!({"type": "attachment", "uuid": "a1", "parentUuid": "u1", "sessionId": "s1"})),
            line(json!({"type": "assistant", "uuid": "m1", "parentUuid": "a1", "sessionId": "s1", "timestamp": "2026-12-05T01:00:01.000Z", "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "text", "text": "Running."}], "usage": usage}})),
            line(json!({"type": "assistant", "uuid": "m2", "parentUuid": "m1", "sessionId": "s1", "timestamp": "2026-12-05T01:00:01.100Z", "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "seq 3"}}], "usage": usage}})),
            line(json!({"type": "user", "uuid": "side", "parentUuid": "m2", "isSidechain": true, "sessionId": "s1", "message": {"role": "user", "content": "a sub-agent"}})),
            line(json!({"type": "user", "uuid": "r1", "parentUuid": "m2", "sessionId": "s1", "timestamp": "2026-12-05T01:00:02.000Z", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1\n2\n3"}]}})),
        ]
        .join("\n");
        assert!(looks_like_transcript(text.as_bytes()));
        let jsonl = to_pi_session(&text).unwrap();
        let session = condense_store::session::Session::parse(&jsonl);
        assert!(session.problems.is_empty(), "{:?}", session.problems);
        let ctx = session.context(None);
        let roles: Vec<String> = ctx
            .messages
            .iter()
            .map(|m| {
                let v: Value = serde_json::from_str(&m.json()).unwrap();
                v["role"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(roles, ["user", "assistant", "toolResult"]);
        let assistant: Value = serde_json::from_str(&ctx.messages[1].json()).unwrap();
        assert_eq!(
            assistant["content"].as_array().unwrap().len(),
            2,
            "one answer, joined"
        );
        assert_eq!(assistant["usage"]["cacheRead"], 900);
        assert_eq!(assistant["usage"]["input"], 10);
        assert!(!jsonl.contains("a sub-agent"));
        let pi_header = r#"{"type":"session","version":3,"id":"x","sessionId":"y"}"#;
        assert!(!looks_like_transcript(pi_header.as_bytes()));
        // Older transcripts begin with a summary line.
        let older = r#"{"type":"summary","summary":"Fixing the build","leafUuid":"u9"}"#;
        assert!(looks_like_transcript(older.as_bytes()));
    }
}
