//! condense inside a real OpenCode (`opencode-ai`, pinned in
//! `support/opencode_env.rs`) against the scripted OpenAI-compatible server:
//! what the model is sent, across prompts, restarts and a missing sidecar.

mod support;

use std::fs;
use std::path::PathBuf;

use serde_json::json;
use support::fake_llm::{FakeLlm, RecordedRequest, Reply};
use support::opencode_env::{require_opencode, OpenCodeEnv};

const SUMMARY_TEXT: &str = "- alpha.txt holds numbered ALPHA lines.";

fn sidecar_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_condense-opencode"))
}

/// About `bytes` of text with `marker` on every line.
fn big_file(marker: &str, bytes: usize) -> String {
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
fn tool_result(request: &RecordedRequest, call_id: &str) -> Option<String> {
    request
        .tool_results()
        .into_iter()
        .find(|(id, _)| id == call_id)
        .map(|(_, text)| text)
}

/// The main requests (neither summaries nor OpenCode's title call) that carry
/// a result for `call_id`.
fn requests_with_result(llm: &FakeLlm, call_id: &str) -> Vec<(RecordedRequest, String)> {
    llm.main_requests()
        .into_iter()
        .filter_map(|r| tool_result(&r, call_id).map(|t| (r, t)))
        .collect()
}

fn dump(llm: &FakeLlm) -> String {
    llm.requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

#[test]
fn stubs_query_and_restart() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(&json!({"enabled": true}));
    let file = env.project.join("alpha.txt");
    fs::write(&file, big_file("ALPHA-7f3e", 6000)).expect("write alpha.txt");

    // Prompt 1: a read, then a text reply.
    llm.push(Reply::tool_call(
        "call_a",
        "read",
        json!({"filePath": file}),
    ));
    llm.push(Reply::text("I read alpha.txt."));
    let run = env.run("Read alpha.txt.", false);
    run.assert_success();
    let original = requests_with_result(&llm, "call_a");
    let (_, original) = original.first().unwrap_or_else(|| {
        panic!(
            "the read's result reached the model\n{}\n{}",
            run.report(),
            dump(&llm)
        )
    });
    assert!(original.contains("ALPHA-7f3e line 0000"), "{original}");
    let original = original.clone();

    // Prompt 2: the final reply flushed; the read is a stub now, and the
    // query brings the original back byte for byte.
    llm.push(Reply::tool_call(
        "call_q",
        "context_tree_query",
        json!({"toolCallIds": ["t1"]}),
    ));
    llm.push(Reply::tool_call(
        "call_p",
        "context_tree_query",
        json!({"toolCallIds": ["t1"], "offset": 3, "limit": 2}),
    ));
    llm.push(Reply::text("Recovered alpha."));
    let run2 = env.run("What did alpha.txt say exactly?", true);
    run2.assert_success();
    assert_eq!(
        run2.session_id(),
        run.session_id(),
        "--continue resumes the session"
    );
    assert!(
        !llm.summary_requests().is_empty(),
        "the summarizer ran through the plugin\n{}\n{}",
        run2.report(),
        env.protocol_log()
    );
    let main = llm.main_requests();
    let first = main
        .iter()
        .find(|r| {
            r.tool_names().iter().any(|t| t == "context_tree_query")
                && r.any_message_contains("What did alpha.txt say")
        })
        .unwrap_or_else(|| panic!("prompt 2 reached the model\n{}", dump(&llm)));
    let stub = tool_result(first, "call_a").expect("the read is still answered");
    assert!(
        stub.starts_with("[Summarized in pruner summary, ref `t1`."),
        "stubbed: {stub}\n{}",
        run2.report()
    );
    assert!(
        !first.any_message_contains("ALPHA-7f3e line 0000"),
        "the original must not reach the model"
    );
    let recovered = main
        .iter()
        .find_map(|r| tool_result(r, "call_q"))
        .unwrap_or_else(|| panic!("the query's result reached the model\n{}", dump(&llm)));
    assert!(recovered.starts_with("## toolRef: t1"), "{recovered}");
    assert!(
        recovered.contains(&original),
        "the whole original comes back byte for byte:\n{recovered}"
    );

    let page = main
        .iter()
        .find_map(|r| tool_result(r, "call_p"))
        .unwrap_or_else(|| panic!("the paged query's result reached the model\n{}", dump(&llm)));
    let wanted: Vec<&str> = original.lines().skip(2).take(2).collect();
    for line in &wanted {
        assert!(page.contains(line), "line {line:?} in the page:\n{page}");
    }
    let outside = original.lines().nth(5).expect("a sixth line");
    assert!(!page.contains(outside), "only lines 3 and 4:\n{page}");

    // condense's log is in OpenCode's data directory, one file per session.
    let session = run.session_id().expect("a session id");
    let log = env.condense_dir().join(format!("{session}.jsonl"));
    let text = fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    assert!(text.contains("context-prune-summary"), "{text}");

    // Prompt 3 in a new process: the same render (rebuilt from the log).
    llm.push(Reply::text("Still here."));
    let run3 = env.run("Anything else?", true);
    run3.assert_success();
    let last = llm
        .main_requests()
        .into_iter()
        .last()
        .expect("prompt 3 reached the model");
    assert_eq!(
        tool_result(&last, "call_a"),
        Some(stub.clone()),
        "the same stub after a restart"
    );
}

#[test]
fn fails_open_without_the_sidecar() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let env = OpenCodeEnv::new(install, &llm.base_url(), None);
    env.write_condense_config(&json!({"enabled": true}));
    let file = env.project.join("alpha.txt");
    fs::write(&file, big_file("ALPHA-7f3e", 6000)).expect("write alpha.txt");
    llm.push(Reply::tool_call(
        "call_a",
        "read",
        json!({"filePath": file}),
    ));
    llm.push(Reply::text("I read alpha.txt."));
    let run = env.run("Read alpha.txt.", false);
    run.assert_success();
    llm.push(Reply::text("Sure."));
    let run2 = env.run("And again?", true);
    run2.assert_success();
    let last = llm
        .main_requests()
        .into_iter()
        .last()
        .expect("prompt 2 reached the model");
    let text = tool_result(&last, "call_a").expect("the read is answered");
    assert!(text.contains("ALPHA-7f3e line 0000"), "unchanged: {text}");
    assert!(llm.summary_requests().is_empty());
}

#[test]
fn fails_open_when_the_sidecar_dies() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    // A sidecar that serves `hello` and `session.start`, then exits.
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("dying-sidecar");
    fs::write(
        &script,
        format!(
            "#!/bin/sh\nhead -n 2 | {}\n",
            sidecar_bin().to_string_lossy()
        ),
    )
    .expect("write the script");
    fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&script));
    env.write_condense_config(&json!({"enabled": true}));
    let file = env.project.join("alpha.txt");
    fs::write(&file, big_file("ALPHA-7f3e", 6000)).expect("write alpha.txt");
    llm.push(Reply::tool_call(
        "call_a",
        "read",
        json!({"filePath": file}),
    ));
    llm.push(Reply::text("I read alpha.txt."));
    let run = env.run("Read alpha.txt.", false);
    run.assert_success();
    llm.push(Reply::text("Sure."));
    let run2 = env.run("And again?", true);
    run2.assert_success();
    let last = llm
        .main_requests()
        .into_iter()
        .last()
        .expect("prompt 2 reached the model");
    let text = tool_result(&last, "call_a").expect("the read is answered");
    assert!(
        text.contains("ALPHA-7f3e line 0000"),
        "unchanged: {text}\n{}",
        env.protocol_log()
    );
    assert!(
        env.protocol_log().contains("failed:"),
        "the plugin saw the sidecar go: {}",
        env.protocol_log()
    );
}
