//! A Messages API request body read in place: every message and content
//! block is a window on the body's own bytes, so what condense leaves alone
//! is forwarded as the client wrote it.

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

/// Why a body was not read (the proxy then forwards it unchanged).
#[derive(Debug, PartialEq, Eq)]
pub struct WireError(pub String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

fn err(what: impl std::fmt::Display) -> WireError {
    WireError(what.to_string())
}

#[derive(Deserialize)]
struct Top<'a> {
    #[serde(borrow, default)]
    messages: Option<&'a RawValue>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct MessageFields<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(borrow)]
    content: &'a RawValue,
}

#[derive(Deserialize)]
struct BlockFields<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(borrow, default)]
    thinking: Option<Cow<'a, str>>,
}

/// One content block, as the wire holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Block<'a> {
    /// `text`.
    Text(Cow<'a, str>),
    /// `tool_use` (and `server_tool_use`, which carries the same fields).
    ToolUse {
        /// The call's id.
        id: Cow<'a, str>,
        /// The tool's name as the model sees it.
        name: Cow<'a, str>,
        /// Where `input` sits in the body.
        input: Range<usize>,
    },
    /// `tool_result`.
    ToolResult {
        /// The call it answers.
        tool_use_id: Cow<'a, str>,
        /// Where `content` sits in the body (`None`: no content).
        content: Option<Range<usize>>,
        /// The result's text blocks (or its string), in order.
        texts: Vec<Cow<'a, str>>,
        /// It holds a block other than text (an image, a `tool_reference`).
        opaque: bool,
        /// `is_error`.
        is_error: bool,
    },
    /// `thinking` (with its signature, left alone).
    Thinking(Cow<'a, str>),
    /// Anything else (images, documents, redacted thinking, types not
    /// known yet): carried, never read.
    Other(Cow<'a, str>),
}

/// One message of the request.
#[derive(Debug, Clone, PartialEq)]
pub struct WireMessage<'a> {
    /// `role` (`user`, `assistant`, or what the client sent, e.g. `system`).
    pub role: Cow<'a, str>,
    /// The message's bytes in the body.
    pub span: Range<usize>,
    /// Where `content` sits in the body.
    pub content: Range<usize>,
    /// `content` was a string (one text block).
    pub content_is_string: bool,
    /// The blocks, each with its bytes in the body.
    pub blocks: Vec<(Block<'a>, Range<usize>)>,
}

/// A request body read in place.
#[derive(Debug, Clone)]
pub struct WireRequest<'a> {
    /// The whole body.
    pub body: &'a str,
    /// The model asked for.
    pub model: Option<Cow<'a, str>>,
    /// The `system` field's bytes.
    pub system: Option<&'a str>,
    /// The `metadata` field's bytes.
    pub metadata: Option<&'a str>,
    /// Where the `messages` array sits in the body.
    pub messages_span: Range<usize>,
    /// The messages.
    pub messages: Vec<WireMessage<'a>>,
}

/// Where `inner` (a slice of `outer`) sits in it.
fn span_of(outer: &str, inner: &str) -> Range<usize> {
    let start = inner.as_ptr() as usize - outer.as_ptr() as usize;
    start..start + inner.len()
}

/// Reads a Messages API request body. Anything that is not the documented
/// shape is an error: the caller forwards such a body untouched.
pub fn read_request(body: &str) -> Result<WireRequest<'_>, WireError> {
    let top: Top<'_> = serde_json::from_str(body).map_err(err)?;
    let raw = top.messages.ok_or_else(|| err("no messages"))?;
    let items: Vec<&RawValue> = serde_json::from_str(raw.get()).map_err(err)?;
    let messages = items
        .into_iter()
        .map(|m| read_message(body, m))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(WireRequest {
        body,
        model: top.model,
        system: top.system.map(RawValue::get),
        metadata: top.metadata.map(RawValue::get),
        messages_span: span_of(body, raw.get()),
        messages,
    })
}

fn read_message<'a>(body: &'a str, raw: &'a RawValue) -> Result<WireMessage<'a>, WireError> {
    let fields: MessageFields<'a> = serde_json::from_str(raw.get()).map_err(err)?;
    let content = fields.content.get();
    let (blocks, content_is_string) = if content.starts_with('"') {
        let text: Cow<'a, str> = serde_json::from_str(content).map_err(err)?;
        (vec![(Block::Text(text), span_of(body, content))], true)
    } else {
        let items: Vec<&'a RawValue> = serde_json::from_str(content).map_err(err)?;
        let blocks = items
            .into_iter()
            .map(|b| Ok((read_block(body, b)?, span_of(body, b.get()))))
            .collect::<Result<Vec<_>, WireError>>()?;
        (blocks, false)
    };
    Ok(WireMessage {
        role: fields.role,
        span: span_of(body, raw.get()),
        content: span_of(body, content),
        content_is_string,
        blocks,
    })
}

fn read_block<'a>(body: &'a str, raw: &'a RawValue) -> Result<Block<'a>, WireError> {
    let f: BlockFields<'a> = serde_json::from_str(raw.get()).map_err(err)?;
    Ok(match f.kind.as_ref() {
        "text" => Block::Text(f.text.ok_or_else(|| err("a text block without text"))?),
        "tool_use" | "server_tool_use" => Block::ToolUse {
            id: f.id.ok_or_else(|| err("a tool_use block without id"))?,
            name: f.name.unwrap_or_default(),
            input: f
                .input
                .map(|i| span_of(body, i.get()))
                .ok_or_else(|| err("a tool_use block without input"))?,
        },
        "tool_result" => {
            let (texts, opaque) = match f.content {
                None => (Vec::new(), false),
                Some(c) => result_texts(c)?,
            };
            Block::ToolResult {
                tool_use_id: f
                    .tool_use_id
                    .ok_or_else(|| err("a tool_result block without tool_use_id"))?,
                content: f.content.map(|c| span_of(body, c.get())),
                texts,
                opaque,
                is_error: f.is_error.unwrap_or(false),
            }
        }
        "thinking" => Block::Thinking(f.thinking.unwrap_or_default()),
        _ => Block::Other(f.kind),
    })
}

#[derive(Deserialize)]
struct ResultBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

/// A tool result's texts, and whether it holds anything else.
fn result_texts(content: &RawValue) -> Result<(Vec<Cow<'_, str>>, bool), WireError> {
    let text = content.get();
    if text.starts_with('"') {
        let s: Cow<'_, str> = serde_json::from_str(text).map_err(err)?;
        return Ok((vec![s], false));
    }
    if text == "null" {
        return Ok((Vec::new(), false));
    }
    let blocks: Vec<ResultBlock<'_>> = serde_json::from_str(text).map_err(err)?;
    let mut opaque = false;
    let mut texts = Vec::new();
    for b in blocks {
        match (b.kind.as_ref(), b.text) {
            ("text", Some(t)) => texts.push(t),
            _ => opaque = true,
        }
    }
    Ok((texts, opaque))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_windows_on_the_body() {
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi \u00e9"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"c":"ls"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"tool_reference","tool_name":"x"}],"cache_control":{"type":"ephemeral"}}]}],"stream":true}"#;
        let r = read_request(body).unwrap();
        assert_eq!(r.model.as_deref(), Some("m"));
        assert_eq!(r.messages.len(), 3);
        assert_eq!(&body[r.messages_span.clone()][..2], "[{");
        assert!(r.messages[0].content_is_string);
        assert_eq!(r.messages[0].blocks[0].0, Block::Text("hi é".into()));
        let Block::ToolUse { input, .. } = &r.messages[1].blocks[0].0 else {
            panic!("tool_use")
        };
        assert_eq!(&body[input.clone()], r#"{"c":"ls"}"#);
        let Block::ToolResult { texts, opaque, .. } = &r.messages[2].blocks[0].0 else {
            panic!("tool_result")
        };
        assert_eq!(texts, &vec![Cow::Borrowed("a")]);
        assert!(opaque);
    }

    #[test]
    fn a_body_of_another_shape_is_an_error() {
        for body in [
            "",
            "[]",
            r#"{"messages":5}"#,
            r#"{"messages":[{"role":"user"}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}"#,
        ] {
            assert!(read_request(body).is_err(), "{body}");
        }
    }
}
