//! What context metrics keep between measurements.
//!
//! The engine measures the branch after every turn with tool results and
//! around every flush, and the branch only grows between measurements (a
//! compaction or a host that rewrites its context truncates it first). The
//! facts the metrics read off the messages alone (sizes, the open segment,
//! the chains' extents, where each tool result's call arguments come from,
//! whether its call is protected) are therefore kept per position and
//! extended with the new messages only; what depends on the state (the
//! frontier, what is summarized) is asked at each measurement, over the
//! frontier window alone.
//!
//! The positions are valid for the very messages they were read from: each
//! measurement first compares the branch with the kept messages by
//! identity and rolls back to the first that differs. The result never
//! depends on the memo being warm.

use std::sync::Mutex;

use crate::message::CallArgs;

use crate::message::{Message, Role};
use crate::protect::Protection;
use crate::records::Frontier;
use crate::state::State;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::metrics::{rounded_pct, thinking_block_chars, tokens, ContextMetrics};

/// The metrics' memo, kept beside a state by its
/// [`Branch`](crate::branch::Branch). A clone starts empty (it belongs to
/// one state value).
#[derive(Debug, Default)]
pub(crate) struct MetricsMemo {
    facts: Mutex<BranchFacts>,
}

impl Clone for MetricsMemo {
    fn clone(&self) -> Self {
        MetricsMemo::default()
    }
}

impl MetricsMemo {
    /// The metrics of `branch` (see
    /// [`compute_context_metrics`](crate::compute_context_metrics)).
    pub(crate) fn measure(
        &self,
        branch: &[Message],
        frontier: Option<&Frontier>,
        state: &State,
        protection: &Protection,
    ) -> ContextMetrics {
        match self.facts.lock() {
            Ok(mut facts) => facts.measure(branch, frontier, state, protection),
            // A panic mid-update left the facts unknown: measure from scratch.
            Err(_) => BranchFacts::default().measure(branch, frontier, state, protection),
        }
    }
}

/// The forward walk's state after a position.
#[derive(Debug, Clone, Copy, Default)]
struct Walk {
    /// The last text-only assistant so far (the open segment starts after it).
    last_text_only: Option<usize>,
    /// Where the chain still open starts (as chain detection walks).
    open_chain: Option<usize>,
    /// Chars of the largest closed or interrupted chain so far.
    largest_chain: u64,
}

/// Facts of a branch's messages, per position.
#[derive(Debug, Default)]
pub(crate) struct BranchFacts {
    /// The messages the facts were read from.
    seen: Vec<Message>,
    /// `chars_before[i]`: the summed sizes of `seen[..i]` (one longer).
    chars_before: Vec<u64>,
    /// `thinking_before[i]`: the summed thinking-block chars of the
    /// assistants in `seen[..i]` (one longer).
    thinking_before: Vec<u64>,
    /// The walk's state after each position.
    walk: Vec<Walk>,
    /// Positions of the assistants, in order (the frontier's turn counter).
    assistants: Vec<usize>,
    /// Per position, for a tool result: the latest earlier assistant with a
    /// call of its id (where its call's arguments are read).
    args_from: Vec<Option<usize>>,
    /// Per tool-call id: the assistants with a call of that id, in order.
    calls_at: FxHashMap<String, Vec<usize>>,
    /// Per position: whether a tool result's call is protected, once asked,
    /// under the rules of `protection`.
    protected: Vec<Option<bool>>,
    /// The protection rules' fingerprint `protected` was judged under.
    protection: Option<u64>,
    /// The last assistant of many calls whose arguments were looked up,
    /// with each id's first position among its `call_args`.
    wide_args: Option<(Message, FxHashMap<String, usize>)>,
}

/// Calls an assistant holds before its arguments are looked up by a hashed
/// index rather than a scan.
const SCAN_LIMIT: usize = crate::ID_SCAN_LIMIT;

/// `assistant`'s first call with `id`. A message of thousands of calls (a
/// hostile session) is indexed once, in `wide`, so asking of each of its
/// results stays linear.
fn call_of<'m>(
    assistant: &'m Message,
    id: &str,
    wide: &mut Option<(Message, FxHashMap<String, usize>)>,
) -> Option<&'m CallArgs> {
    let calls = assistant.call_args();
    if calls.len() <= SCAN_LIMIT {
        return calls.iter().find(|c| c.id == id);
    }
    if !wide.as_ref().is_some_and(|(m, _)| m.same(assistant)) {
        let mut index = FxHashMap::default();
        for (k, c) in calls.iter().enumerate() {
            index.entry(c.id.clone()).or_insert(k);
        }
        *wide = Some((assistant.clone(), index));
    }
    let (_, index) = wide.as_ref()?;
    calls.get(*index.get(id)?)
}

impl BranchFacts {
    /// Brings the facts to `branch`: rolls back to the first message that
    /// is not the very one seen there, then reads the rest.
    fn sync(&mut self, branch: &[Message]) {
        let same = Message::same_prefix(&self.seen, branch);
        self.truncate(same);
        for m in branch.get(same..).unwrap_or_default() {
            self.push(m);
        }
    }

    fn truncate(&mut self, len: usize) {
        while self.seen.len() > len {
            let Some(m) = self.seen.pop() else { break };
            let at = self.seen.len();
            if m.is(&Role::Assistant) {
                self.assistants.pop();
                for call in &m.skeleton().tool_calls {
                    if let Some(stack) = self.calls_at.get_mut(&call.id) {
                        stack.pop();
                        if stack.is_empty() {
                            self.calls_at.remove(&call.id);
                        }
                    }
                }
            }
            debug_assert!(self.assistants.last().is_none_or(|&a| a < at));
        }
        self.chars_before.truncate(len + 1);
        self.thinking_before.truncate(len + 1);
        self.walk.truncate(len);
        self.args_from.truncate(len);
        self.protected.truncate(len);
    }

    fn push(&mut self, m: &Message) {
        let i = self.seen.len();
        if self.chars_before.is_empty() {
            self.chars_before.push(0);
            self.thinking_before.push(0);
        }
        let chars_before = self.chars_before.last().copied().unwrap_or(0);
        self.chars_before.push(chars_before + m.size() as u64);
        let sk = m.skeleton();
        let thinking = if m.is(&Role::Assistant) && sk.thinking_blocks > 0 {
            thinking_block_chars(m)
        } else {
            0
        };
        let thinking_before = self.thinking_before.last().copied().unwrap_or(0);
        self.thinking_before.push(thinking_before + thinking);

        // Chain extents as chain detection walks (see `chains::detect_spans`).
        let mut walk = self.walk.last().copied().unwrap_or_default();
        let mut args_from = None;
        match sk.role.as_ref() {
            Some(Role::User) if !sk.is_synthetic_chain => {
                if let Some(start) = walk.open_chain {
                    // Interrupted: spans through the message before this one.
                    walk.largest_chain = walk.largest_chain.max(self.chars(start, i));
                }
                walk.open_chain = Some(i);
            }
            Some(Role::Assistant) if !sk.has_tool_call_block => {
                walk.last_text_only = Some(i);
                if let Some(start) = walk.open_chain.take() {
                    walk.largest_chain = walk.largest_chain.max(self.chars(start, i + 1));
                }
            }
            Some(Role::ToolResult) => {
                let id = sk.tool_call_id.as_deref().unwrap_or("");
                args_from = self.calls_at.get(id).and_then(|s| s.last()).copied();
            }
            _ => {}
        }
        if m.is(&Role::Assistant) {
            self.assistants.push(i);
            for call in &sk.tool_calls {
                self.calls_at.entry(call.id.clone()).or_default().push(i);
            }
        }
        self.walk.push(walk);
        self.args_from.push(args_from);
        self.protected.push(None);
        self.seen.push(m.clone());
    }

    /// Chars of `seen[start..end]`.
    fn chars(&self, start: usize, end: usize) -> u64 {
        let at = |i: usize| self.chars_before.get(i).copied().unwrap_or(0);
        at(end).saturating_sub(at(start))
    }

    /// Whether the call of the tool result at `i` is protected: its
    /// `toolName` and the arguments of the call with its id in the nearest
    /// preceding assistant.
    fn is_protected(&mut self, i: usize, protection: &Protection) -> bool {
        if let Some(known) = self.protected.get(i).copied().flatten() {
            return known;
        }
        let BranchFacts {
            seen,
            args_from,
            wide_args,
            ..
        } = self;
        let Some(m) = seen.get(i) else {
            return false;
        };
        let sk = m.skeleton();
        let id = sk.tool_call_id.as_deref().unwrap_or("");
        let path = if id.is_empty() {
            None
        } else {
            args_from
                .get(i)
                .copied()
                .flatten()
                .and_then(|a| seen.get(a))
                .and_then(|a| call_of(a, id, wide_args))
                .and_then(|c| c.path.as_deref())
        };
        let protected = protection.is_protected_call(sk.tool_name.as_deref().unwrap_or(""), path);
        if let Some(slot) = self.protected.get_mut(i) {
            *slot = Some(protected);
        }
        protected
    }

    fn measure(
        &mut self,
        branch: &[Message],
        frontier: Option<&Frontier>,
        state: &State,
        protection: &Protection,
    ) -> ContextMetrics {
        if self.protection != Some(protection.fingerprint()) {
            self.protection = Some(protection.fingerprint());
            self.protected.iter_mut().for_each(|p| *p = None);
        }
        self.sync(branch);
        let n = self.seen.len();
        let Some(walk) = self.walk.last().copied() else {
            return ContextMetrics::default();
        };
        let total = self.chars(0, n);
        let open_start = walk.last_text_only.map_or(0, |i| i + 1);
        let open_chars = self.chars(open_start, n);
        let thinking_at = |i: usize| self.thinking_before.get(i).copied().unwrap_or(0);
        let thinking_chars = thinking_at(n).saturating_sub(thinking_at(open_start));
        let share = rounded_pct(walk.largest_chain.max(open_chars), total);
        ContextMetrics {
            open_cycle_thinking_tokens: tokens(thinking_chars),
            largest_chain_share_pct: share,
            frontier_gap_tokens: self.frontier_gap(frontier, state, protection),
        }
    }

    /// See [`compute_context_metrics`](crate::compute_context_metrics): the
    /// tool results after the boundary (the frontier's turn, counted over
    /// every assistant from 0), less the boundary turn's calls through the
    /// frontier's, the summarized and the protected.
    fn frontier_gap(
        &mut self,
        frontier: Option<&Frontier>,
        state: &State,
        protection: &Protection,
    ) -> u64 {
        let n = self.seen.len();
        let boundary = frontier.and_then(|f| {
            let turn = usize::try_from(f.last_attempted_turn_index).ok()?;
            let index = *self.assistants.get(turn)?;
            let calls = &self.seen.get(index)?.skeleton().tool_calls;
            let k = calls
                .iter()
                .position(|c| c.id == f.last_attempted_tool_call_id)?;
            let turn_end = self.assistants.get(turn + 1).copied().unwrap_or(n);
            let excluded: FxHashSet<String> = calls[..=k].iter().map(|c| c.id.clone()).collect();
            Some((index, turn_end, excluded))
        });
        let scan_start = boundary.as_ref().map_or(0, |(index, _, _)| index + 1);
        let mut gap = 0;
        for i in scan_start..n {
            let Some(m) = self.seen.get(i) else { break };
            if !m.is(&Role::ToolResult) {
                continue;
            }
            let id = m.skeleton().tool_call_id.as_deref().unwrap_or("");
            if let Some((_, turn_end, excluded)) = &boundary {
                if i < *turn_end && excluded.contains(id) {
                    continue;
                }
            }
            if state.is_summarized(id, m.timestamp()) {
                continue;
            }
            if self.is_protected(i, protection) {
                continue;
            }
            gap += tokens(self.chars(i, i + 1));
        }
        gap
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::MetricsMemo;
    use crate::config::Config;
    use crate::message::Message;
    use crate::metrics::rescan_context_metrics;
    use crate::protect::Protection;
    use crate::records::{Frontier, ToolCallRecord};
    use crate::state::State;

    /// One message of a small vocabulary, so ids collide and chains nest,
    /// interrupt and close in every order.
    pub(crate) fn message(kind: u8, n: u8, ts: i64) -> Message {
        let id = format!("c{}", n % 4);
        let name = ["bash", "read", "todo"][usize::from(n % 3)];
        let thinking = json!({"type": "thinking", "thinking": "x".repeat(usize::from(n) * 7),
            "thinkingSignature": "s"});
        let v: Value = match kind % 8 {
            0 => json!({"role": "user", "content": "go", "timestamp": ts}),
            1 => json!({"role": "user", "content": "again"}),
            2 => json!({"role": "user", "content": [{"type": "text",
                "text": "<compressed-chain id=\"b1\">"}], "timestamp": ts}),
            // An assistant of more calls than `args_of` scans, `c0` twice
            // (its first call's path, src/9.rs, is not protected; the
            // second's is).
            3 if n == 8 => {
                let mut content = vec![thinking];
                for k in 0..40u8 {
                    let (id, path) = match k {
                        0 => ("c0".to_owned(), "src/9.rs".to_owned()),
                        1..=3 => (format!("c{k}"), format!("src/{k}.rs")),
                        4 => ("c0".to_owned(), "src/1.rs".to_owned()),
                        _ => (format!("w{k}"), format!("src/{k}.rs")),
                    };
                    content.push(json!({"type": "toolCall", "id": id, "name": name,
                        "arguments": {"path": path}}));
                }
                json!({"role": "assistant", "timestamp": ts, "content": content})
            }
            3 => json!({"role": "assistant", "timestamp": ts, "content": [thinking,
                {"type": "toolCall", "id": id, "name": name,
                 "arguments": {"path": format!("src/{n}.rs")}},
                {"type": "toolCall", "id": format!("d{n}"), "name": "bash", "arguments": {}}]}),
            4 => json!({"role": "assistant", "timestamp": ts,
                "content": [thinking, {"type": "text", "text": "done"}]}),
            5 | 6 => {
                json!({"role": "toolResult", "toolCallId": if kind % 8 == 5 { id } else { format!("d{n}") },
                "toolName": name, "content": [{"type": "text", "text": "o".repeat(usize::from(n) * 13)}],
                "isError": false, "timestamp": ts})
            }
            _ => json!({"role": "custom", "customType": "note", "content": "n", "timestamp": ts}),
        };
        Message::from_value(&v).expect("a message")
    }

    #[derive(Debug, Clone)]
    enum Step {
        /// Appends messages.
        Append(Vec<(u8, u8)>),
        /// Drops the messages from this share of the branch on.
        Truncate(u8),
        /// Replaces one message by an equal copy (another identity).
        Copy(u8),
        /// Measures with this frontier, these outputs summarized and
        /// these rules.
        Measure {
            frontier: Option<(i64, u8)>,
            summarized: Vec<u8>,
            protect_read: bool,
        },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => proptest::collection::vec((0u8..8, 0u8..9), 1..12).prop_map(Step::Append),
            1 => (0u8..=100).prop_map(Step::Truncate),
            1 => (0u8..=100).prop_map(Step::Copy),
            3 => (
                proptest::option::of((-1i64..8, 0u8..9)),
                proptest::collection::vec(0u8..40, 0..6),
                proptest::bool::ANY,
            )
                .prop_map(|(frontier, summarized, protect_read)| Step::Measure {
                    frontier,
                    summarized,
                    protect_read,
                }),
        ]
    }

    fn at(share: u8, len: usize) -> usize {
        len * usize::from(share) / 100
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Measured on a branch that grows, is cut back and has messages
        /// replaced between measurements, the memo gives exactly what a
        /// rescan of the whole branch gives, under any frontier, summaries
        /// and protection rules.
        #[test]
        fn the_memo_agrees_with_a_rescan(steps in proptest::collection::vec(step(), 1..24)) {
            let mut branch: Vec<Message> = Vec::new();
            let mut state = State::new();
            let metrics_memo = MetricsMemo::default();
            let mut ts = 1i64;
            for s in steps {
                match s {
                    Step::Append(ms) => {
                        for (kind, n) in ms {
                            ts += 1;
                            branch.push(message(kind, n, ts));
                        }
                    }
                    Step::Truncate(share) => branch.truncate(at(share, branch.len())),
                    Step::Copy(share) => {
                        let i = at(share, branch.len());
                        if let Some(m) = branch.get(i) {
                            let copy = Message::from_value(
                                &serde_json::from_str::<Value>(&m.json()).expect("json"),
                            )
                            .expect("a message");
                            branch[i] = copy;
                        }
                    }
                    Step::Measure { frontier, summarized, protect_read } => {
                        // Summaries accumulate, as flushes add them.
                        for k in summarized {
                            let Some(m) = branch.get(usize::from(k)) else { continue };
                            let Some(id) = m.skeleton().tool_call_id.clone() else { continue };
                            let record: ToolCallRecord = serde_json::from_value(json!({
                                "toolCallId": id, "toolName": "bash", "args": {},
                                "resultText": "x", "isError": false, "turnIndex": 0,
                                "timestamp": m.timestamp(), "resultTimestamp": m.timestamp()
                            }))
                            .expect("a record");
                            state.add_record(record, false);
                        }
                        let frontier: Option<Frontier> = frontier.map(|(turn, n)| {
                            serde_json::from_value(json!({
                                "lastAttemptedToolCallId": format!("c{}", n % 4),
                                "lastAttemptedTurnIndex": turn,
                            }))
                            .expect("a frontier")
                        });
                        let config = Config {
                            protected_tools: vec!["todo".to_owned()],
                            protected_paths: if protect_read {
                                ["src/1.rs", "src/2.rs", "src/3.rs"].map(str::to_owned).to_vec()
                            } else {
                                Vec::new()
                            },
                            ..Config::default()
                        };
                        let (protection, _) = Protection::compile(&config);
                        let memo = metrics_memo.measure(
                            &branch, frontier.as_ref(), &state, &protection);
                        let rescan = rescan_context_metrics(
                            &branch, frontier.as_ref(), &state, &protection);
                        prop_assert_eq!(memo, rescan);
                    }
                }
            }
        }
    }

    /// A result whose latest call was cut away reads its arguments from the
    /// call before it again (here a protected path), not from whatever took
    /// the cut call's place.
    #[test]
    fn a_cut_call_no_longer_gives_arguments() {
        let config = Config {
            protected_paths: ["src/1.rs", "src/2.rs", "src/3.rs"]
                .map(str::to_owned)
                .to_vec(),
            ..Config::default()
        };
        let (protection, _) = Protection::compile(&config);
        let state = State::new();
        let metrics_memo = MetricsMemo::default();
        let mut branch = vec![
            message(0, 0, 1),
            message(3, 1, 2),
            message(5, 1, 3),
            message(3, 9, 4),
            message(5, 9, 5),
        ];
        let measure = |branch: &[Message]| {
            let memo = metrics_memo.measure(branch, None, &state, &protection);
            assert_eq!(
                memo,
                rescan_context_metrics(branch, None, &state, &protection)
            );
            memo
        };
        assert!(measure(&branch).frontier_gap_tokens > 0);
        branch.truncate(3);
        let before = measure(&branch).frontier_gap_tokens;
        branch.push(message(5, 1, 6));
        assert_eq!(measure(&branch).frontier_gap_tokens, before);
    }
}
