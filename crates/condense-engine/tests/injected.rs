//! A summary a flush writes to the session file (`Delivery::Session`: at a
//! turn's end, at a reply) is in the model's next prompt at its place in
//! the branch, though the host's list lacks it until the host rebuilds from
//! the file; once the host's list holds it, it is there once; and the live
//! prompt is what a reload of the file renders (docs/decisions.md, "What
//! the model is sent is what a reload renders").

use std::sync::Arc;

use condense_core::{Message, PlanStep, Role};
use condense_engine::drive::{branch_with_written, Driver, DriverOptions};
use condense_engine::{CallFacts, Effect, Engine, StartParams};
use condense_store::session::{Entry, Session};
use condense_summarizer::Extractive;
use serde_json::{json, Value};

const T0: i64 = 1_780_000_000_000;

fn read_output(n: usize) -> String {
    (0..300)
        .map(|l| format!("f{n} line {l:03}: ok\n"))
        .collect()
}

/// A session file of `messages`, one entry each in a chain.
fn session_of(messages: Vec<Value>) -> Session {
    let mut text = json!({"type": "session", "version": 3, "id": "s", "timestamp": "", "cwd": "/"})
        .to_string();
    let mut parent = Value::Null;
    for (n, m) in messages.into_iter().enumerate() {
        let id = format!("e{n:04}");
        let at = m["timestamp"].as_i64().unwrap_or(T0);
        let e = json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": condense_store::time::format_iso(at), "message": m});
        parent = json!(id);
        text.push('\n');
        text.push_str(&e.to_string());
    }
    Session::parse(&text)
}

/// A prompt, three reads a second apart, a reply; then a second prompt
/// and its reply.
fn session() -> Session {
    let mut messages =
        vec![json!({"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0})];
    for n in 0..3 {
        let at = T0 + 1_000 * (2 * n as i64 + 1);
        let id = format!("r{n}");
        messages.push(
            json!({"role": "assistant", "content": [{"type": "toolCall", "id": id,
            "name": "read", "arguments": {"path": format!("f{n}.txt")}}], "stopReason": "toolUse",
            "timestamp": at, "provider": "anthropic", "model": "claude-x"}),
        );
        messages.push(
            json!({"role": "toolResult", "toolCallId": id, "toolName": "read",
            "content": [{"type": "text", "text": read_output(n)}], "isError": false,
            "timestamp": at + 500}),
        );
    }
    messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}],
        "stopReason": "stop", "timestamp": T0 + 7_000, "provider": "anthropic", "model": "claude-x"}));
    messages.push(
        json!({"role": "user", "content": [{"type": "text", "text": "again"}], "timestamp": T0 + 9_000}),
    );
    messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Again."}],
        "stopReason": "stop", "timestamp": T0 + 10_000, "provider": "anthropic", "model": "claude-x"}));
    session_of(messages)
}

fn driver(settings: Value) -> Driver {
    Driver::new(DriverOptions {
        settings,
        summarizer: Arc::new(Extractive::new()),
        tokens: Arc::new(|t: &str| t.len() as u64 / 4),
        session_dir: None,
        miss_prior: None,
    })
    .expect("a driver")
}

/// One call as the replay saw it.
struct Call {
    /// The prompt the model was sent.
    prompt: Vec<Message>,
    /// The recorded entries before it, as lines.
    before: Vec<String>,
    /// How many entries the run had written by then.
    written: usize,
}

/// Plays the branch with pi's list (no summary in it: pi never reads the
/// file back); `usage(k)` is what call `k` reports to the budget gates.
fn play(d: &mut Driver, branch: &[&Entry], usage: impl Fn(usize) -> u64) -> Vec<Call> {
    let mut calls: Vec<Call> = Vec::new();
    let mut context: Vec<Message> = Vec::new();
    let mut fed = 0;
    for (i, e) in branch.iter().enumerate() {
        let Some(m) = &e.message else { continue };
        if m.is(&Role::Assistant) {
            let previous = calls.len().checked_sub(1).map(&usage);
            d.feed(&branch[fed..i], previous, 200_000);
            fed = i;
            let facts = CallFacts {
                now_ms: m.timestamp(),
                model: Some("anthropic/claude-x".into()),
                summarizer_price: None,
            };
            let prompt = d.context(&context, &facts);
            let before = branch[..i].iter().map(|e| e.raw().to_owned()).collect();
            let written = d.written().len();
            calls.push(Call {
                prompt,
                before,
                written,
            });
        }
        context.push(m.clone());
    }
    d.finish(&branch[fed..], Some(usage(calls.len() - 1)));
    calls
}

fn is_summary(m: &Message) -> bool {
    m.is(&Role::Custom) && m.json().contains("context-prune-summary")
}

fn summaries(prompt: &[Message]) -> usize {
    prompt.iter().filter(|m| is_summary(m)).count()
}

fn position(prompt: &[Message], needle: &str) -> Option<usize> {
    prompt.iter().position(|m| m.json().contains(needle))
}

/// What a reload of the session the run left renders at call `k`: a fresh
/// engine started on the recorded entries before it with the run's entries
/// written by then in their places, sent the context pi rebuilds from that
/// file.
fn reloaded_prompt(d: &Driver, settings: &Value, call: &Call) -> Vec<Message> {
    let branch = branch_with_written(&call.before, &d.written()[..call.written]);
    let header = r#"{"type":"session","version":3,"id":"s","timestamp":"","cwd":""}"#;
    let session = Session::parse(&format!("{header}\n{branch}"));
    let entries: Vec<&Entry> = session.entries.iter().collect();
    let messages = condense_store::context::build_context(&entries).messages;
    let mut engine = Engine::default();
    engine.start(StartParams {
        settings: settings.clone(),
        session_id: "s".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch,
        tree: false,
    });
    let (steps, _) = engine.context(0, messages.clone());
    apply(&messages, steps)
}

/// The two prompts are the same bytes (a short report when not).
fn same_prompt(call: usize, live: &[Message], reloaded: &[Message]) {
    let texts = |ms: &[Message]| ms.iter().map(|m| m.json().to_string()).collect::<Vec<_>>();
    let (live, reloaded) = (texts(live), texts(reloaded));
    if live == reloaded {
        return;
    }
    let at = live
        .iter()
        .zip(&reloaded)
        .position(|(a, b)| a != b)
        .unwrap_or(live.len().min(reloaded.len()));
    let head = |ms: &[String]| ms.get(at).map(|m| m.chars().take(200).collect::<String>());
    panic!(
        "call {call}: live and reloaded prompts differ at message {at} ({} vs {} messages): live {:?} | reloaded {:?}",
        live.len(),
        reloaded.len(),
        head(&live),
        head(&reloaded)
    );
}

fn apply(host: &[Message], steps: Option<Vec<PlanStep>>) -> Vec<Message> {
    match steps {
        Some(steps) => condense_core::apply_steps(&steps, host),
        None => host.to_vec(),
    }
}

#[test]
fn a_turn_end_flushs_summary_is_in_the_next_call_at_its_place() {
    let s = session();
    let branch = s.branch(None);
    let settings = json!({"contextPrune": {"enabled": true, "autoBudgetThreshold": 0.5,
        "economy": {"policy": "reference"}}});
    let mut d = driver(settings.clone());
    // The second call's usage crosses the budget: its turn's end flushes.
    let calls = play(&mut d, &branch, |k| if k == 1 { 150_000 } else { 1_000 });
    assert_eq!(calls.len(), 5);
    assert_eq!(summaries(&calls[1].prompt), 0);
    // One summary per turn flushed, after the second read's result, where
    // the flush wrote them.
    let third = &calls[2].prompt;
    assert_eq!(
        summaries(third),
        2,
        "the budget flush's summaries are shown"
    );
    assert!(!third.iter().any(|m| m.json().contains("f0 line 299")));
    let first = third.iter().position(is_summary).expect("a summary");
    assert_eq!(position(third, r#""toolCallId":"r1""#), Some(first - 1));
    assert_eq!(first + 2, third.len());
    // The next call keeps them there, before the third read.
    let fourth = &calls[3].prompt;
    assert_eq!(summaries(fourth), 2);
    let first = fourth.iter().position(is_summary).expect("a summary");
    assert_eq!(position(fourth, r#""path":"f2.txt""#), Some(first + 2));
    for (k, call) in calls.iter().enumerate() {
        same_prompt(k, &call.prompt, &reloaded_prompt(&d, &settings, call));
    }
    d.reload_renders_the_same().expect("same render");
}

#[test]
fn a_reply_flushs_summary_sits_before_the_reply() {
    let s = session();
    let branch = s.branch(None);
    let settings = json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}});
    let mut d = driver(settings.clone());
    let calls = play(&mut d, &branch, |_| 1_000);
    for call in &calls[..4] {
        assert_eq!(summaries(&call.prompt), 0);
    }
    let last = &calls[4].prompt;
    assert_eq!(summaries(last), 3, "one per turn");
    let first = last.iter().position(is_summary).expect("a summary");
    // pi persists the reply after `message_end`, so the summaries its
    // flush wrote come first.
    assert_eq!(position(last, r#""toolCallId":"r2""#), Some(first - 1));
    assert_eq!(position(last, "Done."), Some(first + 3));
    for (k, call) in calls.iter().enumerate() {
        same_prompt(k, &call.prompt, &reloaded_prompt(&d, &settings, call));
    }
    d.reload_renders_the_same().expect("same render");
}

/// The messages of a `context` request `keep`ing the first `keep` of the
/// host's list.
fn sync(engine: &mut Engine, host: &[Message], keep: usize) -> Vec<Message> {
    let (steps, _) = engine.context(keep, host[keep..].to_vec());
    apply(host, steps)
}

#[test]
fn once_the_hosts_list_holds_a_summary_it_is_shown_once() {
    let s = session();
    let branch = s.branch(None);
    let messages = condense_store::context::build_context(&branch).messages;
    let mut engine = Engine::default();
    engine.start(StartParams {
        settings: json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}),
        session_id: "s".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch: String::new(),
        tree: false,
    });
    // The first run up to its reply, which flushes.
    let reply = 7;
    let host = &messages[..reply];
    sync(&mut engine, host, 0);
    let lock = std::sync::Mutex::new(engine);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let summarizer = || {
        condense_summarizer::Summarizer::new(
            condense_summarizer::Target::new(
                Arc::new(Extractive::new()),
                condense_core::ModelRef::new("x", "y"),
            ),
            condense_summarizer::SummarizerSettings::default(),
        )
    };
    let effects = runtime.block_on(condense_engine::host::message_end(
        &lock,
        messages[reply].clone(),
        summarizer,
        &|| T0 + 7_000,
    ));
    let written: Vec<&Effect> = effects
        .iter()
        .filter(|e| matches!(e, Effect::AppendMessage { .. }))
        .collect();
    assert_eq!(written.len(), 3, "one summary per turn: {effects:#?}");
    let mut engine = lock.into_inner().expect("the lock");
    // pi's list goes on without the summaries: the engine shows them.
    let live = sync(&mut engine, &messages[..reply + 2], reply);
    assert_eq!(summaries(&live), 3);
    // pi rebuilt its list from the file (another timestamp: pi's clock):
    // the summaries are in it, before the reply, once.
    let from_file: Vec<Message> = written
        .iter()
        .filter_map(|e| e.context_message(T0 + 7_001))
        .collect();
    let mut rebuilt = messages[..reply].to_vec();
    rebuilt.extend_from_slice(&from_file);
    rebuilt.extend_from_slice(&messages[reply..reply + 2]);
    for keep in [0, reply] {
        let shown = sync(&mut engine, &rebuilt, keep);
        assert_eq!(summaries(&shown), 3, "keep {keep}: {shown:#?}");
        assert_eq!(shown.iter().position(is_summary), Some(reply));
        assert!(from_file.iter().all(|m| shown.contains(m)));
        assert_eq!(engine.host_messages().count(), rebuilt.len());
    }
}

#[test]
fn a_summary_pi_takes_at_runtime_is_shown_once() {
    // Under cache-aware the reply's flush runs at the next run's start and
    // goes through pi's runtime: pi's list holds its summaries from the
    // next call on, and the engine's copy gives way to them.
    let s = session();
    let branch = s.branch(None);
    let settings = json!({"contextPrune": {"enabled": true,
        "economy": {"policy": "cache-aware", "maxExcess": null}}});
    let mut d = driver(settings.clone());
    let calls = play(&mut d, &branch, |_| 1_000);
    assert_eq!(d.flushes(), 1);
    let last = &calls[4].prompt;
    assert_eq!(summaries(last), 3, "one per turn, once each");
    let first = last.iter().position(is_summary).expect("a summary");
    assert_eq!(position(last, "Done."), Some(first - 1));
    assert_eq!(position(last, "again"), Some(first + 3));
    for (k, call) in calls.iter().enumerate() {
        same_prompt(k, &call.prompt, &reloaded_prompt(&d, &settings, call));
    }
    d.reload_renders_the_same().expect("same render");
}
