//! condense asks pi to compact where no pruning would have, end to end, on
//! the three pi lines it supports (docs/decisions.md, "A pruned session
//! compacts where no pruning would, when running on would cost more").
//!
//! One pi process in RPC mode, a fresh session, the strict bound
//! (`"maxExcess": 0`) with the summarizer at five times the model's price,
//! a 90,000-token window (pi compacts past 73,616):
//! 1. the model reads three 40 kB files and replies (about 33,000 tokens);
//! 2. `/pruner now` summarizes the reads, shown at the next call: a switch
//!    whose summarizer call and rewrite the session has not saved back;
//! 3. the model reads three more and replies;
//! 4. a long prompt (115 kB) and a reply: the pruned context (the stubs,
//!    the second reads, the prompt: about 63,000 tokens) stays under pi's
//!    compaction point, where the same context unpruned (about 94,000)
//!    passes it. No pruning would compact now, keeping the prompt; running
//!    on with the pruned context, about 30,000 tokens longer, owes more
//!    than the bound has left, so the sidecar answers `agent.end` with a
//!    `compact` effect, and the shim calls `ctx.compact()` once pi is idle.
//!
//! The test checks that pi compacted after the fourth step and not before
//! (its `compaction_end` event and the `compaction` entry), through its own
//! summarization call, and that the next call is sent the compaction's
//! summary and none of the reads. Two controls run the same steps where
//! condense must not ask: under `reference` (no bound), and with pi's
//! compaction turned off in `settings.json`; pi does not compact.

mod support;

use std::fs;

use serde_json::{json, Value};
use support::fake_llm::{FakeLlm, Reply};
use support::pi_env::{
    models_json, read_jsonl, require_pi, require_pi_target, PiEnv, PiInstall, PiTarget,
};
use support::rpc::Rpc;

/// The model's window: pi compacts past it less its 16,384 reserve.
const CONTEXT_WINDOW: u64 = 90_000;
/// What the fake model's compaction summary says.
const COMPACTION_SUMMARY: &str = "## Goal\nRead the alpha and beta files.";

/// A 40 kB file of 400 lines, each naming `marker`.
fn file(marker: &str) -> String {
    (0..400)
        .map(|i| format!("{marker} line {i:03}: {}\n", "x".repeat(80)))
        .collect()
}

fn reads(prefix: &str) -> Reply {
    let mut reply = Reply::tool_call(
        format!("call_{prefix}1"),
        "read",
        json!({"path": format!("{prefix}1.txt")}),
    );
    for i in 2..=3 {
        reply = reply.and_tool_call(
            format!("call_{prefix}{i}"),
            "read",
            json!({"path": format!("{prefix}{i}.txt")}),
        );
    }
    reply
}

/// The fourth step's prompt: about 29,000 tokens, more than pi keeps of
/// the newest messages (20,000), so a compaction cuts before it, at the
/// start of its run, and keeps it whole.
fn long_prompt() -> String {
    format!("Note this down.\n{}", file("NOTE").repeat(3))
}

/// pi with the shim, its compaction on (the test kit turns it off), a
/// 90,000-token model and `economy`; the six files in its working
/// directory.
fn pi_with(install: &'static PiInstall, llm: &FakeLlm, economy: Value) -> PiEnv {
    llm.set_default_summary(Reply::text("- [[1:read]] Read a file of marker lines."));
    let pi = PiEnv::new(install, &llm.base_url()).with_settings(json!({
        "contextPrune": {"enabled": true, "pruneOn": "on-demand", "economy": economy},
        "compaction": {"enabled": true},
    }));
    let mut models = models_json(&llm.base_url());
    models["providers"][support::pi_env::PROVIDER]["models"][0]["contextWindow"] =
        json!(CONTEXT_WINDOW);
    pi.write_models(&models);
    for prefix in ["alpha", "beta"] {
        for i in 1..=3 {
            let marker = format!("{}{i}", prefix.to_uppercase());
            fs::write(pi.work_dir.join(format!("{prefix}{i}.txt")), file(&marker)).expect("write");
        }
    }
    pi
}

/// Steps 1 to 4 of the module doc over RPC; returns the session's entries
/// once the fourth run ended (and, when `compacts`, once pi compacted).
fn run_steps(pi: &PiEnv, llm: &FakeLlm, rpc: &mut Rpc, compacts: bool) -> Vec<Value> {
    let agent_end = |v: &Value| v["type"] == "agent_end";
    rpc.prompt("Read the alpha files.");
    rpc.expect("the first run's end", agent_end);
    rpc.prompt("/pruner now");
    rpc.expect("the flush's notice", |v| {
        v["type"] == "extension_ui_request"
            && v["method"] == "notify"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("pruner: pruned"))
    });
    assert!(!llm.summary_requests().is_empty(), "{}", rpc.report());
    rpc.prompt("Read the beta files.");
    rpc.expect("the third run's end", agent_end);
    rpc.prompt(&long_prompt());
    rpc.expect("the fourth run's end", agent_end);
    if compacts {
        let end = rpc.expect("pi's compaction", |v| v["type"] == "compaction_end");
        assert_eq!(end["reason"], "manual", "{end}");
        assert!(
            end["errorMessage"].is_null() && end["aborted"] != true,
            "{end}\n{}",
            rpc.report()
        );
    }
    let files = pi.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    read_jsonl(&files[0])
}

/// The main script up to the fourth run's reply.
fn four_runs() -> Vec<Reply> {
    vec![
        reads("alpha"),
        Reply::text("Read the alpha files."),
        reads("beta"),
        Reply::text("Read the beta files."),
        Reply::text("Noted."),
    ]
}

fn compacts_where_no_pruning_would(install: &'static PiInstall) {
    let mut script = four_runs();
    script.extend([Reply::text(COMPACTION_SUMMARY), Reply::text("Done.")]);
    let llm = FakeLlm::start(script);
    let pi = pi_with(install, &llm, json!({"maxExcess": 0, "summarizerPrice": 5}));
    let mut rpc = Rpc::start(&pi, None);
    let entries = run_steps(&pi, &llm, &mut rpc, true);

    // One compaction, after the fourth reply: nothing was compacted before.
    let kinds: Vec<&str> = entries.iter().filter_map(|e| e["type"].as_str()).collect();
    let compaction = kinds
        .iter()
        .position(|k| *k == "compaction")
        .unwrap_or_else(|| panic!("no compaction entry: {kinds:?}\n{}", rpc.report()));
    assert_eq!(kinds.iter().filter(|k| **k == "compaction").count(), 1);
    let reply = entries
        .iter()
        .position(|e| {
            e["message"]["role"] == "assistant" && e["message"]["content"][0]["text"] == "Noted."
        })
        .expect("the fourth reply");
    assert!(reply < compaction, "{kinds:?}");
    let summary = entries[compaction]["summary"].as_str().unwrap_or_default();
    assert!(summary.starts_with(COMPACTION_SUMMARY), "{summary}");
    // pi's own check would not have compacted: the pruned call it weighs
    // stayed under the window less the reserve.
    let tokens = |e: &Value| {
        let u = &e["message"]["usage"];
        ["input", "output", "cacheRead", "cacheWrite"]
            .iter()
            .map(|k| u[k].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    assert!(
        tokens(&entries[reply]) < CONTEXT_WINDOW - 16_384,
        "{}",
        entries[reply]
    );

    // The call after it, rendered through condense from pi's compacted
    // list, is sent pi's summary and none of the reads.
    rpc.prompt("Go on.");
    rpc.expect("the fifth run's end", |v| v["type"] == "agent_end");
    llm.assert_script_consumed();
    let main = llm.main_requests();
    // pi's summarization call, between the fourth reply and the next call.
    let compacting = &main[main.len() - 2];
    assert!(
        compacting
            .system_prompt()
            .is_some_and(|s| s.contains("context summarization assistant")),
        "{:?}",
        compacting.system_prompt()
    );
    assert!(compacting.any_message_contains("<conversation>"));
    let last = main.last().expect("the last call");
    assert!(
        last.any_message_contains(COMPACTION_SUMMARY),
        "{}",
        rpc.report()
    );
    for marker in ["ALPHA1 line", "BETA1 line"] {
        assert!(!last.any_message_contains(marker), "{marker} still sent");
    }
}

#[test]
fn pi_0_83_compacts_where_no_pruning_would() {
    if let Some(install) = require_pi() {
        compacts_where_no_pruning_would(install);
    }
}

#[test]
fn pi_1_6_compacts_where_no_pruning_would() {
    if let Some(install) = require_pi_target(&PiTarget::pi_1_6()) {
        compacts_where_no_pruning_would(install);
    }
}

#[test]
fn pi_0_73_node_20_compacts_where_no_pruning_would() {
    if let Some(install) = require_pi_target(&PiTarget::pi_0_73()) {
        compacts_where_no_pruning_would(install);
    }
}

/// Runs the four steps with `economy` and pi's settings patched by
/// `pi_settings`, and checks that pi did not compact.
fn not_compacted(economy: Value, pi_settings: Value) {
    let Some(install) = require_pi() else {
        return;
    };
    let llm = FakeLlm::start(four_runs());
    let pi = pi_with(install, &llm, economy);
    let mut settings = pi.settings();
    support::pi_env::merge_json(&mut settings, &pi_settings);
    pi.write_settings(&settings);
    let mut rpc = Rpc::start(&pi, None);
    let entries = run_steps(&pi, &llm, &mut rpc, false);
    // The shim would compact within its wait once pi is idle: give it that.
    std::thread::sleep(std::time::Duration::from_secs(2));
    llm.assert_script_consumed();
    assert!(
        !entries.iter().any(|e| e["type"] == "compaction"),
        "{}",
        rpc.report()
    );
    assert_eq!(llm.main_requests().len(), 5, "{}", rpc.report());
}

/// Under `reference` there is no bound to keep: condense never asks.
#[test]
fn without_the_bound_pi_is_not_asked_to_compact() {
    not_compacted(json!({"policy": "reference"}), json!({}));
}

/// A user who turned pi's compaction off is not compacted by condense
/// (the shim's `session.start` says it cannot).
#[test]
fn with_pis_compaction_off_pi_is_not_asked_to_compact() {
    not_compacted(
        json!({"maxExcess": 0, "summarizerPrice": 5}),
        json!({"compaction": {"enabled": false}}),
    );
}
