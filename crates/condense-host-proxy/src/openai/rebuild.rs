//! The engine's render written back onto an OpenAI body: only what condense
//! rewrites changes (a stubbed result's output, a purged call's arguments,
//! the items a chain dropped, the summaries and chains condense shows as
//! user messages); every other byte, reasoning with its
//! `encrypted_content` and every item of an unknown kind included, is the
//! client's.
//!
//! Both APIs reject a call without its output and an output without its
//! call; a render whose items would break that pairing, or put a message
//! between a call and its output, is not sent ([`RebuildError`]).

use std::collections::HashMap;

use condense_core::PlanStep;
use serde_json::Value;

use super::wire::{Format, ItemsRequest, Side};
use crate::render::{layout, Api, HostList, RebuildError, Slot, WireBody};
use crate::span::{ArrayWriter, Spliced};
use crate::view::Unit;

enum Emit<'a> {
    Group(usize),
    Synthetic(&'a str),
}

/// A user message of `format` holding `text`.
fn user_message(format: Format, text: &str) -> String {
    match format {
        Format::Responses => serde_json::json!({
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }),
        Format::Chat => serde_json::json!({"role": "user", "content": text}),
    }
    .to_string()
}

/// A stub as a result's value, in the form the client used: a string, or
/// one text part of the kind its parts were.
fn output_value(format: Format, original: &str, text: &str) -> String {
    if !original.trim_start().starts_with('[') {
        return Value::String(text.to_owned()).to_string();
    }
    let kind = match format {
        Format::Responses => "input_text",
        Format::Chat => "text",
    };
    serde_json::json!([{"type": kind, "text": text}]).to_string()
}

/// Purged arguments as the call's value: a JSON string (a custom tool's
/// free-form `input` holds the purge notice itself).
fn arguments_value(args: &str, free_form: bool) -> String {
    let text = if free_form {
        serde_json::from_str::<Value>(args)
            .ok()
            .and_then(|v| v.get("_purged").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| args.to_owned())
    } else {
        args.to_owned()
    };
    Value::String(text).to_string()
}

/// Whether each output in `request` answers a call an item before it
/// makes. One that does not would be refused upstream; the engine's render
/// drops such a result, so the request would go mended: it goes as the
/// client wrote it.
fn answered_as_sent(request: &ItemsRequest<'_>) -> Result<(), RebuildError> {
    let mut calls: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for (i, item) in request.items.iter().enumerate() {
        if let Some(o) = &item.output {
            if !calls.contains(o.call_id.as_ref()) {
                return Err(RebuildError(format!(
                    "the output at item {i} answers no call before it"
                )));
            }
        }
        calls.extend(item.calls.iter().map(|c| c.id.as_ref()));
    }
    Ok(())
}

/// Writes `steps` (computed on `host`) onto `request`. `Ok(None)`: the
/// output is the request as sent.
pub fn rebuild(
    request: &ItemsRequest<'_>,
    units: &[Unit],
    host: &HostList<'_>,
    steps: &[PlanStep],
    answers: &HashMap<usize, String>,
    query_tool: &str,
) -> Result<Option<Spliced>, RebuildError> {
    answered_as_sent(request)?;
    let body = request.body;
    let plan = layout(units, host, steps, answers, query_tool);
    let groups = &request.groups;
    let mut unit_of_group = vec![None; groups.len()];
    for (u, unit) in units.iter().enumerate() {
        unit_of_group[unit.message] = Some(u);
    }

    let mut order: Vec<Emit> = Vec::new();
    let mut emitted = vec![false; groups.len()];
    for slot in &plan.slots {
        match slot {
            Slot::Unit(u) => {
                let g = units[*u].message;
                if !emitted[g] {
                    emitted[g] = true;
                    order.push(Emit::Group(g));
                }
            }
            Slot::Synthetic(t) => order.push(Emit::Synthetic(t)),
        }
    }
    // A group the engine does not hold follows the group before it.
    for g in 0..groups.len() {
        let held = unit_of_group[g].is_some_and(|u| plan.in_host[u]);
        if held || emitted[g] {
            continue;
        }
        let after = (0..g).rev().find(|p| emitted[*p]).and_then(|p| {
            order
                .iter()
                .position(|e| matches!(e, Emit::Group(w) if *w == p))
        });
        let at = match after {
            Some(a) => a + 1,
            None if g == 0 => 0,
            None => continue,
        };
        order.insert(at, Emit::Group(g));
        emitted[g] = true;
    }

    // Pairing: the outputs after an assistant group answer its calls, all
    // of them, before anything else. An output answering no call sent
    // before it was so in the request (the upstream would refuse it): the
    // request goes as the client wrote it.
    let mut open: Vec<&str> = Vec::new();
    for e in &order {
        let Emit::Group(g) = e else {
            if !open.is_empty() {
                return Err(RebuildError(
                    "a message condense wrote would follow unanswered tool calls".into(),
                ));
            }
            continue;
        };
        let first = &request.items[groups[*g].start];
        if let (Side::Result, Some(o)) = (first.side, &first.output) {
            if let Some(at) = open.iter().position(|c| *c == o.call_id.as_ref()) {
                open.remove(at);
            } else {
                return Err(RebuildError(format!(
                    "the output at item {} answers no call before it",
                    groups[*g].start
                )));
            }
            continue;
        }
        if !open.is_empty() {
            return Err(RebuildError(format!(
                "the render leaves a tool call unanswered before item {}",
                groups[*g].start
            )));
        }
        for item in &request.items[groups[*g].clone()] {
            open.extend(item.calls.iter().map(|c| c.id.as_ref()));
        }
    }
    if !open.is_empty() {
        return Err(RebuildError(
            "the render ends on unanswered tool calls".into(),
        ));
    }

    let edited = |g: usize| {
        unit_of_group[g]
            .is_some_and(|u| plan.content.contains_key(&u) || plan.purged.contains_key(&u))
    };
    let unchanged = order.len() == groups.len()
        && order
            .iter()
            .enumerate()
            .all(|(i, e)| matches!(e, Emit::Group(g) if *g == i && !edited(*g)));
    if unchanged {
        return Ok(None);
    }

    let mut out = ArrayWriter::new(body, request.items_span.clone());
    for e in order {
        let g = match e {
            Emit::Synthetic(text) => {
                out.value().text(&user_message(request.format, text));
                continue;
            }
            Emit::Group(g) => g,
        };
        let unit = unit_of_group[g];
        let content = unit.and_then(|u| plan.content.get(&u));
        let purged = unit.and_then(|u| plan.purged.get(&u));
        for i in groups[g].clone() {
            let item = &request.items[i];
            // Each edit: the span it replaces and the text it puts there.
            let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::new();
            if let (Some(text), Some(o)) = (content, &item.output) {
                if !o.opaque {
                    let value = output_value(request.format, &body[o.span.clone()], text);
                    edits.push((o.span.clone(), value));
                }
            }
            for call in &item.calls {
                let args = purged.and_then(|p| p.iter().find(|(c, _)| c == call.id.as_ref()));
                if let (Some((_, args)), Some(at)) = (args, &call.span) {
                    edits.push((at.clone(), arguments_value(args, call.free_form)));
                }
            }
            if edits.is_empty() {
                out.keep(i, item.span.clone());
                continue;
            }
            edits.sort_by_key(|(r, _)| r.start);
            let v = out.value();
            let mut at = item.span.start;
            for (r, with) in edits {
                v.copy(at..r.start);
                v.text(&with);
                at = r.end;
            }
            v.copy(at..item.span.end);
        }
    }
    Ok(Some(out.finish()))
}

impl WireBody for ItemsRequest<'_> {
    fn api(&self) -> Api {
        Api::OpenAi
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
