//! The engine's render, written back onto the wire: the request body with
//! only what condense rewrites changed (a stubbed result's `content`, a
//! purged call's `input`, the messages a chain dropped, the summaries and
//! chains condense shows as user messages), every other byte as the client
//! sent it.
//!
//! The Messages API rejects a `tool_use` whose `tool_result` is not in the
//! next message; a render whose wire form would break that pairing is not
//! sent ([`RebuildError`]): the caller forwards the request unchanged.

use std::collections::HashMap;

use condense_core::{Message, PlanStep, Role};
use serde_json::Value;

use super::view::{Part, Unit};
use super::wire::{Block, WireRequest};

/// Why a render could not be written onto the wire.
#[derive(Debug, PartialEq, Eq)]
pub struct RebuildError(pub String);

impl std::fmt::Display for RebuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The engine's list as the request holds it: for each message the engine
/// holds, the view message it is ([`Unit`] index), or `None` for one
/// condense wrote (a summary) that the client never sent.
pub struct HostList<'a> {
    /// The messages, in the engine's (host) coordinates.
    pub messages: &'a [Message],
    /// Each message's unit in the request.
    pub units: &'a [Option<usize>],
    /// The text of each message condense wrote, as the model is sent it
    /// ([`wire_text`]); `None` for the others.
    pub texts: &'a [Option<String>],
}

/// The text a message condense wrote is sent as: its text, the query tool
/// named as the model sees it.
pub fn wire_text(m: &Message, query_tool: &str) -> String {
    name_query_tool(&text_of(m), query_tool)
}

/// One message of the output.
enum Slot<'a> {
    Unit(usize),
    Synthetic(std::borrow::Cow<'a, str>),
}

/// The text of a message condense wrote: its content string, or its text
/// blocks joined by newlines.
pub(crate) fn text_of(m: &Message) -> String {
    let v: Value = serde_json::from_str(m.json()).unwrap_or_default();
    match v.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => v
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    }
}

/// Arguments condense's error purge left (`{"_purged": "<purged-errored-args …/>"}`).
fn purged_arguments(m: &Message) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(m.json()).unwrap_or_default();
    let Some(blocks) = v.get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
        .filter_map(|b| {
            let id = b.get("id")?.as_str()?;
            let args = b.get("arguments")?.as_object()?;
            let purged = args.len() == 1
                && args
                    .get("_purged")
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.starts_with("<purged-errored-args"));
            purged.then(|| (id.to_owned(), Value::Object(args.clone()).to_string()))
        })
        .collect()
}

/// Names the query tool as the model sees it in a text condense wrote.
pub fn name_query_tool(text: &str, tool: &str) -> String {
    if tool == condense_core::QUERY_TOOL_NAME {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(condense_core::QUERY_TOOL_NAME) {
        let before = &rest[..at];
        out.push_str(before);
        if before.ends_with("mcp__condense__") {
            out.push_str(condense_core::QUERY_TOOL_NAME);
        } else {
            out.push_str(tool);
        }
        rest = &rest[at + condense_core::QUERY_TOOL_NAME.len()..];
    }
    out.push_str(rest);
    out
}

/// Writes `steps` (computed on `host`) onto `request`. `Ok(None)`: the
/// output is the request as sent.
pub fn rebuild(
    request: &WireRequest<'_>,
    units: &[Unit],
    host: &HostList<'_>,
    steps: &[PlanStep],
    answers: &HashMap<usize, String>,
    query_tool: &str,
) -> Result<Option<String>, RebuildError> {
    let body = request.body;
    let mut result_unit: HashMap<&str, usize> = HashMap::new();
    let mut assistant_unit: HashMap<&str, usize> = HashMap::new();
    for u in host.units.iter().flatten() {
        let unit = &units[*u];
        match unit.part {
            Part::Result(_) => {
                if let Some(c) = &unit.call_id {
                    result_unit.insert(c, *u);
                }
            }
            Part::Assistant => {
                for (b, _) in &request.messages[unit.message].blocks {
                    if let Block::ToolUse { id, .. } = b {
                        assistant_unit.insert(id, *u);
                    }
                }
            }
            Part::Prompt => {}
        }
    }

    let mut slots = Vec::new();
    let mut content: HashMap<usize, String> = HashMap::new();
    let mut inputs: HashMap<(usize, usize), String> = HashMap::new();
    for step in steps {
        match step {
            PlanStep::Keep(r) => {
                for h in r.clone().take_while(|h| *h < host.messages.len()) {
                    match (host.units[h], host.texts.get(h).and_then(Option::as_deref)) {
                        (Some(u), _) => slots.push(Slot::Unit(u)),
                        (None, Some(text)) => slots.push(Slot::Synthetic(text.into())),
                        (None, None) => slots.push(Slot::Synthetic(
                            wire_text(&host.messages[h], query_tool).into(),
                        )),
                    }
                }
            }
            PlanStep::New(m) => {
                let call = m.skeleton().tool_call_id.as_deref();
                if let Some(u) = call
                    .filter(|_| m.is(&Role::ToolResult))
                    .and_then(|c| result_unit.get(c))
                {
                    if !units[*u].frozen {
                        content.insert(*u, name_query_tool(&text_of(m), query_tool));
                    }
                    slots.push(Slot::Unit(*u));
                    continue;
                }
                if m.is(&Role::Assistant) {
                    let purged = purged_arguments(m);
                    let at = m
                        .skeleton()
                        .tool_calls
                        .iter()
                        .find_map(|c| assistant_unit.get(c.id.as_str()));
                    if let Some(u) = at {
                        let msg = units[*u].message;
                        for (b, (block, _)) in request.messages[msg].blocks.iter().enumerate() {
                            if let Block::ToolUse { id, .. } = block {
                                if let Some((_, args)) = purged.iter().find(|(c, _)| c == id) {
                                    inputs.insert((msg, b), args.clone());
                                }
                            }
                        }
                        slots.push(Slot::Unit(*u));
                        continue;
                    }
                }
                slots.push(Slot::Synthetic(wire_text(m, query_tool).into()));
            }
        }
    }

    // A query the proxy answered shows its answer wherever it is sent as is.
    for (u, text) in answers {
        content.entry(*u).or_insert_with(|| text.clone());
    }

    // The wire messages in output order, each with the blocks it keeps.
    let in_host: Vec<bool> = {
        let mut v = vec![false; units.len()];
        for u in host.units.iter().flatten() {
            v[*u] = true;
        }
        v
    };
    let mut present = vec![false; units.len()];
    let mut order: Vec<Emit> = Vec::new();
    let mut emitted = vec![false; request.messages.len()];
    for slot in slots {
        match slot {
            Slot::Unit(u) => {
                present[u] = true;
                let m = units[u].message;
                if !emitted[m] {
                    emitted[m] = true;
                    order.push(Emit::Wire(m));
                }
            }
            Slot::Synthetic(t) => order.push(Emit::Synthetic(t)),
        }
    }
    // A wire message the engine does not hold (only results Claude Code
    // had cleared before condense saw them, or no content) follows the
    // message before it.
    let mut holds_unit = vec![false; request.messages.len()];
    for (u, unit) in units.iter().enumerate() {
        if in_host[u] {
            holds_unit[unit.message] = true;
        }
    }
    for m in 0..request.messages.len() {
        if holds_unit[m] || emitted[m] {
            continue;
        }
        let after = (0..m).rev().find(|p| emitted[*p]).and_then(|p| {
            order
                .iter()
                .position(|e| matches!(e, Emit::Wire(w) if *w == p))
        });
        let at = match after {
            Some(a) => a + 1,
            None if m == 0 => 0,
            None => continue,
        };
        order.insert(at, Emit::Wire(m));
        emitted[m] = true;
    }

    // The unit each block belongs to.
    let mut unit_of_block: Vec<Vec<Option<usize>>> = request
        .messages
        .iter()
        .map(|w| vec![None; w.blocks.len()])
        .collect();
    for (u, unit) in units.iter().enumerate() {
        let w = &request.messages[unit.message];
        let slots = &mut unit_of_block[unit.message];
        for (b, (block, _)) in w.blocks.iter().enumerate() {
            let mine = match unit.part {
                Part::Assistant => true,
                Part::Result(i) => i == b,
                Part::Prompt => !matches!(block, Block::ToolResult { .. }),
            };
            if mine {
                slots[b] = Some(u);
            }
        }
    }
    let block_kept =
        |m: usize, b: usize| unit_of_block[m][b].is_none_or(|u| present[u] || !in_host[u]);

    // Pairing: each result answers a call of the assistant message just
    // before it; each call is answered in the next message.
    let mut keep_blocks: Vec<Vec<bool>> = request
        .messages
        .iter()
        .enumerate()
        .map(|(m, w)| (0..w.blocks.len()).map(|b| block_kept(m, b)).collect())
        .collect();
    let mut open: Vec<&str> = Vec::new();
    for e in &order {
        let Emit::Wire(m) = e else {
            if !open.is_empty() {
                return Err(RebuildError(
                    "a message condense wrote would follow unanswered tool calls".into(),
                ));
            }
            continue;
        };
        let w = &request.messages[*m];
        let mut answered: Vec<&str> = Vec::new();
        for (b, (block, _)) in w.blocks.iter().enumerate() {
            if let Block::ToolResult { tool_use_id, .. } = block {
                if !keep_blocks[*m][b] {
                    continue;
                }
                if open.contains(&tool_use_id.as_ref()) {
                    answered.push(tool_use_id);
                } else {
                    keep_blocks[*m][b] = false;
                }
            }
        }
        if open.iter().any(|c| !answered.contains(c)) {
            return Err(RebuildError(format!(
                "the render leaves a tool call unanswered before message {m}"
            )));
        }
        open.clear();
        if w.role == "assistant" {
            for (b, (block, _)) in w.blocks.iter().enumerate() {
                if let Block::ToolUse { id, .. } = block {
                    if keep_blocks[*m][b] {
                        open.push(id);
                    }
                }
            }
        }
    }
    if !open.is_empty() {
        return Err(RebuildError(
            "the render ends on unanswered tool calls".into(),
        ));
    }

    let unchanged = content.is_empty()
        && inputs.is_empty()
        && order.len() == request.messages.len()
        && order
            .iter()
            .enumerate()
            .all(|(i, e)| matches!(e, Emit::Wire(m) if *m == i))
        && keep_blocks.iter().all(|k| k.iter().all(|b| *b));
    if unchanged {
        return Ok(None);
    }

    let block_unit = |m: usize, b: usize| unit_of_block[m][b];
    let span = &request.messages_span;
    let mut out = String::with_capacity(body.len() + 1024);
    out.push_str(&body[..span.start]);
    out.push('[');
    let mut first = true;
    let mut push = |out: &mut String, item: &str| {
        if !std::mem::take(&mut first) {
            out.push(',');
        }
        out.push_str(item);
    };
    // A run of messages sent as they are, in their order, is copied as one
    // slice of the body (separators included).
    let mut run: Option<(usize, usize)> = None;
    let flush = |out: &mut String,
                 run: &mut Option<(usize, usize)>,
                 push: &mut dyn FnMut(&mut String, &str)| {
        if let Some((a, b)) = run.take() {
            push(
                out,
                &body[request.messages[a].span.start..request.messages[b].span.end],
            );
        }
    };
    for e in order {
        match e {
            Emit::Synthetic(text) => {
                flush(&mut out, &mut run, &mut push);
                push(
                    &mut out,
                    &serde_json::json!({"role": "user", "content": [{"type": "text", "text": text}]})
                        .to_string(),
                );
            }
            Emit::Wire(m) => {
                let w = &request.messages[m];
                let keeps = &keep_blocks[m];
                if keeps.iter().all(|k| !k) {
                    continue;
                }
                let edited = w.blocks.iter().enumerate().any(|(b, _)| {
                    inputs.contains_key(&(m, b))
                        || block_unit(m, b).is_some_and(|u| content.contains_key(&u))
                });
                if keeps.iter().all(|k| *k) && !edited {
                    run = match run {
                        Some((a, b)) if b + 1 == m => Some((a, m)),
                        _ => {
                            flush(&mut out, &mut run, &mut push);
                            Some((m, m))
                        }
                    };
                    continue;
                }
                flush(&mut out, &mut run, &mut push);
                let mut blocks = Vec::new();
                for (b, (block, bspan)) in w.blocks.iter().enumerate() {
                    if !keeps[b] {
                        continue;
                    }
                    let replaced = match block {
                        Block::ToolResult {
                            content: Some(c), ..
                        } => block_unit(m, b)
                            .and_then(|u| content.get(&u))
                            .map(|text| (c.clone(), result_content(&body[c.clone()], text))),
                        Block::ToolUse { input, .. } => inputs
                            .get(&(m, b))
                            .map(|args| (input.clone(), args.clone())),
                        _ => None,
                    };
                    blocks.push(match replaced {
                        Some((at, with)) => format!(
                            "{}{}{}",
                            &body[bspan.start..at.start],
                            with,
                            &body[at.end..bspan.end]
                        ),
                        None => body[bspan.clone()].to_owned(),
                    });
                }
                let content_text = if w.content_is_string {
                    body[w.content.clone()].to_owned()
                } else {
                    format!("[{}]", blocks.join(","))
                };
                push(
                    &mut out,
                    &format!(
                        "{}{}{}",
                        &body[w.span.start..w.content.start],
                        content_text,
                        &body[w.content.end..w.span.end]
                    ),
                );
            }
        }
    }
    flush(&mut out, &mut run, &mut push);
    out.push(']');
    out.push_str(&body[span.end..]);
    Ok(Some(out))
}

enum Emit<'a> {
    Wire(usize),
    Synthetic(std::borrow::Cow<'a, str>),
}

/// A stub as the result's `content`, in the form the client used.
fn result_content(original: &str, text: &str) -> String {
    if original.trim_start().starts_with('[') {
        serde_json::json!([{"type": "text", "text": text}]).to_string()
    } else {
        Value::String(text.to_owned()).to_string()
    }
}
