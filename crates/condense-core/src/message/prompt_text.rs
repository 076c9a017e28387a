//! What of a message reaches the model: the texts a host sends for it.
//!
//! A message's JSON carries more than the model reads: pi's `details` (an
//! edit's diff, a read's full output), an assistant message's usage and
//! model names. The model reads the content (texts, thinking, tool-call
//! names and arguments, tool output) and the text fields of pi's own
//! message kinds. What a prompt bills, and so what pruning saves, is
//! measured on those alone.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// Characters an image block counts as: 1,600 tokens, a typical
/// screenshot, at four characters a token.
pub const IMAGE_PROMPT_CHARS: usize = 6_400;

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// The fields of any message that reach the model as text: `content` (a
/// string or blocks), and the text fields of pi's own message kinds
/// (`summary` of compaction and branch summaries, `command` and `output` of
/// a user's bash execution); and those that keep a message from the model.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Fields<'a> {
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    exclude_from_context: Option<bool>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    summary: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    command: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    output: Option<Cow<'a, str>>,
}

/// Hands each text of the message `json` that reaches the model to `text`
/// (a tool call's arguments as their JSON), and returns its image blocks;
/// `None` for a message the host does not send: an assistant message that
/// failed or was aborted (pi-ai's message transform drops those), or a
/// user's bash run excluded from the context. A message whose JSON does
/// not have the expected shape is handed over whole.
pub fn visit_prompt_text(json: &str, text: &mut dyn FnMut(&str)) -> Option<u64> {
    let Ok(fields) = serde_json::from_str::<Fields<'_>>(json) else {
        text(json);
        return Some(0);
    };
    let failed = matches!(fields.stop_reason.as_deref(), Some("error" | "aborted"));
    if (fields.role.as_deref() == Some("assistant") && failed)
        || fields.exclude_from_context == Some(true)
    {
        return None;
    }
    for t in [&fields.summary, &fields.command, &fields.output]
        .into_iter()
        .flatten()
    {
        text(t);
    }
    let Some(content) = fields.content else {
        return Some(0);
    };
    let mut images = 0;
    // A string, or an array of blocks; anything else counts as its JSON.
    if let Ok(s) = serde_json::from_str::<Cow<'_, str>>(content.get()) {
        text(&s);
    } else if let Ok(blocks) = serde_json::from_str::<Vec<Block<'_>>>(content.get()) {
        for b in &blocks {
            if b.kind.as_deref() == Some("image") {
                images += 1;
                continue;
            }
            for t in [&b.text, &b.thinking, &b.name].into_iter().flatten() {
                text(t);
            }
            if let Some(args) = b.arguments {
                text(args.get());
            }
        }
    } else {
        text(content.get());
    }
    Some(images)
}

/// The length of what of `json` reaches the model, in JavaScript string
/// units, an image counted as [`IMAGE_PROMPT_CHARS`]; `None` for a message
/// the host does not send ([`visit_prompt_text`]).
pub(super) fn prompt_len_of(json: &str) -> Option<usize> {
    let mut len = 0usize;
    let images = visit_prompt_text(json, &mut |t| {
        len = len.saturating_add(crate::js::js_len(t))
    })?;
    let images = usize::try_from(images).unwrap_or(usize::MAX);
    Some(len.saturating_add(images.saturating_mul(IMAGE_PROMPT_CHARS)))
}

#[cfg(test)]
mod tests {
    use super::prompt_len_of;

    #[test]
    fn details_usage_and_names_are_not_what_the_model_reads() {
        let result = r#"{"role":"toolResult","toolCallId":"c1","toolName":"edit","content":[{"type":"text","text":"ok"}],"details":{"diff":"a long diff the model never sees"},"isError":false,"timestamp":1}"#;
        assert_eq!(prompt_len_of(result), Some(2));
        let assistant = r#"{"role":"assistant","content":[{"type":"text","text":"abc"},{"type":"thinking","thinking":"hm"},{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"}}],"api":"x","provider":"y","model":"z","usage":{"input":1},"stopReason":"toolUse","timestamp":2}"#;
        // "abc", "hm", "read" and the arguments' JSON `{"path":"a"}`.
        assert_eq!(prompt_len_of(assistant), Some(3 + 2 + 4 + 12));
    }

    #[test]
    fn escapes_count_as_the_text_they_stand_for() {
        assert_eq!(
            prompt_len_of(r#"{"role":"user","content":"a\nb \"q\" \u00e9"}"#),
            Some(9)
        );
    }

    #[test]
    fn a_message_the_host_does_not_send_has_no_length() {
        for json in [
            r#"{"role":"assistant","content":[{"type":"text","text":"partial"}],"stopReason":"aborted"}"#,
            r#"{"role":"assistant","content":[],"stopReason":"error"}"#,
            r#"{"role":"bashExecution","command":"ls","output":"x","excludeFromContext":true}"#,
        ] {
            assert_eq!(prompt_len_of(json), None, "{json}");
        }
        assert_eq!(
            prompt_len_of(r#"{"role":"bashExecution","command":"ls","output":"xy"}"#),
            Some(4)
        );
    }

    #[test]
    fn images_count_as_a_screenshot_and_odd_shapes_whole() {
        let image = r#"{"role":"user","content":[{"type":"image","data":"AAAA","mimeType":"image/png"},{"type":"text","text":"hi"}]}"#;
        assert_eq!(prompt_len_of(image), Some(super::IMAGE_PROMPT_CHARS + 2));
        // `content` neither a string nor blocks: its JSON.
        assert_eq!(prompt_len_of(r#"{"role":"user","content":42}"#), Some(2));
        // Not the shape of a message at all: the whole text.
        let odd = r#"{"role":7}"#;
        assert_eq!(prompt_len_of(odd), Some(odd.len()));
    }
}
