//! Codex-shaped (Responses) and Chat Completions conversations through the
//! proxy's sessions, in process: stubs in tool outputs that page back
//! whole, the client's other bytes (reasoning with its encrypted content,
//! tool-search items, developer messages) untouched, the query tool's
//! placeholder answered, and a restart that renders the same.

mod support;

use std::path::Path;

use condense_host_proxy::openai::Format;
use condense_host_proxy::query_tool::PENDING_MARKER;
use condense_host_proxy::view::MCP_QUERY_TOOL;
use condense_host_proxy::{Credentials, SessionOptions, Sessions};
use serde_json::{json, Value};
use support::{output, settings, Codex};

fn sessions(dir: &Path) -> Sessions {
    Sessions::new(
        dir.to_path_buf(),
        SessionOptions::offline(settings("reference"), MCP_QUERY_TOOL),
    )
}

async fn sent(s: &Sessions, body: &str, format: Format, now: i64) -> (Option<String>, String) {
    let (key, p) = s
        .prepare_openai(None, &Credentials::default(), body, format, now)
        .await;
    (key, p.body.unwrap_or_else(|| body.to_owned()))
}

fn items(body: &str, field: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(body).unwrap();
    v[field].as_array().cloned().unwrap_or_default()
}

/// The bytes outside the item list.
fn outside(body: &str, field: &str) -> (String, String) {
    let at = body.find(&format!("\"{field}\":[")).unwrap();
    let v: Value = serde_json::from_str(body).unwrap();
    let list = serde_json::to_string(&v[field]).unwrap();
    let end = at + field.len() + 3 + list.len() - 1;
    (
        body[..at].to_owned(),
        body[end.min(body.len())..].to_owned(),
    )
}

/// Every call's output follows it before the next message; every output
/// answers a call.
fn assert_paired(items: &[Value]) {
    let mut open: Vec<String> = Vec::new();
    for it in items {
        let kind = it["type"].as_str().unwrap_or("message");
        match kind {
            "function_call" | "tool_search_call" => {
                open.push(it["call_id"].as_str().unwrap().to_owned())
            }
            "function_call_output" | "tool_search_output" => {
                let id = it["call_id"].as_str().unwrap();
                assert!(open.iter().any(|o| o == id), "orphan output {id}");
                open.retain(|o| o != id);
            }
            "reasoning" => {}
            _ => assert!(open.is_empty(), "unanswered calls {open:?}"),
        }
    }
    assert!(open.is_empty(), "unanswered calls {open:?}");
}

fn stubs(items: &[Value]) -> Vec<(String, String)> {
    items
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .filter_map(|i| {
            let text = i["output"].as_str()?;
            let rest = text.strip_prefix("[Summarized in pruner summary, ref `")?;
            Some((
                rest.split('`').next()?.to_owned(),
                i["call_id"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

fn script() -> (Codex, Vec<String>) {
    let mut c = Codex::new();
    let mut bodies = Vec::new();
    c.prompt("Build the project and fix what fails.");
    bodies.push(c.body());
    for task in 0..3 {
        for _ in 0..2 {
            c.tools(2, 6000);
            bodies.push(c.body());
        }
        c.reply(&format!("Task {task} is done."));
        c.prompt(&format!("Now task {}.", task + 1));
        bodies.push(c.body());
    }
    (c, bodies)
}

#[tokio::test]
async fn codex_outputs_become_stubs_that_page_back_whole_and_nothing_else_changes() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path());
    let (_, bodies) = script();
    let mut last = String::new();
    let mut key = None;
    for (i, body) in bodies.iter().enumerate() {
        (key, last) = sent(
            &s,
            body,
            Format::Responses,
            1_700_000_000_000 + i as i64 * 10_000,
        )
        .await;
        assert_eq!(outside(&last, "input"), outside(body, "input"));
        let out = items(&last, "input");
        assert_paired(&out);
        // Reasoning goes as the client wrote it, byte for byte.
        for r in items(body, "input")
            .iter()
            .filter(|i| i["type"] == "reasoning")
        {
            let text = serde_json::to_string(r).unwrap();
            assert!(last.contains(&text), "reasoning item changed: {text}");
        }
        // The developer and context messages stay first, unchanged.
        assert_eq!(out[..2], items(body, "input")[..2]);
    }
    let stubbed = stubs(&items(&last, "input"));
    assert!(
        stubbed.len() >= 4,
        "the first tasks' outputs are stubs: {stubbed:?}"
    );
    assert!(last.contains(MCP_QUERY_TOOL), "stubs name the MCP tool");
    let key = key.expect("a session");
    for (r, call) in &stubbed {
        let n: usize = call.trim_start_matches("call_").parse().unwrap();
        let answer = s
            .query(&key, std::slice::from_ref(r), Default::default(), 0)
            .await
            .unwrap();
        assert!(
            answer["text"].as_str().unwrap().contains(&output(n, 6000)),
            "{r} pages back output {n} whole"
        );
    }
    // A restarted proxy renders the same bytes.
    drop(s);
    let s = sessions(dir.path());
    let now = 1_700_000_000_000 + (bodies.len() - 1) as i64 * 10_000;
    assert_eq!(
        sent(&s, bodies.last().unwrap(), Format::Responses, now)
            .await
            .1,
        last
    );
}

#[tokio::test]
async fn an_unchanged_codex_history_goes_byte_identical_and_no_tool_means_no_stubs() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path());
    let (_, bodies) = script();
    for (i, body) in bodies.iter().take(3).enumerate() {
        let (_, p) = s
            .prepare_openai(
                None,
                &Credentials::default(),
                body,
                Format::Responses,
                i as i64,
            )
            .await;
        assert!(p.body.is_none(), "call {i} goes as sent");
    }
    // A client that offers no way to page an original back is never sent
    // a stub.
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path());
    for (i, body) in bodies.iter().enumerate() {
        let body = body.replace(
            r#"{"type":"tool_search","execution":"client"}"#,
            r#"{"type":"web_search"}"#,
        );
        let (key, p) = s
            .prepare_openai(
                None,
                &Credentials::default(),
                &body,
                Format::Responses,
                i as i64 * 10_000,
            )
            .await;
        assert!(p.body.is_none() && key.is_none(), "call {i} goes as sent");
    }
}

#[tokio::test]
async fn the_query_placeholder_becomes_the_answer_and_tool_search_stays() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path());
    let (mut c, bodies) = script();
    let t = |i: usize| 1_700_000_000_000 + i as i64 * 10_000;
    let mut last = String::new();
    for (i, body) in bodies.iter().enumerate() {
        last = sent(&s, body, Format::Responses, t(i)).await.1;
    }
    let (r, call) = stubs(&items(&last, "input"))[0].clone();
    let n: usize = call.trim_start_matches("call_").parse().unwrap();
    let id = c.query(json!({"toolCallIds": [r]}));
    let body = c.body();
    let out = sent(&s, &body, Format::Responses, t(bodies.len())).await.1;
    let answer = items(&out, "input")
        .into_iter()
        .find(|i| i["type"] == "function_call_output" && i["call_id"] == id.as_str())
        .unwrap();
    let answer = answer["output"].as_str().unwrap();
    assert!(!answer.contains(PENDING_MARKER));
    assert!(answer.contains(&output(n, 6000)), "the original, whole");
    for kind in ["tool_search_call", "tool_search_output"] {
        let original = items(&body, "input")
            .into_iter()
            .find(|i| i["type"] == kind)
            .unwrap();
        assert!(
            out.contains(&serde_json::to_string(&original).unwrap()),
            "{kind} unchanged"
        );
    }
    // The next call shows the same answer.
    c.reply("Found it.");
    c.prompt("Thanks.");
    let next = sent(&s, &c.body(), Format::Responses, t(bodies.len() + 1))
        .await
        .1;
    assert!(next.contains(&serde_json::to_string(&Value::String(answer.to_owned())).unwrap()));
}

#[tokio::test]
async fn chat_completions_tool_messages_become_stubs() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path());
    let mut messages = vec![
        json!({"role": "system", "content": "You are a coding agent."}),
        json!({"role": "user", "content": "Build it."}),
    ];
    let tools = json!([{"type": "function", "function": {"name": "bash", "parameters": {}}}, {"type": "function", "function": {"name": "condense_context_tree_query", "parameters": {}}}]);
    let mut last = String::new();
    let mut n = 0;
    for i in 0..8 {
        for _ in 0..2 {
            n += 1;
            let id = format!("call_{n}");
            messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": json!({"cmd": format!("make {n}")}).to_string()}}]}));
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": output(n, 6000)}));
        }
        messages.push(json!({"role": "assistant", "content": format!("Step {i} done.")}));
        messages.push(json!({"role": "user", "content": format!("Now step {}.", i + 1)}));
        let body = json!({"model": "gpt-4.1", "messages": messages, "tools": tools, "stream": true, "stream_options": {"include_usage": true}}).to_string();
        last = sent(&s, &body, Format::Chat, 1_700_000_000_000 + i * 10_000)
            .await
            .1;
        assert_eq!(outside(&last, "messages"), outside(&body, "messages"));
    }
    let out = items(&last, "messages");
    let stubbed = out
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|t| t.starts_with("[Summarized in pruner summary"))
        })
        .count();
    assert!(stubbed >= 4, "tool messages became stubs: {stubbed}");
    // They name the query tool as the client lists it (OpenCode's MCP
    // naming).
    assert!(
        last.contains("Use condense_context_tree_query"),
        "{}",
        &last[..last.len().min(400)]
    );
    // Every tool message answers the assistant message's calls before it.
    let mut open: Vec<String> = Vec::new();
    for m in &out {
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap().to_owned();
            assert!(open.contains(&id), "orphan {id}");
            open.retain(|o| *o != id);
        } else {
            assert!(open.is_empty());
            for c in m["tool_calls"].as_array().into_iter().flatten() {
                open.push(c["id"].as_str().unwrap().to_owned());
            }
        }
    }
}

#[tokio::test]
async fn a_request_read_after_the_previous_one_renders_as_one_read_whole() {
    // One proxy reads each call after the previous one (only what it
    // adds); the other is a new proxy each call (the log replayed, the
    // body read whole). Same bytes out, through flushes and a query.
    let fast_dir = tempfile::tempdir().unwrap();
    let whole_dir = tempfile::tempdir().unwrap();
    let fast = sessions(fast_dir.path());
    let (mut c, mut bodies) = script();
    c.query(json!({"toolCallIds": ["t2"]}));
    bodies.push(c.body());
    c.tools(1, 5000);
    bodies.push(c.body());
    let mut stubbed = 0;
    for (i, body) in bodies.iter().enumerate() {
        let t = 1_700_000_000_000 + i as i64 * 10_000;
        let a = sent(&fast, body, Format::Responses, t).await.1;
        let b = sent(&sessions(whole_dir.path()), body, Format::Responses, t)
            .await
            .1;
        assert_eq!(a, b, "call {i}");
        stubbed = stubs(&items(&a, "input")).len();
    }
    assert!(stubbed >= 4, "{stubbed}");
}

#[tokio::test]
async fn a_codex_request_whose_output_answers_no_call_goes_as_written() {
    // The upstream refuses such a request; condense must not mend it.
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path());
    let (mut c, bodies) = script();
    let t = |i: usize| 1_700_000_000_000 + i as i64 * 10_000;
    for (i, body) in bodies.iter().enumerate() {
        sent(&s, body, Format::Responses, t(i)).await;
    }
    c.items
        .push(json!({"type": "function_call_output", "call_id": "call_none", "output": "stray"}));
    let body = c.body();
    let (_, p) = s
        .prepare_openai(
            None,
            &Credentials::default(),
            &body,
            Format::Responses,
            t(99),
        )
        .await;
    support::assert_sent_as_written(&p, "answers no call");
}
