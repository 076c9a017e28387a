//! `/pruner` inside real pi, end to end (pi print mode runs a prompt that is
//! a `/pruner …` command; the shim forwards it to the sidecar).
//!
//! `pruner_commands_in_pi`: a session whose tool output is still pending
//! (`pruneOn: on-demand`), then in that session `/pruner status` (settings
//! and the `--- context ---` block, `rearmed: yes`), `/pruner protected-tools
//! todo, read` (saved; the reads stop counting as pending), `/pruner status`
//! again, and `/pruner now`: the summarizer runs through the shim and the
//! entries are appended by runtime delivery (`pi.sendMessage` /
//! `pi.appendEntry`).
//!
//! Notifications are invisible in print mode; `CONDENSE_PI_DEBUG=1` makes
//! the shim log each one to stderr as `condense notify [<level>]: <text>`.
//!
//! `pruner_dialogs_and_progress_over_rpc`: pi's RPC mode turns every
//! `ctx.ui` call into an `extension_ui_request` line, so the dialog chain
//! (`select` / `input` effects answered by follow-up `command`s) and the
//! progress widget of `/pruner now` (`ui.effects` notifications while the
//! flush runs) are seen exactly as a user's UI would get them.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use support::fake_llm::{FakeLlm, Reply};
use support::pi_env::{read_jsonl, require_pi, PiEnv, PiInstall, PiRun};
use support::rpc::Rpc;

fn extension_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("extension")
}

fn sidecar_bin() -> PathBuf {
    support::cli::condense_bin()
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn custom_count(entries: &[Value], entry_type: &str, custom_type: &str) -> usize {
    entries
        .iter()
        .filter(|e| str_of(e, "type") == entry_type && str_of(e, "customType") == custom_type)
        .count()
}

/// The notifications the shim logged (`CONDENSE_PI_DEBUG=1`), each with the
/// lines that follow it until the next log line.
fn notices(run: &PiRun) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for line in run.output.stderr.lines() {
        if let Some(rest) = line.strip_prefix("condense notify [") {
            out.push(rest.to_owned());
            open = true;
        } else if line.starts_with("condense") {
            open = false;
        } else if open {
            let last = out.last_mut().expect("an open notice");
            last.push('\n');
            last.push_str(line);
        }
    }
    out
}

fn notice_starting(run: &PiRun, prefix: &str) -> String {
    notices(run)
        .into_iter()
        .find(|n| n.starts_with(prefix))
        .unwrap_or_else(|| panic!("no notice starting {prefix:?}\n{}", run.report()))
}

fn big_file(marker: &str, bytes: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < bytes {
        out.push_str(&format!("{marker} line {i:04}: nothing to see here\n"));
        i += 1;
    }
    out
}

/// pi with the shim and `pruneOn: on-demand`, `alpha.txt` and `bravo.txt`
/// (big files) in its work dir, and an LLM that answers with `replies`;
/// its summaries are one bullet.
fn on_demand_pi(
    install: &'static PiInstall,
    replies: impl IntoIterator<Item = Reply>,
) -> (FakeLlm, PiEnv) {
    let llm = FakeLlm::start(replies);
    llm.set_default_summary(Reply::text(
        "- [[1:read]] Read a text file: one marker line repeated.",
    ));
    let pi = PiEnv::new(install, &llm.base_url())
        .with_settings(json!({
            "contextPrune": {"enabled": true, "pruneOn": "on-demand", "economy": {"policy": "reference"}},
            "compaction": {"enabled": false},
        }))
        .with_extension(extension_dir())
        .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy());
    fs::write(pi.work_dir.join("alpha.txt"), big_file("ALPHA", 5000)).expect("write");
    fs::write(pi.work_dir.join("bravo.txt"), big_file("BRAVO", 5000)).expect("write");
    (llm, pi)
}

#[test]
fn pruner_commands_in_pi() {
    let Some(install) = require_pi() else {
        return;
    };
    // Usage as a caching provider reports it (pi records the split).
    let (llm, pi) = on_demand_pi(
        install,
        [
            Reply::tool_call("call_a", "read", json!({"path": "alpha.txt"}))
                .with_usage(2000, 10)
                .with_cache(0, 2000),
            Reply::tool_call("call_b", "read", json!({"path": "bravo.txt"}))
                .with_usage(3000, 10)
                .with_cache(2000, 1000),
            Reply::text("Read both.")
                .with_usage(3200, 10)
                .with_cache(3000, 200),
        ],
    );
    let pi = pi.with_env("CONDENSE_PI_DEBUG", "1");

    // Two tool turns; on-demand: nothing is summarized.
    let run = pi.prompt("Read alpha.txt and bravo.txt.");
    run.assert_success();
    llm.assert_script_consumed();
    assert!(llm.summary_requests().is_empty(), "{}", run.report());
    let session = pi.session_file(&run);
    assert_eq!(
        custom_count(
            &read_jsonl(&session),
            "custom_message",
            "context-prune-summary"
        ),
        0
    );

    // /pruner status: the settings, then the context block; the reload
    // found the two pending reads.
    let run = pi.prompt_in_session(&session, "/pruner status");
    run.assert_success();
    let status = notice_starting(&run, "info]: pruner status:");
    for line in [
        "  enabled:  true",
        "  trigger:  On demand",
        "  batching: Per turn (turn)",
        "  (no summarizer calls yet)",
        "  --- context ---",
        "  rearmed:      yes",
    ] {
        assert!(status.contains(line), "{line:?} missing from\n{status}");
    }
    assert!(
        !status.contains("  frontier gap: 0 tokens"),
        "the reads are pending: {status}"
    );
    // condense's section, after pi-condense's lines, from the usage pi
    // recorded: 8,200 prompt tokens, 5,000 read, 3,200 written; billed
    // 3200 · 1.25 + 5000 · 0.1 = 4,500 units against 8,200 without caching.
    let economy = status
        .split_once("  rearmed:      yes\n")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("the section follows pi-condense's lines:\n{status}"));
    for line in [
        "  --- cache (anthropic-5m) ---",
        "  calls:        3",
        "  prompt:       8.2k tokens",
        "  cache:        read 61.0% · written 39.0% · uncached 0.0%",
        "  hit share:    61.0%",
        "  billed input: 4.5k units ($",
        "  no caching:   8.2k units (caching saved 45.1%)",
        "  --- policy ---",
        "  policy:       reference",
    ] {
        assert!(economy.contains(line), "{line:?} missing from\n{status}");
    }

    // /pruner protected-tools todo, read: saved, only contextPrune changes.
    let run = pi.prompt_in_session(&session, "/pruner protected-tools todo, read");
    run.assert_success();
    notice_starting(&run, "info]: Protected tools: todo, read");
    let settings = pi.settings();
    assert_eq!(
        settings["contextPrune"]["protectedTools"],
        json!(["todo", "read"]),
        "{settings}"
    );
    assert_eq!(settings["contextPrune"]["pruneOn"], "on-demand");
    assert_eq!(settings["compaction"]["enabled"], false, "{settings}");

    // /pruner status again: protected reads are not pending any more.
    let run = pi.prompt_in_session(&session, "/pruner status");
    run.assert_success();
    let status = notice_starting(&run, "info]: pruner status:");
    assert!(status.contains("  frontier gap: 0 tokens"), "{status}");
    assert!(!status.contains("rearmed"), "{status}");

    // Unprotect read, then /pruner now: two summarizer calls through the
    // shim, entries appended at runtime.
    let run = pi.prompt_in_session(&session, "/pruner protected-tools todo");
    run.assert_success();
    let run = pi.prompt_in_session(&session, "/pruner now");
    run.assert_success();
    let done = notice_starting(&run, "info]: pruner: pruned ");
    assert!(
        done.starts_with("info]: pruner: pruned 2 tool calls from 2 batches — summary "),
        "{done}"
    );
    assert_eq!(llm.summary_requests().len(), 2, "{}", run.report());
    assert_eq!(llm.main_requests().len(), 3, "commands make no agent call");
    let entries = read_jsonl(&session);
    assert_eq!(
        custom_count(&entries, "custom_message", "context-prune-summary"),
        2,
        "{}",
        run.report()
    );
    assert_eq!(custom_count(&entries, "custom", "context-prune-index"), 2);
    assert_eq!(
        custom_count(&entries, "custom", "context-prune-frontier"),
        1
    );
    assert_eq!(custom_count(&entries, "custom", "context-prune-stats"), 1);
    let metrics: Vec<&Value> = entries
        .iter()
        .filter(|e| str_of(e, "customType") == "context-prune-flush-metrics")
        .collect();
    assert_eq!(metrics.len(), 1);
    assert_eq!(metrics[0]["data"]["trigger"], "manual");
    assert_eq!(metrics[0]["data"]["outcome"], "summarized");

    // Nothing pending now; stats count the two calls.
    let run = pi.prompt_in_session(&session, "/pruner now");
    run.assert_success();
    notice_starting(
        &run,
        "info]: pruner: nothing pending — no batches to summarize",
    );
    let run = pi.prompt_in_session(&session, "/pruner stats");
    run.assert_success();
    let stats = notice_starting(&run, "info]: pruner stats:");
    assert!(stats.contains("  calls:       2"), "{stats}");
}

/// Under the default policy (cache-aware, bounded against no pruning)
/// `/pruner now` is shown at the next call: a `user` switch, though no
/// savings pay its rewrite yet and the policy alone would keep it pending.
#[test]
fn pruner_now_under_the_default_is_shown_at_the_next_call() {
    let Some(install) = require_pi() else {
        return;
    };
    let (llm, pi) = on_demand_pi(
        install,
        [
            Reply::tool_call("call_a", "read", json!({"path": "alpha.txt"})),
            Reply::text("Read it."),
            Reply::text("Fine."),
        ],
    );
    let mut settings = pi.settings();
    settings["contextPrune"]["economy"] = json!({});
    pi.write_settings(&settings);

    // One process (print mode takes several prompts): a new process would
    // start with a resume, whose cold call shows everything anyway.
    let pi = pi.with_args(["Read alpha.txt.", "/pruner now"]);
    let run = pi.prompt("Go on.");
    run.assert_success();
    llm.assert_script_consumed();
    assert!(!llm.summary_requests().is_empty(), "{}", run.report());
    let session = pi.session_file(&run);
    let last = llm.main_requests().pop().expect("the last call");
    let read = last
        .tool_results()
        .into_iter()
        .find(|(id, _)| id == "call_a")
        .map(|(_, text)| text)
        .unwrap_or_default();
    assert!(
        read.starts_with("[Summarized in pruner summary, ref `"),
        "{read}"
    );
    let reasons: Vec<Value> = read_jsonl(&session)
        .iter()
        .filter(|e| str_of(e, "customType") == "context-prune-switch")
        .map(|e| e["data"]["reason"].clone())
        .collect();
    assert_eq!(reasons, [json!("start"), json!("user")]);
}

fn option_starting<'a>(request: &'a Value, prefix: &str) -> &'a str {
    request["options"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|o| o.starts_with(prefix))
        .unwrap_or_else(|| panic!("no option {prefix:?} in {request}"))
}

#[test]
fn pruner_dialogs_and_progress_over_rpc() {
    let Some(install) = require_pi() else {
        return;
    };
    let (llm, pi) = on_demand_pi(
        install,
        [
            Reply::tool_call("call_a", "read", json!({"path": "alpha.txt"})),
            Reply::tool_call("call_b", "read", json!({"path": "bravo.txt"})),
            Reply::text("Read both."),
        ],
    );
    let run = pi.prompt("Read alpha.txt and bravo.txt.");
    run.assert_success();
    let session = pi.session_file(&run);

    let mut rpc = Rpc::start(&pi, Some(&session));

    // Bare /pruner: the subcommand picker; its answer runs that subcommand.
    rpc.prompt("/pruner");
    let picker = rpc.ui("select", "title", |t| t == "pruner — choose a subcommand");
    let dedup = option_starting(&picker, "dedup").to_owned();
    rpc.answer(&picker, Some(&dedup));
    rpc.ui("notify", "message", |m| {
        m.starts_with("Content-hash dedup is ON.")
    });

    // /pruner settings: the list, one setting's values, the list again.
    rpc.prompt("/pruner settings");
    let menu = rpc.ui("select", "title", |t| t == "pruner settings");
    let row = option_starting(&menu, "Min batch chars:").to_owned();
    assert!(row.ends_with(" 1000"), "{row}");
    rpc.answer(&menu, Some(&row));
    let values = rpc.ui("select", "title", |t| t == "Min batch chars (now 1000)");
    rpc.answer(&values, Some("2000"));
    rpc.ui("notify", "message", |m| m == "Min batch chars set to: 2000");
    let menu = rpc.ui("select", "title", |t| t == "pruner settings");
    assert!(option_starting(&menu, "Min batch chars:").ends_with(" 2000"));
    rpc.answer(&menu, None);
    assert_eq!(pi.settings()["contextPrune"]["minBatchChars"], 2000);

    // /pruner protected-tools without a list: a text input.
    rpc.prompt("/pruner protected-tools");
    let ask = rpc.ui("input", "title", |t| t.starts_with("Protected tools ("));
    rpc.answer(&ask, Some("todo bash"));
    rpc.ui("notify", "message", |m| m == "Protected tools: todo, bash");
    assert_eq!(
        pi.settings()["contextPrune"]["protectedTools"],
        json!(["todo", "bash"])
    );

    // /pruner now: the progress widget while the flush runs, then cleared.
    rpc.prompt("/pruner now");
    let first = rpc.ui("setWidget", "widgetKey", |k| k == "context-prune-progress");
    assert_eq!(first["widgetPlacement"], "aboveEditor");
    assert_eq!(
        first["widgetLines"],
        json!([
            "○ Batch 1/2 · 1 tool call · pending",
            "○ Batch 2/2 · 1 tool call · pending"
        ])
    );
    let done = rpc.ui("setWidget", "widgetKey", |_| true);
    let mut last = done;
    while last["widgetLines"].is_array() {
        let lines = last["widgetLines"].clone();
        if lines[1].as_str().unwrap_or("").starts_with('✓') {
            assert!(lines[0]
                .as_str()
                .unwrap_or("")
                .starts_with("✓ Batch 1/2 · 1 tool call · "));
            assert!(
                lines[1].as_str().unwrap_or("").ends_with(" raw chars"),
                "{lines}"
            );
        }
        last = rpc.ui("setWidget", "widgetKey", |k| k == "context-prune-progress");
    }
    assert!(last.get("widgetLines").is_none_or(Value::is_null), "{last}");
    let widgets: Vec<&Value> = rpc
        .seen()
        .iter()
        .filter(|v| v["method"] == "setWidget" && v["widgetKey"] == "context-prune-progress")
        .collect();
    assert!(
        widgets.iter().any(|w| w["widgetLines"][1]
            .as_str()
            .is_some_and(|l| l.starts_with("✓ Batch 2/2"))),
        "both batches finish before the widget clears: {widgets:#?}"
    );
    rpc.ui("notify", "message", |m| {
        m.starts_with("pruner: pruned 2 tool calls from 2 batches — summary ")
    });
    assert_eq!(llm.summary_requests().len(), 2);
    drop(rpc);
    let entries = read_jsonl(&session);
    assert_eq!(
        custom_count(&entries, "custom_message", "context-prune-summary"),
        2
    );
}

/// The `context` hook's cost per LLM call at 1M tokens, measured inside
/// pi's process (`CONDENSE_PI_TIMING=1`: the shim logs each round trip, from
/// the hook's entry to its return: keys, JSON encoding, the pipe, the
/// sidecar's parse, sync and render, the answer's parse and the patch).
///
/// The session is `condense gen --tokens 1000000 --shape tasks --pruned`
/// (the same generator and options, called in-process). Each of `CONDENSE_BENCH_RUNS` (3) pi
/// runs resumes it with a scripted prompt of `TURNS` tool turns (a small
/// `read` each) and a text reply: one `context` call per LLM call.
///
/// Each call is also reported without the garbage collections that ran inside
/// it (the shim logs them): V8 collects the deep copy of the branch pi makes
/// before every `context` call, and a collection often lands in the hook's
/// round trip, where the main thread first waits.
///
/// Ignored by default (it wants the release sidecar):
/// `cargo test --release -p condense-host-pi --test e2e_commands -- --ignored --nocapture context_hook`.
#[test]
#[ignore]
fn context_hook_overhead_at_1m_tokens() {
    // `CONDENSE_BENCH_RUNS` sets the number of pi runs (default 3).
    let runs: usize = std::env::var("CONDENSE_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    const TURNS: usize = 20;
    let Some(install) = require_pi() else {
        return;
    };
    let llm = FakeLlm::start([]);
    llm.set_default_summary(Reply::text("- [[1:read]] Read a small file."));
    let pi = PiEnv::new(install, &llm.base_url())
        .with_settings(json!({
            "contextPrune": {"enabled": true, "economy": {"policy": "reference"}},
            "compaction": {"enabled": false},
        }))
        .with_extension(extension_dir())
        .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy())
        .with_env("CONDENSE_PI_TIMING", "1")
        .with_timeout(Duration::from_secs(600));
    fs::write(pi.work_dir.join("small.txt"), "a small file\n").expect("write");
    let dir = pi.sessions_dir().join("--bench--");
    fs::create_dir_all(&dir).expect("sessions dir");
    let session = dir.join("bench.jsonl");
    let opts = condense_gen::SynthOptions {
        tokens: Some(1_000_000),
        shape: condense_gen::Shape::from_name("tasks").expect("tasks"),
        pruned: true,
        ..Default::default()
    };
    condense_gen::write(&session, &opts).expect("generate the session");
    // pi resumes a session only in its stored working directory.
    let text = fs::read_to_string(&session).expect("read the session");
    let (header, rest) = text.split_once('\n').expect("a header line");
    let mut header: Value = serde_json::from_str(header).expect("header JSON");
    header["cwd"] = json!(pi.work_dir.to_string_lossy());
    fs::write(&session, format!("{header}\n{rest}")).expect("write the session");
    eprintln!(
        "bench: session {} bytes",
        fs::metadata(&session).map(|m| m.len()).unwrap_or(0)
    );

    let parse = |line: &str, prefix: &str| -> Option<f64> {
        line.strip_prefix(prefix)?.split(" ms").next()?.parse().ok()
    };
    // `condense: gc at <start> <duration> ms` and a context line's
    // `... at <start>` share `performance.now()`'s clock.
    let at = |line: &str| -> Option<f64> { line.rsplit(" at ").next()?.trim().parse().ok() };
    let gc_event = |line: &str| -> Option<(f64, f64)> {
        let mut parts = line.strip_prefix("condense: gc at ")?.split_whitespace();
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    };
    let mut firsts = Vec::new();
    let mut starts = Vec::new();
    let mut steady = Vec::new();
    let mut steady_net = Vec::new();
    let mut gc_hit = 0usize;
    for run_no in 0..runs {
        for t in 0..TURNS {
            llm.push(Reply::tool_call(
                format!("bench_{run_no}_{t}"),
                "read",
                json!({"path": "small.txt"}),
            ));
        }
        llm.push(Reply::text("Done."));
        let run = pi.prompt_in_session(&session, "Read small.txt twenty times.");
        run.assert_success();
        llm.assert_script_consumed();
        let gcs: Vec<(f64, f64)> = run.output.stderr.lines().filter_map(gc_event).collect();
        let mut calls = Vec::new();
        for line in run.output.stderr.lines() {
            if let Some(ms) = parse(line, "condense: session.start ") {
                eprintln!("bench run {run_no}: {line}");
                starts.push(ms);
            } else if let Some(ms) = parse(line, "condense: context ") {
                // Time the main thread spent collecting garbage inside the call.
                let start = at(line).expect("a context line ends with `at <start>`");
                let gc: f64 = gcs
                    .iter()
                    .map(|&(s, d)| ((s + d).min(start + ms) - s.max(start)).max(0.0))
                    .sum();
                let which = if calls.is_empty() { "first " } else { "" };
                eprintln!("bench run {run_no}: {which}{line}; gc {gc:.2} ms");
                if !calls.is_empty() {
                    steady_net.push(ms - gc);
                    gc_hit += usize::from(gc > 0.0);
                }
                calls.push(ms);
            }
        }
        assert!(
            !gcs.is_empty(),
            "the shim logs garbage collections when timing"
        );
        assert_eq!(calls.len(), TURNS + 1, "{}", run.report());
        eprintln!("bench run {run_no}: context ms {calls:?}");
        firsts.push(calls[0]);
        steady.extend_from_slice(&calls[1..]);
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[v.len() - 1])
    };
    let (start_med, start_max) = stats(&mut starts);
    let (first_med, first_max) = stats(&mut firsts);
    let (med, max) = stats(&mut steady);
    eprintln!("bench: session.start median {start_med:.2} ms, max {start_max:.2} ms ({runs} runs)");
    eprintln!("bench: first context median {first_med:.2} ms, max {first_max:.2} ms ({runs} runs)");
    eprintln!(
        "bench: later context median {med:.2} ms, max {max:.2} ms ({} calls)",
        steady.len()
    );
    let calls = steady_net.len();
    let (net_med, net_max) = stats(&mut steady_net);
    eprintln!(
        "bench: later context without garbage collection median {net_med:.2} ms, max {net_max:.2} ms \
         ({gc_hit} of {calls} calls had a collection inside)"
    );
}
