//! A Messages API request body read in place: every message and content
//! block is a window on the body's own bytes, so what condense leaves alone
//! is forwarded as the client wrote it.

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::print::BodyPrint;
use crate::span::{fields_after, rest_of_array, span_of, wire_error as err, WireError};

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

/// The fields after `messages` (read on their own when the messages are
/// read incrementally).
#[derive(Deserialize)]
struct Tail<'a> {
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
    pub model: Option<String>,
    /// The `system` field's JSON.
    pub system: Option<String>,
    /// The `metadata` field's JSON.
    pub metadata: Option<String>,
    /// Where the `messages` array sits in the body.
    pub messages_span: Range<usize>,
    /// The messages.
    pub messages: Vec<WireMessage<'a>>,
    /// How many leading messages are the previous request's, carried over
    /// unread ([`read_request_after`]): their texts are not kept.
    pub reused: usize,
}

impl WireRequest<'_> {
    /// Drops the tool results' decoded texts, once the units are made from
    /// them: the rest of a call needs only their spans, and a first call
    /// would otherwise hold its outputs decoded until it ends.
    pub fn forget_result_texts(&mut self) {
        for m in &mut self.messages {
            for (b, _) in &mut m.blocks {
                if let Block::ToolResult { texts, .. } = b {
                    *texts = Vec::new();
                }
            }
        }
    }
}

/// What a read leaves for the next request of the same conversation: the
/// body's print, and its messages without their texts.
#[derive(Debug, Clone, Default)]
pub struct WireMemo {
    print: BodyPrint,
    model: Option<String>,
    messages_start: usize,
    messages: Vec<WireMessage<'static>>,
}

impl WireMemo {
    /// The memo of `request`.
    pub fn of(request: &WireRequest<'_>) -> WireMemo {
        WireMemo {
            print: print_of(request),
            model: request.model.clone(),
            messages_start: request.messages_span.start,
            messages: request.messages.iter().map(WireMessage::stripped).collect(),
        }
    }

    /// The memo of `request`, taking its messages (those it carried over
    /// are moved back, not copied).
    pub fn from_request(request: WireRequest<'_>) -> WireMemo {
        WireMemo {
            print: print_of(&request),
            model: request.model,
            messages_start: request.messages_span.start,
            messages: {
                // Held until the next request: without the slack its
                // pushes left.
                let mut messages: Vec<_> = request
                    .messages
                    .into_iter()
                    .map(WireMessage::into_stripped)
                    .collect();
                messages.shrink_to_fit();
                messages
            },
        }
    }

    /// Whether `body` is the request's body, byte for byte.
    pub fn is(&self, body: &str) -> bool {
        self.print.is(body)
    }

    /// The body's bytes through its first message (what identifies the
    /// conversation's next requests, [`crate::sessions`]).
    pub fn head(&self) -> &str {
        self.print.head()
    }
}

fn print_of(request: &WireRequest<'_>) -> BodyPrint {
    let head = request.messages.first().map_or(0, |m| m.span.end);
    BodyPrint::of(
        request.body,
        request.messages.iter().map(|m| m.span.end),
        head,
    )
}

fn owned(c: Cow<'_, str>) -> Cow<'static, str> {
    Cow::Owned(c.into_owned())
}

/// `c` as `'static`: moved when owned, copied when borrowed.
fn into_static(c: Cow<'_, str>) -> Cow<'static, str> {
    match c {
        Cow::Owned(s) => Cow::Owned(s),
        Cow::Borrowed(s) => Cow::Owned(s.to_owned()),
    }
}

impl WireMessage<'_> {
    /// [`WireMessage::stripped`], taking the message (what is owned
    /// already is moved).
    fn into_stripped(self) -> WireMessage<'static> {
        let mut blocks: Vec<_> = self
            .blocks
            .into_iter()
            .map(|(b, span)| {
                let b = match b {
                    Block::Text(_) => Block::Text(Cow::Borrowed("")),
                    Block::Thinking(_) => Block::Thinking(Cow::Borrowed("")),
                    Block::ToolUse { id, name, input } => Block::ToolUse {
                        id: into_static(id),
                        name: into_static(name),
                        input,
                    },
                    Block::ToolResult {
                        tool_use_id,
                        content,
                        opaque,
                        is_error,
                        ..
                    } => Block::ToolResult {
                        tool_use_id: into_static(tool_use_id),
                        content,
                        texts: Vec::new(),
                        opaque,
                        is_error,
                    },
                    Block::Other(kind) => Block::Other(into_static(kind)),
                };
                (b, span)
            })
            .collect();
        // Held until the next request: a message's few blocks without the
        // four slots a vector starts with.
        blocks.shrink_to_fit();
        WireMessage {
            role: into_static(self.role),
            span: self.span,
            content: self.content,
            content_is_string: self.content_is_string,
            blocks,
        }
    }

    /// The message without its texts (what a memo keeps).
    fn stripped(&self) -> WireMessage<'static> {
        let blocks = self
            .blocks
            .iter()
            .map(|(b, span)| {
                let b = match b {
                    Block::Text(_) => Block::Text(Cow::Borrowed("")),
                    Block::Thinking(_) => Block::Thinking(Cow::Borrowed("")),
                    Block::ToolUse { id, name, input } => Block::ToolUse {
                        id: owned(id.clone()),
                        name: owned(name.clone()),
                        input: input.clone(),
                    },
                    Block::ToolResult {
                        tool_use_id,
                        content,
                        opaque,
                        is_error,
                        ..
                    } => Block::ToolResult {
                        tool_use_id: owned(tool_use_id.clone()),
                        content: content.clone(),
                        texts: Vec::new(),
                        opaque: *opaque,
                        is_error: *is_error,
                    },
                    Block::Other(kind) => Block::Other(owned(kind.clone())),
                };
                (b, span.clone())
            })
            .collect();
        WireMessage {
            role: owned(self.role.clone()),
            span: self.span.clone(),
            content: self.content.clone(),
            content_is_string: self.content_is_string,
            blocks,
        }
    }
}

/// Reads a body, carrying over the messages it shares byte for byte with
/// the previous request of its conversation (`memo`): only the messages
/// after them and the fields after the array are read, so a call costs
/// what it adds, not the whole history.
pub fn read_request_after(
    body: &str,
    memo: Option<WireMemo>,
) -> Result<WireRequest<'_>, WireError> {
    let Some(memo) = memo else {
        return read_request(body);
    };
    let k = memo.print.shared(body).min(memo.messages.len());
    if k == 0 {
        return read_request(body);
    }
    let pos = memo.messages[k - 1].span.end;
    let (model, messages_start) = (memo.model, memo.messages_start);
    let mut messages: Vec<WireMessage<'_>> = memo.messages;
    messages.truncate(k);
    let (raws, end) = rest_of_array(body, pos, "messages").map_err(err)?;
    for raw in raws {
        messages.push(read_message(body, raw)?);
    }
    let tail_json = fields_after(body, end, "messages").map_err(err)?;
    let tail: Tail<'_> = serde_json::from_str(&tail_json).map_err(err)?;
    Ok(WireRequest {
        body,
        model: tail.model.map(Cow::into_owned).or(model),
        system: tail.system.map(|r| r.get().to_owned()),
        metadata: tail.metadata.map(|r| r.get().to_owned()),
        messages_span: messages_start..end + 1,
        messages,
        reused: k,
    })
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
        model: top.model.map(Cow::into_owned),
        system: top.system.map(|r| r.get().to_owned()),
        metadata: top.metadata.map(|r| r.get().to_owned()),
        messages_span: span_of(body, raw.get()),
        messages,
        reused: 0,
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
        assert_eq!(r.reused, 0);
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

    /// A body of `n` messages, with `extra` after the array.
    fn body(n: usize, extra: &str) -> String {
        let messages: Vec<String> = (0..n)
            .map(|i| {
                format!(r#"{{"role":"user","content":[{{"type":"text","text":"m{i} \u00e9"}}]}}"#)
            })
            .collect();
        format!(
            r#"{{"model":"m","messages":[{}]{extra}}}"#,
            messages.join(",")
        )
    }

    #[test]
    fn a_read_after_the_previous_request_equals_a_whole_read() {
        let first = body(3, r#","system":"s1""#);
        let memo = WireMemo::of(&read_request(&first).unwrap());
        for next in [
            body(5, r#","system":"s2","metadata":{"user_id":"u"}"#),
            body(3, ""),
            body(2, ""),
            first.replace("m2", "changed"),
            body(4, r#" , "stream":true"#),
        ] {
            let whole = read_request(&next).unwrap();
            let after = read_request_after(&next, Some(memo.clone()))
                .unwrap_or_else(|e| panic!("{e}: {next}"));
            assert_eq!(after.messages.len(), whole.messages.len(), "{next}");
            assert_eq!(after.messages_span, whole.messages_span);
            assert_eq!(
                (&after.model, &after.system, &after.metadata),
                (&whole.model, &whole.system, &whole.metadata)
            );
            for (a, w) in after
                .messages
                .iter()
                .zip(&whole.messages)
                .skip(after.reused)
            {
                assert_eq!(a, w);
            }
            for (a, w) in after.messages.iter().zip(&whole.messages) {
                assert_eq!((&a.span, &a.role), (&w.span, &w.role));
            }
        }
        let bad = body(4, "").replace("]}", "]");
        assert!(read_request_after(&bad, Some(memo.clone())).is_err());
        // What a read leaves is what a whole read leaves.
        let next = body(5, "");
        let after = read_request_after(&next, Some(memo)).unwrap();
        let whole = read_request(&next).unwrap();
        let (a, w) = (WireMemo::from_request(after), WireMemo::of(&whole));
        assert_eq!(a.messages, w.messages);
        assert_eq!(a.head(), w.head());
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
