//! How much a run simulates (`Knobs`, read from the soak variables), the
//! known bugs a non-strict run counts instead of failing on, and what a run
//! did (`Tally`).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use condense_gen::SplitMix64;

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
    pub(super) fn fault(&mut self, kind: &'static str) {
        *self.faults.entry(kind).or_default() += 1;
    }

    /// Total injected faults.
    pub fn total_faults(&self) -> u64 {
        self.faults.values().sum()
    }

    pub(super) fn add(&mut self, o: &Tally) {
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
