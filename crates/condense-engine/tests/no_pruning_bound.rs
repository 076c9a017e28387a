//! The cache-aware policy with a bound against no pruning
//! (`economy.maxExcess`): a summary or a switch is a bet on later calls,
//! placed only when the session's savings so far cover it, or when it costs
//! nothing beyond not placing it.

use condense_core::TriggerKind;
use condense_engine::{CallFacts, Effect, Engine, StartParams};
use serde_json::{json, Value};

const T0: i64 = 1_780_000_000_000;
const MINUTE: i64 = 60_000;

fn message(v: Value) -> condense_core::Message {
    condense_core::Message::from_value(&v).expect("a message")
}

fn started(economy: Value) -> Engine {
    let mut e = Engine::default();
    let prompt = json!({"type": "message", "id": "00000000", "parentId": null,
        "timestamp": "2026-06-01T00:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0}});
    e.start(StartParams {
        settings: json!({"contextPrune": {"enabled": true, "economy": economy}}),
        session_id: "s".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch: condense_engine::jsonl([prompt.to_string()]),
        tree: false,
    });
    e
}

/// A call the host describes, with the summarizer's price it reports.
fn reported(now: i64, summarizer_price: Option<f64>) -> CallFacts {
    CallFacts {
        now_ms: Some(now),
        model: Some("anthropic/claude-x".into()),
        summarizer_price,
    }
}

/// One call that reads a file with `lines` lines of output, at `at`.
fn read_turn(e: &mut Engine, n: i64, lines: usize, at: i64) -> Option<TriggerKind> {
    read_turn_reported(e, n, lines, at, None)
}

/// [`read_turn`] with the summarizer's price the host reports.
fn read_turn_reported(
    e: &mut Engine,
    n: i64,
    lines: usize,
    at: i64,
    price: Option<f64>,
) -> Option<TriggerKind> {
    read_turn_after(e, Vec::new(), n, lines, at, price)
}

/// [`read_turn_reported`] whose call also sends `append` (the user's prompt
/// of a new run).
fn read_turn_after(
    e: &mut Engine,
    append: Vec<condense_core::Message>,
    n: i64,
    lines: usize,
    at: i64,
    price: Option<f64>,
) -> Option<TriggerKind> {
    let held = e.messages().len();
    e.context_at(held, append, &reported(at, price));
    let id = format!("r{n}");
    let assistant = message(json!({"role": "assistant", "content": [{"type": "toolCall",
        "id": id, "name": "read", "arguments": {"path": format!("f{n}.txt")}}],
        "stopReason": "toolUse", "timestamp": at}));
    let text: String = (0..lines).map(|l| format!("f{n} line {l:04}\n")).collect();
    let result = message(json!({"role": "toolResult", "toolCallId": id,
        "toolName": "read", "content": [{"type": "text", "text": text}], "isError": false,
        "timestamp": at + 500}));
    let (_, trigger) = e.turn_end(n, &assistant, &[result], None, 200_000, at + 600);
    trigger
}

/// A run of `turns` reads, a second apart; the turns whose end flushed.
fn long_run(e: &mut Engine, turns: i64) -> Vec<i64> {
    (0..turns)
        .filter(|&n| read_turn(e, n, 400, T0 + 1_000 * (2 * n + 1)).is_some())
        .collect()
}

#[test]
fn a_long_run_flushes_on_its_projection_without_a_bound_and_not_with_nothing_saved() {
    let unbounded = long_run(
        &mut started(json!({"policy": "cache-aware", "maxExcess": null})),
        14,
    );
    assert!(!unbounded.is_empty(), "the run flushed from its tenth turn");
    // Every call warm and nothing pruned yet: nothing has been saved, so
    // the summarizer cannot be paid, however well it would repay later.
    let bounded = long_run(
        &mut started(json!({"policy": "cache-aware", "maxExcess": 0})),
        14,
    );
    assert_eq!(bounded, Vec::<i64>::new());
    // An allowed excess is spent on the same bet.
    let allowed = long_run(
        &mut started(json!({"policy": "cache-aware", "maxExcess": 1})),
        14,
    );
    assert!(!allowed.is_empty());
}

/// One run reading a 40,000-character file and replying, then the next
/// run's start `pause` ms after the reply: whether its flush runs.
fn next_run_flushes(economy: Value, pause: i64) -> bool {
    run_then_next_start(economy, &[2_000], pause).0
}

/// One run of reads, each of `lines` lines (about 13 characters a line),
/// a reply, then the next run's start `pause` ms after it: whether its
/// flush runs, and the engine.
fn run_then_next_start(economy: Value, lines: &[usize], pause: i64) -> (bool, Engine) {
    run_then_next_start_reported(economy, lines, pause, None)
}

/// [`run_then_next_start`] with the summarizer's price the host reports at
/// every call.
fn run_then_next_start_reported(
    economy: Value,
    lines: &[usize],
    pause: i64,
    price: Option<f64>,
) -> (bool, Engine) {
    let mut e = started(economy);
    let turns = lines.len() as i64;
    for (n, &l) in (0..).zip(lines) {
        read_turn_reported(&mut e, n, l, T0 + 1_000 * (2 * n + 1), price);
    }
    let end = T0 + 1_000 * (2 * turns + 1);
    let held = e.messages().len();
    e.context_at(held, Vec::new(), &reported(end, price));
    let reply = message(
        json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}],
        "stopReason": "stop", "timestamp": end}),
    );
    assert_eq!(
        e.message_end(&reply),
        None,
        "the flush waits for the next run"
    );
    e.agent_end();
    let flushes = e.agent_start(end + pause) == Some(TriggerKind::MessageEnd);
    (flushes, e)
}

#[test]
fn under_the_bound_a_runs_turns_are_summarized_in_one_prompt_that_a_cold_start_pays_for() {
    let strict = json!({"policy": "cache-aware", "maxExcess": 0});
    // A 5,200-character output alone: the summarizer's instructions, the
    // output, and the summary at the output price cost more than writing
    // the output once at the cold call costs beyond its stub and summary.
    let (alone, _) = run_then_next_start(strict.clone(), &[400], 10 * MINUTE);
    assert!(!alone);
    // A 7,800-character output alone pays: the bound counts the
    // summarizer's prompt as it counts the main prompts (`chars / 4`), not
    // at the three characters a token of the unbounded projection.
    let (alone, _) = run_then_next_start(strict.clone(), &[600], 10 * MINUTE);
    assert!(alone);
    // Eight 5,200-character outputs in one run: one prompt reads the
    // instructions once, and the cold call's saving pays for it.
    let (run, mut e) = run_then_next_start(strict, &[400; 8], 10 * MINUTE);
    assert!(run);
    let flush = e
        .begin_flush(TriggerKind::MessageEnd, None, T0 + 20 * MINUTE)
        .expect("a flush");
    assert_eq!(flush.jobs().len(), 1, "one summarizer prompt for the run");
    assert_eq!(flush.jobs()[0].batch.calls.len(), 8);
    // Unbounded, each turn keeps its own prompt.
    let (_, mut e) = run_then_next_start(
        json!({"policy": "cache-aware", "maxExcess": null}),
        &[400; 8],
        10 * MINUTE,
    );
    let flush = e
        .begin_flush(TriggerKind::MessageEnd, None, T0 + 20 * MINUTE)
        .expect("a flush");
    assert_eq!(flush.jobs().len(), 8);
}

#[test]
fn an_output_a_flush_keeps_raw_is_never_merged_into_a_summarizer_prompt() {
    let strict = json!({"policy": "cache-aware", "maxExcess": 0});
    let jobs = |lines: &[usize]| {
        let (flushes, mut e) = run_then_next_start(strict.clone(), lines, 10 * MINUTE);
        assert!(flushes);
        let flush = e
            .begin_flush(TriggerKind::MessageEnd, None, T0 + 20 * MINUTE)
            .expect("a flush");
        let calls: Vec<usize> = flush.jobs().iter().map(|j| j.batch.calls.len()).collect();
        calls
    };
    assert_eq!(jobs(&[2_000, 2_000, 2_000]), [3]);
    // Ten lines are under `minBatchChars`: alone, the read stays raw, as
    // it does turn by turn; merged, it would be summarized. The reads
    // around it keep a prompt each.
    assert_eq!(jobs(&[2_000, 10, 2_000]), [1, 1]);
}

#[test]
fn a_merged_summarizer_prompt_covers_at_most_sixteen_calls() {
    let strict = json!({"policy": "cache-aware", "maxExcess": 0});
    let (_, mut e) = run_then_next_start(strict, &[400; 20], 10 * MINUTE);
    let flush = e
        .begin_flush(TriggerKind::MessageEnd, None, T0 + 60 * MINUTE)
        .expect("a flush");
    let calls: Vec<usize> = flush.jobs().iter().map(|j| j.batch.calls.len()).collect();
    assert_eq!(calls, [16, 4]);
}

#[test]
fn a_replys_flush_runs_within_the_bound_only_when_the_next_call_finds_the_cache_cold() {
    let strict = json!({"policy": "cache-aware", "maxExcess": 0});
    // Back within the cache's five minutes: showing the summary would save
    // only on later calls, and nothing saved so far pays the summarizer.
    assert!(!next_run_flushes(strict.clone(), MINUTE));
    // Back after ten: the next call writes its whole prompt anyway, and
    // writing the summary instead of the 40,000 characters saves more at
    // once than the summarizer reads.
    assert!(next_run_flushes(strict, 10 * MINUTE));
    // Without a bound the flush runs either way.
    assert!(next_run_flushes(
        json!({"policy": "cache-aware", "maxExcess": null}),
        MINUTE
    ));
}

#[test]
fn a_bad_max_excess_is_reported_and_keeps_the_default_bound() {
    let mut e = Engine::default();
    let effects = e.start(StartParams {
        settings: json!({"contextPrune": {"enabled": true,
            "economy": {"policy": "cache-aware", "maxExcess": -1}}}),
        session_id: "s".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch: String::new(),
        tree: false,
    });
    let said: Vec<&str> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Notify { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        said.iter().any(|t| t.contains("economy.maxExcess")),
        "{said:?}"
    );
    assert_eq!(
        e.config().economy.max_excess,
        Some(condense_core::DEFAULT_MAX_EXCESS),
        "the default bound"
    );
}

/// A summary is charged at the summarizer's price: `economy.summarizerPrice`
/// when set, else the host's report (pi's model registry), never below the
/// session model's, since a failing summarizer falls back to it.
#[test]
fn a_summary_is_charged_at_the_summarizer_price_set_or_reported() {
    let flushes = |economy: Value, lines: usize, price: Option<f64>| {
        run_then_next_start_reported(economy, &[lines], 10 * MINUTE, price).0
    };
    let strict = json!({"policy": "cache-aware", "maxExcess": 0});
    let priced =
        |ratio: f64| json!({"policy": "cache-aware", "maxExcess": 0, "summarizerPrice": ratio});
    // A 7,800-character output pays for its summary at the cold call at the
    // session model's price (the test above), not at five times it.
    assert!(flushes(strict.clone(), 600, None));
    assert!(!flushes(priced(5.0), 600, None));
    assert!(!flushes(strict.clone(), 600, Some(5.0)));
    // The setting wins over the host.
    assert!(flushes(priced(1.0), 600, Some(5.0)));
    // `/pruner status` says what summaries were charged at.
    let charged = |economy: Value, price: Option<f64>| {
        let (_, e) = run_then_next_start_reported(economy, &[600], 10 * MINUTE, price);
        e.economy_report()
            .against_no_pruning
            .map(|a| a.summarizer_price)
    };
    assert_eq!(charged(strict.clone(), Some(5.0)), Some(5.0));
    assert_eq!(charged(strict.clone(), Some(0.2)), Some(1.0));
    assert_eq!(charged(priced(0.2), Some(5.0)), Some(0.2));
    // A 1,950-character output pays only with a cheaper summarizer, which
    // the setting can say and a report cannot.
    assert!(!flushes(strict.clone(), 150, None));
    assert!(flushes(priced(0.2), 150, None));
    assert!(!flushes(strict, 150, Some(0.2)));
}

/// The bound's ledger charges a flush what the user pays for it: the
/// summarizer's prompt and, at the output price, the summary it wrote.
#[test]
fn a_summarys_output_is_charged_at_the_output_price() {
    let saved_after = |summary_chars: usize| {
        let strict = json!({"policy": "cache-aware", "maxExcess": 0});
        let (flushes, mut e) = run_then_next_start(strict, &[600], 10 * MINUTE);
        assert!(flushes);
        let flush = e
            .begin_flush(TriggerKind::MessageEnd, None, T0 + 20 * MINUTE)
            .expect("a flush");
        let results = flush
            .jobs()
            .iter()
            .map(|_| condense_core::JobResult::Summary {
                text: "s".repeat(summary_chars),
                usage: Default::default(),
            })
            .collect();
        e.finish_summaries(flush, results);
        e.economy_report()
            .against_no_pruning
            .expect("the bound's estimate")
            .saved_units
    };
    // 4,000 characters against 400: 900 tokens more, at 5 (anthropic-5m's
    // output price) times the session model's input price.
    let difference = saved_after(400) - saved_after(4_000);
    assert!((difference - 4_500.0).abs() < 1e-6, "{difference}");
}

/// The status line's reason for a reply's outputs: they wait for the next
/// prompt, then for an allowance a warm start does not have.
#[test]
fn a_replys_held_outputs_say_why() {
    let holding = |e: &Engine| {
        e.economy_report()
            .lines()
            .into_iter()
            .find(|l| l.starts_with("holding back:"))
            .expect("a holding line")
    };
    let mut e = started(json!({"policy": "cache-aware", "maxExcess": 0}));
    read_turn(&mut e, 0, 2_000, T0 + 1_000);
    let end = T0 + 3_000;
    e.context_at(e.messages().len(), Vec::new(), &reported(end, None));
    let reply = message(
        json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}],
        "stopReason": "stop", "timestamp": end}),
    );
    e.message_end(&reply);
    e.agent_end();
    assert!(
        holding(&e).ends_with("1 output(s) not summarized (waiting for the next prompt)"),
        "{}",
        holding(&e)
    );
    // Back within the cache's time to live: nothing saved pays the summarizer.
    assert_eq!(e.agent_start(end + MINUTE), None);
    assert!(
        holding(&e).ends_with("1 output(s) not summarized (allowance spent)"),
        "{}",
        holding(&e)
    );
}

/// One run at `at`: the user's prompt (none for the session's first run),
/// a read of `lines` lines as turn `n`, and the reply; the time it ended.
fn prompted_run(e: &mut Engine, n: i64, lines: usize, at: i64) -> i64 {
    let prompt = (n > 0).then(|| {
        message(
            json!({"role": "user", "content": [{"type": "text", "text": "next"}],
            "timestamp": at}),
        )
    });
    read_turn_after(e, prompt.into_iter().collect(), n, lines, at + 1_000, None);
    let end = at + 3_000;
    let held = e.messages().len();
    e.context_at(held, Vec::new(), &reported(end, None));
    let reply = message(json!({"role": "assistant", "content": [{"type": "text",
        "text": "Done."}], "stopReason": "stop", "timestamp": end}));
    e.message_end(&reply);
    e.agent_end();
    end
}

/// The tool calls a flush `trigger` begins at `now` would summarize.
fn flushed_ids(e: &mut Engine, trigger: TriggerKind, now: i64) -> Vec<String> {
    let flush = e.begin_flush(trigger, None, now).expect("a flush");
    flush
        .jobs()
        .iter()
        .flat_map(|j| &j.batch.calls)
        .map(|c| c.tool_call_id.clone())
        .collect()
}

#[test]
fn when_all_that_is_pending_does_not_pay_the_newest_runs_outputs_are_summarized_alone() {
    let strict = json!({"policy": "cache-aware", "maxExcess": 0});
    let mut e = started(strict);
    // Run 1's output is too small to pay its summarizer at a cold call.
    let end = prompted_run(&mut e, 0, 150, T0);
    // Run 2 starts while the cache is warm: nothing is saved yet, so
    // nothing pays, and run 1's output stays pending.
    assert_eq!(e.agent_start(end + MINUTE), None);
    let end = prompted_run(&mut e, 1, 600, end + MINUTE);
    // Run 3 starts cold. Both runs' outputs together do not pay; run 2's
    // alone does, and they sit at the end of the prompt.
    assert_eq!(
        e.agent_start(end + 10 * MINUTE),
        Some(TriggerKind::MessageEnd)
    );
    let ids = flushed_ids(&mut e, TriggerKind::MessageEnd, end + 10 * MINUTE);
    assert_eq!(ids, ["r1"], "run 1's output stays as it was sent");
}

#[test]
fn a_newest_run_the_summarizer_would_not_read_leaves_the_older_outputs_pending() {
    let mut e = started(json!({"policy": "cache-aware", "maxExcess": 0}));
    let end = prompted_run(&mut e, 0, 150, T0);
    assert_eq!(e.agent_start(end + MINUTE), None);
    // Run 2's output is under `minBatchChars`: a flush would keep it raw.
    let end = prompted_run(&mut e, 1, 50, end + MINUTE);
    // Run 3 starts cold. Run 1's output does not pay, and a flush of run
    // 2's alone would summarize nothing while the frontier passed run 1.
    assert_eq!(e.agent_start(end + 10 * MINUTE), None);
    let ids = flushed_ids(&mut e, TriggerKind::Manual, end + 10 * MINUTE);
    assert_eq!(ids, ["r0"], "run 1's output is still there to summarize");
}
