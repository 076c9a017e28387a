//! A branch's entries → the messages pi hands to the `context` event.
//!
//! This is pi's `buildSessionContext` over a branch (root first):
//! - a `message` entry gives its message, byte for byte;
//! - a `custom_message` entry gives
//!   `{"role":"custom","customType","content","display","details","timestamp"}`
//!   (keys the entry lacks are left out, as `JSON.stringify` drops
//!   `undefined`; `timestamp` is the entry's ISO timestamp in epoch ms, or
//!   `null` where JavaScript's `Date` would give `NaN`);
//! - a `branch_summary` entry with a truthy `summary` gives
//!   `{"role":"branchSummary","summary","fromId","timestamp"}`;
//! - the *last* `compaction` on the branch gives
//!   `{"role":"compactionSummary","summary","tokensBefore","timestamp"}`
//!   first, then the messages of the entries from its `firstKeptEntryId` up
//!   to the compaction, then those after it (earlier entries are dropped);
//! - a `message` entry whose message has role `system` (pi 1.6 records its
//!   system prompt so) gives nothing: pi filters those out of what `context`
//!   handlers get;
//! - `custom`, `label`, `session_info`, `model_change`,
//!   `thinking_level_change` and unknown entries give nothing.
//!
//! Each message comes with the id of the entry it came from.

use std::collections::BTreeMap;

use condense_core::{Message, ModelRef, Role};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::session::{Entry, EntryType, Session};
use crate::time::parse_iso;

/// What pi's `buildSessionContext` returns for a branch.
#[derive(Debug, Clone, Default)]
pub struct SessionContext {
    /// The agent messages, in order.
    pub messages: Vec<Message>,
    /// For each message, the id of the entry it came from.
    pub entry_ids: Vec<String>,
    /// The assistant messages on the branch before the context's own: those
    /// a compaction left out. pi-condense numbers turns over the whole
    /// branch (its frontier is written so), so the context's first
    /// assistant is turn `turns_before`.
    pub turns_before: i64,
    /// The last `thinking_level_change` on the branch (`"off"` if none).
    pub thinking_level: String,
    /// The last `model_change` or assistant message's provider and model.
    pub model: Option<ModelRef>,
}

impl SessionContext {
    /// Pairs of (entry id, message), in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Message)> {
        self.entry_ids
            .iter()
            .map(String::as_str)
            .zip(&self.messages)
    }
}

/// One message of a branch's context and the entry it came from.
#[derive(Debug, Clone)]
pub struct ContextMessage {
    /// The id of the entry the message came from.
    pub entry_id: String,
    /// The message.
    pub message: Message,
}

/// The branch's messages with their entry ids (the messages of
/// [`build_context`], paired).
pub fn branch_messages(branch: &[&Entry]) -> Vec<ContextMessage> {
    let ctx = build_context(branch);
    ctx.entry_ids
        .into_iter()
        .zip(ctx.messages)
        .map(|(entry_id, message)| ContextMessage { entry_id, message })
        .collect()
}

/// The messages of every `message` entry on the branch, root first, those
/// a compaction left out of the context included: what a raw tool-call id
/// `context_tree_query` cannot find in the index is looked up in, so an
/// output pi compacted away is found live as on a reload.
pub fn branch_history(branch: &[&Entry]) -> Vec<Message> {
    branch
        .iter()
        .filter(|e| e.kind == EntryType::Message)
        .filter_map(|e| e.message.clone())
        .collect()
}

impl Session {
    /// The context of the branch ending at `leaf_id` (the file's leaf when
    /// `None`); see [`build_context`].
    pub fn context(&self, leaf_id: Option<&str>) -> SessionContext {
        build_context(&self.branch(leaf_id))
    }
}

/// The messages pi would send for this branch (entries root first, as
/// [`Session::branch`] returns them).
pub fn build_context(branch: &[&Entry]) -> SessionContext {
    let mut ctx = SessionContext {
        thinking_level: thinking_level(branch),
        model: model(branch),
        ..SessionContext::default()
    };

    let compaction = branch.iter().rposition(|e| e.kind == EntryType::Compaction);
    match compaction {
        None => {
            for entry in branch {
                push_entry(&mut ctx, entry);
            }
        }
        Some(at) => {
            let compaction = branch[at];
            let fields = fields_of(compaction);
            let mut json = String::from(r#"{"role":"compactionSummary""#);
            push_fields(&mut json, &fields, &["summary", "tokensBefore"]);
            push_timestamp(&mut json, &compaction.timestamp);
            push_synthetic(&mut ctx, compaction, json);

            let first_kept = fields
                .get("firstKeptEntryId")
                .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
            let mut kept = false;
            for entry in &branch[..at] {
                if Some(&entry.id) == first_kept.as_ref() {
                    kept = true;
                }
                if kept {
                    push_entry(&mut ctx, entry);
                } else if is_assistant(entry) {
                    ctx.turns_before += 1;
                }
            }
            for entry in &branch[at + 1..] {
                push_entry(&mut ctx, entry);
            }
        }
    }
    ctx
}

fn is_assistant(entry: &Entry) -> bool {
    entry.kind == EntryType::Message
        && entry
            .message
            .as_ref()
            .is_some_and(|m| m.is(&Role::Assistant))
}

/// The message a `custom_message` entry appended at `at_ms` gives in pi's
/// context, as [`build_context`] makes it once the entry is in the file
/// (the engine shows a summary it wrote before pi reads the file back).
pub fn custom_message(
    custom_type: &str,
    content: &serde_json::Value,
    display: bool,
    details: &serde_json::Value,
    at_ms: i64,
) -> Option<Message> {
    let mut json = String::from(r#"{"role":"custom""#);
    let fields = [
        ("customType", serde_json::to_string(custom_type).ok()?),
        ("content", serde_json::to_string(content).ok()?),
        ("display", display.to_string()),
        ("details", serde_json::to_string(details).ok()?),
    ];
    for (key, raw) in &fields {
        push_field(&mut json, key, raw);
    }
    push_timestamp(&mut json, &crate::time::format_iso(at_ms));
    Message::from_json(&json).ok()
}

/// Appends the message an entry contributes, if any.
fn push_entry(ctx: &mut SessionContext, entry: &Entry) {
    match entry.kind {
        EntryType::Message => {
            // pi 1.6 records its system prompt as `system` messages on the
            // branch but filters them out of what `context` handlers see.
            if let Some(message) = entry
                .message
                .as_ref()
                .filter(|m| !matches!(m.role(), Some(Role::Other(r)) if r == "system"))
            {
                ctx.messages.push(message.clone());
                ctx.entry_ids.push(entry.id.clone());
            }
        }
        EntryType::CustomMessage => {
            let mut json = String::from(r#"{"role":"custom""#);
            let keys = ["customType", "content", "display", "details"];
            for (key, raw) in keys.iter().zip(entry.custom_message_fields()) {
                if let Some(raw) = raw {
                    push_field(&mut json, key, raw);
                }
            }
            push_timestamp(&mut json, &entry.timestamp);
            push_synthetic(ctx, entry, json);
        }
        EntryType::BranchSummary => {
            let fields = fields_of(entry);
            if !fields
                .get("summary")
                .is_some_and(|raw| js_truthy(raw.get()))
            {
                return;
            }
            let mut json = String::from(r#"{"role":"branchSummary""#);
            push_fields(&mut json, &fields, &["summary", "fromId"]);
            push_timestamp(&mut json, &entry.timestamp);
            push_synthetic(ctx, entry, json);
        }
        _ => {}
    }
}

fn push_synthetic(ctx: &mut SessionContext, entry: &Entry, json: String) {
    // Built from raw JSON values of a line that parsed, so it is valid JSON.
    if let Ok(message) = Message::from_json(&json) {
        ctx.messages.push(message);
        ctx.entry_ids.push(entry.id.clone());
    }
}

/// The top-level fields of an entry line, as raw JSON (last one wins on a
/// duplicated key, as in `JSON.parse`).
fn fields_of(entry: &Entry) -> BTreeMap<String, &RawValue> {
    serde_json::from_str(entry.raw()).unwrap_or_default()
}

/// Appends `,"key":<raw>` for each key present, in the given order. The raw
/// values are the file's own JSON text, which pi wrote with `JSON.stringify`.
fn push_fields(json: &mut String, fields: &BTreeMap<String, &RawValue>, keys: &[&str]) {
    for key in keys {
        if let Some(raw) = fields.get(*key) {
            push_field(json, key, raw.get());
        }
    }
}

fn push_field(json: &mut String, key: &str, raw: &str) {
    json.push_str(",\"");
    json.push_str(key);
    json.push_str("\":");
    json.push_str(raw);
}

/// Appends `,"timestamp":<ms>}`: `new Date(iso).getTime()`, or `null` for NaN.
fn push_timestamp(json: &mut String, iso: &str) {
    json.push_str(",\"timestamp\":");
    match parse_iso(iso) {
        Some(ms) => json.push_str(&ms.to_string()),
        None => json.push_str("null"),
    }
    json.push('}');
}

/// JavaScript truthiness of a JSON value.
fn js_truthy(raw: &str) -> bool {
    match raw.as_bytes().first() {
        Some(b'"') => raw != "\"\"",
        Some(b'n' | b'f') | None => false,
        Some(b't' | b'{' | b'[') => true,
        Some(_) => raw.parse::<f64>().is_ok_and(|n| n != 0.0),
    }
}

/// The last thinking level set on the branch.
fn thinking_level(branch: &[&Entry]) -> String {
    branch
        .iter()
        .rev()
        .find(|e| e.kind == EntryType::ThinkingLevelChange)
        .and_then(|e| e.raw_field("thinkingLevel"))
        .and_then(|raw| serde_json::from_str(raw).ok())
        .unwrap_or_else(|| "off".to_owned())
}

/// The model of the last `model_change` entry or assistant message.
fn model(branch: &[&Entry]) -> Option<ModelRef> {
    #[derive(Deserialize)]
    struct ModelChange {
        #[serde(default)]
        provider: Option<String>,
        #[serde(default, rename = "modelId")]
        model_id: Option<String>,
    }
    #[derive(Deserialize)]
    struct AssistantModel {
        #[serde(default)]
        provider: Option<String>,
        #[serde(default)]
        model: Option<String>,
    }
    let entry = branch.iter().rev().find(|e| match e.kind {
        EntryType::ModelChange => true,
        EntryType::Message => e.message.as_ref().is_some_and(|m| m.is(&Role::Assistant)),
        _ => false,
    })?;
    if entry.kind == EntryType::ModelChange {
        let m: ModelChange = serde_json::from_str(entry.raw()).ok()?;
        Some(ModelRef::new(
            m.provider.unwrap_or_default(),
            m.model_id.unwrap_or_default(),
        ))
    } else {
        let m: AssistantModel = serde_json::from_str(&entry.message.as_ref()?.json()).ok()?;
        Some(ModelRef::new(
            m.provider.unwrap_or_default(),
            m.model.unwrap_or_default(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(lines: &[&str]) -> Session {
        let mut text = String::from(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        );
        text.push('\n');
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        Session::parse(&text)
    }

    fn jsons(ctx: &SessionContext) -> Vec<String> {
        ctx.messages.iter().map(|m| m.json().to_string()).collect()
    }

    #[test]
    fn custom_message_keys_and_timestamp() {
        let s = session(&[
            r#"{"type":"custom_message","customType":"x","content":"hi","display":false,"details":{"a":1},"id":"a","parentId":null,"timestamp":"1970-01-01T00:00:01.500Z"}"#,
            r#"{"type":"custom_message","customType":"y","content":[{"type":"text","text":"t"}],"display":true,"id":"b","parentId":"a","timestamp":"bad"}"#,
            r#"{"type":"custom","customType":"z","data":{},"id":"c","parentId":"b","timestamp":"1970-01-01T00:00:01.000Z"}"#,
            r#"{"type":"custom_message","customType":"w","content":"n","display":false,"details":null,"id":"d","parentId":"c","timestamp":"1970-01-01T00:00:00.002Z"}"#,
        ]);
        let ctx = s.context(None);
        assert_eq!(
            jsons(&ctx),
            vec![
                r#"{"role":"custom","customType":"x","content":"hi","display":false,"details":{"a":1},"timestamp":1500}"#,
                r#"{"role":"custom","customType":"y","content":[{"type":"text","text":"t"}],"display":true,"timestamp":null}"#,
                r#"{"role":"custom","customType":"w","content":"n","display":false,"details":null,"timestamp":2}"#,
            ]
        );
        assert_eq!(ctx.entry_ids, vec!["a", "b", "d"]);
        assert_eq!(s.entries[3].payload_raw(), None);
    }

    #[test]
    fn a_custom_message_built_live_is_the_one_its_entry_gives() {
        let content = serde_json::json!("summary \"text\"");
        let details =
            serde_json::json!({"toolCallRefs": [{"id": "c1", "ref": "t1"}], "turnIndex": 2});
        let line = serde_json::json!({"type": "custom_message", "customType": "context-prune-summary",
            "content": content, "display": false, "details": details, "id": "a", "parentId": null,
            "timestamp": crate::time::format_iso(1_700_000_000_123)});
        let s = session(&[&line.to_string()]);
        let live = custom_message(
            "context-prune-summary",
            &content,
            false,
            &details,
            1_700_000_000_123,
        );
        assert_eq!(
            live.as_ref().map(|m| m.json().to_string()),
            Some(jsons(&s.context(None))[0].clone())
        );
    }

    #[test]
    fn system_messages_are_not_context_messages() {
        // pi 1.6: the system prompt (and tool loadout changes) as messages.
        let s = session(&[
            r#"{"type":"message","id":"s","parentId":null,"timestamp":"t","message":{"role":"system","content":"You are pi.","timestamp":1}}"#,
            r#"{"type":"message","id":"u","parentId":"s","timestamp":"t","message":{"role":"user","content":"hi","timestamp":2}}"#,
            r#"{"type":"message","id":"s2","parentId":"u","timestamp":"t","message":{"role":"system","content":"","toolsAdded":[],"timestamp":3}}"#,
            r#"{"type":"message","id":"a","parentId":"s2","timestamp":"t","message":{"role":"assistant","content":[],"timestamp":4}}"#,
        ]);
        let ctx = s.context(None);
        assert_eq!(
            jsons(&ctx),
            vec![
                r#"{"role":"user","content":"hi","timestamp":2}"#,
                r#"{"role":"assistant","content":[],"timestamp":4}"#,
            ]
        );
        assert_eq!(ctx.entry_ids, vec!["u", "a"]);
    }

    #[test]
    fn compaction_keeps_from_first_kept_entry() {
        let s = session(&[
            r#"{"type":"model_change","id":"m","parentId":null,"timestamp":"t","provider":"p","modelId":"m1"}"#,
            r#"{"type":"thinking_level_change","id":"k","parentId":"m","timestamp":"t","thinkingLevel":"high"}"#,
            r#"{"type":"message","id":"u1","parentId":"k","timestamp":"t","message":{"role":"user","content":"1","timestamp":1}}"#,
            r#"{"type":"message","id":"u2","parentId":"u1","timestamp":"t","message":{"role":"user","content":"2","timestamp":2}}"#,
            r#"{"type":"compaction","id":"c","parentId":"u2","timestamp":"1970-01-01T00:00:00.010Z","summary":"S","firstKeptEntryId":"u2","tokensBefore":50,"details":{}}"#,
            r#"{"type":"branch_summary","id":"b0","parentId":"c","timestamp":"t","fromId":"u1","summary":""}"#,
            r#"{"type":"branch_summary","id":"b1","parentId":"b0","timestamp":"1970-01-01T00:00:00.020Z","fromId":"u1","summary":"B"}"#,
            r#"{"type":"message","id":"a","parentId":"b1","timestamp":"t","message":{"role":"assistant","content":[],"provider":"q","model":"m2","timestamp":3}}"#,
        ]);
        let ctx = s.context(None);
        assert_eq!(
            jsons(&ctx),
            vec![
                r#"{"role":"compactionSummary","summary":"S","tokensBefore":50,"timestamp":10}"#,
                r#"{"role":"user","content":"2","timestamp":2}"#,
                r#"{"role":"branchSummary","summary":"B","fromId":"u1","timestamp":20}"#,
                r#"{"role":"assistant","content":[],"provider":"q","model":"m2","timestamp":3}"#,
            ]
        );
        assert_eq!(ctx.entry_ids, vec!["c", "u2", "b1", "a"]);
        assert_eq!(ctx.thinking_level, "high");
        assert_eq!(ctx.model, Some(ModelRef::new("q", "m2")));

        // On the branch ending before the assistant, the model_change wins.
        let ctx = s.context(Some("b1"));
        assert_eq!(ctx.model, Some(ModelRef::new("p", "m1")));
    }

    #[test]
    fn turns_before_counts_the_assistants_a_compaction_left_out() {
        let msg = |id: &str, parent: &str, role: &str| {
            format!(
                r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"t","message":{{"role":"{role}","content":[],"timestamp":1}}}}"#
            )
        };
        let lines = [
            msg("u1", "", "user"),
            msg("a1", "u1", "assistant"),
            msg("a2", "a1", "assistant"),
            msg("u2", "a2", "user"),
            msg("a3", "u2", "assistant"),
            r#"{"type":"compaction","id":"c","parentId":"a3","timestamp":"t","summary":"S","firstKeptEntryId":"u2","tokensBefore":50}"#.to_owned(),
            msg("a4", "c", "assistant"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let s = session(&lines);
        let ctx = s.context(None);
        // a1 and a2 are left out; a3 (kept) and a4 are turns 2 and 3.
        assert_eq!(ctx.turns_before, 2);
        assert_eq!(ctx.entry_ids, vec!["c", "u2", "a3", "a4"]);
        // Without a compaction nothing is left out.
        assert_eq!(s.context(Some("a3")).turns_before, 0);
        // A compaction that kept nothing leaves out every earlier assistant.
        let mut lines = lines.clone();
        let none_kept = r#"{"type":"compaction","id":"c","parentId":"a3","timestamp":"t","summary":"S","firstKeptEntryId":"gone","tokensBefore":50}"#;
        lines[5] = none_kept;
        assert_eq!(session(&lines).context(None).turns_before, 3);
    }

    #[test]
    fn truthiness() {
        for (raw, truthy) in [
            ("\"\"", false),
            ("\"a\"", true),
            ("0", false),
            ("-0.0", false),
            ("2", true),
            ("null", false),
            ("false", false),
            ("[]", true),
            ("{}", true),
        ] {
            assert_eq!(js_truthy(raw), truthy, "{raw}");
        }
    }
}
