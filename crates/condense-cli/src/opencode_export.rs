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
//! - An OpenCode compaction (the user message holding a `compaction` part
//!   and the summary answering it) becomes pi's `compaction` entry where the
//!   summary stands, holding its text and keeping from the part's
//!   `tail_start_id` (the turns OpenCode kept after its summary), as the
//!   simulator keeps a compaction a pi session recorded. OpenCode then sends
//!   its summary, the tail and what follows, as pi does.
//!
//! One fixture export pins the messages to the plugin's own conversion
//! (condense-host-opencode's `tests/fixtures/`, which its
//! `plugin/export.test.ts` converts too).

use std::collections::HashMap;

use condense_store::time::format_iso;
use serde_json::{json, Map, Value};

/// Whether `head` (the start of a file) is an OpenCode export: one JSON
/// object whose first key is `info` or `messages` (OpenCode prints the
/// session's info, then its messages). A pi session's first line is its
/// header, whose first key is `type`.
pub fn looks_like_export(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    // A byte-order mark (an editor's, or Windows' `>` redirection) is no content.
    let rest = text.trim_start_matches('\u{feff}').trim_start();
    rest.strip_prefix('{').is_some_and(|r| {
        let key = r.trim_start();
        key.starts_with("\"info\"") || key.starts_with("\"messages\"")
    })
}

/// The export `text` as pi session JSONL (a v3 header, then one `message`
/// entry per pi message and one `compaction` per OpenCode compaction, each
/// the child of the one before), or why it is not an export.
pub fn to_pi_session(text: &str) -> Result<String, String> {
    let text = text.trim_start_matches('\u{feff}');
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
    let mut out = Entries {
        lines: vec![header.to_string()],
        parent: None,
        first_entry: HashMap::new(),
    };
    // The tail a compaction keeps, by the user message that starts it.
    let mut tails: HashMap<&str, Option<&str>> = HashMap::new();
    for m in messages {
        let id = m["info"]["id"].as_str().unwrap_or("");
        if role(m) == "user" {
            if let Some(part) = parts(m).find(|p| p["type"] == "compaction") {
                tails.insert(id, part["tail_start_id"].as_str());
                continue;
            }
        }
        if is_compaction_summary(m) {
            let started_by = m["info"]["parentID"].as_str().unwrap_or("");
            let tail = tails.get(started_by).copied().flatten();
            out.compaction(m, tail);
            continue;
        }
        for pi in to_pi(m) {
            out.message(id, pi);
        }
    }
    Ok(out.lines.join("\n") + "\n")
}

/// The entries written so far, each the child of the one before.
struct Entries<'a> {
    lines: Vec<String>,
    parent: Option<String>,
    /// The entry of each OpenCode message's first pi message.
    first_entry: HashMap<&'a str, String>,
}

impl<'a> Entries<'a> {
    fn push(&mut self, mut entry: Value) -> String {
        let id = format!("m{}", self.lines.len());
        entry["id"] = json!(id);
        entry["parentId"] = json!(self.parent);
        self.lines.push(entry.to_string());
        self.parent = Some(id.clone());
        id
    }

    fn message(&mut self, from: &'a str, pi: Value) {
        let ts = pi.get("timestamp").and_then(Value::as_i64).unwrap_or(0);
        let id =
            self.push(json!({ "type": "message", "timestamp": format_iso(ts), "message": pi }));
        self.first_entry.entry(from).or_insert(id);
    }

    /// pi's compaction for OpenCode's summary `summary`, keeping from the
    /// message `tail` (nothing when OpenCode kept no tail).
    fn compaction(&mut self, summary: &Value, tail: Option<&str>) {
        let text: String = parts(summary)
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let first_kept = tail.and_then(|t| self.first_entry.get(t)).cloned();
        // The compaction call's prompt: the context it summarized.
        let t = &summary["info"]["tokens"];
        let before = [&t["input"], &t["cache"]["read"], &t["cache"]["write"]]
            .iter()
            .map(|v| v.as_u64().unwrap_or(0))
            .sum::<u64>();
        let ts = summary["info"]["time"]["created"].as_i64().unwrap_or(0);
        self.push(json!({
            "type": "compaction",
            "timestamp": format_iso(ts),
            "summary": text,
            "firstKeptEntryId": first_kept,
            "tokensBefore": before,
        }));
    }
}

fn role(m: &Value) -> &str {
    m["info"]["role"].as_str().unwrap_or("")
}

fn parts(m: &Value) -> impl Iterator<Item = &Value> {
    m["parts"].as_array().into_iter().flatten()
}

/// The assistant message holding a compaction's summary (not a turn of
/// the agent's).
fn is_compaction_summary(m: &Value) -> bool {
    role(m) == "assistant" && m["info"]["summary"] == true
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

    #[test]
    fn an_export_behind_a_byte_order_mark_is_an_export() {
        let text = "\u{feff}{\"info\":{\"id\":\"ses_1\",\"time\":{\"created\":1}},\"messages\":[]}";
        assert!(looks_like_export(text.as_bytes()));
        assert!(to_pi_session(text).is_ok());
    }
    use condense_store::session::Session;
    use std::path::Path;

    fn fixture(name: &str) -> String {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../condense-host-opencode/tests/fixtures");
        std::fs::read_to_string(dir.join(name)).expect("the OpenCode fixture")
    }

    /// The message entries of the session `to_pi_session` writes, as read
    /// back.
    fn messages(jsonl: &str) -> Vec<Value> {
        let session = Session::parse(jsonl);
        assert!(session.problems.is_empty(), "{:?}", session.problems);
        session
            .branch(None)
            .iter()
            .filter_map(|e| e.message.as_ref())
            .map(|m| serde_json::from_str(&m.json()).unwrap())
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

    /// A user message, an assistant reading `call`, a compaction keeping
    /// from `tail` (an OpenCode message id), its summary, a new prompt.
    fn compacted(call: &str, tail: Option<&str>) -> String {
        let read = tool(
            call,
            json!({ "status": "completed", "input": {}, "output": "the whole file",
                    "time": { "start": 1, "end": 2, "compacted": 3 } }),
        );
        let mut compaction = json!({ "type": "compaction", "auto": true });
        if let Some(tail) = tail {
            compaction["tail_start_id"] = json!(tail);
        }
        export(json!([
            { "info": { "id": "u1", "role": "user", "time": { "created": 1 } },
              "parts": [{ "type": "text", "text": "go" }] },
            { "info": { "id": "a1", "role": "assistant", "time": { "created": 2 } },
              "parts": [read] },
            { "info": { "id": "u2", "role": "user", "time": { "created": 3 } },
              "parts": [compaction] },
            { "info": { "id": "a2", "parentID": "u2", "role": "assistant", "summary": true,
                        "time": { "created": 4 },
                        "tokens": { "input": 900, "output": 50, "cache": { "read": 100 } } },
              "parts": [{ "type": "text", "text": "Summary of the session." }] },
            { "info": { "id": "u3", "role": "user", "time": { "created": 5 } },
              "parts": [{ "type": "text", "text": "again" }] },
        ]))
    }

    #[test]
    fn a_cleared_output_is_replayed_whole() {
        let got = messages(&to_pi_session(&compacted("c1", None)).unwrap());
        assert_eq!(got[2]["role"], "toolResult");
        assert_eq!(got[2]["content"][0]["text"], "the whole file");
    }

    #[test]
    fn a_compaction_is_pis_keeping_opencodes_tail() {
        let jsonl = to_pi_session(&compacted("c1", Some("a1"))).unwrap();
        let session = Session::parse(&jsonl);
        assert!(session.problems.is_empty(), "{:?}", session.problems);
        // The summary is no call; the compaction stands where it did.
        let kinds: Vec<String> = session
            .entries
            .iter()
            .map(|e| format!("{:?}", e.kind))
            .collect();
        assert_eq!(
            kinds,
            ["Message", "Message", "Message", "Compaction", "Message"]
        );
        let c: Value = serde_json::from_str(jsonl.lines().nth(4).unwrap()).unwrap();
        assert_eq!(c["summary"], "Summary of the session.");
        assert_eq!(c["tokensBefore"], 1000);
        // The context after it: pi's summary, the tail from `a1`, the prompt.
        let ctx = session.context(None);
        let ids: Vec<&str> = ctx.entry_ids.iter().map(String::as_str).collect();
        assert_eq!(ids, ["m4", "m2", "m3", "m5"]);
        let first: Value = serde_json::from_str(&ctx.messages[0].json()).unwrap();
        assert_eq!(first["role"], "compactionSummary");
        assert_eq!(first["summary"], "Summary of the session.");
        assert_eq!(ctx.turns_before, 0);

        // No tail: the context keeps nothing before the compaction.
        let jsonl = to_pi_session(&compacted("c1", None)).unwrap();
        let ctx = Session::parse(&jsonl).context(None);
        assert_eq!(ctx.messages.len(), 2);
        assert_eq!(ctx.turns_before, 1);
    }

    #[test]
    fn only_an_object_led_by_its_info_is_an_export() {
        assert!(looks_like_export(
            b"{\n  \"info\": {\n    \"id\": \"ses_1\""
        ));
        assert!(looks_like_export(b"  {\"info\":{}"));
        assert!(looks_like_export(b"{\"messages\": [], \"info\": {}}"));
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

#[cfg(test)]
mod hostile {
    use super::*;
    use condense_store::session::Session;
    use proptest::prelude::*;

    const KEYS: &[&str] = &[
        "info",
        "messages",
        "id",
        "role",
        "parts",
        "type",
        "text",
        "tool",
        "callID",
        "state",
        "status",
        "input",
        "output",
        "error",
        "time",
        "created",
        "end",
        "compaction",
        "tail_start_id",
        "summary",
        "parentID",
        "tokens",
        "cache",
        "read",
        "write",
        "ignored",
    ];
    const STRINGS: &[&str] = &[
        "user",
        "assistant",
        "tool",
        "text",
        "reasoning",
        "compaction",
        "completed",
        "error",
        "running",
        "u1",
        "a1",
        "c1",
        "",
    ];

    /// JSON shaped like an export: objects keyed from the export's own
    /// vocabulary, values of every type.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-1e300f64..1e300).prop_map(|f| json!(f)),
            proptest::sample::select(STRINGS).prop_map(|s| json!(s)),
            "\\PC{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(6, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..6).prop_map(
                    |kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                ),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever the export holds, reading it never panics, and what it
        /// writes reads back as a session without a problem.
        #[test]
        fn any_export_reads_or_is_refused(messages in proptest::collection::vec(value(), 0..8), info in value()) {
            let text = json!({ "info": info, "messages": messages }).to_string();
            if let Ok(jsonl) = to_pi_session(&text) {
                let session = Session::parse(&jsonl);
                prop_assert!(session.problems.is_empty(), "{:?}\n{}", session.problems, jsonl);
                let _ = session.context(None);
            }
        }
    }
}
