//! What a caller asks for ([`SynthOptions`], [`Shape`]) and what it gets
//! back ([`Synth`], [`SynthStats`], [`Blob`]).

use condense_core::{Config, MissRates};

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
    /// A shape no agent writes on purpose, to find where condense is slow,
    /// grows or breaks (`docs/benchmarks.md`, "Hostile shapes"). Its unit
    /// (a call, a turn, a run) repeats until [`SynthOptions::tokens`] is
    /// reached, or `units` times.
    Stress {
        /// Which shape.
        kind: Stress,
        /// Units (replaced by [`SynthOptions::tokens`] when set).
        units: usize,
    },
}

/// The hostile shapes of [`Shape::Stress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stress {
    /// One prompt, one assistant message of many `read` calls (unit: a
    /// call, `{"path": "fI"}`, a 200-char result), their results, a reply.
    Wide,
    /// One prompt, then turns of one failed `edit` whose arguments hold
    /// 500 keys and an object nested 120 deep, each with a 6,000-char
    /// error (unit: a turn), and a reply.
    Deep,
    /// Runs of 50 turns that each read the same file, the same 3,900
    /// chars every time, closed by a reply (unit: a run).
    Dups,
    /// One prompt, then `bash` turns of about 200 chars of output, every
    /// seventh failed, and no reply (unit: a turn).
    Long,
}

impl Shape {
    /// The shape for a CLI name (`tool-turns`, `tasks`, `realistic`, and
    /// the stress shapes `wide`, `deep`, `dups`, `long`) with its default
    /// counts and sizes.
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
            "wide" => Some(Shape::Stress {
                kind: Stress::Wide,
                units: 10_000,
            }),
            "deep" => Some(Shape::Stress {
                kind: Stress::Deep,
                units: 200,
            }),
            "dups" => Some(Shape::Stress {
                kind: Stress::Dups,
                units: 100,
            }),
            "long" => Some(Shape::Stress {
                kind: Stress::Long,
                units: 5_000,
            }),
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
    /// Idle gaps, in percent: that share of the user prompts after the
    /// first comes 6 to 90 minutes after the previous message (the user was
    /// away; a prompt cache's time to live has passed), and a tenth of that
    /// share of tool turns waits 5.5 to 20 minutes on its tool. Drawn from
    /// their own seeded stream: at 0 (the default) the session is what it
    /// was without the option, byte for byte.
    pub idle_gaps_percent: u64,
    /// The provider's cache misses, as the usage reports them: at each
    /// call after the first, the chance (by the gap since the previous
    /// call) that it read nothing of the prefix cached. Drawn from their
    /// own seeded stream; `None` (the default): every call reads what the
    /// previous one sent, and the session is what it was without the
    /// option, byte for byte.
    pub miss_rates: Option<MissRates>,
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
            idle_gaps_percent: 0,
            miss_rates: None,
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
    /// Distinct indexed occurrences at the end ([`State::indexed_count`](condense_core::State::indexed_count)).
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
