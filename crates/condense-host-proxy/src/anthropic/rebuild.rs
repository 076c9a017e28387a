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

use condense_core::PlanStep;
use serde_json::Value;

use super::wire::{Block, WireRequest};
use crate::render::{layout, HostList, RebuildError, Slot};
use crate::span::{ArrayWriter, Spliced};
use crate::view::{Part, Unit};

/// Whether each `tool_result` in `request` answers a `tool_use` of the
/// assistant message just before it, as the API requires. One that does
/// not would be refused upstream; the engine's render drops such a
/// result, so the request would go mended: it goes as the client wrote it.
fn answered_as_sent(request: &WireRequest<'_>) -> Result<(), RebuildError> {
    let mut calls: Vec<&str> = Vec::new();
    for (m, w) in request.messages.iter().enumerate() {
        for (block, _) in &w.blocks {
            if let Block::ToolResult { tool_use_id, .. } = block {
                if !calls.contains(&tool_use_id.as_ref()) {
                    return Err(RebuildError(format!(
                        "a tool result in message {m} answers no call before it"
                    )));
                }
            }
        }
        calls.clear();
        if w.role == "assistant" {
            calls.extend(w.blocks.iter().filter_map(|(b, _)| match b {
                Block::ToolUse { id, .. } => Some(id.as_ref()),
                _ => None,
            }));
        }
    }
    Ok(())
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
) -> Result<Option<Spliced>, RebuildError> {
    answered_as_sent(request)?;
    let body = request.body;
    let plan = layout(units, host, steps, answers, query_tool);
    let content = &plan.content;
    let mut inputs: HashMap<(usize, usize), String> = HashMap::new();
    for (u, purged) in &plan.purged {
        let msg = units[*u].message;
        for (b, (block, _)) in request.messages[msg].blocks.iter().enumerate() {
            if let Block::ToolUse { id, .. } = block {
                if let Some((_, args)) = purged.iter().find(|(c, _)| c == id) {
                    inputs.insert((msg, b), args.clone());
                }
            }
        }
    }

    // The wire messages in output order, each with the blocks it keeps.
    let mut order: Vec<Emit> = Vec::new();
    let mut emitted = vec![false; request.messages.len()];
    for slot in &plan.slots {
        match slot {
            Slot::Unit(u) => {
                let m = units[*u].message;
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
        if plan.in_host[u] {
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
    let block_kept = |m: usize, b: usize| unit_of_block[m][b].is_none_or(|u| plan.kept(u));

    // Pairing: each result answers a call of the assistant message just
    // before it; each call is answered in the next message. A result that
    // answers no call was so in the request (the upstream would refuse
    // it): the request goes as the client wrote it.
    let keep_blocks: Vec<Vec<bool>> = request
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
                    return Err(RebuildError(format!(
                        "a tool result in message {m} answers no call before it"
                    )));
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
    let mut out = ArrayWriter::new(body, request.messages_span.clone());
    for e in order {
        match e {
            Emit::Synthetic(text) => {
                out.value().text(
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
                    out.keep(m, w.span.clone());
                    continue;
                }
                let v = out.value();
                v.copy(w.span.start..w.content.start);
                if w.content_is_string {
                    v.copy(w.content.clone());
                } else {
                    v.text("[");
                    let mut first = true;
                    for (b, (block, bspan)) in w.blocks.iter().enumerate() {
                        if !keeps[b] {
                            continue;
                        }
                        if !std::mem::take(&mut first) {
                            v.text(",");
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
                        match replaced {
                            Some((at, with)) => {
                                v.copy(bspan.start..at.start);
                                v.text(&with);
                                v.copy(at.end..bspan.end);
                            }
                            None => v.copy(bspan.clone()),
                        }
                    }
                    v.text("]");
                }
                v.copy(w.content.end..w.span.end);
            }
        }
    }
    Ok(Some(out.finish()))
}

enum Emit<'a> {
    Wire(usize),
    Synthetic(&'a str),
}

/// A stub as the result's `content`, in the form the client used.
fn result_content(original: &str, text: &str) -> String {
    if original.trim_start().starts_with('[') {
        serde_json::json!([{"type": "text", "text": text}]).to_string()
    } else {
        Value::String(text.to_owned()).to_string()
    }
}

impl crate::render::WireBody for WireRequest<'_> {
    fn api(&self) -> crate::render::Api {
        crate::render::Api::Anthropic
    }

    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    fn body(&self) -> &str {
        self.body
    }

    fn rebuild(
        &self,
        units: &[Unit],
        host: &HostList<'_>,
        steps: &[PlanStep],
        answers: &HashMap<usize, String>,
        query_tool: &str,
    ) -> Result<Option<Spliced>, RebuildError> {
        rebuild(self, units, host, steps, answers, query_tool)
    }
}
