//! The entries a live run would have appended, and the session file they
//! make with the recorded entries.

use std::collections::HashSet;

use condense_core::Message;
use serde_json::{json, Value};

use crate::protocol::{Delivery, Effect};

/// An entry the live run would have appended.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// How many of the recorded entries fed so far came before it.
    pub after: usize,
    /// The session's clock when it was appended (ms).
    pub at: i64,
    /// The append effect.
    pub effect: Effect,
}

impl Written {
    /// The entry as a session file line's fields (no id, parent or time).
    fn entry(&self) -> Option<Value> {
        match &self.effect {
            Effect::Append {
                custom_type, data, ..
            } => Some(json!({"type": "custom", "customType": custom_type, "data": data})),
            Effect::AppendMessage {
                custom_type,
                content,
                display,
                details,
                ..
            } => Some(json!({"type": "custom_message", "customType": custom_type,
                "content": content, "display": display, "details": details})),
            _ => None,
        }
    }
}

impl Written {
    /// The message this entry adds to pi's context, if any (a summary),
    /// as pi's `buildSessionContext` makes it.
    pub(super) fn context_message(&self) -> Option<Message> {
        self.effect.context_message(self.at)
    }

    /// Whether pi's running agent holds the message this entry adds as
    /// soon as it is appended (`pi.sendMessage`); one written straight to
    /// the session file reaches pi's list only when pi rebuilds it.
    pub(super) fn in_pi_list(&self) -> bool {
        matches!(
            self.effect,
            Effect::AppendMessage {
                delivery: Delivery::Runtime,
                ..
            }
        )
    }
}

/// The branch a live run would have left: the recorded entries' lines with the
/// written ones in their places, relinked parent to child, as the lines of
/// a session file without its header (what
/// [`StartParams::branch`](crate::StartParams::branch) takes).
pub fn branch_with_written(recorded: &[String], written: &[Written]) -> String {
    crate::jsonl(branch_lines(recorded, written).0)
}

/// [`branch_with_written`]'s lines, and the ids given to the written
/// entries.
pub(super) fn branch_lines(
    recorded: &[String],
    written: &[Written],
) -> (Vec<String>, HashSet<String>) {
    fn push(lines: &mut Vec<String>, mut v: Value, parent: &mut Value) {
        v["parentId"] = parent.clone();
        *parent = v["id"].clone();
        lines.push(v.to_string());
    }
    let mut ids = HashSet::new();
    let mut push_written = |lines: &mut Vec<String>, w: &Written, parent: &mut Value| {
        if let Some(mut v) = w.entry() {
            let id = format!("sim{:05}", lines.len());
            v["id"] = json!(id);
            v["timestamp"] = json!(condense_store::time::format_iso(w.at));
            push(lines, v, parent);
            ids.insert(id);
        }
    };
    let mut lines = Vec::with_capacity(recorded.len() + written.len());
    let mut parent = Value::Null;
    let mut next = written.iter().peekable();
    for (n, line) in recorded.iter().enumerate() {
        while let Some(w) = next.next_if(|w| w.after <= n) {
            push_written(&mut lines, w, &mut parent);
        }
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            push(&mut lines, v, &mut parent);
        }
    }
    for w in next {
        push_written(&mut lines, w, &mut parent);
    }
    (lines, ids)
}

/// A session's entries (lines without the header), parsed.
pub(super) fn parse_branch(text: &str) -> condense_store::session::Session {
    let header = r#"{"type":"session","version":3,"id":"simulated","timestamp":"","cwd":""}"#;
    condense_store::session::Session::parse(&format!("{header}\n{text}"))
}
