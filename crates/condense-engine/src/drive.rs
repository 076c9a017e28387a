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
//! and a turn without tool results ends the agent run (`agent_end`).
//! Before each call, [`Driver::context`] is the sidecar's `context`: the
//! messages pi sends, synced incrementally, with the call's time and model
//! (so the cache-aware policy decides with the recorded clock). Flushes go
//! through [`crate::host`] and [`crate::run_flush`], with the summarizer
//! the caller gives; nothing here re-implements a trigger or the driver.
//!
//! The entries a live run would have written are kept ([`Driver::written`])
//! with where they went, so a caller can rebuild the session file and
//! reload it. Every tool output a prompt left out is remembered, and
//! [`Driver::unrecoverable`] asks the index, as `context_tree_query` does,
//! whether each can still be read back whole.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use condense_core::{chars_to_tokens, Message, ModelRef, PlanStep, QueryOptions, Role, Usage};
use condense_store::session::Entry;
use condense_summarizer::{
    Completion, CompletionRequest, EventSink, Provider, ProviderError, Summarizer,
    SummarizerSettings, Target,
};
use serde_json::{json, Value};

use crate::host::{self, TurnEnd};
use crate::protocol::{Delivery, Effect};
use crate::session::{EngineLock, StartParams};
use crate::switch::CallFacts;
use crate::Engine;

/// Counts the tokens of a text (the summarizer's prompts and answers).
pub type TextTokens = Arc<dyn Fn(&str) -> u64 + Send + Sync>;

/// The summarizer's work so far, in tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SummarizerTokens {
    /// Prompt tokens sent (system and user text).
    pub input: u64,
    /// Tokens answered.
    pub output: u64,
}

/// A provider that counts what passes through it.
struct Metered {
    inner: Arc<dyn Provider>,
    tokens: TextTokens,
    input: Arc<AtomicU64>,
    output: Arc<AtomicU64>,
}

#[async_trait]
impl Provider for Metered {
    async fn complete(
        &self,
        request: CompletionRequest,
        events: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let input = (self.tokens)(request.system.as_deref().unwrap_or_default())
            + (self.tokens)(&request.user);
        self.input.fetch_add(input, Ordering::Relaxed);
        let mut done = self.inner.complete(request, events).await?;
        let output = (self.tokens)(&done.text);
        self.output.fetch_add(output, Ordering::Relaxed);
        done.usage = Usage {
            input_tokens: input,
            output_tokens: output,
            cost: done.usage.cost,
        };
        Ok(done)
    }
}

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
}

/// An entry the live run would have appended.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// How many of the recorded entries fed so far came before it.
    pub after: usize,
    /// The session's clock when it was appended (ms).
    pub at: i64,
    /// The append effect.
    pub effect: Effect,
}

impl Written {
    /// The entry as a session file line's fields (no id, parent or time).
    fn entry(&self) -> Option<Value> {
        match &self.effect {
            Effect::Append {
                custom_type, data, ..
            } => Some(json!({"type": "custom", "customType": custom_type, "data": data})),
            Effect::AppendMessage {
                custom_type,
                content,
                display,
                details,
                ..
            } => Some(json!({"type": "custom_message", "customType": custom_type,
                "content": content, "display": display, "details": details})),
            _ => None,
        }
    }
}

impl Written {
    /// The message this entry adds to pi's context, if any (a summary),
    /// as pi's `buildSessionContext` makes it.
    fn context_message(&self) -> Option<Message> {
        self.effect.context_message(self.at)
    }

    /// Whether pi's running agent holds the message this entry adds as
    /// soon as it is appended (`pi.sendMessage`); one written straight to
    /// the session file reaches pi's list only when pi rebuilds it.
    fn in_pi_list(&self) -> bool {
        matches!(
            self.effect,
            Effect::AppendMessage {
                delivery: Delivery::Runtime,
                ..
            }
        )
    }
}

/// The branch a live run would have left: the recorded entries' lines with the
/// written ones in their places, relinked parent to child, as the lines of
/// a session file without its header (what [`StartParams::branch`] takes).
pub fn branch_with_written(recorded: &[String], written: &[Written]) -> String {
    crate::jsonl(branch_lines(recorded, written).0)
}

/// [`branch_with_written`]'s lines, and the ids given to the written
/// entries.
fn branch_lines(recorded: &[String], written: &[Written]) -> (Vec<String>, HashSet<String>) {
    fn push(lines: &mut Vec<String>, mut v: Value, parent: &mut Value) {
        v["parentId"] = parent.clone();
        *parent = v["id"].clone();
        lines.push(v.to_string());
    }
    let mut ids = HashSet::new();
    let mut push_written = |lines: &mut Vec<String>, w: &Written, parent: &mut Value| {
        if let Some(mut v) = w.entry() {
            let id = format!("sim{:05}", lines.len());
            v["id"] = json!(id);
            v["timestamp"] = json!(condense_store::time::format_iso(w.at));
            push(lines, v, parent);
            ids.insert(id);
        }
    };
    let mut lines = Vec::with_capacity(recorded.len() + written.len());
    let mut parent = Value::Null;
    let mut next = written.iter().peekable();
    for (n, line) in recorded.iter().enumerate() {
        while let Some(w) = next.next_if(|w| w.after <= n) {
            push_written(&mut lines, w, &mut parent);
        }
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            push(&mut lines, v, &mut parent);
        }
    }
    for w in next {
        push_written(&mut lines, w, &mut parent);
    }
    (lines, ids)
}

/// A session's entries (lines without the header), parsed.
fn parse_branch(text: &str) -> condense_store::session::Session {
    let header = r#"{"type":"session","version":3,"id":"simulated","timestamp":"","cwd":""}"#;
    condense_store::session::Session::parse(&format!("{header}\n{text}"))
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
    blob_dir: Option<PathBuf>,
    turn: Option<Turn>,
    turn_index: i64,
    /// The recorded entries fed so far, as their lines.
    fed: Vec<String>,
    now: i64,
    context_window: u64,
    written: Vec<Written>,
    flushes: u64,
    switches: u64,
    /// Tool outputs some prompt left out, by tool-call id, as recorded.
    removed: HashMap<String, Message>,
    /// Messages pi's context holds from the recorded entries fed so far.
    recorded_messages: usize,
    /// The messages written entries add to pi's list, each after that many
    /// recorded context messages: those pi's agent takes at once
    /// (`Delivery::Runtime`), and after a compaction every one after the
    /// kept point (pi rebuilds its list from the file). The engine shows
    /// the others itself.
    inserted: Vec<(usize, Message)>,
    /// Entries fed before the last `context` call: pi rebuilds its list at
    /// a compaction fed after it only for a call that never came.
    fed_at_context: usize,
}

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
        let session_id = "simulated".to_owned();
        let blob_dir = options
            .session_dir
            .as_ref()
            .map(|d| condense_store::spill::blob_dir_in(d, &session_id));
        let mut engine = Engine::default();
        engine.start(StartParams {
            settings: options.settings,
            session_id,
            session_dir: options.session_dir,
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
            blob_dir,
            turn: None,
            turn_index: 0,
            fed: Vec::new(),
            now: 0,
            context_window: 0,
            written: Vec::new(),
            flushes: 0,
            switches: 0,
            removed: HashMap::new(),
            recorded_messages: 0,
            inserted: Vec::new(),
            fed_at_context: 0,
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
                Effect::Append { custom_type, .. } => {
                    if custom_type == condense_store::entries::CUSTOM_TYPE_SWITCH {
                        self.switches += 1;
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
        self.context_window = context_window;
        for entry in entries {
            if entry.kind == condense_store::session::EntryType::Compaction {
                self.fed.push(entry.raw().to_owned());
                self.rebuild_pi_list();
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
            if entry.message.as_ref().is_some_and(|m| m.is(&Role::User)) {
                // pi's `before_agent_start` comes before the prompt is
                // persisted: what a flush there adds precedes it.
                self.close_turn();
                let clock = self.now;
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
                self.fed.push(entry.raw().to_owned());
                continue;
            };
            if let Some(ts) = message.timestamp() {
                self.now = self.now.max(ts);
            }
            if message.is(&Role::ToolResult) {
                if let Some(turn) = self.turn.as_mut() {
                    self.fed.push(entry.raw().to_owned());
                    turn.results.push(message.clone());
                    continue;
                }
            }
            self.close_turn();
            if !message.is(&Role::Assistant) {
                self.fed.push(entry.raw().to_owned());
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
                self.fed.push(entry.raw().to_owned());
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
        self.fed_at_context = self.fed.len();
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

    /// After a compaction pi rebuilds its list from the session file: the
    /// messages the run's entries added after the kept point are in it,
    /// wherever they were delivered.
    fn rebuild_pi_list(&mut self) {
        let (lines, written_ids) = branch_lines(&self.fed, &self.written);
        let session = parse_branch(&crate::jsonl(lines));
        let branch: Vec<&Entry> = session.entries.iter().collect();
        let ctx = condense_store::context::build_context(&branch);
        self.inserted.clear();
        let mut recorded = 0;
        for (message, id) in ctx.messages.into_iter().zip(&ctx.entry_ids) {
            if written_ids.contains(id) {
                self.inserted.push((recorded, message));
            } else {
                recorded += 1;
            }
        }
        self.recorded_messages = recorded;
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

    /// Feeds the entries after the last call and ends the turn in progress.
    pub fn finish(&mut self, entries: &[&Entry], usage: Option<u64>) {
        let window = self.context_window;
        self.feed(entries, usage, window);
        self.close_turn();
    }

    /// Tool outputs some prompt left out that the index cannot give back
    /// whole: each is queried as `context_tree_query` would, and its full
    /// text (spilled or inline) compared with the recorded output.
    pub fn unrecoverable(&self) -> u64 {
        let engine = self.engine.engine();
        let blob_dir = self.blob_dir.clone().unwrap_or_default();
        let mut lost = 0;
        for (id, original) in &self.removed {
            // Asked as its stub names it: the occurrence (a dedup alias
            // resolves to its original only so), not the bare id, which
            // finds an alias only on the context's messages.
            let key = original
                .timestamp()
                .map_or_else(|| id.clone(), |ts| format!("{id}@{ts}"));
            let out = condense_core::query_with(
                engine.state(),
                std::slice::from_ref(&key),
                QueryOptions {
                    page: Default::default(),
                    branch: engine.messages(),
                },
                |r| condense_store::spill::read_spill(&blob_dir, r),
            );
            let want = original.result_text();
            let whole = out.results.iter().any(|(_, record)| {
                let text = if record.spill_path.is_some() {
                    condense_store::spill::read_spill(&blob_dir, record)
                } else {
                    Some(record.result_text.to_string())
                };
                text.as_deref() == Some(want.as_str())
            }) || engine
                .messages()
                .iter()
                .any(|m| tool_call_id(m) == Some(id.as_str()) && m.result_text() == want);
            if !whole {
                lost += 1;
            }
        }
        lost
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

    /// Whether a reload of the session the live run would have left (the
    /// entries fed, with [`Driver::written`] in their places) renders what
    /// the live engine renders: the context pi rebuilds from that file
    /// (as far as the engine's copy reaches) under the replayed state, against
    /// the engine's copy under the live state.
    pub fn reload_renders_the_same(&self) -> Result<(), String> {
        let session = parse_branch(&branch_with_written(&self.fed, &self.written));
        let branch: Vec<&Entry> = session.entries.iter().collect();
        let (reloaded, _problems) = condense_store::replay::replay_branch(&branch);
        let late = self.late_compactions();
        // Without late compactions the file is the one just parsed: building
        // and parsing the whole branch again is most of this check's time.
        let rebuilt = if late.is_empty() {
            condense_store::context::build_context(&branch).messages
        } else {
            self.context_at_last_call(&late)
        };
        let engine = self.engine.engine();
        let settings = condense_core::RenderSettings {
            config: engine.config(),
            protection: engine.protection(),
        };
        let messages = engine.messages();
        let rebuilt = rebuilt.get(..messages.len()).unwrap_or(&rebuilt);
        let live = condense_core::render(messages, engine.state(), &settings).messages(messages);
        let again = condense_core::render(rebuilt, &reloaded, &settings).messages(rebuilt);
        // The rebuilt file's recorded lines were re-serialized (`9e-6` for
        // `0.000009`): messages are the same when their JSON values are.
        let same = |a: &Message, b: &Message| {
            a.json() == b.json()
                || serde_json::from_str::<Value>(a.json()).ok()
                    == serde_json::from_str::<Value>(b.json()).ok()
        };
        let differ = live.iter().zip(&again).position(|(a, b)| !same(a, b));
        if differ.is_none() && live.len() == again.len() {
            return Ok(());
        }
        let at = differ.unwrap_or(live.len().min(again.len()));
        // From a little before the first character that differs.
        let from = live
            .get(at)
            .zip(again.get(at))
            .map(|(a, b)| {
                let (a, b) = (a.json(), b.json());
                let same = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
                (0..=same.saturating_sub(40))
                    .rev()
                    .find(|&i| a.is_char_boundary(i))
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        let head = |ms: &[Message]| {
            ms.get(at)
                .and_then(|m| m.json().get(from..))
                .map(|t| t.chars().take(160).collect::<String>())
                .unwrap_or_default()
        };
        Err(format!(
            "the reload renders differently from message {at} ({} messages live, {} reloaded), from its character {from}: live {} | reloaded {}",
            live.len(),
            again.len(),
            head(&live),
            head(&again)
        ))
    }

    /// The fed entries (by index) that are compactions fed after the last
    /// call: no call saw them.
    fn late_compactions(&self) -> Vec<usize> {
        let late = |n: usize, line: &str| {
            n >= self.fed_at_context
                && serde_json::from_str::<Value>(line).is_ok_and(|v| v["type"] == "compaction")
        };
        (0..self.fed.len())
            .filter(|&n| late(n, &self.fed[n]))
            .collect()
    }

    /// The context pi would hand `context` from the file the run leaves,
    /// leaving out the `dropped` fed entries ([`Driver::late_compactions`]).
    fn context_at_last_call(&self, dropped: &[usize]) -> Vec<Message> {
        let fed: Vec<String> = (0..self.fed.len())
            .filter(|n| dropped.binary_search(n).is_err())
            .map(|n| self.fed[n].clone())
            .collect();
        let written: Vec<Written> = self
            .written
            .iter()
            .map(|w| Written {
                after: w.after - dropped.partition_point(|&d| d < w.after),
                ..w.clone()
            })
            .collect();
        let session = parse_branch(&branch_with_written(&fed, &written));
        let branch: Vec<&Entry> = session.entries.iter().collect();
        condense_store::context::build_context(&branch).messages
    }

    /// The engine, for inspection.
    pub fn engine(&self) -> std::sync::MutexGuard<'_, Engine> {
        self.engine.engine()
    }
}
