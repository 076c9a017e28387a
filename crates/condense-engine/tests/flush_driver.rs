//! The flush driver through the engine: one outcome for a failed flush,
//! cancellation writes nothing and leaves the engine free to flush again.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use condense_core::{ModelRef, TriggerKind};
use condense_engine::session::{EngineFlush, EngineLock};
use condense_engine::{jsonl, run_flush, Delivery, Effect, Engine, StartParams};
use condense_summarizer::{
    CancelToken, Completion, CompletionRequest, EventSink, Extractive, Provider, ProviderError,
    RunOptions, Summarizer, SummarizerSettings, Target,
};
use serde_json::{json, Value};

const T0: i64 = 1_780_000_000_000;

/// A prompt, `calls` tool turns with big outputs, a text reply.
fn branch(calls: usize) -> String {
    let mut out: Vec<Value> = Vec::new();
    let mut push = |m: Value| {
        let n = out.len();
        let ts = T0 + 1000 * n as i64;
        let mut m = m;
        m["timestamp"] = json!(ts);
        out.push(json!({"type": "message", "id": format!("{n:08x}"),
            "parentId": if n == 0 { Value::Null } else { json!(format!("{:08x}", n - 1)) },
            "timestamp": condense_store::time::format_iso(ts), "message": m}));
    };
    push(json!({"role": "user", "content": [{"type": "text", "text": "read"}]}));
    for i in 0..calls {
        push(
            json!({"role": "assistant", "content": [{"type": "toolCall", "id": format!("call_{i}"),
            "name": "read", "arguments": {"path": format!("f{i}.txt")}}], "stopReason": "toolUse"}),
        );
        let text: String = (0..80)
            .map(|l| format!("file {i} line {l}: ok\n"))
            .collect();
        push(
            json!({"role": "toolResult", "toolCallId": format!("call_{i}"), "toolName": "read",
            "content": [{"type": "text", "text": text}], "isError": false}),
        );
    }
    push(
        json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}], "stopReason": "stop"}),
    );
    jsonl(out.iter().map(Value::to_string))
}

fn engine() -> Mutex<Engine> {
    let mut e = Engine::default();
    e.start(StartParams {
        settings: json!({"contextPrune": {"enabled": true, "pruneOn": "on-demand"}}),
        session_id: "s".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch: branch(3),
        tree: false,
    });
    Mutex::new(e)
}

struct Failing;

#[async_trait]
impl Provider for Failing {
    async fn complete(
        &self,
        _request: CompletionRequest,
        _events: &EventSink,
    ) -> Result<Completion, ProviderError> {
        Err(ProviderError::transient("the model is down"))
    }
}

fn summarizer(provider: Arc<dyn Provider>, e: &Mutex<Engine>) -> Summarizer {
    Summarizer::new(
        Target::new(provider, ModelRef::new("test", "m")),
        SummarizerSettings::from_config(e.engine().config()),
    )
}

fn flush_metrics(effects: &[Effect]) -> Vec<&Value> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Append {
                custom_type, data, ..
            } if custom_type == "context-prune-flush-metrics" => Some(data),
            _ => None,
        })
        .collect()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Runs a manual flush of `e` through the driver with `provider`.
fn flush_with(
    e: &Mutex<Engine>,
    provider: Arc<dyn Provider>,
    cancel: &CancelToken,
    now: i64,
) -> Result<
    (Vec<condense_core::Notice>, condense_engine::FlushDone),
    condense_engine::flush::Cancelled,
> {
    let flush = e
        .engine()
        .begin_flush(TriggerKind::Manual, None, T0)
        .unwrap();
    assert!(!flush.jobs().is_empty());
    let s = summarizer(provider, e);
    let steps = EngineFlush {
        lock: e,
        delivery: Delivery::Runtime,
    };
    block_on(run_flush(
        &steps,
        flush,
        &s,
        RunOptions::sequential(),
        cancel,
        &mut |_| {},
        &|| now,
    ))
}

#[test]
fn a_failed_flush_is_recorded_as_error_and_its_batches_stay_pending() {
    let e = engine();
    let (notices, done) = flush_with(&e, Arc::new(Failing), &CancelToken::new(), T0).unwrap();
    assert!(!notices.is_empty(), "the failure is told");
    let metrics = flush_metrics(&done.effects);
    assert_eq!(metrics.len(), 1);
    // pi-condense's outcome: `error`, the message only in the notices.
    assert_eq!(metrics[0]["outcome"], "error");
    assert_eq!(metrics[0]["trigger"], "manual");
    assert_eq!(done.report.failure.as_deref(), Some("the model is down"));
    assert!(
        e.engine().pending_len() > 0,
        "failed batches go back to pending"
    );
}

#[test]
fn a_cancelled_flush_writes_nothing_and_frees_the_engine() {
    let e = engine();
    let cancel = CancelToken::new();
    cancel.cancel();
    let run = flush_with(&e, Arc::new(Extractive::new()), &cancel, T0);
    assert!(run.is_err(), "nothing to persist");
    let again = e.engine().begin_flush(TriggerKind::Manual, None, T0);
    assert!(again.is_some(), "the engine is not stuck flushing");
}

#[test]
fn a_flush_is_refused_while_one_runs() {
    let e = engine();
    let _running = e
        .engine()
        .begin_flush(TriggerKind::Manual, None, T0)
        .unwrap();
    assert!(e
        .engine()
        .begin_flush(TriggerKind::Manual, None, T0)
        .is_none());
    assert!(e.engine().begin_compact().is_none());
}

#[test]
fn a_flush_through_the_driver_summarizes_and_records_its_metrics() {
    let e = engine();
    let (_, done) =
        flush_with(&e, Arc::new(Extractive::new()), &CancelToken::new(), T0 + 5).unwrap();
    let metrics = flush_metrics(&done.effects);
    assert_eq!(metrics[0]["outcome"], "summarized");
    assert_eq!(metrics[0]["ts"], T0 + 5);
    // Whole numbers as JavaScript writes them (the store's payload).
    assert!(metrics[0]["metrics"]["largestChainSharePct"].is_u64());
    assert!(done.report.frontier().is_some());
    assert_eq!(e.engine().pending_len(), 0);
    assert!(done.effects.iter().any(|e| matches!(
        e,
        Effect::AppendMessage {
            delivery: Delivery::Runtime,
            ..
        }
    )));
}

/// Under the default policy a flush on a branch with no switch entry
/// records the start switch before anything it summarizes: on a reload the
/// summaries count as added after it, pending as they were live. A flush
/// the user asked for is shown at the next call.
#[test]
fn a_flush_on_a_branch_without_a_switch_writes_the_start_switch_first() {
    let e = engine();
    assert!(e.engine().config().economy.policy.gates_on_switch());
    let (_, done) =
        flush_with(&e, Arc::new(Extractive::new()), &CancelToken::new(), T0 + 5).unwrap();
    let kinds: Vec<String> = done
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::Append {
                custom_type, data, ..
            } => Some(format!(
                "{custom_type}:{}",
                data["reason"].as_str().unwrap_or("")
            )),
            Effect::AppendMessage { custom_type, .. } => Some(custom_type.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("context-prune-switch:start"),
        "{kinds:?}"
    );
    assert!(
        kinds.iter().any(|k| k == "context-prune-summary"),
        "{kinds:?}"
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| k.starts_with("context-prune-switch"))
            .count(),
        1
    );
    // The user asked for it: the next call shows it, and starts nothing.
    let held = e.engine().messages().len();
    let (steps, effects) = e.engine().context(held, Vec::new());
    let reasons: Vec<&Value> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Append {
                custom_type, data, ..
            } if custom_type == "context-prune-switch" => Some(&data["reason"]),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, [&json!("user")]);
    let engine = e.engine();
    let shown = condense_core::apply_steps(&steps.expect("a render plan"), engine.messages());
    assert!(shown
        .iter()
        .any(|m| m.json().contains("[Summarized in pruner summary, ref `")));
}
