//! What the proxy adds on the wire: time to the first byte of a streamed
//! answer through the proxy against straight to the upstream (Messages, and
//! Responses as Codex sends it), and 50 conversations' calls at once.
//!
//! `cargo bench -p condense-host-proxy --bench http`

use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use condense_host_proxy::view::MCP_QUERY_TOOL;
use condense_host_proxy::ProxyConfig;
use criterion::{criterion_group, criterion_main, Criterion};
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;

const ANSWER: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

const RESPONSES_ANSWER: &str = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":1,\"total_tokens\":11}}}\n\n";

/// An upstream answering every call at once with a short event stream in
/// the API the path names.
async fn upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                        let answer = if req.uri().path().starts_with("/v1/responses") {
                            RESPONSES_ANSWER
                        } else {
                            ANSWER
                        };
                        let _ = req.into_body().collect().await;
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                            answer.as_bytes(),
                        ))))
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

async fn proxy(upstream: &str, dir: &std::path::Path) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(condense_host_proxy::serve(
        listener,
        ProxyConfig {
            upstream: upstream.to_owned(),
            openai_upstream: upstream.to_owned(),
            chatgpt_upstream: upstream.to_owned(),
            dir: dir.to_path_buf(),
            settings: json!({"contextPrune": {"enabled": true}}),
            query_tool: MCP_QUERY_TOOL.to_owned(),
            log: Some(dir.join("proxy.log")),
            timeouts: Default::default(),
        },
    ));
    format!("http://{addr}")
}

/// A small conversation of `turns` tool turns.
fn conversation(session: &str, turns: usize) -> (String, Vec<Value>) {
    let mut messages = vec![
        json!({"role": "user", "content": [{"type": "text", "text": format!("Task of {session}.")}]}),
    ];
    for n in 0..turns {
        let id = format!("toolu_{session}_{n}");
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "a\nb\nc\n".repeat(50)}]}));
    }
    (session.to_owned(), messages)
}

fn body(messages: &[Value]) -> String {
    json!({"model": "claude-sonnet-4-5", "messages": messages, "max_tokens": 1000, "stream": true})
        .to_string()
}

/// A Codex-shaped Responses body: the input items, with condense's tool
/// offered behind tool search.
fn responses_body(session: &str, items: &[Value]) -> String {
    json!({
        "model": "gpt-5.5",
        "instructions": "",
        "input": items,
        "tools": [
            {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
            {"type": "tool_search", "execution": "client"}
        ],
        "stream": true,
        "store": false,
        "prompt_cache_key": session
    })
    .to_string()
}

/// A call and its output as Responses input items.
fn responses_exchange(id: &str, output: &str) -> [Value; 2] {
    [
        json!({"type": "function_call", "call_id": id, "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}),
        json!({"type": "function_call_output", "call_id": id, "output": output}),
    ]
}

async fn first_byte(client: &reqwest::Client, url: &str, session: &str, body: String) -> Duration {
    let start = Instant::now();
    let answer = client
        .post(url)
        .header("x-claude-code-session-id", session)
        .header("session-id", session)
        .header("x-api-key", "sk-bench")
        .body(body)
        .send()
        .await
        .unwrap();
    let mut stream = answer.bytes_stream();
    let _ = stream.next().await;
    let elapsed = start.elapsed();
    while stream.next().await.is_some() {}
    elapsed
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (up, via) = runtime.block_on(async {
        let up = upstream().await;
        let via = proxy(&up, dir.path()).await;
        (up, via)
    });
    let client = reqwest::Client::new();
    let (session, mut messages) = conversation("ttfb", 20);
    let mut n = 0;
    let mut group = c.benchmark_group("first_byte");
    group.measurement_time(Duration::from_secs(6));
    let direct = format!("{up}/v1/messages");
    group.bench_function("straight_to_upstream", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += runtime.block_on(first_byte(&client, &direct, &session, body(&messages)));
            }
            total
        })
    });
    // Each call through the proxy adds an exchange to a warm conversation.
    group.bench_function("through_the_proxy", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                let id = format!("toolu_next_{n}");
                messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]}));
                messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]}));
                total += runtime.block_on(first_byte(
                    &client,
                    &format!("{via}/v1/messages"),
                    &session,
                    body(&messages),
                ));
            }
            total
        })
    });
    // The same through the Responses route: a Codex conversation of 20
    // tool turns, an exchange added each call.
    let mut items = vec![
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Task of codex."}]}),
    ];
    for t in 0..20 {
        items.extend(responses_exchange(
            &format!("call_{t}"),
            &"a\nb\nc\n".repeat(50),
        ));
    }
    group.bench_function("responses_through_the_proxy", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                items.extend(responses_exchange(&format!("call_next_{n}"), "ok"));
                total += runtime.block_on(first_byte(
                    &client,
                    &format!("{via}/v1/responses"),
                    "codex",
                    responses_body("codex", &items),
                ));
            }
            total
        })
    });
    group.finish();

    // 50 conversations each send their next call at the same moment.
    let mut convos: Vec<(String, Vec<Value>)> = (0..50)
        .map(|i| conversation(&format!("s{i}"), 10))
        .collect();
    let mut round = 0;
    let mut group = c.benchmark_group("concurrent");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("50_conversations_one_call_each", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                round += 1;
                let bodies: Vec<(String, String)> = convos
                    .iter_mut()
                    .map(|(s, m)| {
                        let id = format!("toolu_{s}_r{round}");
                        m.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]}));
                        m.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]}));
                        (s.clone(), body(m))
                    })
                    .collect();
                let start = Instant::now();
                runtime.block_on(async {
                    let calls = bodies.into_iter().map(|(s, b)| {
                        let client = client.clone();
                        let url = format!("{via}/v1/messages");
                        tokio::spawn(async move { first_byte(&client, &url, &s, b).await })
                    });
                    for call in calls.collect::<Vec<_>>() {
                        call.await.unwrap();
                    }
                });
                total += start.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
