//! The sidecar's share of a `context` call at 1M tokens (docs/benchmarks.md,
//! "Inside pi"): `Engine::context` on the branch of a generated
//! `tasks --pruned` session, as pi calls it before every LLM request.
//!
//! - `context/resync2`: the last two messages re-sent (`keep = n - 2`), then
//!   the render: what a call costs after a tool turn.
//! - `context/answer_whole`: the same plus the whole answer line.
//! - `context/answer_incremental`: the same with the answer built on the
//!   previous one (what the shim gets when it holds that answer).
//! - `session_start/default` and `session_start/reference`: `Engine::start`
//!   on that branch, what a resume costs before its first call (under the
//!   default the engine also renders what the branch's last call was sent,
//!   to price the next call against it, in place of the warming render).
//!
//! Run: `cargo bench -p condense-host-pi --bench context -- --warm-up-time 1 --measurement-time 5`

use std::hint::black_box;

use condense_engine::sidecar::context_answer;
use condense_engine::sidecar::ContextAnswers;
use condense_engine::{Engine, StartParams};
use condense_gen::{generate, Shape, SynthOptions};
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;

/// The branch of the generated session (its entries, without the header).
fn branch() -> String {
    let opts = SynthOptions {
        tokens: Some(1_000_000),
        shape: Shape::from_name("tasks").expect("tasks"),
        pruned: true,
        ..Default::default()
    };
    let text = generate(&opts);
    text.split_once('\n')
        .map_or("", |(_, rest)| rest)
        .to_owned()
}

fn started(branch: String, settings: serde_json::Value) -> Engine {
    let mut engine = Engine::default();
    engine.start(StartParams {
        settings,
        session_id: "bench".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch,
        tree: false,
    });
    engine
}

fn engine() -> Engine {
    started(branch(), json!({"contextPrune": {"enabled": true}}))
}

fn bench_start(c: &mut Criterion) {
    let branch = branch();
    let mut group = c.benchmark_group("session_start");
    group.sample_size(20);
    for (name, settings) in [
        ("default", json!({"contextPrune": {"enabled": true}})),
        (
            "reference",
            json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}),
        ),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || branch.clone(),
                |branch| black_box(started(branch, settings.clone())),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn bench_context(c: &mut Criterion) {
    let mut engine = engine();
    let n = engine.messages().len();
    let tail = engine.messages()[n - 2..].to_vec();
    let (steps, _) = engine.context(n - 2, tail.clone());
    eprintln!(
        "context: {n} messages -> {} steps",
        steps.map_or(0, |s| s.len())
    );
    let mut group = c.benchmark_group("context");
    group.bench_function("resync2", |b| {
        b.iter(|| black_box(engine.context(n - 2, tail.clone())))
    });
    let mut answers = ContextAnswers::default();
    group.bench_function("answer_whole", |b| {
        b.iter(|| {
            black_box(context_answer(
                &mut engine,
                &mut answers,
                n - 2,
                tail.clone(),
                None,
                &Default::default(),
            ))
        })
    });
    group.bench_function("answer_incremental", |b| {
        b.iter(|| {
            let base = Some(answers.seq());
            black_box(context_answer(
                &mut engine,
                &mut answers,
                n - 2,
                tail.clone(),
                base,
                &Default::default(),
            ))
        })
    });
    group.finish();
}

criterion_group!(benches, bench_context, bench_start);
criterion_main!(benches);
