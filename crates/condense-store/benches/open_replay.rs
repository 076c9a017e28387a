//! Open and replay of a real 1M-token pi session file (docs/benchmarks.md,
//! "Open and replay").
//!
//! The session comes from the generator every test and bench shares
//! (`condense_gen`): one prompt, 1,000 tool turns (an assistant with
//! 400 chars of thinking and one `bash` call, a 3,600-char result), all but
//! the last 20 results summarized by budget flushes of ten turns each (a
//! per-batch summary message and an index entry per turn, a frontier, stats
//! and flush metrics per flush), as a live pi-condense would have written it.
//!
//! - `open_replay/parse`: `Session::parse` of the text (one copy included);
//! - `open_replay/open`: `Session::open` of the file (page cache warm);
//! - `open_replay/context+replay`: branch, `branch_messages`, `replay_branch`
//!   on a parsed session;
//! - `open_replay/open+replay`: the two together, what a reload costs;
//! - `flush/capture`: the branch rescan a flush starts with (capture, trim to
//!   pending, group), 50 turns pending;
//! - `flush/plan+apply_50`: `plan_flush` + the stand-in summarizer +
//!   `apply_flush` of those 50 pending batches (the state's clone is setup).

use std::hint::black_box;

use condense_core::Config;
use condense_core::Message;
use condense_core::Protection;
use condense_core::{apply_flush, plan_flush, JobResult};
use condense_core::{capture_branch, group_by_mode, trim_to_pending};
use condense_gen::{generate, stand_in_summary, Shape, SynthOptions};
use condense_store::context::branch_messages;
use condense_store::replay::replay_branch;
use condense_store::session::Session;
use condense_store::time::parse_iso;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};

fn session(verbatim_tail: usize) -> String {
    generate(&SynthOptions {
        shape: Shape::ToolTurns {
            turns: 1000,
            results_chars: 3600,
            thinking_chars: 400,
        },
        pruned: true,
        verbatim_tail,
        flush_every: 10,
        ..SynthOptions::default()
    })
}

fn open_replay(c: &mut Criterion) {
    let text = session(20);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("session.jsonl");
    std::fs::write(&path, &text).expect("write session");
    let parsed = Session::parse(&text);
    assert!(parsed.problems.is_empty());
    let (state, _) = replay_branch(&parsed.branch(None));
    assert_eq!(state.indexed_count(), 980);
    eprintln!(
        "open_replay: {} bytes, {} entries",
        text.len(),
        parsed.entries.len()
    );

    let mut g = c.benchmark_group("open_replay");
    g.sample_size(50);
    // Results are dropped outside the timing: a reload keeps what it built.
    g.bench_function("parse", |b| {
        b.iter_with_large_drop(|| Session::parse(black_box(&text)))
    });
    g.bench_function("open", |b| {
        b.iter_with_large_drop(|| Session::open(black_box(&path)).expect("open"))
    });
    g.bench_function("context+replay", |b| {
        b.iter_with_large_drop(|| {
            let branch = parsed.branch(None);
            let messages = branch_messages(&branch);
            let replayed = replay_branch(&branch);
            (messages, replayed)
        })
    });
    g.bench_function("open+replay", |b| {
        b.iter_with_large_drop(|| {
            let session = Session::open(black_box(&path)).expect("open");
            let branch = session.branch(None);
            let messages = branch_messages(&branch);
            let replayed = replay_branch(&branch);
            drop(branch);
            (messages, replayed, session)
        })
    });
    g.finish();
}

fn flush(c: &mut Criterion) {
    let text = session(50);
    let session = Session::parse(&text);
    let branch = session.branch(None);
    let context = branch_messages(&branch);
    let (state, _) = replay_branch(&branch);
    let ts: std::collections::HashMap<&str, i64> = branch
        .iter()
        .filter_map(|e| Some((e.id.as_str(), parse_iso(&e.timestamp)?)))
        .collect();
    let messages: Vec<Message> = context.iter().map(|m| m.message.clone()).collect();
    let entry_ts: Vec<Option<i64>> = context
        .iter()
        .map(|m| ts.get(m.entry_id.as_str()).copied())
        .collect();
    let config = Config {
        enabled: true,
        ..Config::default()
    };
    let protection = Protection::new(&config);
    let capture = || {
        let frontier = state.frontier().cloned();
        let batches: Vec<_> = capture_branch(&messages, &entry_ts, &state, &protection, 0)
            .into_iter()
            .filter_map(|b| trim_to_pending(b, &state, frontier.as_ref()))
            .collect();
        group_by_mode(batches, config.batching_mode)
    };
    let batches = capture();
    assert_eq!(batches.len(), 50);
    // Dedup hashes are built on a session's first lookup (the first flush
    // after a reload pays for hashing the indexed outputs once); a running
    // session's flushes find them built.
    let _ = state.lookup_by_hash("");

    let mut g = c.benchmark_group("flush");
    g.sample_size(50);
    g.bench_function("capture", |b| b.iter(capture));
    g.bench_function("plan+apply_50", |b| {
        b.iter_batched(
            || (batches.clone(), state.clone()),
            |(batches, mut state)| {
                let plan = plan_flush(batches, &state, &config);
                let results: Vec<JobResult> = plan.jobs.iter().map(stand_in_summary).collect();
                let result = apply_flush(plan, results, &mut state, &config);
                (result, state)
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, open_replay, flush);
criterion_main!(benches);
