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
//!
//! [`Engine`] is one type with one set of private fields, its methods
//! split by the event they answer so each file reads as one concern: this
//! file holds the state itself; `start.rs` replay on start, `context.rs`
//! the per-call sync and render (and the cache-aware switch), `turn.rs`
//! turn end, replies and run starts and ends (capture, spill, the flush
//! triggers), `flush_steps.rs` the engine's side of a flush, `status.rs`
//! the metrics and the footer, `accessors.rs` queries, reads and the
//! config change.

use std::path::PathBuf;

use condense_core::Branch;
use condense_core::Message;
use condense_core::Protection;
use condense_core::SummarizerStats;
use condense_core::{BudgetGate, CapturedBatch, ContextMetrics, DiagnosticSink};
use condense_core::{Config, FlushEffect, Notice, SessionEconomy};
use condense_store::effects::entry_for;
use condense_store::entries::SwitchEntryData;
use serde_json::Value;

use crate::injected::Injected;
use crate::protocol::{Delivery, Effect, Effects};
use crate::switch::CallLog;

mod accessors;
mod context;
mod flush_steps;
mod misses;
mod start;
mod status;
mod turn;

#[cfg(doc)]
use crate::flush::FlushSteps;
pub use flush_steps::{EngineFlush, EngineLock, FlushDone};
pub use start::{jsonl, StartParams};

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
    state: Branch,
    pending: Vec<CapturedBatch>,
    rearmed: bool,
    /// Under the cache-aware policy, a flush a reply asked for: it runs when
    /// the next agent run starts, so a session that ends there never pays
    /// for summaries no call would see.
    reply_flush: ReplyFlush,
    /// The next flush summarizes each run's turns in one prompt (under the
    /// bound against no pruning, [`crate::switch::merged_by_run`]).
    merge_runs: bool,
    /// The next flush leaves out the messages from this one on: the turn a
    /// long run's flush ran at, whose outputs no call has sent yet
    /// ([`Engine::turn_end`]).
    unsent_from: Option<usize>,
    /// The next flush summarizes only the turns from this one on: the
    /// newest run's, when the bound pays for them and not for everything
    /// pending ([`Engine::flush_affordable`]).
    flush_from_turn: Option<i64>,
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
    /// Where the learned misses are kept.
    misses_file: misses::MissesFile,
    economy: SessionEconomy,
    /// The start switch a flush recorded ([`Engine::start_gating`]) whose
    /// entry has not been returned yet: it goes out before the flush's own.
    gating_started: Option<SwitchEntryData>,
    /// The running flush is the user's (`/pruner now`, `/pruner compact`).
    user_flush: bool,
    /// A flush of the user's finished since the last call: under the
    /// cache-aware policy the next call shows what it prepared.
    user_asked: bool,
    /// The host compacts its context when asked (`Effect::Compact`).
    compacts_on_request: bool,
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
            state: Branch::new(),
            pending: Vec::new(),
            rearmed: false,
            reply_flush: ReplyFlush::None,
            merge_runs: false,
            unsent_from: None,
            flush_from_turn: None,
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
            misses_file: misses::MissesFile::default(),
            economy: SessionEconomy::new(),
            gating_started: None,
            user_flush: false,
            user_asked: false,
            compacts_on_request: false,
        }
    }
}
