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
//!   ([`plan_spill`](condense_core::plan_spill) / [`apply_spill`](condense_core::apply_spill));
//! - at each task's final reply (`message-end`), and every
//!   [`SynthOptions::flush_every`] turns of a [`Shape::ToolTurns`] session
//!   (`budget`), a flush rescans the branch ([`capture_branch`],
//!   [`trim_to_pending`], [`group_by_mode`]), plans and applies it with a
//!   deterministic stand-in summarizer ([`stand_in_summary`]: one
//!   `- [[N:tool]] …` bullet per call), then compresses the chains the
//!   rolling window lets go ([`plan_chains`](condense_core::plan_chains) / [`apply_chains`](condense_core::apply_chains), fusion by
//!   [`stand_in_fusion`]). Its entries (summaries as hidden custom messages
//!   before their index entries, dedup aliases, frontier, stats, chains, then
//!   a `context-prune-flush-metrics` entry) come before the reply's own
//!   entry, as pi persists a message only after its `message_end` handlers.
//!
//! Sizes are in tokens as pi estimates them (`chars / 4` of text, thinking,
//! tool-call names and arguments, and tool-result text): the context the
//! model would be sent without pruning.
//!
//! [`entry_for`]: condense_store::effects::entry_for
//! [`capture_branch`]: condense_core::capture_branch
//! [`trim_to_pending`]: condense_core::trim_to_pending
//! [`group_by_mode`]: condense_core::group_by_mode

mod options;
mod rng;
mod script;
mod stand_in;
mod text;
mod writer;

use std::io;
use std::path::Path;

use condense_core::Message;
use condense_core::TriggerKind;

use condense_store::spill::blob_dir;

use crate::script::{script, Step};
use crate::writer::Writer;

pub use options::{Blob, Shape, Stress, Synth, SynthOptions, SynthStats};
pub use rng::SplitMix64;
pub use stand_in::{stand_in_fusion, stand_in_summary};

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
    use crate::text::SKILL;
    use condense_store::context::branch_messages;
    use condense_store::entries::CUSTOM_TYPE_FLUSH_METRICS;
    use condense_store::replay::replay_branch;
    use condense_store::session::Session;

    const ALL_SHAPES: [&str; 7] = [
        "tool-turns",
        "tasks",
        "realistic",
        "wide",
        "deep",
        "dups",
        "long",
    ];

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
        for shape in ALL_SHAPES {
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
            for shape in ALL_SHAPES {
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
                    .map(|m| m.message.json().to_string())
                    .collect();
                let built: Vec<String> = messages.iter().map(|m| m.json().to_string()).collect();
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
