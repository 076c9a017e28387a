//! An OpenAI-compatible client through `condense proxy`: the real OpenCode
//! (from the npm registry) with condense's own plugin off, its provider's
//! base URL on the proxy (Chat Completions) and `condense mcp` as an MCP
//! server, against the scripted server on 127.0.0.1, with a recording relay
//! in front of the proxy so what OpenCode sent can be compared with what
//! went upstream.

mod support;

use std::path::Path;

use condense_host_proxy::query_tool::PENDING_MARKER;
use condense_testkit::fake_llm::{FakeLlm, RecordedRequest, Reply};
use condense_testkit::opencode_env::{require_opencode, OpenCodeEnv};
use condense_testkit::relay::Relay;
use serde_json::{json, Value};
use support::ProxyProcess;

/// OpenCode's name for the MCP server `condense`'s tool.
const QUERY_TOOL: &str = "condense_context_tree_query";

/// A note's text: distinct lines, about `chars` long.
fn note(name: &str, chars: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < chars {
        s.push_str(&format!(
            "{name}: measurement {i} reads {} units\n",
            i * 37 % 101
        ));
        i += 1;
    }
    s
}

/// The text of the tool message answering `call_id`.
fn tool_result(request: &RecordedRequest, call_id: &str) -> Option<String> {
    request
        .tool_results()
        .into_iter()
        .find(|(id, _)| id == call_id)
        .map(|(_, text)| text)
}

fn is_stub(text: &str) -> bool {
    text.starts_with("[Summarized in pruner summary")
}

/// The main requests whose last user message is `prompt`.
fn main_with(llm: &FakeLlm, prompt: &str) -> Vec<RecordedRequest> {
    llm.main_requests()
        .into_iter()
        .filter(|r| {
            r.texts_of_role("user")
                .last()
                .is_some_and(|t| t.contains(prompt))
        })
        .collect()
}

fn read(id: &str, file: &Path) -> Reply {
    Reply::tool_call(id, "read", json!({"filePath": file}))
}

#[test]
fn opencode_through_the_proxy_gets_stubs_pages_back_through_mcp_and_forwards_unchanged_history_byte_for_byte(
) {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text("- the notes list measurements."));
    let work = tempfile::tempdir().unwrap();
    let settings = work.path().join("settings.json");
    std::fs::write(
        &settings,
        json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}).to_string(),
    )
    .unwrap();
    let logs = work.path().join("proxy");
    let openai = format!("http://{}", llm.addr());
    let proxy = ProxyProcess::start(
        0,
        &[
            "--upstream".as_ref(),
            "http://127.0.0.1:9".as_ref(),
            "--openai-upstream".as_ref(),
            openai.as_ref(),
            "--dir".as_ref(),
            logs.as_os_str(),
            "--settings".as_ref(),
            settings.as_os_str(),
        ],
    );
    let relay = Relay::start(proxy.addr.parse().unwrap());
    let env = OpenCodeEnv::new(install, &format!("{}/v1", relay.url()), None);
    env.without_plugin();
    env.add_mcp_server(
        "condense",
        &[env!("CARGO_BIN_EXE_condense").to_owned(), "mcp".to_owned()],
    );
    let mut files = Vec::new();
    for name in ["a", "b", "c"] {
        let path = env.project.join(format!("{name}.txt"));
        std::fs::write(&path, note(name, 6000)).unwrap();
        files.push(path);
    }
    llm.push(read("call_a", &files[0]));
    llm.push(read("call_b", &files[1]));
    llm.push(read("call_c", &files[2]));
    llm.push(Reply::text("Read all three."));
    let run1 = env.run("Read the three notes.", false);
    run1.assert_success();
    llm.push(Reply::tool_call(
        "call_q",
        QUERY_TOOL,
        json!({"toolCallIds": ["t1"]}),
    ));
    llm.push(Reply::text("a.txt lists measurements."));
    let run2 = env.run("What did a.txt say?", true);
    run2.assert_success();
    llm.assert_script_consumed();
    let proxy_log = proxy.stop();

    // The query tool reached the model under OpenCode's MCP name.
    let first = &llm.main_requests()[0];
    assert!(
        first.tool_names().iter().any(|t| t == QUERY_TOOL),
        "{:?}",
        first.tool_names()
    );
    // 1. Before any summary, what OpenCode sent went upstream byte for byte.
    let sent: Vec<Vec<u8>> = relay
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .map(|r| r.body)
        .collect();
    let upstream: Vec<RecordedRequest> = llm.main_requests();
    let run1_calls = main_with(&llm, "Read the three notes.").len();
    assert!(run1_calls >= 4, "{run1_calls}");
    for (i, up) in upstream.iter().take(run1_calls).enumerate() {
        assert_eq!(
            up.raw_body, sent[i],
            "call {i} of the first prompt went as OpenCode sent it"
        );
    }
    // 2. After the first prompt, its reads are stubs naming the MCP tool.
    let second = main_with(&llm, "What did a.txt say?");
    let at_cold = &second[0];
    for id in ["call_a", "call_b", "call_c"] {
        let text = tool_result(at_cold, id).unwrap();
        assert!(is_stub(&text), "{id}: {}", &text[..text.len().min(200)]);
        assert!(text.contains(QUERY_TOOL), "{text}");
    }
    // 3. The query's answer is a.txt as OpenCode sent it, in place of the
    // MCP server's placeholder.
    let original = upstream
        .iter()
        .find_map(|r| tool_result(r, "call_a").filter(|t| !is_stub(t)))
        .unwrap();
    let answer = tool_result(second.last().unwrap(), "call_q").unwrap();
    assert!(!answer.contains(PENDING_MARKER), "{answer}\n{proxy_log}");
    assert!(
        answer.contains(&original),
        "{}",
        &answer[..answer.len().min(300)]
    );
    // 4. Summaries went to the same upstream, in its format.
    assert!(llm
        .summary_requests()
        .iter()
        .all(|r| r.path.ends_with("/chat/completions")));
    assert!(!llm.summary_requests().is_empty());
    // 5. OpenCode's own session holds the originals and the placeholder,
    // never a stub.
    let session = run2.session_id().or(run1.session_id()).unwrap();
    let export = work.path().join("export.json");
    env.export_to(&session, &export);
    let exported = std::fs::read_to_string(&export).unwrap();
    assert!(exported.contains(PENDING_MARKER));
    assert!(!exported.contains("[Summarized in pruner summary"));
    let _: Value = serde_json::from_str(&exported).unwrap();
}
