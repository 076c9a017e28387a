//! The sidecar's per-session state machine: what pi-condense's `index.ts`
//! does on each pi event, without I/O except spill blobs.
//!
//! The async layer (`server.rs`) feeds it the shim's requests and runs the
//! LLM jobs a flush asks for; everything else (capture, pending queue,
//! budget gates, render, query, entries to append) is decided here, from
//! core and store pieces. A flush is split so no lock is held while the
//! summarizer runs: [`Engine::begin_flush`] plans it, the caller runs the
//! jobs, [`Engine::finish_flush`] applies the results and plans chain
//! compression, [`Engine::finish_chains`] applies that and returns every
//! entry at once.

use std::path::PathBuf;

use condense_core::Message;
use condense_core::Protection;
use condense_core::State;
use condense_core::SummarizerStats;
use condense_core::{apply_chains, plan_chains, ChainPlan, FusionJob};
use condense_core::{
    apply_flush, apply_spill, plan_flush, plan_spill, FlushEffect, FlushOutcome, FlushPlan,
    JobResult, Notice, NoticeLevel, SummaryJob, WrittenSpill,
};
use condense_core::{
    capture_pending, capture_turn, trim_to_pending, without_protected, CapturedBatch,
};
use condense_core::{compute_context_metrics, ContextMetrics};
use condense_core::{flush_trigger, BudgetGate, TriggerKind};
use condense_core::{format_count, DiagnosticSink};
use condense_core::{render, PlanStep, RenderSettings};
use condense_core::{Config, PruneOn};
use condense_store::effects::{entry_for, NewEntry};
use condense_store::session::Session;
use serde_json::{json, Value};

/// What the shim must do, in order (see docs/protocol.md, "Effects").
pub type Effects = Vec<Value>;

fn notify(level: NoticeLevel, text: impl Into<String>) -> Value {
    let level = match level {
        NoticeLevel::Info => "info",
        NoticeLevel::Warning => "warning",
        NoticeLevel::Error => "error",
    };
    json!({"kind": "notify", "level": level, "text": text.into()})
}

fn notices(out: &mut Effects, notices: Vec<Notice>) {
    out.extend(notices.into_iter().map(|n| notify(n.level, n.text)));
}

/// How entries are delivered: through the session manager (event handlers)
/// or at runtime (`/pruner` commands, as pi-condense does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// `sessionManager.appendCustomEntry` / `appendCustomMessageEntry`.
    Session,
    /// `pi.appendEntry` / `pi.sendMessage(..., {deliverAs: "steer"})`.
    Runtime,
}

fn append_effect(effect: &FlushEffect, delivery: Delivery) -> Value {
    let d = match delivery {
        Delivery::Session => "session",
        Delivery::Runtime => "runtime",
    };
    match entry_for(effect) {
        NewEntry::Custom { custom_type, data } => {
            json!({"kind": "append", "customType": custom_type, "data": data, "delivery": d})
        }
        NewEntry::CustomMessage {
            custom_type,
            content,
            display,
            details,
        } => json!({"kind": "appendMessage", "customType": custom_type, "content": content,
                    "display": display, "details": details, "delivery": d}),
    }
}

/// A flush between planning and applying.
#[derive(Debug)]
pub struct PendingFlush {
    /// Why it runs.
    pub trigger: TriggerKind,
    /// How entries are delivered.
    pub delivery: Delivery,
    /// The plan.
    pub plan: FlushPlan,
    /// The closing message (agent-message flushes run before pi persists it).
    pub closing: Option<Message>,
    /// Metrics at flush entry.
    pub metrics: ContextMetrics,
    /// Batches captured.
    pub captured: usize,
}

impl PendingFlush {
    /// The summarization jobs to run.
    pub fn jobs(&self) -> &[SummaryJob] {
        &self.plan.jobs
    }
}

/// A flush whose batches are applied, with chain compression planned.
#[derive(Debug)]
pub struct ChainsStep {
    /// Effects so far (not yet returned to the shim).
    pub effects: Effects,
    /// The chain plan.
    pub plan: ChainPlan,
    trigger: TriggerKind,
    delivery: Delivery,
    metrics: ContextMetrics,
    captured: usize,
    processed: usize,
    outcome: String,
}

impl ChainsStep {
    /// The range fusion jobs to run.
    pub fn fusion_jobs(&self) -> &[FusionJob] {
        &self.plan.fusion_jobs
    }
}

/// One pi session's condense state.
#[derive(Debug)]
pub struct Engine {
    settings: Value,
    /// The normalized config.
    pub config: Config,
    protection: Protection,
    messages: Vec<Message>,
    entry_ts: Vec<Option<i64>>,
    /// The pruning state.
    pub state: State,
    pending: Vec<CapturedBatch>,
    rearmed: bool,
    flushing: bool,
    budget: BudgetGate,
    diagnostics: DiagnosticSink,
    blob_dir: Option<PathBuf>,
    cost_baseline: SummarizerStats,
    reclaim: Option<(usize, usize)>,
    metrics: ContextMetrics,
    last_status: Option<String>,
}

impl Default for Engine {
    fn default() -> Self {
        let config = Config::default();
        Engine {
            settings: Value::Null,
            protection: Protection::new(&config),
            config,
            messages: Vec::new(),
            entry_ts: Vec::new(),
            state: State::new(),
            pending: Vec::new(),
            rearmed: false,
            flushing: false,
            budget: BudgetGate::new(),
            diagnostics: DiagnosticSink::default(),
            blob_dir: None,
            cost_baseline: SummarizerStats::default(),
            reclaim: None,
            metrics: ContextMetrics::default(),
            last_status: None,
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
    /// The branch entries as `getBranch()` returns them, root first: their
    /// JSON texts, one per line, read as a session file's lines (never a
    /// `Value` tree: at 1M tokens the branch is 10 MB).
    pub branch: String,
    /// `session_tree`: keep config and fallback state.
    pub tree: bool,
}

impl Engine {
    /// The messages the sidecar holds (the last `context` call's input).
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Rebuilds everything from the branch (what `session_start` does).
    pub fn start(&mut self, p: StartParams) -> Effects {
        let mut out = Effects::new();
        if !p.tree {
            self.settings = p.settings;
            let (config, warnings) = Config::from_settings_file_value(&self.settings);
            for w in warnings {
                out.push(notify(NoticeLevel::Warning, format!("condense: {w}")));
            }
            let (protection, pw) = Protection::compile(&config);
            for w in pw {
                out.push(notify(NoticeLevel::Warning, format!("condense: {w}")));
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
        self.messages = ctx.messages;
        let (state, _problems) = condense_store::replay::replay_branch(&branch);
        self.state = state;
        self.cost_baseline = self.state.stats().clone();
        // The id is the session's to claim: named as the CLI names it, so a
        // crafted or over-long one cannot move spills out of the session
        // directory or make every spill fail.
        self.blob_dir = p
            .session_dir
            .map(|d| condense_store::spill::blob_dir_in(&d, &p.session_id));
        self.pending.clear();
        self.budget.reset();
        self.rearmed = false;
        self.flushing = false;
        self.reclaim = None;
        if !p.tree {
            self.diagnostics.reset();
        }
        if self.config.enabled {
            self.rearmed = !self.capture_now(0).is_empty();
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
        out.push(self.status_effect(true));
        if !p.tree {
            out.push(json!({"kind": "widget", "key": "pruner-boot", "placement": "belowEditor", "ttlMs": 10_000,
                "lines": [format!("pruner loaded — pruning {} | model: {}",
                    if self.config.enabled { "ON" } else { "OFF" }, self.config.summarizer_model)]}));
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
            &self.state,
            &self.protection,
            self.config.batching_mode,
            now,
        )
    }

    fn refresh_metrics(&mut self) {
        self.metrics = compute_context_metrics(
            &self.messages,
            self.state.frontier(),
            &self.state,
            &self.protection,
        );
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

    fn status_effect(&mut self, force: bool) -> Value {
        let text = self.status_text();
        if !force && text == self.last_status {
            return Value::Null;
        }
        self.last_status = text.clone();
        json!({"kind": "status", "text": text})
    }

    /// `context`: syncs the messages (`keep` of ours still match, then
    /// `append`) and renders. Returns the steps (`None` = unchanged) and
    /// effects (footer, diagnostics to persist).
    pub fn context(
        &mut self,
        keep: usize,
        append: Vec<Message>,
    ) -> (Option<Vec<PlanStep>>, Effects) {
        let keep = keep.min(self.messages.len());
        self.messages.truncate(keep);
        self.entry_ts.truncate(keep);
        self.entry_ts
            .extend(std::iter::repeat_n(None, append.len()));
        self.messages.extend(append);
        let mut out = Effects::new();
        if !self.config.enabled {
            return (None, out);
        }
        let settings = RenderSettings {
            config: &self.config,
            protection: &self.protection,
        };
        let r = render(&self.messages, &self.state, &settings);
        for d in &r.diagnostics {
            if self.diagnostics.report(d) {
                out.push(
                    json!({"kind": "append", "customType": "context-prune-diagnostic",
                    "data": {"kind": d.kind.as_str(), "detail": d.detail}, "delivery": "runtime"}),
                );
            }
        }
        let steps = r.plan.map(|plan| {
            self.reclaim = Some((plan.before_chars, plan.after_chars));
            plan.steps
        });
        let status = self.status_effect(false);
        if !status.is_null() {
            out.push(status);
        }
        (steps, out)
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
        if !self.config.enabled {
            return (out, None);
        }
        // Measured on every turn: the delta trigger compares consecutive turns.
        let decision = self.budget.on_turn_end(
            tokens,
            context_window,
            self.config.auto_budget_threshold,
            self.config.budget_turn_delta,
        );
        let mut pushed = false;
        if !results.is_empty() {
            let batch = without_protected(
                capture_turn(assistant, results, turn_index, now),
                &self.protection,
            );
            let batch = self.spill(batch, &mut out);
            if let Some(b) = trim_to_pending(batch, &self.state, self.state.frontier()) {
                self.pending.push(b);
                pushed = true;
                if self.config.show_prune_status_line {
                    out.push(json!({"kind": "status", "text": format!("│ prune: {} pending", self.pending.len())}));
                }
                let when = match self.config.prune_on {
                    PruneOn::AgentMessage => "agent's next text response",
                    PruneOn::OnDemand => "/pruner now",
                };
                out.push(notify(
                    NoticeLevel::Info,
                    format!(
                        "pruner: {} turn(s) queued — will summarize on {when}",
                        self.pending.len()
                    ),
                ));
            }
            self.refresh_metrics();
        }
        if !pushed && !self.rearmed {
            return (out, None);
        }
        let trigger = flush_trigger(self.pending.len(), self.rearmed, self.flushing, decision);
        if let Some(t) = trigger {
            let text = match t {
                TriggerKind::Rearmed => {
                    "pruner: context budget reached — compacting work recovered after reload"
                        .to_owned()
                }
                TriggerKind::Budget => format!(
                    "pruner: context budget reached — compacting {} pending turn(s)",
                    self.pending.len()
                ),
                _ => format!(
                    "pruner: context jumped this turn — compacting {} pending turn(s)",
                    self.pending.len()
                ),
            };
            out.push(notify(NoticeLevel::Info, text));
        }
        (out, trigger)
    }

    /// Eager spill of oversized results: the blob is written first and the
    /// record committed after, so a failed write leaves the output inline.
    fn spill(&mut self, batch: CapturedBatch, out: &mut Effects) -> CapturedBatch {
        let plan = plan_spill(&batch, &self.state, &self.config);
        if plan.spill.is_empty() && plan.aliases.is_empty() {
            return batch;
        }
        let mut written = Vec::new();
        if let Some(dir) = self.blob_dir.clone() {
            for &i in &plan.spill {
                let c = &batch.calls[i];
                match condense_store::spill::write_blob(&dir, &c.key(), &c.result_text) {
                    Ok(blob) => written.push(blob.to_spill(i)),
                    // The output stays inline; the next flush summarizes it.
                    Err(e) => eprintln!("condense-pi: spill of {} failed: {e}", c.tool_call_id),
                }
            }
        }
        let (effects, rest) = apply_spill(batch, &plan, &written, &mut self.state, &self.config);
        out.extend(effects.iter().map(|e| append_effect(e, Delivery::Session)));
        rest
    }

    /// `message_end`: an assistant reply without tool calls flushes in
    /// `agent-message` mode (the reply threaded in as the closing message).
    pub fn message_end(&self, message: &Message) -> Option<TriggerKind> {
        (self.config.enabled
            && self.config.prune_on == PruneOn::AgentMessage
            && message.is_text_only_assistant())
        .then_some(TriggerKind::MessageEnd)
    }

    /// `agent_end`: status only.
    pub fn agent_end(&mut self) -> Effects {
        if !self.config.enabled || !self.config.show_prune_status_line {
            return Effects::new();
        }
        let text = if self.pending.is_empty() && self.rearmed {
            "│ prune: recovered pending (reload)".to_owned()
        } else if !self.pending.is_empty() {
            format!("│ prune: {} pending", self.pending.len())
        } else {
            return vec![self.status_effect(true)];
        };
        vec![json!({"kind": "status", "text": text})]
    }

    /// Plans a flush; `None` if one is already running. An empty capture
    /// still yields a plan (its metrics entry records `empty`).
    pub fn begin_flush(
        &mut self,
        trigger: TriggerKind,
        delivery: Delivery,
        closing: Option<Message>,
        now: i64,
    ) -> Option<PendingFlush> {
        if self.flushing {
            return None;
        }
        self.rearmed = false;
        self.refresh_metrics();
        let batches = self.capture_now(now);
        self.pending.clear();
        self.flushing = true;
        let captured = batches.len();
        let plan = plan_flush(batches, &self.state, &self.config);
        Some(PendingFlush {
            trigger,
            delivery,
            plan,
            closing,
            metrics: self.metrics,
            captured,
        })
    }

    /// Applies the summarizer's results and plans chain compression.
    pub fn finish_flush(&mut self, flush: PendingFlush, results: Vec<JobResult>) -> ChainsStep {
        let mut out = Effects::new();
        let empty = flush.plan.is_empty();
        let r = apply_flush(flush.plan, results, &mut self.state, &self.config);
        out.extend(r.effects.iter().map(|e| append_effect(e, flush.delivery)));
        notices(&mut out, r.notices);
        self.pending.extend(r.restored);
        let outcome = match &r.outcome {
            FlushOutcome::Empty => "empty".to_owned(),
            FlushOutcome::Processed(o) => o.as_str().to_owned(),
            FlushOutcome::SummarizerFailed(_) => "error".to_owned(),
        };
        let chains_enabled = self.config.chain_compression.enabled && !empty;
        let plan = if chains_enabled {
            plan_chains(
                &self.messages,
                flush.closing.as_ref(),
                &self.state,
                &self.config,
                &self.protection,
                self.config.chain_compression.rolling_window,
            )
        } else {
            ChainPlan::default()
        };
        ChainsStep {
            effects: out,
            plan,
            trigger: flush.trigger,
            delivery: flush.delivery,
            metrics: flush.metrics,
            captured: flush.captured,
            processed: r.processed_batches,
            outcome,
        }
    }

    /// Applies chain compression and returns every effect of the flush.
    pub fn finish_chains(&mut self, step: ChainsStep, fusion: Vec<JobResult>, now: i64) -> Effects {
        let mut out = step.effects;
        let spills = self.write_chain_spills(&step.plan);
        let r = apply_chains(
            step.plan,
            fusion,
            &spills,
            &mut self.state,
            &self.config,
            now,
        );
        out.extend(r.effects.iter().map(|e| append_effect(e, step.delivery)));
        for d in &r.diagnostics {
            if self.diagnostics.report(d) {
                out.push(
                    json!({"kind": "append", "customType": "context-prune-diagnostic",
                    "data": {"kind": d.kind.as_str(), "detail": d.detail}, "delivery": "runtime"}),
                );
            }
        }
        notices(&mut out, r.notices);
        let d = match step.delivery {
            Delivery::Session => "session",
            Delivery::Runtime => "runtime",
        };
        out.push(json!({"kind": "append", "customType": "context-prune-flush-metrics", "delivery": d, "data": {
            "ts": now, "trigger": step.trigger.as_str(), "capturedBatches": step.captured,
            "processedBatches": step.processed, "outcome": step.outcome, "metrics": {
                "openCycleThinkingTokens": step.metrics.open_cycle_thinking_tokens,
                "largestChainSharePct": step.metrics.largest_chain_share_pct,
                "frontierGapTokens": step.metrics.frontier_gap_tokens,
            }}}));
        let s = self.state.stats();
        let b = &self.cost_baseline;
        out.push(
            json!({"kind": "cost", "totalCost": s.total_cost - b.total_cost,
            "inputTokens": s.total_input_tokens - b.total_input_tokens,
            "outputTokens": s.total_output_tokens - b.total_output_tokens}),
        );
        self.flushing = false;
        self.refresh_metrics();
        out.push(self.status_effect(true));
        out
    }

    /// Marks an abandoned flush (no entries were returned for it): its
    /// batches will be captured again by the next flush's rescan.
    pub fn abandon_flush(&mut self) {
        self.flushing = false;
    }

    /// Plans `/pruner compact`: every eligible closed chain (K = 0), whether
    /// or not `chainCompression.enabled`. `None` while a flush runs; else the
    /// engine counts as flushing until [`Engine::finish_compact`] or
    /// [`Engine::abandon_flush`].
    pub fn begin_compact(&mut self) -> Option<ChainPlan> {
        if self.flushing {
            return None;
        }
        self.flushing = true;
        Some(plan_chains(
            &self.messages,
            None,
            &self.state,
            &self.config,
            &self.protection,
            0,
        ))
    }

    /// Applies a compact plan (runtime delivery). Returns the effects to
    /// carry out (entries, diagnostics, cost, footer), the notices
    /// `apply_chains` wrote, and the chains compressed.
    pub fn finish_compact(
        &mut self,
        plan: ChainPlan,
        fusion: Vec<JobResult>,
        now: i64,
    ) -> (Effects, Vec<Notice>, Vec<condense_core::ChainEntry>) {
        let mut out = Effects::new();
        let spills = self.write_chain_spills(&plan);
        let r = apply_chains(plan, fusion, &spills, &mut self.state, &self.config, now);
        out.extend(
            r.effects
                .iter()
                .map(|e| append_effect(e, Delivery::Runtime)),
        );
        for d in &r.diagnostics {
            if self.diagnostics.report(d) {
                out.push(
                    json!({"kind": "append", "customType": "context-prune-diagnostic",
                    "data": {"kind": d.kind.as_str(), "detail": d.detail}, "delivery": "runtime"}),
                );
            }
        }
        if !r.compressed.is_empty() {
            let s = self.state.stats();
            let b = &self.cost_baseline;
            out.push(
                json!({"kind": "cost", "totalCost": s.total_cost - b.total_cost,
                "inputTokens": s.total_input_tokens - b.total_input_tokens,
                "outputTokens": s.total_output_tokens - b.total_output_tokens}),
            );
        }
        self.flushing = false;
        self.refresh_metrics();
        out.push(self.status_effect(true));
        (out, r.notices, r.compressed)
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

    /// The footer effect for the current state, sent even if unchanged.
    pub fn footer(&mut self) -> Value {
        self.status_effect(true)
    }

    fn write_chain_spills(&self, plan: &ChainPlan) -> Vec<(usize, usize, WrittenSpill)> {
        let Some(dir) = &self.blob_dir else {
            return Vec::new();
        };
        plan.spills(&self.config)
            .into_iter()
            .filter_map(|(w, r, rec)| {
                condense_store::spill::write_blob(dir, &rec.key(), &rec.result_text.to_str())
                    .ok()
                    .map(|b| (w, r, b.to_spill(r)))
            })
            .collect()
    }

    /// `context_tree_query`.
    pub fn query(&self, ids: &[String]) -> Value {
        let blob_dir = self.blob_dir.clone().unwrap_or_default();
        let out = condense_core::query(&self.state, ids, |r| {
            condense_store::spill::read_spill(&blob_dir, r)
        });
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

    /// Replaces the config (a `/pruner` command changed it) and returns the
    /// `saveSettings` effect.
    pub fn set_config(&mut self, config: Config) -> Value {
        let block =
            config.to_settings_value(self.settings.get("contextPrune").unwrap_or(&Value::Null));
        self.settings = condense_core::replace_context_prune(&self.settings, block.clone());
        self.protection = Protection::new(&config);
        self.config = config;
        json!({"kind": "saveSettings", "contextPrune": block})
    }
}
