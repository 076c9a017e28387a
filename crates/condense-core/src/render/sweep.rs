//! Phase 4: tool results without an open tool call are removed.
//!
//! pi-ai repairs tool calls left without a result but not results left
//! without a call, which providers reject. Walking forward, an assistant
//! message opens the set of its tool-call ids; a tool result consumes its id
//! or is swept; any other message (user, custom, bash, summaries, unknown
//! roles) closes the open set. That barrier deliberately over-sweeps: a
//! result separated from its call by another message becomes pi-ai's
//! repairable "No result provided" instead of a duplicate `tool_use_id`.

use sha1::{Digest, Sha1};

use crate::diagnostics::{Collector, DiagnosticKind};
use crate::message::Role;

use super::id_set::IdSet;
use super::{Item, Working};

pub(crate) fn apply(work: &mut Working<'_>, diags: &mut Collector) {
    let mut open = IdSet::default();
    let mut swept: Vec<usize> = Vec::new();
    let mut swept_ids: Vec<String> = Vec::new();
    for (i, m) in work.iter().enumerate() {
        match m.role() {
            Some(Role::Assistant) => {
                open.clear();
                for c in &m.skeleton().tool_calls {
                    // An id repeated within one message opens once.
                    open.insert(&c.id);
                }
            }
            Some(Role::ToolResult) => {
                let id = m.skeleton().tool_call_id.as_deref().unwrap_or("");
                if !open.remove(id) {
                    swept.push(i);
                    swept_ids.push(id.to_owned());
                }
            }
            _ => open.clear(),
        }
    }
    if swept.is_empty() {
        return;
    }
    report(diags, &swept_ids);
    let mut drop = swept.into_iter().peekable();
    work.rebuild(|items| {
        items
            .into_iter()
            .enumerate()
            .filter_map(|(i, it): (usize, Item)| {
                if drop.peek() == Some(&i) {
                    drop.next();
                    None
                } else {
                    Some(it)
                }
            })
            .collect()
    });
}

fn report(diags: &mut Collector, ids: &[String]) {
    let mut sorted: Vec<&str> = ids.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    let digest = Sha1::digest(sorted.join(",").as_bytes());
    let key: String = digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..16]
        .to_owned();
    let shown: Vec<&str> = ids.iter().take(5).map(String::as_str).collect();
    let mut detail = format!(
        "swept {} orphan toolResult(s): {}",
        ids.len(),
        shown.join(", ")
    );
    if ids.len() > 5 {
        detail.push_str(&format!(" ... +{} more", ids.len() - 5));
    }
    diags.report(DiagnosticKind::OrphanSweep, key, detail);
}
