//! A resumed OpenCode session is sent what the live one was: condense's
//! state rebuilt from its log in a new process renders the same messages,
//! in a real OpenCode against the scripted server (see `e2e_opencode.rs`).

mod support;

use serde_json::{json, Value};
use support::fake_llm::{FakeLlm, RecordedRequest, Reply};
use support::opencode_env::{require_opencode, OpenCodeEnv};
use support::scenario::{outline, read_alpha_then_go_on, sidecar_bin, stub_text, tool_result};

/// The request's messages without the system prompt (which OpenCode builds afresh).
fn conversation(request: &RecordedRequest) -> Vec<Value> {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] != "system")
        .cloned()
        .collect()
}

/// A reply's flush runs when the next process reports the reply, and the
/// live sidecar shows its summary before the reply (where pi's session file
/// has it). A third process, rebuilding everything from the log, sends the
/// second one's conversation unchanged, the summary still before the reply.
#[test]
fn a_resumed_session_sends_what_the_live_one_sent() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text("- alpha.txt holds ALPHA-r5e1 lines."));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(&json!({"enabled": true, "economy": {"policy": "reference"}}));
    read_alpha_then_go_on(&env, &llm, "ALPHA-r5e1");
    llm.push(Reply::text("Still here."));
    env.run("Anything else?", true).assert_success();

    let main = llm.main_requests();
    assert_eq!(main.len(), 4, "{}", outline(&llm));
    let live = conversation(&main[2]);
    let resumed = conversation(&main[3]);
    assert_eq!(
        tool_result(&main[2], "call_a"),
        Some(stub_text("t1")),
        "{}\n{}",
        outline(&llm),
        env.protocol_log()
    );
    let texts: Vec<String> = live.iter().map(support::fake_llm::message_text).collect();
    let summary = texts.iter().position(|t| t.contains("ALPHA-r5e1 lines"));
    let reply = texts.iter().position(|t| t == "I read alpha.txt.");
    assert!(
        summary.is_some() && summary < reply,
        "the live call shows the reply's summary before the reply\n{}",
        outline(&llm)
    );
    assert!(resumed.len() > live.len(), "{}", outline(&llm));
    assert_eq!(
        resumed[..live.len()],
        live[..],
        "the resumed process sends the live one's conversation\n{}",
        outline(&llm)
    );
}
