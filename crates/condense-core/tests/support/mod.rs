//! A session generator shared by the property tests and the render bench.
//!
//! [`Branch`] builds a pi branch message by message, in pi's own JSON shapes
//! (compact, keys in pi's order), and keeps beside it the facts a test needs
//! to state properties without re-parsing: each message's kind and
//! timestamp, the tool calls of assistants, the id, tool, arguments and text
//! of tool results, and the closed chains (user → tool turns → text-only
//! assistant). The state helpers index results, allocate short refs, register
//! summary bodies and write chain entries the way a flush and the chain
//! compressor would.
//!
//! [`workload_tool_turns`] and [`workload_chains`] are the two 1M-token
//! workloads of the render bench (docs/benchmarks.md).

#![allow(dead_code)]

use condense_core::Message;
use condense_core::OccurrenceKey;
use condense_core::State;
use condense_core::{ChainEntry, SummaryRef, ToolCallRecord};
use serde_json::{json, Map, Value};

/// The first timestamp of a generated branch (ms).
pub const T0: i64 = 1_767_225_600_000;

/// A `toolCall` block.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The provider's id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments.
    pub args: Value,
}

/// What a generated message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `user`
    User,
    /// `assistant`
    Assistant,
    /// `toolResult`
    ToolResult,
    /// `custom` with `customType: "context-prune-summary"`
    Summary,
    /// `custom` of another extension
    Custom,
    /// `bashExecution`
    Bash,
    /// `compactionSummary`
    Compaction,
    /// `branchSummary`
    BranchSummary,
    /// a role condense does not know
    Unknown,
}

/// The facts about one generated message.
#[derive(Debug, Clone)]
pub struct Meta {
    /// The kind.
    pub kind: Kind,
    /// The message's timestamp.
    pub ts: i64,
    /// Assistant: its tool calls.
    pub calls: Vec<Call>,
    /// Assistant: whether it has a thinking block.
    pub thinking: bool,
    /// Tool result: `toolCallId`.
    pub call_id: String,
    /// Tool result: `toolName`.
    pub tool_name: String,
    /// Tool result: the arguments of the call with its id in the nearest
    /// preceding assistant (`{}` when there is none).
    pub args: Value,
    /// Tool result: its text blocks joined by `\n`.
    pub text: String,
    /// Tool result: `isError`.
    pub is_error: bool,
    /// Assistant messages before this one.
    pub turn: i64,
    /// Timestamp of the nearest preceding assistant (the batch timestamp).
    pub batch_ts: i64,
}

impl Meta {
    fn new(kind: Kind, ts: i64, turn: i64, batch_ts: i64) -> Self {
        Meta {
            kind,
            ts,
            calls: Vec::new(),
            thinking: false,
            call_id: String::new(),
            tool_name: String::new(),
            args: json!({}),
            text: String::new(),
            is_error: false,
            turn,
            batch_ts,
        }
    }

    /// The occurrence key of a tool result.
    pub fn key(&self) -> OccurrenceKey {
        OccurrenceKey::new(self.call_id.clone(), Some(self.ts))
    }
}

/// A branch under construction.
#[derive(Debug, Clone)]
pub struct Branch {
    /// The messages' JSON values.
    pub values: Vec<Value>,
    /// The facts about each message.
    pub meta: Vec<Meta>,
    /// Closed chains: (index of the start user message, index of the final
    /// text-only assistant), in order.
    pub chains: Vec<(usize, usize)>,
    ts: i64,
    chain_start: Option<usize>,
    tool_turns: usize,
    last_calls: Vec<Call>,
    assistants: i64,
    batch_ts: i64,
}

impl Default for Branch {
    fn default() -> Self {
        Self::new()
    }
}

impl Branch {
    /// An empty branch.
    pub fn new() -> Self {
        Branch {
            values: Vec::new(),
            meta: Vec::new(),
            chains: Vec::new(),
            ts: T0,
            chain_start: None,
            tool_turns: 0,
            last_calls: Vec::new(),
            assistants: 0,
            batch_ts: T0,
        }
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when no message was added.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The timestamp the next message will get (strictly increasing, so
    /// every message's timestamp is unique).
    fn next_ts(&mut self) -> i64 {
        // Uneven steps, deterministic.
        self.ts += 1 + (self.values.len() as i64 * 7919) % 997;
        self.ts
    }

    /// A timestamp later than every message so far (for `compressedAt`).
    pub fn later_ts(&mut self) -> i64 {
        self.ts += 13;
        self.ts
    }

    fn push(&mut self, value: Value, meta: Meta) -> usize {
        self.values.push(value);
        self.meta.push(meta);
        self.values.len() - 1
    }

    fn plain(&mut self, kind: Kind) -> Meta {
        let ts = self.next_ts();
        Meta::new(kind, ts, self.assistants, self.batch_ts)
    }

    /// A user prompt. Starts a new chain candidate.
    pub fn user(&mut self, text: &str) -> usize {
        let meta = self.plain(Kind::User);
        let v = json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": meta.ts});
        self.last_calls.clear();
        let i = self.push(v, meta);
        self.chain_start = Some(i);
        self.tool_turns = 0;
        i
    }

    /// An assistant message. With no calls it is text-only and closes the
    /// open chain (if it had at least one tool turn).
    pub fn assistant(
        &mut self,
        thinking: Option<&str>,
        text: Option<&str>,
        calls: Vec<Call>,
    ) -> usize {
        let mut meta = self.plain(Kind::Assistant);
        let mut content = Vec::new();
        if let Some(t) = thinking {
            content.push(
                json!({"type": "thinking", "thinking": t, "thinkingSignature": "c2lnbmF0dXJl"}),
            );
            meta.thinking = true;
        }
        if let Some(t) = text {
            content.push(json!({"type": "text", "text": t}));
        }
        for c in &calls {
            content
                .push(json!({"type": "toolCall", "id": c.id, "name": c.name, "arguments": c.args}));
        }
        let text_only = calls.is_empty();
        let v = json!({
            "role": "assistant",
            "content": content,
            "api": "openai-completions",
            "provider": "fake",
            "model": "fake-model",
            "usage": {"input": 1200, "output": 80, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1280,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": if text_only { "stop" } else { "toolUse" },
            "timestamp": meta.ts,
        });
        meta.calls = calls.clone();
        self.assistants += 1;
        self.batch_ts = meta.ts;
        self.last_calls = calls;
        let i = self.push(v, meta);
        if text_only {
            if let (Some(start), true) = (self.chain_start, self.tool_turns > 0) {
                self.chains.push((start, i));
            }
            self.chain_start = None;
        } else {
            self.tool_turns += 1;
        }
        i
    }

    /// A tool result. `texts` become its text blocks.
    pub fn tool_result(&mut self, id: &str, name: &str, texts: &[&str], is_error: bool) -> usize {
        let mut meta = self.plain(Kind::ToolResult);
        meta.call_id = id.to_owned();
        meta.tool_name = name.to_owned();
        meta.args = self
            .last_calls
            .iter()
            .find(|c| c.id == id)
            .map_or_else(|| json!({}), |c| c.args.clone());
        meta.text = texts.join("\n");
        meta.is_error = is_error;
        let content: Vec<Value> = texts
            .iter()
            .map(|t| json!({"type": "text", "text": t}))
            .collect();
        let v = json!({
            "role": "toolResult",
            "toolCallId": id,
            "toolName": name,
            "content": content,
            "details": {"exitCode": if is_error { 1 } else { 0 }},
            "isError": is_error,
            "timestamp": meta.ts,
        });
        self.push(v, meta)
    }

    /// A per-batch summary message carrying `refs`.
    pub fn summary_message(
        &mut self,
        refs: &[SummaryRef],
        tool_names: &[String],
        text: &str,
    ) -> usize {
        let meta = self.plain(Kind::Summary);
        let refs: Vec<Value> = refs
            .iter()
            .map(|r| serde_json::to_value(r).expect("ref serializes"))
            .collect();
        let v = json!({
            "role": "custom",
            "customType": "context-prune-summary",
            "content": text,
            "display": false,
            "details": {"toolCallRefs": refs, "toolNames": tool_names, "turnIndex": meta.turn, "timestamp": meta.ts},
            "timestamp": meta.ts,
        });
        self.push(v, meta)
    }

    /// A custom message of another extension.
    pub fn custom(&mut self, text: &str) -> usize {
        let meta = self.plain(Kind::Custom);
        let v = json!({"role": "custom", "customType": "other-extension", "content": [{"type": "text", "text": text}],
                       "display": true, "details": {"k": 1}, "timestamp": meta.ts});
        self.push(v, meta)
    }

    /// A `!command` the user ran.
    pub fn bash(&mut self, command: &str, output: &str) -> usize {
        let meta = self.plain(Kind::Bash);
        let v = json!({"role": "bashExecution", "command": command, "output": output, "exitCode": 0,
                       "cancelled": false, "truncated": false, "timestamp": meta.ts});
        self.push(v, meta)
    }

    /// A compaction summary.
    pub fn compaction(&mut self, summary: &str) -> usize {
        let meta = self.plain(Kind::Compaction);
        let v = json!({"role": "compactionSummary", "summary": summary, "tokensBefore": 123_456, "timestamp": meta.ts});
        self.push(v, meta)
    }

    /// A branch summary.
    pub fn branch_summary(&mut self, summary: &str) -> usize {
        let meta = self.plain(Kind::BranchSummary);
        let v = json!({"role": "branchSummary", "summary": summary, "fromId": "ab12cd34", "timestamp": meta.ts});
        self.push(v, meta)
    }

    /// A message with a role condense does not know.
    pub fn unknown(&mut self, text: &str) -> usize {
        let meta = self.plain(Kind::Unknown);
        let v = json!({"role": "hologram", "content": [{"type": "sparkle", "text": text}], "timestamp": meta.ts});
        self.push(v, meta)
    }

    /// The branch as messages (compact JSON, as pi serializes).
    pub fn messages(&self) -> Vec<Message> {
        self.values
            .iter()
            .map(|v| Message::from_value(v).expect("generated messages are objects"))
            .collect()
    }

    /// Indices of tool results in `range`.
    pub fn results_in(&self, range: std::ops::Range<usize>) -> Vec<usize> {
        range
            .filter(|&i| self.meta[i].kind == Kind::ToolResult)
            .collect()
    }
}

// ---- state ------------------------------------------------------------------

/// The record a flush writes for a tool result (`legacy`: no result
/// timestamp, as pi-condense < 2.6 wrote).
pub fn record(meta: &Meta, legacy: bool, turn_index: i64) -> ToolCallRecord {
    ToolCallRecord {
        tool_call_id: meta.call_id.clone(),
        tool_name: meta.tool_name.clone(),
        args: meta.args.clone(),
        result_text: meta.text.clone().into(),
        is_error: meta.is_error,
        turn_index,
        timestamp: meta.batch_ts,
        result_timestamp: (!legacy).then_some(meta.ts),
        spill_path: None,
        spill_bytes: None,
        result_preview: None,
        content_hash: None,
        extra: Map::new(),
    }
}

/// The record of an eagerly spilled result: no inline text, a sidecar path.
pub fn spilled_record(meta: &Meta, turn_index: i64) -> ToolCallRecord {
    let mut r = record(meta, false, turn_index);
    r.spill_bytes = Some(meta.text.len() as u64);
    r.result_preview = Some(meta.text.chars().take(40).collect());
    r.spill_path = Some(format!(
        "/tmp/session-blobs/{}-{}.txt",
        meta.call_id, meta.ts
    ));
    r.result_text = Default::default();
    r
}

/// Indexes the results at `idxs` as one summarized batch: records, `t<N>`
/// refs and the summary body. Returns the refs (for the summary message).
pub fn index_batch(
    state: &mut State,
    branch: &Branch,
    idxs: &[usize],
    legacy: bool,
    summary: &str,
) -> Vec<SummaryRef> {
    let mut keys = Vec::with_capacity(idxs.len());
    for &i in idxs {
        let m = &branch.meta[i];
        keys.push(state.add_record(record(m, legacy, m.turn), true));
    }
    let refs = state.allocate_short_refs(&keys);
    state.register_summary_refs(&refs);
    let footer: Vec<String> = refs.iter().map(|r| format!("`{}`", r.short_id)).collect();
    state.register_summary_body(keys, format!("{summary}\n\nRefs: {}", footer.join(", ")));
    refs
}

/// What the chain compressor writes for the range `start..=end`, after
/// backfilling every unindexed, unprotected result in it (turn index -1).
/// `protected(meta)` says whether a result is protected; every protected
/// result in the range is listed in `protectedToolCallIds`.
pub fn compress_chain(
    state: &mut State,
    branch: &Branch,
    (start, end): (usize, usize),
    block_id: String,
    compressed_at: i64,
    range_summary: Option<String>,
    protected: impl Fn(&Meta) -> bool,
) -> ChainEntry {
    let results = branch.results_in(start + 1..end);
    let mut dropped_ids: Vec<String> = Vec::new();
    for i in start + 1..end {
        for c in &branch.meta[i].calls {
            if !dropped_ids.contains(&c.id) {
                dropped_ids.push(c.id.clone());
            }
        }
    }
    let mut keys = Vec::new();
    let mut protected_ids: Vec<String> = Vec::new();
    let mut tool_refs = Vec::new();
    for &i in &results {
        let m = &branch.meta[i];
        if !dropped_ids.contains(&m.call_id) {
            dropped_ids.push(m.call_id.clone());
        }
        keys.push(m.key().to_string());
        if protected(m) {
            if !protected_ids.contains(&m.call_id) {
                protected_ids.push(m.call_id.clone());
            }
            continue;
        }
        if !state.is_summarized(&m.call_id, Some(m.ts)) && !state.has_legacy_bare_record(&m.call_id)
        {
            state.add_record(record(m, false, -1), false);
        }
        let r = state
            .short_ref(&m.call_id, Some(m.ts))
            .map_or_else(|| m.call_id.clone(), str::to_owned);
        tool_refs.push(r);
    }
    ChainEntry {
        block_id,
        start_user_timestamp: branch.meta[start].ts,
        dropped_tool_call_ids: dropped_ids,
        final_assistant_timestamp: Some(branch.meta[end].ts),
        tool_refs,
        compressed_at,
        range_summary_text: range_summary,
        dropped_occurrence_keys: Some(keys),
        protected_tool_call_ids: (!protected_ids.is_empty()).then_some(protected_ids),
        body_source: None,
        extra: Map::new(),
    }
}

// ---- bench workloads ----------------------------------------------------------

/// 400 characters of thinking.
pub fn thinking_text(n: usize) -> String {
    let mut s = format!("Turn {n}: the listing shows the module layout; next I read the tests and check the build. ");
    while s.len() < 400 {
        s.push_str("Check the error paths, then the config loader, then the render pipeline. ");
    }
    s.truncate(400);
    s
}

/// A 3,600-character bash output.
pub fn bash_output(n: usize) -> String {
    let mut s = String::with_capacity(3700);
    let mut line = 0usize;
    while s.len() < 3600 {
        s.push_str(&format!(
            "-rw-r--r-- 1 dev dev {:>6} Jan 12 10:{:02} src/module_{n}/file_{line:03}.rs\n",
            (n * 131 + line * 17) % 100_000,
            line % 60
        ));
        line += 1;
    }
    s.truncate(3600);
    s
}

/// A per-batch summary body for `refs`.
fn batch_summary(refs: &[SummaryRef]) -> String {
    let mut s = String::new();
    for r in refs {
        s.push_str(&format!(
            "- [[{}:bash]] listed src/ — 60 files, module layout unchanged, no build artifacts.\n",
            r.short_id
        ));
    }
    s
}

fn bash_turn(b: &mut Branch, n: usize) -> usize {
    let id = format!("call_{n:05}");
    b.assistant(
        Some(&thinking_text(n)),
        None,
        vec![Call {
            id: id.clone(),
            name: "bash".into(),
            args: json!({"command": format!("ls -la src/module_{n}")}),
        }],
    );
    b.tool_result(&id, "bash", &[&bash_output(n)], false)
}

/// Workload (a): one user prompt, then `turns` tool turns (400 chars of
/// thinking and one bash call each, a 3,600-char result). All but the last
/// `verbatim` results are summarized in batches of 10: records, `t<N>` refs, a
/// summary body, and the per-batch summary message after each batch.
/// Render the messages with `Branch::new()` for a no-op render.
pub fn workload_tool_turns(turns: usize, verbatim: usize) -> (Vec<Message>, condense_core::Branch) {
    let mut b = Branch::new();
    let mut state = State::new();
    b.user("Explore the repository and report on every module.");
    let mut batch: Vec<usize> = Vec::new();
    for n in 0..turns {
        let r = bash_turn(&mut b, n);
        if n < turns.saturating_sub(verbatim) {
            batch.push(r);
            if batch.len() == 10 {
                let refs = index_batch(&mut state, &b, &batch, false, "");
                let summary = batch_summary(&refs);
                b.summary_message(&refs, &["bash".to_owned()], &summary);
                batch.clear();
            }
        }
    }
    (b.messages(), state.into())
}

/// Workload (b): `prompts` user prompts, each followed by `turns` tool turns
/// and a final text reply. Every result is summarized (one batch per chain,
/// its summary message after the reply, as agent-message flushes write it)
/// and every closed chain but the last `open_chains` is compressed with a
/// range summary.
pub fn workload_chains(
    prompts: usize,
    turns: usize,
    open_chains: usize,
) -> (Vec<Message>, condense_core::Branch) {
    let mut b = Branch::new();
    let mut state = State::new();
    let mut n = 0usize;
    for p in 0..prompts {
        b.user(&format!(
            "Step {p}: inspect the next module and summarize it."
        ));
        let mut batch = Vec::new();
        for _ in 0..turns {
            batch.push(bash_turn(&mut b, n));
            n += 1;
        }
        b.assistant(
            Some(&thinking_text(n)),
            Some(&format!("Module {p} inspected: layout unchanged.")),
            vec![],
        );
        let refs = index_batch(&mut state, &b, &batch, false, "");
        let summary = batch_summary(&refs);
        b.summary_message(&refs, &["bash".to_owned()], &summary);
    }
    let closed = b.chains.clone();
    let compress = closed.len().saturating_sub(open_chains);
    for &range in &closed[..compress] {
        let block = state.allocate_block_id();
        let at = b.later_ts();
        let body = format!(
            "Inspected one module with {turns} listings; layout unchanged, no build artifacts, nothing to fix."
        );
        let entry = compress_chain(&mut state, &b, range, block, at, Some(body), |_| false);
        state.register_chain(entry);
    }
    (b.messages(), state.into())
}

/// `JSON.stringify(messages).length` computed from the texts.
pub fn array_utf16_len(messages: &[Message]) -> usize {
    let mut s = String::from("[");
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&m.json());
    }
    s.push(']');
    s.encode_utf16().count()
}
