//! condense inside real pi, end to end: pi 0.83 on Node 22 (installed by
//! `support::pi_env`), the TypeScript shim in `extension/`, the sidecar
//! (`condense sidecar`, built by cargo), and the scripted fake LLM.
//!
//! * `flush_stub_and_recover`: a prompt reads three large files; the final
//!   text reply flushes (three summarizer calls through the shim's
//!   `llm.complete`), the session gets pi-condense's entries; the next prompt
//!   in the same session sends stubs instead of the files, and
//!   `context_tree_query` brings back the original (the scenario lives in
//!   `support::scenario`; `e2e_versions.rs` runs it on other pi versions).
//! * `sidecar_crash_mid_flush_fails_open`: a wrapper kills the sidecar while
//!   its second flush waits for the summarizer; pi finishes the prompt, the
//!   model sees the unpruned context from then on, and the session holds the
//!   first flush's entries whole and nothing of the second.
//! * `missing_sidecar_fails_open`: no binary at all; pi runs as if condense
//!   were not there.
//! * `summarizer_thinking_reaches_the_provider`: `summarizerThinking` reaches
//!   the summarizer's HTTP request as pi-ai's `reasoning_effort` (resolved by
//!   the sidecar, passed on by the shim), and `off` sends none.
//! * `long_run_shows_every_output_raw_before_its_stub`: under `cache-aware`,
//!   fourteen sequential reads in one prompt; the long run's turn-end
//!   flushes stub earlier outputs mid-run, and no request shows a stub for
//!   an output no earlier request sent raw.
//! * `an_overflow_compaction_shows_what_pi_kept_summarized_at_the_retried_call`:
//!   under `cache-aware` bounded at no pruning, the provider refuses a call
//!   as too long; pi compacts, the shim forwards `session_compact`, and the
//!   retried call (cold) shows the read pi kept as a stub by a `compaction`
//!   switch, and the read no call had sent raw.
//! * `a_compaction_after_the_last_reply_asks_for_no_summary` and
//!   `a_compaction_after_a_reply_is_summarized_at_the_next_runs_start`: pi
//!   compacts at its threshold after a run's reply; what it kept is
//!   summarized only once a next prompt makes the call that shows it (at
//!   that run's start), never for a session that ends there.
//!
//! `CONDENSE_PI_TIMING=1` is set for the first test; the shim's per-`context`
//! round-trip times are summarized on stderr (run with `--nocapture`).

mod support;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::fake_llm::{FakeLlm, RecordedRequest, Reply};
use support::pi_env::{
    models_json, pi_message_text, read_jsonl, require_pi, session_messages, PiEnv, MODEL, PROVIDER,
};
use support::scenario::{
    self, big_file, budget_env, budget_script, condense_entries, condense_settings, custom_entries,
    custom_messages, debug_dump, extension_dir, index_records, sidecar_bin, stub_prefix,
    tool_result, SUMMARY_TEXT,
};

/// Gives `pi` a 200,000-token window and writes each `(path, marker)` to
/// its work dir as a [`big_file`] of `bytes`.
fn with_window_and_files<'a>(
    pi: &PiEnv,
    llm: &FakeLlm,
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
    bytes: usize,
) {
    let mut models = models_json(&llm.base_url());
    models["providers"][PROVIDER]["models"][0]["contextWindow"] = json!(200_000);
    pi.write_models(&models);
    for (path, marker) in files {
        fs::write(pi.work_dir.join(path), big_file(marker, bytes)).expect("write a file");
    }
}

#[test]
fn flush_stub_and_recover() {
    let Some(install) = require_pi() else {
        return;
    };
    scenario::flush_stub_and_recover(install);
}

/// What a [`sidecar_wrapper`] does to the real sidecar.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Kill it when the shim sends its n-th answer (answers are the shim's
    /// replies to `llm.complete`: a flush has its summary but has not
    /// returned).
    CrashOnAnswer(usize),
    /// Swallow its answer to the n-th `context` request.
    StallContext(usize),
    /// Replace its answer to the n-th `context` request with a non-JSON line.
    GarbageContext(usize),
}

/// An executable that runs the real sidecar behind a relay injecting
/// `fault`. It appends what it did (`crashed`, `stalled`, `garbage`) to
/// `marker`, so a test knows the fault happened.
fn sidecar_wrapper(dir: &Path, node: &Path, real: &Path, fault: Fault, marker: &Path) -> PathBuf {
    let (mode, n) = match fault {
        Fault::CrashOnAnswer(n) => ("crash-on-answer", n),
        Fault::StallContext(n) => ("stall-context", n),
        Fault::GarbageContext(n) => ("garbage-context", n),
    };
    let script = dir.join(format!("{mode}-{n}.cjs"));
    let body = format!(
        r#"const {{ spawn }} = require("node:child_process");
const fs = require("node:fs");
const MODE = {mode}, N = {n}, MARKER = {marker};
const child = spawn({real}, process.argv.slice(2), {{ stdio: ["pipe", "pipe", "inherit"] }});
const methods = new Map();
let answers = 0, contexts = 0;
function lines(stream, onLine) {{
  let buf = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk) => {{
    buf += chunk;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {{
      const line = buf.slice(0, i + 1);
      buf = buf.slice(i + 1);
      onLine(line);
    }}
  }});
}}
function parse(line) {{ try {{ return JSON.parse(line); }} catch {{ return null; }} }}
lines(process.stdin, (line) => {{
  const msg = parse(line);
  if (msg && msg.id !== undefined && msg.method !== undefined) methods.set(msg.id, msg.method);
  if (MODE === "crash-on-answer" && msg && msg.id !== undefined && msg.method === undefined && ++answers >= N) {{
    fs.appendFileSync(MARKER, "crashed\n");
    child.kill("SIGKILL");
    process.exit(70);
  }}
  child.stdin.write(line);
}});
process.stdin.on("end", () => child.stdin.end());
lines(child.stdout, (line) => {{
  const msg = parse(line);
  if (msg && msg.id !== undefined && msg.method === undefined && methods.get(msg.id) === "context" && ++contexts === N) {{
    if (MODE === "stall-context") {{ fs.appendFileSync(MARKER, "stalled\n"); return; }}
    if (MODE === "garbage-context") {{
      fs.appendFileSync(MARKER, "garbage\n");
      process.stdout.write("this is not a protocol line\n");
      return;
    }}
  }}
  process.stdout.write(line);
}});
child.on("exit", (code) => process.exit(code ?? 1));
"#,
        mode = json!(mode),
        real = json!(real.to_string_lossy()),
        marker = json!(marker.to_string_lossy()),
    );
    fs::write(&script, body).expect("write the wrapper script");
    let launcher = dir.join(format!("{mode}-{n}-condense"));
    fs::write(
        &launcher,
        format!(
            "#!/bin/sh\nexec '{}' '{}' \"$@\"\n",
            node.display(),
            script.display()
        ),
    )
    .expect("write the launcher");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&launcher, fs::Permissions::from_mode(0o755)).expect("chmod");
    launcher
}

#[test]
fn sidecar_crash_mid_flush_fails_open() {
    let Some(install) = require_pi() else {
        return;
    };
    let llm = FakeLlm::start(budget_script());
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let scratch = tempfile::tempdir().expect("temp dir");
    let marker = scratch.path().join("crash-marker");
    // The second summary answer kills the sidecar: the first budget flush
    // that summarizes something completes, the next one dies mid-flight.
    let wrapper = sidecar_wrapper(
        scratch.path(),
        &install.node,
        &sidecar_bin(),
        Fault::CrashOnAnswer(2),
        &marker,
    );
    let pi = budget_env(install, &llm, &wrapper);

    let run = pi.prompt("Read alpha.txt, bravo.txt and charlie.txt.");
    debug_dump(&run, &pi, &llm);
    run.assert_success();
    llm.assert_script_consumed();
    assert_eq!(
        fs::read_to_string(&marker).unwrap_or_default(),
        "crashed\n",
        "the wrapper killed the sidecar\n{}",
        run.report()
    );
    assert!(
        run.output.stderr.contains("condense: the sidecar exited")
            && run.output.stderr.contains("pi continues unpruned"),
        "the shim says it fails open\n{}",
        run.report()
    );
    assert_eq!(llm.summary_requests().len(), 2, "{}", run.report());

    // Before the crash the model saw a stub for alpha; from the crash on, the
    // plain context (every tool result verbatim).
    let main = llm.main_requests();
    assert_eq!(main.len(), 4);
    let stubbed = |r: &RecordedRequest| {
        r.tool_results()
            .iter()
            .any(|(id, t)| id == "call_a" && t.starts_with(&stub_prefix("t1")))
    };
    let first_stub = main
        .iter()
        .position(stubbed)
        .unwrap_or_else(|| panic!("alpha was never stubbed\n{}", run.report()));
    let crash = first_stub
        + 1
        + main[first_stub + 1..]
            .iter()
            .position(|r| !stubbed(r))
            .expect("a request after the crash");
    for request in &main[crash..] {
        for (id, text) in request.tool_results() {
            assert!(
                text.contains(" line 0000: "),
                "{id} is verbatim after the crash: {text}"
            );
        }
    }
    assert!(tool_result(&main[3], "call_c").contains("CHARLIE-3e6f line 0000"));

    // The session: every line parses (read_jsonl), the completed flush is
    // whole, nothing of the abandoned one.
    let entries = read_jsonl(&pi.session_file(&run));
    let records = index_records(&entries);
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0]["toolCallId"], "call_a");
    assert_eq!(custom_messages(&entries, "context-prune-summary").len(), 1);
    assert_eq!(custom_entries(&entries, "context-prune-frontier").len(), 1);
    assert_eq!(custom_entries(&entries, "context-prune-stats").len(), 1);
    let summarized: Vec<_> = custom_entries(&entries, "context-prune-flush-metrics")
        .into_iter()
        .filter(|m| m["data"]["processedBatches"] != 0)
        .collect();
    assert_eq!(summarized.len(), 1, "{summarized:#?}");
    assert_eq!(summarized[0]["data"]["trigger"], "budget");
    assert_eq!(summarized[0]["data"]["outcome"], "summarized");
    for entry in condense_entries(&entries) {
        let text = entry.to_string();
        assert!(
            !text.contains("call_b") && !text.contains("call_c"),
            "nothing of the abandoned flush: {entry}"
        );
    }
    let messages = session_messages(&entries);
    assert_eq!(
        messages.last().map(pi_message_text).as_deref(),
        Some("All three read.")
    );
}

/// pi-condense flushes the turn that crossed the budget, at its `turn_end`
/// (`support::scenario::budget_flush_at_turn_end`).
#[test]
fn budget_flush_at_turn_end_includes_that_turn() {
    let Some(install) = require_pi() else {
        return;
    };
    scenario::budget_flush_at_turn_end(install);
}

#[test]
fn missing_sidecar_fails_open() {
    let Some(install) = require_pi() else {
        return;
    };
    let llm = FakeLlm::start([
        Reply::tool_call("call_a", "read", json!({"path": "alpha.txt"})),
        Reply::text("Read it."),
    ]);
    let scratch = tempfile::tempdir().expect("temp dir");
    let pi = PiEnv::new(install, &llm.base_url())
        .with_settings(condense_settings())
        .with_extension(extension_dir())
        .with_env(
            "CONDENSE_BIN",
            scratch.path().join("no-such-condense").to_string_lossy(),
        );
    fs::write(pi.work_dir.join("alpha.txt"), big_file("ALPHA-0b9e", 5000)).unwrap();
    let run = pi.prompt("Read alpha.txt.");
    run.assert_success();
    llm.assert_script_consumed();
    assert!(
        run.output.stderr.contains("condense sidecar was not found"),
        "{}",
        run.report()
    );
    let main = llm.main_requests();
    assert!(tool_result(&main[1], "call_a").contains("ALPHA-0b9e line 0000"));
    assert!(llm.summary_requests().is_empty());
    let entries = read_jsonl(&pi.session_file(&run));
    assert!(condense_entries(&entries).is_empty());
}

/// The summarizer's thinking setting, resolved by the sidecar into
/// `llm.complete`'s `reasoningEffort`, is what pi-ai sends the provider as
/// `reasoning_effort` (the model is marked as reasoning, so pi-ai sends one
/// when asked): `high` for the session model, none for `off` with the model
/// named `provider/id`.
#[test]
fn summarizer_thinking_reaches_the_provider() {
    let Some(install) = require_pi() else {
        return;
    };
    let llm = FakeLlm::start([
        Reply::tool_call("call_a", "read", json!({"path": "alpha.txt"})),
        Reply::text("Read alpha."),
        Reply::tool_call("call_b", "read", json!({"path": "bravo.txt"})),
        Reply::text("Read bravo."),
    ]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let pi = PiEnv::new(install, &llm.base_url())
        .with_settings(condense_settings())
        .with_settings(json!({"contextPrune": {"summarizerThinking": "high"}}))
        .with_extension(extension_dir())
        .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy());
    let mut models = models_json(&llm.base_url());
    models["providers"][PROVIDER]["models"][0]["reasoning"] = json!(true);
    pi.write_models(&models);
    fs::write(pi.work_dir.join("alpha.txt"), big_file("ALPHA-e41c", 5000)).unwrap();
    fs::write(pi.work_dir.join("bravo.txt"), big_file("BRAVO-8e07", 5000)).unwrap();

    let run = pi.prompt("Read alpha.txt.");
    run.assert_success();
    let summaries = llm.summary_requests();
    assert_eq!(summaries.len(), 1, "{}", run.report());
    assert_eq!(summaries[0].body["model"], MODEL);
    assert_eq!(
        summaries[0].body["reasoning_effort"], "high",
        "{}",
        summaries[0].body
    );

    let session = pi.session_file(&run);
    pi.write_settings(&{
        let mut settings = pi.settings();
        settings["contextPrune"]["summarizerThinking"] = json!("off");
        settings["contextPrune"]["summarizerModel"] = json!(format!("{PROVIDER}/{MODEL}"));
        settings
    });
    let run = pi.prompt_in_session(&session, "Read bravo.txt.");
    run.assert_success();
    llm.assert_script_consumed();
    let summaries = llm.summary_requests();
    assert_eq!(summaries.len(), 2, "{}", run.report());
    assert!(summaries[1].any_message_contains("BRAVO-8e07"));
    assert!(
        summaries[1].body.get("reasoning_effort").is_none(),
        "{}",
        summaries[1].body
    );
}

/// A sidecar that misses the `context` deadline, then one that answers
/// garbage: each time pi finishes with the plain context and the shim says
/// so; the next pi process with a healthy sidecar prunes again.
#[test]
fn stalled_or_garbage_answers_fail_open() {
    let Some(install) = require_pi() else {
        return;
    };
    let llm = FakeLlm::start([
        Reply::tool_call("call_a", "read", json!({"path": "alpha.txt"})),
        Reply::text("Read."),
    ]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let scratch = tempfile::tempdir().expect("temp dir");
    let marker = scratch.path().join("fault-marker");
    let real = sidecar_bin();
    let stall = sidecar_wrapper(
        scratch.path(),
        &install.node,
        &real,
        Fault::StallContext(1),
        &marker,
    );
    let garbage = sidecar_wrapper(
        scratch.path(),
        &install.node,
        &real,
        Fault::GarbageContext(1),
        &marker,
    );
    let pi = PiEnv::new(install, &llm.base_url())
        .with_settings(condense_settings())
        .with_extension(extension_dir())
        .with_env("CONDENSE_BIN", real.to_string_lossy());
    fs::write(pi.work_dir.join("alpha.txt"), big_file("ALPHA-c4d0", 5000)).unwrap();

    let run = pi.prompt("Read alpha.txt.");
    run.assert_success();
    let session = pi.session_file(&run);
    assert_eq!(llm.summary_requests().len(), 1, "{}", run.report());

    // The sidecar never answers the first `context`: after 2 s pi goes on unpruned.
    let pi = pi.with_env("CONDENSE_BIN", stall.to_string_lossy());
    llm.push(Reply::text("Second."));
    let run = pi.prompt_in_session(&session, "Again?");
    run.assert_success();
    assert_eq!(fs::read_to_string(&marker).unwrap_or_default(), "stalled\n");
    assert!(
        run.output
            .stderr
            .contains("no answer to context within 2000 ms")
            && run.output.stderr.contains("pi continues unpruned"),
        "{}",
        run.report()
    );
    assert!(run.output.elapsed.as_secs_f64() >= 2.0);
    let last = llm.main_requests().pop().expect("a request");
    assert!(tool_result(&last, "call_a").contains("ALPHA-c4d0 line 0000"));

    // The sidecar answers the first `context` with garbage.
    let pi = pi.with_env("CONDENSE_BIN", garbage.to_string_lossy());
    llm.push(Reply::text("Third."));
    let run = pi.prompt_in_session(&session, "And again?");
    run.assert_success();
    assert_eq!(
        fs::read_to_string(&marker).unwrap_or_default(),
        "stalled\ngarbage\n"
    );
    assert!(
        run.output.stderr.contains("not JSON")
            && run.output.stderr.contains("pi continues unpruned"),
        "{}",
        run.report()
    );
    let last = llm.main_requests().pop().expect("a request");
    assert!(tool_result(&last, "call_a").contains("ALPHA-c4d0 line 0000"));

    // A healthy sidecar again: pruned again.
    let pi = pi.with_env("CONDENSE_BIN", real.to_string_lossy());
    llm.push(Reply::text("Fourth."));
    let run = pi.prompt_in_session(&session, "Once more?");
    run.assert_success();
    llm.assert_script_consumed();
    let last = llm.main_requests().pop().expect("a request");
    assert!(tool_result(&last, "call_a").starts_with(&stub_prefix("t1")));
    let entries = read_jsonl(&session);
    assert_eq!(index_records(&entries).len(), 1);
    assert_eq!(custom_messages(&entries, "context-prune-summary").len(), 1);
}

/// `/pruner off` and `/pruner on` in print mode: the command reaches the
/// sidecar and its `saveSettings` effect rewrites only `contextPrune`.
#[test]
fn pruner_command_saves_settings() {
    let Some(install) = require_pi() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let mut settings = condense_settings();
    settings["contextPrune"]["minBatchChars"] = json!(2000);
    settings["defaultThinkingLevel"] = json!("off");
    let pi = PiEnv::new(install, &llm.base_url())
        .with_settings(settings)
        .with_extension(extension_dir())
        .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy());
    // The save keeps the file's permissions (it replaces the file by rename).
    use std::os::unix::fs::PermissionsExt;
    let settings_file = pi.agent_dir.join("settings.json");
    fs::set_permissions(&settings_file, fs::Permissions::from_mode(0o640)).expect("chmod");

    let run = pi.prompt("/pruner off");
    run.assert_success();
    let mode = fs::metadata(&settings_file)
        .expect("settings")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o640, "settings.json keeps its mode");
    let saved = pi.settings();
    assert_eq!(
        saved["contextPrune"]["enabled"],
        false,
        "{saved}\n{}",
        run.report()
    );
    assert_eq!(saved["contextPrune"]["minBatchChars"], 2000, "{saved}");
    assert_eq!(saved["compaction"]["enabled"], false, "{saved}");
    assert_eq!(saved["defaultThinkingLevel"], "off", "{saved}");

    let run = pi.prompt("/pruner on");
    run.assert_success();
    assert_eq!(pi.settings()["contextPrune"]["enabled"], true);
    assert!(llm.requests().is_empty(), "a command makes no LLM call");
    let leftovers: Vec<_> = fs::read_dir(&pi.agent_dir)
        .expect("agent dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

/// Under the cache-aware policy a long autonomous run flushes at a turn's
/// end from its tenth turn (the engine's `LONG_RUN_TURNS`); the model still
/// gets every output raw once, in the call right after its own, before any
/// call shows its stub. The engine's `unseen_outputs.rs` checks this on
/// replayed sessions; here real pi's hooks drive the same turns.
#[test]
fn long_run_shows_every_output_raw_before_its_stub() {
    let Some(install) = require_pi() else {
        return;
    };
    const READS: usize = 14;
    let calls: Vec<(String, String, String)> = (0..READS)
        .map(|n| {
            (
                format!("call_{n:02}"),
                format!("file{n:02}.txt"),
                format!("MARK{n:02}-c4e1"),
            )
        })
        .collect();
    let mut script: Vec<Reply> = calls
        .iter()
        .map(|(id, path, _)| Reply::tool_call(id, "read", json!({ "path": path })))
        .collect();
    script.push(Reply::text("Read them all."));
    let llm = FakeLlm::start(script);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let mut settings = condense_settings();
    settings["contextPrune"]["economy"] = json!({"policy": "cache-aware", "maxExcess": null});
    let pi = PiEnv::new(install, &llm.base_url())
        .with_settings(settings)
        .with_extension(extension_dir())
        .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy());
    // A window far from the pressure limit: a flush under pressure may
    // show the stub of the turn it ends (pi-condense's budget flush), and
    // this run is about the flush a long run makes without it.
    with_window_and_files(
        &pi,
        &llm,
        calls.iter().map(|(_, p, m)| (p.as_str(), m.as_str())),
        8000,
    );

    let run = pi.prompt("Read every file, one at a time.");
    debug_dump(&run, &pi, &llm);
    run.assert_success();
    llm.assert_script_consumed();
    let main = llm.main_requests();
    assert_eq!(main.len(), READS + 1, "{}", run.report());

    // Core's stub text (`render/stub.rs`), whatever its ref.
    let is_stub = |text: &str| text.starts_with("[Summarized in pruner summary, ref `");
    let mut stubbed = 0;
    for (i, request) in main.iter().enumerate() {
        for (id, text) in request.tool_results() {
            if !is_stub(&text) {
                continue;
            }
            stubbed += 1;
            let (_, _, marker) = calls
                .iter()
                .find(|(call, _, _)| *call == id)
                .unwrap_or_else(|| panic!("a stub for an unknown call {id}"));
            let seen_raw = main[..i].iter().any(|earlier| {
                earlier
                    .tool_results()
                    .iter()
                    .any(|(eid, t)| *eid == id && !is_stub(t) && t.contains(marker.as_str()))
            });
            assert!(
                seen_raw,
                "request {i} shows {id} as a stub, no earlier request had it raw\n{}",
                run.report()
            );
        }
    }
    assert!(
        stubbed > 0,
        "no request showed a stub: the long run never flushed and switched\n{}",
        run.report()
    );
    // The stubs came from the long run's turn-end flushes, not pressure.
    let triggers: Vec<Value> = custom_entries(
        &read_jsonl(&pi.session_file(&run)),
        "context-prune-flush-metrics",
    )
    .iter()
    .map(|m| m["data"]["trigger"].clone())
    .collect();
    assert!(
        !triggers.is_empty() && triggers.iter().all(|t| t == "delta"),
        "{triggers:?}"
    );
}

/// Three reads, then the provider refuses the fourth call as too long: pi
/// compacts (its summary request takes the next reply) and sends the call
/// again. With `summarizer_price`, summaries go to a second model of the
/// fake provider whose input price in pi's `models.json` is that multiple
/// of the session model's. Returns the session's entries and the server.
fn an_overflow_compaction(summarizer_price: Option<f64>) -> (Vec<Value>, FakeLlm) {
    let install = require_pi().expect("pi");
    let reads = [
        ("call_a", "a.txt", "ALPHA-77"),
        ("call_b", "b.txt", "BRAVO-77"),
        ("call_c", "c.txt", "CHARLIE-77"),
    ];
    let mut script: Vec<Reply> = reads
        .iter()
        .map(|(id, path, _)| Reply::tool_call(*id, "read", json!({ "path": path })))
        .collect();
    script.push(Reply::http_error(
        400,
        "prompt is too long: 250000 tokens > 200000 maximum",
    ));
    script.push(Reply::text("## Goal\nRead the files."));
    script.push(Reply::text("Read them all."));
    let llm = FakeLlm::start(script);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let mut settings = condense_settings();
    // The default policy, spelled out.
    settings["contextPrune"]["economy"] = json!({"policy": "cache-aware", "maxExcess": 0});
    // Kept: about 5,000 tokens from the newest entry, so the cut lands on
    // b's call (its result and c's fill it; pi never cuts at a result).
    settings["compaction"] = json!({"enabled": true, "keepRecentTokens": 5000});
    let pi = PiEnv::new(install, &llm.base_url())
        .with_settings(settings.clone())
        .with_extension(extension_dir())
        .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy());
    with_window_and_files(&pi, &llm, reads.iter().map(|(_, p, m)| (*p, *m)), 8000);
    if let Some(ratio) = summarizer_price {
        let cost = |input: f64| {
            json!({"input": input, "output": 5.0 * input, "cacheRead": input / 10.0,
                "cacheWrite": 1.25 * input})
        };
        let mut models = models_json(&llm.base_url());
        let listed = &mut models["providers"][PROVIDER]["models"];
        listed[0]["contextWindow"] = json!(200_000);
        listed[0]["cost"] = cost(3.0);
        let summarizer = json!({"id": "summarizer-e2e", "contextWindow": 200_000,
            "maxTokens": 4096, "cost": cost(3.0 * ratio)});
        listed.as_array_mut().expect("models").push(summarizer);
        pi.write_models(&models);
        let mut settings = settings;
        settings["contextPrune"]["summarizerModel"] = json!(format!("{PROVIDER}/summarizer-e2e"));
        pi.write_settings(&settings);
    }
    let run = pi.prompt("Read a.txt, b.txt and c.txt, one at a time.");
    debug_dump(&run, &pi, &llm);
    run.assert_success();
    llm.assert_script_consumed();
    let entries = read_jsonl(&pi.session_file(&run));
    assert!(
        entries.iter().any(|e| e["type"] == "compaction"),
        "pi did not compact\n{}",
        run.report()
    );
    (entries, llm)
}

/// The tool results the call pi retried after its compaction was sent, by id.
fn retried_results(llm: &FakeLlm) -> impl Fn(&str) -> String {
    let main = llm.main_requests();
    let results = main.last().expect("the retried call").tool_results();
    move |id: &str| {
        results
            .iter()
            .find(|(rid, _)| rid == id)
            .map(|(_, t)| t.clone())
            .unwrap_or_default()
    }
}

#[test]
fn an_overflow_compaction_shows_what_pi_kept_summarized_at_the_retried_call() {
    if require_pi().is_none() {
        return;
    }
    let (entries, llm) = an_overflow_compaction(None);
    // Within the bound and with every call warm nothing was summarized
    // before; the compaction made the retried call cold, and what it kept
    // before the refused call's turn (b's read) was summarized for it.
    // The first call started gating (the session had no switch entry).
    let switches = custom_entries(&entries, "context-prune-switch");
    assert_eq!(switches.len(), 2, "{switches:?}");
    assert_eq!(switches[0]["data"]["reason"], "start");
    assert_eq!(switches[0]["data"]["messageCount"], 1);
    assert_eq!(switches[1]["data"]["reason"], "compaction");
    let text_of = retried_results(&llm);
    assert!(
        text_of("call_b").starts_with("[Summarized in pruner summary, ref `"),
        "b's read is a stub: {}",
        text_of("call_b")
    );
    assert!(
        text_of("call_c").contains("CHARLIE-77"),
        "c's read, which no call had sent, is raw"
    );
    assert!(text_of("call_a").is_empty(), "pi's compaction left a out");
}

/// The same run with `summarizerModel` naming a model pi's registry prices
/// at twenty times the session model: the shim reports the ratio with each
/// call, the summary of b's read would cost more than showing it saves, and
/// under the bound it is not made. At the same price as the session model
/// the other model summarizes as the session model did.
#[test]
fn a_summarizer_priced_in_pis_registry_is_charged_its_price() {
    if require_pi().is_none() {
        return;
    }
    let (entries, llm) = an_overflow_compaction(Some(20.0));
    assert!(llm.summary_requests().is_empty(), "nothing was summarized");
    let switches = custom_entries(&entries, "context-prune-switch");
    assert_eq!(switches.len(), 1, "only the start: {switches:?}");
    let text_of = retried_results(&llm);
    assert!(text_of("call_b").contains("BRAVO-77"), "b's read is raw");

    let (entries, llm) = an_overflow_compaction(Some(1.0));
    let summaries = llm.summary_requests();
    assert_eq!(summaries.len(), 1, "b's read was summarized");
    assert_eq!(summaries[0].body["model"], "summarizer-e2e");
    let switches = custom_entries(&entries, "context-prune-switch");
    assert_eq!(switches.len(), 2, "{switches:?}");
    assert!(retried_results(&llm)("call_b").starts_with("[Summarized in pruner summary, ref `"));
}

/// pi compacts after a run's reply once the run's last prompt passes its
/// threshold (here a window of 200,000 less a reserve of 190,000). Under the
/// default policy what the compaction kept would be shown at the next call,
/// cold anyway, but that call waits for the user's next prompt: with none
/// (`second` empty) no summary is ever asked for; with one, the summary is
/// made at its run's start and its first call shows the kept read as a
/// stub, by a `compaction` switch.
fn a_compaction_after_the_reply(second: Option<&str>) -> (Vec<Value>, FakeLlm) {
    let install = require_pi().expect("pi");
    let reads = [
        ("call_a", "a.txt", "ALPHA-78"),
        ("call_b", "b.txt", "BRAVO-78"),
    ];
    let mut script: Vec<Reply> = reads
        .iter()
        .map(|(id, path, _)| Reply::tool_call(*id, "read", json!({ "path": path })))
        .collect();
    script.push(Reply::text("Read both."));
    // pi's compaction summary takes the next reply.
    script.push(Reply::text("## Goal\nRead the files."));
    if second.is_some() {
        script.push(Reply::text("Done."));
    }
    let llm = FakeLlm::start(script);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let mut settings = condense_settings();
    settings["contextPrune"]["economy"] = json!({"policy": "cache-aware", "maxExcess": 0});
    settings["compaction"] =
        json!({"enabled": true, "reserveTokens": 190_000, "keepRecentTokens": 8000});
    let mut pi = PiEnv::new(install, &llm.base_url())
        .with_settings(settings)
        .with_extension(extension_dir())
        .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy());
    with_window_and_files(&pi, &llm, reads.iter().map(|(_, p, m)| (*p, *m)), 24_000);
    let first = "Read a.txt, then b.txt.";
    let run = match second {
        Some(prompt) => {
            pi = pi.with_args([first]);
            pi.prompt(prompt)
        }
        None => pi.prompt(first),
    };
    debug_dump(&run, &pi, &llm);
    run.assert_success();
    llm.assert_script_consumed();
    let entries = read_jsonl(&pi.session_file(&run));
    let compaction = entries
        .iter()
        .find(|e| e["type"] == "compaction")
        .unwrap_or_else(|| panic!("pi did not compact\n{}", run.report()));
    // pi kept b's read (its call starts the kept part), a's it compacted away.
    let first_kept = entries
        .iter()
        .find(|e| e["id"] == compaction["firstKeptEntryId"])
        .expect("the first kept entry");
    assert!(
        first_kept["message"]["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["id"] == "call_b")),
        "{first_kept}"
    );
    (entries, llm)
}

#[test]
fn a_compaction_after_the_last_reply_asks_for_no_summary() {
    if require_pi().is_none() {
        return;
    }
    let (entries, llm) = a_compaction_after_the_reply(None);
    assert_eq!(llm.summary_requests().len(), 0);
    let switches = custom_entries(&entries, "context-prune-switch");
    assert!(
        switches.iter().all(|s| s["data"]["reason"] == "start"),
        "{switches:?}"
    );
}

#[test]
fn a_compaction_after_a_reply_is_summarized_at_the_next_runs_start() {
    if require_pi().is_none() {
        return;
    }
    let (entries, llm) = a_compaction_after_the_reply(Some("Now say done."));
    assert!(!llm.summary_requests().is_empty());
    let switches = custom_entries(&entries, "context-prune-switch");
    assert_eq!(
        switches.last().map(|s| s["data"]["reason"].clone()),
        Some(json!("compaction")),
        "{switches:?}"
    );
    let main = llm.main_requests();
    let last = main.last().expect("the second run's call");
    let results = last.tool_results();
    let b = results
        .iter()
        .find(|(id, _)| id == "call_b")
        .map(|(_, t)| t.clone())
        .unwrap_or_default();
    assert!(
        b.starts_with("[Summarized in pruner summary, ref `"),
        "the kept read is a stub: {results:?}"
    );
}

/// The pi-condense 2.9.1 fixture session resumed in real pi: under the
/// default policy (cache-aware, bounded) the call sends exactly what the
/// reference policy sends, pi-condense's render (the session has no switch
/// entry), and the session gains the start switch; under `reference` it
/// gains none.
#[test]
fn a_pi_condense_session_resumed_under_the_default_is_sent_as_pi_condense_renders_it() {
    let Some(install) = require_pi() else {
        return;
    };
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../condense-store/tests/fixtures/pi-condense-2.9.1.jsonl");
    let mut sent = Vec::new();
    for economy in [json!({}), json!({"policy": "reference"})] {
        let llm = FakeLlm::start([Reply::text("Noted.")]);
        let mut settings = condense_settings();
        settings["contextPrune"]["economy"] = economy.clone();
        let pi = PiEnv::new(install, &llm.base_url())
            .with_settings(settings)
            .with_extension(extension_dir())
            .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy());
        // pi resumes a session only in its working directory.
        let text = fs::read_to_string(&fixture).expect("the fixture");
        let (header, rest) = text.split_once('\n').expect("a header line");
        let mut header: Value = serde_json::from_str(header).expect("a JSON header");
        header["cwd"] = json!(pi.work_dir.to_string_lossy());
        let session = pi.work_dir.join("resumed.jsonl");
        fs::write(&session, format!("{header}\n{rest}")).expect("write the session");
        let run = pi.prompt_in_session(&session, "Go on.");
        debug_dump(&run, &pi, &llm);
        run.assert_success();
        let main = llm.main_requests();
        assert_eq!(main.len(), 1, "{economy}");
        // The system prompt names each run's own working directory.
        let conversation: Vec<Value> = main[0]
            .messages()
            .iter()
            .filter(|m| m["role"] != "system")
            .cloned()
            .collect();
        sent.push(conversation);
        let reasons: Vec<Value> = custom_entries(&read_jsonl(&session), "context-prune-switch")
            .iter()
            .map(|e| e["data"]["reason"].clone())
            .collect();
        let expected = if economy["policy"] == "reference" {
            vec![]
        } else {
            vec![json!("start")]
        };
        assert_eq!(reasons, expected, "{economy}");
    }
    assert!(
        sent[0]
            .iter()
            .any(|m| pi_message_text(m).contains("[Summarized in pruner summary, ref `")),
        "the fixture's summarized outputs are stubs"
    );
    assert_eq!(sent[0], sent[1], "the default sent what reference sent");
}
