//! Smoke test of the end-to-end harness: real pi (pinned, from the npm
//! registry) on Node 22, a throwaway extension, and the scripted fake LLM.
//!
//! The extension's `context` handler replaces every tool result's text with
//! `[pruned]`. The test proves that
//! * the LLM request after the tool call carries `[pruned]`, not the file,
//! * the session JSONL keeps the original tool output,
//! * a second prompt with `--session <file>` continues the same session.
//!
//! Needs Node 22 and pi: `support::pi_env::require_pi` installs them into
//! `.cache/pi-e2e` and fails the test if it cannot. `CONDENSE_SKIP_E2E=1`
//! skips it (developer convenience; CI never sets it).

mod support;

use serde_json::{json, Value};
use support::fake_llm::{FakeLlm, Reply};
use support::pi_env::{pi_message_text, read_jsonl, require_pi, session_messages, PiEnv};

/// A pruning extension in the shape the real shim will have: a package
/// directory, TypeScript, only `import type` from pi.
const PRUNE_EXTENSION: &str = r#"import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function (pi: ExtensionAPI) {
  pi.on("context", async (event) => {
    const messages = event.messages.map((message: any) =>
      message.role === "toolResult"
        ? { ...message, content: [{ type: "text", text: "[pruned]" }] }
        : message,
    );
    return { messages };
  });
}
"#;

const FILE_CONTENT: &str = "hello-from-the-e2e-file 7c1f9a\nsecond line\n";

fn role(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("")
}

#[test]
fn context_hook_prunes_the_request_but_not_the_session() {
    let Some(install) = require_pi() else {
        return;
    };
    let llm = FakeLlm::start([
        Reply::tool_call("call_read_1", "read", json!({"path": "notes.txt"}))
            .with_text("Let me read the file."),
        Reply::text("The file greets us."),
    ]);
    let ext_dir = tempfile::tempdir().expect("temp dir for the extension");
    support::pi_env::write_extension(ext_dir.path(), &[("index.ts", PRUNE_EXTENSION)])
        .expect("write the test extension");
    let pi = PiEnv::new(install, &llm.base_url()).with_extension(ext_dir.path());
    std::fs::write(pi.work_dir.join("notes.txt"), FILE_CONTENT).expect("write notes.txt");

    // First prompt: one tool call, then a final text.
    let run = pi.prompt("Read notes.txt and tell me what it says.");
    run.assert_success();
    eprintln!(
        "e2e: first pi run took {:.1}s",
        run.output.elapsed.as_secs_f64()
    );
    llm.assert_script_consumed();

    let requests = llm.main_requests();
    assert_eq!(
        requests.len(),
        2,
        "expected two LLM calls\n{}",
        run.report()
    );
    let first = &requests[0];
    assert_eq!(first.path, "/v1/chat/completions");
    assert_eq!(first.body["model"], "fake-1");
    assert_eq!(first.body["stream"], true);
    assert!(
        first.tool_names().iter().any(|t| t == "read"),
        "pi's built-in read tool is declared: {:?}",
        first.tool_names()
    );
    assert!(first.system_prompt().is_some(), "pi sends a system prompt");
    assert!(first.texts_of_role("user")[0].contains("Read notes.txt"));

    let second = &requests[1];
    assert_eq!(
        second.tool_results(),
        vec![("call_read_1".to_owned(), "[pruned]".to_owned())],
        "the context hook's edit reaches the LLM"
    );
    assert!(
        !second.any_message_contains("hello-from-the-e2e-file"),
        "the file content must not reach the LLM: {}",
        second.body
    );

    // The session file keeps the original tool output.
    let session = pi.session_file(&run);
    let messages = session_messages(&read_jsonl(&session));
    let tool_result = messages
        .iter()
        .find(|m| role(m) == "toolResult")
        .unwrap_or_else(|| panic!("no toolResult in {}", session.display()));
    assert_eq!(tool_result["toolCallId"], "call_read_1");
    assert!(
        pi_message_text(tool_result).contains("hello-from-the-e2e-file 7c1f9a"),
        "session keeps the original: {tool_result}"
    );
    let last = messages.last().expect("messages in the session");
    assert_eq!(role(last), "assistant");
    assert_eq!(pi_message_text(last), "The file greets us.");

    let types = run.event_types();
    for expected in [
        "session",
        "agent_start",
        "tool_execution_start",
        "tool_execution_end",
        "agent_end",
    ] {
        assert!(
            types.iter().any(|t| t == expected),
            "json mode prints {expected}: {types:?}"
        );
    }

    // Second prompt in the same session: the history comes back (with the
    // tool result pruned again) and the same file grows.
    llm.push(Reply::text("Still greeting."));
    let run2 = pi.prompt_in_session(&session, "And now?");
    run2.assert_success();
    eprintln!(
        "e2e: second pi run took {:.1}s",
        run2.output.elapsed.as_secs_f64()
    );
    llm.assert_script_consumed();
    let requests = llm.main_requests();
    assert_eq!(requests.len(), 3);
    let third = &requests[2];
    assert_eq!(
        third.texts_of_role("user").last().map(String::as_str),
        Some("And now?")
    );
    assert_eq!(
        third.tool_results(),
        vec![("call_read_1".to_owned(), "[pruned]".to_owned())]
    );
    assert_eq!(run2.session_id(), run.session_id(), "same session");
    assert_eq!(pi.session_files(), vec![session.clone()]);
    let messages = session_messages(&read_jsonl(&session));
    assert_eq!(
        messages.last().map(pi_message_text).as_deref(),
        Some("Still greeting.")
    );
    assert!(llm.summary_requests().is_empty());
}
