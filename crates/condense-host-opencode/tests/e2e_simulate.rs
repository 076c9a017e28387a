//! `condense simulate` on an OpenCode session (what `opencode export`
//! prints): a session played through real OpenCode, condense off, against
//! the scripted server, exported, and simulated. Under `none`, call for
//! call, the prompt the simulator counts and the prefix it shares with the
//! previous call's are the ones the server received (counted as the
//! simulator counts a session's messages, the system prompt and tools as
//! the `--overhead`), and OpenCode's recorded tokens are the simulator's
//! recorded figures. The pruning policies keep their promises on it.
//!
//! `condense` is the CLI binary next to this crate's sidecar in the target
//! directory: `cargo build -p condense-cli` before running this test alone
//! (`cargo test --workspace` builds it).

mod support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::cli::{condense_bin, simulate_json};
use support::fake_llm::measure::{conversation, fixed_part, TokenModel};
use support::fake_llm::{FakeLlm, RecordedRequest, Reply};
use support::opencode_env::{require_opencode, OpenCodeEnv};
use support::scenario::{outline, project_file, read_call, sidecar_bin};

/// `simulate`'s calibrated defaults, passed explicitly.
const MODEL: TokenModel = TokenModel::SIMULATE_DEFAULTS;

/// `condense simulate --json --per-call` of `file`, with `args` before it:
/// the file's report.
fn simulate(file: &Path, args: &[&str]) -> Value {
    let mut all: Vec<&OsStr> = vec![OsStr::new("--per-call")];
    all.extend(args.iter().map(OsStr::new));
    all.push(file.as_os_str());
    let report = simulate_json(&condense_bin(), all);
    assert_eq!(report["sessions"][0]["problems"], json!([]), "{report}");
    report["sessions"][0].clone()
}

/// The per-call figures of `file` simulated under `none` with [`MODEL`]
/// and `overhead`.
fn calls_without_pruning(file: &Path, overhead: u64) -> Vec<Value> {
    let (per_char, per_message) = (MODEL.per_char.to_string(), MODEL.per_message.to_string());
    let overhead = overhead.to_string();
    let args = [
        "--policy",
        "none",
        "--tokens-per-char",
        &per_char,
        "--tokens-per-message",
        &per_message,
        "--overhead",
        &overhead,
    ];
    let session = simulate(file, &args);
    session["policies"]["none"]["calls_detail"]
        .as_array()
        .expect("per-call figures")
        .clone()
}

/// Two runs in one session, the second in a new process: a read and a
/// failed command, then a reply; a second read, then a reply. Every call
/// reports its usage. Returns the exported session's file.
fn play(env: &OpenCodeEnv, llm: &FakeLlm) -> PathBuf {
    let alpha = project_file(env, "alpha.txt", "ALPHA-5e1", 6000);
    let beta = project_file(env, "beta.txt", "BETA-77c", 4000);
    llm.push(read_call("call_a", &alpha).with_usage(14_000, 20));
    llm.push(
        Reply::tool_call(
            "call_t",
            "bash",
            json!({"command": "exit 3", "description": "Fail"}),
        )
        .with_usage(16_000, 30)
        .with_cache(14_000, 0),
    );
    llm.push(Reply::text("alpha.txt is read; the command failed.").with_usage(16_500, 12));
    llm.push(read_call("call_b", &beta).with_usage(17_000, 20));
    llm.push(
        Reply::text("beta.txt is read.")
            .with_usage(18_000, 8)
            .with_cache(17_000, 0),
    );
    let run = env.run("Read alpha.txt, then run `exit 3`.", false);
    run.assert_success();
    let session = run.session_id().expect("the run names its session");
    env.run("Now read beta.txt.", true).assert_success();
    let file = env.project.join("export.json");
    env.export_to(&session, &file);
    file
}

/// The received prompt `request` as the simulator counts it, and the
/// prefix it shares with `previous`.
fn received(
    overhead: u64,
    request: &RecordedRequest,
    previous: Option<&RecordedRequest>,
) -> (u64, u64) {
    let messages = conversation(request);
    let tokens: Vec<u64> = messages.iter().map(|m| MODEL.message_tokens(m)).collect();
    let shared = previous.map_or(0, |p| {
        let n = conversation(p)
            .iter()
            .zip(&messages)
            .take_while(|(a, b)| a == b)
            .count();
        overhead + tokens[..n].iter().sum::<u64>()
    });
    (overhead + tokens.iter().sum::<u64>(), shared)
}

#[test]
fn simulate_reads_an_opencode_export_as_opencode_sent_it() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(&json!({"enabled": false}));
    let file = play(&env, &llm);
    let main = llm.main_requests();
    assert_eq!(main.len(), 5, "{}", outline(&llm));
    // One fixed part for every call, the overhead simulate is told.
    for r in &main {
        assert_eq!(
            fixed_part(r),
            fixed_part(&main[0]),
            "the system prompt or tools changed"
        );
    }
    let overhead = MODEL.overhead_tokens(&main[0]);
    let calls = calls_without_pruning(&file, overhead);
    assert_eq!(calls.len(), main.len(), "{calls:#?}");
    let recorded = [
        (14_000, 0),
        (16_000, 14_000),
        (16_500, 0),
        (17_000, 0),
        (18_000, 17_000),
    ];
    for (i, call) in calls.iter().enumerate() {
        let (prompt, shared) = received(overhead, &main[i], i.checked_sub(1).map(|p| &main[p]));
        assert_eq!(call["prompt_tokens"], prompt, "call {i}: {call:#}");
        assert_eq!(call["shared_prefix_tokens"], shared, "call {i}: {call:#}");
        // OpenCode's tokens as it recorded them: the uncached input apart
        // from the cache reads the provider reported.
        let r = &call["recorded"];
        let (tokens, read) = recorded[i];
        assert_eq!(r["cache_read"], read, "call {i}: {r}");
        assert_eq!(
            r["input"].as_u64().unwrap() + r["cache_read"].as_u64().unwrap(),
            tokens,
            "call {i}: {r}"
        );
    }

    // Every policy replays it: every output recoverable, the default at
    // most no pruning, and `reference` summarizing at the first reply.
    let session = simulate(&file, &[]);
    let p = &session["policies"];
    for name in ["none", "reference", "cache-aware"] {
        assert_eq!(p[name]["tool_outputs"], 3, "{name}: {p:#}");
        assert_eq!(p[name]["outputs_recoverable"], 3, "{name}");
    }
    assert!(
        p["reference"]["summarizer_input_tokens"].as_u64().unwrap() > 0,
        "{p:#}"
    );
    assert!(
        p["cache-aware"]["billed_input_units"].as_f64() <= p["none"]["billed_input_units"].as_f64(),
        "{p:#}"
    );
}

/// OpenCode's own compaction, in the export: a session whose second
/// prompt's read reaches the model's limit, so OpenCode summarizes and
/// goes on with its summary, the tail of recent turns it kept and a
/// "continue" prompt. Simulated under `none`, the calls are the server's
/// calls but the compaction's own, each before the compaction exactly as
/// received; the one after it holds the same messages but OpenCode's two
/// of its summary (its compaction prompt and the answer), which pi's one
/// summary stands for.
#[test]
fn an_opencode_compaction_is_simulated_where_it_was_with_its_tail() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(&json!({"enabled": false}));
    let files: Vec<PathBuf> = [("alpha", 25_000), ("bravo", 25_000), ("kilo", 5000)]
        .iter()
        .map(|(name, bytes)| project_file(&env, &format!("{name}.txt"), name, *bytes))
        .collect();
    llm.push(read_call("call_a", &files[0]).with_usage(20_000, 10));
    llm.push(read_call("call_b", &files[1]).with_usage(20_000, 10));
    llm.push(Reply::text("Read both.").with_usage(20_000, 10));
    let run = env.run("Read alpha and bravo.", false);
    run.assert_success();
    let session = run.session_id().expect("the run names its session");
    // The read's usage reaches the model's limit: OpenCode compacts.
    llm.push(read_call("call_k", &files[2]).with_usage(125_000, 10));
    llm.push(Reply::text("OpenCode's summary: alpha and bravo were read.").with_usage(30_000, 50));
    llm.push(Reply::text("Done.").with_usage(20_000, 10));
    env.run("Read kilo.txt.", true).assert_success();
    let file = env.project.join("export.json");
    env.export_to(&session, &file);

    let main = llm.main_requests();
    assert_eq!(main.len(), 6, "{}", outline(&llm));
    // The compaction's own call (no tools) is summarizer work, no call.
    let calls: Vec<&RecordedRequest> = main
        .iter()
        .filter(|r| !r.body["tools"].as_array().is_none_or(Vec::is_empty))
        .collect();
    assert_eq!(calls.len(), 5, "{}", outline(&llm));
    let overhead = MODEL.overhead_tokens(calls[0]);
    let simulated = calls_without_pruning(&file, overhead);
    assert_eq!(simulated.len(), calls.len(), "{simulated:#?}");
    for (i, call) in simulated.iter().enumerate().take(4) {
        let (prompt, _) = received(overhead, calls[i], None);
        assert_eq!(call["prompt_tokens"], prompt, "call {i}: {call:#}");
    }
    let after = conversation(calls[4]);
    assert!(
        after
            .iter()
            .any(|m| support::fake_llm::message_text(m).contains("alpha and bravo were read")),
        "{}",
        outline(&llm)
    );
    assert_eq!(
        simulated[4]["messages"].as_u64().unwrap() as usize,
        after.len() - 1,
        "the tail OpenCode kept is kept\n{:#}\n{}",
        simulated[4],
        outline(&llm)
    );
    assert_eq!(
        simulated[4]["shared_prefix_tokens"], overhead,
        "rewritten from the summary on"
    );
}
