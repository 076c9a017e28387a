//! What capture reads out of a turn's messages: an assistant's prose and
//! tool calls, and a result's text (a window on the message's JSON where the
//! text is one literal, else decoded without building a `Value` of a giant
//! output).

use std::sync::Arc;

use serde_json::Value;

use super::{CapturedCall, NO_RESULT};
use crate::message::Message;
use crate::text::{Buffer, SharedText};

pub(super) fn assistant_parts(assistant: &Value) -> (String, Vec<(String, String, Value)>) {
    let blocks = assistant.get("content").and_then(Value::as_array);
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for b in blocks.into_iter().flatten() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    texts.push(t);
                }
            }
            Some("toolCall") => {
                let Some(id) = b
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                else {
                    continue;
                };
                let name = b.get("name").and_then(Value::as_str).unwrap_or_default();
                let args = ["input", "args", "arguments"]
                    .iter()
                    .find_map(|k| b.get(*k).filter(|v| !v.is_null()))
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Default::default()));
                calls.push((id.to_owned(), name.to_owned(), args));
            }
            _ => {}
        }
    }
    (texts.join("\n").trim().to_owned(), calls)
}

/// A tool result's `content` as its text blocks, each field a window on
/// the message's JSON (no `Value` tree of a giant output).
#[derive(serde::Deserialize)]
struct ResultContent<'a> {
    #[serde(borrow)]
    content: Option<&'a serde_json::value::RawValue>,
}

#[derive(serde::Deserialize)]
struct ContentBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    text: Option<&'a serde_json::value::RawValue>,
}

/// [`tool_result_text`](crate::message::tool_result_text) of a result.
/// Where the text is one literal of the message's JSON (a string `content`,
/// or one text block: nearly every result) it is a window on the message's
/// buffer, so a pending output is held once, by its message, however many
/// captures and records refer to it. Otherwise each text literal is decoded
/// once into the result, so a giant output costs its own size plus one
/// decoding buffer, not a `Value` tree and a joined copy on top. Anything
/// unusual (a lone surrogate escape, read as U+FFFD) takes
/// [`Message::result_text`]. Its lengths are read here, once: a pending
/// output's length is weighed at every ask.
pub(super) fn result_text(r: &Message) -> SharedText {
    let text = window(r).unwrap_or_else(|| {
        SharedText::from(fast_result_text(&r.json()).unwrap_or_else(|| r.result_text()))
    });
    text.js_len();
    text
}

/// The result's text as a window on its message's JSON, when the text is
/// one string literal there and the message's buffer is its own.
fn window(r: &Message) -> Option<SharedText> {
    let own = r.own_json_buffer()?;
    let json = r.json();
    let json = &*json;
    let content = serde_json::from_str::<ResultContent<'_>>(json)
        .ok()?
        .content?;
    let raw = content.get();
    let literal = if raw.starts_with('"') {
        content
    } else if raw.starts_with('[') {
        let blocks: Vec<ContentBlock<'_>> = serde_json::from_str(raw).ok()?;
        let mut texts = Vec::new();
        for b in blocks {
            match b.kind.map(|k| k.get()) {
                Some(r#""text""#) => {}
                // An escaped type name is decoded by the `Value` path.
                Some(k) if k.contains('\\') => return None,
                _ => continue,
            }
            if let Some(t) = b.text.filter(|t| t.get().starts_with('"')) {
                texts.push(t);
            }
        }
        match texts[..] {
            [one] => one,
            _ => return None,
        }
    } else {
        return None;
    };
    let at = literal.get().as_ptr() as usize - json.as_ptr() as usize;
    SharedText::from_checked_literal(
        &Buffer::Message(Arc::clone(own)),
        json,
        at..at + literal.get().len(),
    )
    .ok()
}

fn fast_result_text(json: &str) -> Option<String> {
    let content = serde_json::from_str::<ResultContent<'_>>(json)
        .ok()?
        .content;
    let Some(content) = content else {
        return Some(String::new());
    };
    let raw = content.get();
    if raw.starts_with('"') {
        return decode_literal(raw);
    }
    if !raw.starts_with('[') {
        return None;
    }
    let blocks: Vec<ContentBlock<'_>> = serde_json::from_str(raw).ok()?;
    let mut out: Option<String> = None;
    for b in blocks {
        match b.kind.map(|k| k.get()) {
            Some(r#""text""#) => {}
            // An escaped type name is decoded by the `Value` path.
            Some(k) if k.contains('\\') => return None,
            _ => continue,
        }
        let Some(t) = b.text.filter(|t| t.get().starts_with('"')) else {
            continue;
        };
        let t = decode_literal(t.get())?;
        match &mut out {
            None => out = Some(t),
            Some(o) => {
                o.push('\n');
                o.push_str(&t);
            }
        }
    }
    Some(out.unwrap_or_default())
}

/// Decodes a JSON string literal that serde already validated (as a
/// `RawValue`) in one pass into a `String` of its exact size: serde's own
/// decoding goes through a growing scratch buffer and then copies, which
/// for a giant output costs up to three times its size. `None` for what it
/// does not decode itself (a lone surrogate escape), left to serde.
fn decode_literal(literal: &str) -> Option<String> {
    let mut rest = literal.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(rest.len());
    fn hex4(s: &str) -> Option<u32> {
        let digits = s.get(..4)?;
        digits
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
            .then(|| u32::from_str_radix(digits, 16).ok())?
    }
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let escape = *rest.as_bytes().get(at + 1)?;
        rest = rest.get(at + 2..)?;
        let c = match escape {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = hex4(rest)?;
                rest = &rest[4..];
                if (0xD800..0xDC00).contains(&unit) {
                    let low = hex4(rest.strip_prefix("\\u")?)?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return None;
                    }
                    rest = &rest[6..];
                    char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))?
                } else {
                    char::from_u32(unit)?
                }
            }
            _ => return None,
        };
        out.push(c);
    }
    out.push_str(rest);
    Some(out)
}

pub(super) fn call_from(
    id: String,
    name: String,
    args: Value,
    result: Option<&Message>,
) -> CapturedCall {
    match result {
        Some(r) => answered_call(id, name, args, r, result_text(r)),
        None => CapturedCall {
            tool_call_id: id,
            tool_name: name,
            args: Arc::new(args),
            result_text: SharedText::from(NO_RESULT),
            is_error: false,
            result_timestamp: None,
        },
    }
}

/// The call `id` answered by `r`, whose text is `text`.
pub(super) fn answered_call(
    id: String,
    name: String,
    args: Value,
    r: &Message,
    text: SharedText,
) -> CapturedCall {
    CapturedCall {
        tool_call_id: id,
        tool_name: name,
        args: Arc::new(args),
        result_text: text,
        is_error: r.skeleton().is_error,
        result_timestamp: r.timestamp(),
    }
}

#[cfg(test)]
mod tests {
    use super::{decode_literal, fast_result_text};
    use crate::message::tool_result_text;

    proptest::proptest! {
        /// Literals as JSON.stringify and serde write them, and with every
        /// character escaped as `\uXXXX` (surrogate pairs included).
        #[test]
        fn literals_decode_as_serde_decodes_them(text in "\\PC{0,24}") {
            let plain = serde_json::to_string(&text).expect("json");
            proptest::prop_assert_eq!(decode_literal(&plain), Some(text.clone()));
            let escaped: String = std::iter::once("\"".to_owned())
                .chain(text.encode_utf16().map(|u| format!("\\u{u:04x}")))
                .chain(std::iter::once("\"".to_owned()))
                .collect();
            proptest::prop_assert_eq!(decode_literal(&escaped), Some(text.clone()));
        }
    }

    #[test]
    fn lone_surrogates_are_left_to_serde() {
        assert_eq!(decode_literal(r#""\ud83d""#), None);
        assert_eq!(decode_literal(r#""\udc00x""#), None);
        assert_eq!(decode_literal(r#""a\u00e9\n\/""#).as_deref(), Some("aé\n/"));
    }

    proptest::proptest! {
        /// The window-based reading gives exactly the `Value` path's text.
        #[test]
        fn result_text_agrees_with_the_value_path(
            blocks in proptest::collection::vec(
                (0..5u8, "[a-z\\n\"\\\\é😀\u{7}]{0,12}"), 0..4),
            as_string in proptest::bool::ANY,
        ) {
            let content = if as_string {
                serde_json::json!(blocks.iter().map(|(_, t)| t.as_str()).collect::<String>())
            } else {
                serde_json::Value::Array(blocks.iter().map(|(k, t)| match k {
                    0 => serde_json::json!({"type": "text", "text": t}),
                    1 => serde_json::json!({"type": "image", "data": t}),
                    2 => serde_json::json!({"text": t}),
                    3 => serde_json::json!({"type": "text", "text": 7}),
                    _ => serde_json::json!(t),
                }).collect())
            };
            let message = serde_json::json!({"role": "toolResult", "toolCallId": "c", "content": content});
            let want = tool_result_text(&message);
            if let Some(got) = fast_result_text(&message.to_string()) {
                proptest::prop_assert_eq!(got, want);
            }
        }
    }
}
