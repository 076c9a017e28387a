//! The entries a live run would have appended, and the session file they
//! make with the recorded entries.

use std::collections::HashSet;

use condense_core::Message;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

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
    /// The entry as a session file line, under `id` and after `parent`;
    /// `None` for an effect that appends nothing. Serialized straight from
    /// the effect (its `data` can be large: building a `Value` copied it).
    fn line(&self, id: &str, parent: &Value) -> Option<String> {
        let timestamp = condense_store::time::format_iso(self.at);
        let line = match &self.effect {
            Effect::Append {
                custom_type, data, ..
            } => serde_json::to_string(&CustomLine {
                kind: "custom",
                custom_type,
                data,
                id,
                timestamp: &timestamp,
                parent_id: parent,
            }),
            Effect::AppendMessage {
                custom_type,
                content,
                display,
                details,
                ..
            } => serde_json::to_string(&CustomMessageLine {
                kind: "custom_message",
                custom_type,
                content,
                display: *display,
                details,
                id,
                timestamp: &timestamp,
                parent_id: parent,
            }),
            _ => return None,
        };
        line.ok()
    }
}

/// A `custom` entry's line, its fields in the order pi's are.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CustomLine<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    custom_type: &'a str,
    data: &'a Value,
    id: &'a str,
    timestamp: &'a str,
    parent_id: &'a Value,
}

/// A `custom_message` entry's line, its fields in the order pi's are.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CustomMessageLine<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    custom_type: &'a str,
    content: &'a Value,
    display: bool,
    details: &'a Value,
    id: &'a str,
    timestamp: &'a str,
    parent_id: &'a Value,
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
    crate::jsonl(branch_lines(recorded, written, 0).0)
}

/// [`branch_with_written`]'s lines from the recorded entry `from` on (the
/// written entries before it left out), and the ids given to the written
/// entries.
pub(super) fn branch_lines(
    recorded: &[String],
    written: &[Written],
    from: usize,
) -> (Vec<String>, HashSet<String>) {
    fn push(lines: &mut Vec<String>, v: Value, parent: &mut Value) {
        // JSON that is not an object is no entry: the branch leaves it out.
        let Value::Object(mut entry) = v else { return };
        entry.insert("parentId".to_owned(), parent.clone());
        *parent = entry.get("id").cloned().unwrap_or(Value::Null);
        lines.push(Value::Object(entry).to_string());
    }
    let mut ids = HashSet::new();
    let mut push_written = |lines: &mut Vec<String>, w: &Written, parent: &mut Value| {
        let id = format!("sim{:05}", lines.len());
        if let Some(line) = w.line(&id, parent) {
            lines.push(line);
            *parent = Value::String(id.clone());
            ids.insert(id);
        }
    };
    let mut lines = Vec::with_capacity(recorded.len().saturating_sub(from) + written.len());
    let mut parent = Value::Null;
    let mut next = written.iter().filter(|w| w.after > from).peekable();
    for (n, line) in recorded.iter().enumerate().skip(from) {
        while let Some(w) = next.next_if(|w| w.after <= n) {
            push_written(&mut lines, w, &mut parent);
        }
        if let Some(id) = linked_to(line, &parent) {
            lines.push(line.clone());
            parent = id;
        } else if let Ok(v) = serde_json::from_str::<Value>(line) {
            push(&mut lines, v, &mut parent);
        }
    }
    for w in next {
        push_written(&mut lines, w, &mut parent);
    }
    (lines, ids)
}

/// The two fields relinking reads, as their JSON text.
#[derive(Deserialize)]
struct Link<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(rename = "parentId", borrow, default)]
    parent_id: Option<&'a RawValue>,
}

/// The id of the entry `line` holds when its `parentId` already names
/// `parent`, as nearly every recorded line's does (only one right after a
/// written entry, or a branch's first, is relinked): such a line is kept
/// byte for byte. Rebuilding every line through a `Value` and serializing
/// it again was most of the reload check's time on a long session. `None`
/// when the line needs relinking or does not parse this way.
fn linked_to(line: &str, parent: &Value) -> Option<Value> {
    let link: Link<'_> = serde_json::from_str(line).ok()?;
    let named: Value = serde_json::from_str(link.parent_id?.get()).ok()?;
    if named != *parent {
        return None;
    }
    match link.id {
        Some(id) => serde_json::from_str(id.get()).ok(),
        None => Some(Value::Null),
    }
}

/// A session's entries (lines without the header), parsed.
pub(super) fn parse_branch(text: &str) -> condense_store::session::Session {
    let header = r#"{"type":"session","version":3,"id":"simulated","timestamp":"","cwd":""}"#;
    condense_store::session::Session::parse(&format!("{header}\n{text}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Delivery;
    use serde_json::json;

    fn written(after: usize) -> Written {
        Written {
            after,
            at: 1_780_000_000_000,
            effect: Effect::Append {
                custom_type: "condense-state".into(),
                data: json!({"n": 1, "ids": ["x"]}),
                delivery: Delivery::Session,
            },
        }
    }

    /// A recorded line already linked to the entry before it stays byte for
    /// byte (its number as written); the one after a written entry is
    /// relinked to it, and the written entry to the line before.
    #[test]
    fn relinks_only_the_lines_whose_parent_changed() {
        let recorded = [
            r#"{"type":"message","id":"a","parentId":null,"cost":0.000009}"#.to_owned(),
            r#"{"type":"message","id":"b","parentId":"a","cost":0.000009}"#.to_owned(),
            r#"{"type":"message","id":"c","parentId":"b","cost":0.000009}"#.to_owned(),
        ];
        let (lines, ids) = branch_lines(&recorded, &[written(2)], 0);
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[1], recorded[1]);
        let w: Value = serde_json::from_str(&lines[2]).unwrap();
        assert_eq!(
            (&w["type"], &w["parentId"], &w["data"]),
            (
                &json!("custom"),
                &json!("b"),
                &json!({"n": 1, "ids": ["x"]})
            )
        );
        assert!(ids.contains(w["id"].as_str().unwrap()));
        let c: Value = serde_json::from_str(&lines[3]).unwrap();
        assert_eq!((&c["id"], &c["parentId"]), (&json!("c"), &w["id"]));
        // Relinked through a `Value`: the number is written again.
        assert!(!lines[3].contains("0.000009"), "{}", lines[3]);
    }

    /// A recorded line whose parent is not the entry before it (a branch
    /// point) is relinked to that entry, as pi's file of the run would have.
    #[test]
    fn relinks_a_line_whose_parent_is_elsewhere() {
        let recorded = [
            r#"{"type":"message","id":"a","parentId":null}"#.to_owned(),
            r#"{"type":"message","id":"b","parentId":"z"}"#.to_owned(),
        ];
        let (lines, _) = branch_lines(&recorded, &[], 0);
        let b: Value = serde_json::from_str(&lines[1]).unwrap();
        assert_eq!(b["parentId"], json!("a"));
    }

    /// A line that parses as JSON but is no object is left out of the
    /// branch (it was a panic), and the next entry links past it.
    #[test]
    fn a_line_that_is_json_but_no_object_is_left_out() {
        let recorded = [
            r#"{"type":"message","id":"a","parentId":null}"#.to_owned(),
            r#"[1,2]"#.to_owned(),
            r#""text""#.to_owned(),
            r#"{"type":"message","id":"b","parentId":"z"}"#.to_owned(),
        ];
        let (lines, _) = branch_lines(&recorded, &[], 0);
        assert_eq!(lines.len(), 2);
        let b: Value = serde_json::from_str(&lines[1]).unwrap();
        assert_eq!((&b["id"], &b["parentId"]), (&json!("b"), &json!("a")));
    }

    /// A written entry's line has pi's field order, its id, time and parent.
    #[test]
    fn a_written_line_is_a_custom_entry() {
        let line = written(0).line("sim00000", &json!("p")).unwrap();
        assert_eq!(
            line,
            format!(
                r#"{{"type":"custom","customType":"condense-state","data":{{"n":1,"ids":["x"]}},"id":"sim00000","timestamp":"{}","parentId":"p"}}"#,
                condense_store::time::format_iso(1_780_000_000_000)
            )
        );
    }
}
