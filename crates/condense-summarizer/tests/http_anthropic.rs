//! The Anthropic Messages provider against a scripted local server.

mod support;

use std::sync::Arc;

use condense_core::{JobResult, Usage};
use condense_core::{ModelRef, ThinkingLevel};
use condense_summarizer::{
    Anthropic, AnthropicConfig, ApiKey, CompletionRequest, FailureKind, Pricing, Provider,
    ProviderErrorKind, StopReason, StreamEvent, Target, Timeouts,
};
use serde_json::json;
use support::server::{event, End, Reply, ScriptedServer};
use support::{drain, event_sink, http_client, summarize_small_batch};

fn provider(server: &ScriptedServer) -> Anthropic {
    Anthropic::with_client(
        AnthropicConfig {
            base_url: server.url(),
            api_key: ApiKey::Value("sk-ant-test".into()),
            pricing: Some(Pricing {
                input_per_mtok: 1.0,
                output_per_mtok: 5.0,
            }),
            ..AnthropicConfig::default()
        },
        http_client(),
    )
}

fn message_start(input: u64) -> String {
    event(
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": input, "output_tokens": 1}}}).to_string(),
    )
}

fn block_start(index: u32, kind: &str) -> String {
    let block = match kind {
        "text" => json!({"type": "text", "text": ""}),
        _ => json!({"type": "thinking", "thinking": ""}),
    };
    event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": block}).to_string(),
    )
}

fn text(index: u32, t: &str) -> String {
    event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": t}}).to_string(),
    )
}

fn thinking(index: u32, t: &str) -> String {
    event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": t}}).to_string(),
    )
}

fn block_stop(index: u32) -> String {
    event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}).to_string(),
    )
}

fn message_delta(stop: &str, output: u64) -> String {
    event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": output}}).to_string(),
    )
}

fn message_stop() -> String {
    event("message_stop", r#"{"type":"message_stop"}"#)
}

fn ping() -> String {
    event("ping", r#"{"type":"ping"}"#)
}

fn error_event(kind: &str, message: &str) -> String {
    event(
        "error",
        &json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
    )
}

/// A complete stream answering `t` with this stop reason.
fn answer(t: &str, stop: &str) -> Vec<String> {
    vec![
        message_start(50),
        block_start(0, "text"),
        text(0, t),
        block_stop(0),
        message_delta(stop, 7),
        message_stop(),
    ]
}

async fn summarize(server: &ScriptedServer, timeouts: Timeouts) -> condense_summarizer::JobOutcome {
    let target = Target::new(
        Arc::new(provider(server)),
        ModelRef::new("anthropic", "claude-test"),
    );
    summarize_small_batch(target, timeouts).await
}

#[tokio::test]
async fn streams_thinking_and_text_blocks() {
    let server = ScriptedServer::start(vec![Reply::sse(
        &[
            message_start(1200),
            ping(),
            block_start(0, "thinking"),
            thinking(0, "Let me see."),
            block_stop(0),
            format!(
                "{}{}",
                block_start(1, "text"),
                text(1, "- [[1:read]] read ")
            ),
            text(1, "a.rs"),
            block_stop(1),
            block_start(2, "text"),
            text(2, "- second block"),
            block_stop(2),
            message_delta("end_turn", 30),
            message_stop(),
        ],
        End::Finish,
    )])
    .await;
    let (sink, mut rx) = event_sink();
    let mut request = CompletionRequest::new("claude-test", "summarize this");
    request.thinking = ThinkingLevel::Medium;
    request.system = Some("be brief".into());
    let c = provider(&server).complete(request, &sink).await.unwrap();
    assert_eq!(c.text, "- [[1:read]] read a.rs\n- second block");
    assert_eq!(c.stop_reason, StopReason::Stop);
    assert_eq!(
        c.usage,
        Usage {
            input_tokens: 1200,
            output_tokens: 30,
            cost: (1200.0 + 30.0 * 5.0) / 1e6,
        }
    );
    let events: Vec<StreamEvent> = drain(&mut rx)
        .into_iter()
        .filter(|e| !matches!(e, StreamEvent::Usage(_)))
        .collect();
    assert_eq!(
        events,
        [
            StreamEvent::ThinkingDelta("Let me see.".into()),
            StreamEvent::TextDelta("- [[1:read]] read ".into()),
            StreamEvent::TextDelta("a.rs".into()),
            StreamEvent::TextDelta("- second block".into()),
        ]
    );

    let r = &server.requests()[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        r.json(),
        json!({
            "model": "claude-test",
            "max_tokens": 4096 + 8192,
            "stream": true,
            "messages": [{"role": "user", "content": "summarize this"}],
            "system": "be brief",
            "thinking": {"type": "enabled", "budget_tokens": 8192},
        })
    );
}

#[test]
fn thinking_budgets() {
    let cases = [
        (ThinkingLevel::Default, None),
        (ThinkingLevel::Off, None),
        (ThinkingLevel::Minimal, Some(1024)),
        (ThinkingLevel::Low, Some(2048)),
        (ThinkingLevel::Medium, Some(8192)),
        (ThinkingLevel::High, Some(16_384)),
        (ThinkingLevel::XHigh, Some(32_000)),
    ];
    for (level, budget) in cases {
        assert_eq!(Anthropic::thinking_budget(level), budget, "{level}");
    }
    let p = Anthropic::new(AnthropicConfig::default());
    let mut r = CompletionRequest::new("m", "u");
    r.max_tokens = Some(1000);
    let body = p.request_body(&r);
    assert_eq!(body["max_tokens"], 1000);
    assert!(body.get("thinking").is_none());
    assert!(body.get("system").is_none());
}

#[tokio::test]
async fn errors_are_classified() {
    let cases = [
        (
            Reply::json(
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ),
            ProviderErrorKind::Transient,
            "HTTP 529: Overloaded",
        ),
        (
            Reply::json(
                429,
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}"#,
            ),
            ProviderErrorKind::Transient,
            "HTTP 429: slow",
        ),
        (
            Reply::json(500, "oops"),
            ProviderErrorKind::Transient,
            "HTTP 500: oops",
        ),
        (
            Reply::json(
                401,
                r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            ),
            ProviderErrorKind::Auth,
            "HTTP 401: invalid x-api-key",
        ),
        (
            Reply::sse(
                &[
                    message_start(5),
                    error_event("overloaded_error", "Overloaded"),
                ],
                End::Finish,
            ),
            ProviderErrorKind::Transient,
            "overloaded_error: Overloaded",
        ),
        (
            Reply::sse(&[error_event("permission_error", "nope")], End::Finish),
            ProviderErrorKind::Auth,
            "permission_error: nope",
        ),
        (
            // Everything but message_stop.
            Reply::sse(&answer("- ok", "end_turn")[..5], End::Finish),
            ProviderErrorKind::Transient,
            "stream ended before the model finished",
        ),
        (
            Reply::sse(&answer("- ok", "end_turn")[..3], End::Cut),
            ProviderErrorKind::Transient,
            "stream interrupted",
        ),
    ];
    for (reply, kind, message) in cases {
        let server = ScriptedServer::start(vec![reply]).await;
        let err = provider(&server)
            .complete(CompletionRequest::new("m", "u"), &event_sink().0)
            .await
            .unwrap_err();
        assert_eq!(err.kind, kind, "{message}");
        assert!(
            err.message.starts_with(message),
            "{} !~ {message}",
            err.message
        );
    }
}

#[tokio::test]
async fn max_tokens_and_empty_text_are_unusable() {
    for stream in [
        answer("- cut sho", "max_tokens"),
        answer("", "end_turn"),
        vec![
            message_start(5),
            message_delta("end_turn", 0),
            message_stop(),
        ],
    ] {
        let server = ScriptedServer::start(vec![Reply::sse(&stream, End::Finish)]).await;
        let o = summarize(&server, Timeouts::default()).await;
        assert_eq!(o.failure, Some(FailureKind::Unusable));
        assert!(matches!(o.result, JobResult::Unusable { usage: Some(_) }));
    }
}

#[tokio::test]
async fn a_good_answer_through_the_summarizer() {
    let server = ScriptedServer::start(vec![Reply::sse(
        &answer("- [[1:read]] read: 50 x", "end_turn"),
        End::Finish,
    )])
    .await;
    let o = summarize(&server, Timeouts::default()).await;
    assert_eq!(
        o.result,
        JobResult::Summary {
            text: "- [[1:read]] read: 50 x".into(),
            usage: Usage {
                input_tokens: 50,
                output_tokens: 7,
                cost: (50.0 + 35.0) / 1e6,
            },
        }
    );
    let sent = server.requests()[0].json();
    assert!(sent["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("<tool-call-batch>\n[[1:read]] Tool: read({})"));
}

#[tokio::test]
async fn a_stalled_stream_times_out_and_the_connection_is_dropped() {
    let server = ScriptedServer::start(vec![Reply::sse(
        &[message_start(5), block_start(0, "text"), text(0, "- half")],
        End::Stall,
    )])
    .await;
    let watcher = async {
        server.wait_stalled().await;
        tokio::time::pause();
    };
    let (o, ()) = tokio::join!(
        summarize(&server, Timeouts::from_millis(0, 180_000)),
        watcher
    );
    assert_eq!(o.failure, Some(FailureKind::Transient));
    assert_eq!(
        o.notices[0].text,
        "condense: summarizer anthropic/claude-test exceeded 180s ceiling; summarizer call abandoned"
    );
    server.wait_hung_up().await;
}
