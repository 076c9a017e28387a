//! An OpenAI request body read in place, Responses (`input` items) or Chat
//! Completions (`messages`): every item is a window on the body's own
//! bytes, and so is each value condense may rewrite (a result's output, a
//! call's arguments), so what condense leaves alone is forwarded as the
//! client wrote it.
//!
//! Both formats are a flat list of items; an item is on the assistant's
//! side (a message, reasoning, a tool call), a tool's result, or a prompt
//! (a user, developer or system message, or an item of a kind condense
//! does not know, which it never rewrites).

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::print::BodyPrint;
use crate::span::{fields_after, rest_of_array, span_of, wire_error as err, WireError};

/// Which OpenAI API a body is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `POST /v1/responses`: `input` items.
    Responses,
    /// `POST /v1/chat/completions`: `messages`.
    Chat,
}

/// Which side of the conversation an item is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The model's: a message, reasoning, a tool call.
    Assistant,
    /// A tool's result.
    Result,
    /// A user's, developer's or system message, or an unknown item.
    Prompt,
}

/// A tool call an assistant item makes.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    /// The id its result answers (`call_id`, Chat's `id`).
    pub id: Cow<'a, str>,
    /// The tool's name as the model calls it (a Responses `namespace`
    /// joined before it with `__`, as MCP tools are named).
    pub name: String,
    /// The arguments as JSON text (for the view).
    pub arguments: String,
    /// The value holding the arguments in the body, when condense can
    /// rewrite them (a JSON string: `arguments`, a custom tool's `input`).
    pub span: Option<Range<usize>>,
    /// The arguments are a custom tool's free-form `input` (the view shows
    /// them as `{"input": …}`).
    pub free_form: bool,
}

/// A tool's result.
#[derive(Debug, Clone)]
pub struct Output<'a> {
    /// The call it answers.
    pub call_id: Cow<'a, str>,
    /// Its text parts.
    pub texts: Vec<Cow<'a, str>>,
    /// The value holding it in the body (`output`, Chat's `content`).
    pub span: Range<usize>,
    /// It holds more than text (an image, a file), or is of a kind condense
    /// never rewrites (`tool_search_output`): sent as the client wrote it.
    pub opaque: bool,
}

/// One item of the list.
#[derive(Debug, Clone)]
pub struct Item<'a> {
    /// The item in the body.
    pub span: Range<usize>,
    /// Its side.
    pub side: Side,
    /// A message's role, else the item's type.
    pub role: Cow<'a, str>,
    /// A message's text parts; reasoning's summary.
    pub texts: Vec<Cow<'a, str>>,
    /// The types of a message's parts that are not text.
    pub parts: Vec<String>,
    /// It is reasoning (its text is thinking).
    pub reasoning: bool,
    /// The calls it makes.
    pub calls: Vec<Call<'a>>,
    /// The result it is.
    pub output: Option<Output<'a>>,
}

/// A request body, read.
#[derive(Debug)]
pub struct ItemsRequest<'a> {
    /// The body the spans index.
    pub body: &'a str,
    /// The API.
    pub format: Format,
    /// `model`.
    pub model: Option<String>,
    /// `prompt_cache_key`.
    pub cache_key: Option<String>,
    /// The list's span (the JSON array, brackets included).
    pub items_span: Range<usize>,
    /// The items.
    pub items: Vec<Item<'a>>,
    /// The items each view message stands for: a run of assistant items,
    /// or one other item.
    pub groups: Vec<Range<usize>>,
    /// The names of the functions the request's `tools` offer.
    pub tools: Vec<String>,
    /// The request offers deferred tools through a client-side
    /// `tool_search` (Codex's MCP tools).
    pub tool_search: bool,
    /// How many leading items are the previous request's, carried over
    /// unread ([`read_request_after`]): their texts are not kept.
    pub reused: usize,
}

impl ItemsRequest<'_> {
    /// Drops the outputs' decoded texts, once the units are made from them:
    /// the rest of a call needs only their spans, and a first call would
    /// otherwise hold its outputs decoded until it ends.
    pub fn forget_output_texts(&mut self) {
        for output in self.items.iter_mut().filter_map(|i| i.output.as_mut()) {
            output.texts = Vec::new();
        }
    }

    /// The query tool as the request offers it to the model: a tool named
    /// as condense's, or (Codex's MCP tools deferred behind a client-side
    /// tool search) its MCP name. `None`: the model could not page an
    /// original back, so it is sent no stub.
    pub fn query_tool(&self) -> Option<String> {
        let listed = self
            .tools
            .iter()
            .find(|t| crate::view::is_query_tool(t))
            .cloned();
        listed.or_else(|| {
            self.tool_search
                .then(|| crate::view::MCP_QUERY_TOOL.to_owned())
        })
    }
}

/// What a read leaves for the next request of the same conversation: the
/// body's print, and its items without their texts.
#[derive(Debug, Clone)]
pub struct ItemsMemo {
    print: BodyPrint,
    format: Format,
    model: Option<String>,
    cache_key: Option<String>,
    items_start: usize,
    items: Vec<Item<'static>>,
}

impl ItemsMemo {
    /// The memo of `request`, whose first `head` items identify its
    /// conversation.
    pub fn from_request(request: ItemsRequest<'_>, head: usize) -> ItemsMemo {
        let head_end = request
            .items
            .get(head.min(request.items.len()).saturating_sub(1))
            .map_or(0, |i| i.span.end);
        ItemsMemo {
            print: BodyPrint::of(
                request.body,
                request.items.iter().map(|i| i.span.end),
                head_end,
            ),
            format: request.format,
            model: request.model,
            cache_key: request.cache_key,
            items_start: request.items_span.start,
            items: {
                // Held until the next request: without the slack its
                // pushes left.
                let mut items: Vec<_> =
                    request.items.into_iter().map(Item::into_stripped).collect();
                items.shrink_to_fit();
                items
            },
        }
    }

    /// Whether `body` is the request's body, byte for byte.
    pub fn is(&self, body: &str) -> bool {
        self.print.is(body)
    }

    /// The body's bytes through the items that identify the conversation
    /// (what its next requests start with, [`crate::sessions`]).
    pub fn head(&self) -> &str {
        self.print.head()
    }
}

/// `c` as `'static`: moved when owned, copied when borrowed.
fn into_static(c: Cow<'_, str>) -> Cow<'static, str> {
    Cow::Owned(c.into_owned())
}

impl Item<'_> {
    /// The item without its texts (what a memo keeps): the calls keep
    /// their ids and names, and the arguments of a query call (answered
    /// when its output comes).
    fn into_stripped(self) -> Item<'static> {
        Item {
            span: self.span,
            side: self.side,
            role: into_static(self.role),
            texts: Vec::new(),
            parts: Vec::new(),
            reasoning: self.reasoning,
            calls: self
                .calls
                .into_iter()
                .map(|c| Call {
                    id: into_static(c.id),
                    arguments: if crate::view::is_query_tool(&c.name) {
                        c.arguments
                    } else {
                        String::new()
                    },
                    name: c.name,
                    span: c.span,
                    free_form: c.free_form,
                })
                .collect(),
            output: self.output.map(|o| Output {
                call_id: into_static(o.call_id),
                texts: Vec::new(),
                span: o.span,
                opaque: o.opaque,
            }),
        }
    }
}

#[derive(Deserialize)]
struct Top<'a> {
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    messages: Option<&'a RawValue>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    prompt_cache_key: Option<String>,
    #[serde(borrow, default)]
    tools: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize)]
struct Tool<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<ToolFunction<'a>>,
    /// A namespace's tools (Codex's MCP servers: `mcp__<server>`).
    #[serde(borrow, default)]
    tools: Option<Vec<Tool<'a>>>,
}

#[derive(Deserialize)]
struct ToolFunction<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

/// The fields of a Responses item or a Chat message condense reads.
#[derive(Deserialize)]
struct Fields<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    summary: Option<&'a RawValue>,
    #[serde(borrow, default)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    output: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize)]
struct ChatCall<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    function: ChatFunction<'a>,
}

#[derive(Deserialize)]
struct ChatFunction<'a> {
    #[serde(borrow, default)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct PartFields<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

const TEXT_PARTS: [&str; 4] = ["text", "input_text", "output_text", "summary_text"];

/// A content value's text parts, and the types of its other parts: a
/// string is one text part; `null` or absent is none.
fn content_parts<'a>(
    raw: Option<&'a RawValue>,
) -> Result<(Vec<Cow<'a, str>>, Vec<String>), WireError> {
    let Some(raw) = raw else {
        return Ok((Vec::new(), Vec::new()));
    };
    let text = raw.get().trim_start();
    if text.starts_with('"') {
        let s: Cow<'a, str> = serde_json::from_str(raw.get()).map_err(err)?;
        return Ok((vec![s], Vec::new()));
    }
    if text.starts_with("null") {
        return Ok((Vec::new(), Vec::new()));
    }
    let parts: Vec<PartFields<'a>> = serde_json::from_str(raw.get()).map_err(err)?;
    let mut texts = Vec::new();
    let mut others = Vec::new();
    for p in parts {
        let kind = p.kind.as_deref().unwrap_or("text");
        match p.text {
            Some(t) if TEXT_PARTS.contains(&kind) => texts.push(t),
            _ => others.push(kind.to_owned()),
        }
    }
    Ok((texts, others))
}

/// A string-valued argument (`arguments`, `input`) as JSON text for the
/// view: a JSON string holding JSON is that JSON; anything else is kept
/// as it is written.
fn arguments_text(raw: &RawValue, free_form: bool) -> String {
    match serde_json::from_str::<Cow<'_, str>>(raw.get()) {
        Ok(s) if free_form => serde_json::json!({ "input": s }).to_string(),
        Ok(s) => s.into_owned(),
        Err(_) => raw.get().to_owned(),
    }
}

/// Reads a body of `format`. Anything that is not the documented shape is
/// an error: the caller forwards such a body untouched.
pub fn read_request(body: &str, format: Format) -> Result<ItemsRequest<'_>, WireError> {
    let top: Top<'_> = serde_json::from_str(body).map_err(err)?;
    let raw = match format {
        Format::Responses => top.input.ok_or_else(|| err("no input"))?,
        Format::Chat => top.messages.ok_or_else(|| err("no messages"))?,
    };
    if !raw.get().trim_start().starts_with('[') {
        return Err(err("the input is not a list of items"));
    }
    let raws: Vec<&RawValue> = serde_json::from_str(raw.get()).map_err(err)?;
    let items = raws
        .into_iter()
        .map(|r| read_item(body, r, format))
        .collect::<Result<Vec<_>, _>>()?;
    let (tools, tool_search) = offered_tools(top.tools.unwrap_or_default());
    Ok(ItemsRequest {
        body,
        format,
        model: top.model,
        cache_key: top.prompt_cache_key,
        items_span: span_of(body, raw.get()),
        groups: groups_of(&items),
        items,
        tools,
        tool_search,
        reused: 0,
    })
}

/// The groups of `items`: a run of assistant items, or one other item.
fn groups_of(items: &[Item<'_>]) -> Vec<Range<usize>> {
    let mut groups: Vec<Range<usize>> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match groups.last_mut() {
            Some(g) if item.side == Side::Assistant && items[g.end - 1].side == Side::Assistant => {
                g.end = i + 1;
            }
            _ => groups.push(i..i + 1),
        }
    }
    groups
}

/// The function names a request's `tools` offer (a namespace's as
/// `<namespace>__<name>`), and whether it has a client-side tool search.
fn offered_tools(raw: Vec<&RawValue>) -> (Vec<String>, bool) {
    let mut tools = Vec::new();
    let mut tool_search = false;
    for t in raw {
        let Ok(tool) = serde_json::from_str::<Tool<'_>>(t.get()) else {
            continue;
        };
        if tool.kind.as_deref() == Some("tool_search") {
            tool_search = true;
        }
        if tool.kind.as_deref() == Some("namespace") {
            let ns = tool.name.as_deref().unwrap_or_default();
            for t in tool.tools.iter().flatten() {
                if let Some(n) = &t.name {
                    tools.push(format!("{ns}__{n}"));
                }
            }
            continue;
        }
        if let Some(n) = tool.function.and_then(|f| f.name).or(tool.name) {
            tools.push(n.into_owned());
        }
    }
    (tools, tool_search)
}

/// Reads a body, carrying over the items it shares byte for byte with the
/// previous request of its conversation (`memo`): only the items after
/// them and the fields after the list are read, so a call costs what it
/// adds. A body that shares none, or whose first new item joins the run
/// of assistant items before it, is read whole.
pub fn read_request_after(
    body: &str,
    format: Format,
    memo: Option<ItemsMemo>,
) -> Result<ItemsRequest<'_>, WireError> {
    let Some(memo) = memo.filter(|m| m.format == format) else {
        return read_request(body, format);
    };
    let k = memo.print.shared(body).min(memo.items.len());
    if k == 0 {
        return read_request(body, format);
    }
    let pos = memo.items[k - 1].span.end;
    let mut items: Vec<Item<'_>> = memo.items;
    items.truncate(k);
    let (raws, end) = rest_of_array(body, pos, "the items").map_err(err)?;
    for raw in raws {
        items.push(read_item(body, raw, format)?);
    }
    let groups = groups_of(&items);
    if groups.iter().any(|g| g.start < k && k < g.end) {
        return read_request(body, format);
    }
    let tail_json = fields_after(body, end, "the items").map_err(err)?;
    let tail: Top<'_> = serde_json::from_str(&tail_json).map_err(err)?;
    let (tools, tool_search) = offered_tools(tail.tools.unwrap_or_default());
    Ok(ItemsRequest {
        body,
        format,
        model: tail.model.or(memo.model),
        cache_key: tail.prompt_cache_key.or(memo.cache_key),
        items_span: memo.items_start..end + 1,
        items,
        groups,
        tools,
        tool_search,
        reused: k,
    })
}

fn read_item<'a>(body: &'a str, raw: &'a RawValue, format: Format) -> Result<Item<'a>, WireError> {
    let f: Fields<'a> = serde_json::from_str(raw.get()).map_err(err)?;
    let span = span_of(body, raw.get());
    let kind = f.kind.clone().unwrap_or(Cow::Borrowed("message"));
    let mut item = Item {
        span,
        side: Side::Prompt,
        role: kind.clone(),
        texts: Vec::new(),
        parts: Vec::new(),
        reasoning: false,
        calls: Vec::new(),
        output: None,
    };
    let is_message = format == Format::Chat || kind == "message";
    if is_message {
        let role = f
            .role
            .clone()
            .ok_or_else(|| err("a message without a role"))?;
        let (texts, parts) = content_parts(f.content)?;
        item.texts = texts;
        item.parts = parts;
        item.role = role.clone();
        if format == Format::Chat && role == "tool" {
            let call_id = f
                .tool_call_id
                .clone()
                .ok_or_else(|| err("a tool message without tool_call_id"))?;
            let content = f
                .content
                .ok_or_else(|| err("a tool message without content"))?;
            item.side = Side::Result;
            item.output = Some(Output {
                call_id,
                texts: std::mem::take(&mut item.texts),
                span: span_of(body, content.get()),
                opaque: !std::mem::take(&mut item.parts).is_empty(),
            });
            return Ok(item);
        }
        if role == "assistant" {
            item.side = Side::Assistant;
            for c in f.tool_calls.unwrap_or_default() {
                let call: ChatCall<'a> = serde_json::from_str(c.get()).map_err(err)?;
                let arguments = call.function.arguments;
                item.calls.push(Call {
                    id: call.id,
                    name: call.function.name.into_owned(),
                    arguments: arguments
                        .map_or_else(|| "{}".to_owned(), |a| arguments_text(a, false)),
                    span: arguments
                        .filter(|a| a.get().starts_with('"'))
                        .map(|a| span_of(body, a.get())),
                    free_form: false,
                });
            }
        }
        return Ok(item);
    }
    let kind = kind.as_ref();
    if kind == "reasoning" {
        item.side = Side::Assistant;
        item.reasoning = true;
        item.texts = content_parts(f.summary)?.0;
        return Ok(item);
    }
    if kind.ends_with("_call") {
        item.side = Side::Assistant;
        if let Some(id) = f.call_id.clone() {
            let free_form = kind == "custom_tool_call";
            let value = if free_form { f.input } else { f.arguments };
            let name = f
                .name
                .as_deref()
                .unwrap_or(kind.strip_suffix("_call").unwrap_or(kind));
            let name = match f.namespace.as_deref() {
                Some(ns) if !ns.is_empty() => format!("{ns}__{name}"),
                _ => name.to_owned(),
            };
            let rewritable = matches!(kind, "function_call" | "custom_tool_call");
            item.calls.push(Call {
                id,
                name,
                arguments: value.map_or_else(|| "{}".to_owned(), |v| arguments_text(v, free_form)),
                span: value
                    .filter(|v| rewritable && v.get().starts_with('"'))
                    .map(|v| span_of(body, v.get())),
                free_form,
            });
        }
        return Ok(item);
    }
    if kind.ends_with("_output") {
        item.side = Side::Result;
        // An output condense cannot pair (no call id) stays where it is,
        // never rewritten; one with no `output` value (`tool_search_output`
        // lists tools) pairs but is never rewritten either.
        if let Some(call_id) = f.call_id.clone() {
            let (texts, parts) = content_parts(f.output)?;
            let rewritable = f.output.is_some()
                && matches!(kind, "function_call_output" | "custom_tool_call_output");
            item.output = Some(Output {
                call_id,
                texts,
                span: f
                    .output
                    .map_or_else(|| item.span.clone(), |o| span_of(body, o.get())),
                opaque: !parts.is_empty() || !rewritable,
            });
        }
        return Ok(item);
    }
    Ok(item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_responses_body_is_read_in_place() {
        let body = r#"{"model":"gpt-5","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},{"type":"reasoning","summary":[],"encrypted_content":"gAAA"},{"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{\"cmd\":\"ls\"}"},{"type":"function_call_output","call_id":"c1","output":"a\nb"}],"prompt_cache_key":"th-1","tools":[{"type":"function","name":"exec_command"},{"type":"tool_search","execution":"client"},{"type":"namespace","name":"mcp__condense","tools":[{"type":"function","name":"context_tree_query"}]}]}"#;
        let r = read_request(body, Format::Responses).unwrap();
        assert_eq!(r.items.len(), 5);
        assert_eq!(r.groups, vec![0..1, 1..2, 2..4, 4..5]);
        assert_eq!(r.cache_key.as_deref(), Some("th-1"));
        assert!(r.tool_search);
        assert_eq!(
            r.tools,
            vec!["exec_command", "mcp__condense__context_tree_query"]
        );
        let call = &r.items[3].calls[0];
        assert_eq!(call.arguments, r#"{"cmd":"ls"}"#);
        assert_eq!(&body[call.span.clone().unwrap()], r#""{\"cmd\":\"ls\"}""#);
        let out = r.items[4].output.as_ref().unwrap();
        assert_eq!(&body[out.span.clone()], r#""a\nb""#);
        assert_eq!(out.texts, vec!["a\nb"]);
        assert!(!out.opaque);
        for item in &r.items {
            assert!(body[item.span.clone()].starts_with('{'));
        }
    }

    #[test]
    fn a_chat_body_is_read_in_place() {
        let body = r#"{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"read","arguments":"{\"p\":1}"}}]},{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"out"}]}]}"#;
        let r = read_request(body, Format::Chat).unwrap();
        assert_eq!(r.items[2].side, Side::Assistant);
        assert_eq!(r.items[2].calls[0].name, "read");
        let out = r.items[3].output.as_ref().unwrap();
        assert_eq!(out.call_id, "a");
        assert_eq!(&body[out.span.clone()], r#"[{"type":"text","text":"out"}]"#);
    }

    #[test]
    fn a_namespaced_call_is_named_as_mcp_tools_are() {
        let body = r#"{"input":[{"type":"function_call","call_id":"q","name":"context_tree_query","namespace":"mcp__condense","arguments":"{}"}]}"#;
        let r = read_request(body, Format::Responses).unwrap();
        assert_eq!(
            r.items[0].calls[0].name,
            "mcp__condense__context_tree_query"
        );
    }

    #[test]
    fn a_read_after_the_previous_request_equals_a_whole_read() {
        let item = |i: usize| {
            format!(
                r#"{{"type":"function_call","call_id":"c{i}","name":"exec_command","arguments":"{{}}"}},{{"type":"function_call_output","call_id":"c{i}","output":"out {i}"}}"#
            )
        };
        let body = |n: usize| {
            let items: Vec<String> = (0..n).map(item).collect();
            format!(
                r#"{{"model":"gpt-5","input":[{{"type":"message","role":"user","content":"go"}},{}],"tools":[{{"type":"tool_search"}}],"prompt_cache_key":"k{n}"}}"#,
                items.join(",")
            )
        };
        let first = body(3);
        let r = read_request(&first, Format::Responses).unwrap();
        let memo = ItemsMemo::from_request(r, 1);
        assert_eq!(
            memo.head(),
            r#"{"model":"gpt-5","input":[{"type":"message","role":"user","content":"go"}"#
        );
        let next = body(5);
        let after = read_request_after(&next, Format::Responses, Some(memo)).unwrap();
        let whole = read_request(&next, Format::Responses).unwrap();
        assert_eq!(after.reused, 7);
        assert_eq!(after.items.len(), whole.items.len());
        assert_eq!(after.groups, whole.groups);
        assert_eq!(after.items_span, whole.items_span);
        assert_eq!(after.cache_key.as_deref(), Some("k5"));
        assert!(after.tool_search);
        for (a, w) in after.items.iter().zip(&whole.items) {
            assert_eq!(a.span, w.span);
            assert_eq!(a.side, w.side);
            assert_eq!(
                a.output.as_ref().map(|o| o.span.clone()),
                w.output.as_ref().map(|o| o.span.clone())
            );
        }
        // Texts of the new items are read; the carried ones are not kept.
        assert_eq!(after.items[8].output.as_ref().unwrap().texts, vec!["out 3"]);
        assert!(after.items[2].output.as_ref().unwrap().texts.is_empty());
        // Another format's memo is not used.
        let memo = ItemsMemo::from_request(read_request(&first, Format::Responses).unwrap(), 1);
        assert!(read_request_after(&next, Format::Chat, Some(memo)).is_err());
    }

    #[test]
    fn a_body_of_another_shape_is_an_error() {
        assert!(read_request(r#"{"input":"just text"}"#, Format::Responses).is_err());
        assert!(read_request(r#"{"messages":[{"content":"x"}]}"#, Format::Chat).is_err());
        assert!(read_request("[", Format::Chat).is_err());
    }
}
