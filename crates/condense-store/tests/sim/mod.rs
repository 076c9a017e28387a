//! The simulation harness behind `tests/simulation.rs` (docs/reliability.md).
//!
//! Each simulated session is a real pi session file in a temporary
//! directory, driven the way the sidecar drives it: user prompts, tool turns
//! (with `turn_end` eager spills), final replies (`message_end` flushes with
//! the reply threaded in), budget and manual flushes, chain compression,
//! `context_tree_query` recovery calls, custom and bash messages from others,
//! and reloads (re-open the file and replay). Everything a flush decides is
//! appended with the store's [`Appender`], one whole line per entry, in the
//! order the sidecar returns the effects.
//!
//! Faults are injected on purpose:
//! - the summarizer answers `Failed` (error, timeout), `Unusable` (empty or
//!   truncated), `NotRun` (dead sidecar, cancelled), or an oversized summary;
//!   range fusion fails or answers nothing;
//! - spill writes fail (the blob directory is replaced by a plain file for the
//!   duration of the write);
//! - the process dies in the middle of a flush: after `k` of its `n` entries,
//!   or halfway through writing entry `k + 1` (a torn last line), or between a
//!   blob write and its index entry; pi itself dies halfway through appending
//!   a message. The session then restarts from the file.
//!
//! After every step the checks of docs/reliability.md run against the file
//! (re-opened and replayed, as a restart would) and the live state:
//! 1. nothing lost, 2. well-formed context, 3. deterministic render,
//! 4. crash-safe files; guarantee 5 (fail open) is checked inside each flush.
//!
//! Every choice comes from one seeded [`SplitMix64`]; a failure panics with
//! the session's seed and its last steps, and `CONDENSE_SIM_SEED=<seed>`
//! replays exactly that session.

#![allow(dead_code)]

mod actions;
mod checks;
mod compare;
mod content;
mod flush;
mod knobs;
mod output;
mod restart;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use condense_core::Branch;
use condense_core::Message;
use condense_core::Protection;
use condense_core::{BatchingMode, Config, PruneOn};
use condense_gen::SplitMix64;
use condense_store::append::{Appender, LockMode};
use condense_store::spill::blob_dir;
use serde_json::{json, Value};

pub use knobs::{session_seed, Knobs, Tally};
pub use output::visible_refs;

/// The first timestamp of a simulated session (ms).
const T0: i64 = 1_767_225_600_000;

/// Runs `knobs.sessions` sessions (or until the time budget is spent).
/// Panics with the failing session's seed and last steps.
pub fn run(knobs: &Knobs) -> Tally {
    let start = Instant::now();
    let mut total = Tally::default();
    for i in 0..knobs.sessions {
        if knobs.time_budget.is_some_and(|b| start.elapsed() >= b) {
            break;
        }
        let seed = session_seed(knobs.seed, i);
        let tally = run_session(seed, knobs);
        total.add(&tally);
    }
    total.elapsed = start.elapsed();
    total
}

/// Runs one session; panics with a reproducer on the first broken check.
pub fn run_session(seed: u64, knobs: &Knobs) -> Tally {
    let mut sim = Sim::new(seed, knobs);
    for step in 0..knobs.steps {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let action = sim.choose();
            sim.log(format!("step {step}: {action:?}"));
            sim.act(action)?;
            sim.check()
        }));
        let failure = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(panic) => Some(format!(
                "panic: {}",
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            )),
        };
        if let Some(mut e) = failure {
            if std::env::var_os("CONDENSE_SIM_DEBUG").is_some() {
                e.push_str(&sim.describe());
            }
            let tail: Vec<&String> = sim.log.iter().rev().take(25).collect();
            let tail: Vec<&str> = tail.iter().rev().map(|s| s.as_str()).collect();
            // Keep the files for a post-mortem.
            let kept = sim.dir.path().to_path_buf();
            std::mem::forget(std::mem::replace(
                &mut sim.dir,
                tempfile::tempdir().expect("tempdir"),
            ));
            panic!(
                "simulation failed: seed={seed:#x} step={step} (reproduce: CONDENSE_SIM_SEED={seed:#x} CONDENSE_SOAK_STEPS={} CONDENSE_SOAK_MAX_OUTPUT={} cargo test -p condense-store --test simulation replay_one_seed -- --nocapture)\nsession file kept in {}\n{e}\nlast steps:\n  {}",
                knobs.steps,
                knobs.max_output,
                kept.display(),
                tail.join("\n  ")
            );
        }
        sim.tally.steps += 1;
    }
    sim.tally.sessions = 1;
    sim.tally.clone()
}

// ---- the simulated session ----------------------------------------------------------------

/// One step of a simulated session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A user prompt (opens a task).
    Prompt,
    /// An assistant turn with tool calls, its results, `turn_end`.
    ToolTurn,
    /// A text-only reply (closes the task; `message_end` flush).
    Reply,
    /// The model calls `context_tree_query` on refs it sees.
    Query,
    /// Another extension's custom message.
    Custom,
    /// A user `!cmd` bash execution.
    Bash,
    /// `/pruner now`.
    ManualFlush,
    /// Re-open the file and replay (pi restarted cleanly).
    Reload,
    /// pi dies halfway through appending a message.
    TornAppend,
}

/// Where a flush's process dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    /// After `k` whole entries (`k` may be every entry: the reply is lost).
    After(usize),
    /// After `k` whole entries and half of entry `k + 1`.
    Torn(usize),
}

/// The simulated session.
pub struct Sim {
    rng: SplitMix64,
    seed: u64,
    dir: tempfile::TempDir,
    path: PathBuf,
    blobs: PathBuf,
    config: Config,
    protection: Protection,
    max_output: usize,
    fault_scale: u64,
    // The live view: what the sidecar holds.
    messages: Vec<Message>,
    entry_ts: Vec<Option<i64>>,
    state: Branch,
    clock: i64,
    open_task: bool,
    turn_index: i64,
    ids: Vec<String>,
    next_n: u64,
    outputs: Vec<(&'static str, Value, String)>,
    /// Line numbers of torn fragments that later appends turned into
    /// malformed middle lines.
    torn_lines: HashSet<usize>,
    /// Recoveries already verified (occurrence, record, blob size and time).
    verified: HashSet<String>,
    /// The next flush must crash here (deterministic crash-point tests).
    forced_crash: Option<Crash>,
    /// Every flush must write every entry (no random crash).
    no_random_crash: bool,
    /// Known bugs fail the check too.
    strict: bool,
    app: Option<Appender>,
    log: Vec<String>,
    /// What this session did.
    pub tally: Tally,
}

fn fmt_value(v: &Value) -> String {
    condense_store::json::to_string(v).unwrap_or_default()
}

impl Sim {
    /// A new session: a header-only file and a random config.
    pub fn new(seed: u64, knobs: &Knobs) -> Sim {
        let mut rng = SplitMix64::new(seed);
        let dir = tempfile::tempdir().expect("tempdir");
        let session_id = format!("{:016x}-sim", rng.next_u64());
        let path = dir.path().join(format!("{session_id}.jsonl"));
        let header = json!({"type": "session", "version": 3, "id": session_id,
            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/sim"});
        std::fs::write(&path, format!("{header}\n")).expect("write header");
        let blobs = blob_dir(&path, &session_id);
        let config = random_config(&mut rng);
        let protection = Protection::new(&config);
        let clock = T0 + rng.below(1_000_000_000) as i64;
        Sim {
            rng,
            seed,
            dir,
            path,
            blobs,
            config,
            protection,
            max_output: knobs.max_output.max(16),
            fault_scale: knobs.fault_scale,
            messages: Vec::new(),
            entry_ts: Vec::new(),
            state: Branch::new(),
            clock,
            open_task: false,
            turn_index: 0,
            ids: Vec::new(),
            next_n: 0,
            outputs: Vec::new(),
            torn_lines: HashSet::new(),
            verified: HashSet::new(),
            forced_crash: None,
            no_random_crash: false,
            strict: knobs.strict,
            app: None,
            log: Vec::new(),
            tally: Tally::default(),
        }
    }

    /// The session file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The config the session runs with.
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// Recompiles protection after [`Sim::config_mut`].
    pub fn config_changed(&mut self) {
        self.protection = Protection::new(&self.config);
    }

    /// Makes the next flush crash at `crash` (and no other flush crash at random).
    pub fn force_crash(&mut self, crash: Option<Crash>) {
        self.forced_crash = crash;
        self.no_random_crash = true;
    }

    /// The live state.
    pub fn state(&self) -> &Branch {
        &self.state
    }

    fn log(&mut self, line: String) {
        self.log.push(line);
    }

    /// A fault with `percent` probability, scaled by the knobs.
    fn fault(&mut self, percent: u64) -> bool {
        self.rng.below(10_000) < percent * self.fault_scale
    }

    fn tick(&mut self, lo: u64, hi: u64) -> i64 {
        self.clock += self.rng.range(lo, hi) as i64;
        self.clock
    }

    /// The session's appender (kept open between steps, as pi keeps its
    /// session manager; dropped at every restart).
    fn appender(&mut self) -> Result<Appender, String> {
        if let Some(app) = self.app.take() {
            return Ok(app);
        }
        let mut ids = self.rng.fork(0xa11e);
        Appender::open(&self.path, LockMode::Try)
            .map(|a| a.with_id_source(move || ids.next_u64()))
            .map_err(|e| format!("appender: {e}"))
    }

    fn push_message(&mut self, app: &mut Appender, m: Message, now: i64) -> Result<(), String> {
        app.append_message(&m, now)
            .map_err(|e| format!("append message: {e}"))?;
        self.messages.push(m);
        self.entry_ts.push(Some(now));
        self.tally.messages += 1;
        Ok(())
    }

    /// Picks the next action.
    pub fn choose(&mut self) -> Action {
        let r = self.rng.below(100);
        if !self.open_task {
            match r {
                0..=59 => Action::Prompt,
                60..=69 => Action::Custom,
                70..=77 => Action::Bash,
                78..=86 => Action::Reload,
                87..=93 => Action::ManualFlush,
                _ => Action::TornAppend,
            }
        } else {
            match r {
                0..=54 => Action::ToolTurn,
                55..=74 => Action::Reply,
                75..=81 => Action::Query,
                82..=85 => Action::Custom,
                86..=88 => Action::Bash,
                89..=93 => Action::Reload,
                94..=96 => Action::ManualFlush,
                _ => Action::TornAppend,
            }
        }
    }

    /// Runs one action (crashes included: a crashed step ends restarted).
    pub fn act(&mut self, action: Action) -> Result<(), String> {
        match action {
            Action::Prompt => self.prompt(),
            Action::ToolTurn => {
                let calls = self.calls();
                self.tool_turn(calls)
            }
            Action::Reply => self.reply(),
            Action::Query => self.recovery_query(),
            Action::Custom => self.custom_message(),
            Action::Bash => self.bash_message(),
            Action::ManualFlush => {
                let crashed = self.flush("manual", None)?;
                if crashed {
                    self.restart()?;
                }
                Ok(())
            }
            Action::Reload => {
                self.tally.reloads += 1;
                self.reload()
            }
            Action::TornAppend => self.torn_append(),
        }
    }
}

fn random_config(rng: &mut SplitMix64) -> Config {
    let mut c = Config {
        enabled: true,
        ..Config::default()
    };
    c.min_batch_chars = *rng.pick(&[0, 200, 1000]);
    c.batching_mode = if rng.chance(50) {
        BatchingMode::Turn
    } else {
        BatchingMode::AgentMessage
    };
    c.prune_on = if rng.chance(85) {
        PruneOn::AgentMessage
    } else {
        PruneOn::OnDemand
    };
    c.recovery_grace_turns = rng.below(4) as u32;
    c.protected_tools = vec!["todo".into()];
    c.protected_paths = vec!["**/skills/**/*.md".into(), "secret/**".into()];
    c.dedup_by_content_hash = rng.chance(80);
    c.spill_threshold = *rng.pick(&[4_096, 20_000, 65_536]);
    c.spill_preview_bytes = *rng.pick(&[64, 2_048]);
    c.chain_compression.enabled = rng.chance(85);
    c.chain_compression.rolling_window = rng.below(4) as u32;
    c.chain_compression.fuse_range_summary = rng.chance(70);
    c.chain_compression.strip_final_assistant_thinking = rng.chance(50);
    c.purge_errors.cooldown_turns = rng.range(1, 3) as u32;
    c.thinking_strip.enabled = rng.chance(30);
    c.thinking_strip.keep_last_turns = rng.range(1, 4) as u32;
    c
}
