//! The simulation of docs/reliability.md: generated sessions written to real
//! session files, with summarizer failures, spill-write failures, crashes in
//! the middle of flushes and torn lines injected, and guarantees 1–5 checked
//! after every step (see `sim/`).
//!
//! `cargo test` runs a short version (20 sessions × 30 steps, outputs up to
//! 2 MB). The long run is `cargo xtask soak` (or set `CONDENSE_SOAK_SESSIONS`,
//! `CONDENSE_SOAK_STEPS`, `CONDENSE_SOAK_MAX_OUTPUT`, `CONDENSE_SOAK_SECONDS`,
//! `CONDENSE_SOAK_SEED`). A failure prints the session's seed;
//! `CONDENSE_SIM_SEED=<seed>` replays that one session (`replay_one_seed`).

mod sim;

use sim::{Action, Crash, Knobs, Sim};

#[test]
fn generated_sessions_keep_every_guarantee() {
    let knobs = Knobs::from_env(20, 30, 2 << 20);
    let tally = sim::run(&knobs);
    println!("{tally}");
    assert!(tally.sessions > 0 && tally.steps > 0);
}

/// `CONDENSE_SIM_SEED=<seed>`: replays one session of a failed run.
#[test]
fn replay_one_seed() {
    let Ok(seed) = std::env::var("CONDENSE_SIM_SEED") else {
        return;
    };
    let seed = seed.trim();
    let seed = match seed.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => seed.parse(),
    }
    .expect("CONDENSE_SIM_SEED is a number");
    let knobs = Knobs::from_env(1, 30, 2 << 20);
    let tally = sim::run_session(seed, &knobs);
    println!("{tally}");
}

/// A session with some work to flush: tasks with tool turns, replies
/// without a flush (on-demand pruning), no random faults.
fn busy_session(seed: u64) -> Sim {
    let knobs = Knobs {
        sessions: 1,
        steps: 0,
        max_output: 30_000,
        seed,
        time_budget: None,
        fault_scale: 0,
        strict: true,
    };
    let mut sim = Sim::new(seed, &knobs);
    sim.config_mut().prune_on = condense_core::PruneOn::OnDemand;
    sim.config_mut().min_batch_chars = 0;
    sim.config_mut().chain_compression.enabled = true;
    sim.config_mut().chain_compression.rolling_window = 1;
    sim.config_changed();
    sim.force_crash(None);
    for _ in 0..3 {
        for action in [
            Action::Prompt,
            Action::ToolTurn,
            Action::ToolTurn,
            Action::Reply,
        ] {
            sim.act(action).expect("action");
            sim.check().expect("check");
        }
    }
    sim
}

/// Guarantee 4, exhaustively for one flush: die after each of its entries,
/// and halfway through each; the file replays to a consistent state and the
/// session goes on (a later flush completes the work).
#[test]
fn a_crash_at_every_point_of_a_flush_replays_consistently() {
    let n = {
        let mut sim = busy_session(7);
        let before = std::fs::read_to_string(sim.path())
            .expect("read")
            .lines()
            .count();
        sim.act(Action::ManualFlush).expect("flush");
        sim.check().expect("check");
        std::fs::read_to_string(sim.path())
            .expect("read")
            .lines()
            .count()
            - before
    };
    assert!(n >= 4, "the flush writes several entries ({n})");
    for k in 0..=n {
        for crash in [Crash::After(k), Crash::Torn(k)] {
            if matches!(crash, Crash::Torn(k) if k == n) {
                continue;
            }
            let mut sim = busy_session(7);
            sim.force_crash(Some(crash));
            sim.act(Action::ManualFlush)
                .unwrap_or_else(|e| panic!("{crash:?}: {e}"));
            sim.check().unwrap_or_else(|e| panic!("{crash:?}: {e}"));
            // The work left is done by the next flush, which completes.
            sim.force_crash(None);
            sim.act(Action::ManualFlush)
                .unwrap_or_else(|e| panic!("{crash:?} then a flush: {e}"));
            sim.check()
                .unwrap_or_else(|e| panic!("{crash:?} then a flush: {e}"));
            for action in [
                Action::Prompt,
                Action::ToolTurn,
                Action::Reply,
                Action::ManualFlush,
            ] {
                sim.act(action).unwrap_or_else(|e| panic!("{crash:?}: {e}"));
                sim.check().unwrap_or_else(|e| panic!("{crash:?}: {e}"));
            }
        }
    }
}

/// The simulation in strict mode: known bugs fail it too.
#[test]
fn strict_generated_sessions_keep_every_guarantee() {
    let mut knobs = Knobs::from_env(20, 30, 2 << 20);
    knobs.strict = true;
    let tally = sim::run(&knobs);
    println!("{tally}");
}

// ---- minimal reproducers of the bugs the simulation found ---------------------------

mod repro {
    use condense_core::capture_pending;
    use condense_core::query;
    use condense_core::Branch;
    use condense_core::Protection;
    use condense_core::{apply_chains, plan_chains};
    use condense_core::{apply_flush, plan_flush, JobResult, Usage};
    use condense_core::{render, RenderSettings};
    use condense_core::{BatchingMode, Config};
    use condense_core::{Message, Role};
    use serde_json::json;

    pub const T: i64 = 1_767_225_600_000;

    pub fn msg(v: serde_json::Value) -> Message {
        Message::from_value(&v).expect("message")
    }

    pub fn user(ts: i64) -> Message {
        msg(
            json!({"role": "user", "content": [{"type": "text", "text": "do it"}], "timestamp": ts}),
        )
    }

    pub fn call(id: &str, ts: i64) -> Message {
        msg(json!({"role": "assistant", "content": [
            {"type": "toolCall", "id": id, "name": "bash", "arguments": {"command": format!("run {id}")}}],
            "stopReason": "toolUse", "timestamp": ts}))
    }

    pub fn result(id: &str, text: &str, ts: i64) -> Message {
        msg(
            json!({"role": "toolResult", "toolCallId": id, "toolName": "bash",
            "content": [{"type": "text", "text": text}], "isError": false, "timestamp": ts}),
        )
    }

    pub fn reply(ts: i64) -> Message {
        msg(
            json!({"role": "assistant", "content": [{"type": "text", "text": "done"}],
            "stopReason": "stop", "timestamp": ts}),
        )
    }

    /// One task: a big output (summarized) and a tiny one (a trivial batch,
    /// skipped by `minBatchChars`), then a flush and chain compression with
    /// a rolling window of 0. Returns the branch, the state and the render.
    pub fn covered_chain_with_a_trivial_batch() -> (Vec<Message>, Branch, Vec<Message>) {
        let config = Config {
            enabled: true,
            min_batch_chars: 1000,
            batching_mode: BatchingMode::Turn,
            chain_compression: condense_core::ChainCompressionConfig {
                rolling_window: 0,
                ..Config::default().chain_compression
            },
            ..Config::default()
        };
        let protection = Protection::new(&config);
        let messages = vec![
            user(T),
            call("big", T + 10),
            result("big", &"log line\n".repeat(300), T + 20),
            call("tiny", T + 30),
            result("tiny", "ok", T + 40),
            reply(T + 50),
        ];
        let mut state = Branch::new();
        let ts = vec![None; messages.len()];
        let batches = capture_pending(
            &messages,
            &ts,
            0,
            &state,
            &protection,
            config.batching_mode,
            T + 60,
        );
        let plan = plan_flush(batches, &state, &config);
        let results = plan
            .jobs
            .iter()
            .map(|_| JobResult::Summary {
                text: "- [[1:bash]] ran; 300 log lines".into(),
                usage: Usage::default(),
            })
            .collect();
        apply_flush(plan, results, &mut state, &config);
        let cplan = plan_chains(&messages, None, &state, &config, &protection, 0);
        apply_chains(cplan, Vec::new(), &[], &mut state, &config, T + 70);
        let settings = RenderSettings {
            config: &config,
            protection: &protection,
        };
        let out = render(&messages, &state, &settings).messages(&messages);
        (messages, state, out)
    }

    pub fn shown(out: &[Message], m: &Message) -> bool {
        out.iter().any(|o| o.json() == m.json())
    }

    pub fn recoverable(state: &Branch, id: &str) -> bool {
        !query(state, &[id.to_owned()], |_| None).results.is_empty()
    }

    pub fn results_in(out: &[Message]) -> usize {
        out.iter().filter(|m| m.is(&Role::ToolResult)).count()
    }
}

/// Guarantee 1, broken: a chain covered by a per-batch summary drops every
/// result of its range, but only an *uncovered* chain backfills the index.
/// A result no flush indexed (a batch under `minBatchChars`, an oversized
/// summary, a batch still pending after a summarizer failure) vanishes: not
/// in the render, not in the index, `context_tree_query` says "not found".
#[test]
fn bug_covered_chain_drops_unindexed_results() {
    let (messages, state, out) = repro::covered_chain_with_a_trivial_batch();
    assert_eq!(state.chains().len(), 1, "the chain is compressed");
    assert!(state.is_summarized("big", Some(repro::T + 20)));
    let tiny = &messages[4];
    assert!(
        repro::shown(&out, tiny) || repro::recoverable(&state, "tiny"),
        "the tiny output is gone: not in the render ({} results left), not recoverable",
        repro::results_in(&out)
    );
}

/// Guarantee 4 (replayed state equals the written one), broken by one ulp:
/// serde_json parses floats without `float_roundtrip`, so a `totalCost`
/// written as `0.009500000000000001` replays as `0.0095`.
#[test]
fn bug_replayed_total_cost_is_exact() {
    use condense_core::FlushEffect;
    use condense_core::SummarizerStats;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.jsonl");
    std::fs::write(
        &path,
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/\"}\n",
    )
    .expect("header");
    let stats = SummarizerStats {
        total_cost: 0.001 * 9.0 + 0.0005,
        ..SummarizerStats::default()
    };
    assert_eq!(format!("{:?}", stats.total_cost), "0.009500000000000001");
    let mut app =
        condense_store::Appender::open(&path, condense_store::LockMode::Try).expect("open");
    condense_store::effects::append_effects(&mut app, &[FlushEffect::Stats(stats.clone())], 0)
        .expect("append");
    drop(app);
    let session = condense_store::Session::open(&path).expect("reopen");
    let (state, _) = condense_store::replay::replay_branch(&session.branch(None));
    assert_eq!(state.stats().total_cost, stats.total_cost);
}

/// Not one of the five guarantees, but what makes guarantee 1 useful: an
/// eagerly spilled output has no `t<N>` ref (its stub names its bare id).
/// Once a chain that a per-batch summary covers is compressed, the
/// synthetic's `tools` list holds only `t<N>` refs and its body is the
/// summaries, so nothing the model sees names the spilled output any more:
/// it is in the index, but no visible ref leads to it.
#[test]
fn bug_spilled_output_in_a_compressed_chain_has_no_visible_ref() {
    use condense_core::Branch;
    use condense_core::Config;
    use condense_core::Protection;
    use condense_core::{apply_chains, plan_chains};
    use condense_core::{
        apply_flush, apply_spill, plan_flush, plan_spill, JobResult, Usage, WrittenSpill,
    };
    use condense_core::{capture_pending, capture_turn};
    use condense_core::{render, RenderSettings};
    use repro::*;
    let config = Config {
        enabled: true,
        spill_threshold: 2_000,
        min_batch_chars: 0,
        ..Config::default()
    };
    let protection = Protection::new(&config);
    let messages = vec![
        user(T),
        call("small", T + 10),
        result("small", &"line\n".repeat(100), T + 20),
        call("huge", T + 30),
        result("huge", &"x".repeat(5_000), T + 40),
        reply(T + 50),
    ];
    let mut state = Branch::new();
    // turn_end of the second turn: the huge output spills.
    let batch = capture_turn(&messages[3], &messages[4..5], 1, T + 45);
    let plan = plan_spill(&batch, &state, &config);
    let written = [WrittenSpill {
        call: 0,
        path: "/blobs/huge@1767225600040.txt".into(),
        bytes: 5_000,
    }];
    apply_spill(batch, &plan, &written, &mut state, &config);
    // message_end: the flush summarizes the small one, then the chain.
    let ts = vec![None; messages.len()];
    let batches = capture_pending(
        &messages,
        &ts,
        0,
        &state,
        &protection,
        config.batching_mode,
        T + 60,
    );
    let plan = plan_flush(batches, &state, &config);
    let results = plan
        .jobs
        .iter()
        .map(|_| JobResult::Summary {
            text: "- [[1:bash]] 100 lines".into(),
            usage: Usage::default(),
        })
        .collect();
    apply_flush(plan, results, &mut state, &config);
    let cplan = plan_chains(&messages, None, &state, &config, &protection, 0);
    apply_chains(cplan, Vec::new(), &[], &mut state, &config, T + 70);
    let settings = RenderSettings {
        config: &config,
        protection: &protection,
    };
    let out = render(&messages, &state, &settings).messages(&messages);
    assert!(!shown(&out, &messages[4]), "the chain is compressed");
    assert!(recoverable(&state, "huge"), "the output is indexed");
    let refs = sim::visible_refs(&out);
    assert!(
        refs.iter().any(|r| state
            .records_for_query(r)
            .iter()
            .any(|x| x.tool_call_id == "huge")),
        "no ref in the render leads to the spilled output; refs seen: {refs:?}"
    );
}
