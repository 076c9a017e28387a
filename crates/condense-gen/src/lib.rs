//! Synthetic pi session files: one deterministic generator for the CLI
//! (`condense gen`), the benches, the tests and the demo.
//!
//! [`generate`] writes a real pi session file (format v3) from a seed: the
//! session header, `model_change` and `thinking_level_change` first, then
//! `message` entries in pi's own shapes, chained by `parentId` with 8-hex
//! ids and ISO timestamps:
//! - user prompts (`content` as text blocks);
//! - assistant messages with a `thinking` block (and its signature), prose,
//!   `toolCall` blocks, `usage` (tokens and cost), `api`, `provider`,
//!   `model` and `stopReason`;
//! - tool results (`toolCallId`, `toolName`, text blocks, `isError`);
//! - final text replies closing each task.
//!
//! The same seed and options always give the same bytes (a tiny in-crate
//! [`SplitMix64`] drives every choice; there is no clock and no `rand`).
//!
//! With [`SynthOptions::pruned`], the generator also runs condense's real
//! flush pipeline while it writes, exactly where a live pi-condense would,
//! and appends what it produces with [`entry_for`], so the file reads like a
//! long pi-condense session:
//! - at each tool turn's end, oversized outputs (at least
//!   `spillThreshold` chars) are spilled to sidecar blobs and indexed
//!   ([`plan_spill`] / [`apply_spill`]);
//! - at each task's final reply (`message-end`), and every
//!   [`SynthOptions::flush_every`] turns of a [`Shape::ToolTurns`] session
//!   (`budget`), a flush rescans the branch ([`capture_branch`],
//!   [`trim_to_pending`], [`group_by_mode`]), plans and applies it with a
//!   deterministic stand-in summarizer ([`stand_in_summary`]: one
//!   `- [[N:tool]] …` bullet per call), then compresses the chains the
//!   rolling window lets go ([`plan_chains`] / [`apply_chains`], fusion by
//!   [`stand_in_fusion`]). Its entries (summaries as hidden custom messages
//!   before their index entries, dedup aliases, frontier, stats, chains, then
//!   a `context-prune-flush-metrics` entry) come before the reply's own
//!   entry, as pi persists a message only after its `message_end` handlers.
//!
//! Sizes are in tokens as pi estimates them (`chars / 4` of text, thinking,
//! tool-call names and arguments, and tool-result text): the context the
//! model would be sent without pruning.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use condense_core::compute_context_metrics;
use condense_core::Config;
use condense_core::FusionJob;
use condense_core::Message;
use condense_core::OccurrenceKey;
use condense_core::Protection;
use condense_core::State;
use condense_core::TriggerKind;
use condense_core::{
    capture_branch, capture_turn, group_by_mode, trim_to_pending, without_protected,
};
use condense_core::{FlushEffect, JobResult, SummaryJob, Usage, WrittenSpill};
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

// ---- PRNG -----------------------------------------------------------------------

/// splitmix64: a tiny, fast, well-mixed PRNG (Steele, Lea and Flood 2014).
/// Every choice the generator makes comes from one of these, seeded from
/// [`SynthOptions::seed`].
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator with this seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Multiply-shift: unbiased enough for a generator of test data.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `percent / 100`.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// A generator for a sub-stream, independent of later draws from `self`.
    pub fn fork(&mut self, salt: u64) -> SplitMix64 {
        SplitMix64::new(self.next_u64() ^ salt.wrapping_mul(0xa076_1d64_78bd_642f))
    }
}

/// FNV-1a of a string, to seed per-file content streams.
fn fnv1a(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

// ---- options ----------------------------------------------------------------------

/// What the conversation looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// One user prompt, then `turns` tool turns: an assistant with
    /// `thinking_chars` of thinking (none when 0) and one `bash` call, and a
    /// `results_chars`-char result. No final reply, so in a pruned session
    /// the flushes are budget flushes (see [`SynthOptions::flush_every`]).
    ToolTurns {
        /// Tool turns (replaced by [`SynthOptions::tokens`] when set).
        turns: usize,
        /// Chars of each tool result.
        results_chars: usize,
        /// Chars of each assistant's thinking block (0: no thinking).
        thinking_chars: usize,
    },
    /// `prompts` tasks: a user prompt, `turns_per_prompt` tool turns (400
    /// chars of thinking, one `bash` call, a 3,600-char result), and a
    /// final text reply.
    Tasks {
        /// User prompts (replaced by [`SynthOptions::tokens`] when set).
        prompts: usize,
        /// Tool turns per prompt.
        turns_per_prompt: usize,
    },
    /// A realistic mix, for demos: reads of several files (some in parallel),
    /// build logs with errors, a failed `write` with a large argument (an
    /// `isError` result), a re-read of an unchanged file (identical content:
    /// a content-hash dedup), a read of a skill file under
    /// `.agents/skills/…/SKILL.md` (a protected path), bash outputs of all
    /// sizes and one oversized (> 64 KiB) `web_fetch` output. Each task ends
    /// with a text reply.
    Realistic {
        /// Tasks (replaced by [`SynthOptions::tokens`] when set).
        tasks: usize,
    },
}

impl Shape {
    /// The shape for a CLI name (`tool-turns`, `tasks`, `realistic`) with
    /// its default counts and sizes.
    pub fn from_name(name: &str) -> Option<Shape> {
        match name {
            "tool-turns" => Some(Shape::ToolTurns {
                turns: 1000,
                results_chars: 3600,
                thinking_chars: 400,
            }),
            "tasks" => Some(Shape::Tasks {
                prompts: 100,
                turns_per_prompt: 10,
            }),
            "realistic" => Some(Shape::Realistic { tasks: 60 }),
            _ => None,
        }
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct SynthOptions {
    /// Seeds every choice; the same options give the same bytes.
    pub seed: u64,
    /// Target size in tokens (pi's `chars / 4` estimate of the unpruned
    /// context). When set, whole units (tool turns for
    /// [`Shape::ToolTurns`], tasks otherwise) are added until the target is
    /// reached, and the shape's count is ignored.
    pub tokens: Option<u64>,
    /// The conversation's shape.
    pub shape: Shape,
    /// Run condense's flush pipeline while generating (see the module docs).
    pub pruned: bool,
    /// [`Shape::ToolTurns`]: the last tool turns left unsummarized (pending).
    pub verbatim_tail: usize,
    /// [`Shape::ToolTurns`]: a budget flush every this many tool turns (0:
    /// one flush, at the start of the verbatim tail).
    pub flush_every: usize,
    /// The pruning settings the flushes use.
    pub config: Config,
}

impl Default for SynthOptions {
    /// 1,000 tool turns of 3,600-char results and 400 chars of thinking,
    /// seed 1, unpruned; when pruned, all but the last 20 results are
    /// summarized, ten turns per flush.
    fn default() -> Self {
        SynthOptions {
            seed: 1,
            tokens: None,
            shape: Shape::ToolTurns {
                turns: 1000,
                results_chars: 3600,
                thinking_chars: 400,
            },
            pruned: false,
            verbatim_tail: 20,
            flush_every: 10,
            config: Config {
                enabled: true,
                ..Config::default()
            },
        }
    }
}

/// A sidecar blob of a pruned session (an oversized output spilled to disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// File name inside the session's blob directory
    /// ([`condense_store::spill::blob_dir`]).
    pub file_name: String,
    /// The full output.
    pub text: String,
}

/// Counts describing a generated session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SynthStats {
    /// Entries (lines after the header).
    pub entries: usize,
    /// `message` entries.
    pub messages: usize,
    /// User prompts.
    pub prompts: usize,
    /// Assistant messages with tool calls.
    pub tool_turns: usize,
    /// Tool calls (each with its result).
    pub tool_calls: usize,
    /// Estimated tokens of the unpruned context (`chars / 4`).
    pub tokens: u64,
    /// Flushes run (pruned sessions).
    pub flushes: usize,
    /// Distinct indexed occurrences at the end ([`State::indexed_count`]).
    pub indexed: usize,
    /// Per-batch summary messages written.
    pub summaries: usize,
    /// Chains compressed.
    pub chains: usize,
    /// Dedup aliases written.
    pub dedup_aliases: usize,
    /// Outputs spilled to blobs.
    pub spilled: usize,
}

/// A generated session: the file's text, its id and its blobs.
#[derive(Debug, Clone)]
pub struct Synth {
    /// The session file's JSONL text (header first, one entry per line).
    pub jsonl: String,
    /// The session id (the header's `id`).
    pub session_id: String,
    /// Spilled outputs, to write into the session's blob directory.
    pub blobs: Vec<Blob>,
    /// What the session holds.
    pub stats: SynthStats,
}

/// Generates a session's JSONL text (blobs, if any, are dropped; their
/// records keep a preview). See [`generate_session`] for everything.
pub fn generate(opts: &SynthOptions) -> String {
    generate_session(opts).jsonl
}

/// Generates a session: text, id, blobs and counts. Spilled records point
/// into a blob directory under a made-up `~/.pi/agent/sessions/…` path;
/// condense finds blobs by file name in the directory beside the session
/// file, wherever it is moved.
pub fn generate_session(opts: &SynthOptions) -> Synth {
    run(opts, None).0
}

/// Writes a generated session to `path`, and its blobs (if any) into
/// [`condense_store::spill::blob_dir`] beside it; spilled records carry those paths.
pub fn write(path: impl AsRef<Path>, opts: &SynthOptions) -> io::Result<()> {
    let path = path.as_ref();
    let absolute = std::path::absolute(path)?;
    let (synth, _) = run(opts, Some(&absolute));
    std::fs::write(path, &synth.jsonl)?;
    if !synth.blobs.is_empty() {
        let dir = blob_dir(path, &synth.session_id);
        std::fs::create_dir_all(&dir)?;
        for blob in &synth.blobs {
            std::fs::write(dir.join(&blob.file_name), &blob.text)?;
        }
    }
    Ok(())
}

// ---- stand-in summarizer ----------------------------------------------------------

fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn describe_call(name: &str, args: &Value, result: &str, is_error: bool) -> String {
    let lines = result.lines().count();
    let arg = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    let status = if is_error { "failed" } else { "ok" };
    match name {
        "bash" => format!(
            "ran `{}` ({status}): {lines} lines of output; first line `{}`.",
            clip(arg("command"), 80),
            clip(result.lines().next().unwrap_or(""), 60)
        ),
        "read" => format!(
            "read `{}` ({lines} lines, {status}).",
            clip(arg("path"), 80)
        ),
        "write" | "edit" => {
            let first = clip(result.lines().next().unwrap_or(""), 80);
            format!("{name} `{}` {status}: {first}", clip(arg("path"), 80))
        }
        _ => format!("{name} returned {} chars ({status}).", result.len()),
    }
}

/// The deterministic summarizer the generator (and the benches) use in
/// place of an LLM: one `- [[N:tool]] …` bullet per call, naming the call
/// and its output's size, with a usage estimate (`chars / 4`).
pub fn stand_in_summary(job: &SummaryJob) -> JobResult {
    let mut text = String::new();
    let mut prompt_chars = 1200;
    for (i, c) in job.batch.calls.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(&format!(
            "- [[{}:{}]] {}",
            i + 1,
            c.tool_name,
            describe_call(&c.tool_name, &c.args, &c.result_text, c.is_error)
        ));
        prompt_chars += c.result_text.len().min(2000) + 120;
    }
    let input_tokens = (prompt_chars / 4) as u64;
    let output_tokens = (text.len() / 4) as u64;
    JobResult::Summary {
        usage: Usage {
            input_tokens,
            output_tokens,
            cost: (input_tokens * 3 + output_tokens * 15) as f64 / 1e6,
        },
        text,
    }
}

/// The deterministic range fusion: the first bullet of each sub-summary
/// (at most eight), under one line saying how many were fused.
pub fn stand_in_fusion(job: &FusionJob) -> JobResult {
    let mut text = format!(
        "- Fused {} batch summaries; commands, paths and errors kept.",
        job.summaries.len()
    );
    for s in job.summaries.iter().take(8) {
        if let Some(first) = s.lines().find(|l| l.starts_with("- ")) {
            text.push('\n');
            text.push_str(clip(first, 200));
        }
    }
    let input_tokens = (job.summaries.iter().map(String::len).sum::<usize>() / 4 + 300) as u64;
    let output_tokens = (text.len() / 4) as u64;
    JobResult::Summary {
        usage: Usage {
            input_tokens,
            output_tokens,
            cost: (input_tokens * 3 + output_tokens * 15) as f64 / 1e6,
        },
        text,
    }
}

// ---- the script: what happens, before it is written ---------------------------------

#[derive(Debug, Clone)]
struct CallSpec {
    name: &'static str,
    args: Value,
    result: String,
    is_error: bool,
    /// Execution time (ms).
    ms: u64,
}

#[derive(Debug, Clone)]
enum Step {
    User(String),
    Turn {
        thinking: Option<String>,
        text: Option<String>,
        calls: Vec<CallSpec>,
    },
    Reply {
        thinking: Option<String>,
        text: String,
    },
}

impl Step {
    /// pi's estimate of the step's messages, in chars.
    fn chars(&self) -> usize {
        match self {
            Step::User(t) => t.len(),
            Step::Turn {
                thinking,
                text,
                calls,
            } => {
                thinking.as_ref().map_or(0, String::len)
                    + text.as_ref().map_or(0, String::len)
                    + calls
                        .iter()
                        .map(|c| c.name.len() + c.args.to_string().len() + c.result.len())
                        .sum::<usize>()
            }
            Step::Reply { thinking, text } => thinking.as_ref().map_or(0, String::len) + text.len(),
        }
    }
}

const WORDS: &[&str] = &[
    "the", "loader", "session", "entry", "branch", "render", "pipeline", "stub", "summary",
    "index", "frontier", "chain", "window", "parser", "error", "path", "module", "test", "build",
    "cache", "token", "budget", "replay", "state", "record", "value", "field", "message", "config",
    "check", "then", "and", "with", "before", "after", "each", "result", "output", "file", "line",
    "call", "read", "write", "edit", "keeps", "drops", "returns", "expects", "handles", "missing",
];

fn words(rng: &mut SplitMix64, out: &mut String, chars: usize) {
    let target = out.len() + chars;
    let mut sentence = 0;
    while out.len() < target {
        let w = *rng.pick(WORDS);
        if sentence == 0 {
            let mut c = w.chars();
            if let Some(first) = c.next() {
                out.extend(first.to_uppercase());
                out.push_str(c.as_str());
            }
        } else {
            out.push_str(w);
        }
        sentence += 1;
        if sentence > 6 && rng.chance(15) {
            out.push_str(". ");
            sentence = 0;
        } else {
            out.push(' ');
        }
    }
    out.truncate(target);
}

fn thinking_text(rng: &mut SplitMix64, n: usize, chars: usize) -> String {
    let mut s = format!("Turn {n}: ");
    let rest = chars.saturating_sub(s.len());
    words(rng, &mut s, rest);
    s.truncate(chars);
    s
}

fn prose(rng: &mut SplitMix64, chars: usize) -> String {
    let mut s = String::with_capacity(chars + 8);
    words(rng, &mut s, chars.saturating_sub(1));
    let t = s.trim_end().trim_end_matches('.').to_owned();
    t + "."
}

/// An `ls -la`-style listing of `chars` chars.
fn listing(rng: &mut SplitMix64, n: usize, chars: usize) -> String {
    let mut s = String::with_capacity(chars + 100);
    let mut line = 0usize;
    while s.len() < chars {
        s.push_str(&format!(
            "-rw-r--r-- 1 dev dev {:>6} Jan {:>2} 10:{:02} src/module_{n}/file_{line:03}.rs\n",
            rng.below(100_000),
            1 + rng.below(28),
            rng.below(60)
        ));
        line += 1;
    }
    s.truncate(chars);
    s
}

const FILES: &[&str] = &[
    "crates/engine/src/lib.rs",
    "crates/engine/src/session.rs",
    "crates/engine/src/render.rs",
    "crates/engine/src/config.rs",
    "crates/engine/src/capture.rs",
    "crates/engine/src/flush.rs",
    "crates/engine/src/state.rs",
    "crates/engine/src/protect.rs",
    "crates/engine/tests/render.rs",
    "crates/engine/tests/session.rs",
    "crates/cli/src/main.rs",
    "crates/cli/src/output.rs",
    "crates/store/src/append.rs",
    "crates/store/src/replay.rs",
    "Cargo.toml",
    "README.md",
    "docs/ARCHITECTURE.md",
];

const IDENTS: &[&str] = &[
    "session", "entry", "branch", "state", "record", "summary", "config", "frontier", "chain",
    "message", "index", "budget", "cache", "plan", "batch", "result",
];

/// A source file's content: stable per path, with an edit marker per version.
fn file_content(seed: u64, path: &str, version: u32) -> String {
    let mut rng = SplitMix64::new(seed ^ fnv1a(path));
    let chars = rng.range(1500, 9000) as usize;
    let mut s = String::with_capacity(chars + 200);
    let mut line = 0;
    let edited_line = rng.range(3, 12);
    let doc = path.ends_with(".md");
    if path.ends_with(".rs") {
        s.push_str(&format!(
            "//! {path}\n\nuse std::collections::HashMap;\n\nuse crate::error::Error;\n\n"
        ));
    }
    while s.len() < chars {
        line += 1;
        if version > 0 && line == edited_line {
            s.push_str(&format!("// edited (revision {version})\n"));
            continue;
        }
        let a = *rng.pick(IDENTS);
        let b = *rng.pick(IDENTS);
        if doc {
            s.push_str(&format!(
                "The {a} keeps its {b} until the next flush; see `{b}_{line}`.\n"
            ));
        } else {
            match rng.below(5) {
                0 => s.push_str(&format!(
                    "pub fn {a}_{line}(&self, {b}: &{}) -> Result<(), Error> {{\n",
                    capitalize(b)
                )),
                1 => s.push_str(&format!("    let {a} = self.{b}.get({line}).cloned();\n")),
                2 => s.push_str(&format!("    // {a}: {b} must stay in order ({line})\n")),
                3 => s.push_str("}\n\n"),
                _ => s.push_str(&format!(
                    "    if {a}.is_empty() {{ return Err(Error::{}({line})); }}\n",
                    capitalize(b)
                )),
            }
        }
    }
    s
}

fn capitalize(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn build_errors(rng: &mut SplitMix64, file: &str) -> String {
    let mut s = String::new();
    for krate in ["engine", "store", "cli"] {
        s.push_str(&format!(
            "   Compiling {krate} v0.1.0 (/home/dev/project/crates/{krate})\n"
        ));
    }
    let errors = rng.range(2, 6);
    for e in 0..errors {
        let line = rng.range(10, 400);
        let col = rng.range(5, 40);
        let (code, what) = *rng.pick(&[
            ("E0308", "mismatched types"),
            ("E0425", "cannot find value `frontier` in this scope"),
            (
                "E0599",
                "no method named `entry_ids` found for struct `Session`",
            ),
            (
                "E0502",
                "cannot borrow `state` as mutable because it is also borrowed as immutable",
            ),
        ]);
        s.push_str(&format!(
            "error[{code}]: {what}\n  --> {file}:{line}:{col}\n   |\n{line:>3} |         let n: u32 = text.len();\n   |                ---   ^^^^^^^^^^ expected `u32`, found `usize`\n   |                |\n   |                expected due to this\n   |\n"
        ));
        if e % 2 == 1 {
            s.push_str("help: you can convert a `usize` to a `u32` and panic if the converted value doesn't fit\n   |\n   |         let n: u32 = text.len().try_into().unwrap();\n   |                                +++++++++++++++++++++\n\n");
        }
    }
    let warnings = rng.range(0, 4);
    for _ in 0..warnings {
        s.push_str(&format!(
            "warning: unused variable: `{}`\n  --> {file}:{}:9\n   |\n   = note: `#[warn(unused_variables)]` on by default\n\n",
            rng.pick(IDENTS),
            rng.range(10, 400)
        ));
    }
    s.push_str(&format!(
        "error: could not compile `engine` (lib) due to {errors} previous errors; {warnings} warnings emitted\n\nCommand exited with code 101"
    ));
    s
}

fn build_ok(rng: &mut SplitMix64) -> String {
    format!(
        "   Compiling engine v0.1.0 (/home/dev/project/crates/engine)\n   Compiling store v0.1.0 (/home/dev/project/crates/store)\n   Compiling cli v0.1.0 (/home/dev/project/crates/cli)\n    Finished `dev` profile [unoptimized + debuginfo] target(s) in {}.{:02}s",
        rng.range(2, 40),
        rng.below(100)
    )
}

fn test_output(rng: &mut SplitMix64, failing: bool) -> String {
    let tests = rng.range(30, 140);
    let mut s = format!("\nrunning {tests} tests\n");
    let mut failed = Vec::new();
    for t in 0..tests {
        let name = format!("{}::tests::{}_{t}", rng.pick(IDENTS), rng.pick(IDENTS));
        if failing && rng.chance(4) {
            s.push_str(&format!("test {name} ... FAILED\n"));
            failed.push(name);
        } else {
            s.push_str(&format!("test {name} ... ok\n"));
        }
    }
    if failed.is_empty() {
        s.push_str(&format!(
            "\ntest result: ok. {tests} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.{:02}s\n",
            rng.below(100)
        ));
    } else {
        s.push_str("\nfailures:\n\n");
        for name in &failed {
            s.push_str(&format!(
                "---- {name} stdout ----\nthread '{name}' panicked at crates/engine/src/render.rs:{}:5:\nassertion `left == right` failed\n  left: {}\n right: {}\n\n",
                rng.range(10, 900),
                rng.below(100),
                rng.below(100)
            ));
        }
        s.push_str(&format!(
            "\ntest result: FAILED. {} passed; {} failed; 0 ignored; 0 measured; 0 filtered out\n\nCommand exited with code 101",
            tests as usize - failed.len(),
            failed.len()
        ));
    }
    s
}

fn grep_output(rng: &mut SplitMix64, pattern: &str) -> String {
    let hits = rng.range(4, 40);
    let mut s = String::new();
    for _ in 0..hits {
        s.push_str(&format!(
            "{}:{}:    let {} = {pattern}(&{});\n",
            rng.pick(FILES),
            rng.range(1, 600),
            rng.pick(IDENTS),
            rng.pick(IDENTS)
        ));
    }
    s
}

fn schema_text(rng: &mut SplitMix64, chars: usize) -> String {
    let mut s = String::from("{\n  \"$schema\": \"https://json-schema.org/draft/2020-12/schema\",\n  \"type\": \"object\",\n  \"properties\": {\n");
    let mut n = 0;
    while s.len() < chars {
        s.push_str(&format!(
            "    \"{}{}\": {{ \"type\": \"{}\", \"description\": \"",
            rng.pick(IDENTS),
            capitalize(rng.pick::<&str>(IDENTS)),
            rng.pick(&["string", "integer", "boolean", "number"])
        ));
        words(rng, &mut s, 60);
        s.push_str(&format!("\", \"default\": {n} }},\n"));
        n += 1;
    }
    s.push_str("    \"end\": { \"type\": \"null\" }\n  }\n}\n");
    s
}

fn web_page(rng: &mut SplitMix64, chars: usize) -> String {
    let mut s = String::with_capacity(chars + 400);
    let mut section = 0;
    while s.len() < chars {
        section += 1;
        s.push_str(&format!(
            "## {section}. {}\n\n",
            capitalize(rng.pick::<&str>(IDENTS))
        ));
        for _ in 0..rng.range(2, 5) {
            let n = rng.range(200, 700) as usize;
            words(rng, &mut s, n);
            s.push_str("\n\n");
        }
    }
    s
}

const SKILL: &str = ".agents/skills/rust-review/SKILL.md";

fn skill_text(rng: &mut SplitMix64) -> String {
    let mut s = String::from(
        "---\nname: rust-review\ndescription: Review Rust changes for correctness, error handling and tests.\n---\n\n# Rust review\n\n",
    );
    for i in 1..=12 {
        s.push_str(&format!("{i}. "));
        words(rng, &mut s, 160);
        s.push('\n');
    }
    s
}

/// Builds the steps of a session.
struct Scripter {
    rng: SplitMix64,
    seed: u64,
    steps: Vec<Step>,
    chars: usize,
    turn_no: usize,
    /// Current version of each file, and the version last read (if read).
    files: Vec<(u32, Option<u32>)>,
}

impl Scripter {
    fn new(seed: u64) -> Self {
        Scripter {
            rng: SplitMix64::new(seed ^ 0x5c21_97a0_11d3_e4b1),
            seed,
            steps: Vec::new(),
            chars: 0,
            turn_no: 0,
            files: vec![(0, None); FILES.len()],
        }
    }

    fn tokens(&self) -> u64 {
        (self.chars / 4) as u64
    }

    fn push(&mut self, step: Step) {
        self.chars += step.chars();
        self.steps.push(step);
    }

    fn user(&mut self, text: String) {
        self.push(Step::User(text));
    }

    fn turn(&mut self, thinking: usize, text: Option<String>, calls: Vec<CallSpec>) {
        self.turn_no += 1;
        let thinking = (thinking > 0).then(|| thinking_text(&mut self.rng, self.turn_no, thinking));
        self.push(Step::Turn {
            thinking,
            text,
            calls,
        });
    }

    fn reply(&mut self, thinking: usize, text_chars: usize) {
        let thinking = (thinking > 0).then(|| thinking_text(&mut self.rng, self.turn_no, thinking));
        let text = prose(&mut self.rng, text_chars);
        self.push(Step::Reply { thinking, text });
    }

    fn bash(&mut self, command: String, result: String, is_error: bool) -> CallSpec {
        let ms = self.rng.range(40, 6000);
        CallSpec {
            name: "bash",
            args: json!({ "command": command }),
            result,
            is_error,
            ms,
        }
    }

    fn read(&mut self, file: usize) -> CallSpec {
        let (version, _) = self.files[file];
        self.files[file].1 = Some(version);
        CallSpec {
            name: "read",
            args: json!({ "path": FILES[file] }),
            result: file_content(self.seed, FILES[file], version),
            is_error: false,
            ms: self.rng.range(2, 30),
        }
    }

    fn edit(&mut self, file: usize) -> CallSpec {
        self.files[file].0 += 1;
        let old = format!(
            "    let n: u32 = text.len();\n    // {}",
            prose(&mut self.rng, 60)
        );
        let new = "    let n = u32::try_from(text.len())?;".to_owned();
        CallSpec {
            name: "edit",
            args: json!({ "path": FILES[file], "oldText": old, "newText": new }),
            result: format!("Successfully replaced text in {}.", FILES[file]),
            is_error: false,
            ms: self.rng.range(3, 20),
        }
    }

    fn thinking_chars(&mut self) -> usize {
        if self.rng.chance(20) {
            0
        } else {
            self.rng.range(150, 900) as usize
        }
    }

    fn some_file(&mut self) -> usize {
        self.rng.below(FILES.len() as u64) as usize
    }

    // -- shapes --

    fn bash_turn(&mut self, n: usize, results_chars: usize, thinking_chars: usize) {
        let result = listing(&mut self.rng, n, results_chars);
        let call = self.bash(format!("ls -la src/module_{n}"), result, false);
        self.turn(thinking_chars, None, vec![call]);
    }

    fn tool_turns(&mut self, turns: usize, tokens: Option<u64>, results: usize, thinking: usize) {
        self.user("Explore the repository and report on every module.".into());
        let mut n = 0;
        loop {
            let more = match tokens {
                Some(t) => self.tokens() < t,
                None => n < turns,
            };
            if !more {
                break;
            }
            self.bash_turn(n, results, thinking);
            n += 1;
        }
    }

    fn tasks(&mut self, prompts: usize, per_prompt: usize, tokens: Option<u64>) {
        let mut p = 0;
        let mut n = 0;
        loop {
            let more = match tokens {
                Some(t) => self.tokens() < t,
                None => p < prompts,
            };
            if !more {
                break;
            }
            self.user(format!(
                "Step {p}: inspect the next module and summarize it."
            ));
            for _ in 0..per_prompt {
                self.bash_turn(n, 3600, 400);
                n += 1;
            }
            self.reply(400, 200);
            p += 1;
        }
    }

    fn realistic(&mut self, tasks: usize, tokens: Option<u64>) {
        let mut t = 0;
        loop {
            let more = match tokens {
                Some(target) => self.tokens() < target,
                None => t < tasks,
            };
            if !more {
                break;
            }
            let kind = match t {
                0 => 0,
                1 => 1,
                2 => 2,
                3 => 3,
                4 => 4,
                _ => *self.rng.pick(&[1, 3, 5, 5, 5, 6, 6, 2]),
            };
            match kind {
                0 => self.task_skill_explore(),
                1 => self.task_build_fix(),
                2 => self.task_failed_write(),
                3 => self.task_reread(),
                4 => self.task_fetch(),
                5 => self.task_explore(),
                _ => self.task_tests(),
            }
            t += 1;
        }
    }

    fn task_skill_explore(&mut self) {
        self.user(
            "Use the rust-review skill to review how the session loader handles torn lines.".into(),
        );
        let skill = skill_text(&mut self.rng);
        let ms = self.rng.range(2, 10);
        let th = self.thinking_chars();
        self.turn(
            th,
            None,
            vec![CallSpec {
                name: "read",
                args: json!({ "path": SKILL }),
                result: skill,
                is_error: false,
                ms,
            }],
        );
        let calls = vec![self.read(1), self.read(12), self.read(9)];
        let th = self.thinking_chars();
        self.turn(
            th,
            Some("Reading the loader, the appender and their tests.".into()),
            calls,
        );
        let out = grep_output(&mut self.rng, "read_line");
        let call = self.bash("grep -rn \"read_line\" crates".into(), out, false);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let th = self.thinking_chars();
        let chars = self.rng.range(200, 700) as usize;
        self.reply(th, chars);
    }

    fn task_build_fix(&mut self) {
        self.user("Build the workspace and fix the errors.".into());
        let file = self.rng.range(1, 7) as usize;
        let log = build_errors(&mut self.rng, FILES[file]);
        let call = self.bash("cargo build --workspace 2>&1".into(), log, true);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let call = self.read(file);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let call = self.edit(file);
        let th = self.thinking_chars();
        self.turn(
            th,
            Some("Converting with `try_from` instead of narrowing silently.".into()),
            vec![call],
        );
        let ok = build_ok(&mut self.rng);
        let call = self.bash("cargo build --workspace 2>&1".into(), ok, false);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let th = self.thinking_chars();
        let chars = self.rng.range(150, 500) as usize;
        self.reply(th, chars);
    }

    fn task_failed_write(&mut self) {
        self.user(
            "Generate the JSON schema of the settings block into generated/schema.json.".into(),
        );
        let size = self.rng.range(4000, 9000) as usize;
        let schema = schema_text(&mut self.rng, size);
        let write = |path: &str, result: String, is_error: bool, ms| CallSpec {
            name: "write",
            args: json!({ "path": path, "content": schema }),
            result,
            is_error,
            ms,
        };
        let ms = self.rng.range(2, 10);
        let th = self.thinking_chars();
        self.turn(
            th,
            None,
            vec![write(
                "generated/schema.json",
                "EACCES: permission denied, open '/home/dev/project/generated/schema.json'".into(),
                true,
                ms,
            )],
        );
        let call = self.bash(
            "ls -la generated/".into(),
            "total 8\ndr-xr-xr-x  2 root root 4096 Jan  3 09:12 .\ndrwxr-xr-x 14 dev  dev  4096 Jan  3 09:12 ..".into(),
            false,
        );
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let ms = self.rng.range(2, 10);
        let th = self.thinking_chars();
        let ok = format!(
            "Successfully wrote {} bytes to docs/schema.json",
            schema.len()
        );
        self.turn(
            th,
            Some("The directory is read-only; writing next to the docs instead.".into()),
            vec![write("docs/schema.json", ok, false, ms)],
        );
        let th = self.thinking_chars();
        let chars = self.rng.range(150, 400) as usize;
        self.reply(th, chars);
    }

    fn task_reread(&mut self) {
        // A file read before and unchanged since: its output repeats verbatim.
        let unchanged: Vec<usize> = (0..FILES.len())
            .filter(|&i| self.files[i].1 == Some(self.files[i].0))
            .collect();
        let file = if unchanged.is_empty() {
            self.some_file()
        } else {
            *self.rng.pick(&unchanged)
        };
        self.user(format!("Double-check {} before we commit.", FILES[file]));
        let call = self.read(file);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let mut stat = String::new();
        for _ in 0..self.rng.range(3, 12) {
            stat.push_str(&format!(
                " {} | {:>3} {}\n",
                self.rng.pick(FILES),
                self.rng.range(1, 80),
                "+".repeat(self.rng.range(1, 30) as usize)
            ));
        }
        let call = self.bash("git diff --stat".into(), stat, false);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let th = self.thinking_chars();
        let chars = self.rng.range(100, 300) as usize;
        self.reply(th, chars);
    }

    fn task_fetch(&mut self) {
        self.user(
            "Read the upstream settings documentation and compare it with our config loader."
                .into(),
        );
        let size = self.rng.range(70_000, 82_000) as usize;
        let page = web_page(&mut self.rng, size);
        let ms = self.rng.range(400, 2500);
        let th = self.thinking_chars();
        self.turn(
            th,
            None,
            vec![CallSpec {
                name: "web_fetch",
                args: json!({ "url": "https://docs.example.dev/agent/settings" }),
                result: page,
                is_error: false,
                ms,
            }],
        );
        let call = self.read(3);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        let th = self.thinking_chars();
        let chars = self.rng.range(300, 800) as usize;
        self.reply(th, chars);
    }

    fn task_explore(&mut self) {
        let topic = *self.rng.pick(IDENTS);
        self.user(format!(
            "How does the {topic} handling work? Walk me through it."
        ));
        for _ in 0..self.rng.range(1, 3) {
            let k = self.rng.range(1, 3);
            let calls: Vec<CallSpec> = (0..k)
                .map(|_| {
                    let f = self.some_file();
                    self.read(f)
                })
                .collect();
            let th = self.thinking_chars();
            self.turn(th, None, calls);
        }
        let out = grep_output(&mut self.rng, topic);
        let call = self.bash(format!("grep -rn \"{topic}\" crates"), out, false);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        if self.rng.chance(50) {
            let n = self.turn_no;
            let chars = self.rng.range(800, 5000) as usize;
            let out = listing(&mut self.rng, n, chars);
            let call = self.bash("ls -la crates/*/src".into(), out, false);
            let th = self.thinking_chars();
            self.turn(th, None, vec![call]);
        }
        let th = self.thinking_chars();
        let chars = self.rng.range(300, 1200) as usize;
        self.reply(th, chars);
    }

    fn task_tests(&mut self) {
        self.user("Run the tests and fix whatever fails.".into());
        let out = test_output(&mut self.rng, true);
        let failing = out.contains("FAILED");
        let call = self.bash("cargo test --workspace 2>&1".into(), out, failing);
        let th = self.thinking_chars();
        self.turn(th, None, vec![call]);
        if failing {
            let call = self.read(8);
            let th = self.thinking_chars();
            self.turn(th, None, vec![call]);
            let call = self.edit(2);
            let th = self.thinking_chars();
            self.turn(th, None, vec![call]);
            let out = test_output(&mut self.rng, false);
            let call = self.bash("cargo test --workspace 2>&1".into(), out, false);
            let th = self.thinking_chars();
            self.turn(th, None, vec![call]);
        }
        let th = self.thinking_chars();
        let chars = self.rng.range(150, 500) as usize;
        self.reply(th, chars);
    }
}

fn script(opts: &SynthOptions) -> Vec<Step> {
    let mut s = Scripter::new(opts.seed);
    match &opts.shape {
        Shape::ToolTurns {
            turns,
            results_chars,
            thinking_chars,
        } => s.tool_turns(*turns, opts.tokens, *results_chars, *thinking_chars),
        Shape::Tasks {
            prompts,
            turns_per_prompt,
        } => s.tasks(*prompts, *turns_per_prompt, opts.tokens),
        Shape::Realistic { tasks } => s.realistic(*tasks, opts.tokens),
    }
    s.steps
}

// ---- the writer: entries, ids, clock, and the flush pipeline ------------------------

/// pi's system prompt and tool declarations, in tokens (for `usage`).
const SYSTEM_TOKENS: u64 = 2600;
const PROVIDER: &str = "anthropic";
const MODEL: &str = "claude-sonnet-4-5";
const API: &str = "anthropic-messages";
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

struct Writer<'a> {
    opts: &'a SynthOptions,
    rng: SplitMix64,
    out: String,
    ids: HashSet<u32>,
    leaf: Option<String>,
    clock: i64,
    /// The branch's context messages and their entries' timestamps.
    messages: Vec<Message>,
    entry_ts: Vec<Option<i64>>,
    state: State,
    protection: Protection,
    blob_root: PathBuf,
    blobs: Vec<Blob>,
    stats: SynthStats,
    /// pi's estimate of the context so far (tokens), for `usage`.
    context_tokens: u64,
    last_request_tokens: u64,
    /// Assistant turns since the last user prompt (pi's `turnIndex`).
    run_turn: i64,
}

impl<'a> Writer<'a> {
    fn new(opts: &'a SynthOptions, session_file: Option<&Path>) -> Self {
        let mut rng = SplitMix64::new(opts.seed ^ 0x1d8e_4e27_c47d_124f);
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
            state: State::new(),
            protection: Protection::new(&opts.config),
            blob_root,
            blobs: Vec::new(),
            stats: SynthStats::default(),
            context_tokens: SYSTEM_TOKENS,
            last_request_tokens: 0,
            run_turn: 0,
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

    fn session_id(&self) -> String {
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

    fn usage(&mut self, output_tokens: u64) -> Value {
        let context = self.context_tokens;
        let cache_read = self.last_request_tokens.min(context);
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

    fn user(&mut self, text: &str) {
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

    fn tool_turn(&mut self, thinking: Option<&str>, text: Option<&str>, calls: &[CallSpec]) {
        let ids: Vec<(String, &CallSpec)> =
            calls.iter().map(|c| (self.tool_call_id(), c)).collect();
        let assistant = self.assistant(thinking, text, &ids);
        self.message(assistant.clone());
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
    fn flush(&mut self, trigger: TriggerKind, closing: Option<&Message>) {
        let opts = self.opts;
        let config = &opts.config;
        let metrics = compute_context_metrics(
            &self.messages,
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

    fn reply(&mut self, thinking: Option<&str>, text: &str) {
        let reply = self.assistant(thinking, Some(text), &[]);
        if self.opts.pruned && self.opts.config.prune_on == condense_core::PruneOn::AgentMessage {
            // `message_end` runs before pi persists the reply.
            self.flush(TriggerKind::MessageEnd, Some(&reply));
        }
        self.message(reply);
    }
}

/// Spilled outputs kept in memory (written out with the session, if at all).
struct MemoryBlobs<'a> {
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

fn to_json<T: Serialize + ?Sized>(v: &T) -> String {
    condense_store::json::to_string(v).expect("generated values serialize")
}

fn to_message(value: &Value) -> Message {
    Message::from_json(&to_json(value)).expect("generated messages are objects")
}

/// `{"type":kind,"id","parentId","timestamp",…fields}`.
fn line_with(
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
fn uuid_v7(rng: &mut SplitMix64, ms: i64) -> String {
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

/// Generates; also returns the branch's messages as the writer built them
/// (the tests compare them with what the reader makes of the file).
fn run(opts: &SynthOptions, session_file: Option<&Path>) -> (Synth, Vec<Message>) {
    let steps = script(opts);
    let total_turns = steps
        .iter()
        .filter(|s| matches!(s, Step::Turn { .. }))
        .count();
    let budget_flushes = matches!(opts.shape, Shape::ToolTurns { .. }) && opts.pruned;
    let last_flushed = total_turns.saturating_sub(opts.verbatim_tail);
    let mut w = Writer::new(opts, session_file);
    let mut turns = 0;
    let mut chars = 0;
    for step in &steps {
        chars += step.chars();
        match step {
            Step::User(text) => w.user(text),
            Step::Turn {
                thinking,
                text,
                calls,
            } => {
                w.tool_turn(thinking.as_deref(), text.as_deref(), calls);
                turns += 1;
                let due = (opts.flush_every > 0 && turns % opts.flush_every == 0)
                    || turns == last_flushed;
                if budget_flushes && turns <= last_flushed && due {
                    w.flush(TriggerKind::Budget, None);
                }
            }
            Step::Reply { thinking, text } => w.reply(thinking.as_deref(), text),
        }
    }
    w.stats.tokens = (chars / 4) as u64;
    w.stats.indexed = w.state.indexed_count();
    let session_id = w.session_id();
    let synth = Synth {
        jsonl: w.out,
        session_id,
        blobs: w.blobs,
        stats: w.stats,
    };
    (synth, w.messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_store::context::branch_messages;
    use condense_store::replay::replay_branch;
    use condense_store::session::Session;

    fn small(shape: Shape, pruned: bool) -> SynthOptions {
        SynthOptions {
            seed: 7,
            shape,
            pruned,
            ..SynthOptions::default()
        }
    }

    #[test]
    fn splitmix_is_deterministic_and_seeded() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        // The reference splitmix64 sequence for seed 0.
        let mut z = SplitMix64::new(0);
        assert_eq!(z.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(z.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let mut c = SplitMix64::new(43);
        assert_ne!(xs[0], c.next_u64());
        let mut r = SplitMix64::new(1);
        for _ in 0..1000 {
            assert!(r.below(7) < 7);
            let v = r.range(3, 5);
            assert!((3..=5).contains(&v));
        }
    }

    #[test]
    fn same_options_same_bytes() {
        for shape in ["tool-turns", "tasks", "realistic"] {
            let mut opts = small(Shape::from_name(shape).unwrap(), true);
            opts.tokens = Some(40_000);
            assert_eq!(generate(&opts), generate(&opts), "{shape}");
            let mut other = opts.clone();
            other.seed = 8;
            assert_ne!(generate(&opts), generate(&other), "{shape}");
        }
    }

    #[test]
    fn generated_files_read_back_without_problems() {
        for pruned in [false, true] {
            for shape in ["tool-turns", "tasks", "realistic"] {
                let mut opts = small(Shape::from_name(shape).unwrap(), pruned);
                opts.tokens = Some(150_000);
                let (synth, messages) = run(&opts, None);
                let s = Session::parse(&synth.jsonl);
                assert!(s.problems.is_empty(), "{shape} {pruned}: {:?}", s.problems);
                assert_eq!(s.entries.len(), synth.stats.entries);
                assert_eq!(s.header.as_ref().unwrap().id, synth.session_id);
                assert_eq!(
                    s.entries[0].kind,
                    condense_store::session::EntryType::ModelChange
                );
                assert_eq!(
                    s.entries[1].kind,
                    condense_store::session::EntryType::ThinkingLevelChange
                );
                // Every entry is on the one branch, and the reader builds the
                // very messages the generator fed the pipeline.
                let branch = s.branch(None);
                assert_eq!(branch.len(), s.entries.len());
                let read: Vec<String> = branch_messages(&branch)
                    .into_iter()
                    .map(|m| m.message.json().to_owned())
                    .collect();
                let built: Vec<String> = messages.iter().map(|m| m.json().to_owned()).collect();
                assert_eq!(read, built, "{shape} {pruned}");
                assert!(synth.stats.tokens >= 150_000);
                let (state, problems) = replay_branch(&branch);
                assert!(problems.is_empty(), "{problems:?}");
                assert_eq!(state.indexed_count(), synth.stats.indexed);
                if !pruned {
                    assert_eq!(synth.stats.indexed, 0);
                    assert!(s.entries.iter().all(|e| e.custom_type.is_none()));
                }
            }
        }
    }

    #[test]
    fn pruned_tool_turns_index_all_but_the_tail() {
        let opts = small(
            Shape::ToolTurns {
                turns: 95,
                results_chars: 3600,
                thinking_chars: 400,
            },
            true,
        );
        let synth = generate_session(&opts);
        assert_eq!(synth.stats.tool_turns, 95);
        let s = Session::parse(&synth.jsonl);
        let (state, problems) = replay_branch(&s.branch(None));
        assert!(problems.is_empty());
        assert_eq!(state.indexed_count(), 75);
        assert_eq!(synth.stats.summaries, 75);
        // Budget flushes at 10, 20, …, 70 and at the tail's start (75).
        assert_eq!(synth.stats.flushes, 8);
        let f = state.frontier().unwrap();
        assert_eq!(f.last_attempted_turn_index, 74);
        assert_eq!(state.stats().call_count, 75);
    }

    #[test]
    fn pruned_tasks_compress_chains_outside_the_window() {
        let opts = small(
            Shape::Tasks {
                prompts: 8,
                turns_per_prompt: 4,
            },
            true,
        );
        let synth = generate_session(&opts);
        let s = Session::parse(&synth.jsonl);
        let (state, _) = replay_branch(&s.branch(None));
        assert_eq!(state.indexed_count(), 32);
        assert_eq!(synth.stats.flushes, 8);
        // Rolling window 3: the last three chains stay verbatim.
        assert_eq!(state.chains().len(), 5);
        assert_eq!(synth.stats.chains, 5);
        // Flush entries come before the reply they were triggered by.
        let last = s.entries.last().unwrap();
        assert!(last.message.as_ref().unwrap().is_text_only_assistant());
        let before = &s.entries[s.entries.len() - 2];
        assert!(before.is_custom(CUSTOM_TYPE_FLUSH_METRICS));
    }

    #[test]
    fn realistic_session_has_every_feature() {
        let opts = small(Shape::Realistic { tasks: 8 }, true);
        let synth = generate_session(&opts);
        let s = Session::parse(&synth.jsonl);
        assert!(s.problems.is_empty());
        let (state, _) = replay_branch(&s.branch(None));
        // The re-read of an unchanged file is a dedup alias.
        assert!(synth.stats.dedup_aliases >= 1, "{:?}", synth.stats);
        // The oversized fetch spilled, with its blob.
        assert_eq!(synth.stats.spilled, 1);
        assert_eq!(synth.blobs.len(), 1);
        assert!(synth.blobs[0].text.len() > 65_536);
        // One spilled output (a chain compression may re-index it to give
        // it a ref, so count distinct occurrences).
        let mut spilled: Vec<_> = state
            .records()
            .iter()
            .filter(|r| r.spill_path.is_some())
            .collect();
        spilled.dedup_by_key(|r| r.key());
        assert_eq!(spilled.len(), 1);
        assert_eq!(spilled[0].tool_name, "web_fetch");
        // The skill file is never indexed; the failed write is.
        assert!(state.records().iter().all(|r| r.args["path"] != SKILL));
        assert!(synth.jsonl.contains(SKILL));
        assert!(
            state
                .records()
                .iter()
                .any(|r| r.tool_name == "write" && r.is_error)
                || synth.jsonl.contains("EACCES")
        );
        assert!(synth.stats.chains >= 1);
    }

    #[test]
    fn write_puts_blobs_beside_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let opts = small(Shape::Realistic { tasks: 6 }, true);
        write(&path, &opts).unwrap();
        let s = Session::open(&path).unwrap();
        assert!(s.problems.is_empty());
        let id = &s.header.as_ref().unwrap().id;
        let blobs = blob_dir(&path, id);
        let files: Vec<_> = std::fs::read_dir(&blobs).unwrap().collect();
        assert_eq!(files.len(), 1);
        let (state, _) = replay_branch(&s.branch(None));
        let rec = state
            .records()
            .iter()
            .find(|r| r.spill_path.is_some())
            .unwrap();
        let text = condense_store::spill::read_spill(&blobs, rec).unwrap();
        assert!(text.len() > 65_536);
    }
}
