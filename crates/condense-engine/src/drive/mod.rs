//! Driving an [`Engine`] through a recorded session as the live pi sidecar
//! would: what `condense simulate` and the tests built on it run.
//!
//! A [`Driver`] is fed the session's entries in order, in slices that end
//! before each LLM call (an assistant message), and asked for the prompt
//! of that call. From the entries it makes the calls the sidecar makes at
//! pi's events, in pi's order: an assistant message is `message_end` (a
//! flush in `agent-message` mode when it is the final reply), its tool
//! results close the turn at `turn_end` (the budget gates, against the
//! context window the caller names, and a flush when a trigger fired),
//! and a turn without tool results ends the agent run (`agent_end`); a
//! `compaction` entry is pi's `session_compact`, sent after the run it
//! follows is closed, with the list pi rebuilt.
//! Before each call, [`Driver::context`] is the sidecar's `context`: the
//! messages pi sends, synced incrementally, with the call's time and model
//! (so the cache-aware policy decides with the recorded clock). Flushes go
//! through [`crate::host`] and [`crate::run_flush`], with the summarizer
//! the caller gives; nothing here re-implements a trigger or the driver.
//!
//! The entries a live run would have written are kept ([`Driver::written`])
//! with where they went, so a caller can rebuild the session file and
//! reload it, or start the engine again from it mid-run
//! ([`Driver::restart`], as a host does after a crash or a resume). Every tool output a prompt left out is remembered, and
//! [`Driver::unrecoverable`] asks as `context_tree_query` does (the index,
//! then the branch the session file holds) whether each can still be read
//! back whole.

mod checks;
mod metered;
mod restart;
mod written;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use condense_core::{chars_to_tokens, FxHashMap, Message, ModelRef, PlanStep, Role, SwitchReason};
use condense_store::misses::ProviderMisses;
use condense_store::session::Entry;
use condense_summarizer::{Provider, Summarizer, SummarizerSettings, Target};
use serde_json::Value;

use crate::host::{self, TurnEnd};
use crate::protocol::Effect;
use crate::session::{EngineLock, StartParams};
use crate::switch::CallFacts;
use crate::Engine;

use metered::Metered;
pub use metered::{SummarizerTokens, TextTokens};
use written::{branch_lines, parse_branch};
pub use written::{branch_with_written, Written};

/// How a [`Driver`] is set up.
pub struct DriverOptions {
    /// The settings.json value (its `contextPrune` block is the config).
    pub settings: Value,
    /// The summarizer's provider (e.g. the extractive one).
    pub summarizer: Arc<dyn Provider>,
    /// How the summarizer's texts are counted.
    pub tokens: TextTokens,
    /// Where spilled outputs go (a blob directory is made below it);
    /// `None` keeps them inline.
    pub session_dir: Option<PathBuf>,
    /// The other sessions' cache misses, by provider, to plan with; kept in
    /// memory ([`Engine::plan_with_miss_prior`]). `None`: as a host, from
    /// the session directory's history.
    pub miss_prior: Option<ProviderMisses>,
}

/// The turn in progress: an assistant message and its tool results.
struct Turn {
    message: Message,
    results: Vec<Message>,
    /// The call's tokens as the harness would report them (prompt and
    /// output), when the caller said.
    usage: Option<u64>,
}

/// One recorded session played through the engine (see the module docs).
pub struct Driver {
    engine: Mutex<Engine>,
    summarizer: Arc<dyn Provider>,
    settings: SummarizerSettings,
    runtime: tokio::runtime::Runtime,
    input: Arc<AtomicU64>,
    output: Arc<AtomicU64>,
    session_dir: Option<PathBuf>,
    blob_dir: Option<PathBuf>,
    turn: Option<Turn>,
    turn_index: i64,
    /// The recorded entries fed so far, as their lines.
    fed: Vec<String>,
    /// Where each entry fed is in `fed`, by id.
    fed_at: FxHashMap<String, usize>,
    now: i64,
    context_window: u64,
    written: Vec<Written>,
    flushes: u64,
    switches: u64,
    /// Tool outputs some prompt left out, by tool-call id, as recorded
    /// (looked up for every output each call leaves out: a fast hash).
    removed: FxHashMap<String, Message>,
    /// Messages pi's context holds from the recorded entries fed so far.
    recorded_messages: usize,
    /// The messages written entries add to pi's list, each after that many
    /// recorded context messages: those pi's agent takes at once
    /// (`Delivery::Runtime`), and after a compaction every one after the
    /// kept point (pi rebuilds its list from the file). The engine shows
    /// the others itself.
    inserted: Vec<(usize, Message)>,
    /// The engine asked the host to compact at the last `agent_end`.
    compaction_asked: bool,
}

/// The session's id (it names the blob directory).
const SESSION_ID: &str = "simulated";

/// The tool-call id of a tool result.
fn tool_call_id(m: &Message) -> Option<&str> {
    m.skeleton().tool_call_id.as_deref()
}

/// Whether a turn ended its agent run: a reply without tool calls, or
/// tool calls that got no results (aborted, failed).
fn ends_run(turn: &Turn) -> bool {
    turn.message.is_text_only_assistant() || turn.results.is_empty()
}

impl Driver {
    /// A driver whose engine has just seen `session_start` of an empty
    /// session with `options.settings`.
    pub fn new(options: DriverOptions) -> Result<Driver, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| format!("starting the async runtime: {e}"))?;
        let input = Arc::new(AtomicU64::new(0));
        let output = Arc::new(AtomicU64::new(0));
        let summarizer: Arc<dyn Provider> = Arc::new(Metered {
            inner: options.summarizer,
            tokens: options.tokens,
            input: input.clone(),
            output: output.clone(),
        });
        let session_id = SESSION_ID.to_owned();
        let blob_dir = options
            .session_dir
            .as_ref()
            .map(|d| condense_store::spill::blob_dir_in(d, &session_id));
        let mut engine = Engine::default();
        // pi compacts when asked; the caller carries it out (`end_run`).
        engine.set_compacts_on_request(true);
        if let Some(prior) = options.miss_prior {
            engine.plan_with_miss_prior(prior);
        }
        engine.start(StartParams {
            settings: options.settings,
            session_id,
            session_dir: options.session_dir.clone(),
            misses_dir: None,
            session_file: None,
            branch: String::new(),
            tree: false,
        });
        let settings = SummarizerSettings::from_config(engine.config());
        Ok(Driver {
            engine: Mutex::new(engine),
            summarizer,
            settings,
            runtime,
            input,
            output,
            session_dir: options.session_dir,
            blob_dir,
            turn: None,
            turn_index: 0,
            fed: Vec::new(),
            fed_at: FxHashMap::default(),
            now: 0,
            context_window: 0,
            written: Vec::new(),
            flushes: 0,
            switches: 0,
            removed: FxHashMap::default(),
            recorded_messages: 0,
            inserted: Vec::new(),
            compaction_asked: false,
        })
    }

    fn summarizer(&self) -> Summarizer {
        Summarizer::new(
            Target::new(
                self.summarizer.clone(),
                ModelRef::new("simulated", "summarizer"),
            ),
            self.settings,
        )
    }

    /// Keeps the appends among `effects`, counting flushes and switches.
    fn keep(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match &effect {
                Effect::Append {
                    custom_type, data, ..
                } => {
                    // The start switch changes nothing the model sees.
                    if custom_type == condense_store::entries::CUSTOM_TYPE_SWITCH {
                        self.switches += u64::from(data["reason"] != SwitchReason::Start.as_str());
                    } else if custom_type == condense_store::entries::CUSTOM_TYPE_FLUSH_METRICS {
                        self.flushes += 1;
                    }
                }
                Effect::AppendMessage { .. } => {}
                _ => continue,
            }
            let written = Written {
                after: self.fed.len(),
                at: self.now,
                effect,
            };
            if let Some(m) = written.context_message().filter(|_| written.in_pi_list()) {
                self.inserted.push((self.recorded_messages, m));
            }
            self.written.push(written);
        }
    }

    /// `turn_end` of the turn in progress, and `agent_end` when it was the
    /// run's last.
    fn close_turn(&mut self) {
        let Some(turn) = self.turn.take() else {
            return;
        };
        let tokens = turn.usage.map(|u| {
            u + turn
                .results
                .iter()
                .map(|r| chars_to_tokens(r.size()))
                .sum::<u64>()
        });
        let now = turn
            .results
            .last()
            .and_then(Message::timestamp)
            .unwrap_or(self.now);
        self.now = self.now.max(now);
        let clock = self.now;
        let window = self.context_window;
        let effects = self.runtime.block_on(host::turn_end(
            &self.engine,
            TurnEnd {
                turn_index: self.turn_index,
                message: &turn.message,
                results: &turn.results,
                tokens,
                context_window: window,
                now: clock,
            },
            || self.summarizer(),
            &move || clock,
        ));
        self.keep(effects);
        self.turn_index += 1;
        if ends_run(&turn) {
            let effects = self.engine.engine().agent_end();
            self.compaction_asked = effects.iter().any(|e| matches!(e, Effect::Compact));
            self.keep(effects);
            self.turn_index = 0;
        }
    }

    /// Feeds recorded entries, in order, up to (not including) the next
    /// call's assistant message. `usage` is the tokens (prompt and output)
    /// of the call whose assistant message is among them, as the harness
    /// would report it to the budget gates; `context_window` is the
    /// model's.
    pub fn feed(&mut self, entries: &[&Entry], usage: Option<u64>, context_window: u64) {
        self.feed_entries(entries, usage, context_window, true);
    }

    /// Feeds the entries that end an agent run, through its last message,
    /// and ends it (`turn_end`, `agent_end`) as pi does before its own
    /// compaction check. Returns whether the engine asked pi to compact
    /// then ([`Effect::Compact`]): pi compacts at once, and the caller
    /// feeds that `compaction` entry next.
    pub fn end_run(&mut self, entries: &[&Entry], usage: Option<u64>, context_window: u64) -> bool {
        self.feed_entries(entries, usage, context_window, true);
        self.compaction_asked = false;
        self.close_turn();
        std::mem::take(&mut self.compaction_asked)
    }

    /// [`Driver::feed`]; a user prompt starts a run (pi's
    /// `before_agent_start`) only when `runs_start`.
    fn feed_entries(
        &mut self,
        entries: &[&Entry],
        usage: Option<u64>,
        context_window: u64,
        runs_start: bool,
    ) {
        self.context_window = context_window;
        for entry in entries {
            if entry.kind == condense_store::session::EntryType::Compaction {
                // pi compacts after the run's `agent_end`, or before a call
                // whose `context` closed the turn already; then rebuilds its
                // list and emits `session_compact` with it.
                self.end_turn(runs_start);
                self.keep_line(entry);
                let kept = self.kept_from(entry);
                let list = self.rebuild_pi_list(kept);
                self.compacted(list);
                continue;
            }
            let adds = {
                condense_store::context::build_context(&[*entry])
                    .messages
                    .len()
            };
            let is_assistant = entry
                .message
                .as_ref()
                .is_some_and(|m| m.is(&Role::Assistant));
            if runs_start && entry.message.as_ref().is_some_and(|m| m.is(&Role::User)) {
                // pi's `before_agent_start` comes before the prompt is
                // persisted: what a flush there adds precedes it. It runs
                // when the prompt is submitted, after the user's pause.
                self.close_turn();
                let clock = entry
                    .message
                    .as_ref()
                    .and_then(|m| m.timestamp())
                    .map_or(self.now, |ts| self.now.max(ts));
                // What the flush appends carries that time in the file too,
                // as in the engine's context.
                self.now = clock;
                let effects = self.runtime.block_on(host::agent_start(
                    &self.engine,
                    || self.summarizer(),
                    &move || clock,
                ));
                self.keep(effects);
            }
            if !is_assistant {
                self.recorded_messages += adds;
            }
            let Some(message) = entry.message.as_ref() else {
                self.keep_line(entry);
                continue;
            };
            if let Some(ts) = message.timestamp() {
                self.now = self.now.max(ts);
            }
            if message.is(&Role::ToolResult) && self.turn.is_some() {
                self.keep_line(entry);
                if let Some(turn) = self.turn.as_mut() {
                    turn.results.push(message.clone());
                }
                continue;
            }
            self.end_turn(runs_start);
            if !message.is(&Role::Assistant) {
                self.keep_line(entry);
            } else {
                // pi persists the reply after `message_end`: what a flush
                // there appends comes before it, in the file and in the
                // context.
                let clock = self.now;
                let effects = self.runtime.block_on(host::message_end(
                    &self.engine,
                    message.clone(),
                    || self.summarizer(),
                    &move || clock,
                ));
                self.keep(effects);
                self.recorded_messages += adds;
                self.keep_line(entry);
                self.turn = Some(Turn {
                    message: message.clone(),
                    results: Vec::new(),
                    usage,
                });
            }
        }
    }

    /// The sidecar's `context` before a call: `messages` are what pi hands
    /// the event (synced with the engine's copy from the first that
    /// differs), `call` the call's time and model. Returns the prompt the
    /// model is sent. The turn fed last is closed first (pi ends a turn
    /// before the next call's `context`).
    pub fn context(&mut self, messages: &[Message], call: &CallFacts) -> Vec<Message> {
        self.close_turn();
        let with_summaries;
        let messages = if self.inserted.is_empty() {
            messages
        } else {
            with_summaries = self.with_inserted(messages);
            &with_summaries[..]
        };
        if let Some(ms) = call.now_ms {
            self.now = self.now.max(ms);
        }
        let (steps, effects) = {
            let mut engine = self.engine.engine();
            let keep = engine
                .host_messages()
                .zip(messages)
                .take_while(|(a, b)| a == b)
                .count();
            let append = messages.get(keep..).unwrap_or_default().to_vec();
            engine.context_at(keep, append, call)
        };
        self.keep(effects);
        let Some(steps) = steps else {
            return messages.to_vec();
        };
        let mut prompt = Vec::with_capacity(messages.len());
        let mut shown = 0usize;
        for step in steps {
            match step {
                PlanStep::Keep(range) => {
                    self.note_removed(messages.get(shown..range.start).unwrap_or_default());
                    shown = shown.max(range.end);
                    prompt.extend_from_slice(messages.get(range).unwrap_or_default());
                }
                PlanStep::New(m) => prompt.push(m),
            }
        }
        self.note_removed(messages.get(shown..).unwrap_or_default());
        prompt
    }

    /// pi's `session_compact`, the sidecar's `session.compact`: `list` is
    /// pi's rebuilt list, synced with the engine's copy from the first
    /// message that differs.
    fn compacted(&mut self, list: Vec<Message>) {
        let keep = self
            .engine
            .engine()
            .host_messages()
            .zip(&list)
            .take_while(|(a, b)| a == b)
            .count();
        let append = list.get(keep..).unwrap_or_default().to_vec();
        let clock = self.now;
        let effects = self.runtime.block_on(host::compacted(
            &self.engine,
            keep,
            append,
            clock,
            || self.summarizer(),
            &move || clock,
        ));
        self.keep(effects);
    }

    /// Keeps a recorded entry's line.
    fn keep_line(&mut self, entry: &Entry) {
        self.fed_at.insert(entry.id.clone(), self.fed.len());
        self.fed.push(entry.raw().to_owned());
    }

    /// Where in `fed` the list pi rebuilds at `compaction` starts: its
    /// first kept entry (nothing before it is in the list), or the start
    /// when that entry is not a recorded one.
    fn kept_from(&self, compaction: &Entry) -> usize {
        serde_json::from_str::<serde_json::Value>(compaction.raw())
            .ok()
            .and_then(|v| v.get("firstKeptEntryId")?.as_str().map(str::to_owned))
            .and_then(|id| self.fed_at.get(&id).copied())
            .unwrap_or(0)
    }

    /// After a compaction pi rebuilds its list from the session file: the
    /// messages the run's entries added after the kept point are in it,
    /// wherever they were delivered. Returns that list. Only the entries
    /// from `from` (the first kept) on are read, so a replay stays linear
    /// in the compactions it meets.
    fn rebuild_pi_list(&mut self, from: usize) -> Vec<Message> {
        let (lines, written_ids) = branch_lines(&self.fed, &self.written, from);
        let session = parse_branch(&crate::jsonl(lines));
        let branch: Vec<&Entry> = session.entries.iter().collect();
        let ctx = condense_store::context::build_context(&branch);
        self.inserted.clear();
        let mut recorded = 0;
        // Each message kept is detached from the parsed branch's buffer (the
        // whole session so far, parsed again at every compaction), so that
        // buffer is freed rather than held once per compaction.
        for (message, id) in ctx.messages.iter().zip(&ctx.entry_ids) {
            if written_ids.contains(id) {
                self.inserted.push((recorded, message.detached()));
            } else {
                recorded += 1;
            }
        }
        self.recorded_messages = recorded;
        // The recorded messages as the caller's contexts hold them: the
        // relinked lines above were re-serialized (`9e-6` for `0.000009`),
        // and the engine's copy must match what the next `context` sends.
        let fed = parse_branch(&crate::jsonl(&self.fed[from..]));
        let fed: Vec<&Entry> = fed.entries.iter().collect();
        let recorded: Vec<Message> = condense_store::context::build_context(&fed)
            .messages
            .iter()
            .map(Message::detached)
            .collect();
        self.with_inserted(&recorded)
    }

    /// `messages` (the recorded entries' context) with the messages pi's
    /// list holds from the run's own entries, in their places.
    fn with_inserted(&self, messages: &[Message]) -> Vec<Message> {
        let mut out = Vec::with_capacity(messages.len() + self.inserted.len());
        let mut next = self.inserted.iter().peekable();
        for (n, m) in messages.iter().enumerate() {
            while let Some((_, summary)) = next.next_if(|(before, _)| *before <= n) {
                out.push(summary.clone());
            }
            out.push(m.clone());
        }
        out.extend(next.map(|(_, summary)| summary.clone()));
        out
    }

    fn note_removed(&mut self, left_out: &[Message]) {
        for m in left_out.iter().filter(|m| m.is(&Role::ToolResult)) {
            // Nearly every output left out was left out by earlier calls
            // too: looked up before an id is copied.
            match tool_call_id(m) {
                Some(id) if !self.removed.contains_key(id) => {
                    self.removed.insert(id.to_owned(), m.clone());
                }
                _ => {}
            }
        }
    }

    /// Feeds the entries after the last call and, when that call's turn
    /// ended its run, ends it (`turn_end`, `agent_end`).
    ///
    /// A recording that stops inside a run (tool results the model was
    /// never sent, or a prompt no call answered) was cut off: pi calls the
    /// model as soon as the tools return or the prompt is submitted, so
    /// the recording ends while that call is in flight (a session still
    /// running) or because pi was stopped. What the run's next events
    /// would trigger (a turn-end or run-start flush) is work for that
    /// call, and pays, if at all, only there: it is left out with the
    /// call, for every policy, so a session is priced up to its last call.
    pub fn finish(&mut self, entries: &[&Entry], usage: Option<u64>) {
        let window = self.context_window;
        self.feed_entries(entries, usage, window, false);
        self.end_turn(false);
    }

    /// Ends the turn in progress; inside the entries after the last call
    /// (not `runs_start`) only when it ended its run ([`Driver::finish`]).
    fn end_turn(&mut self, runs_start: bool) {
        if runs_start || self.turn.as_ref().is_some_and(ends_run) {
            self.close_turn();
        }
    }

    /// The summarizer's tokens so far.
    pub fn summarizer_tokens(&self) -> SummarizerTokens {
        SummarizerTokens {
            input: self.input.load(Ordering::Relaxed),
            output: self.output.load(Ordering::Relaxed),
        }
    }

    /// Tool outputs some prompt left out.
    pub fn removed_outputs(&self) -> usize {
        self.removed.len()
    }

    /// Flushes that ran (each wrote its metrics entry).
    pub fn flushes(&self) -> u64 {
        self.flushes
    }

    /// Switches the cache-aware policy made.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// The entries the live run would have appended, in order.
    pub fn written(&self) -> &[Written] {
        &self.written
    }

    /// The engine, for inspection.
    pub fn engine(&self) -> std::sync::MutexGuard<'_, Engine> {
        self.engine.engine()
    }
}
