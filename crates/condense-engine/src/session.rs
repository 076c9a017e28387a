//! One session's state machine: what pi-condense's `index.ts` does on each
//! harness event, for any host, without I/O except spill blobs.
//!
//! A host feeds it events (start, `context`, turn end, message end, agent
//! end, query, settings changes) and carries out the [`Effect`]s it
//! answers. A flush goes through the driver ([`crate::flush`]): the engine
//! plans it ([`Engine::begin_flush`], [`Engine::begin_compact`]) and applies
//! each step ([`EngineFlush`] is the engine behind its lock as the
//! driver's [`FlushSteps`]); the host runs [`crate::run_flush`] with its
//! summarizer, holding no lock while the LLM runs.

use std::path::PathBuf;
use std::sync::MutexGuard;

use condense_core::Message;
use condense_core::Protection;
use condense_core::State;
use condense_core::SummarizerStats;
use condense_core::{
    capture_pending, capture_turn, trim_to_pending, without_protected, CapturedBatch,
};
use condense_core::{compute_context_metrics, ContextMetrics};
use condense_core::{flush_trigger, BudgetGate, TriggerKind};
use condense_core::{format_count, Diagnostic, DiagnosticSink};
use condense_core::{render, PlanStep, RenderSettings};
use condense_core::{Config, PruneOn};
use condense_core::{EconomyReport, RecordedUsage, SessionEconomy};
use condense_core::{FlushEffect, JobResult, Notice};
use condense_store::effects::{
    diagnostic_entry, entry_for, flush_metrics_entry, switch_entry, NewEntry,
};
use condense_store::session::Session;
use serde_json::{json, Value};

use crate::flush::{spill_batch, BlobDir, ChainPolicy, Chains, Flush, FlushReport, FlushSteps};
use crate::injected::Injected;
use crate::protocol::{Delivery, Effect, Effects, Placement};
use crate::switch::{CallFacts, CallLog};

fn notices(out: &mut Effects, notices: &[Notice]) {
    out.extend(
        notices
            .iter()
            .map(|n| Effect::notify(n.level, n.text.clone())),
    );
}

fn entries<'a>(
    out: &mut Effects,
    effects: impl IntoIterator<Item = &'a FlushEffect>,
    delivery: Delivery,
) {
    out.extend(
        effects
            .into_iter()
            .map(|e| Effect::entry(entry_for(e), delivery)),
    );
}

/// A flush's result: what the host carries out, and the report.
#[derive(Debug)]
pub struct FlushDone {
    /// Entries, notices, metrics, cost and footer, in order.
    pub effects: Effects,
    /// What the flush did.
    pub report: FlushReport,
}

/// Something that holds an [`Engine`] behind a lock.
pub trait EngineLock: Sync {
    /// The engine (never held across an `.await`).
    fn engine(&self) -> MutexGuard<'_, Engine>;
}

impl EngineLock for std::sync::Mutex<Engine> {
    fn engine(&self) -> MutexGuard<'_, Engine> {
        // A panic elsewhere must not take the session down with it: the
        // engine's state is consistent between steps, so a poisoned lock
        // is taken over.
        self.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The engine behind its lock, as the flush driver's steps, delivering
/// entries with `delivery`.
pub struct EngineFlush<'a, L: EngineLock + ?Sized> {
    /// The engine's lock.
    pub lock: &'a L,
    /// How the flush's entries are delivered.
    pub delivery: Delivery,
}

impl<L: EngineLock + ?Sized> FlushSteps for EngineFlush<'_, L> {
    type Done = FlushDone;

    fn apply_summaries(&self, flush: Flush, results: Vec<JobResult>) -> Chains {
        self.lock.engine().finish_summaries(flush, results)
    }

    fn apply_chains(&self, chains: Chains, fusion: Vec<JobResult>, now: i64) -> FlushDone {
        self.lock
            .engine()
            .finish_chains(chains, fusion, self.delivery, now)
    }

    fn abandon(&self) {
        self.lock.engine().abandon_flush();
    }
}

/// Where a flush a reply asked for under the cache-aware policy stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum ReplyFlush {
    /// None asked.
    #[default]
    None,
    /// Asked by this run's reply; its own last `turn_end` is not the next
    /// run's.
    ThisRun,
    /// For the next run: at its start, or its first turn's end when the host
    /// sends no start.
    NextRun,
}

/// One session's condense state. Mutated only through its methods: a
/// config change goes through [`Engine::set_config`], the one place
/// protection is recompiled.
#[derive(Debug)]
pub struct Engine {
    settings: Value,
    config: Config,
    protection: Protection,
    /// The context: the host's list with [`Engine::injected`]'s messages.
    messages: Vec<Message>,
    /// The summaries the engine's flushes wrote that the host's list does
    /// not hold yet (see [`crate::injected`]).
    injected: Injected,
    entry_ts: Vec<Option<i64>>,
    /// The branch's assistant messages before `messages` (see
    /// [`crate::turns`]).
    turns_before: i64,
    state: State,
    pending: Vec<CapturedBatch>,
    rearmed: bool,
    /// Under the cache-aware policy, a flush a reply asked for: it runs when
    /// the next agent run starts, so a session that ends there never pays
    /// for summaries no call would see.
    reply_flush: ReplyFlush,
    flushing: bool,
    budget: BudgetGate,
    diagnostics: DiagnosticSink,
    blob_dir: Option<PathBuf>,
    /// The session file ([`StartParams::session_file`]).
    session_file: Option<PathBuf>,
    cost_baseline: SummarizerStats,
    reclaim: Option<(usize, usize)>,
    metrics: ContextMetrics,
    last_status: Option<String>,
    calls: CallLog,
    economy: SessionEconomy,
}

impl Default for Engine {
    fn default() -> Self {
        let config = Config::default();
        Engine {
            settings: Value::Null,
            protection: Protection::new(&config),
            config,
            messages: Vec::new(),
            injected: Injected::default(),
            entry_ts: Vec::new(),
            turns_before: 0,
            state: State::new(),
            pending: Vec::new(),
            rearmed: false,
            reply_flush: ReplyFlush::None,
            flushing: false,
            budget: BudgetGate::new(),
            diagnostics: DiagnosticSink::default(),
            blob_dir: None,
            session_file: None,
            cost_baseline: SummarizerStats::default(),
            reclaim: None,
            metrics: ContextMetrics::default(),
            last_status: None,
            calls: CallLog::default(),
            economy: SessionEconomy::new(),
        }
    }
}

/// JSON values as the lines of a [`StartParams::branch`].
pub fn jsonl<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> String {
    let mut out = String::new();
    for (i, e) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(e.as_ref());
    }
    out
}

/// `session.start` / `session_tree` parameters.
#[derive(Debug, Clone)]
pub struct StartParams {
    /// The whole settings.json (or null); ignored for `session_tree`.
    pub settings: Value,
    /// The session's id (for the blob directory).
    pub session_id: String,
    /// The session's directory.
    pub session_dir: Option<PathBuf>,
    /// The session file the host writes the branch to (`None` for a
    /// session held in memory only): a raw id `context_tree_query` cannot
    /// find in the index or the context is looked up on its branch.
    pub session_file: Option<PathBuf>,
    /// The branch entries as `getBranch()` returns them, root first: their
    /// JSON texts, one per line, read as a session file's lines (never a
    /// `Value` tree: at 1M tokens the branch is 10 MB).
    pub branch: String,
    /// `session_tree`: keep config and fallback state.
    pub tree: bool,
}

impl Engine {
    /// The context the engine renders: the host's list as the last
    /// `context` call (and turn ends since) gave it, with the summaries the
    /// engine's flushes wrote to the session in their places, as a reload
    /// would read them.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The host's own list as the engine holds it (what `keep` counts):
    /// [`Engine::messages`] without the summaries the host does not hold.
    pub fn host_messages(&self) -> impl Iterator<Item = &Message> + '_ {
        self.injected.host_messages(&self.messages)
    }

    /// Rebuilds everything from the branch (what `session_start` does).
    pub fn start(&mut self, p: StartParams) -> Effects {
        let mut out = Effects::new();
        if !p.tree {
            self.settings = p.settings;
            let (config, warnings) = Config::from_settings_file_value(&self.settings);
            for w in warnings {
                out.push(Effect::warning(format!("condense: {w}")));
            }
            let (protection, pw) = Protection::compile(&config);
            for w in pw {
                out.push(Effect::warning(format!("condense: {w}")));
            }
            self.config = config;
            self.protection = protection;
        }
        // The store reads the entries exactly as it reads a session file.
        let header = json!({"type": "session", "version": 3, "id": p.session_id, "timestamp": "", "cwd": ""});
        let mut text = header.to_string();
        if !p.branch.is_empty() {
            text.reserve(p.branch.len() + 1);
            text.push('\n');
            text.push_str(&p.branch);
        }
        let session = Session::parse(&text);
        let branch: Vec<_> = session.entries.iter().collect();
        let ctx = condense_store::context::build_context(&branch);
        let ts_of = |id: &str| {
            session
                .entry(id)
                .and_then(|e| condense_store::time::parse_iso(&e.timestamp))
        };
        self.entry_ts = ctx.entry_ids.iter().map(|id| ts_of(id)).collect();
        self.turns_before = ctx.turns_before;
        self.messages = ctx.messages;
        self.injected.clear();
        let (state, _problems) = condense_store::replay::replay_branch(&branch);
        self.state = state;
        self.economy = condense_store::economy::session_economy(&branch);
        self.cost_baseline = self.state.stats().clone();
        // The id is the session's to claim: named as the CLI names it, so a
        // crafted or over-long one cannot move spills out of the session
        // directory or make every spill fail.
        self.blob_dir = p
            .session_dir
            .map(|d| condense_store::spill::blob_dir_in(&d, &p.session_id));
        self.session_file = p.session_file;
        self.pending.clear();
        self.budget.reset();
        self.calls.restart();
        self.rearmed = false;
        self.reply_flush = ReplyFlush::None;
        self.flushing = false;
        self.reclaim = None;
        if !p.tree {
            self.diagnostics.reset();
        }
        if self.config.enabled {
            self.rearmed = !self.capture_now(0).is_empty();
            // Work a reply left for the next run before the process ended.
            if self.rearmed
                && self.config.economy.policy.gates_on_switch()
                && self.config.prune_on == PruneOn::AgentMessage
            {
                self.reply_flush = ReplyFlush::NextRun;
            }
            // A render now fills the state's stub and chain caches, so the
            // first LLM call after a resume costs what later ones do (its
            // result is dropped: `context` renders what pi actually sends).
            let settings = RenderSettings {
                config: &self.config,
                protection: &self.protection,
            };
            drop(render(&self.messages, &self.state, &settings));
        }
        self.refresh_metrics();
        out.push(self.footer());
        if !p.tree {
            out.push(Effect::Widget {
                key: "pruner-boot".to_owned(),
                lines: Some(vec![format!(
                    "pruner loaded — pruning {} | model: {}",
                    if self.config.enabled { "ON" } else { "OFF" },
                    self.config.summarizer_model
                )]),
                placement: Placement::BelowEditor,
                ttl_ms: Some(10_000),
            });
        }
        out
    }

    /// `turn_end` comes before the next `context`: appends the turn's
    /// assistant message and results to the copy (so a budget flush at turn
    /// end rescans them, as pi-condense's `getBranch()` would), unless the
    /// copy already ends with them (a pi that delivered `context` first).
    fn sync_turn(&mut self, assistant: &Message, results: &[Message]) {
        let turn: Vec<&Message> = std::iter::once(assistant).chain(results).collect();
        let n = turn.len();
        let already = self.messages.len() >= n
            && self.messages[self.messages.len() - n..]
                .iter()
                .zip(&turn)
                .all(|(a, b)| a.json() == b.json());
        if !already {
            self.messages.extend(turn.into_iter().cloned());
            self.entry_ts.extend(std::iter::repeat_n(None, n));
        }
    }

    fn capture_now(&self, now: i64) -> Vec<CapturedBatch> {
        capture_pending(
            &self.messages,
            &self.entry_ts,
            self.turns_before,
            &self.state,
            &self.protection,
            self.config.batching_mode,
            now,
        )
    }

    fn refresh_metrics(&mut self) {
        self.metrics = self.measure_context();
    }

    /// The context's metrics, measured now.
    pub fn measure_context(&self) -> ContextMetrics {
        compute_context_metrics(
            &self.messages,
            self.turns_before,
            self.state.frontier(),
            &self.state,
            &self.protection,
        )
    }

    /// The footer text.
    pub fn status_text(&self) -> Option<String> {
        if !self.config.show_prune_status_line {
            return None;
        }
        let mut s = if !self.config.enabled {
            "prune: OFF".to_owned()
        } else if let Some((before, after)) = self.reclaim {
            let (b, a) = (
                condense_core::chars_to_tokens(before),
                condense_core::chars_to_tokens(after),
            );
            let pct = if b > 0 {
                ((b as f64 - a as f64) / b as f64 * 100.0).round().max(0.0)
            } else {
                0.0
            };
            format!(
                "prune: ON · {}->{} (-{pct}%)",
                format_count(b),
                format_count(a)
            )
        } else {
            "prune: ON".to_owned()
        };
        s.push_str(&self.diagnostics.footer_suffix());
        let m = &self.metrics;
        if m.frontier_gap_tokens > 0 {
            s.push_str(&format!(
                " · think {} · gap {} · chain {}%",
                format_count(m.open_cycle_thinking_tokens),
                format_count(m.frontier_gap_tokens),
                m.largest_chain_share_pct
            ));
        }
        Some(format!("│ {s}"))
    }

    /// The footer effect, if the text changed since the last one.
    fn status_if_changed(&mut self) -> Option<Effect> {
        let text = self.status_text();
        if text == self.last_status {
            return None;
        }
        self.last_status = text.clone();
        Some(Effect::status(text))
    }

    /// The footer effect for the current state, sent even if unchanged.
    pub fn footer(&mut self) -> Effect {
        let text = self.status_text();
        self.last_status = text.clone();
        Effect::status(text)
    }

    /// Persists each diagnostic the first time the session sees it.
    fn report_diagnostics(&mut self, diagnostics: &[Diagnostic], out: &mut Effects) {
        for d in diagnostics {
            if self.diagnostics.report(d) {
                out.push(Effect::entry(diagnostic_entry(d), Delivery::Runtime));
            }
        }
    }

    /// The summarizer's cost since the session started.
    fn cost_effect(&self) -> Effect {
        let s = self.state.stats();
        let b = &self.cost_baseline;
        Effect::Cost {
            total_cost: s.total_cost - b.total_cost,
            input_tokens: s.total_input_tokens.saturating_sub(b.total_input_tokens),
            output_tokens: s.total_output_tokens.saturating_sub(b.total_output_tokens),
        }
    }

    /// `context`: syncs the messages (`keep` of ours still match, then
    /// `append`) and renders. Returns the steps (`None` = unchanged) and
    /// effects (footer, diagnostics to persist).
    pub fn context(
        &mut self,
        keep: usize,
        append: Vec<Message>,
    ) -> (Option<Vec<PlanStep>>, Effects) {
        self.context_at(keep, append, &CallFacts::default())
    }

    /// [`Engine::context`] for a call the host describes (its time and
    /// model). Under the cache-aware policy this is where a switch happens:
    /// its entry is the first effect, and the render already shows it, so
    /// what the model is sent is what a reload renders.
    pub fn context_at(
        &mut self,
        keep: usize,
        append: Vec<Message>,
        call: &CallFacts,
    ) -> (Option<Vec<PlanStep>>, Effects) {
        if keep == 0 && !self.messages.is_empty() {
            self.turns_before =
                crate::turns::turns_before_replacing(&self.messages, self.turns_before, &append);
        }
        self.injected
            .sync(&mut self.messages, &mut self.entry_ts, keep, append);
        let mut out = Effects::new();
        if !self.config.enabled {
            return (self.injected.host_steps(None, &self.messages), out);
        }
        let settings = RenderSettings {
            config: &self.config,
            protection: &self.protection,
        };
        if self.config.economy.policy.gates_on_switch() {
            if let Some(switch) =
                crate::switch::decide(&self.messages, &self.state, &settings, &self.calls, call)
            {
                self.state.record_switch(self.messages.len());
                self.economy
                    .add_switch(condense_store::economy::switch_record(&switch));
                out.push(Effect::entry(switch_entry(&switch), Delivery::Runtime));
            }
        }
        let settings = RenderSettings {
            config: &self.config,
            protection: &self.protection,
        };
        let r = render(&self.messages, &self.state, &settings);
        self.report_diagnostics(&r.diagnostics, &mut out);
        if self.config.economy.policy.gates_on_switch() {
            let profile = crate::switch::profile(&self.config);
            self.calls
                .sent(r.messages(&self.messages), &self.messages, &profile, call);
        }
        let steps = r.plan.map(|plan| {
            self.reclaim = Some((plan.before_chars, plan.after_chars));
            plan.steps
        });
        let steps = self.injected.host_steps(steps, &self.messages);
        out.extend(self.status_if_changed());
        (steps, out)
    }

    /// The session's cache economics so far (recorded usage, priced at the
    /// configured profile) and what the display policy decided.
    /// Under the cache-aware policy it adds the engine's estimate against
    /// no pruning over the calls this process saw.
    pub fn economy_report(&self) -> EconomyReport {
        let mut report = self
            .economy
            .report_for(&self.config.economy, self.state.pending_count());
        if self.config.economy.policy.gates_on_switch() {
            report.against_no_pruning = Some(condense_core::AgainstNoPruning {
                saved_units: self.calls.saved(),
                max_excess: self.config.economy.max_excess,
            });
        }
        report
    }

    /// `turn_end`: capture the turn's batch (protection, eager spill, frontier
    /// trim), queue it, and decide whether a budget trigger flushes now.
    pub fn turn_end(
        &mut self,
        turn_index: i64,
        assistant: &Message,
        results: &[Message],
        tokens: Option<u64>,
        context_window: u64,
        now: i64,
    ) -> (Effects, Option<TriggerKind>) {
        let mut out = Effects::new();
        self.sync_turn(assistant, results);
        if let Some(usage) = RecordedUsage::of_message(assistant) {
            self.economy.add_call(usage);
        }
        if !self.config.enabled {
            return (out, None);
        }
        // Measured on every turn: the delta trigger compares consecutive turns.
        let threshold = condense_core::budget_threshold(
            self.config.economy.policy,
            self.config.auto_budget_threshold,
            self.config.economy.pressure_share,
        );
        let decision = self.budget.on_turn_end(
            tokens,
            context_window,
            threshold,
            self.config.budget_turn_delta,
        );
        self.calls.turn(context_window, decision.budget_hit);
        let mut pushed = false;
        if !results.is_empty() {
            // Numbered over the branch as the frontier is (pi's `turnIndex`
            // counts within the run: every turn of a later run would number
            // below the frontier and never queue).
            let turn = self.turns_before + crate::turns::assistants(&self.messages) - 1;
            let batch = without_protected(
                capture_turn(assistant, results, turn, now),
                &self.protection,
            );
            let batch = self.spill(batch, &mut out);
            if let Some(b) = trim_to_pending(batch, &self.state, self.state.frontier()) {
                self.pending.push(b);
                pushed = true;
                if self.config.show_prune_status_line {
                    out.push(Effect::status(Some(format!(
                        "│ prune: {} pending",
                        self.pending.len()
                    ))));
                }
                let when = match self.config.prune_on {
                    PruneOn::AgentMessage => "agent's next text response",
                    PruneOn::OnDemand => "/pruner now",
                };
                out.push(Effect::info(format!(
                    "pruner: {} turn(s) queued — will summarize on {when}",
                    self.pending.len()
                )));
            }
            self.refresh_metrics();
        }
        // A reply's flush no agent start ran (a host without the event):
        // the next run's first turn runs it.
        let mut reply_flush = self.reply_flush == ReplyFlush::NextRun && !self.flushing;
        if reply_flush {
            self.reply_flush = ReplyFlush::None;
            reply_flush = self.flush_affordable(now);
        }
        if !pushed && !self.rearmed && !reply_flush {
            return (out, None);
        }
        let n = self.pending.len();
        let gated = flush_trigger(n, self.rearmed, self.flushing, decision).filter(|_| {
            !self.config.economy.policy.gates_on_switch() || self.flush_affordable(now)
        });
        let (trigger, text) = match gated {
            Some(TriggerKind::Rearmed) => (
                gated,
                "pruner: context budget reached — compacting work recovered after reload"
                    .to_owned(),
            ),
            Some(TriggerKind::Budget) => (
                gated,
                format!("pruner: context budget reached — compacting {n} pending turn(s)"),
            ),
            Some(_) => (
                gated,
                format!("pruner: context jumped this turn — compacting {n} pending turn(s)"),
            ),
            // The cache-aware policy's own flushes say what they are.
            None if reply_flush => (
                Some(TriggerKind::MessageEnd),
                format!("pruner: after the last reply — compacting {n} pending turn(s)"),
            ),
            None => match self.long_run_flush(turn_index) {
                Some(t) => (
                    Some(t),
                    format!("pruner: long run — compacting {n} pending turn(s)"),
                ),
                None => (None, String::new()),
            },
        };
        if trigger.is_some() {
            out.push(Effect::info(text));
        }
        (out, trigger)
    }

    /// Under the cache-aware policy, a flush at the end of a long run's
    /// turn when summarizing what is pending pays now
    /// ([`crate::switch::turn_flush_pays`]); reported as `delta` (the
    /// context grew), the trigger pi-condense knows for a mid-run flush.
    fn long_run_flush(&self, turn_index: i64) -> Option<TriggerKind> {
        let eligible = self.config.economy.policy.gates_on_switch()
            && turn_index >= crate::switch::LONG_RUN_TURNS
            && !self.flushing
            && !self.pending.is_empty();
        if !eligible {
            return None;
        }
        let settings = RenderSettings {
            config: &self.config,
            protection: &self.protection,
        };
        crate::switch::turn_flush_pays(&self.messages, &self.pending, &settings, &self.calls)
            .then_some(TriggerKind::Delta)
    }

    /// Eager spill of oversized results: the blob is written first and the
    /// record committed after, so a failed write leaves the output inline.
    fn spill(&mut self, batch: CapturedBatch, out: &mut Effects) -> CapturedBatch {
        let mut blobs = BlobDir(self.blob_dir.as_deref());
        let spilled = spill_batch(batch, &mut self.state, &self.config, &mut blobs);
        for f in spilled.failures {
            // The output stays inline; the next flush summarizes it.
            eprintln!("condense: {f}");
        }
        entries(out, &spilled.effects, Delivery::Session);
        spilled.rest
    }

    /// `message_end`: an assistant reply without tool calls flushes in
    /// `agent-message` mode (the reply threaded in as the closing message).
    /// Under the cache-aware policy the flush waits for the next agent run
    /// ([`Engine::agent_start`]): summaries made at a session's last reply
    /// would never be shown, and the next run's first call is where a
    /// switch is cheapest (its cache is often cold after the user's pause).
    pub fn message_end(&mut self, message: &Message) -> Option<TriggerKind> {
        let asks = self.config.enabled
            && self.config.prune_on == PruneOn::AgentMessage
            && message.is_text_only_assistant();
        if asks && self.config.economy.policy.gates_on_switch() {
            self.reply_flush = ReplyFlush::ThisRun;
            return None;
        }
        asks.then_some(TriggerKind::MessageEnd)
    }

    /// The start of an agent run (the user's next prompt, before its first
    /// call, at `now`): the flush a reply asked for under the cache-aware
    /// policy, when the session can afford it ([`Engine::flush_affordable`]).
    pub fn agent_start(&mut self, now: i64) -> Option<TriggerKind> {
        let asked = std::mem::take(&mut self.reply_flush) != ReplyFlush::None;
        (asked && self.config.enabled && self.flush_affordable(now))
            .then_some(TriggerKind::MessageEnd)
    }

    /// Whether the cache-aware policy's bound against no pruning pays for
    /// a flush of what is pending ([`crate::switch::flush_affordable`]);
    /// unpaid, it stays captured for the next trigger.
    fn flush_affordable(&self, now: i64) -> bool {
        let settings = RenderSettings {
            config: &self.config,
            protection: &self.protection,
        };
        crate::switch::flush_affordable(&self.messages, &self.pending, &settings, &self.calls, now)
    }

    /// `agent_end`: status; a flush the run's reply asked for now waits
    /// for the next run.
    pub fn agent_end(&mut self) -> Effects {
        if self.reply_flush == ReplyFlush::ThisRun {
            self.reply_flush = ReplyFlush::NextRun;
        }
        if !self.config.enabled || !self.config.show_prune_status_line {
            return Effects::new();
        }
        let text = if self.pending.is_empty() && self.rearmed {
            "│ prune: recovered pending (reload)".to_owned()
        } else if !self.pending.is_empty() {
            format!("│ prune: {} pending", self.pending.len())
        } else {
            return vec![self.footer()];
        };
        vec![Effect::status(Some(text))]
    }

    /// Plans a flush; `None` if one is already running. An empty capture
    /// still yields a plan (its metrics entry records `empty`). The engine
    /// counts as flushing until [`Engine::finish_chains`] or
    /// [`Engine::abandon_flush`].
    pub fn begin_flush(
        &mut self,
        trigger: TriggerKind,
        closing: Option<Message>,
        now: i64,
    ) -> Option<Flush> {
        if self.flushing {
            return None;
        }
        self.rearmed = false;
        self.reply_flush = ReplyFlush::None;
        self.refresh_metrics();
        let batches = self.capture_now(now);
        self.pending.clear();
        self.flushing = true;
        let chains = if self.config.chain_compression.enabled {
            ChainPolicy::AfterBatches(self.config.chain_compression.rolling_window)
        } else {
            ChainPolicy::Never
        };
        Some(Flush::plan(
            batches,
            &self.state,
            &self.config,
            chains,
            Some(trigger),
            self.metrics,
            closing,
        ))
    }

    /// Plans `/pruner compact`: every eligible closed chain (K = 0), whether
    /// or not `chainCompression.enabled`. `None` while a flush runs.
    pub fn begin_compact(&mut self) -> Option<Flush> {
        if self.flushing {
            return None;
        }
        self.flushing = true;
        Some(Flush::chains_only(0))
    }

    /// Flush step 2: applies the summarizer's results and plans chain
    /// compression on the messages the engine holds.
    pub fn finish_summaries(&mut self, flush: Flush, results: Vec<JobResult>) -> Chains {
        self.summarizer_spent(&results);
        let mut chains = flush
            .apply(results, &mut self.state, &self.config)
            .plan_chains(&self.messages, &self.state, &self.config, &self.protection);
        self.pending.extend(chains.take_restored());
        chains
    }

    /// The summarizer's input `results` report, spent from the cache-aware
    /// policy's bound against no pruning.
    fn summarizer_spent(&mut self, results: &[JobResult]) {
        let input: u64 = results
            .iter()
            .filter_map(|r| match r {
                JobResult::Summary { usage, .. } => Some(usage),
                JobResult::Unusable { usage } | JobResult::Failed { usage, .. } => usage.as_ref(),
                JobResult::NotRun => None,
            })
            .map(|u| u.input_tokens)
            .sum();
        let price = crate::switch::profile(&self.config).summarizer;
        self.calls.summarized(input as f64 * price);
    }

    /// Flush step 3: applies chain compression and returns every effect of
    /// the flush, entries delivered with `delivery`. A flush with a trigger
    /// ends with its metrics entry and the cost; a chains-only flush
    /// (compact) reports the cost only when it compressed something, and
    /// leaves its notices to the caller (in the report).
    pub fn finish_chains(
        &mut self,
        chains: Chains,
        fusion: Vec<JobResult>,
        delivery: Delivery,
        now: i64,
    ) -> FlushDone {
        self.summarizer_spent(&fusion);
        let mut blobs = BlobDir(self.blob_dir.as_deref());
        let report = chains.apply(fusion, &mut blobs, &mut self.state, &self.config, now);
        let mut out = Effects::new();
        let live = report.trigger.is_some();
        entries(&mut out, &report.flush_effects, delivery);
        self.inject_summaries(&report.flush_effects, now);
        if live {
            notices(&mut out, &report.flush_notices);
        }
        entries(&mut out, &report.chain_effects, delivery);
        self.report_diagnostics(&report.diagnostics, &mut out);
        if live {
            notices(&mut out, &report.chain_notices);
        }
        if let Some(data) = report.metrics_entry() {
            out.push(Effect::entry(flush_metrics_entry(&data), delivery));
        }
        if live || !report.compressed.is_empty() {
            out.push(self.cost_effect());
        }
        self.flushing = false;
        self.refresh_metrics();
        out.push(self.footer());
        FlushDone {
            effects: out,
            report,
        }
    }

    /// The summaries a flush writes join the engine's context now, after
    /// the messages it holds (at a reply, before the reply, which pi
    /// persists after `message_end`): the host's list lacks them until it
    /// rebuilds from the file, or, delivered at runtime, until its next
    /// `context` (pi's agent takes them at once; OpenCode's list never).
    fn inject_summaries(&mut self, effects: &[FlushEffect], now: i64) {
        for effect in effects {
            if let NewEntry::CustomMessage {
                custom_type,
                content,
                display,
                details,
            } = entry_for(effect)
            {
                let message = condense_store::context::custom_message(
                    custom_type,
                    &content,
                    display,
                    &details,
                    now,
                );
                if let Some(m) = message {
                    self.injected
                        .push(&mut self.messages, &mut self.entry_ts, m);
                }
            }
        }
    }

    /// Marks an abandoned flush (no entries were returned for it): its
    /// batches will be captured again by the next flush's rescan.
    pub fn abandon_flush(&mut self) {
        self.flushing = false;
    }

    /// Whether a reload found recoverable work no flush has run for yet
    /// (`rearmed: yes` in `/pruner status`).
    pub fn is_rearmed(&self) -> bool {
        self.rearmed
    }

    /// The compiled protection rules of the current config.
    pub fn protection(&self) -> &Protection {
        &self.protection
    }

    /// `context_tree_query`: `page` picks each output's lines; a raw id the
    /// index does not know is looked up on the branch (see [`crate::query`]).
    pub fn query(&self, ids: &[String], page: condense_core::PageRequest) -> Value {
        let blob_dir = self.blob_dir.clone().unwrap_or_default();
        let out = crate::query::answer(
            &self.state,
            ids,
            page,
            &self.messages,
            self.session_file.as_deref(),
            &blob_dir,
        );
        let details: serde_json::Map<String, Value> = out
            .results
            .iter()
            .map(|(label, r)| {
                (
                    label.clone(),
                    serde_json::to_value(r).unwrap_or(Value::Null),
                )
            })
            .collect();
        json!({"text": out.text, "details": {"results": details}})
    }

    /// Pending batches.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The settings.json value the config came from.
    pub fn settings(&self) -> &Value {
        &self.settings
    }

    /// The normalized config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The pruning state.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Replaces the config (a `/pruner` command changed it) and returns the
    /// `saveSettings` effect.
    pub fn set_config(&mut self, config: Config) -> Effect {
        let block =
            config.to_settings_value(self.settings.get("contextPrune").unwrap_or(&Value::Null));
        self.settings = condense_core::replace_context_prune(&self.settings, block.clone());
        self.protection = Protection::new(&config);
        self.config = config;
        Effect::SaveSettings {
            context_prune: block,
        }
    }
}
