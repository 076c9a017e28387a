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

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use condense_core::normalize_for_hash;
use condense_core::OccurrenceKey;
use condense_core::PlanStep;
use condense_core::Protection;
use condense_core::State;
use condense_core::ToolCallRecord;
use condense_core::{apply_chains, plan_chains, FusionJob};
use condense_core::{
    apply_flush, apply_spill, plan_flush, plan_spill, FlushEffect, FlushOutcome, JobResult,
    SummaryJob, Usage, WrittenSpill,
};
use condense_core::{capture_pending, capture_turn, without_protected};
use condense_core::{query, query_page, query_with, PageRequest, QueryOptions, QUERY_MAX_BYTES};
use condense_core::{render, Render, RenderSettings};
use condense_core::{BatchingMode, Config, PruneOn};
use condense_core::{Message, Role};
use condense_gen::SplitMix64;
use condense_store::append::{custom_entry_line, Appender, EntryBase, LockMode};
use condense_store::context::build_context;
use condense_store::effects::{entry_for, NewEntry};
use condense_store::replay::replay_branch;
use condense_store::session::{ProblemKind, Session};
use condense_store::spill::{blob_dir, read_spill, trusted_spill_path, write_blob};
use condense_store::time::parse_iso;
use serde_json::{json, Value};

/// The first timestamp of a simulated session (ms).
const T0: i64 = 1_767_225_600_000;

// ---- knobs and tallies ----------------------------------------------------------------

/// How much to simulate.
#[derive(Debug, Clone)]
pub struct Knobs {
    /// Sessions to run (each with its own seed).
    pub sessions: u64,
    /// Steps per session.
    pub steps: u64,
    /// The largest tool output generated (bytes).
    pub max_output: usize,
    /// The base seed; session `i` runs with `session_seed(seed, i)`.
    pub seed: u64,
    /// Stop starting sessions after this long.
    pub time_budget: Option<Duration>,
    /// Fault rates in percent (scaled; 100 = the default rates).
    pub fault_scale: u64,
    /// Known bugs (see [`KNOWN_BUG_COVERED_CHAIN`]) fail the run instead of
    /// being counted.
    pub strict: bool,
}

/// Known bug: a replayed `totalCost` can be one ulp off the written one
/// (serde_json is built without `float_roundtrip`).
pub const KNOWN_BUG_FLOAT_PARSE: &str = "replayed totalCost off by one ulp";

/// Known bug: chain compression of a chain that a per-batch summary covers
/// drops every result of the range, including results no flush indexed
/// (batches skipped as trivial or oversized, or still pending after a
/// summarizer failure). Those outputs are then neither visible nor
/// recoverable through `context_tree_query`. Only uncovered chains backfill.
pub const KNOWN_BUG_COVERED_CHAIN: &str = "covered chain drops unindexed results";

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim().replace('_', "");
    match v.parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={v:?} is not a number"),
    }
}

impl Knobs {
    /// The given defaults, overridden by `CONDENSE_SOAK_SESSIONS`,
    /// `CONDENSE_SOAK_STEPS`, `CONDENSE_SOAK_MAX_OUTPUT` (bytes),
    /// `CONDENSE_SOAK_SEED`, `CONDENSE_SOAK_SECONDS` and
    /// `CONDENSE_SOAK_FAULT_SCALE`.
    pub fn from_env(sessions: u64, steps: u64, max_output: usize) -> Knobs {
        Knobs {
            sessions: env_u64("CONDENSE_SOAK_SESSIONS").unwrap_or(sessions),
            steps: env_u64("CONDENSE_SOAK_STEPS").unwrap_or(steps),
            max_output: env_u64("CONDENSE_SOAK_MAX_OUTPUT").map_or(max_output, |n| n as usize),
            seed: env_u64("CONDENSE_SOAK_SEED").unwrap_or(0x5eed_c0de),
            time_budget: env_u64("CONDENSE_SOAK_SECONDS").map(Duration::from_secs),
            fault_scale: env_u64("CONDENSE_SOAK_FAULT_SCALE").unwrap_or(100),
            strict: std::env::var_os("CONDENSE_SIM_STRICT").is_some(),
        }
    }
}

/// The seed of session `i` of a run.
pub fn session_seed(base: u64, i: u64) -> u64 {
    SplitMix64::new(base ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).next_u64()
}

/// What a run did.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Sessions run.
    pub sessions: u64,
    /// Steps run (each followed by the full check).
    pub steps: u64,
    /// Messages appended.
    pub messages: u64,
    /// Tool results generated.
    pub tool_results: u64,
    /// Bytes of tool output generated.
    pub output_bytes: u64,
    /// The largest tool output (bytes).
    pub largest_output: u64,
    /// Flushes run (all triggers).
    pub flushes: u64,
    /// Tool calls summarized.
    pub summarized_calls: u64,
    /// Chains compressed.
    pub chains: u64,
    /// Outputs spilled to blobs.
    pub spills: u64,
    /// Dedup aliases written.
    pub dedup_aliases: u64,
    /// `context_tree_query` calls made by the simulated model.
    pub queries: u64,
    /// Reloads (re-open and replay) without a crash.
    pub reloads: u64,
    /// Restarts after a crash.
    pub restarts: u64,
    /// Tool results checked for guarantee 1 (summed over steps).
    pub results_checked: u64,
    /// Of which not verbatim in the render.
    pub results_not_verbatim: u64,
    /// Stubbed or dropped results whose ref appears nowhere in the render.
    pub no_visible_ref: u64,
    /// Of which spilled.
    pub no_visible_ref_spilled: u64,
    /// Injected faults by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Checks that failed on a known bug (non-strict runs), by bug.
    pub known_bugs: BTreeMap<&'static str, u64>,
    /// Render diagnostics seen, by kind.
    pub diagnostics: BTreeMap<&'static str, u64>,
    /// Elapsed time.
    pub elapsed: Duration,
}

impl Tally {
    fn fault(&mut self, kind: &'static str) {
        *self.faults.entry(kind).or_default() += 1;
    }

    /// Total injected faults.
    pub fn total_faults(&self) -> u64 {
        self.faults.values().sum()
    }

    fn add(&mut self, o: &Tally) {
        self.sessions += o.sessions;
        self.steps += o.steps;
        self.messages += o.messages;
        self.tool_results += o.tool_results;
        self.output_bytes += o.output_bytes;
        self.largest_output = self.largest_output.max(o.largest_output);
        self.flushes += o.flushes;
        self.summarized_calls += o.summarized_calls;
        self.chains += o.chains;
        self.spills += o.spills;
        self.dedup_aliases += o.dedup_aliases;
        self.queries += o.queries;
        self.reloads += o.reloads;
        self.restarts += o.restarts;
        self.results_checked += o.results_checked;
        self.results_not_verbatim += o.results_not_verbatim;
        self.no_visible_ref += o.no_visible_ref;
        self.no_visible_ref_spilled += o.no_visible_ref_spilled;
        for (k, v) in &o.faults {
            *self.faults.entry(k).or_default() += v;
        }
        for (k, v) in &o.known_bugs {
            *self.known_bugs.entry(k).or_default() += v;
        }
        for (k, v) in &o.diagnostics {
            *self.diagnostics.entry(k).or_default() += v;
        }
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "simulation: {} sessions, {} steps, {} faults injected in {:.1}s",
            self.sessions,
            self.steps,
            self.total_faults(),
            self.elapsed.as_secs_f64()
        )?;
        writeln!(
            f,
            "  messages {} | tool results {} ({:.1} MB, largest {:.2} MB) | flushes {} | calls summarized {} | chains {} | spills {} | dedup aliases {} | queries {} | reloads {} | restarts {}",
            self.messages,
            self.tool_results,
            self.output_bytes as f64 / 1e6,
            self.largest_output as f64 / 1e6,
            self.flushes,
            self.summarized_calls,
            self.chains,
            self.spills,
            self.dedup_aliases,
            self.queries,
            self.reloads,
            self.restarts
        )?;
        writeln!(
            f,
            "  guarantee-1 checks: {} results, {} of them not verbatim; {} recoverable with no ref visible in the render ({} spilled)",
            self.results_checked,
            self.results_not_verbatim,
            self.no_visible_ref,
            self.no_visible_ref_spilled
        )?;
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(f, "  faults: {}", faults.join(", "))?;
        let diags: Vec<String> = self
            .diagnostics
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(f, "  render diagnostics: {}", diags.join(", "))?;
        let bugs: Vec<String> = self
            .known_bugs
            .iter()
            .map(|(k, v)| format!("{k}: {v} results"))
            .collect();
        write!(
            f,
            "  known-bug hits: {}",
            if bugs.is_empty() {
                "none".to_owned()
            } else {
                bugs.join(", ")
            }
        )
    }
}

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

/// A tool call and its result, as generated.
#[derive(Debug, Clone)]
struct Call {
    id: String,
    name: &'static str,
    args: Value,
    text: String,
    is_error: bool,
}

/// What the file says, read as a restart would.
struct FileView {
    session: Session,
    messages: Vec<Message>,
    entry_ts: Vec<Option<i64>>,
    state: State,
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
    state: State,
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
            state: State::new(),
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
    pub fn state(&self) -> &State {
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

    // ---- generated content ----------------------------------------------------------

    fn text(&mut self, len: usize) -> String {
        const WORDS: [&str; 16] = [
            "error",
            "warning",
            "src/lib.rs",
            "fn",
            "main",
            "ok",
            "test",
            "passed",
            "failed",
            "→",
            "é",
            "😀",
            "0x1f",
            "\"quoted\"",
            "tab\there",
            "\\path",
        ];
        let mut pool = Vec::with_capacity(24);
        for i in 0..24 {
            let mut line = format!("{i:03}:");
            for _ in 0..self.rng.range(1, 10) {
                line.push(' ');
                let w: &&str = self.rng.pick(&WORDS[..]);
                line.push_str(w);
            }
            if self.rng.chance(10) {
                line.push_str("  ");
            }
            if self.rng.chance(5) {
                line.push('\r');
            }
            pool.push(line);
        }
        let mut out = String::with_capacity(len + 64);
        while out.len() < len {
            out.push_str(&pool[self.rng.below(pool.len() as u64) as usize]);
            out.push('\n');
        }
        let mut end = len.min(out.len());
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out
    }

    /// A tool output: mostly [`Self::text`], sometimes a shape paging must
    /// carry whole (over 2,000 lines, between 50 KiB and the spill
    /// threshold, one 80k-character line, unicode-heavy text) or one with a
    /// lone surrogate ([`LONE_SURROGATE`], written as `\ud83d` in the JSON).
    fn output_text(&mut self, len: usize) -> String {
        const UNICODE: [&str; 8] = ["é", "中文", "😀", "👩‍💻", "e\u{301}", "∑", "\u{10FFFF}", "ß"];
        match self.rng.below(100) {
            0..=2 => (0..self.rng.range(2_001, 4_500))
                .map(|i| format!("{i}\n"))
                .collect(),
            3..=5 => self.text_between(51_300, 65_000),
            6..=7 => (0..80_000)
                .map(|_| *self.rng.pick(&["a", "é", "😀", "中", " "][..]))
                .collect::<String>(),
            8..=10 => {
                let mut out = String::new();
                while out.len() < len.max(1) {
                    let piece: &&str = self.rng.pick(&UNICODE[..]);
                    out.push_str(piece);
                    if self.rng.chance(8) {
                        out.push('\n');
                    }
                }
                out
            }
            11..=12 => {
                let head = self.text(len / 2);
                let tail = self.text(len / 2);
                format!("{head}{LONE_SURROGATE}{tail}")
            }
            _ => self.text(len),
        }
    }

    fn text_between(&mut self, lo: u64, hi: u64) -> String {
        let len = self.rng.range(lo, hi) as usize;
        self.text(len)
    }

    fn output_len(&mut self) -> usize {
        let max = self.max_output;
        match self.rng.below(1000) {
            0..=79 => self.rng.below(3) as usize,
            80..=459 => self.rng.range(3, 400) as usize,
            460..=849 => self.rng.range(400, 6_000) as usize,
            850..=994 => self.rng.range(6_000, 40_000.min(max as u64)) as usize,
            _ => self.rng.range(40_000.min(max as u64), max as u64) as usize,
        }
    }

    fn new_id(&mut self, taken: &[String]) -> String {
        if !self.ids.is_empty() && self.rng.chance(12) {
            let id = self.rng.pick(&self.ids).clone();
            if !taken.contains(&id) {
                return id;
            }
        }
        self.next_n += 1;
        let n = self.next_n;
        let id = match self.rng.below(100) {
            0..=49 => {
                const B62: &[u8] =
                    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
                let tail: String = (0..22)
                    .map(|_| B62[self.rng.below(62) as usize] as char)
                    .collect();
                format!("toolu_01{tail}")
            }
            50..=74 => format!("call_{n}|fc_{n}"),
            75..=94 => format!("bash_{n}"),
            // Ids a file name must not take literally, from a tiny alphabet
            // so different ids can sanitize alike.
            _ => {
                let sep = *self.rng.pick(&["/", ":", "_", "|", "/../"]);
                format!("w{sep}{}", self.rng.below(3))
            }
        };
        if taken.contains(&id) {
            return format!("{id}-{n}");
        }
        self.ids.push(id.clone());
        id
    }

    fn call(&mut self, taken: &[String]) -> Call {
        let id = self.new_id(taken);
        let r = self.rng.below(100);
        if r >= 92 && !self.outputs.is_empty() {
            // The same output again (dedup), sometimes with trailing noise
            // the content hash normalizes away.
            let (name, args, text) = self.rng.pick(&self.outputs).clone();
            let text = if self.rng.chance(30) {
                format!("{text}  \r\n")
            } else {
                text
            };
            return Call {
                id,
                name,
                args,
                text,
                is_error: false,
            };
        }
        let len = self.output_len();
        let (name, args, is_error) = match r {
            0..=39 => {
                let n = self.rng.below(50);
                (
                    "bash",
                    json!({"command": format!("cargo test -p crate{n}")}),
                    self.rng.chance(10),
                )
            }
            40..=64 => {
                let path = match self.rng.below(100) {
                    0..=7 => format!("docs/skills/s{}/SKILL.md", self.rng.below(3)),
                    8..=12 => format!("secret/key{}.txt", self.rng.below(3)),
                    _ => format!("src/mod{}.rs", self.rng.below(40)),
                };
                ("read", json!({"path": path}), self.rng.chance(5))
            }
            65..=72 => ("grep", json!({"pattern": "fn main", "path": "src"}), false),
            73..=79 => ("todo", json!({"items": ["a", "b"]}), false),
            _ => {
                let content = self.text_between(100, 2_000);
                let failed = self.rng.chance(40);
                (
                    "write",
                    json!({"path": format!("src/out{}.rs", self.rng.below(9)), "content": content}),
                    failed,
                )
            }
        };
        let text = self.output_text(len);
        if self.outputs.len() < 64 && self.rng.chance(50) && text.len() < 200_000 {
            self.outputs.push((name, args.clone(), text.clone()));
        }
        Call {
            id,
            name,
            args,
            text,
            is_error,
        }
    }

    fn calls(&mut self) -> Vec<Call> {
        let n = self.rng.range(1, 4) as usize;
        let mut out: Vec<Call> = Vec::with_capacity(n);
        for _ in 0..n {
            let taken: Vec<String> = out.iter().map(|c| c.id.clone()).collect();
            out.push(self.call(&taken));
        }
        out
    }

    fn user_message(&mut self, text: &str) -> Message {
        let ts = self.tick(1_000, 60_000);
        Message::from_value(
            &json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}),
        )
        .expect("user message")
    }

    fn assistant(&mut self, text: Option<&str>, calls: &[Call]) -> Message {
        let mut content = Vec::new();
        if self.rng.chance(40) {
            let t = self.text_between(10, 600);
            content.push(json!({"type": "thinking", "thinking": t, "thinkingSignature": "c2ln"}));
        }
        if let Some(t) = text {
            content.push(json!({"type": "text", "text": t}));
        }
        for c in calls {
            content
                .push(json!({"type": "toolCall", "id": c.id, "name": c.name, "arguments": c.args}));
        }
        let ts = self.tick(200, 3_000);
        Message::from_value(&json!({
            "role": "assistant", "content": content, "api": "anthropic-messages",
            "provider": "anthropic", "model": "claude-sim",
            "usage": {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120,
                      "cost": {"input": 0.0003, "output": 0.0003, "cacheRead": 0, "cacheWrite": 0, "total": 0.0006}},
            "stopReason": if calls.is_empty() { "stop" } else { "toolUse" },
            "timestamp": ts,
        }))
        .expect("assistant message")
    }

    fn tool_result(&mut self, c: &Call, ts: i64) -> Message {
        self.tally.tool_results += 1;
        self.tally.output_bytes += c.text.len() as u64;
        self.tally.largest_output = self.tally.largest_output.max(c.text.len() as u64);
        let json = json!({
            "role": "toolResult", "toolCallId": c.id, "toolName": c.name,
            "content": [{"type": "text", "text": c.text}], "isError": c.is_error, "timestamp": ts,
        })
        .to_string();
        // What `JSON.stringify` writes for a string cut inside a pair.
        let json = json.replace(LONE_SURROGATE, "\\ud83d");
        Message::from_json(&json).expect("tool result")
    }

    fn custom_value(&mut self) -> (Value, Value) {
        let content = Value::String(format!(
            "note from another extension {}",
            self.rng.below(1000)
        ));
        (content, json!({"n": self.rng.below(10)}))
    }

    /// Appends another extension's custom message (in context as `custom`).
    fn append_custom_message(&mut self, app: &mut Appender) -> Result<(), String> {
        let (content, details) = self.custom_value();
        let now = self.tick(1, 500);
        app.append_custom_message("other-extension", &content, true, &details, now)
            .map_err(|e| format!("append custom message: {e}"))?;
        let m = Message::from_value(&json!({"role": "custom", "customType": "other-extension",
            "content": content, "display": true, "details": details, "timestamp": now}))
        .expect("custom message");
        self.messages.push(m);
        self.entry_ts.push(Some(now));
        self.tally.messages += 1;
        Ok(())
    }

    // ---- actions ----------------------------------------------------------------------

    fn prompt(&mut self) -> Result<(), String> {
        let text = format!("task {}: {}", self.rng.below(1000), self.text(80));
        let m = self.user_message(&text);
        let now = m.timestamp().unwrap_or(self.clock);
        let mut app = self.appender()?;
        self.push_message(&mut app, m, now)?;
        self.app = Some(app);
        self.open_task = true;
        Ok(())
    }

    fn custom_message(&mut self) -> Result<(), String> {
        let mut app = self.appender()?;
        self.append_custom_message(&mut app)?;
        self.app = Some(app);
        Ok(())
    }

    fn bash_message(&mut self) -> Result<(), String> {
        let ts = self.tick(100, 5_000);
        let output = self.text_between(0, 300);
        let m = Message::from_value(&json!({"role": "bashExecution", "command": "git status",
            "output": output, "exitCode": 0, "cancelled": false, "truncated": false, "timestamp": ts}))
        .expect("bash message");
        let mut app = self.appender()?;
        self.push_message(&mut app, m, ts)?;
        self.app = Some(app);
        Ok(())
    }

    fn tool_turn(&mut self, calls: Vec<Call>) -> Result<(), String> {
        let text = self.rng.chance(50).then(|| self.text(60));
        let assistant = self.assistant(text.as_deref(), &calls);
        let mut app = self.appender()?;
        let now = assistant.timestamp().unwrap_or(self.clock);
        self.push_message(&mut app, assistant.clone(), now)?;
        // Parallel calls can finish within one millisecond.
        let same_ts = self.rng.chance(15);
        let mut ts = self.tick(5, 2_000);
        let mut results = Vec::new();
        for (i, c) in calls.iter().enumerate() {
            if i > 0 && !same_ts {
                ts = self.tick(1, 2_000);
            }
            if i > 0 && self.rng.chance(2) {
                // Someone else's message lands between two results: the
                // later results become orphans the render sweeps.
                self.append_custom_message(&mut app)?;
            }
            let r = self.tool_result(c, ts);
            self.push_message(&mut app, r.clone(), ts.max(self.clock))?;
            results.push(r);
        }
        self.app = Some(app);
        self.turn_end(&assistant, &results)
    }

    /// `turn_end`: eager spill, then maybe a budget flush.
    fn turn_end(&mut self, assistant: &Message, results: &[Message]) -> Result<(), String> {
        self.turn_index += 1;
        let now = self.tick(1, 20);
        let batch = without_protected(
            capture_turn(assistant, results, self.turn_index, now),
            &self.protection,
        );
        let plan = plan_spill(&batch, &self.state, &self.config);
        if !plan.spill.is_empty() || !plan.aliases.is_empty() {
            let broken = !plan.spill.is_empty() && self.fault(8);
            let guard = if broken {
                self.tally.fault("spill-write-failed");
                Some(BrokenBlobDir::new(&self.blobs))
            } else {
                None
            };
            let mut written = Vec::new();
            for &i in &plan.spill {
                let c = &batch.calls[i];
                if let Ok(b) = write_blob(&self.blobs, &c.key(), &c.result_text) {
                    written.push(b.to_spill(i));
                }
            }
            drop(guard);
            if broken && !written.is_empty() {
                return Err("a spill write succeeded with the blob directory broken".into());
            }
            let (effects, _) = apply_spill(batch, &plan, &written, &mut self.state, &self.config);
            self.tally.spills += written.len() as u64;
            // The process may die after the blob write, before its entry.
            let crash = if !written.is_empty() && !self.no_random_crash && self.fault(4) {
                self.tally.fault("crash-after-blob-write");
                Some(Crash::After(0))
            } else {
                None
            };
            if self.write_effects(&effects, None, now, crash)? {
                return self.restart();
            }
        }
        if self.rng.chance(12) {
            let crashed = self.flush("budget", None)?;
            if crashed {
                return self.restart();
            }
        }
        Ok(())
    }

    fn reply(&mut self) -> Result<(), String> {
        let text = self.text_between(5, 300);
        let reply = self.assistant(Some(&text), &[]);
        if self.config.prune_on == PruneOn::AgentMessage {
            // `message_end` runs before pi persists the reply.
            let crashed = self.flush("message-end", Some(&reply))?;
            if crashed {
                // pi died before persisting the reply: the task stays open.
                return self.restart();
            }
        }
        let mut app = self.appender()?;
        let now = reply.timestamp().unwrap_or(self.clock);
        self.push_message(&mut app, reply, now)?;
        self.app = Some(app);
        self.open_task = false;
        Ok(())
    }

    /// The model pages outputs back in through refs it can see.
    fn recovery_query(&mut self) -> Result<(), String> {
        let rendered = self.render_live();
        let mut refs: Vec<String> = visible_refs(&rendered).into_iter().collect();
        refs.sort();
        let mut ids = Vec::new();
        for _ in 0..self.rng.range(1, 3) {
            if refs.is_empty() {
                break;
            }
            ids.push(refs.swap_remove(self.rng.below(refs.len() as u64) as usize));
        }
        if ids.is_empty() || self.rng.chance(10) {
            ids.push("t999999".to_owned());
        }
        self.tally.queries += 1;
        let taken = Vec::new();
        let id = self.new_id(&taken);
        let out = query(&self.state, &ids, |r| read_spill(&self.blobs, r));
        let call = Call {
            id,
            name: "context_tree_query",
            args: json!({"toolCallIds": ids}),
            text: out.text,
            is_error: false,
        };
        self.tool_turn(vec![call])
    }

    /// pi dies halfway through appending a message.
    fn torn_append(&mut self) -> Result<(), String> {
        self.tally.fault("torn-message-append");
        let m = self.user_message("this prompt never made it to disk whole");
        let base = EntryBase {
            id: "0badf00d",
            parent_id: None,
            timestamp: "2026-01-01T00:00:00.000Z",
        };
        let line =
            condense_store::append::message_entry_line(&m, &base).map_err(|e| e.to_string())?;
        self.write_torn(&line)?;
        self.restart()
    }

    // ---- flushes ----------------------------------------------------------------------

    /// The scripted summarizer, with its failure modes.
    fn summarize(&mut self, job: &SummaryJob) -> JobResult {
        let usage = Usage {
            input_tokens: 100 + job.batch.raw_chars() as u64 / 4,
            output_tokens: 20,
            cost: 0.001,
        };
        if self.fault(5) {
            self.tally.fault("summary-failed");
            let message = if self.rng.chance(50) {
                "summarizer timed out after 20s"
            } else {
                "429 rate limited"
            };
            return JobResult::Failed {
                message: message.into(),
                usage: self.rng.chance(50).then_some(usage),
            };
        }
        if self.fault(4) {
            self.tally.fault("summary-unusable");
            return JobResult::Unusable {
                usage: self.rng.chance(50).then_some(usage),
            };
        }
        if self.fault(3) {
            self.tally.fault("summary-not-run");
            return JobResult::NotRun;
        }
        let text = if self.fault(4) {
            self.tally.fault("summary-oversized");
            "x".repeat(job.batch.raw_chars() + 50)
        } else {
            job.batch
                .calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    format!(
                        "- [[{}:{}]] {} chars",
                        i + 1,
                        c.tool_name,
                        c.result_text.len()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        JobResult::Summary { text, usage }
    }

    fn fuse(&mut self, job: &FusionJob) -> JobResult {
        if self.fault(8) {
            self.tally.fault("fusion-failed");
            return match self.rng.below(3) {
                0 => JobResult::Failed {
                    message: "timeout".into(),
                    usage: None,
                },
                1 => JobResult::Unusable { usage: None },
                _ => JobResult::Summary {
                    text: "  ".into(),
                    usage: Usage::default(),
                },
            };
        }
        JobResult::Summary {
            text: format!("- fused {} summaries", job.summaries.len()),
            usage: Usage {
                input_tokens: 50,
                output_tokens: 10,
                cost: 0.0005,
            },
        }
    }

    /// One flush: capture, plan, summarize, apply, chains, entries.
    /// Returns true when the process "died" during it.
    fn flush(&mut self, trigger: &str, closing: Option<&Message>) -> Result<bool, String> {
        self.tally.flushes += 1;
        let now = self.tick(2, 50);
        let batches = capture_pending(
            &self.messages,
            &self.entry_ts,
            0,
            &self.state,
            &self.protection,
            self.config.batching_mode,
            now,
        );
        let captured = batches.len();
        let plan = plan_flush(batches, &self.state, &self.config);
        let empty = plan.is_empty();
        let results: Vec<JobResult> = plan.jobs.iter().map(|j| self.summarize(j)).collect();
        let r = apply_flush(plan, results, &mut self.state, &self.config);
        self.tally.summarized_calls += r.summarized_calls as u64;
        let restored: Vec<OccurrenceKey> = r
            .restored
            .iter()
            .flat_map(|b| b.calls.iter().map(|c| c.key()))
            .collect();
        let mut effects = r.effects.clone();
        if self.config.chain_compression.enabled && !empty {
            let cplan = plan_chains(
                &self.messages,
                closing,
                &self.state,
                &self.config,
                &self.protection,
                self.config.chain_compression.rolling_window,
            );
            let wanted = cplan.spills(&self.config);
            let broken = !wanted.is_empty() && self.fault(10);
            let guard = broken.then(|| {
                self.tally.fault("chain-spill-failed");
                BrokenBlobDir::new(&self.blobs)
            });
            let mut spills: Vec<(usize, usize, WrittenSpill)> = Vec::new();
            for (w, i, rec) in wanted {
                if let Ok(b) = write_blob(&self.blobs, &rec.key(), &rec.result_text.to_str()) {
                    spills.push((w, i, b.to_spill(i)));
                }
            }
            drop(guard);
            self.tally.spills += spills.len() as u64;
            let fusion: Vec<JobResult> = cplan.fusion_jobs.iter().map(|j| self.fuse(j)).collect();
            let at = self.tick(1, 20);
            let cr = apply_chains(cplan, fusion, &spills, &mut self.state, &self.config, at);
            self.tally.chains += cr.compressed.len() as u64;
            effects.extend(cr.effects);
        }
        self.tally.dedup_aliases += effects
            .iter()
            .filter(|e| matches!(e, FlushEffect::DedupAlias { .. }))
            .count() as u64;
        let outcome = match &r.outcome {
            FlushOutcome::Empty => "empty".to_owned(),
            FlushOutcome::Processed(o) => o.as_str().to_owned(),
            FlushOutcome::SummarizerFailed(_) => "error".to_owned(),
        };
        let metrics = json!({"ts": now, "trigger": trigger, "capturedBatches": captured,
            "processedBatches": r.processed_batches, "outcome": outcome,
            "metrics": {"openCycleThinkingTokens": 0, "largestChainSharePct": 0, "frontierGapTokens": 0}});
        let n = effects.len() + 1;
        let crash = match self.forced_crash.take() {
            Some(c) => Some(c),
            None if !self.no_random_crash && self.fault(10) => {
                let k = self.rng.below(n as u64 + 1) as usize;
                if k < n && self.rng.chance(50) {
                    self.tally.fault("crash-torn-entry");
                    Some(Crash::Torn(k))
                } else {
                    self.tally.fault("crash-between-entries");
                    Some(Crash::After(k))
                }
            }
            None => None,
        };
        if let Some(c) = crash {
            self.log(format!("  flush ({trigger}) of {n} entries crashes: {c:?}"));
        }
        let crashed = self.write_effects(&effects, Some(metrics), now, crash)?;
        if crashed {
            return Ok(true);
        }
        // Guarantee 5: a failed job's batches stay unpruned and pending.
        if !restored.is_empty() {
            let pending: HashSet<OccurrenceKey> = capture_pending(
                &self.messages,
                &self.entry_ts,
                0,
                &self.state,
                &self.protection,
                self.config.batching_mode,
                now,
            )
            .iter()
            .flat_map(|b| b.calls.iter().map(|c| c.key()))
            .collect();
            for k in &restored {
                if self.state.is_summarized(&k.id, k.result_timestamp) {
                    continue; // deduplicated against an indexed output
                }
                if !pending.contains(k) {
                    return Err(format!(
                        "guarantee 5: {k} went back to pending after a summarizer failure but the next capture does not retry it"
                    ));
                }
            }
        }
        Ok(false)
    }

    /// Appends a flush's entries in order (plus the metrics entry), the
    /// summaries joining the live messages as pi adds them. With a crash,
    /// stops where it says. Returns true when it crashed.
    fn write_effects(
        &mut self,
        effects: &[FlushEffect],
        metrics: Option<Value>,
        now: i64,
        crash: Option<Crash>,
    ) -> Result<bool, String> {
        let mut entries: Vec<NewEntry> = effects.iter().map(entry_for).collect();
        if let Some(m) = metrics {
            entries.push(NewEntry::Custom {
                custom_type: "context-prune-flush-metrics",
                data: m,
            });
        }
        let snapshot = match crash {
            Some(_) => Some(std::fs::read(&self.path).map_err(|e| e.to_string())?),
            None => None,
        };
        let mut app = self.appender()?;
        for (i, e) in entries.iter().enumerate() {
            match crash {
                Some(Crash::After(k)) if k == i => {
                    drop(app);
                    self.check_crash_state(snapshot.as_deref(), &entries[..k])?;
                    return Ok(true);
                }
                Some(Crash::Torn(k)) if k == i => {
                    let base = EntryBase {
                        id: "0badf00d",
                        parent_id: app.leaf_id(),
                        timestamp: "2026-01-01T00:00:00.000Z",
                    };
                    let line = match e {
                        NewEntry::Custom { custom_type, data } => {
                            custom_entry_line(custom_type, data, &base)
                        }
                        NewEntry::CustomMessage {
                            custom_type,
                            content,
                            display,
                            details,
                        } => condense_store::append::custom_message_entry_line(
                            custom_type,
                            content,
                            *display,
                            details,
                            &base,
                        ),
                    }
                    .map_err(|e| e.to_string())?;
                    drop(app);
                    self.write_torn(&line)?;
                    self.check_crash_state(snapshot.as_deref(), &entries[..k])?;
                    return Ok(true);
                }
                _ => {}
            }
            match e {
                NewEntry::Custom { custom_type, data } => {
                    app.append_custom(custom_type, data, now)
                        .map_err(|e| format!("append {custom_type}: {e}"))?;
                }
                NewEntry::CustomMessage {
                    custom_type,
                    content,
                    display,
                    details,
                } => {
                    app.append_custom_message(custom_type, content, *display, details, now)
                        .map_err(|e| format!("append {custom_type}: {e}"))?;
                    let m = Message::from_value(&json!({"role": "custom", "customType": custom_type,
                        "content": content, "display": display, "details": details, "timestamp": now}))
                    .expect("summary message");
                    self.messages.push(m);
                    self.entry_ts.push(Some(now));
                }
            }
        }
        let crashed = matches!(crash, Some(Crash::After(k)) if k >= entries.len());
        if crashed {
            drop(app);
            self.check_crash_state(snapshot.as_deref(), &entries)?;
        } else {
            self.app = Some(app);
        }
        Ok(crashed)
    }

    /// Guarantee 4 after a crash: the file replays to exactly the state of
    /// the session before the flush plus the entries written whole (the same
    /// entries appended to a copy without a crash).
    fn check_crash_state(
        &mut self,
        before: Option<&[u8]>,
        written: &[NewEntry],
    ) -> Result<(), String> {
        let Some(before) = before else {
            return Ok(());
        };
        let expected_path = self.dir.path().join("expected.jsonl");
        std::fs::write(&expected_path, before).map_err(|e| e.to_string())?;
        {
            let mut app =
                Appender::open(&expected_path, LockMode::Try).map_err(|e| e.to_string())?;
            for e in written {
                match e {
                    NewEntry::Custom { custom_type, data } => {
                        app.append_custom(custom_type, data, 0)
                            .map_err(|e| e.to_string())?;
                    }
                    NewEntry::CustomMessage {
                        custom_type,
                        content,
                        display,
                        details,
                    } => {
                        app.append_custom_message(custom_type, content, *display, details, 0)
                            .map_err(|e| e.to_string())?;
                    }
                }
            }
        }
        let expected = Session::open(&expected_path).map_err(|e| e.to_string())?;
        let (expected, _) = replay_branch(&expected.branch(None));
        let crashed = self.read_file()?;
        std::fs::remove_file(&expected_path).map_err(|e| e.to_string())?;
        if let Some(d) = facet_difference(&facets(&expected, true), &facets(&crashed.state, true)) {
            return Err(format!(
                "guarantee 4: after a crash with {} entries written the file replays to another state {d}",
                written.len()
            ));
        }
        Ok(())
    }

    /// Appends the first half of `line` (no newline): a torn last line.
    fn write_torn(&mut self, line: &str) -> Result<(), String> {
        self.app = None;
        let mut cut = 1 + self.rng.below(line.len().saturating_sub(1).max(1) as u64) as usize;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| e.to_string())?;
        let text = std::fs::read(&self.path).map_err(|e| e.to_string())?;
        // A torn line right after another torn line glues onto it.
        let mut bytes = Vec::new();
        if text.last() != Some(&b'\n') {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(&line.as_bytes()[..cut.max(1)]);
        f.write_all(&bytes).map_err(|e| e.to_string())?;
        let lines = text.split(|b| *b == b'\n').count() + usize::from(text.last() != Some(&b'\n'));
        // The fragment is the file's last line; once something is appended
        // after it, it reads as a malformed middle line.
        self.torn_lines.insert(lines);
        Ok(())
    }

    // ---- restart and checks ----------------------------------------------------------

    fn read_file(&self) -> Result<FileView, String> {
        let session = Session::open(&self.path).map_err(|e| format!("open: {e}"))?;
        // Guarantee 4: at most a torn last line (and the fragments of
        // earlier crashes, now malformed middle lines).
        let last_line = session
            .problems
            .iter()
            .map(|p| p.line)
            .chain(session.entries.iter().map(|e| e.line))
            .max()
            .unwrap_or(0);
        for p in &session.problems {
            let ok = match p.kind {
                ProblemKind::TornLastLine => {
                    p.line == last_line && self.torn_lines.contains(&p.line)
                }
                ProblemKind::Malformed => self.torn_lines.contains(&p.line),
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "guarantee 4: the reader reports {p} ({:?})",
                    p.kind
                ));
            }
        }
        let branch = session.branch(None);
        let ctx = build_context(&branch);
        let entry_ts = ctx
            .entry_ids
            .iter()
            .map(|id| session.entry(id).and_then(|e| parse_iso(&e.timestamp)))
            .collect();
        let (state, problems) = replay_branch(&branch);
        if !problems.is_empty() {
            return Err(format!("guarantee 4: replay problems {problems:?}"));
        }
        let messages = ctx.messages;
        drop(branch);
        Ok(FileView {
            session,
            messages,
            entry_ts,
            state,
        })
    }

    /// A clean reload (pi restarted, nothing lost): re-open and replay.
    pub fn reload(&mut self) -> Result<(), String> {
        self.replace_live()
    }

    /// A compact dump of the file's branch, state and render (for debugging).
    pub fn describe(&self) -> String {
        let Ok(file) = self.read_file() else {
            return "\n(file unreadable)".into();
        };
        let mut out = format!("\nconfig: {:?}\nbranch:\n", self.config);
        let brief = |m: &Message| {
            let sk = m.skeleton();
            let calls: Vec<&str> = sk.tool_calls.iter().map(|c| c.id.as_str()).collect();
            format!(
                "{:<12} ts={:?} id={:?} name={:?} calls={calls:?} size={}{}",
                m.role().map_or("?", |r| r.as_str()),
                sk.timestamp,
                sk.tool_call_id,
                sk.tool_name,
                m.size(),
                if sk.is_synthetic_chain {
                    " synthetic"
                } else {
                    ""
                }
            )
        };
        for (i, m) in file.messages.iter().enumerate() {
            out.push_str(&format!("  [{i}] {}\n", brief(m)));
        }
        out.push_str("chains:\n");
        for c in file.state.chains() {
            out.push_str(&format!("  {c:?}\n"));
        }
        out.push_str("records:\n");
        for r in file.state.records() {
            out.push_str(&format!(
                "  {} {} spill={:?} turn={}\n",
                r.key(),
                r.tool_name,
                r.spill_path,
                r.turn_index
            ));
        }
        let r = render(&file.messages, &file.state, &self.settings());
        out.push_str(&format!("diagnostics: {:?}\nrender:\n", r.diagnostics));
        for (i, m) in r.messages(&file.messages).iter().enumerate() {
            out.push_str(&format!("  [{i}] {}\n", brief(m)));
        }
        out
    }

    /// Re-open and replay after a crash: the live view becomes what the file says.
    pub fn restart(&mut self) -> Result<(), String> {
        self.tally.restarts += 1;
        self.replace_live()
    }

    fn replace_live(&mut self) -> Result<(), String> {
        self.app = None;
        let file = self.read_file()?;
        self.check_blobs(&file.state)?;
        self.messages = file.messages;
        self.entry_ts = file.entry_ts;
        self.state = file.state;
        // Whether a task is open: the last user prompt after the last reply.
        self.open_task = self
            .messages
            .iter()
            .rev()
            .find(|m| m.is(&Role::User) || m.is_text_only_assistant())
            .is_some_and(|m| m.is(&Role::User));
        Ok(())
    }

    fn check_blobs(&self, state: &State) -> Result<(), String> {
        for r in state.records() {
            let Some(path) = &r.spill_path else { continue };
            if trusted_spill_path(&self.blobs, r).is_none() {
                return Err(format!(
                    "guarantee 4: record {} points at spill file {path}, which is missing",
                    r.key()
                ));
            }
        }
        Ok(())
    }

    fn settings(&self) -> RenderSettings<'_> {
        RenderSettings {
            config: &self.config,
            protection: &self.protection,
        }
    }

    fn render_live(&self) -> Vec<Message> {
        render(&self.messages, &self.state, &self.settings()).messages(&self.messages)
    }

    /// Every check of docs/reliability.md against the file and the live view.
    pub fn check(&mut self) -> Result<(), String> {
        let file = self.read_file()?;
        self.check_blobs(&file.state)?;
        // The live view is what the file says.
        let live_json: Vec<&str> = self.messages.iter().map(Message::json).collect();
        let file_json: Vec<&str> = file.messages.iter().map(Message::json).collect();
        if live_json != file_json {
            let at = live_json
                .iter()
                .zip(&file_json)
                .position(|(a, b)| a != b)
                .unwrap_or(live_json.len().min(file_json.len()));
            return Err(format!(
                "the live messages differ from the file's at {at} ({} vs {})\n live: {:.300}\n file: {:.300}",
                live_json.len(),
                file_json.len(),
                live_json.get(at).unwrap_or(&""),
                file_json.get(at).unwrap_or(&"")
            ));
        }
        if let Some(d) = facet_difference(
            &facets(&self.state, self.strict),
            &facets(&file.state, self.strict),
        ) {
            return Err(format!(
                "guarantee 4: the replayed state differs from the live one {d}"
            ));
        }
        // Guarantee 3: twice, and after a restart, byte for byte.
        let settings = self.settings();
        let first = render(&self.messages, &self.state, &settings);
        let second = render(&self.messages, &self.state, &settings);
        let restarted = render(&file.messages, &file.state, &settings);
        let a = first.messages(&self.messages);
        if first_difference(&a, &second.messages(&self.messages)).is_some()
            || first.diagnostics != second.diagnostics
        {
            return Err("guarantee 3: two renders of the same branch and state differ".into());
        }
        let output = restarted.messages(&file.messages);
        if let Some(at) = first_difference(&a, &output) {
            return Err(format!(
                "guarantee 3: the render after a restart differs at {at} ({} vs {} messages)\n live:      {:.400}\n restarted: {:.400}",
                a.len(),
                output.len(),
                a.get(at).map_or("", Message::json),
                output.get(at).map_or("", Message::json)
            ));
        }
        for d in &restarted.diagnostics {
            *self.tally.diagnostics.entry(d.kind.as_str()).or_default() += 1;
        }
        check_well_formed(&output)?;
        self.check_nothing_lost(&file, &restarted, &output)
    }

    /// Guarantee 1 over the file's branch and its render.
    fn check_nothing_lost(
        &mut self,
        file: &FileView,
        rendered: &Render,
        output: &[Message],
    ) -> Result<(), String> {
        // Input positions the render keeps as they are.
        let mut kept = vec![rendered.plan.is_none(); file.messages.len()];
        if let Some(plan) = &rendered.plan {
            for step in &plan.steps {
                if let PlanStep::Keep(r) = step {
                    kept[r.clone()].iter_mut().for_each(|k| *k = true);
                }
            }
        }
        let mut synthetics: Option<Vec<String>> = None;
        // Occurrences the refs visible in the render lead to.
        let mut reachable: Option<HashSet<(String, Option<i64>)>> = None;
        let orphan = orphans(&file.messages);
        let state = &file.state;
        for (i, m) in file.messages.iter().enumerate() {
            if !m.is(&Role::ToolResult) {
                continue;
            }
            self.tally.results_checked += 1;
            if kept[i] {
                continue;
            }
            self.tally.results_not_verbatim += 1;
            let sk = m.skeleton();
            let id = sk.tool_call_id.clone().unwrap_or_default();
            let ts = sk.timestamp;
            if let Some(key_ts) = state.lookup_key_for_result(&id, ts) {
                let Some(record) = state.record_for(&id, key_ts) else {
                    return Err(format!(
                        "guarantee 1: input[{i}] {id}@{ts:?} is summarized but has no record"
                    ));
                };
                let aliased = state.dedup_original(&id, key_ts).is_some();
                self.check_recoverable(state, record, m, key_ts, aliased)
                    .map_err(|e| format!("guarantee 1: input[{i}] {id}@{ts:?}: {e}"))?;
                // Not a guarantee, counted: can the model find a ref for it?
                let reachable = reachable.get_or_insert_with(|| {
                    let mut out = HashSet::new();
                    for r in visible_refs(output) {
                        for rec in state.records_for_query(&r) {
                            out.insert((rec.tool_call_id.clone(), rec.result_timestamp));
                        }
                    }
                    out
                });
                let rk = record.key();
                if !orphan[i]
                    && !reachable.contains(&(id.clone(), ts))
                    && !reachable.contains(&(rk.id.clone(), rk.result_timestamp))
                {
                    self.tally.no_visible_ref += 1;
                    if record.spill_path.is_some() {
                        self.tally.no_visible_ref_spilled += 1;
                    } else if std::env::var_os("CONDENSE_SIM_DEBUG_REFS").is_some() {
                        eprintln!(
                            "no visible ref: input[{i}] {id}@{ts:?} record {} short={:?} alias={:?} turn={}\n{}",
                            record.key(),
                            state.short_ref(&id, key_ts),
                            state.dedup_original(&id, key_ts),
                            record.turn_index,
                            self.describe()
                        );
                    }
                }
                continue;
            }
            let original = m.result_text();
            let name = sk.tool_name.clone().unwrap_or_default();
            let block = format!(
                "<protected-output tool=\"{}\">\n{}\n</protected-output>",
                name.replace('"', "&quot;"),
                condense_core::neutralize_closing_tags(&original)
            );
            let synthetics = synthetics.get_or_insert_with(|| {
                output
                    .iter()
                    .filter(|m| m.is(&Role::User) && m.skeleton().is_synthetic_chain)
                    .filter_map(|m| {
                        m.to_value().unwrap()["content"][0]["text"]
                            .as_str()
                            .map(str::to_owned)
                    })
                    .collect()
            });
            if synthetics.iter().any(|s| s.contains(&block)) {
                continue;
            }
            if orphan[i] {
                continue;
            }
            if !self.strict && in_covered_chain(&file.messages, state, i) {
                // Known bug (docs/reliability.md): a chain covered by a
                // per-batch summary drops results no flush indexed.
                *self
                    .tally
                    .known_bugs
                    .entry(KNOWN_BUG_COVERED_CHAIN)
                    .or_default() += 1;
                continue;
            }
            return Err(format!(
                "guarantee 1: input[{i}] result {id}@{ts:?} ({name}, {} bytes) is not in the render, not summarized, not relocated and not an orphan",
                original.len()
            ));
        }
        Ok(())
    }

    /// The record behind a stubbed result gives its original text back,
    /// through `context_tree_query` under its key. (Checked once per
    /// occurrence and record: originals and blobs do not change.)
    fn check_recoverable(
        &mut self,
        state: &State,
        record: &ToolCallRecord,
        m: &Message,
        key_ts: Option<i64>,
        aliased: bool,
    ) -> Result<(), String> {
        let sk = m.skeleton();
        let id = sk.tool_call_id.as_deref().unwrap_or_default();
        let mut seen = format!(
            "{}|{:?}|{}|{}|{aliased}",
            OccurrenceKey::new(id, sk.timestamp),
            key_ts,
            record.key(),
            record.result_text.to_str().len()
        );
        if let Some(path) = &record.spill_path {
            let meta = std::fs::metadata(path)
                .map_err(|e| format!("spill file {path} of {}: {e}", record.key()))?;
            seen.push_str(&format!(
                "|{path}|{}|{:?}",
                meta.len(),
                meta.modified().ok()
            ));
        }
        if self.verified.contains(&seen) {
            return Ok(());
        }
        let original = m.result_text();
        let full = match &record.spill_path {
            Some(path) => {
                let text = read_spill(&self.blobs, record)
                    .ok_or_else(|| format!("spill file {path} cannot be read back"))?;
                if record.spill_bytes != Some(text.len() as u64) {
                    return Err(format!(
                        "spill file {path} holds {} bytes, the record says {:?}",
                        text.len(),
                        record.spill_bytes
                    ));
                }
                text
            }
            None => record.result_text.to_str().into_owned(),
        };
        let same = if aliased {
            normalize_for_hash(&full) == normalize_for_hash(&original)
        } else {
            full == original
        };
        if !same {
            return Err(format!(
                "the record {} holds {} bytes that are not the original {} bytes (spill: {:?})\n  original head: {:?}\n  recovered head: {:?}",
                record.key(),
                full.len(),
                original.len(),
                record.spill_path,
                &original[..floor(&original, 80)],
                &full[..floor(&full, 80)]
            ));
        }
        let key = OccurrenceKey::new(id, key_ts).to_string();
        // Every output must come back whole through pages. A spill is read
        // once for all of its pages. Each page costs a scan of the output,
        // so past PAGE_THROUGH_BYTES the pages are sampled, each checked
        // against the same page of the original (that pages join back into
        // the output is proven for any text by core's `query_pages` tests).
        let spill = std::cell::OnceCell::new();
        let read = |r: &ToolCallRecord| spill.get_or_init(|| read_spill(&self.blobs, r)).clone();
        if full.len() <= PAGE_THROUGH_BYTES {
            let back = read_through_pages(state, &key, read)?;
            if back != full {
                return Err(format!(
                    "context_tree_query({key}) pages give {} bytes back, not the {} bytes of the output",
                    back.len(),
                    full.len()
                ));
            }
        } else {
            let total = query_page(&full, PageRequest::default()).total;
            for offset in [1, total / 2, total.saturating_sub(3)] {
                let request = PageRequest {
                    offset: Some(offset.max(1)),
                    limit: None,
                };
                let want = query_page(&full, request).text;
                let options = QueryOptions {
                    page: request,
                    branch: &[],
                };
                let out = query_with(state, std::slice::from_ref(&key), options, read);
                if out.results.is_empty() || !out.text.contains(want) {
                    return Err(format!(
                        "context_tree_query({key}) offset {offset} does not give that page back"
                    ));
                }
            }
        }
        self.verified.insert(seen);
        Ok(())
    }
}

/// Outputs up to this size are read back through every page.
const PAGE_THROUGH_BYTES: usize = 512 * 1024;

/// Stands for a lone high surrogate in generated outputs; the tool result's
/// JSON carries `\ud83d` in its place, which reads back as U+FFFD.
const LONE_SURROGATE: char = '\u{E0FF}';

/// Pages through `key`'s output with `context_tree_query`'s `offset`, as
/// the truncation notices say, and joins the pages back.
fn read_through_pages(
    state: &State,
    key: &str,
    read_spill: impl Fn(&ToolCallRecord) -> Option<String>,
) -> Result<String, String> {
    let mut whole = String::new();
    // A paged call always ends with a notice line, so an output that itself
    // holds notice-like lines (a recovery's own answer) is read right.
    let mut offset = Some(1);
    loop {
        let options = QueryOptions {
            page: PageRequest {
                offset,
                limit: None,
            },
            branch: &[],
        };
        let out = query_with(state, &[key.to_owned()], options, &read_spill);
        if out.results.len() != 1 {
            return Err(format!(
                "context_tree_query({key}) finds no record: {:.300}",
                out.text
            ));
        }
        let body = out
            .text
            .split_once("\n\n")
            .map(|(_, b)| b)
            .ok_or_else(|| format!("context_tree_query({key}): no body: {:.300}", out.text))?;
        let cut = body
            .rfind('\n')
            .ok_or_else(|| format!("context_tree_query({key}): no notice: {body:.300}"))?;
        let (page, notice) = body.split_at(cut);
        if notice.starts_with("\n[Lines ") && notice.ends_with("the end of the output.]") {
            whole.push_str(page);
            return Ok(whole);
        }
        if !notice.starts_with("\n[Output truncated: lines ") {
            return Err(format!(
                "context_tree_query({key}): no notice: {notice:.300}"
            ));
        }
        if page.is_empty() || page.len() > QUERY_MAX_BYTES {
            return Err(format!(
                "context_tree_query({key}) gave a page of {} bytes: {notice}",
                page.len()
            ));
        }
        whole.push_str(page);
        if !notice.contains("which line") {
            whole.push('\n');
        }
        offset = notice
            .rsplit("offset=")
            .next()
            .and_then(|n| n.strip_suffix(".]"))
            .and_then(|n| n.parse().ok());
        if offset.is_none() {
            return Err(format!(
                "context_tree_query({key}): the notice does not say how to continue: {notice}"
            ));
        }
    }
}

fn floor(s: &str, n: usize) -> usize {
    let mut n = n.min(s.len());
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// The first position where two message lists differ (byte for byte).
pub fn first_difference(a: &[Message], b: &[Message]) -> Option<usize> {
    let common = a.iter().zip(b).position(|(x, y)| x.json() != y.json());
    match common {
        Some(i) => Some(i),
        None if a.len() != b.len() => Some(a.len().min(b.len())),
        None => None,
    }
}

/// True if input `i` lies inside a chain the state compresses whose body
/// came from per-batch summaries (not the deterministic, backfilling kind).
fn in_covered_chain(messages: &[Message], state: &State, i: usize) -> bool {
    state.chains().any(|c| {
        if c.body_source.as_deref() == Some("deterministic") {
            return false;
        }
        let start = messages
            .iter()
            .position(|m| m.is(&Role::User) && m.timestamp() == Some(c.start_user_timestamp));
        let end = messages.iter().position(|m| {
            m.is(&Role::Assistant)
                && m.timestamp().is_some()
                && m.timestamp() == c.final_assistant_timestamp
        });
        matches!((start, end), (Some(s), Some(e)) if s < i && i < e)
    })
}

/// Replaces the blob directory by a plain file while it lives, so every
/// spill write fails; puts the directory back when dropped.
struct BrokenBlobDir {
    blobs: PathBuf,
    aside: PathBuf,
    moved: bool,
}

impl BrokenBlobDir {
    fn new(blobs: &Path) -> BrokenBlobDir {
        let aside = blobs.with_extension("aside");
        let moved = blobs.exists();
        if moved {
            std::fs::rename(blobs, &aside).expect("move the blob dir aside");
        }
        std::fs::write(blobs, "not a directory").expect("a file where the blob dir was");
        BrokenBlobDir {
            blobs: blobs.to_path_buf(),
            aside,
            moved,
        }
    }
}

impl Drop for BrokenBlobDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.blobs);
        if self.moved {
            std::fs::rename(&self.aside, &self.blobs).expect("restore the blob dir");
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

/// What a state holds, for comparing the live state with a replay. (The
/// short-ref counter is left out: an oversized summary burns refs that are
/// never written, so a restart may number later refs lower; refs in use are
/// compared through the renders.)
pub fn facets(s: &State, exact_cost: bool) -> Vec<String> {
    let mut out: Vec<String> = s
        .records()
        .iter()
        .map(|r| format!("record {r:?}"))
        .collect();
    out.extend(s.summary_bodies().iter().map(|b| format!("body {b:?}")));
    out.extend(s.chains().map(|c| format!("chain {c:?}")));
    out.push(format!("frontier {:?}", s.frontier()));
    let mut stats = s.stats().clone();
    if !exact_cost {
        // Known issue: serde_json parses floats to within one ulp unless its
        // `float_roundtrip` feature is on, so a replayed `totalCost` may be
        // one ulp off the written one.
        stats.total_cost = (stats.total_cost * 1e9).round() / 1e9;
    }
    out.push(format!("stats {stats:?}"));
    out.push(format!("indexed {}", s.indexed_count()));
    out
}

/// The first line two facet lists differ in.
fn facet_difference(a: &[String], b: &[String]) -> Option<String> {
    let at = a.iter().zip(b).position(|(x, y)| x != y);
    match at {
        Some(i) => Some(format!(
            "at {i}:\n live: {:.600}\n file: {:.600}",
            a[i], b[i]
        )),
        None if a.len() != b.len() => Some(format!(
            "lengths {} vs {}; extra: {:.600}",
            a.len(),
            b.len(),
            a.get(b.len()).or(b.get(a.len())).map_or("", String::as_str)
        )),
        None => None,
    }
}

/// The orphan rule on the input: an assistant opens its calls, a result
/// consumes its id, anything else closes the set. A result whose id is not
/// open is an orphan (no call left to answer).
pub fn orphans(messages: &[Message]) -> Vec<bool> {
    let mut open: Vec<String> = Vec::new();
    messages
        .iter()
        .map(|m| match m.role() {
            Some(Role::Assistant) => {
                open = m
                    .skeleton()
                    .tool_calls
                    .iter()
                    .map(|c| c.id.clone())
                    .collect();
                false
            }
            Some(Role::ToolResult) => {
                let id = m.skeleton().tool_call_id.as_deref().unwrap_or("");
                match open.iter().position(|o| o == id) {
                    Some(p) => {
                        open.swap_remove(p);
                        false
                    }
                    None => true,
                }
            }
            _ => {
                open.clear();
                false
            }
        })
        .collect()
}

/// Guarantee 2: every tool result answers a call of the assistant that
/// opens its run of results, at most once; nothing starts with a result.
pub fn check_well_formed(output: &[Message]) -> Result<(), String> {
    let mut open: Option<(usize, HashSet<String>)> = None;
    let mut answered: HashSet<String> = HashSet::new();
    for (i, m) in output.iter().enumerate() {
        match m.role() {
            Some(Role::Assistant) => {
                let calls = m
                    .skeleton()
                    .tool_calls
                    .iter()
                    .map(|c| c.id.clone())
                    .collect();
                open = Some((i, calls));
                answered.clear();
            }
            Some(Role::ToolResult) => {
                let id = m.skeleton().tool_call_id.clone().unwrap_or_default();
                let Some((at, calls)) = &open else {
                    return Err(format!(
                        "guarantee 2: output[{i}] result {id} follows no assistant"
                    ));
                };
                if !calls.contains(&id) {
                    return Err(format!(
                        "guarantee 2: output[{i}] result {id} answers no call of output[{at}]"
                    ));
                }
                if !answered.insert(id.clone()) {
                    return Err(format!("guarantee 2: output[{i}] answers {id} twice"));
                }
            }
            _ => open = None,
        }
    }
    Ok(())
}

/// The refs a model can read in a render: stub refs, chain `tools` lists,
/// summary footers and deterministic bodies.
pub fn visible_refs(output: &[Message]) -> HashSet<String> {
    let mut out = HashSet::new();
    for m in output {
        let v = m.to_value().unwrap();
        let text = match m.role() {
            Some(Role::ToolResult) | Some(Role::User) | Some(Role::Custom) => {
                let mut t = String::new();
                if let Some(s) = v["content"].as_str() {
                    t.push_str(s);
                }
                for b in v["content"].as_array().into_iter().flatten() {
                    if let Some(s) = b["text"].as_str() {
                        t.push_str(s);
                        t.push('\n');
                    }
                }
                t
            }
            _ => continue,
        };
        let mut rest = text.as_str();
        while let Some(p) = rest.find("ref `") {
            rest = &rest[p + 5..];
            if let Some(end) = rest.find('`') {
                out.insert(rest[..end].to_owned());
            }
        }
        for line in text.lines() {
            let listed = line
                .strip_prefix("**Summarized tool refs**:")
                .or_else(|| line.strip_prefix("Refs:"));
            if let Some(list) = listed {
                out.extend(
                    list.split(',')
                        .map(|r| r.trim().trim_matches('`'))
                        .filter(|r| !r.is_empty())
                        .map(str::to_owned),
                );
            }
            if let Some(p) = line.find("tools=\"") {
                let list = &line[p + 7..];
                if let Some(end) = list.find('"') {
                    out.extend(
                        list[..end]
                            .split(',')
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned),
                    );
                }
            }
        }
    }
    out
}
