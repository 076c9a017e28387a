//! The latency the proxy adds before a request goes upstream: a
//! conversation's next call prepared (read, synced, rendered, written
//! back), at 1M tokens and on a small warm conversation, for Claude Code
//! (Messages) and Codex (Responses); and a conversation's first call
//! carrying its whole history.
//!
//! `cargo bench -p condense-host-proxy --bench prepare`

use std::time::Duration;

use condense_host_proxy::view::MCP_QUERY_TOOL;
use condense_host_proxy::{Credentials, SessionOptions, Sessions};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::{json, Value};

/// A Claude Code–shaped history of about `tokens` tokens (4 characters a
/// token), as tool turns of 3,000-character outputs.
fn history(tokens: usize) -> Vec<Value> {
    let mut messages = vec![
        json!({"role": "user", "content": [{"type": "text", "text": "Work through the backlog."}]}),
    ];
    let mut chars = 0;
    let mut n = 0;
    while chars < tokens * 4 {
        n += 1;
        let id = format!("toolu_{n:06}");
        let out: String = (0..60)
            .map(|i| format!("line {i} of output {n}: status {}\n", (i * n) % 7))
            .collect::<String>()
            .repeat(2);
        chars += out.len();
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": format!("make step{n}")}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": out}]}));
        if n % 40 == 0 {
            messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Done with that part."}]}));
            messages.push(json!({"role": "user", "content": [{"type": "text", "text": format!("Next part {n}.")}]}));
        }
    }
    messages
}

fn body(messages: &[Value]) -> String {
    json!({
        "model": "claude-sonnet-4-5",
        "messages": messages,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "metadata": {"user_id": "{\"session_id\":\"bench\"}"},
        "max_tokens": 32000,
        "stream": true,
    })
    .to_string()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("prepare_next_call");
    group
        .measurement_time(Duration::from_secs(8))
        .sample_size(20);
    for tokens in [20_000usize, 1_000_000] {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::new(
            dir.path().to_path_buf(),
            SessionOptions::offline(json!({"contextPrune": {"enabled": true}}), MCP_QUERY_TOOL),
        );
        let messages = history(tokens);
        // The conversation as the proxy has seen it, up to the last call.
        let warm = body(&messages[..messages.len() - 2]);
        let next = body(&messages);
        let creds = Credentials::default();
        runtime.block_on(sessions.prepare(Some("bench"), &creds, &warm, 1_700_000_000_000));
        runtime.block_on(sessions.prepare(Some("bench"), &creds, &next, 1_700_000_001_000));
        group.bench_with_input(BenchmarkId::from_parameter(tokens), &next, |b, next| {
            b.iter(|| {
                runtime.block_on(sessions.prepare(Some("bench"), &creds, next, 1_700_000_001_000))
            })
        });
    }
    group.finish();
    // The realistic step: each call adds an exchange (the last answer and
    // its tool result), so the new messages are read, fed and logged.
    let mut group = c.benchmark_group("prepare_added_exchange");
    group
        .measurement_time(Duration::from_secs(8))
        .sample_size(20);
    for tokens in [20_000usize, 1_000_000] {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::new(
            dir.path().to_path_buf(),
            SessionOptions::offline(json!({"contextPrune": {"enabled": true}}), MCP_QUERY_TOOL),
        );
        let mut messages = history(tokens);
        let creds = Credentials::default();
        let mut now = 1_700_000_000_000i64;
        runtime.block_on(sessions.prepare(Some("bench"), &creds, &body(&messages), now));
        let mut n = 0usize;
        group.bench_function(BenchmarkId::from_parameter(tokens), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let id = format!("toolu_next_{n}");
                    messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]}));
                    messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": format!("file{n}.txt")}]}));
                    let next = body(&messages);
                    now += 2_000;
                    let start = std::time::Instant::now();
                    runtime.block_on(sessions.prepare(Some("bench"), &creds, &next, now));
                    total += start.elapsed();
                }
                total
            })
        });
    }
    group.finish();
}

/// Sessions logged in a directory of their own, under the default policy.
fn fresh_sessions() -> (tempfile::TempDir, Sessions) {
    let dir = tempfile::tempdir().unwrap();
    let sessions = Sessions::new(
        dir.path().to_path_buf(),
        SessionOptions::offline(json!({"contextPrune": {"enabled": true}}), MCP_QUERY_TOOL),
    );
    (dir, sessions)
}

/// A small conversation's next call, the exchange it adds included, from
/// a session that has seen the conversation up to it (each sample a fresh
/// session, so pending turns do not pile up across samples).
fn bench_small(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("small_conversation_next_call");
    group.measurement_time(Duration::from_secs(8));
    for turns in [10usize, 40] {
        let mut messages =
            vec![json!({"role": "user", "content": [{"type": "text", "text": "Fix the build."}]})];
        for n in 0..turns {
            let id = format!("toolu_{n}");
            messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "make"}}]}));
            messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "line\n".repeat(200)}]}));
        }
        let before = body(&messages[..messages.len() - 2]);
        let next = body(&messages);
        group.bench_function(BenchmarkId::from_parameter(turns), |b| {
            b.iter_batched(
                || {
                    let (dir, sessions) = fresh_sessions();
                    runtime.block_on(sessions.prepare(
                        Some("small"),
                        &Credentials::default(),
                        &before,
                        1_700_000_000_000,
                    ));
                    (dir, sessions)
                },
                |(_dir, sessions)| {
                    runtime.block_on(sessions.prepare(
                        Some("small"),
                        &Credentials::default(),
                        &next,
                        1_700_000_002_000,
                    ))
                },
                criterion::BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// A conversation's first call through the proxy, carrying its whole
/// history (a resumed session): each sample a fresh session.
fn bench_first_seen(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("first_seen_history");
    group
        .measurement_time(Duration::from_secs(10))
        .sample_size(10);
    for tokens in [200_000usize, 1_000_000] {
        let first = body(&history(tokens));
        group.bench_function(BenchmarkId::from_parameter(tokens), |b| {
            b.iter_batched(
                fresh_sessions,
                |(_dir, sessions)| {
                    runtime.block_on(sessions.prepare(
                        Some("first"),
                        &Credentials::default(),
                        &first,
                        1_700_000_000_000,
                    ))
                },
                criterion::BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// A Codex-shaped (Responses) history of about `tokens` tokens.
fn codex_history(tokens: usize) -> Vec<Value> {
    let mut items = vec![
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions instructions/>"}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Work through the backlog."}]}),
    ];
    let mut chars = 0;
    let mut n = 0;
    while chars < tokens * 4 {
        n += 1;
        let id = format!("call_{n:06}");
        let out: String = (0..60)
            .map(|i| format!("line {i} of output {n}: status {}\n", (i * n) % 7))
            .collect::<String>()
            .repeat(2);
        chars += out.len();
        items.push(
            json!({"type": "reasoning", "summary": [], "encrypted_content": format!("gAAAA{n}")}),
        );
        items.push(json!({"type": "function_call", "name": "exec_command", "arguments": json!({"cmd": format!("make step{n}")}).to_string(), "call_id": id}));
        items.push(json!({"type": "function_call_output", "call_id": id, "output": out}));
        if n % 40 == 0 {
            items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done with that part."}]}));
            items.push(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": format!("Next part {n}.")}]}));
        }
    }
    items
}

fn codex_body(items: &[Value]) -> String {
    json!({
        "model": "gpt-5-codex",
        "instructions": "",
        "input": items,
        "tools": [{"type": "function", "name": "exec_command"}, {"type": "tool_search", "execution": "client"}],
        "store": false,
        "stream": true,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "bench-thread",
    })
    .to_string()
}

/// A Codex conversation's next call adding an exchange: an OpenAI body is
/// read whole each call (no incremental read), so this is the cost of the
/// Responses route.
fn bench_openai(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("responses_added_exchange");
    group
        .measurement_time(Duration::from_secs(8))
        .sample_size(20);
    for tokens in [20_000usize, 1_000_000] {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::new(
            dir.path().to_path_buf(),
            SessionOptions::offline(json!({"contextPrune": {"enabled": true}}), MCP_QUERY_TOOL),
        );
        let mut items = codex_history(tokens);
        let creds = Credentials::default();
        let mut now = 1_700_000_000_000i64;
        let format = condense_host_proxy::openai::Format::Responses;
        runtime.block_on(sessions.prepare_openai(None, &creds, &codex_body(&items), format, now));
        let mut n = 0usize;
        group.bench_function(BenchmarkId::from_parameter(tokens), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let id = format!("call_next_{n}");
                    items.push(json!({"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}", "call_id": id}));
                    items.push(json!({"type": "function_call_output", "call_id": id, "output": format!("file{n}.txt")}));
                    let next = codex_body(&items);
                    now += 2_000;
                    let start = std::time::Instant::now();
                    runtime.block_on(sessions.prepare_openai(None, &creds, &next, format, now));
                    total += start.elapsed();
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, bench_small, bench_first_seen, bench_openai);
criterion_main!(benches);

#[allow(dead_code)]
fn probe() {}
