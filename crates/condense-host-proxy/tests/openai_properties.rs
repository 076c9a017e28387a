//! The proxy's invariants over generated OpenAI requests: Codex-shaped
//! conversations (prompts, reasoning, tool turns, replies, queries through
//! tool search, idle gaps, either policy) keep every byte outside `input`,
//! reasoning byte for byte beside the item it came with, the pairing of calls and outputs, stubs that
//! page their originals back whole, and the same bytes for the same
//! request sent again; requests of any shape, in either format, are prepared without
//! a panic.

mod support;

use condense_host_proxy::openai::Format;
use condense_host_proxy::query_tool::PENDING_MARKER;
use condense_host_proxy::view::MCP_QUERY_TOOL;
use condense_host_proxy::{Credentials, SessionOptions, Sessions};
use proptest::prelude::*;
use serde_json::{json, Value};
use support::Codex;

#[derive(Debug, Clone)]
enum Step {
    Prompt,
    Tools { calls: usize, chars: usize },
    Reply,
    Query,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => Just(Step::Prompt),
        4 => (1usize..4, 50usize..9000).prop_map(|(calls, chars)| Step::Tools { calls, chars }),
        2 => Just(Step::Reply),
        1 => Just(Step::Query),
    ]
}

fn input(body: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(body).unwrap();
    v["input"].as_array().cloned().unwrap_or_default()
}

fn output_text(item: &Value) -> String {
    match &item["output"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn what_goes_upstream_keeps_the_invariants(
        steps in prop::collection::vec(step(), 4..24),
        gaps in prop::collection::vec(prop_oneof![4 => 1_000i64..20_000, 1 => 400_000i64..3_600_000], 24),
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
        let mut c = Codex::new();
        c.prompt("Start.");
        let mut now = 1_700_000_000_000i64;
        let mut prompts = 0;
        let mut refs_seen: Vec<String> = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            let last_role = |c: &Codex| c.items.last().map(|it| (it["type"].clone(), it["role"].clone()));
            match s {
                Step::Prompt => {
                    if last_role(&c) != Some((json!("message"), json!("assistant"))) {
                        c.reply("Done.");
                    }
                    prompts += 1;
                    c.prompt(&format!("Next task {prompts}."));
                }
                Step::Tools { calls, chars } => c.tools(*calls, *chars),
                Step::Reply => {
                    c.reply("Here is where things stand.");
                    c.prompt("Thanks; continue.");
                }
                Step::Query => {
                    let r = refs_seen.last().cloned().unwrap_or_else(|| "t1".to_owned());
                    c.query(json!({"toolCallIds": [r]}));
                }
            }
            now += gaps[i % gaps.len()];
            let body = c.body();
            let (key, prepared) = runtime.block_on(sessions.prepare_openai(Some("prop"), &Credentials::default(), &body, Format::Responses, now));
            let sent = prepared.body.clone().unwrap_or_else(|| body.clone());
            // Outside `input`, the client's bytes.
            let at = body.find("\"input\":").unwrap();
            prop_assert_eq!(&sent[..at], &body[..at]);
            let tail = &body[body.find("],\"tools\":").unwrap()..];
            prop_assert!(sent.ends_with(tail));
            let out = input(&sent);
            let original = input(&body);
            // Reasoning goes byte for byte, with the item it came with (a
            // chain condense dropped takes its reasoning along).
            for (k, r) in out.iter().enumerate().filter(|(_, i)| i["type"] == "reasoning") {
                prop_assert!(sent.contains(&serde_json::to_string(r).unwrap()));
                let at = original.iter().position(|o| o == r).expect("a reasoning item the client sent");
                prop_assert_eq!(out.get(k + 1), original.get(at + 1), "reasoning keeps its next item");
            }
            // Pairing: each call's output follows it before any message.
            let mut open: Vec<String> = Vec::new();
            for it in &out {
                match it["type"].as_str().unwrap_or("") {
                    "function_call" | "tool_search_call" => open.push(it["call_id"].as_str().unwrap().to_owned()),
                    "function_call_output" | "tool_search_output" => {
                        let id = it["call_id"].as_str().unwrap();
                        prop_assert!(open.iter().any(|o| o == id), "orphan output {}", id);
                        open.retain(|o| o != id);
                    }
                    "reasoning" => {}
                    _ => prop_assert!(open.is_empty(), "unanswered {:?}", open),
                }
            }
            prop_assert!(open.is_empty(), "unanswered {:?}", open);
            // An output sent differently is a stub that pages its original
            // back whole, or the query's answer in place of the placeholder.
            let originals: std::collections::HashMap<String, String> = original
                .iter()
                .filter(|i| i["type"] == "function_call_output")
                .map(|i| (i["call_id"].as_str().unwrap().to_owned(), output_text(i)))
                .collect();
            for it in out.iter().filter(|i| i["type"] == "function_call_output") {
                let id = it["call_id"].as_str().unwrap();
                let text = output_text(it);
                let first = &originals[id];
                if &text == first {
                    continue;
                }
                if first.contains(PENDING_MARKER) {
                    prop_assert!(!text.contains(PENDING_MARKER), "the placeholder is answered");
                    continue;
                }
                let r = text.rsplit("ref `").next().and_then(|x| x.split('`').next()).unwrap_or("");
                prop_assert!(!r.is_empty(), "not a stub: {}", &text[..text.len().min(200)]);
                refs_seen.push(r.to_owned());
                let answer = runtime.block_on(sessions.query(key.as_deref().unwrap(), &[r.to_owned()], Default::default(), now)).unwrap();
                prop_assert!(answer["text"].as_str().unwrap_or("").contains(first.as_str()), "{} does not page back {}", r, id);
            }
            // The same request again (a client's retry): the same bytes.
            let (_, again) = runtime.block_on(sessions.prepare_openai(Some("prop"), &Credentials::default(), &body, Format::Responses, now));
            prop_assert_eq!(again.body.unwrap_or_else(|| body.clone()), sent);
        }
    }
}

/// An item of any shape a client might send, well-formed or not.
fn any_item() -> impl Strategy<Value = Value> {
    let id = prop_oneof![Just("a".to_owned()), Just("b".to_owned()), "[a-z]{1,3}"];
    prop_oneof![
        4 => ("[ -~é😀\\\\\"]{0,40}", prop_oneof![Just("user"), Just("developer"), Just("assistant"), Just("system")])
            .prop_map(|(t, r)| json!({"type": "message", "role": r, "content": [{"type": "input_text", "text": t}]})),
        4 => (id.clone(), "[a-z_]{0,12}", "[ -~]{0,20}").prop_map(|(i, n, a)| json!({"type": "function_call", "call_id": i, "name": n, "arguments": a})),
        4 => (id.clone(), "[ -~]{0,60}").prop_map(|(i, t)| json!({"type": "function_call_output", "call_id": i, "output": t})),
        1 => id.clone().prop_map(|i| json!({"type": "function_call_output", "call_id": i, "output": [{"type": "input_image", "image_url": "data:"}]})),
        1 => id.clone().prop_map(|i| json!({"type": "custom_tool_call", "call_id": i, "name": "apply_patch", "input": "*** Begin Patch"})),
        1 => id.clone().prop_map(|i| json!({"type": "tool_search_call", "call_id": i, "arguments": {}})),
        1 => id.clone().prop_map(|i| json!({"type": "tool_search_output", "call_id": i, "tools": []})),
        1 => Just(json!({"type": "reasoning", "summary": [], "encrypted_content": "e"})),
        1 => Just(json!({"type": "mystery_item", "payload": [1, {"deep": null}]})),
        1 => Just(json!({"type": "function_call_output"})),
        1 => Just(json!(42)),
    ]
}

/// A Chat Completions message of any shape.
fn any_chat_message() -> impl Strategy<Value = Value> {
    let id = prop_oneof![Just("a".to_owned()), Just("b".to_owned()), "[a-z]{1,3}"];
    prop_oneof![
        3 => "[ -~]{0,30}".prop_map(|t| json!({"role": "user", "content": t})),
        3 => (id.clone(), "[ -~]{0,20}").prop_map(|(i, a)| json!({"role": "assistant", "content": null, "tool_calls": [{"id": i, "type": "function", "function": {"name": "bash", "arguments": a}}]})),
        3 => (id.clone(), "[ -~]{0,60}").prop_map(|(i, t)| json!({"role": "tool", "tool_call_id": i, "content": t})),
        1 => Just(json!({"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "refusal", "refusal": "no"}]})),
        1 => Just(json!({"role": "tool", "content": "no id"})),
        1 => Just(json!({"content": "no role"})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever a client sends, the proxy answers without a panic, and what
    /// it sends upstream is JSON whose other fields are the client's.
    #[test]
    fn any_request_in_either_format_is_prepared_without_a_panic(
        histories in prop::collection::vec(prop::collection::vec(any_item(), 0..8), 1..5),
        chats in prop::collection::vec(prop::collection::vec(any_chat_message(), 0..8), 1..5),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::new(
            dir.path().to_path_buf(),
            SessionOptions::offline(json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}), MCP_QUERY_TOOL),
        );
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let tools = json!([{"type": "tool_search", "execution": "client"}, {"type": "function", "name": "context_tree_query"}]);
        for (format, field, lists) in [(Format::Responses, "input", histories), (Format::Chat, "messages", chats)] {
            let mut items: Vec<Value> = Vec::new();
            for (i, more) in lists.into_iter().enumerate() {
                items.extend(more);
                let body = json!({"model": "m", field: items, "tools": tools, "stream": true, "prompt_cache_key": "fuzz"}).to_string();
                let (_, prepared) = runtime.block_on(sessions.prepare_openai(
                    None,
                    &Credentials::default(),
                    &body,
                    format,
                    1_700_000_000_000 + i as i64 * 1000,
                ));
                if let Some(sent) = prepared.body {
                    let v: Value = serde_json::from_str(&sent).expect("JSON upstream");
                    prop_assert_eq!(&v["model"], &json!("m"));
                    prop_assert_eq!(&v["tools"], &tools);
                }
            }
        }
    }
}
