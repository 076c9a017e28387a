//! The typed protocol across both sides: a sample of every `Effect`
//! variant, every `Request` variant, every answer, and every sidecar
//! request and notification, serialized by Rust, must equal the checked-in
//! `client/protocol.samples.json` (regenerate it with
//! `CONDENSE_BLESS=1`), read back into the same values, and come back
//! unchanged after the shim's checks read and re-emit it (`node --test
//! client/protocol.test.ts`). A field renamed on either side fails here;
//! a field renamed in a TypeScript interface alone fails `tsc`
//! (`tests/client_typecheck.rs`).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use condense_core::NoticeLevel;
use condense_engine::protocol::{
    CommandInfo, CompletionModel, ContextResult, EffectsResult, ErrorBody, HelloResult,
    LlmCancelParams, LlmCompleteParams, LlmCompleteResult, LlmUsage, ProtocolErrorParams,
    QueryResult, Step, TurnEndResult, UiEffectsParams,
};
use condense_engine::request::{
    CommandParams, CompactParams, ContextParams, HelloParams, HostInfo, HostName, Incoming,
    LlmEventKind, LlmEventParams, MessageEndParams, QueryParams, Raw, Request, SessionStartParams,
    TurnEndParams, TurnUsage,
};
use condense_engine::{Delivery, Effect, Placement};
use condense_testkit::pi_env::require_pi;
use condense_testkit::process::run_bounded;
use serde::Serialize;
use serde_json::{json, Value};

/// One sample of every variant (and of each optional field both ways).
fn samples() -> Vec<Effect> {
    vec![
        Effect::Append {
            custom_type: "context-prune-frontier".into(),
            data: json!({"lastAttemptedToolCallId": "call_1", "attemptedBatchCount": 1}),
            delivery: Delivery::Session,
        },
        Effect::AppendMessage {
            custom_type: "context-prune-summary".into(),
            content: json!("- `t1` read f.txt"),
            display: false,
            details: json!({"toolCallRefs": [{"ref": "t1", "toolCallId": "call_1"}], "turnIndex": 2}),
            delivery: Delivery::Runtime,
        },
        Effect::Notify {
            level: NoticeLevel::Warning,
            text: "pruner: 1 turn(s) queued".into(),
        },
        Effect::Status {
            text: Some("│ prune: ON".into()),
        },
        Effect::Status { text: None },
        Effect::Widget {
            key: "pruner-boot".into(),
            lines: Some(vec!["pruner loaded — pruning ON | model: default".into()]),
            placement: Placement::BelowEditor,
            ttl_ms: Some(10_000),
        },
        Effect::Widget {
            key: "context-prune-progress".into(),
            lines: None,
            placement: Placement::AboveEditor,
            ttl_ms: None,
        },
        Effect::SaveSettings {
            context_prune: json!({"enabled": true, "someFutureKey": 7}),
        },
        Effect::Cost {
            total_cost: 0.0031,
            input_tokens: 12_345,
            output_tokens: 250,
        },
        Effect::Select {
            title: "Prune on".into(),
            options: vec!["agent-message".into(), "on-demand".into()],
            values: vec!["agent-message".into(), "on-demand".into()],
            then: "prune-on".into(),
        },
        Effect::Input {
            title: "Protected tools".into(),
            placeholder: "todo, read".into(),
            then: "protected-tools --input".into(),
        },
        Effect::Compact,
    ]
}

/// Which variant: a new variant does not compile until it has a sample.
fn variant(e: &Effect) -> usize {
    match e {
        Effect::Append { .. } => 0,
        Effect::AppendMessage { .. } => 1,
        Effect::Notify { .. } => 2,
        Effect::Status { .. } => 3,
        Effect::Widget { .. } => 4,
        Effect::SaveSettings { .. } => 5,
        Effect::Cost { .. } => 6,
        Effect::Select { .. } => 7,
        Effect::Input { .. } => 8,
        Effect::Compact => 9,
    }
}
const VARIANTS: usize = 10;

fn raw(v: Value) -> Raw {
    serde_json::value::to_raw_value(&v).expect("raw json")
}

/// One sample of every request the shim sends (each optional field both
/// ways where the shim sends both).
fn requests() -> Vec<Request> {
    let message =
        json!({"role": "assistant", "content": [{"type": "text", "text": "hi"}], "timestamp": 1});
    let tool_result =
        json!({"role": "toolResult", "toolCallId": "call_1", "content": [], "timestamp": 2});
    vec![
        Request::Hello(HelloParams {
            protocol: 1,
            shim: Some("0.1.0".into()),
            host: Some(HostInfo {
                name: HostName::Pi,
                version: Some("1.6.0".into()),
            }),
        }),
        Request::Hello(HelloParams {
            protocol: 1,
            shim: Some("0.1.0".into()),
            host: Some(HostInfo {
                name: HostName::Opencode,
                version: None,
            }),
        }),
        Request::SessionStart(SessionStartParams {
            reason: Some("startup".into()),
            settings: json!({"contextPrune": {"enabled": true}}),
            model: Some(json!({"provider": "anthropic", "id": "claude"})),
            session_file: Some("/s/a.jsonl".into()),
            session_dir: Some("/s".into()),
            misses_dir: Some("/agent/condense-misses".into()),
            session_id: Some("a".into()),
            branch: vec![raw(json!({"type": "session", "id": "a"}))],
            tree: false,
            can_compact: true,
        }),
        Request::SessionStart(SessionStartParams {
            reason: Some("tree".into()),
            settings: Value::Null,
            model: Some(Value::Null),
            session_file: None,
            session_dir: None,
            misses_dir: None,
            session_id: None,
            branch: vec![],
            tree: true,
            can_compact: false,
        }),
        Request::Context(ContextParams {
            keep: 3,
            append: vec![raw(message.clone())],
            base: Some(7),
            timing: true,
            ordered: true,
            now: Some(1_764_000_000_000),
            model: Some("anthropic/claude-sonnet-4-5".into()),
            summarizer_price: Some(0.25),
        }),
        Request::Context(ContextParams {
            keep: 0,
            append: vec![],
            base: None,
            timing: false,
            ordered: false,
            now: None,
            model: None,
            summarizer_price: None,
        }),
        Request::TurnEnd(TurnEndParams {
            turn_index: 2,
            message: Some(raw(message.clone())),
            tool_results: vec![raw(tool_result)],
            usage: TurnUsage {
                tokens: Some(1200),
                context_window: 200_000,
            },
            now: Some(1_700_000_000_000),
        }),
        Request::TurnEnd(TurnEndParams {
            turn_index: 0,
            message: None,
            tool_results: vec![],
            usage: TurnUsage {
                tokens: None,
                context_window: 0,
            },
            now: Some(0),
        }),
        Request::MessageEnd(MessageEndParams {
            message: Some(raw(message)),
            now: Some(5),
        }),
        Request::AgentStart,
        Request::AgentEnd,
        Request::SessionCompact(CompactParams {
            keep: 0,
            append: vec![
                raw(
                    json!({"role": "compactionSummary", "summary": "what came before", "tokensBefore": 180_000, "timestamp": 7}),
                ),
                raw(json!({"role": "user", "content": "go on", "timestamp": 8})),
            ],
            now: Some(1_700_000_000_500),
        }),
        Request::SessionCompact(CompactParams {
            keep: 3,
            append: vec![],
            now: None,
        }),
        Request::Query(QueryParams {
            tool_call_ids: vec!["t1".into(), "call_9".into()],
            offset: Some(41),
            limit: Some(200),
        }),
        Request::Query(QueryParams {
            tool_call_ids: vec!["t2".into()],
            offset: None,
            limit: None,
        }),
        Request::Command(CommandParams {
            args: "prune-on agent-message".into(),
            utc_offset_minutes: -300,
        }),
        Request::Shutdown,
    ]
}

/// Which request: a new variant does not compile until it has a sample.
fn request_variant(r: &Request) -> Option<usize> {
    Some(match r {
        Request::Hello(_) => 0,
        Request::SessionStart(_) => 1,
        Request::Context(_) => 2,
        Request::TurnEnd(_) => 3,
        Request::MessageEnd(_) => 4,
        Request::AgentEnd => 5,
        Request::Query(_) => 6,
        Request::Command(_) => 7,
        Request::Shutdown => 8,
        Request::AgentStart => 9,
        Request::SessionCompact(_) => 10,
        // Not a protocol message: what the sidecar makes of a method it
        // does not know.
        Request::Unknown(_) => return None,
    })
}
const REQUEST_VARIANTS: usize = 11;

/// An answer of the sidecar, typed by its request's method.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
enum Answer {
    Hello(HelloResult),
    Effects(EffectsResult),
    TurnEnd(TurnEndResult),
    Context(ContextResult),
    Query(QueryResult),
    Empty(serde_json::Map<String, Value>),
}

/// The answer type of `method` (the one the sidecar's handler returns).
fn read_answer(method: &str, v: Value) -> serde_json::Result<Answer> {
    Ok(match method {
        "hello" => Answer::Hello(serde_json::from_value(v)?),
        "session.start" | "message.end" | "agent.start" | "agent.end" | "session.compact"
        | "command" => Answer::Effects(serde_json::from_value(v)?),
        "turn.end" => Answer::TurnEnd(serde_json::from_value(v)?),
        "context" => Answer::Context(serde_json::from_value(v)?),
        "query" => Answer::Query(serde_json::from_value(v)?),
        "shutdown" => Answer::Empty(serde_json::from_value(v)?),
        other => panic!("no answer type for {other}"),
    })
}

/// One answer of every request (and of each optional field both ways).
fn answers() -> Vec<(&'static str, Answer)> {
    let effects = || {
        vec![Effect::Notify {
            level: NoticeLevel::Info,
            text: "pruner: ON".into(),
        }]
    };
    vec![
        (
            "hello",
            Answer::Hello(HelloResult {
                protocol: 1,
                sidecar: "0.1.0".into(),
                commands: vec![
                    CommandInfo {
                        name: "status".into(),
                        description: "settings, summarizer usage and context metrics".into(),
                    },
                    CommandInfo {
                        name: "now".into(),
                        description: "summarize pending tool output now".into(),
                    },
                ],
            }),
        ),
        (
            "session.start",
            Answer::Effects(EffectsResult { effects: effects() }),
        ),
        (
            "context",
            Answer::Context(ContextResult {
                unchanged: true,
                seq: None,
                reuse: None,
                steps: None,
                effects: vec![],
                micros: None,
            }),
        ),
        (
            "context",
            Answer::Context(ContextResult {
                unchanged: false,
                seq: Some(8),
                reuse: Some(2),
                steps: Some(vec![
                    Step::Keep([0, 3]),
                    Step::Message(json!({"role": "user", "content": "x", "timestamp": 3})),
                ]),
                effects: effects(),
                micros: Some(412),
            }),
        ),
        (
            "turn.end",
            Answer::TurnEnd(TurnEndResult {
                effects: effects(),
                synced: true,
            }),
        ),
        (
            "turn.end",
            Answer::TurnEnd(TurnEndResult {
                effects: vec![],
                synced: false,
            }),
        ),
        (
            "message.end",
            Answer::Effects(EffectsResult { effects: vec![] }),
        ),
        (
            "agent.start",
            Answer::Effects(EffectsResult { effects: vec![] }),
        ),
        (
            "agent.end",
            Answer::Effects(EffectsResult { effects: effects() }),
        ),
        (
            "session.compact",
            Answer::Effects(EffectsResult { effects: effects() }),
        ),
        (
            "query",
            Answer::Query(QueryResult {
                text: "t1: the output".into(),
                details: json!({"results": {"t1": {"toolCallId": "call_1"}}}),
            }),
        ),
        (
            "command",
            Answer::Effects(EffectsResult { effects: effects() }),
        ),
        ("shutdown", Answer::Empty(Default::default())),
    ]
}

/// The sidecar's requests (params, and the shim's answer).
fn llm_completes() -> Vec<(LlmCompleteParams, LlmCompleteResult)> {
    vec![
        (
            LlmCompleteParams {
                model: CompletionModel::Named("anthropic/claude".into()),
                reasoning_effort: Some("low".into()),
                system: Some("Summarize.".into()),
                user: "tool output".into(),
                max_tokens: Some(2048),
            },
            LlmCompleteResult {
                text: "- `t1` read f.txt".into(),
                stop_reason: "stop".into(),
                usage: LlmUsage {
                    input: 1000,
                    output: 20,
                    cost: 0.0012,
                },
            },
        ),
        (
            LlmCompleteParams {
                model: CompletionModel::Session,
                reasoning_effort: None,
                system: None,
                user: "".into(),
                max_tokens: None,
            },
            LlmCompleteResult {
                text: "".into(),
                stop_reason: "length".into(),
                usage: LlmUsage {
                    input: 0,
                    output: 0,
                    cost: 0.0,
                },
            },
        ),
    ]
}

/// A notification of either side, typed by method.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
enum Notice {
    LlmCancel(LlmCancelParams),
    UiEffects(UiEffectsParams),
    ProtocolError(ProtocolErrorParams),
}

fn read_notice(method: &str, v: Value) -> serde_json::Result<Notice> {
    Ok(match method {
        "llm.cancel" => Notice::LlmCancel(serde_json::from_value(v)?),
        "ui.effects" => Notice::UiEffects(serde_json::from_value(v)?),
        "protocol.error" => Notice::ProtocolError(serde_json::from_value(v)?),
        other => panic!("no params type for {other}"),
    })
}

/// Every sidecar notification; a new one does not compile until it has a sample.
fn notices() -> Vec<(&'static str, Notice)> {
    let all = vec![
        Notice::LlmCancel(LlmCancelParams {
            request_id: "s3".into(),
        }),
        Notice::UiEffects(UiEffectsParams {
            effects: vec![Effect::Widget {
                key: "context-prune-progress".into(),
                lines: Some(vec!["○ Batch 1/1 · 2 tool calls · pending".into()]),
                placement: Placement::AboveEditor,
                ttl_ms: None,
            }],
        }),
        Notice::ProtocolError(ProtocolErrorParams {
            message: "unparseable line".into(),
        }),
    ];
    all.into_iter()
        .map(|n| {
            let method = match &n {
                Notice::LlmCancel(_) => "llm.cancel",
                Notice::UiEffects(_) => "ui.effects",
                Notice::ProtocolError(_) => "protocol.error",
            };
            (method, n)
        })
        .collect()
}

/// The shim's `llm.event` notifications.
fn llm_events() -> Vec<LlmEventParams> {
    [
        LlmEventKind::Text,
        LlmEventKind::Thinking,
        LlmEventKind::Usage,
    ]
    .into_iter()
    .map(|kind| LlmEventParams {
        request_id: "s3".into(),
        kind,
        delta: "- `t1`".into(),
    })
    .collect()
}

fn errors() -> Vec<ErrorBody> {
    vec![ErrorBody {
        code: "auth".into(),
        message: "no credentials for anthropic/claude".into(),
    }]
}

/// Everything in one JSON document, as the TypeScript side reads it.
fn all_samples() -> Value {
    let requests = requests_as_json();
    let answers: Vec<Value> = answers()
        .into_iter()
        .map(|(method, a)| json!({"method": method, "result": a}))
        .collect();
    let sidecar_requests: Vec<Value> = llm_completes()
        .into_iter()
        .map(|(params, result)| json!({"method": "llm.complete", "params": params, "result": result}))
        .collect();
    let sidecar_notifications: Vec<Value> = notices()
        .into_iter()
        .map(|(method, params)| json!({"method": method, "params": params}))
        .collect();
    let shim_notifications: Vec<Value> = llm_events()
        .into_iter()
        .map(|params| json!({"method": "llm.event", "params": params}))
        .collect();
    json!({
        "effects": samples(),
        "requests": requests,
        "answers": answers,
        "sidecarRequests": sidecar_requests,
        "sidecarNotifications": sidecar_notifications,
        "shimNotifications": shim_notifications,
        "errors": errors(),
    })
}

/// Reads a samples document (the checked-in one, or the shim's re-emitted
/// one) back through the Rust types and checks it equals the samples.
fn assert_reads_back_as_the_samples(v: &Value, source: &str) {
    let list = |key: &str| -> Vec<Value> {
        v[key]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("{source}: no {key} list"))
    };
    let effects: Vec<Effect> = serde_json::from_value(v["effects"].clone())
        .unwrap_or_else(|e| panic!("{source}: the effects do not read as Rust's: {e}"));
    assert_eq!(effects, samples(), "{source}: effects");

    let got_requests = list("requests");
    let expected: Vec<Value> = requests_as_json();
    assert_eq!(got_requests.len(), expected.len(), "{source}: requests");
    for (got, want) in got_requests.iter().zip(&expected) {
        // Through the sidecar's own reader, then written again.
        let line = json!({"id": 1, "method": got["method"], "params": got["params"]}).to_string();
        let Ok(Incoming::Request { request, .. }) = Incoming::parse(&line) else {
            panic!("{source}: {line} does not read as a request");
        };
        let again =
            json!({"method": request.method(), "params": request.params().expect("params")});
        assert_eq!(&again, want, "{source}: request {line}");
    }

    let got_answers = list("answers");
    let expected = answers();
    assert_eq!(got_answers.len(), expected.len(), "{source}: answers");
    for (got, (method, want)) in got_answers.iter().zip(&expected) {
        assert_eq!(got["method"], *method, "{source}: answer order");
        let read = read_answer(method, got["result"].clone()).unwrap_or_else(|e| {
            panic!(
                "{source}: the {method} answer does not read: {e}
{got}"
            )
        });
        assert_eq!(&read, want, "{source}: {method} answer");
    }

    let sidecar_requests = list("sidecarRequests");
    let expected = llm_completes();
    assert_eq!(
        sidecar_requests.len(),
        expected.len(),
        "{source}: sidecar requests"
    );
    for (got, (params, result)) in sidecar_requests.iter().zip(&expected) {
        assert_eq!(got["method"], "llm.complete");
        let p: LlmCompleteParams = serde_json::from_value(got["params"].clone())
            .unwrap_or_else(|e| panic!("{source}: llm.complete params: {e}"));
        let r: LlmCompleteResult = serde_json::from_value(got["result"].clone())
            .unwrap_or_else(|e| panic!("{source}: llm.complete result: {e}"));
        assert_eq!((&p, &r), (params, result), "{source}: llm.complete");
    }

    let notifications = list("sidecarNotifications");
    let expected = notices();
    assert_eq!(
        notifications.len(),
        expected.len(),
        "{source}: notifications"
    );
    for (got, (method, want)) in notifications.iter().zip(&expected) {
        assert_eq!(got["method"], *method, "{source}: notification order");
        let read = read_notice(method, got["params"].clone())
            .unwrap_or_else(|e| panic!("{source}: {method} params: {e}"));
        assert_eq!(&read, want, "{source}: {method}");
    }

    let events = list("shimNotifications");
    let expected = llm_events();
    assert_eq!(events.len(), expected.len(), "{source}: llm.event");
    for (got, want) in events.iter().zip(&expected) {
        assert_eq!(got["method"], "llm.event");
        // The sidecar's reader is lenient: compare what it wrote again.
        let line = json!({"method": "llm.event", "params": got["params"]}).to_string();
        let Ok(Incoming::LlmEvent(read)) = Incoming::parse(&line) else {
            panic!("{source}: {line} does not read as llm.event");
        };
        assert_eq!(json!(read), json!(want), "{source}: llm.event");
    }

    let got_errors: Vec<ErrorBody> = serde_json::from_value(v["errors"].clone())
        .unwrap_or_else(|e| panic!("{source}: errors: {e}"));
    assert_eq!(got_errors, errors(), "{source}: errors");
}

fn requests_as_json() -> Vec<Value> {
    requests()
        .iter()
        .map(|r| json!({"method": r.method(), "params": r.params().expect("params")}))
        .collect()
}

#[test]
fn every_request_variant_has_a_sample_and_an_answer() {
    let mut seen = [false; REQUEST_VARIANTS];
    for r in requests() {
        if let Some(i) = request_variant(&r) {
            seen[i] = true;
        }
    }
    assert!(seen.iter().all(|s| *s), "a request has no sample: {seen:?}");
    let answered: std::collections::BTreeSet<&str> = answers().iter().map(|(m, _)| *m).collect();
    for r in requests() {
        assert!(
            answered.contains(r.method()),
            "{} has no answer sample",
            r.method()
        );
    }
    // Every answer sample is of the type its method's handler returns.
    for (method, a) in answers() {
        assert_eq!(read_answer(method, json!(a)).expect("reads"), a);
    }
}

fn client() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("client")
}

fn samples_json() -> String {
    let text = serde_json::to_string_pretty(&all_samples()).expect("json");
    format!("{text}\n")
}

#[test]
fn the_samples_cover_every_variant_and_the_checked_in_file_is_current() {
    let mut seen = [false; VARIANTS];
    for e in samples() {
        seen[variant(&e)] = true;
    }
    assert!(seen.iter().all(|s| *s), "a variant has no sample: {seen:?}");
    let file = client().join("protocol.samples.json");
    let fresh = samples_json();
    if std::env::var("CONDENSE_BLESS").as_deref() == Ok("1") {
        std::fs::write(&file, &fresh).expect("write the samples");
    }
    let checked_in = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "{} is stale: the Rust effects changed. Regenerate it with \
         CONDENSE_BLESS=1 cargo test -p condense-engine --test client_protocol, \
         then update client/protocol.ts to match",
        file.display()
    );
    let v: Value = serde_json::from_str(&checked_in).expect("the samples are JSON");
    assert_reads_back_as_the_samples(&v, "the checked-in samples");
}

#[test]
fn every_message_round_trips_through_the_typescript_types() {
    let Some(install) = require_pi() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("samples.json");
    let output = dir.path().join("out.json");
    std::fs::write(&input, samples_json()).expect("write");
    let mut cmd = Command::new(&install.node);
    cmd.arg("--experimental-strip-types")
        .arg("--no-warnings")
        .arg("--test")
        .arg("protocol.test.ts")
        .env("CONDENSE_PROTOCOL_SAMPLES", &input)
        .env("CONDENSE_PROTOCOL_OUT", &output)
        .current_dir(client());
    let out = run_bounded(&mut cmd, Duration::from_secs(120)).expect("run node --test");
    let report = format!("stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    assert!(out.success() && report.contains("# fail 0"), "{report}");
    let text = std::fs::read_to_string(&output).expect("the shim wrote its re-emitted effects");
    let v: Value = serde_json::from_str(&text).expect("json");
    assert_reads_back_as_the_samples(&v, "the shim's re-emitted samples");
}
