//! What an OpenCode user sees of condense besides the model's messages: its
//! status (pi's `/pruner status`, here the `context_prune_status` tool) and
//! its notices (toasts), in a real OpenCode against the scripted server
//! (see `e2e_opencode.rs`).

mod support;

use serde_json::json;
use support::fake_llm::{FakeLlm, Reply};
use support::opencode_env::{require_opencode, OpenCodeEnv};
use support::scenario::{outline, project_file, read_call, sidecar_bin, tool_result};

/// A budget flush's notice reaches the UI as a toast, and the status tool
/// answers with pi's `/pruner status` text: the settings, the summarizer's
/// calls, and the cache economics of the calls OpenCode recorded so far.
#[test]
fn the_status_tool_and_a_flush_toast() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text("- alpha.txt holds ALPHA-57a1 lines."));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(
        &json!({"enabled": true, "autoBudgetThreshold": 0.1, "economy": {"policy": "reference"}}),
    );
    let alpha = project_file(&env, "alpha.txt", "ALPHA-57a1", 5000);
    llm.push(
        read_call("call_a", &alpha)
            .with_usage(20_000, 10)
            .with_cache(12_000, 8_000),
    );
    llm.push(Reply::tool_call("call_s", "context_prune_status", json!({})).with_usage(20_000, 10));
    llm.push(Reply::text("Done.").with_usage(20_000, 10));
    let run = env.run("Read alpha.txt, then show condense's status.", false);
    run.assert_success();
    let main = llm.main_requests();
    assert_eq!(main.len(), 3, "{}\n{}", run.report(), outline(&llm));
    let status = tool_result(&main[2], "call_s").expect("the status tool is answered");
    assert!(
        status.starts_with("pruner status:\n  enabled:  true"),
        "{status}"
    );
    assert!(
        status.contains("--- summarizer ---\n  calls:       1"),
        "{status}"
    );
    assert!(status.contains("--- cache ("), "{status}");
    // The read's call as OpenCode recorded it: 20k prompt tokens, 12k of
    // them read from the cache.
    assert!(
        status
            .contains("calls:        1\n  prompt:       20.0k tokens\n  cache:        read 60.0%"),
        "the read's call is recorded: {status}"
    );

    let log = env.protocol_log();
    assert!(
        log.contains("toast info: pruner: context budget reached — compacting 1 pending turn(s)"),
        "the budget flush's notice is toasted\n{log}"
    );
    // OpenCode took it: its bus carried the toast the TUI shows.
    assert!(
        log.contains(
            "toast event info: pruner: context budget reached — compacting 1 pending turn(s)"
        ),
        "OpenCode published the toast\n{log}"
    );
}
