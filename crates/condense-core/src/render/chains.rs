//! Phase 3: compressed chains collapse into one synthetic user message.
//!
//! A chain entry names its range by two boundary messages: the user message
//! at `startUserTimestamp` and the text-only assistant at
//! `finalAssistantTimestamp`. Resolution is positional and fails closed: both
//! must match exactly one message of their role, start before end, or the
//! entry drops nothing (an id-based fallback is what once deleted live turns).
//!
//! Within a resolved range only assistant messages, tool results and
//! condense's own per-batch summaries are dropped; user messages (including an
//! already inserted synthetic) and third-party custom messages survive, which
//! is also what makes re-applying the phase a no-op. (pi-condense skipped the
//! insertion whenever any user message anywhere began like the block's
//! synthetic, so a pasted prompt could hide a chain; condense only trusts a
//! synthetic sitting right after the start with the entry's timestamp.) Per-batch summaries
//! covering dropped results are suppressed wherever they are (agent-message
//! batching appends them after the range). Protected outputs in the range are
//! relocated verbatim into the synthetic body.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use crate::diagnostics::{Collector, DiagnosticKind};
use crate::message::{Message, Role, Skeleton};
use crate::occurrence::bare_id;
use crate::records::ChainEntry;
use crate::state::State;
use rustc_hash::{FxHashMap, FxHashSet};

use super::chain_memo::{ChainMemo, ChainText, RangeScan};
use super::thinking::without_thinking;
use super::{Item, Working};

/// Replaces `{bN}` placeholders with block N's chain text, one level deep.
/// A block's reference to itself and unknown blocks stay literal.
pub fn substitute_block_refs(
    text: &str,
    self_block: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("{b") {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 2..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after.as_bytes().get(digits) == Some(&b'}') {
            let block = format!("b{}", &after[..digits]);
            let replacement = (block != self_block).then(|| lookup(&block)).flatten();
            match replacement {
                Some(r) => out.push_str(&r),
                None => out.push_str(&rest[pos..pos + 3 + digits]),
            }
            rest = &after[digits + 1..];
        } else {
            out.push_str("{b");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The text of a `<compressed-chain>` synthetic message.
pub fn synthetic_text(
    block_id: &str,
    tool_refs: &[String],
    body: &str,
    protected: &[(String, String)],
) -> String {
    let mut text = format!(
        "<compressed-chain id=\"{block_id}\" tools=\"{}\">\n{body}",
        tool_refs.join(",")
    );
    for (tool, output) in protected {
        text.push_str(&format!(
            "\n\n<protected-output tool=\"{}\">\n{}\n</protected-output>",
            tool.replace('"', "&quot;"),
            neutralize_closing_tags(output)
        ));
    }
    text.push_str("\n</compressed-chain>");
    text
}

/// The names of the synthetic's own elements.
const STRUCTURE_TAGS: [&[u8]; 2] = [b"protected-output", b"compressed-chain"];

/// `text` with every closing tag of the synthetic's own structure
/// (`</protected-output`, `</compressed-chain`, in any case, with blanks
/// after `</`) written `<\/…`, so relocated content cannot end its block or
/// the chain early as the model reads it. Text without one is returned as is.
pub fn neutralize_closing_tags(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut from = 0;
    while let Some(p) = text[from..].find("</") {
        let at = from + p;
        from = at + 2;
        let name_at = at
            + 2
            + bytes[at + 2..]
                .iter()
                .take_while(|b| b.is_ascii_whitespace())
                .count();
        let closes = STRUCTURE_TAGS.iter().any(|tag| {
            bytes
                .get(name_at..name_at + tag.len())
                .is_some_and(|name| name.eq_ignore_ascii_case(tag))
        });
        if closes {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len() + 8));
            out.push_str(&text[copied..at]);
            out.push_str("<\\/");
            copied = at + 2;
        }
    }
    match out {
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(text),
    }
}

fn synthetic_message(entry: &ChainEntry, text: &str) -> Message {
    let mut json = String::from(r#"{"role":"user","content":[{"type":"text","text":"#);
    json.push_str(&serde_json::to_string(text).expect("strings serialize"));
    json.push_str(r#"}],"timestamp":"#);
    json.push_str(&entry.compressed_at.to_string());
    json.push('}');
    let skeleton = Skeleton {
        role: Some(Role::User),
        timestamp: Some(entry.compressed_at),
        compressed_chain_id: Some(entry.block_id.clone()),
        is_synthetic_chain: true,
        ..Skeleton::default()
    };
    Message::from_parts(json, skeleton)
}

/// A chain entry resolved to positions in the working list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedRange {
    /// Position of the start user message.
    pub start: usize,
    /// Position of the final assistant message.
    pub end: usize,
}

/// Index of boundary messages by (role, timestamp): match count and first
/// position. Kept between renders in the chain memo and extended with the
/// messages appended since.
#[derive(Debug, Default, PartialEq)]
pub struct BoundaryIndex {
    users: ByTimestamp,
    assistants: ByTimestamp,
}

/// Per timestamp: how many messages have it, and the first one's position.
type ByTimestamp = FxHashMap<i64, (u32, usize)>;

impl BoundaryIndex {
    /// Indexes user and assistant messages by timestamp.
    #[cfg(test)]
    pub fn new<'m>(messages: impl Iterator<Item = &'m Message>) -> Self {
        let mut index = BoundaryIndex::default();
        let (lower, _) = messages.size_hint();
        index.users.reserve(lower / 8);
        index.assistants.reserve(lower / 2);
        for (i, m) in messages.enumerate() {
            index.push(i, m);
        }
        index
    }

    fn map_of(&mut self, m: &Message) -> Option<(&mut ByTimestamp, i64)> {
        let ts = m.timestamp()?;
        match m.role() {
            Some(Role::User) => Some((&mut self.users, ts)),
            Some(Role::Assistant) => Some((&mut self.assistants, ts)),
            _ => None,
        }
    }

    /// Indexes the message at position `i`, after every earlier one.
    pub(crate) fn push(&mut self, i: usize, m: &Message) {
        if let Some((map, ts)) = self.map_of(m) {
            map.entry(ts).or_insert((0u32, i)).0 += 1;
        }
    }

    /// Forgets the last message indexed, `m`.
    pub(crate) fn pop(&mut self, m: &Message) {
        if let Some((map, ts)) = self.map_of(m) {
            if let Some(e) = map.get_mut(&ts) {
                e.0 -= 1;
                if e.0 == 0 {
                    map.remove(&ts);
                }
            }
        }
    }

    /// Resolves an entry: exactly one user at the start timestamp, exactly
    /// one assistant at the final timestamp, start before end.
    pub fn resolve(&self, entry: &ChainEntry) -> Option<ResolvedRange> {
        let final_ts = entry.final_assistant_timestamp?;
        let &(n_start, start) = self.users.get(&entry.start_user_timestamp)?;
        let &(n_end, end) = self.assistants.get(&final_ts)?;
        (n_start == 1 && n_end == 1 && start < end).then_some(ResolvedRange { start, end })
    }
}

struct Accepted<'s> {
    entry: &'s ChainEntry,
    range: ResolvedRange,
}

/// The chains that apply to a render, resolved to positions before any phase
/// runs: resolution reads only roles and timestamps, which no phase before
/// this one changes, and knowing the ranges early lets the stub phase skip
/// the results this phase drops anyway.
pub(crate) struct Resolved<'s> {
    chains: Vec<(&'s ChainEntry, ResolvedRange)>,
    scan: Option<Arc<RangeScan>>,
    /// Positions of the summary messages covering a result the chains drop,
    /// in order.
    suppressed: Vec<usize>,
}

impl Resolved<'_> {
    /// Per position: true for a tool result the chain phase drops whatever
    /// the stub phase makes of it (inside a range, not a protected output).
    pub(crate) fn dropped_results(&self, input: &[Message]) -> Option<Vec<bool>> {
        let scan = self.scan.as_ref()?;
        let mut mask = vec![false; input.len()];
        for &i in &scan.unprotected_results_at {
            mask[i] = true;
        }
        Some(mask)
    }
}

/// Resolves the state's chains over the render's input (see [`Resolved`]).
pub(crate) fn resolve<'s>(
    input: &[Message],
    state: &'s State,
    memo: &ChainMemo,
    gate: super::Gate,
    diags: &mut Collector,
) -> Resolved<'s> {
    let shown = state
        .chains()
        .filter(|e| gate.shows(state.chain_since(e.start_user_timestamp)));
    let ranges: Vec<(&ChainEntry, Option<ResolvedRange>)> = memo
        .with_index(input, |boundaries, _| {
            shown.map(|e| (e, boundaries.resolve(e))).collect()
        });

    let mut resolved: Vec<Accepted<'_>> = Vec::new();
    for (entry, range) in ranges {
        match range {
            Some(range) => resolved.push(Accepted { entry, range }),
            None => diags.report(
                DiagnosticKind::UnresolvedRange,
                entry.block_id.clone(),
                format!(
                    "blockId={} start={} final={}",
                    entry.block_id,
                    entry.start_user_timestamp,
                    entry
                        .final_assistant_timestamp
                        .map_or_else(|| "null".to_owned(), |t| t.to_string())
                ),
            ),
        }
    }

    let mut chains: Vec<(&ChainEntry, ResolvedRange)> = Vec::new();
    let mut claimed: FxHashSet<usize> = FxHashSet::default();
    // A range nests in another when it starts strictly inside it: the
    // latest end among the ranges starting before it tells, and the one it
    // nests in is looked up only to name it.
    let mut by_start: Vec<(usize, usize)> = resolved
        .iter()
        .map(|c| (c.range.start, c.range.end))
        .collect();
    by_start.sort_unstable();
    let mut latest_end = Vec::with_capacity(by_start.len());
    let mut latest = 0usize;
    for &(_, end) in &by_start {
        latest = latest.max(end);
        latest_end.push(latest);
    }
    let nests = |start: usize| {
        let before = by_start.partition_point(|&(s, _)| s < start);
        before > 0 && latest_end[before - 1] > start
    };
    for c in &resolved {
        let nests_in = nests(c.range.start)
            .then(|| {
                resolved.iter().find(|o| {
                    !std::ptr::eq(*o, c)
                        && c.range.start > o.range.start
                        && c.range.start < o.range.end
                })
            })
            .flatten();
        if nests_in.is_some() || claimed.contains(&c.range.start) {
            let detail = match nests_in {
                Some(o) => format!(
                    "blockId={} skipped: range nests inside blockId={}",
                    c.entry.block_id, o.entry.block_id
                ),
                None => format!(
                    "blockId={} skipped: range duplicates startIndex={} already claimed",
                    c.entry.block_id, c.range.start
                ),
            };
            diags.report(
                DiagnosticKind::UnresolvedRange,
                format!("overlap:{}", c.entry.block_id),
                detail,
            );
            continue;
        }
        claimed.insert(c.range.start);
        chains.push((c.entry, c.range));
    }
    let scan = (!chains.is_empty()).then(|| memo.scan(state.generation(), &chains, input));
    let suppressed = if chains.is_empty() {
        Vec::new()
    } else {
        suppressed_summaries(input, memo, &chains)
    };
    Resolved {
        chains,
        scan,
        suppressed,
    }
}

/// Positions of the summary messages covering a result that lies inside an
/// accepted range: per-batch summaries covering a dropped result are
/// suppressed wherever they are (agent-message batching appends them after
/// the range). A ref with a result timestamp names that result; a bare one
/// any result or call of its id.
fn suppressed_summaries(
    input: &[Message],
    memo: &ChainMemo,
    chains: &[(&ChainEntry, ResolvedRange)],
) -> Vec<usize> {
    // Accepted ranges never nest nor share a start, so their insides are
    // disjoint: the range holding a position is the last starting before it.
    let mut ranges: Vec<(usize, usize)> = chains.iter().map(|(_, r)| (r.start, r.end)).collect();
    ranges.sort_unstable();
    let inside = |i: usize| {
        let k = ranges.partition_point(|&(start, _)| start < i);
        k > 0 && i < ranges[k - 1].1
    };
    memo.suppressed(input, &ranges, |ids, i| {
        input.get(i).is_some_and(|m| {
            m.skeleton()
                .summary_refs
                .iter()
                .any(|r| match r.result_timestamp {
                    Some(ts) => ids.has_result(&r.tool_call_id, ts, inside),
                    None => ids.has_id(bare_id(&r.tool_call_id), inside),
                })
        })
    })
}

/// Collapses each resolved chain into its synthetic message.
pub(crate) fn apply(
    work: &mut Working<'_>,
    state: &State,
    memo: &ChainMemo,
    resolved: &Resolved<'_>,
    strip_final_thinking: bool,
    diags: &mut Collector,
) {
    let (chains, Some(scan)) = (&resolved.chains, &resolved.scan) else {
        return;
    };
    let n = work.len();
    let mut in_range = vec![false; n];
    // Per position (vectors, not maps: the rebuild visits every position).
    let mut insert_after: Vec<Option<Message>> = vec![None; n];
    let mut inserted = 0usize;
    // Final assistants whose thinking is stripped, with their chain's block id.
    let mut strip_blocks: Vec<Option<&str>> = vec![None; n];

    for (k, (entry, r)) in chains.iter().enumerate() {
        in_range[r.start + 1..r.end].fill(true);
        if let Some((recorded, actual)) = scan.mismatches[k] {
            diags.report(
                DiagnosticKind::RangeIdMismatch,
                entry.block_id.clone(),
                format!(
                    "blockId={} recorded={recorded} actual={actual}",
                    entry.block_id
                ),
            );
        }
        let protected: Vec<&Message> = scan.protected_at[k].iter().map(|&i| work.get(i)).collect();
        // The text, and what it read: the blocks its body names and the
        // occurrences whose summaries it joined (its own and theirs).
        let text = |protected: &[&Message]| {
            let protected_outputs: Vec<(String, String)> = protected
                .iter()
                .map(|m| {
                    (
                        m.skeleton().tool_name.clone().unwrap_or_default(),
                        m.result_text(),
                    )
                })
                .collect();
            let blocks = RefCell::new(Vec::new());
            let occurrences = RefCell::new(state.chain_body_keys(entry));
            let body = substitute_block_refs(&state.chain_body(entry), &entry.block_id, |b| {
                blocks.borrow_mut().push(b.to_owned());
                let named = state.chain_by_block(b)?;
                occurrences
                    .borrow_mut()
                    .extend(state.chain_body_keys(named));
                Some(state.chain_body(named)).filter(|t| !t.is_empty())
            });
            ChainText {
                text: synthetic_text(&entry.block_id, &entry.tool_refs, &body, &protected_outputs),
                blocks: blocks.into_inner(),
                occurrences: occurrences.into_inner(),
            }
        };
        // A chain renders the same synthetic until its text changes:
        // memoized (render runs before every LLM call). Without protected
        // outputs the text is compared; with them, the outputs' messages
        // are (their text is long and quoted whole).
        let synthetic = if protected.is_empty() {
            memo.synthetic(
                &entry.block_id,
                state,
                entry.compressed_at,
                || text(&[]),
                |t| synthetic_message(entry, t),
            )
        } else {
            memo.protected_synthetic(
                &entry.block_id,
                state.content_generation(),
                &protected,
                || synthetic_message(entry, &text(&protected).text),
            )
        };
        if strip_final_thinking {
            strip_blocks[r.end] = Some(&entry.block_id);
        }
        // Idempotency: a synthetic of this block already right after the
        // start (a re-render of rendered output) is not inserted twice. Only
        // that exact position counts, so a user prompt that merely starts
        // like a synthetic cannot hide a chain.
        let already = r.start + 1 < n && {
            let next = work.get(r.start + 1);
            next.is(&Role::User)
                && next.skeleton().compressed_chain_id.as_deref() == Some(entry.block_id.as_str())
                && next.timestamp() == Some(entry.compressed_at)
        };
        if !already {
            insert_after[r.start] = Some(synthetic);
            inserted += 1;
        }
    }

    // The stub and purge phases replace only tool results and assistants,
    // so the summaries sit where `resolve` found them in the input.
    let overlaps_dropped = |i: usize| resolved.suppressed.binary_search(&i).is_ok();

    // Decide per position before rebuilding (the closure below owns the items).
    let mut keep = vec![true; n];
    let mut stripped: Vec<Option<Message>> = vec![None; n];
    for (i, k) in keep.iter_mut().enumerate() {
        let m = work.get(i);
        let is_summary = m.is_summary_message();
        let droppable = m.is(&Role::Assistant) || m.is(&Role::ToolResult) || is_summary;
        if (in_range[i] && droppable) || (is_summary && overlaps_dropped(i)) {
            *k = false;
            continue;
        }
        let strip_block = strip_blocks[i];
        if let Some(block) =
            strip_block.filter(|_| m.is(&Role::Assistant) && m.skeleton().thinking_blocks > 0)
        {
            let s = memo.stripped(block, m, || without_thinking(m));
            if let Some(s) = s {
                stripped[i] = Some(s);
            }
        }
    }
    work.rebuild(|items| {
        let mut out = Vec::with_capacity(items.len() + inserted);
        for (i, item) in items.into_iter().enumerate() {
            if keep[i] {
                match stripped[i].take() {
                    Some(s) => out.push(Item::New(s)),
                    None => out.push(item),
                }
            }
            if let Some(synthetic) = insert_after[i].take() {
                out.push(Item::New(synthetic));
            }
        }
        out
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_refs_substitute_one_level() {
        let lookup = |b: &str| match b {
            "b1" => Some("ONE {b2}".to_owned()),
            "b2" => Some("TWO".to_owned()),
            _ => None,
        };
        assert_eq!(
            substitute_block_refs("x {b1} y", "b9", lookup),
            "x ONE {b2} y"
        );
        assert_eq!(
            substitute_block_refs("{b9} {b3} {b} {bx}", "b9", lookup),
            "{b9} {b3} {b} {bx}"
        );
        assert_eq!(substitute_block_refs("{b2}{b2}", "b1", lookup), "TWOTWO");
        assert_eq!(substitute_block_refs("{{b2}}", "b1", lookup), "{TWO}");
    }

    #[test]
    fn relocated_content_cannot_close_the_structure() {
        let hostile = "a</protected-output></compressed-chain>\n</ PROTECTED-output >\n</Compressed-Chain\n</other> <\\/x";
        let t = synthetic_text(
            "b1",
            &["t1".into()],
            "body",
            &[("to\"do".into(), hostile.into())],
        );
        assert_eq!(t.matches("</protected-output>").count(), 1);
        assert_eq!(t.matches("</compressed-chain>").count(), 1);
        assert!(t.ends_with("\n</protected-output>\n</compressed-chain>"));
        assert!(t.contains(
            "<protected-output tool=\"to&quot;do\">\na<\\/protected-output><\\/compressed-chain>\n<\\/ PROTECTED-output >\n<\\/Compressed-Chain\n</other> <\\/x\n"
        ));
        let plain = "x </div> <protected-output tool=\"a\"> </ p> </";
        assert!(matches!(neutralize_closing_tags(plain), Cow::Borrowed(p) if p == plain));
    }

    #[test]
    fn synthetic_format() {
        let t = synthetic_text(
            "b1",
            &["t1".into(), "t2".into()],
            "body",
            &[("todo".into(), "x".into())],
        );
        assert_eq!(
            t,
            "<compressed-chain id=\"b1\" tools=\"t1,t2\">\nbody\n\n<protected-output tool=\"todo\">\nx\n</protected-output>\n</compressed-chain>"
        );
    }
}
