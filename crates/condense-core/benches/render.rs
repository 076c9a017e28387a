//! Render of 1M-token branches (docs/benchmarks.md, "Render (condense-core)").
//!
//! Workloads, generated in-process by the shared generator
//! (`tests/support/mod.rs`):
//! - `tool_turns`: one user prompt, 1,000 tool turns (400 chars of thinking
//!   and one bash call each, a 3,600-char result); all but the last 20
//!   results summarized (records, `t<N>` refs, a summary body and a summary
//!   message per 10 results). pi-condense 2.9.1 takes 11 ms on Node 22.
//! - `chains`: 100 user prompts, each followed by 10 such tool turns and a
//!   final text reply; every result summarized, every closed chain but the
//!   last 3 compressed with a range summary.
//! - `tool_turns_noop`: the `tool_turns` branch with nothing indexed.
//!
//! `plan` measures `render` (the edit plan); `plan+apply` also applies it.
//!
//! Run: `cargo bench -p condense-core --bench render -- --warm-up-time 1 --measurement-time 5`

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;

use condense_core::Branch;
use condense_core::Config;
use condense_core::Message;
use condense_core::Protection;
use condense_core::{render, RenderSettings};
use criterion::{criterion_group, criterion_main, Criterion};

fn describe(name: &str, messages: &[Message], state: &Branch, settings: &RenderSettings<'_>) {
    let chars = support::array_utf16_len(messages);
    let r = render(messages, state, settings);
    let after = r.plan.as_ref().map_or(chars, |p| p.after_chars);
    eprintln!(
        "{name}: {} messages, {:.2} MB, ~{} tokens -> {} messages, ~{} tokens ({} diagnostics)",
        messages.len(),
        chars as f64 / 1e6,
        chars / 4,
        r.messages(messages).len(),
        after / 4,
        r.diagnostics.len(),
    );
}

fn bench_render(c: &mut Criterion) {
    let config = Config::default();
    let protection = Protection::new(&config);
    let settings = RenderSettings {
        config: &config,
        protection: &protection,
    };
    let empty = Branch::new();
    let (turns, turns_state) = support::workload_tool_turns(1000, 20);
    let (chains, chains_state) = support::workload_chains(100, 10, 3);
    describe("tool_turns", &turns, &turns_state, &settings);
    describe("tool_turns_noop", &turns, &empty, &settings);
    describe("chains", &chains, &chains_state, &settings);
    assert!(render(&turns, &empty, &settings).plan.is_none());

    let mut group = c.benchmark_group("render");
    for (name, messages, state) in [
        ("tool_turns", &turns, &turns_state),
        ("chains", &chains, &chains_state),
        ("tool_turns_noop", &turns, &empty),
    ] {
        group.bench_function(format!("{name}/plan"), |b| {
            b.iter(|| render(black_box(messages), black_box(state), &settings))
        });
        group.bench_function(format!("{name}/plan+apply"), |b| {
            b.iter(|| {
                let r = render(black_box(messages), black_box(state), &settings);
                r.messages(messages)
            })
        });
    }
    // The first render after the state changed (a flush): every stub is
    // built, none comes from the per-occurrence cache. A cloned state starts
    // with empty caches; the clone is setup, not measured.
    for (name, messages, state) in [
        ("tool_turns", &turns, &turns_state),
        ("chains", &chains, &chains_state),
    ] {
        group.bench_function(format!("{name}/plan_cold"), |b| {
            b.iter_batched_ref(
                || state.clone(),
                |fresh| render(black_box(messages), fresh, &settings),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench_render);
criterion_main!(benches);
