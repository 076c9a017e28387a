//! Context metrics: what the pruner cannot (yet) reclaim.
//!
//! Three numbers, from the single-chain observability spec (2026-08-12),
//! shown by `/pruner status`, the footer and each flush-metrics entry:
//!
//! - **open-cycle thinking**: thinking retained in the trailing open segment,
//!   the part of the branch chain compression cannot touch yet;
//! - **largest-chain share**: how much of the branch one chain (or the open
//!   segment) holds;
//! - **frontier gap**: unsummarized, unprotected tool results after the last
//!   flush boundary, i.e. what summarization could still reclaim.
//!
//! One measurement convention throughout: a message's chars are its
//! [`Message::size`] (`JSON.stringify(message).length`, UTF-16 units) and
//! tokens are `round(chars / 4)`. The branch is the persisted one (not the
//! rendered context), so the numbers measure what is stored.

#[cfg(test)]
use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

#[cfg(test)]
use crate::chains::{detect_spans, ArgsLookup};
use crate::js::js_len;
use crate::message::Message;
#[cfg(test)]
use crate::message::Role;
#[cfg(test)]
use crate::protect::Protection;
#[cfg(test)]
use crate::records::Frontier;
#[cfg(test)]
use crate::state::State;
use crate::token_estimate::chars_to_tokens;

/// A snapshot of the three metrics. Serializes with pi-condense's field
/// names (the `metrics` object of a `context-prune-flush-metrics` entry).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextMetrics {
    /// Estimated tokens of the thinking blocks of the assistant messages in
    /// the open segment (everything after the last text-only assistant).
    pub open_cycle_thinking_tokens: u64,
    /// `max(largest chain, open segment)` chars as a rounded percentage of
    /// the whole branch's chars; `0` for an empty branch.
    pub largest_chain_share_pct: u64,
    /// Estimated tokens of the summarization-eligible tool results after
    /// the frontier.
    pub frontier_gap_tokens: u64,
}

/// [`chars_to_tokens`] on the `u64` counts this module sums in.
pub(crate) fn tokens(chars: u64) -> u64 {
    chars_to_tokens(chars as usize)
}

/// `Math.round(100 * part / total)` on integers; `0` when `total` is 0.
pub(crate) fn rounded_pct(part: u64, total: u64) -> u64 {
    if total == 0 {
        return 0;
    }
    let (part, total) = (u128::from(part), u128::from(total));
    ((200 * part + total) / (2 * total)) as u64
}

/// [`compute_context_metrics`](crate::compute_context_metrics) by a rescan of the whole branch: the
/// definition the memo is tested against.
#[cfg(test)]
pub(crate) fn rescan_context_metrics(
    branch: &[Message],
    frontier: Option<&Frontier>,
    state: &State,
    protection: &Protection,
) -> ContextMetrics {
    if branch.is_empty() {
        return ContextMetrics::default();
    }
    let chars: Vec<u64> = branch.iter().map(|m| m.size() as u64).collect();
    let total: u64 = chars.iter().sum();
    let sum =
        |start: usize, end_inclusive: usize| -> u64 { chars[start..=end_inclusive].iter().sum() };

    // Open segment.
    let open_start = branch
        .iter()
        .rposition(Message::is_text_only_assistant)
        .map_or(0, |i| i + 1);
    let thinking_chars: u64 = branch[open_start..]
        .iter()
        .filter(|m| m.is(&Role::Assistant) && m.skeleton().thinking_blocks > 0)
        .map(thinking_block_chars)
        .sum();
    let open_chars = if open_start < branch.len() {
        sum(open_start, branch.len() - 1)
    } else {
        0
    };

    // Largest chain share.
    let largest_chain = detect_spans(branch, None)
        .iter()
        .map(|s| sum(s.range.start_index, s.range.last_index))
        .max()
        .unwrap_or(0);
    let share = rounded_pct(largest_chain.max(open_chars), total);

    ContextMetrics {
        open_cycle_thinking_tokens: tokens(thinking_chars),
        largest_chain_share_pct: share,
        frontier_gap_tokens: frontier_gap(branch, &chars, frontier, state, protection),
    }
}

/// Chars of the `thinking` blocks of one message, each measured as its JSON
/// text.
pub(crate) fn thinking_block_chars(message: &Message) -> u64 {
    #[derive(Deserialize)]
    struct ContentDe<'a> {
        #[serde(borrow, default)]
        content: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct KindDe<'a> {
        #[serde(borrow, default, rename = "type")]
        kind: Option<&'a RawValue>,
    }
    let json = message.json();
    let Ok(de) = serde_json::from_str::<ContentDe>(&json) else {
        return 0;
    };
    let Some(content) = de.content.filter(|c| c.get().starts_with('[')) else {
        return 0;
    };
    let Ok(blocks) = serde_json::from_str::<Vec<&RawValue>>(content.get()) else {
        return 0;
    };
    blocks
        .into_iter()
        .filter(|b| {
            serde_json::from_str::<KindDe>(b.get())
                .is_ok_and(|k| k.kind.map(RawValue::get) == Some("\"thinking\""))
        })
        .map(|b| js_len(b.get()) as u64)
        .sum()
}

/// Where the frontier window starts.
#[cfg(test)]
struct Boundary {
    /// Index of the boundary assistant; results at or before it are out.
    index: usize,
    /// Index of the next assistant (or the branch length): results before it
    /// whose id is in `excluded` are out.
    turn_end: usize,
    /// The boundary turn's call ids up to and including the frontier's call.
    excluded: HashSet<String>,
}

#[cfg(test)]
fn locate_boundary(branch: &[Message], frontier: &Frontier) -> Option<Boundary> {
    let (index, m) = branch
        .iter()
        .enumerate()
        .filter(|(_, m)| m.is(&Role::Assistant))
        .zip(0i64..)
        .find(|(_, turn)| *turn == frontier.last_attempted_turn_index)
        .map(|(found, _)| found)?;
    let calls = &m.skeleton().tool_calls;
    let k = calls
        .iter()
        .position(|c| c.id == frontier.last_attempted_tool_call_id)?;
    let turn_end = branch[index + 1..]
        .iter()
        .position(|m| m.is(&Role::Assistant))
        .map_or(branch.len(), |p| index + 1 + p);
    Some(Boundary {
        index,
        turn_end,
        excluded: calls[..=k].iter().map(|c| c.id.clone()).collect(),
    })
}

#[cfg(test)]
fn frontier_gap(
    branch: &[Message],
    chars: &[u64],
    frontier: Option<&Frontier>,
    state: &State,
    protection: &Protection,
) -> u64 {
    let boundary = frontier.and_then(|f| locate_boundary(branch, f));
    let scan_start = boundary.as_ref().map_or(0, |b| b.index + 1);
    let mut args = ArgsLookup::default();
    let mut gap = 0;
    for (i, m) in branch.iter().enumerate() {
        let sk = m.skeleton();
        match sk.role {
            Some(Role::Assistant) => args.see_assistant(i, m),
            Some(Role::ToolResult) if i >= scan_start => {
                let id = sk.tool_call_id.as_deref().unwrap_or("");
                if let Some(b) = &boundary {
                    if i < b.turn_end && b.excluded.contains(id) {
                        continue;
                    }
                }
                if state.is_summarized(id, m.timestamp()) {
                    continue;
                }
                let path = if id.is_empty() {
                    None
                } else {
                    args.path(branch, id)
                };
                if protection
                    .is_protected_call(sk.tool_name.as_deref().unwrap_or(""), path.as_deref())
                {
                    continue;
                }
                gap += tokens(chars[i]);
            }
            _ => {}
        }
    }
    gap
}
