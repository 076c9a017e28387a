//! condense inside a real OpenCode (`opencode-ai`, pinned in
//! `support/opencode_env.rs`) against the scripted OpenAI-compatible server:
//! what the model is sent, across prompts, restarts and a missing sidecar.

mod support;

use std::fs;

use serde_json::json;
use support::fake_llm::{FakeLlm, RecordedRequest, Reply};
use support::opencode_env::{require_opencode, OpenCodeEnv, MODEL, PROVIDER};
use support::scenario::{
    custom_of, dump, indexed_calls, last_main_request, logged, project_file, read_alpha,
    read_alpha_then_go_on, read_call, requests_with_result, sidecar_bin, stub_text, tool_result,
};

const SUMMARY_TEXT: &str = "- alpha.txt holds numbered ALPHA lines.";

#[test]
fn stubs_query_and_restart() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    // Prompt 1: a read, then a text reply.
    env.write_condense_config(&json!({"enabled": true, "economy": {"policy": "reference"}}));
    let run = read_alpha(&env, &llm, "ALPHA-7f3e");
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
    let last = last_main_request(&llm, "prompt 3");
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
    env.write_condense_config(&json!({"enabled": true, "economy": {"policy": "reference"}}));
    read_alpha(&env, &llm, "ALPHA-7f3e");
    llm.push(Reply::text("Sure."));
    let run2 = env.run("And again?", true);
    run2.assert_success();
    let last = last_main_request(&llm, "prompt 2");
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
    env.write_condense_config(&json!({"enabled": true, "economy": {"policy": "reference"}}));
    read_alpha(&env, &llm, "ALPHA-7f3e");
    llm.push(Reply::text("Sure."));
    let run2 = env.run("And again?", true);
    run2.assert_success();
    let last = last_main_request(&llm, "prompt 2");
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

/// The `keep` of every `context` request the plugin sent, in order.
fn context_keeps(protocol_log: &str) -> Vec<u64> {
    protocol_log
        .lines()
        .filter_map(|l| l.split_once("-> context ").map(|(_, params)| params))
        .filter_map(|p| p.split_once(r#""keep":"#))
        .filter_map(|(_, rest)| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
        })
        .collect()
}

/// The model's context limit comes from OpenCode (128k in the test config):
/// with `autoBudgetThreshold: 0.1` every 20k-token turn crosses the budget
/// and flushes at its end, so each next request carries the stub. The
/// `context` requests after the first are incremental (`keep` > 0). A write
/// whose content is a stub is refused before anything is written, and the
/// model is told which ref to page back.
#[test]
fn budget_flush_incremental_context_and_the_write_guard() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(&json!({
        "enabled": true,
        "economy": {"policy": "reference"},
        "autoBudgetThreshold": 0.1,
        // The refusal itself stays verbatim for the assertion below.
        "protectedTools": ["write"],
    }));
    let alpha = project_file(&env, "alpha.txt", "ALPHA-5d21", 5000);
    let bravo = project_file(&env, "bravo.txt", "BRAVO-88b0", 5000);
    let copy = env.project.join("copy.txt");
    llm.push(read_call("call_a", &alpha).with_usage(20_000, 10));
    llm.push(read_call("call_b", &bravo).with_usage(20_000, 10));
    llm.push(
        Reply::tool_call(
            "call_w",
            "write",
            json!({"filePath": copy, "content": format!("copied:\n{}\n", stub_text("t1"))}),
        )
        .with_usage(20_000, 10),
    );
    llm.push(Reply::text("Done.").with_usage(20_000, 10));
    let run = env.run("Read alpha.txt and bravo.txt, then copy alpha.", false);
    run.assert_success();
    let main = llm.main_requests();
    assert_eq!(main.len(), 4, "{}\n{}", run.report(), dump(&llm));
    for (i, (call, short_ref)) in [("call_a", "t1"), ("call_b", "t2")].iter().enumerate() {
        let text = tool_result(&main[i + 1], call).expect("the read is answered");
        assert_eq!(
            text,
            stub_text(short_ref),
            "request {} carries the stub of {call}\n{}",
            i + 1,
            env.protocol_log()
        );
    }
    // The budget flush at the first read's turn end wrote its summary to
    // the log, which OpenCode never hands the plugin: condense shows it.
    assert!(
        main[1].any_message_contains(SUMMARY_TEXT),
        "the budget flush's summary reaches the next call\n{}",
        dump(&llm)
    );
    let session = run.session_id().expect("a session id");
    let entries = logged(&env, &session);
    let budget: Vec<_> = custom_of(&entries, "context-prune-flush-metrics")
        .into_iter()
        .filter(|m| m["data"]["trigger"] == "budget")
        .collect();
    assert!(budget.len() >= 2, "budget flushes: {budget:#?}");

    // The write was refused: nothing written, the model told what to do.
    assert!(!copy.exists(), "the placeholder must not reach the file");
    let refused = tool_result(&main[3], "call_w").expect("the write is answered");
    assert!(
        refused.contains("condense refused this write call")
            && refused.contains(r#"context_tree_query({"toolCallIds": ["t1"]})"#),
        "{refused}"
    );

    let keeps = context_keeps(&env.protocol_log());
    assert_eq!(keeps.len(), 4, "{}", env.protocol_log());
    assert_eq!(keeps[0], 0, "the first context is whole");
    assert!(
        keeps[1..].iter().all(|k| *k > 0),
        "later contexts send only what changed: {keeps:?}"
    );
}

/// With a rolling window of one chain, the first prompt's finished chain is
/// folded into one `<compressed-chain>` message once a later chain closes:
/// the model gets that message in place of the first prompt's calls.
#[test]
fn a_compressed_chain_reaches_the_model() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(&json!({
        "enabled": true,
        "economy": {"policy": "reference"},
        "chainCompression": {"rollingWindow": 1},
    }));
    let alpha = project_file(&env, "alpha.txt", "ALPHA-7f3e", 6000);
    let bravo = project_file(&env, "bravo.txt", "BRAVO-1c2d", 6000);
    llm.push(read_call("call_a", &alpha));
    llm.push(Reply::text("I read alpha.txt."));
    env.run("Read alpha.txt.", false).assert_success();
    llm.push(read_call("call_b", &bravo));
    llm.push(Reply::text("I read bravo.txt."));
    env.run("Read bravo.txt.", true).assert_success();
    llm.push(Reply::text("Both read."));
    let run = env.run("Summarize.", true);
    run.assert_success();
    let last = last_main_request(&llm, "prompt 3");
    let users = last.texts_of_role("user");
    let chain = users
        .iter()
        .find(|t| t.contains("<compressed-chain id=\"b1\""))
        .unwrap_or_else(|| {
            panic!(
                "a compressed chain in the last request: {users:#?}\n{}",
                env.protocol_log()
            )
        });
    assert!(
        chain.contains("t1"),
        "the chain names its tool ref: {chain}"
    );
    assert_eq!(
        tool_result(&last, "call_a"),
        None,
        "the first chain's call is folded away"
    );
    assert!(!last.any_message_contains("ALPHA-7f3e line 0000"));
    assert!(
        tool_result(&last, "call_b").is_some(),
        "the chain inside the window stays"
    );
    assert!(
        last.any_message_contains("Read alpha.txt.") || chain.contains("alpha"),
        "the first prompt is represented"
    );
    let session = run.session_id().expect("a session id");
    assert!(
        !custom_of(&logged(&env, &session), "context-prune-chain").is_empty(),
        "the chain is persisted in condense's log"
    );
}

/// A sub-agent (OpenCode's `task` tool) runs in its own session through the
/// same hook: its own condense state (its own log file and refs), its own
/// flushes, and its stubs reach its own requests. `condense.json`'s
/// warnings are shown once for both sessions.
#[test]
fn a_sub_agent_session_has_its_own_state() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    // An invalid value: warned about once per process, not once per session.
    env.write_condense_config(&json!({
        "enabled": true,
        "economy": {"policy": "reference"},
        "autoBudgetThreshold": 0.1,
        "chainCompression": {"rollingWindow": 0},
    }));
    let alpha = project_file(&env, "alpha.txt", "ALPHA-9a9a", 5000);
    // Main: delegate; sub-agent: read, then answer; main: done.
    llm.push(
        Reply::tool_call(
            "call_task",
            "task",
            json!({"description": "read alpha", "prompt": "Read alpha.txt and report.", "subagent_type": "general"}),
        )
        .with_usage(20_000, 10),
    );
    llm.push(read_call("call_sub", &alpha).with_usage(20_000, 10));
    llm.push(Reply::text("alpha.txt holds ALPHA lines.").with_usage(20_000, 10));
    llm.push(Reply::text("The sub-agent read it.").with_usage(20_000, 10));
    let run = env.run("Have a sub-agent read alpha.txt.", false);
    run.assert_success();
    let main = llm.main_requests();
    assert_eq!(main.len(), 4, "{}\n{}", run.report(), dump(&llm));
    // Request 3 is the sub-agent's second call: its read is stubbed there.
    let sub = &main[2];
    assert!(
        sub.any_message_contains("Read alpha.txt and report."),
        "request 3 is the sub-agent's\n{}",
        dump(&llm)
    );
    assert_eq!(
        tool_result(sub, "call_sub"),
        Some(stub_text("t1")),
        "the sub-agent's own ref t1\n{}",
        env.protocol_log()
    );
    // Two sessions, two logs; each numbered its own refs from t1.
    let parent = run.session_id().expect("a session id");
    let files: Vec<_> = fs::read_dir(env.condense_dir())
        .expect("condense's storage")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    let child = files
        .iter()
        .map(|f| f.trim_end_matches(".jsonl").to_owned())
        .find(|s| *s != parent)
        .expect("the sub-agent's log");
    assert_eq!(indexed_calls(&env, &child), vec!["call_sub".to_owned()]);
    assert!(
        !indexed_calls(&env, &parent).contains(&"call_sub".to_owned()),
        "the parent's state does not hold the sub-agent's call"
    );
    let warned = run
        .output
        .stderr
        .matches("rollingWindow: invalid value 0")
        .count();
    assert_eq!(warned, 1, "one warning for two sessions\n{}", run.report());
    // The parent got the sub-agent's answer (too short to summarize).
    let answer = tool_result(&main[3], "call_task").expect("the task is answered");
    assert!(answer.contains("alpha.txt holds ALPHA lines."), "{answer}");
}

/// A tool part OpenCode's own pruning already cleared is not summarized
/// again: the next process finds one of a turn's two reads cleared, and the
/// flush summarizes the other alone (no summary request carries the cleared
/// one, no index record names it), while the model gets OpenCode's own
/// placeholder for it.
#[test]
fn a_part_opencode_cleared_is_not_summarized() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(&json!({"enabled": true, "economy": {"policy": "reference"}}));
    let alpha = project_file(&env, "alpha.txt", "ALPHA-c1ea", 6000);
    let bravo = project_file(&env, "bravo.txt", "BRAVO-c1eb", 6000);
    llm.push(read_call("call_a", &alpha).and_tool_call(
        "call_b",
        "read",
        json!({"filePath": bravo}),
    ));
    llm.push(Reply::text("I read both."));
    let run = env.run("Read alpha.txt and bravo.txt.", false);
    run.assert_success();
    assert_eq!(env.mark_compacted("call_a"), 1, "the read's part is marked");

    llm.push(Reply::text("Fine."));
    let run2 = env.run("Go on.", true);
    run2.assert_success();
    let last = last_main_request(&llm, "prompt 2");
    assert_eq!(
        tool_result(&last, "call_a").as_deref(),
        Some("[Old tool result content cleared]"),
        "OpenCode's own placeholder\n{}",
        env.protocol_log()
    );
    assert_eq!(
        tool_result(&last, "call_b"),
        Some(stub_text("t1")),
        "the other read is summarized\n{}",
        env.protocol_log()
    );
    let summaries = llm.summary_requests();
    assert!(!summaries.is_empty());
    assert!(
        summaries
            .iter()
            .all(|r| !r.any_message_contains("ALPHA-c1ea")
                && !r.any_message_contains("[Old tool result content cleared]")),
        "the cleared output is never summarized"
    );
    let session = run.session_id().expect("a session id");
    assert_eq!(indexed_calls(&env, &session), vec!["call_b".to_owned()]);
}

/// The arguments of `call_id` as the request sends them (OpenAI's
/// `tool_calls[].function.arguments` text).
fn call_arguments(request: &RecordedRequest, call_id: &str) -> Option<String> {
    request.messages().iter().find_map(|m| {
        m["tool_calls"].as_array()?.iter().find_map(|c| {
            (c["id"] == call_id)
                .then(|| c["function"]["arguments"].as_str().unwrap_or("").to_owned())
        })
    })
}

/// A failed call's big arguments are purged once the error is a turn old
/// (`purgeErrors`): the model is sent the placeholder in place of the
/// arguments of OpenCode's tool part, the error itself stays.
#[test]
fn purged_arguments_reach_the_model() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(&json!({
        "enabled": true,
        "economy": {"policy": "reference"},
        "purgeErrors": {"cooldownTurns": 1, "minArgChars": 100},
    }));
    let body = "PURGE-ME ".repeat(400);
    let missing = env.project.join("missing.txt");
    llm.push(Reply::tool_call(
        "call_e",
        "edit",
        json!({"filePath": missing, "oldString": "absent", "newString": body}),
    ));
    llm.push(Reply::tool_call(
        "call_l",
        "glob",
        json!({"pattern": "*.none"}),
    ));
    llm.push(Reply::text("Gave up."));
    let run = env.run("Edit missing.txt.", false);
    run.assert_success();
    let main = llm.main_requests();
    assert_eq!(main.len(), 3, "{}\n{}", run.report(), dump(&llm));
    let before = call_arguments(&main[1], "call_e").expect("the edit is sent");
    assert!(before.contains("PURGE-ME"), "not purged yet: {before}");
    let after = call_arguments(&main[2], "call_e").expect("the edit is still sent");
    assert!(
        after.contains("<purged-errored-args size=") && !after.contains("PURGE-ME"),
        "purged a turn later: {after}\n{}",
        env.protocol_log()
    );
    let error = tool_result(&main[2], "call_e").expect("the error is still answered");
    assert!(!error.is_empty(), "the error stays visible");
}

/// Prompt 1 reads alpha.txt; prompt 2 (a new process) flushes it. Returns
/// the stub prompt 2's request carries for the read, the session id and
/// prompt 2's stderr.
fn flush_one_read(env: &OpenCodeEnv, llm: &FakeLlm) -> (Option<String>, String, String) {
    let (run, run2) = read_alpha_then_go_on(env, llm, "ALPHA-5ab5");
    let last = last_main_request(llm, "prompt 2");
    (
        tool_result(&last, "call_a"),
        run.session_id().expect("a session id"),
        run2.output.stderr,
    )
}

/// A summarizer model whose OpenCode provider uses Anthropic's SDK is
/// called through Anthropic's Messages API, with the provider's key.
#[test]
fn summaries_through_an_anthropic_provider() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let anthropic = FakeLlm::start([]);
    anthropic.set_default_summary(Reply::text("- alpha.txt, summarized by Anthropic."));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.add_provider(
        "anth",
        json!({
            "npm": "@ai-sdk/anthropic",
            "name": "Anth",
            "options": {"baseURL": anthropic.base_url(), "apiKey": "sk-ant-test"},
            "models": {"claude-x": {"name": "Claude X", "limit": {"context": 200000, "output": 8192}}},
        }),
    );
    env.write_condense_config(&json!({"enabled": true, "summarizerModel": "anth/claude-x", "economy": {"policy": "reference"}}));
    let (stub, session, _) = flush_one_read(&env, &llm);
    assert_eq!(stub, Some(stub_text("t1")), "{}", env.protocol_log());
    let calls = anthropic.summary_requests();
    assert_eq!(calls.len(), 1, "{}", env.protocol_log());
    assert!(calls[0].path.ends_with("/v1/messages"), "{}", calls[0].path);
    assert_eq!(calls[0].body["model"], "claude-x");
    assert!(
        calls[0].body["system"].is_string(),
        "the system prompt apart"
    );
    assert!(
        llm.summary_requests().is_empty(),
        "nothing went to the session's endpoint"
    );
    let entries = logged(&env, &session);
    let summaries = custom_of(&entries, "context-prune-summary");
    assert!(
        summaries
            .iter()
            .any(|e| e.to_string().contains("summarized by Anthropic")),
        "{summaries:#?}"
    );
}

/// A summarizer model the plugin cannot call (its provider has no endpoint)
/// falls back to the extractive summarizer: the read is still summarized,
/// with no LLM call.
#[test]
fn an_unreachable_summarizer_falls_back_to_extractive() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.add_provider(
        "nowhere",
        json!({
            "npm": "@ai-sdk/openai-compatible",
            "name": "Nowhere",
            "models": {"m": {"name": "M", "limit": {"context": 100000, "output": 4096}}},
        }),
    );
    env.write_condense_config(&json!({"enabled": true, "summarizerModel": "nowhere/m", "economy": {"policy": "reference"}}));
    let (stub, session, stderr) = flush_one_read(&env, &llm);
    assert_eq!(stub, Some(stub_text("t1")), "{}", env.protocol_log());
    assert!(llm.summary_requests().is_empty(), "no LLM summarized");
    assert!(
        stderr.contains("summarizer model nowhere/m failing")
            && stderr.contains("condense/extractive"),
        "the user is told: {stderr}"
    );
    assert!(
        !custom_of(&logged(&env, &session), "context-prune-summary").is_empty(),
        "the extractive summary is persisted"
    );
}

/// Under the cache-aware policy a reply's flush waits for the next run: the
/// plugin reports the reply at the next run's first call, then sends
/// `agent.start`, and that call already shows the stub.
#[test]
fn cache_aware_summarizes_a_reply_at_the_next_runs_first_call() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(
        &json!({"enabled": true, "economy": {"policy": "cache-aware", "maxExcess": null}}),
    );
    let session = read_alpha(&env, &llm, "ALPHA-7f3e")
        .session_id()
        .expect("a session id");
    assert!(
        llm.summary_requests().is_empty(),
        "nothing is summarized before a next run"
    );

    llm.push(Reply::text("Done."));
    let run2 = env.run("Thanks.", true);
    run2.assert_success();
    assert!(!llm.summary_requests().is_empty(), "{}", dump(&llm));
    let first = llm
        .main_requests()
        .into_iter()
        .find(|r| r.any_message_contains("Thanks."))
        .unwrap_or_else(|| panic!("prompt 2 reached the model\n{}", dump(&llm)));
    let stub = tool_result(&first, "call_a").expect("the read is still answered");
    assert!(
        stub.starts_with("[Summarized in pruner summary, ref `t1`."),
        "stubbed at the run's first call: {stub}\n{}\n{}",
        run2.report(),
        env.protocol_log()
    );
    assert!(
        first.any_message_contains(SUMMARY_TEXT),
        "the summary the stub points to is sent with it\n{}",
        dump(&llm)
    );
    // The session had no switch entry: its first call started gating.
    let logged = logged(&env, &session);
    let switches = custom_of(&logged, "context-prune-switch");
    assert_eq!(
        switches.first().map(|s| s["data"]["reason"].clone()),
        Some(json!("start")),
        "{switches:?}"
    );
}

/// OpenCode prices its models (`cost` in `opencode.json`): with
/// `summarizerModel` naming another model, every `context` request tells
/// the sidecar the summarizer's input price over the session model's, which
/// the bound against no pruning charges summaries at.
#[test]
fn the_summarizer_price_reaches_the_sidecar() {
    let Some(install) = require_opencode() else {
        return;
    };
    let prices = |summarizer: &str| {
        let llm = FakeLlm::start([Reply::text("Done.")]);
        let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
        let cost = |input: f64| json!({"input": input, "output": 5.0 * input});
        env.add_provider(
            PROVIDER,
            json!({
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": llm.base_url(), "apiKey": "test-key"},
                "models": {
                    MODEL: {"name": "Fake 1", "tool_call": true, "cost": cost(3.0),
                        "limit": {"context": 128000, "output": 4096}},
                    "dear-1": {"name": "Dear", "cost": cost(15.0),
                        "limit": {"context": 128000, "output": 4096}},
                    "unpriced-1": {"name": "Unpriced", "limit": {"context": 128000, "output": 4096}},
                },
            }),
        );
        env.write_condense_config(&json!({"enabled": true, "summarizerModel": summarizer}));
        env.run("Say done.", false).assert_success();
        let log = env.protocol_log();
        let contexts: Vec<&str> = log
            .lines()
            .filter_map(|l| l.split_once("-> context ").map(|(_, params)| params))
            .collect();
        assert!(!contexts.is_empty(), "{log}");
        contexts
            .iter()
            .map(|p| {
                let params: serde_json::Value = serde_json::from_str(p).expect("params are JSON");
                params["summarizerPrice"].as_f64()
            })
            .collect::<Vec<_>>()
    };
    let dear = prices(&format!("{PROVIDER}/dear-1"));
    assert!(dear.iter().all(|p| *p == Some(5.0)), "{dear:?}");
    // OpenCode prices a model with no `cost` at nothing; the engine never
    // charges a reported price below the session model's.
    let unpriced = prices(&format!("{PROVIDER}/unpriced-1"));
    assert!(unpriced.iter().all(|p| *p == Some(0.0)), "{unpriced:?}");
}
