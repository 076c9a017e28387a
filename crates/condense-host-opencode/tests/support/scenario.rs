//! What the OpenCode end-to-end tests share: the sidecar they load, the
//! files they read, and readings of what the scripted server received and
//! what condense logged.

use std::fs;
use std::path::PathBuf;

use super::fake_llm::{FakeLlm, RecordedRequest};
use super::opencode_env::OpenCodeEnv;

pub fn sidecar_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_condense-opencode"))
}

/// About `bytes` of text with `marker` on every line.
pub fn big_file(marker: &str, bytes: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < bytes {
        out.push_str(&format!(
            "{marker} line {i:04}: the quick brown fox jumps over the lazy dog\n"
        ));
        i += 1;
    }
    out
}

/// The text of the tool message answering `call_id`, if the request has one.
pub fn tool_result(request: &RecordedRequest, call_id: &str) -> Option<String> {
    request
        .tool_results()
        .into_iter()
        .find(|(id, _)| id == call_id)
        .map(|(_, text)| text)
}

/// The main requests (neither summaries nor OpenCode's title call) that carry
/// a result for `call_id`.
pub fn requests_with_result(llm: &FakeLlm, call_id: &str) -> Vec<(RecordedRequest, String)> {
    llm.main_requests()
        .into_iter()
        .filter_map(|r| tool_result(&r, call_id).map(|t| (r, t)))
        .collect()
}

pub fn dump(llm: &FakeLlm) -> String {
    llm.requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// The stub condense shows for `short_ref` (core's stub text).
pub fn stub_text(short_ref: &str) -> String {
    format!("[Summarized in pruner summary, ref `{short_ref}`. Use context_tree_query to retrieve full output.]")
}

/// Every logged entry of `session` in condense's storage.
pub fn logged(env: &OpenCodeEnv, session: &str) -> Vec<serde_json::Value> {
    let file = env.condense_dir().join(format!("{session}.jsonl"));
    fs::read_to_string(&file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub fn custom_of<'a>(
    entries: &'a [serde_json::Value],
    custom_type: &str,
) -> Vec<&'a serde_json::Value> {
    entries
        .iter()
        .filter(|e| e["customType"] == custom_type)
        .collect()
}

/// The main requests in brief (each message's role and first characters),
/// for failure reports.
pub fn outline(llm: &FakeLlm) -> String {
    let mut out = String::new();
    for (i, r) in llm.requests().iter().enumerate() {
        out.push_str(&format!(
            "== request {i} {:?} tools={}\n",
            r.kind,
            r.tool_names().len()
        ));
        for m in r.messages() {
            let role = m["role"].as_str().unwrap_or("?");
            if role == "system" {
                continue;
            }
            let text: String = super::fake_llm::message_text(m).chars().take(150).collect();
            let calls = m["tool_calls"].to_string();
            let calls: String = if calls == "null" {
                String::new()
            } else {
                calls.chars().take(100).collect()
            };
            out.push_str(&format!("  {role}: {text:?} {calls}\n"));
        }
    }
    out
}
