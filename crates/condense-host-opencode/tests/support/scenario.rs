//! What the OpenCode end-to-end tests share: the sidecar they load, the
//! files they read, and readings of what the scripted server received and
//! what condense logged.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::fake_llm::{FakeLlm, RecordedRequest, Reply};
use super::opencode_env::{OpenCodeEnv, OpenCodeRun};
pub use super::text::big_file;

/// The sidecar the plugin starts: the `condense` binary (`condense
/// sidecar`).
pub fn sidecar_bin() -> PathBuf {
    super::cli::condense_bin()
}

/// Writes `name` into the project: about `bytes` of text with `marker` on
/// every line. Returns its path.
pub fn project_file(env: &OpenCodeEnv, name: &str, marker: &str, bytes: usize) -> PathBuf {
    let path = env.project.join(name);
    fs::write(&path, big_file(marker, bytes)).unwrap_or_else(|e| panic!("write {name}: {e}"));
    path
}

/// The model's call `call_id` of OpenCode's `read` tool on `file`.
pub fn read_call(call_id: &str, file: &Path) -> Reply {
    Reply::tool_call(call_id, "read", json!({"filePath": file}))
}

/// Prompt 1 of a session: a read (`call_a`) of a 6 KB `alpha.txt` with
/// `marker` on every line, then a text reply. Returns the run.
pub fn read_alpha(env: &OpenCodeEnv, llm: &FakeLlm, marker: &str) -> OpenCodeRun {
    let file = project_file(env, "alpha.txt", marker, 6000);
    llm.push(read_call("call_a", &file));
    llm.push(Reply::text("I read alpha.txt."));
    let run = env.run("Read alpha.txt.", false);
    run.assert_success();
    run
}

/// [`read_alpha`], then prompt 2 in a new process, whose reply is text: the
/// first reply's flush runs when it is reported there. Returns both runs.
pub fn read_alpha_then_go_on(
    env: &OpenCodeEnv,
    llm: &FakeLlm,
    marker: &str,
) -> (OpenCodeRun, OpenCodeRun) {
    let run = read_alpha(env, llm, marker);
    llm.push(Reply::text("Fine."));
    let run2 = env.run("Go on.", true);
    run2.assert_success();
    (run, run2)
}

/// The last main request the server received, which `prompt` (say
/// "prompt 2") made.
pub fn last_main_request(llm: &FakeLlm, prompt: &str) -> RecordedRequest {
    llm.main_requests()
        .into_iter()
        .last()
        .unwrap_or_else(|| panic!("{prompt} reached the model"))
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

/// The tool-call ids `session`'s `context-prune-index` entries record, in
/// log order.
pub fn indexed_calls(env: &OpenCodeEnv, session: &str) -> Vec<String> {
    custom_of(&logged(env, session), "context-prune-index")
        .iter()
        .filter_map(|e| e["data"]["toolCalls"].as_array())
        .flatten()
        .filter_map(|r| r["toolCallId"].as_str().map(str::to_owned))
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
