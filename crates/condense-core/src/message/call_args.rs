//! The id, name and `path` argument of a message's `toolCall` blocks, read
//! from its JSON without building the whole content tree.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::{CallArgs, Message};

#[derive(Deserialize)]
struct ContentDe<'a> {
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CallDe<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

fn raw_string(raw: Option<&RawValue>) -> Option<String> {
    let raw = raw?;
    if !raw.get().starts_with('"') {
        return None;
    }
    serde_json::from_str(raw.get()).ok()
}

/// Each `toolCall` block of a message that has a non-empty string id, in
/// order, with its arguments' `path`. The arguments are `input` when
/// present and not null, else `arguments`, else null (pi-condense reads
/// `block.input ?? block.arguments` for protection); they are parsed whole,
/// so `path` is what a `Value` of them holds (the last of duplicate keys).
/// Parses the message's content; [`Message::call_args`](super::Message::call_args)
/// keeps the result.
pub(super) fn parse_tool_call_args(message: &Message) -> Vec<CallArgs> {
    let json = message.json();
    let Ok(de) = serde_json::from_str::<ContentDe>(&json) else {
        return Vec::new();
    };
    let Some(content) = de.content.filter(|c| c.get().starts_with('[')) else {
        return Vec::new();
    };
    let Ok(blocks) = serde_json::from_str::<Vec<CallDe>>(content.get()) else {
        return Vec::new();
    };
    blocks
        .into_iter()
        .filter(|b| b.kind.map(RawValue::get) == Some("\"toolCall\""))
        .filter_map(|b| {
            let id = raw_string(b.id).filter(|id| !id.is_empty())?;
            let name = raw_string(b.name).unwrap_or_default();
            let raw = b.input.filter(|r| r.get() != "null").or(b.arguments);
            let args: Value = raw
                .and_then(|r| serde_json::from_str(r.get()).ok())
                .unwrap_or(Value::Null);
            let path = args.get("path").and_then(Value::as_str).map(str::to_owned);
            Some(CallArgs { id, name, path })
        })
        .collect::<Vec<_>>()
        .into_boxed_slice()
        .into_vec()
}
