//! The writer: turns the script into pi session entries (ids, parent
//! chain, clock, usage) and, for a pruned session, runs condense's flush
//! pipeline where a live pi-condense would, appending what it writes.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use condense_core::compute_context_metrics;
use condense_core::Branch;
use condense_core::Message;
use condense_core::OccurrenceKey;
use condense_core::Protection;
use condense_core::TriggerKind;
use condense_core::{
    capture_branch, capture_turn, group_by_mode, trim_to_pending, without_protected,
};
use condense_core::{FlushEffect, JobResult, WrittenSpill};
use serde::Serialize;
use serde_json::{json, Map, Value};

use condense_engine::flush::spill_batch;
use condense_engine::{Blobs, ChainPolicy, Flush};
use condense_store::append::{
    custom_entry_line, custom_message_entry_line, message_entry_line, EntryBase,
};
use condense_store::effects::{entry_for, NewEntry};
use condense_store::entries::CUSTOM_TYPE_FLUSH_METRICS;
use condense_store::spill::{blob_dir, sanitize_file_stem};
use condense_store::time::format_iso;

use crate::options::*;
use crate::rng::*;
use crate::script::*;
use crate::stand_in::*;

/// pi's system prompt and tool declarations, in tokens (for `usage`).
pub(crate) const SYSTEM_TOKENS: u64 = 2600;
pub(crate) const PROVIDER: &str = "anthropic";
pub(crate) const MODEL: &str = "claude-sonnet-4-5";
pub(crate) const API: &str = "anthropic-messages";
pub(crate) const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

pub(crate) struct Writer<'a> {
    opts: &'a SynthOptions,
    rng: SplitMix64,
    pub(crate) out: String,
    ids: HashSet<u32>,
    leaf: Option<String>,
    clock: i64,
    /// The branch's context messages and their entries' timestamps.
    pub(crate) messages: Vec<Message>,
    entry_ts: Vec<Option<i64>>,
    pub(crate) state: Branch,
    protection: Protection,
    blob_root: PathBuf,
    pub(crate) blobs: Vec<Blob>,
    pub(crate) stats: SynthStats,
    /// pi's estimate of the context so far (tokens), for `usage`.
    context_tokens: u64,
    last_request_tokens: u64,
    /// Assistant turns since the last user prompt (pi's `turnIndex`).
    run_turn: i64,
    /// Draws the idle gaps ([`SynthOptions::idle_gaps_percent`]).
    gaps: SplitMix64,
    /// Draws the cache misses ([`SynthOptions::miss_rates`]).
    misses: SplitMix64,
    /// When the previous LLM call started.
    last_call_ms: Option<i64>,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(opts: &'a SynthOptions, session_file: Option<&Path>) -> Self {
        let mut rng = SplitMix64::new(opts.seed ^ 0x1d8e_4e27_c47d_124f);
        let gaps = SplitMix64::new(opts.seed ^ 0x5a17_e0c3_9b2d_6f41);
        let misses = SplitMix64::new(opts.seed ^ 0x2c6b_91f5_07ad_e833);
        // Some time in the first half of 2026, to the millisecond.
        let clock = 1_767_225_600_000 + rng.below(180 * 86_400_000) as i64;
        let session_id = uuid_v7(&mut rng, clock);
        let blob_root = match session_file {
            Some(path) => blob_dir(path, &session_id),
            None => PathBuf::from(format!(
                "/home/dev/.pi/agent/sessions/--home-dev-project--/{session_id}-blobs"
            )),
        };
        let mut w = Writer {
            opts,
            rng,
            out: String::new(),
            ids: HashSet::new(),
            leaf: None,
            clock,
            messages: Vec::new(),
            entry_ts: Vec::new(),
            state: Branch::new(),
            protection: Protection::new(&opts.config),
            blob_root,
            blobs: Vec::new(),
            stats: SynthStats::default(),
            context_tokens: SYSTEM_TOKENS,
            last_request_tokens: 0,
            run_turn: 0,
            gaps,
            misses,
            last_call_ms: None,
        };
        let header = json!({
            "type": "session",
            "version": 3,
            "id": session_id,
            "timestamp": format_iso(clock),
            "cwd": "/home/dev/project",
        });
        w.out
            .push_str(&condense_store::json::to_string(&header).expect("header serializes"));
        w.out.push('\n');
        w.tick(300, 900);
        w.line(|base| {
            line_with(
                base,
                "model_change",
                &[("provider", json!(PROVIDER)), ("modelId", json!(MODEL))],
            )
        });
        w.line(|base| {
            line_with(
                base,
                "thinking_level_change",
                &[("thinkingLevel", json!("medium"))],
            )
        });
        w
    }

    pub(crate) fn session_id(&self) -> String {
        self.blob_root
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix("-blobs"))
            .unwrap_or_default()
            .to_owned()
    }

    fn tick(&mut self, lo: u64, hi: u64) -> i64 {
        self.clock += self.rng.range(lo, hi) as i64;
        self.clock
    }

    fn new_id(&mut self) -> String {
        loop {
            let v = self.rng.next_u64() as u32;
            if self.ids.insert(v) {
                return format!("{v:08x}");
            }
        }
    }

    /// Appends one entry line, stamped with the clock; returns the timestamp.
    fn line(&mut self, build: impl FnOnce(&EntryBase<'_>) -> serde_json::Result<String>) -> i64 {
        let id = self.new_id();
        let ts = self.clock;
        let iso = format_iso(ts);
        let line = build(&EntryBase {
            id: &id,
            parent_id: self.leaf.as_deref(),
            timestamp: &iso,
        })
        .expect("generated entries serialize");
        self.out.push_str(&line);
        self.out.push('\n');
        self.leaf = Some(id);
        self.stats.entries += 1;
        ts
    }

    /// Appends a `message` entry and adds the message to the branch.
    fn message(&mut self, message: Message) {
        let ts = self.line(|base| message_entry_line(&message, base));
        self.messages.push(message);
        self.entry_ts.push(Some(ts));
        self.stats.messages += 1;
    }

    /// The usage of a call starting now.
    fn usage(&mut self, output_tokens: u64) -> Value {
        let context = self.context_tokens;
        let mut cache_read = self.last_request_tokens.min(context);
        if let (Some(rates), Some(previous)) = (&self.opts.miss_rates, self.last_call_ms) {
            let chance = rates.at(self.clock - previous);
            if (self.misses.below(1_000_000) as f64) < chance * 1e6 {
                cache_read = 0;
            }
        }
        self.last_call_ms = Some(self.clock);
        let cache_write = context - cache_read;
        let input = self.rng.range(1, 12);
        self.last_request_tokens = context;
        let (i, o, r, w) = (
            input as f64 * 3.0 / 1e6,
            output_tokens as f64 * 15.0 / 1e6,
            cache_read as f64 * 0.3 / 1e6,
            cache_write as f64 * 3.75 / 1e6,
        );
        json!({
            "input": input,
            "output": output_tokens,
            "cacheRead": cache_read,
            "cacheWrite": cache_write,
            "totalTokens": input + output_tokens + cache_read + cache_write,
            "cost": {"input": i, "output": o, "cacheRead": r, "cacheWrite": w, "total": i + o + r + w},
        })
    }

    fn signature(&mut self) -> String {
        (0..96)
            .map(|_| BASE62[self.rng.below(62) as usize] as char)
            .collect::<String>()
            + "=="
    }

    fn tool_call_id(&mut self) -> String {
        let tail: String = (0..22)
            .map(|_| BASE62[self.rng.below(62) as usize] as char)
            .collect();
        format!("toolu_01{tail}")
    }

    fn assistant(
        &mut self,
        thinking: Option<&str>,
        text: Option<&str>,
        calls: &[(String, &CallSpec)],
    ) -> Message {
        let mut content = Vec::new();
        let mut chars = 0;
        if let Some(t) = thinking {
            let sig = self.signature();
            content.push(json!({"type": "thinking", "thinking": t, "thinkingSignature": sig}));
            chars += t.len();
        }
        if let Some(t) = text {
            content.push(json!({"type": "text", "text": t}));
            chars += t.len();
        }
        for (id, c) in calls {
            content
                .push(json!({"type": "toolCall", "id": id, "name": c.name, "arguments": c.args}));
            chars += c.name.len() + c.args.to_string().len();
        }
        let output_tokens = (chars / 4) as u64 + 8;
        // The request starts now; the message is stamped at its start and
        // persisted once streamed.
        let started = self.tick(200, 1500);
        let usage = self.usage(output_tokens);
        let value = json!({
            "role": "assistant",
            "content": content,
            "api": API,
            "provider": PROVIDER,
            "model": MODEL,
            "usage": usage,
            "stopReason": if calls.is_empty() { "stop" } else { "toolUse" },
            "timestamp": started,
        });
        self.clock += 400 + (output_tokens as i64) * 12;
        self.context_tokens += output_tokens;
        to_message(&value)
    }

    fn tool_result(&mut self, id: &str, call: &CallSpec) -> Message {
        self.clock += call.ms as i64;
        let value = json!({
            "role": "toolResult",
            "toolCallId": id,
            "toolName": call.name,
            "content": [{"type": "text", "text": call.result}],
            "isError": call.is_error,
            "timestamp": self.clock,
        });
        self.context_tokens += (call.result.len() / 4) as u64;
        let m = to_message(&value);
        self.tick(1, 3);
        m
    }

    /// An idle gap, `percent` of the time (per thousand when `rare`).
    fn idle_gap(&mut self, lo_ms: u64, hi_ms: u64, rare: bool) {
        let share = self.opts.idle_gaps_percent.min(100);
        if share == 0 {
            return;
        }
        let hit = if rare {
            self.gaps.below(1000) < share
        } else {
            self.gaps.below(100) < share
        };
        if hit {
            self.clock += self.gaps.range(lo_ms, hi_ms) as i64;
        }
    }

    pub(crate) fn user(&mut self, text: &str) {
        if self.stats.prompts > 0 {
            self.idle_gap(6 * 60_000, 90 * 60_000, false);
        }
        self.tick(5_000, 120_000);
        let value = json!({
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "timestamp": self.clock,
        });
        self.context_tokens += (text.len() / 4) as u64;
        let m = to_message(&value);
        self.tick(1, 3);
        self.message(m);
        self.stats.prompts += 1;
        self.run_turn = 0;
    }

    pub(crate) fn tool_turn(
        &mut self,
        thinking: Option<&str>,
        text: Option<&str>,
        calls: &[CallSpec],
    ) {
        let ids: Vec<(String, &CallSpec)> =
            calls.iter().map(|c| (self.tool_call_id(), c)).collect();
        let assistant = self.assistant(thinking, text, &ids);
        self.message(assistant.clone());
        // Inside a run, pi calls the model again as soon as a turn's tools
        // return, so the time a run idles is the tools' (a long build or
        // test suite): between the call and its results.
        self.idle_gap(330_000, 20 * 60_000, true);
        let mut results = Vec::with_capacity(ids.len());
        for (id, call) in &ids {
            let r = self.tool_result(id, call);
            self.message(r.clone());
            results.push(r);
        }
        self.stats.tool_turns += 1;
        self.stats.tool_calls += ids.len();
        if self.opts.pruned {
            self.eager_spill(&assistant, &results);
        }
        self.run_turn += 1;
    }

    /// `turn_end`: oversized outputs go to blobs and the index at once.
    fn eager_spill(&mut self, assistant: &Message, results: &[Message]) {
        let threshold = self.opts.config.spill_threshold as usize;
        // Cheap pre-check (UTF-16 length <= byte length): skip the capture
        // when no result can reach the threshold.
        if results.iter().all(|r| r.size() < threshold) {
            return;
        }
        let now = self.tick(1, 5);
        let batch = without_protected(
            capture_turn(assistant, results, self.run_turn, now),
            &self.protection,
        );
        let mut blobs = MemoryBlobs {
            root: &self.blob_root,
            blobs: &mut self.blobs,
            spilled: &mut self.stats.spilled,
        };
        let spilled = spill_batch(batch, &mut self.state, &self.opts.config, &mut blobs);
        self.effects(&spilled.effects);
    }

    /// Appends the entries of core's effects, as pi-condense would.
    fn effects(&mut self, effects: &[FlushEffect]) {
        for effect in effects {
            match effect {
                FlushEffect::Summary { .. } => self.stats.summaries += 1,
                FlushEffect::Chain(_) => self.stats.chains += 1,
                FlushEffect::DedupAlias { .. } => self.stats.dedup_aliases += 1,
                _ => {}
            }
            self.tick(0, 1);
            match entry_for(effect) {
                NewEntry::Custom { custom_type, data } => {
                    self.line(|base| custom_entry_line(custom_type, &data, base));
                }
                NewEntry::CustomMessage {
                    custom_type,
                    content,
                    display,
                    details,
                } => {
                    let ts = self.line(|base| {
                        custom_message_entry_line(custom_type, &content, display, &details, base)
                    });
                    // The message pi builds from the entry (see `context`).
                    let json = format!(
                        r#"{{"role":"custom","customType":{},"content":{},"display":{display},"details":{},"timestamp":{ts}}}"#,
                        to_json(&custom_type),
                        to_json(&content),
                        to_json(&details),
                    );
                    let m = Message::from_json(&json).expect("custom message JSON is valid");
                    self.messages.push(m);
                    self.entry_ts.push(Some(ts));
                }
            }
        }
    }

    /// One flush through the engine's driver (stand-in summaries, blobs in
    /// memory), with chain compression after it, and its metrics entry.
    pub(crate) fn flush(&mut self, trigger: TriggerKind, closing: Option<&Message>) {
        let opts = self.opts;
        let config = &opts.config;
        let metrics = compute_context_metrics(
            &self.messages,
            0,
            self.state.frontier(),
            &self.state,
            &self.protection,
        );
        let now = self.tick(2, 20);
        let frontier = self.state.frontier().cloned();
        let batches: Vec<_> = capture_branch(
            &self.messages,
            &self.entry_ts,
            &self.state,
            &self.protection,
            now,
        )
        .into_iter()
        .filter_map(|b| trim_to_pending(b, &self.state, frontier.as_ref()))
        .collect();
        let batches = group_by_mode(batches, config.batching_mode);
        let chains = if config.chain_compression.enabled {
            ChainPolicy::AfterBatches(config.chain_compression.rolling_window)
        } else {
            ChainPolicy::Never
        };
        let flush = Flush::plan(
            batches,
            &self.state,
            config,
            chains,
            Some(trigger),
            metrics,
            closing.cloned(),
        );
        let results: Vec<JobResult> = flush.jobs().iter().map(stand_in_summary).collect();
        // The summarizer calls take a while.
        for _ in &results {
            self.tick(700, 3000);
        }
        let summarized = flush.apply(results, &mut self.state, config);
        // The summaries join the branch before chains are planned, as in pi.
        self.effects(summarized.effects());
        let chains = summarized.plan_chains(&self.messages, &self.state, config, &self.protection);
        let fusion: Vec<JobResult> = chains.fusion_jobs().iter().map(stand_in_fusion).collect();
        for _ in &fusion {
            self.tick(800, 2500);
        }
        let now = self.clock;
        let mut blobs = MemoryBlobs {
            root: &self.blob_root,
            blobs: &mut self.blobs,
            spilled: &mut self.stats.spilled,
        };
        let mut report = chains.apply(fusion, &mut blobs, &mut self.state, config, now);
        self.effects(&report.chain_effects);
        self.stats.flushes += 1;
        report.ended = self.tick(0, 2);
        if let Some(data) = report.metrics_entry() {
            self.line(|base| custom_entry_line(CUSTOM_TYPE_FLUSH_METRICS, &data, base));
        }
    }

    pub(crate) fn reply(&mut self, thinking: Option<&str>, text: &str) {
        let reply = self.assistant(thinking, Some(text), &[]);
        if self.opts.pruned && self.opts.config.prune_on == condense_core::PruneOn::AgentMessage {
            // `message_end` runs before pi persists the reply.
            self.flush(TriggerKind::MessageEnd, Some(&reply));
        }
        self.message(reply);
    }
}

/// Spilled outputs kept in memory (written out with the session, if at all).
pub(crate) struct MemoryBlobs<'a> {
    root: &'a Path,
    blobs: &'a mut Vec<Blob>,
    spilled: &'a mut usize,
}

impl Blobs for MemoryBlobs<'_> {
    fn write(
        &mut self,
        key: &OccurrenceKey,
        text: &str,
        call: usize,
    ) -> Result<WrittenSpill, String> {
        let file_name = format!("{}.txt", sanitize_file_stem(&key.id));
        let spill = WrittenSpill {
            call,
            path: self.root.join(&file_name).to_string_lossy().into_owned(),
            bytes: text.len() as u64,
        };
        self.blobs.push(Blob {
            file_name,
            text: text.to_owned(),
        });
        *self.spilled += 1;
        Ok(spill)
    }
}

pub(crate) fn to_json<T: Serialize + ?Sized>(v: &T) -> String {
    condense_store::json::to_string(v).expect("generated values serialize")
}

pub(crate) fn to_message(value: &Value) -> Message {
    Message::from_json(&to_json(value)).expect("generated messages are objects")
}

/// `{"type":kind,"id","parentId","timestamp",…fields}`.
pub(crate) fn line_with(
    base: &EntryBase<'_>,
    kind: &str,
    fields: &[(&str, Value)],
) -> serde_json::Result<String> {
    let mut m = Map::new();
    m.insert("type".into(), json!(kind));
    m.insert("id".into(), json!(base.id));
    m.insert("parentId".into(), json!(base.parent_id));
    m.insert("timestamp".into(), json!(base.timestamp));
    for (k, v) in fields {
        m.insert((*k).to_owned(), v.clone());
    }
    condense_store::json::to_string(&m)
}

/// A UUIDv7-shaped id: the millisecond clock, then random bits.
pub(crate) fn uuid_v7(rng: &mut SplitMix64, ms: i64) -> String {
    let hi = ms as u64 & 0xffff_ffff_ffff;
    let a = rng.next_u64();
    let b = rng.next_u64();
    format!(
        "{:08x}-{:04x}-7{:03x}-{:04x}-{:012x}",
        hi >> 16,
        hi & 0xffff,
        a & 0xfff,
        0x8000 | ((a >> 12) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}
