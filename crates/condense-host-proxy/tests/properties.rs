//! The proxy's invariants over generated Claude Code–shaped conversations
//! (prompts, tool turns with failures, replies, results Claude Code clears,
//! idle gaps, either policy): every byte outside `messages` is the
//! client's; every `tool_use` is answered in the next message and no
//! result is an orphan; every result sent differently from the client's is
//! a stub whose ref pages the original back whole; sending the same request
//! again sends the same bytes.

mod support;

use condense_host_proxy::view::MCP_QUERY_TOOL;
use condense_host_proxy::{Credentials, SessionOptions, Sessions};
use proptest::prelude::*;
use serde_json::{json, Value};
use support::Convo;

#[derive(Debug, Clone)]
enum Step {
    Prompt,
    Tools {
        calls: usize,
        chars: usize,
    },
    Reply,
    /// Claude Code clears the oldest result it has not cleared yet.
    Clear,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => Just(Step::Prompt),
        4 => (1usize..4, 50usize..9000).prop_map(|(calls, chars)| Step::Tools { calls, chars }),
        1 => Just(Step::Reply),
        1 => Just(Step::Clear),
    ]
}

fn result_text(b: &Value) -> String {
    match &b["content"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn blocks(messages: &Value) -> Vec<Value> {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn what_goes_upstream_keeps_the_invariants(
        steps in prop::collection::vec(step(), 4..28),
        gaps in prop::collection::vec(prop_oneof![4 => 1_000i64..20_000, 1 => 400_000i64..3_600_000], 28),
        cache_aware in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let policy = if cache_aware { "cache-aware" } else { "reference" };
        let sessions = Sessions::new(
            dir.path().to_path_buf(),
            SessionOptions::offline(
                json!({"contextPrune": {"enabled": true, "economy": {"policy": policy, "ttlSeconds": 300}}}),
                MCP_QUERY_TOOL,
            ),
        );
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut c = Convo::default();
        c.prompt("Start.");
        let mut now = 1_700_000_000_000i64;
        let mut cleared = 0usize;
        let mut prompts = 0;
        for (i, s) in steps.iter().enumerate() {
            match s {
                Step::Prompt => {
                    // A prompt follows a reply (a turn that ends the run).
                    if c.messages.last().is_some_and(|m| m["role"] == "user") {
                        c.reply("Done.");
                    }
                    prompts += 1;
                    c.prompt(&format!("Next task {prompts}."));
                }
                Step::Tools { calls, chars } => {
                    if c.messages.last().is_some_and(|m| m["role"] == "assistant") {
                        c.prompt("Go on.");
                    }
                    c.tools(*calls, *chars);
                }
                Step::Reply => {
                    if c.messages.last().is_some_and(|m| m["role"] == "user") {
                        c.reply("Here is where things stand.");
                    }
                    c.prompt("Thanks; continue.");
                }
                Step::Clear => {
                    let mut seen = 0;
                    'find: for m in c.messages.iter_mut() {
                        for b in m["content"].as_array_mut().into_iter().flatten() {
                            if b["type"] == "tool_result" {
                                if seen == cleared {
                                    b["content"] = json!("[Old tool result content cleared]");
                                    cleared += 1;
                                    break 'find;
                                }
                                seen += 1;
                            }
                        }
                    }
                }
            }
            if c.messages.last().is_none_or(|m| m["role"] != "user") {
                continue;
            }
            now += gaps[i % gaps.len()];
            let body = c.body("prop");
            let (key, prepared) = runtime.block_on(sessions.prepare(Some("prop"), &Credentials::default(), &body, now));
            let sent = prepared.body.clone().unwrap_or_else(|| body.clone());
            // Outside `messages`, the client's bytes.
            let at = body.find("\"messages\":").unwrap();
            prop_assert_eq!(&sent[..at], &body[..at]);
            let tail = &body[body.find("],\"system\":").unwrap()..];
            prop_assert!(sent.ends_with(tail));
            let sent_v: Value = serde_json::from_str(&sent).unwrap();
            let body_v: Value = serde_json::from_str(&body).unwrap();
            // Pairing.
            let mut open: Vec<String> = Vec::new();
            for m in sent_v["messages"].as_array().unwrap() {
                let bl = m["content"].as_array().cloned().unwrap_or_default();
                let results: Vec<String> = bl.iter().filter(|b| b["type"] == "tool_result").map(|b| b["tool_use_id"].as_str().unwrap().to_owned()).collect();
                for r in &results { prop_assert!(open.contains(r), "orphan result {}", r); }
                for o in &open { prop_assert!(results.contains(o), "unanswered call {}", o); }
                open = bl.iter().filter(|b| b["type"] == "tool_use").map(|b| b["id"].as_str().unwrap().to_owned()).collect();
            }
            // A result sent differently is a stub that pages its original back.
            let originals: std::collections::HashMap<String, String> = blocks(&body_v["messages"])
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| (b["tool_use_id"].as_str().unwrap().to_owned(), result_text(b)))
                .collect();
            for b in blocks(&sent_v["messages"]).iter().filter(|b| b["type"] == "tool_result") {
                let id = b["tool_use_id"].as_str().unwrap();
                let text = result_text(b);
                let original = &originals[id];
                if &text == original {
                    continue;
                }
                prop_assert!(!original.contains("[Old tool result content cleared]"), "a cleared result was rewritten");
                let r = text.rsplit("ref `").next().and_then(|x| x.split('`').next()).unwrap_or("");
                prop_assert!(!r.is_empty(), "not a stub: {}", &text[..text.len().min(200)]);
                let answer = runtime.block_on(sessions.query(key.as_deref().unwrap(), &[r.to_owned()], Default::default(), now)).unwrap();
                let answer = answer["text"].as_str().unwrap_or("");
                prop_assert!(answer.contains(original.as_str()), "{} does not page back {}", r, id);
            }
            // The same request again: the same bytes.
            let (_, again) = runtime.block_on(sessions.prepare(Some("prop"), &Credentials::default(), &body, now));
            prop_assert_eq!(again.body.unwrap_or_else(|| body.clone()), sent);
        }
    }
}

/// A content block of any shape a client might send, well-formed or not.
fn any_block() -> impl Strategy<Value = Value> {
    let id = prop_oneof![Just("a".to_owned()), Just("b".to_owned()), "[a-z]{1,3}"];
    prop_oneof![
        6 => "[ -~é😀\\\\\"]{0,40}".prop_map(|t| json!({"type": "text", "text": t})),
        6 => (id.clone(), "[A-Za-z_]{0,12}").prop_map(|(i, n)| json!({"type": "tool_use", "id": i, "name": n, "input": {"x": 1}})),
        6 => (id.clone(), "[ -~]{0,60}", any::<bool>()).prop_map(|(i, t, e)| json!({"type": "tool_result", "tool_use_id": i, "content": t, "is_error": e})),
        2 => (id.clone(), "[ -~]{0,30}").prop_map(|(i, t)| json!({"type": "tool_result", "tool_use_id": i, "content": [{"type": "text", "text": t}, {"type": "tool_reference", "tool_name": "x"}]})),
        1 => id.clone().prop_map(|i| json!({"type": "tool_result", "tool_use_id": i})),
        1 => Just(json!({"type": "thinking", "thinking": "hmm", "signature": "sig"})),
        1 => Just(json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})),
        1 => Just(json!({"type": "mystery", "payload": [1, {"deep": null}]})),
        // Shapes the API refuses: the request goes as it is.
        1 => Just(json!({"type": "text"})),
        1 => Just(json!(42)),
    ]
}

fn any_message() -> impl Strategy<Value = Value> {
    (
        prop_oneof![6 => Just("user"), 6 => Just("assistant"), 1 => Just("system"), 1 => Just("tool")],
        prop_oneof![
            12 => prop::collection::vec(any_block(), 0..4).prop_map(Value::Array),
            3 => "[ -~]{0,20}".prop_map(Value::String),
            1 => Just(Value::Null),
        ],
    )
        .prop_map(|(role, content)| json!({"role": role, "content": content}))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever a client sends, the proxy answers without a panic, and what
    /// it sends upstream is JSON whose fields outside `messages` are the
    /// client's.
    #[test]
    fn any_request_is_prepared_without_a_panic(
        histories in prop::collection::vec(prop::collection::vec(any_message(), 0..8), 1..5),
        header in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::new(
            dir.path().to_path_buf(),
            SessionOptions::offline(json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}), MCP_QUERY_TOOL),
        );
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut messages: Vec<Value> = Vec::new();
        for (i, more) in histories.into_iter().enumerate() {
            messages.extend(more);
            let body = json!({"model": "m", "messages": messages, "metadata": {"user_id": "{\"session_id\":\"fuzz\"}"}, "stream": true}).to_string();
            let (_, prepared) = runtime.block_on(sessions.prepare(
                header.then_some("fuzz"),
                &Credentials::default(),
                &body,
                1_700_000_000_000 + i as i64 * 1000,
            ));
            if let Some(sent) = prepared.body {
                let v: Value = serde_json::from_str(&sent).expect("JSON upstream");
                prop_assert_eq!(&v["model"], &json!("m"));
                prop_assert_eq!(&v["stream"], &json!(true));
            }
        }
    }
}
