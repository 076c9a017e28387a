//! condense beside another extension whose `context` handler edits the
//! messages it is given in place (a redactor, an annotator). pi hands every
//! handler the same objects in turn, so what condense receives changes from
//! call to call without any new message: the shim must notice (its content
//! keys) and resend from the change, and what the model sees must be built
//! from the edited messages, never from the sidecar's older copy.
//!
//! Needs Node 22 and pi: `support::pi_env::require_pi` installs them into
//! `.cache/pi-e2e` and fails the test if it cannot. `CONDENSE_SKIP_E2E=1`
//! skips it (developer convenience; CI never sets it).

mod support;

use serde_json::{json, Value};
use support::fake_llm::{message_text, FakeLlm, Reply};
use support::pi_env::{require_pi, write_extension, PiEnv};
use support::scenario::{context_timings, extension_dir, sidecar_bin};

/// Loaded before condense: appends one `!` per call so far to every
/// assistant text, editing pi's objects in place and returning nothing.
const EXCLAIM_EXTENSION: &str = r#"import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function (pi: ExtensionAPI) {
  let calls = 0;
  pi.on("context", async (event: any) => {
    calls++;
    for (const message of event.messages) {
      if (message.role !== "assistant" || !Array.isArray(message.content)) continue;
      for (const block of message.content) {
        if (block.type === "text") block.text += "!".repeat(calls);
      }
    }
    return undefined;
  });
}
"#;

fn assistant_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(message_text)
        .collect()
}

#[test]
fn an_extension_editing_messages_in_place_before_condense() {
    let Some(install) = require_pi() else {
        return;
    };
    let llm = FakeLlm::start([
        Reply::tool_call("call_a", "read", json!({"path": "a.txt"}))
            .with_reasoning("I should read a.")
            .with_text("Reading a."),
        Reply::tool_call("call_b", "read", json!({"path": "b.txt"}))
            .with_reasoning("Now b.")
            .with_text("Reading b."),
        Reply::text("Done."),
    ]);
    let exclaim = tempfile::tempdir().expect("temp dir for the extension");
    write_extension(exclaim.path(), &[("index.ts", EXCLAIM_EXTENSION)]).expect("write it");
    // Thinking strip makes condense write its own copy of the older
    // assistant message: built from a stale copy, it would lose a `!`.
    let pi = PiEnv::new(install, &llm.base_url())
        .with_settings(json!({
            "contextPrune": {"enabled": true, "thinkingStrip": {"enabled": true, "keepLastTurns": 1}, "economy": {"policy": "reference"}},
            "compaction": {"enabled": false},
        }))
        .with_extension(exclaim.path())
        .with_extension(extension_dir())
        .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy())
        .with_env("CONDENSE_PI_TIMING", "1");
    std::fs::write(pi.work_dir.join("a.txt"), "alpha\n").expect("write a.txt");
    std::fs::write(pi.work_dir.join("b.txt"), "bravo\n").expect("write b.txt");

    let run = pi.prompt("Read a.txt, then b.txt.");
    run.assert_success();
    llm.assert_script_consumed();
    let requests = llm.main_requests();
    assert_eq!(requests.len(), 3, "{}", run.report());

    // The model sees this call's edits on every assistant message, the one
    // condense rewrote (thinking stripped) included.
    assert_eq!(assistant_texts(&requests[1].body), ["Reading a.!!"]);
    assert_eq!(
        assistant_texts(&requests[2].body),
        ["Reading a.!!!", "Reading b.!!!"],
        "{}",
        run.report()
    );

    // The third call found the first assistant changed and resent from it.
    let calls = context_timings(&run);
    assert_eq!(calls.len(), 3, "{}", run.report());
    assert_eq!(
        calls[2].keep, 1,
        "resent from the edited message: {calls:?}"
    );
    assert_eq!(calls[2].append, calls[2].messages - 1);
    // condense did rewrite that message (a step it sent, not a kept input).
    assert!(
        calls[2].steps.is_some(),
        "thinking strip changed the request: {calls:?}"
    );
}
