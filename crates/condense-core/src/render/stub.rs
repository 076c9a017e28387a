//! Phase 1: summarized and spilled tool results become stubs.
//!
//! The tool result message stays (dropping it would orphan its tool call and
//! make pi-ai inject a fake "No result provided" error); only its content is
//! replaced by a deterministic pointer to `context_tree_query`, so the prompt
//! cache keeps hitting on the stubbed range.

use crate::message::{Message, Role, Skeleton};
use crate::protect::Protection;
use crate::records::ToolCallRecord;
use crate::state::{CachedStub, State};

use super::grace::for_each_in_grace;
use super::{Gate, Working};

/// The stub text of a summarized result.
pub fn summarized_stub_text(short_ref: &str) -> String {
    format!("[Summarized in pruner summary, ref `{short_ref}`. Use context_tree_query to retrieve full output.]")
}

/// The stub text of a spilled result.
pub fn spilled_stub_text(record: &ToolCallRecord, short_ref: &str) -> String {
    let bytes = record
        .spill_bytes
        .map_or_else(|| "?".to_owned(), |b| b.to_string());
    format!(
        "[Oversized output spilled to file — {bytes} bytes.]\nTool: {}\nPreview (head):\n{}\nFull output — read this file (offset/limit supported): {}\nOr use context_tree_query with ref `{short_ref}`.",
        record.tool_name,
        record.result_preview.as_deref().unwrap_or(""),
        record.spill_path.as_deref().unwrap_or(""),
    )
}

fn push_json_str(out: &mut String, s: &str) {
    // serde_json's escaping matches JSON.stringify for every string.
    out.push_str(&serde_json::to_string(s).expect("strings always serialize"));
}

/// Builds the stub message for a tool result.
pub(crate) fn stub_message(original: &Message, text: &str) -> Message {
    let sk = original.skeleton();
    let id = sk.tool_call_id.as_deref().unwrap_or_default();
    let mut json = String::with_capacity(text.len() + id.len() + 160);
    json.push_str(r#"{"role":"toolResult","toolCallId":"#);
    push_json_str(&mut json, id);
    if let Some(name) = &sk.tool_name {
        json.push_str(r#","toolName":"#);
        push_json_str(&mut json, name);
    }
    json.push_str(r#","content":[{"type":"text","text":"#);
    push_json_str(&mut json, text);
    json.push_str(r#"}],"isError":false"#);
    if let Some(ts) = sk.timestamp {
        json.push_str(r#","timestamp":"#);
        json.push_str(&ts.to_string());
    } else if let Some(raw) = &sk.timestamp_other {
        json.push_str(r#","timestamp":"#);
        json.push_str(raw);
    }
    json.push('}');
    let skeleton = Skeleton {
        role: Some(Role::ToolResult),
        timestamp: sk.timestamp,
        timestamp_other: sk.timestamp_other.clone(),
        tool_call_id: sk.tool_call_id.clone(),
        tool_name: sk.tool_name.clone(),
        ..Skeleton::default()
    };
    Message::from_parts(json, skeleton)
}

/// Replaces summarized and spilled results with their stubs, except in the
/// grace window and at the positions `dropped` marks (the chain phase drops
/// those results whatever they look like).
pub(crate) fn apply(
    work: &mut Working<'_>,
    state: &State,
    protection: &Protection,
    grace_turns: u32,
    dropped: Option<&[bool]>,
    gate: Gate,
) {
    let mut in_grace: Vec<bool> = Vec::new();
    for_each_in_grace(work.iter(), grace_turns, |i, _| {
        if in_grace.is_empty() {
            in_grace = vec![false; work.len()];
        }
        in_grace[i] = true;
    });
    let generation = state.generation();
    let fingerprint = protection.fingerprint();
    let mut replacements: Vec<(usize, Message)> = Vec::new();
    for (i, m) in work.iter().enumerate() {
        if !m.is(&Role::ToolResult)
            || in_grace.get(i).copied().unwrap_or(false)
            || dropped.is_some_and(|d| d[i])
        {
            continue;
        }
        let sk = m.skeleton();
        let Some(id) = sk.tool_call_id.as_deref() else {
            continue;
        };
        let Some(target) = state.stub_target(id, sk.timestamp) else {
            continue;
        };
        // Pending under the cache-aware policy: the raw output stays.
        if !gate.shows(target.since) {
            continue;
        }
        // A dedup alias a chain's backfill indexed after the last switch
        // keeps the stub it was shown with (the original's record and ref)
        // while that chain is pending: its new ref would rewrite the cached
        // prompt from here without a switch. The cell caches the record's
        // own stub only, which every render after a switch shows.
        let pending_alias = target
            .aliased_before
            .as_ref()
            .filter(|a| !gate.shows(a.record_since));
        // Likewise an occurrence shown before it had a short ref (an eager
        // spill, whose stub names its raw id) keeps naming that id while
        // the ref a chain's backfill gave it is pending.
        let pending_ref = target.ref_since.is_some_and(|r| !gate.shows(Some(r)));
        let (record, short_ref, cell) = match pending_alias {
            Some(a) => (a.record, a.short_ref, None),
            None if pending_ref => (target.record, None, None),
            None => (target.record, target.short_ref, target.cell),
        };
        if let Some(cell) = cell {
            if let Some(cached) = cell.get(generation, fingerprint) {
                match cached {
                    // Same occurrence, so same id and timestamp; the tool
                    // name is the only thing the message could still differ in.
                    Some(stub) if stub.skeleton().tool_name == sk.tool_name => {
                        replacements.push((i, stub));
                        continue;
                    }
                    Some(_) => {}
                    None => continue,
                }
            }
        }
        let protected = record.is_some_and(|r| protection.is_protected(&r.tool_name, &r.args));
        let stub = (!protected).then(|| {
            let short_ref = short_ref.unwrap_or(id);
            let text = match record {
                Some(r) if r.spill_path.is_some() => spilled_stub_text(r, short_ref),
                _ => summarized_stub_text(short_ref),
            };
            stub_message(m, &text)
        });
        if let Some(cell) = cell {
            cell.set(CachedStub {
                generation,
                protection: fingerprint,
                stub: stub.clone(),
            });
        }
        if let Some(stub) = stub {
            replacements.push((i, stub));
        }
    }
    for (i, m) in replacements {
        work.replace(i, m);
    }
}
