//! The OpenAI-compatible provider against a scripted local server.

mod support;

use std::sync::Arc;

use condense_core::{JobResult, Usage};
use condense_core::{ModelRef, ThinkingLevel};
use condense_summarizer::{
    ApiKey, CompletionRequest, FailureKind, OpenAiCompatible, OpenAiConfig, Pricing, Provider,
    ProviderErrorKind, StopReason, StreamEvent, Target, Timeouts,
};
use serde_json::json;
use support::server::{data, End, Reply, ScriptedServer};
use support::{drain, event_sink, http_client, summarize_small_batch};

fn provider(server: &ScriptedServer, api_key: ApiKey) -> OpenAiCompatible {
    OpenAiCompatible::with_client(
        OpenAiConfig {
            base_url: format!("{}/v1", server.url()),
            api_key,
            pricing: Some(Pricing {
                input_per_mtok: 2.0,
                output_per_mtok: 10.0,
            }),
        },
        http_client(),
    )
}

fn key() -> ApiKey {
    ApiKey::Value("sk-test".into())
}

fn delta(content: &str) -> String {
    data(
        &json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})
            .to_string(),
    )
}

fn finish(reason: &str) -> String {
    data(&json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string())
}

fn usage(input: u64, output: u64) -> String {
    data(&json!({"choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}}).to_string())
}

fn done() -> String {
    data("[DONE]")
}

async fn summarize(server: &ScriptedServer, timeouts: Timeouts) -> condense_summarizer::JobOutcome {
    let target = Target::new(
        Arc::new(provider(server, key())),
        ModelRef::new("openai", "gpt-test"),
    );
    summarize_small_batch(target, timeouts).await
}

#[tokio::test]
async fn streams_text_thinking_and_usage() {
    let server = ScriptedServer::start(vec![Reply::sse(
        &[
            data(r#"{"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"thinking..."}}]}"#),
            delta("- [[1:read]] read "),
            // Two events in one network chunk.
            format!("{}{}", delta("src/main.rs"), finish("stop")),
            usage(1000, 20),
            done(),
        ],
        End::Finish,
    )])
    .await;
    let p = provider(&server, key());
    let (sink, mut rx) = event_sink();
    let mut request = CompletionRequest::new("gpt-test", "summarize this");
    request.thinking = ThinkingLevel::Medium;
    let c = p.complete(request, &sink).await.unwrap();
    assert_eq!(c.text, "- [[1:read]] read src/main.rs");
    assert_eq!(c.stop_reason, StopReason::Stop);
    assert_eq!(
        c.usage,
        Usage {
            input_tokens: 1000,
            output_tokens: 20,
            cost: (1000.0 * 2.0 + 20.0 * 10.0) / 1e6,
        }
    );
    let events = drain(&mut rx);
    assert_eq!(
        events[..3],
        [
            StreamEvent::ThinkingDelta("thinking...".into()),
            StreamEvent::TextDelta("- [[1:read]] read ".into()),
            StreamEvent::TextDelta("src/main.rs".into()),
        ]
    );
    assert!(matches!(events[3], StreamEvent::Usage(_)));

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        r.json(),
        json!({
            "model": "gpt-test",
            "messages": [{"role": "user", "content": "summarize this"}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "reasoning_effort": "medium",
        })
    );
}

#[test]
fn request_body_options() {
    let p = OpenAiCompatible::new(OpenAiConfig::default());
    let mut r = CompletionRequest::new("m", "u");
    let body = p.request_body(&r);
    assert!(body.get("reasoning_effort").is_none());
    assert!(body.get("max_tokens").is_none());
    for (level, effort) in [
        (ThinkingLevel::Off, None),
        (ThinkingLevel::Minimal, Some("minimal")),
        (ThinkingLevel::Low, Some("low")),
        (ThinkingLevel::High, Some("high")),
        (ThinkingLevel::XHigh, Some("high")),
    ] {
        r.thinking = level;
        assert_eq!(
            p.request_body(&r)
                .get("reasoning_effort")
                .and_then(|v| v.as_str()),
            effort,
            "{level}"
        );
    }
    r.max_tokens = Some(300);
    r.system = Some("be brief".into());
    let body = p.request_body(&r);
    assert_eq!(body["max_tokens"], 300);
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
}

#[tokio::test]
async fn http_errors_are_classified() {
    let cases = [
        (
            429,
            r#"{"error":{"message":"Rate limit reached"}}"#,
            ProviderErrorKind::Transient,
            "HTTP 429: Rate limit reached",
        ),
        (
            500,
            "upstream exploded",
            ProviderErrorKind::Transient,
            "HTTP 500: upstream exploded",
        ),
        (
            400,
            r#"{"error":{"message":"model not found"}}"#,
            ProviderErrorKind::Transient,
            "HTTP 400: model not found",
        ),
        (
            401,
            r#"{"error":{"message":"Incorrect API key"}}"#,
            ProviderErrorKind::Auth,
            "HTTP 401: Incorrect API key",
        ),
        (403, "{}", ProviderErrorKind::Auth, "HTTP 403: {}"),
    ];
    for (status, body, kind, message) in cases {
        let server = ScriptedServer::start(vec![Reply::json(status, body)]).await;
        let err = provider(&server, key())
            .complete(CompletionRequest::new("m", "u"), &event_sink().0)
            .await
            .unwrap_err();
        assert_eq!(
            (err.kind, err.message.as_str()),
            (kind, message),
            "status {status}"
        );
    }
}

#[tokio::test]
async fn a_missing_key_fails_auth_without_a_request() {
    let server = ScriptedServer::start(vec![]).await;
    let err = provider(&server, ApiKey::Env("CONDENSE_TEST_NO_SUCH_KEY_VAR".into()))
        .complete(CompletionRequest::new("m", "u"), &event_sink().0)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Auth);
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn no_key_sends_no_authorization() {
    let server = ScriptedServer::start(vec![Reply::sse(
        &[delta("- ok"), finish("stop"), done()],
        End::Finish,
    )])
    .await;
    provider(&server, ApiKey::None)
        .complete(CompletionRequest::new("m", "u"), &event_sink().0)
        .await
        .unwrap();
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn broken_streams_are_transient() {
    let cases = [
        // Cut mid-stream: no terminating chunk.
        (
            Reply::sse(&[delta("- part")], End::Cut),
            "stream interrupted",
        ),
        // Clean end, but the model never finished.
        (
            Reply::sse(&[delta("- part")], End::Finish),
            "stream ended before the model finished",
        ),
        // An error event.
        (
            Reply::sse(
                &[
                    delta("- part"),
                    data(r#"{"error":{"message":"overloaded"}}"#),
                ],
                End::Finish,
            ),
            "overloaded",
        ),
    ];
    for (reply, message) in cases {
        let server = ScriptedServer::start(vec![reply]).await;
        let err = provider(&server, key())
            .complete(CompletionRequest::new("m", "u"), &event_sink().0)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::Transient);
        assert!(
            err.message.contains(message),
            "{} !~ {message}",
            err.message
        );
    }
}

#[tokio::test]
async fn length_stop_and_empty_text_are_unusable() {
    for chunks in [
        vec![delta("- trunc"), finish("length"), usage(5, 5), done()],
        vec![finish("stop"), usage(5, 0), done()],
        vec![delta("  \n"), finish("stop"), done()],
    ] {
        let server = ScriptedServer::start(vec![Reply::sse(&chunks, End::Finish)]).await;
        let o = summarize(&server, Timeouts::default()).await;
        assert_eq!(o.failure, Some(FailureKind::Unusable));
        assert!(matches!(o.result, JobResult::Unusable { usage: Some(_) }));
        assert!(o.notices.is_empty());
    }
}

#[tokio::test]
async fn rate_limit_through_the_summarizer_is_an_error_notice() {
    let server = ScriptedServer::start(vec![Reply::json(
        429,
        r#"{"error":{"message":"slow down"}}"#,
    )])
    .await;
    let o = summarize(&server, Timeouts::default()).await;
    assert_eq!(o.failure, Some(FailureKind::Transient));
    assert_eq!(
        o.notices[0].text,
        "pruner: summarization failed: HTTP 429: slow down"
    );
}

#[tokio::test]
async fn a_stalled_stream_times_out_and_the_connection_is_dropped() {
    let server = ScriptedServer::start(vec![Reply::sse(&[delta("- half")], End::Stall)]).await;
    let watcher = async {
        server.wait_stalled().await;
        // From here on nothing arrives: let the idle timer's 20 s pass at once.
        tokio::time::pause();
    };
    let (o, ()) = tokio::join!(
        summarize(&server, Timeouts::from_millis(20_000, 0)),
        watcher
    );
    assert_eq!(o.failure, Some(FailureKind::Transient));
    assert_eq!(
        o.notices[0].text,
        "condense: summarizer openai/gpt-test stalled (no output for 20s); summarizer call abandoned"
    );
    server.wait_hung_up().await;
}

#[tokio::test]
async fn cancelling_a_stalled_stream_aborts_it() {
    let server = ScriptedServer::start(vec![Reply::sse(&[delta("- half")], End::Stall)]).await;
    let p = provider(&server, key());
    let request = CompletionRequest::new("m", "u");
    let cancel = request.cancel.clone();
    let (sink, _rx) = event_sink();
    let canceller = async {
        server.wait_stalled().await;
        cancel.cancel();
    };
    let (result, ()) = tokio::join!(p.complete(request, &sink), canceller);
    assert_eq!(result.unwrap_err().kind, ProviderErrorKind::Aborted);
    server.wait_hung_up().await;
}
