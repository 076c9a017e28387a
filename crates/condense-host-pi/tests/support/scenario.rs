//! The end-to-end scenario and helpers shared by the test files that run
//! condense inside real pi (`e2e_condense.rs` on the pinned pi,
//! `e2e_versions.rs` on the other supported pi lines).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::fake_llm::{FakeLlm, RecordedRequest, Reply};
use super::pi_env::{pi_message_text, read_jsonl, session_messages, PiEnv, PiInstall, PiRun};
pub use super::text::big_file;

/// The shim: this crate's `extension/` directory.
pub fn extension_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("extension")
}

/// The sidecar the shim starts: the `condense` binary (`condense
/// sidecar`).
pub fn sidecar_bin() -> PathBuf {
    super::cli::condense_bin()
}

/// The settings every test starts from.
pub fn condense_settings() -> Value {
    json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}, "compaction": {"enabled": false}})
}

pub fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `type: "custom"` entries of this `customType`, in file order.
pub fn custom_entries<'a>(entries: &'a [Value], custom_type: &str) -> Vec<&'a Value> {
    entries
        .iter()
        .filter(|e| str_of(e, "type") == "custom" && str_of(e, "customType") == custom_type)
        .collect()
}

/// `type: "custom_message"` entries of this `customType`, in file order.
pub fn custom_messages<'a>(entries: &'a [Value], custom_type: &str) -> Vec<&'a Value> {
    entries
        .iter()
        .filter(|e| str_of(e, "type") == "custom_message" && str_of(e, "customType") == custom_type)
        .collect()
}

/// Every condense entry (custom or custom_message with a `context-prune-` type).
pub fn condense_entries(entries: &[Value]) -> Vec<&Value> {
    entries
        .iter()
        .filter(|e| str_of(e, "customType").starts_with("context-prune-"))
        .collect()
}

/// Every index record, across `context-prune-index` entries.
pub fn index_records(entries: &[Value]) -> Vec<Value> {
    custom_entries(entries, "context-prune-index")
        .into_iter()
        .flat_map(|e| {
            e.pointer("/data/toolCalls")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

/// The text of the `role: "tool"` message answering `call_id`.
pub fn tool_result(request: &RecordedRequest, call_id: &str) -> String {
    request
        .tool_results()
        .into_iter()
        .find(|(id, _)| id == call_id)
        .map(|(_, text)| text)
        .unwrap_or_else(|| panic!("no tool result for {call_id} in {}", request.body))
}

pub fn stub_prefix(short_ref: &str) -> String {
    format!("[Summarized in pruner summary, ref `{short_ref}`.")
}

/// Summarizes the shim's `CONDENSE_PI_TIMING` lines of a run.
pub fn report_timing(label: &str, run: &PiRun) {
    let mut ms: Vec<f64> = run
        .output
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("condense: context "))
        .filter_map(|rest| rest.split(" ms").next()?.parse().ok())
        .collect();
    if ms.is_empty() {
        eprintln!("e2e timing [{label}]: no context timings logged");
        return;
    }
    for line in run
        .output
        .stderr
        .lines()
        .filter(|l| l.starts_with("condense: context "))
    {
        eprintln!("e2e timing [{label}]: {line}");
    }
    ms.sort_by(|a, b| a.total_cmp(b));
    let median = ms[ms.len() / 2];
    let max = ms[ms.len() - 1];
    eprintln!(
        "e2e timing [{label}]: {} context calls, median {median:.2} ms, max {max:.2} ms",
        ms.len()
    );
}

/// One `CONDENSE_PI_TIMING` line of the shim's `context` handler.
#[derive(Debug)]
pub struct ContextTiming {
    pub messages: usize,
    pub keep: usize,
    pub append: usize,
    /// Steps of the whole plan and steps the sidecar sent (`None`: unchanged).
    pub steps: Option<(usize, usize)>,
}

/// The run's `context` timing lines, parsed.
pub fn context_timings(run: &PiRun) -> Vec<ContextTiming> {
    let num = |text: &str, after: &str| -> Option<usize> {
        let rest = &text[text.find(after)? + after.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    run.output
        .stderr
        .lines()
        .filter(|l| l.starts_with("condense: context "))
        .map(|l| ContextTiming {
            messages: num(l, "(messages ").expect("messages"),
            keep: num(l, ", keep ").expect("keep"),
            append: num(l, ", append ").expect("append"),
            steps: l.find(", steps ").map(|at| {
                let tail = &l[at..];
                let all = num(tail, ", steps ").expect("steps");
                (all, num(tail, " (").expect("sent"))
            }),
        })
        .collect()
}

/// A resumed session's first `context` sends only the new prompt (the shim
/// keyed what `session.start` gave the sidecar), and later calls build on the
/// answer before (only the plan's changed tail is sent).
pub fn assert_incremental(run: &PiRun) {
    let calls = context_timings(run);
    assert!(calls.len() >= 2, "{}", run.report());
    let first = &calls[0];
    assert!(
        first.keep > 0 && first.append == 1,
        "the first context after session.start resent the branch: {first:?}\n{}",
        run.report()
    );
    for call in &calls[1..] {
        assert_eq!(call.keep + call.append, call.messages, "{call:?}");
        assert!(call.append <= 2, "only the last turn is sent: {call:?}");
    }
    assert!(
        calls[1..]
            .iter()
            .any(|c| c.steps.is_some_and(|(all, sent)| sent < all)),
        "no answer built on the one before: {calls:?}\n{}",
        run.report()
    );
}

/// The summary the fake model writes for a one-call batch of `read`.
pub const SUMMARY_TEXT: &str =
    "- [[1:read]] Read a text file: one marker line repeated, nothing else of note.";

/// The two pi runs of [`flush_stub_and_recover`], for the caller's own checks.
pub struct ScenarioRuns {
    /// The prompt that reads the files and flushes.
    pub first: PiRun,
    /// The prompt in the same session that sees stubs and recovers `t1`.
    pub second: PiRun,
}

/// The core end-to-end scenario against one pi installation.
///
/// A prompt reads three large files (three tool turns); the final text reply
/// flushes (three summarizer calls through the shim's `llm.complete`) and the
/// session gets pi-condense's entries (index records keyed by the result's
/// timestamp, hidden summaries with short refs `t1`..`t3`, frontier, stats,
/// flush metrics). A second prompt in the same session (`--session`) sends
/// stubs instead of the files, and `context_tree_query` brings back the
/// original text. The shim runs with `CONDENSE_PI_DEBUG=1`.
pub fn flush_stub_and_recover(install: &'static PiInstall) -> ScenarioRuns {
    flush_stub_and_recover_with(install, |pi| {
        pi.with_extension(extension_dir())
            .with_env("CONDENSE_BIN", sidecar_bin().to_string_lossy())
    })
}

/// [`flush_stub_and_recover`] with condense loaded by `load` (the workspace's
/// shim and sidecar, or a package installed from a registry).
pub fn flush_stub_and_recover_with(
    install: &'static PiInstall,
    load: impl FnOnce(PiEnv) -> PiEnv,
) -> ScenarioRuns {
    let label = |what: &str| format!("pi {} {what}", install.pi_version);
    let llm = FakeLlm::start([
        Reply::tool_call("call_a", "read", json!({"path": "alpha.txt"}))
            .with_text("Reading alpha."),
        Reply::tool_call("call_b", "read", json!({"path": "bravo.txt"})),
        Reply::tool_call("call_c", "read", json!({"path": "charlie.txt"})),
        Reply::text("Done reading all three."),
    ]);
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let pi = load(PiEnv::new(install, &llm.base_url()).with_settings(condense_settings()))
        .with_env("CONDENSE_PI_TIMING", "1")
        .with_env("CONDENSE_PI_DEBUG", "1");
    let files = [
        ("alpha.txt", "ALPHA-7f3e", "call_a"),
        ("bravo.txt", "BRAVO-19c4", "call_b"),
        ("charlie.txt", "CHARLIE-a02d", "call_c"),
    ];
    for (name, marker, _) in files {
        fs::write(pi.work_dir.join(name), big_file(marker, 5000)).expect("write a file");
    }

    // Prompt 1: three tool turns, then the final text flushes.
    let run = pi.prompt("Read alpha.txt, bravo.txt and charlie.txt.");
    run.assert_success();
    report_timing(&label("prompt 1"), &run);
    llm.assert_script_consumed();
    assert_eq!(llm.main_requests().len(), 4, "{}", run.report());

    let summaries = llm.summary_requests();
    assert_eq!(
        summaries.len(),
        3,
        "one summarizer call per turn batch\n{}",
        run.report()
    );
    for (_, marker, _) in files {
        let request = summaries
            .iter()
            .find(|r| r.any_message_contains(marker))
            .unwrap_or_else(|| panic!("no summarizer call saw {marker}"));
        let prompt = request.texts_of_role("user").join("\n");
        assert!(prompt.contains("<tool-call-batch>"), "{prompt}");
        assert!(
            prompt.contains("[[1:read]]"),
            "the batch labels its call: {prompt}"
        );
        assert_eq!(
            request.body["model"], "fake-1",
            "the session model summarizes"
        );
    }

    let session = pi.session_file(&run);
    let entries = read_jsonl(&session);

    // context-prune-index: one record per call, with its occurrence timestamp.
    let records = index_records(&entries);
    assert_eq!(records.len(), 3, "{records:#?}");
    let messages = session_messages(&entries);
    for (name, marker, call) in files {
        let record = records
            .iter()
            .find(|r| str_of(r, "toolCallId") == call)
            .unwrap_or_else(|| panic!("no index record for {call}: {records:#?}"));
        assert_eq!(str_of(record, "toolName"), "read");
        assert_eq!(record["args"]["path"], name);
        assert_eq!(record["isError"], false);
        assert!(str_of(record, "resultText").contains(marker));
        assert!(record["turnIndex"].is_i64());
        assert!(record["timestamp"].is_i64());
        let result_ts = record["resultTimestamp"]
            .as_i64()
            .unwrap_or_else(|| panic!("resultTimestamp on {record}"));
        let result = messages
            .iter()
            .find(|m| str_of(m, "role") == "toolResult" && str_of(m, "toolCallId") == call)
            .expect("the tool result is in the session");
        assert_eq!(
            result["timestamp"].as_i64(),
            Some(result_ts),
            "keyed by the result's own timestamp"
        );
        assert!(
            pi_message_text(result).contains(marker),
            "the session keeps the original"
        );
    }

    // context-prune-summary: hidden custom messages with short refs t1..t3.
    let summary_entries = custom_messages(&entries, "context-prune-summary");
    assert_eq!(summary_entries.len(), 3, "{summary_entries:#?}");
    let mut refs = Vec::new();
    for entry in &summary_entries {
        assert_eq!(entry["display"], false, "{entry}");
        let details = &entry["details"];
        assert_eq!(details["toolNames"], json!(["read"]), "{entry}");
        assert!(
            details["turnIndex"].is_i64() && details["timestamp"].is_i64(),
            "{entry}"
        );
        let content = match &entry["content"] {
            Value::String(s) => s.clone(),
            other => pi_message_text(&json!({"content": other})),
        };
        assert!(content.contains("**Summarized tool refs**"), "{content}");
        assert!(
            !content.contains("[[1:read]]"),
            "inline labels are rewritten: {content}"
        );
        for r in details["toolCallRefs"].as_array().expect("toolCallRefs") {
            assert!(r["resultTimestamp"].is_i64(), "{r}");
            assert!(
                content.contains(&format!("`{}`", str_of(r, "shortId"))),
                "{content}"
            );
            refs.push((
                str_of(r, "shortId").to_owned(),
                str_of(r, "toolCallId").to_owned(),
            ));
        }
    }
    refs.sort();
    assert_eq!(
        refs,
        vec![
            ("t1".to_owned(), "call_a".to_owned()),
            ("t2".to_owned(), "call_b".to_owned()),
            ("t3".to_owned(), "call_c".to_owned())
        ],
        "short refs in batch order"
    );

    // context-prune-frontier, -stats, -flush-metrics.
    let frontier = custom_entries(&entries, "context-prune-frontier");
    assert_eq!(frontier.len(), 1);
    let f = &frontier[0]["data"];
    assert_eq!(f["lastAttemptedToolCallId"], "call_c", "{f}");
    assert_eq!(f["lastAttemptedToolName"], "read", "{f}");
    assert_eq!(f["outcome"], "summarized", "{f}");
    assert_eq!(f["attemptedBatchCount"], 3, "{f}");
    assert_eq!(f["attemptedToolCallCount"], 3, "{f}");
    assert!(f["rawCharCount"].as_u64().unwrap_or(0) > f["summaryCharCount"].as_u64().unwrap_or(0));
    let stats = custom_entries(&entries, "context-prune-stats");
    assert_eq!(stats.len(), 1);
    let s = &stats[0]["data"];
    assert_eq!(s["callCount"], 3, "{s}");
    assert!(s["totalInputTokens"].as_u64().unwrap_or(0) > 0, "{s}");
    for key in [
        "totalOutputTokens",
        "totalCost",
        "chainsCompressed",
        "rangesSummarized",
    ] {
        assert!(s.get(key).is_some_and(Value::is_number), "stats.{key}: {s}");
    }
    let metrics = custom_entries(&entries, "context-prune-flush-metrics");
    assert_eq!(metrics.len(), 1);
    let m = &metrics[0]["data"];
    assert_eq!(m["trigger"], "message-end", "{m}");
    assert_eq!(m["capturedBatches"], 3, "{m}");
    assert_eq!(m["processedBatches"], 3, "{m}");
    assert_eq!(m["outcome"], "summarized", "{m}");
    assert!(m["ts"].is_i64(), "{m}");
    for key in [
        "openCycleThinkingTokens",
        "largestChainSharePct",
        "frontierGapTokens",
    ] {
        assert!(
            m["metrics"].get(key).is_some_and(Value::is_number),
            "metrics.{key}: {m}"
        );
    }
    // The flush ran in message_end, before pi persisted the final reply.
    let last = entries.last().expect("entries");
    assert_eq!(str_of(last, "type"), "message", "{last}");
    assert_eq!(pi_message_text(&last["message"]), "Done reading all three.");

    // Prompt 2 in the same session: stubs instead of the files, then a recovery.
    llm.push(Reply::tool_call(
        "call_q",
        "context_tree_query",
        // Named twice and paged: answered once, and the tool's optional
        // `offset` reaches the sidecar (a paged answer says where it ends).
        json!({"toolCallIds": ["t1", "t1"], "offset": 1}),
    ));
    llm.push(Reply::text("Recovered alpha."));
    let run2 = pi.prompt_in_session(&session, "What did alpha.txt say exactly?");
    run2.assert_success();
    report_timing(&label("prompt 2"), &run2);
    assert_incremental(&run2);
    llm.assert_script_consumed();
    assert_eq!(run2.session_id(), run.session_id(), "same session");
    let main = llm.main_requests();
    assert_eq!(main.len(), 6, "{}", run2.report());

    let first = &main[4];
    assert!(
        first.tool_names().iter().any(|t| t == "context_tree_query"),
        "the query tool is declared: {:?}",
        first.tool_names()
    );
    for (i, (_, marker, call)) in files.iter().enumerate() {
        let text = tool_result(first, call);
        assert!(
            text.starts_with(&stub_prefix(&format!("t{}", i + 1))),
            "{call} is stubbed: {text}"
        );
        assert!(
            !first.any_message_contains(marker),
            "{marker} must not reach the model"
        );
    }
    assert!(
        first
            .texts_of_role("user")
            .iter()
            .any(|t| t.contains("**Summarized tool refs**") && t.contains("`t1`")),
        "the summaries ride along as user messages"
    );

    let second = &main[5];
    let recovered = tool_result(second, "call_q");
    assert!(recovered.starts_with("## toolRef: t1"), "{recovered}");
    assert_eq!(recovered.matches("## toolRef:").count(), 1, "{recovered}");
    assert!(
        recovered.ends_with("shown: the end of the output.]"),
        "the page notice: {recovered}"
    );
    assert!(recovered.contains("Tool: read"), "{recovered}");
    assert!(recovered.contains("ALPHA-7f3e line 0000"), "{recovered}");
    assert!(
        recovered.contains(&big_file("ALPHA-7f3e", 5000).trim_end().to_owned()),
        "the whole original comes back"
    );
    assert!(tool_result(second, "call_b").starts_with(&stub_prefix("t2")));
    assert!(tool_result(second, "call_c").starts_with(&stub_prefix("t3")));

    // Every line of the session still parses, the first flush's entries are intact.
    let entries = read_jsonl(&session);
    assert_eq!(
        index_records(&entries)
            .iter()
            .filter(|r| str_of(r, "toolCallId") == "call_a")
            .count(),
        1
    );
    ScenarioRuns {
        first: run,
        second: run2,
    }
}

/// Three tool turns whose replies report a big prompt (20k of a 32k window),
/// so with `autoBudgetThreshold: 0.1` every turn end is a budget flush.
pub fn budget_script() -> Vec<Reply> {
    vec![
        Reply::tool_call("call_a", "read", json!({"path": "alpha.txt"})).with_usage(20_000, 10),
        Reply::tool_call("call_b", "read", json!({"path": "bravo.txt"})).with_usage(20_000, 10),
        Reply::tool_call("call_c", "read", json!({"path": "charlie.txt"})).with_usage(20_000, 10),
        Reply::text("All three read.").with_usage(20_000, 10),
    ]
}

/// A setup with `autoBudgetThreshold: 0.1` whose sidecar is `bin`, and the
/// three files of [`budget_script`].
pub fn budget_env(install: &'static PiInstall, llm: &FakeLlm, bin: &Path) -> PiEnv {
    let mut settings = condense_settings();
    settings["contextPrune"]["autoBudgetThreshold"] = json!(0.1);
    let pi = PiEnv::new(install, &llm.base_url())
        .with_settings(settings)
        .with_extension(extension_dir())
        .with_env("CONDENSE_BIN", bin.to_string_lossy())
        .with_env("CONDENSE_PI_TIMING", "1");
    for (name, marker) in [
        ("alpha.txt", "ALPHA-5d21"),
        ("bravo.txt", "BRAVO-88b0"),
        ("charlie.txt", "CHARLIE-3e6f"),
    ] {
        fs::write(pi.work_dir.join(name), big_file(marker, 5000)).expect("write a file");
    }
    pi
}

/// With `CONDENSE_E2E_DEBUG` set: the run, the session entries and the tool
/// results of every main request, on stderr.
pub fn debug_dump(run: &PiRun, pi: &PiEnv, llm: &FakeLlm) {
    if std::env::var_os("CONDENSE_E2E_DEBUG").is_none() {
        return;
    }
    eprintln!("{}", run.report());
    for e in read_jsonl(&pi.session_file(run)) {
        let mut t = e.to_string();
        t.truncate(400);
        eprintln!("ENTRY {t}");
    }
    for r in llm.main_requests() {
        eprintln!(
            "MAIN REQ tool results {:?}",
            r.tool_results()
                .iter()
                .map(|(id, t)| (id.clone(), t.chars().take(60).collect::<String>()))
                .collect::<Vec<_>>()
        );
    }
}

/// pi-condense flushes the turn that crossed the budget, at its `turn_end`
/// (the batch is on pi's branch by then). The sidecar sees that turn only if
/// it appends `turn.end`'s message and results to its copy (`synced`,
/// docs/protocol.md); until it does, the flush rescans a copy one turn behind
/// and summarizes nothing at turn 0. pi 0.73 does not wait for `turn_end`
/// handlers before the next LLM call, and may not even have started the
/// turn's handler by then; the shim's `context` handler waits for it to
/// start (bounded) and for its `turn.end` answer instead, so the stubs
/// arrive as early there.
pub fn budget_flush_at_turn_end(install: &'static PiInstall) {
    let llm = FakeLlm::start(budget_script());
    llm.set_default_summary(Reply::text(SUMMARY_TEXT));
    let pi = budget_env(install, &llm, &sidecar_bin());
    let run = pi.prompt("Read alpha.txt, bravo.txt and charlie.txt.");
    debug_dump(&run, &pi, &llm);
    run.assert_success();
    report_timing(&format!("pi {} budget flushes", install.pi_version), &run);
    llm.assert_script_consumed();
    let main = llm.main_requests();
    assert_eq!(main.len(), 4);
    // Each request after a tool turn already carries that turn's stub.
    for (i, call) in ["call_a", "call_b", "call_c"].iter().enumerate() {
        let text = tool_result(&main[i + 1], call);
        assert!(
            text.starts_with(&stub_prefix(&format!("t{}", i + 1))),
            "request {} carries the stub of {call}: {text}\n{}",
            i + 1,
            run.report()
        );
    }
    let entries = read_jsonl(&pi.session_file(&run));
    let budget: Vec<_> = custom_entries(&entries, "context-prune-flush-metrics")
        .into_iter()
        .filter(|m| m["data"]["trigger"] == "budget")
        .collect();
    assert_eq!(budget.len(), 3, "{budget:#?}");
    assert!(
        budget.iter().all(|m| m["data"]["outcome"] == "summarized"),
        "no empty budget flush: {budget:#?}"
    );
}
