//! Phase 2: argument bodies of failed tool calls are purged after a cooldown.
//!
//! A failed `write` with a 30 KB body keeps that body in every request. Once
//! the error is `cooldownTurns` assistant turns old and the arguments
//! serialize to at least `minArgChars`, the arguments become
//! `{"_purged": "<purged-errored-args size=\"N\"/>"}`. The error result itself
//! stays visible. pi-condense read only `arguments`; condense also purges a
//! block that carries its arguments as `input` (a defect fixed here).

use serde_json::{Map, Value};

use crate::config::PurgeErrorsConfig;
use crate::js::js_len;
use crate::message::{Message, Role};
use rustc_hash::FxHashMap;

use super::id_set::{IdSet, SMALL};
use super::purge_memo::PurgeMemo;
use super::Working;

/// The placeholder that replaces purged arguments.
pub fn purged_arguments(size: usize) -> Value {
    let mut m = Map::new();
    m.insert(
        "_purged".into(),
        Value::String(format!("<purged-errored-args size=\"{size}\"/>")),
    );
    Value::Object(m)
}

/// Purges among the first `limit` messages only, with the cooldown counted
/// in the turns among them (the cache-aware policy's horizon: the context at
/// the last switch); the reference policy passes the whole list.
pub(crate) fn apply(
    work: &mut Working<'_>,
    cfg: &PurgeErrorsConfig,
    limit: usize,
    memo: &PurgeMemo,
) {
    // Each error is tied to the assistant whose call its result answers: the
    // assistant opening the run of results it sits in (the orphan sweep's
    // rule), not to the bare id alone. pi-condense keyed by bare id, so a
    // provider reusing an id made a later failure purge an earlier,
    // successful call's arguments.
    let mut errors: FxHashMap<(usize, &str), usize> = FxHashMap::default();
    let mut turn = 0usize;
    let mut open: Option<usize> = None;
    // The first result for an id answers it (a repeat is an orphan the sweep
    // removes), so only the first result's error counts.
    let mut answered = IdSet::default();
    // The call ids of the open assistant when it has many, gathered at its
    // first result (a handful are scanned).
    let mut calls = IdSet::default();
    let mut calls_of: Option<usize> = None;
    for (i, m) in work.iter().enumerate().take(limit) {
        match m.role() {
            Some(Role::Assistant) => {
                turn += 1;
                open = Some(i);
                answered.clear();
            }
            Some(Role::ToolResult) => {
                let sk = m.skeleton();
                let (Some(id), Some(a)) = (sk.tool_call_id.as_deref(), open) else {
                    continue;
                };
                let opened = &work.get(a).skeleton().tool_calls;
                let is_call = if opened.len() <= SMALL {
                    opened.iter().any(|c| c.id == id)
                } else {
                    if calls_of != Some(a) {
                        calls.clear();
                        for c in opened {
                            calls.insert(&c.id);
                        }
                        calls_of = Some(a);
                    }
                    calls.contains(id)
                };
                if !is_call || !answered.insert(id) {
                    continue;
                }
                if sk.is_error {
                    errors.insert((a, id), turn);
                }
            }
            _ => {
                open = None;
                answered.clear();
            }
        }
    }
    if errors.is_empty() {
        return;
    }
    let current = turn;
    let ripe = |assistant: usize, id: &str| {
        errors
            .get(&(assistant, id))
            .is_some_and(|t| current - t >= cfg.cooldown_turns as usize)
    };
    // Only the assistants a ripe error points at can change: visiting them
    // alone keeps this phase from walking the branch a second time.
    let mut with_ripe: Vec<usize> = errors
        .iter()
        .filter(|((a, id), _)| ripe(*a, id))
        .map(|((a, _), _)| *a)
        .collect();
    with_ripe.sort_unstable();
    with_ripe.dedup();
    let mut replacements: Vec<(usize, Message)> = Vec::new();
    let mut ripe_ids: Vec<&str> = Vec::new();
    for i in with_ripe {
        let m = work.get(i);
        ripe_ids.clear();
        ripe_ids.extend(
            m.skeleton()
                .tool_calls
                .iter()
                .map(|c| c.id.as_str())
                .filter(|id| ripe(i, id)),
        );
        if ripe_ids.is_empty() {
            continue;
        }
        let purged = memo.get_or_make(m, &ripe_ids, cfg.min_arg_chars, || {
            purged_copy(m, |id| ripe(i, id), cfg.min_arg_chars)
        });
        if let Some(new) = purged {
            replacements.push((i, new));
        }
    }
    for (i, m) in replacements {
        work.replace(i, m);
    }
}

/// `m` with the arguments of its ripe calls that serialize to at least
/// `min_arg_chars` purged; `None` when none is, or when serde cannot
/// rebuild the message exactly (a lone surrogate): its bytes are pi's.
fn purged_copy(m: &Message, ripe: impl Fn(&str) -> bool, min_arg_chars: u64) -> Option<Message> {
    let mut value = m.to_exact_value().ok()?;
    let mut changed = false;
    if let Some(Value::Array(blocks)) = value.get_mut("content") {
        for block in blocks.iter_mut() {
            let Some(obj) = block.as_object_mut() else {
                continue;
            };
            if obj.get("type").and_then(Value::as_str) != Some("toolCall") {
                continue;
            }
            let Some(id) = obj.get("id").and_then(Value::as_str) else {
                continue;
            };
            if !ripe(id) {
                continue;
            }
            let field = if obj.contains_key("arguments") {
                "arguments"
            } else if obj.contains_key("input") {
                "input"
            } else {
                continue;
            };
            let size = js_len(&serde_json::to_string(&obj[field]).unwrap_or_default());
            if size as u64 >= min_arg_chars {
                obj.insert(field.to_owned(), purged_arguments(size));
                changed = true;
            }
        }
    }
    if !changed {
        return None;
    }
    Message::from_value(&value).ok()
}
