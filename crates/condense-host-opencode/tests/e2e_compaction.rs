//! condense through OpenCode's own compaction, in a real OpenCode against
//! the scripted server (see `e2e_opencode.rs`).

mod support;

use std::fs;

use serde_json::json;
use support::fake_llm::{FakeLlm, RecordedRequest, Reply};
use support::opencode_env::{require_opencode, OpenCodeEnv};
use support::scenario::{big_file, outline, read_call, sidecar_bin, stub_text, tool_result};

/// What a summary request's batch holds, named by the marker of the file it
/// read, so each flush's summary can be told apart.
fn summary_naming_markers(
    markers: &'static [&'static str],
) -> impl Fn(&serde_json::Value) -> Reply {
    move |body| {
        let text = body.to_string();
        let named: Vec<&str> = markers
            .iter()
            .copied()
            .filter(|m| text.contains(m))
            .collect();
        Reply::text(format!("- summary of {}", named.join(" and ")))
    }
}

/// The condense summaries (synthetic user messages) a request carries.
fn condense_summaries(request: &RecordedRequest) -> Vec<String> {
    request
        .texts_of_role("user")
        .into_iter()
        .filter(|t| t.contains("- summary of "))
        .collect()
}

const COMPACTED_TEXT: &str = "OpenCode's compaction summary: alpha and bravo were read.";

/// The lines OpenCode's read tool shows for `text` (`N: line`).
fn numbered(text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .map(|(i, line)| format!("{}: {line}", i + 1))
        .collect()
}

/// OpenCode compacts the session itself when a call's usage reaches the
/// model's limit: it summarizes the history in a call of its own (through
/// the same transform hook), then goes on from its summary alone. condense
/// keeps working through it: the run finishes, the compaction is written
/// from what the model was shown, the read after it is stubbed at the next
/// call, the query still returns an output from before it whole, and a new
/// process shows what the live one showed and keeps pruning.
#[test]
fn opencode_compaction_keeps_condense_working() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    const MARKERS: [&str; 4] = ["ALPHA-c0a1", "BRAVO-c0b2", "CHARLIE-c0c3", "DELTA-c0d4"];
    llm.set_summary_responder(summary_naming_markers(&MARKERS));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(
        &json!({"enabled": true, "autoBudgetThreshold": 0.1, "economy": {"policy": "reference"}}),
    );
    let files: Vec<_> = ["alpha", "bravo", "charlie", "delta"]
        .iter()
        .zip(MARKERS)
        .map(|(name, marker)| {
            let path = env.project.join(format!("{name}.txt"));
            let text = big_file(marker, 5000);
            fs::write(&path, &text).expect("write a file");
            (path, text)
        })
        .collect();
    let read = |id: &str, n: usize, tokens: u64| read_call(id, &files[n].0).with_usage(tokens, 10);
    llm.push(read("call_a", 0, 20_000));
    // Two turns more before the compaction, with outputs too small to
    // summarize: a resumed process numbers later turns after all of them
    // (the frontier is in that numbering) only if it counts what the
    // compaction left out.
    for id in ["call_g1", "call_g2"] {
        llm.push(Reply::tool_call(id, "glob", json!({"pattern": "*.none"})).with_usage(20_000, 10));
    }
    // 125k of the model's 128k: OpenCode compacts before the next call.
    llm.push(read("call_b", 1, 125_000));
    llm.push(Reply::text(COMPACTED_TEXT).with_usage(30_000, 50));
    llm.push(read("call_c", 2, 20_000));
    llm.push(
        Reply::tool_call(
            "call_q",
            "context_tree_query",
            json!({"toolCallIds": ["t1"]}),
        )
        .with_usage(20_000, 10),
    );
    llm.push(Reply::text("Done.").with_usage(20_000, 10));
    let run = env.run("Read alpha.txt, bravo.txt and charlie.txt.", false);
    run.assert_success();
    let main = llm.main_requests();
    assert_eq!(main.len(), 8, "{}\n{}", run.report(), outline(&llm));

    // The compaction's own call: no tools, the history as one prompt, with
    // the stubs and summaries the model was shown (their refs page back).
    let compaction = &main[4];
    assert!(compaction.tool_names().is_empty(), "{}", outline(&llm));
    assert!(
        compaction.any_message_contains("ref `t1`")
            && compaction.any_message_contains("- summary of ALPHA-c0a1")
            && !compaction.any_message_contains("ALPHA-c0a1 line 0000"),
        "the compaction summarizes what the model was shown\n{}",
        outline(&llm)
    );
    assert!(
        compaction.any_message_contains("keep each ref"),
        "the compaction is asked to keep the refs\n{}",
        outline(&llm)
    );
    // After it: OpenCode's summary instead of the history; condense shows
    // none of the summaries of what the compaction took away.
    let after = &main[5];
    assert!(
        after.any_message_contains(COMPACTED_TEXT),
        "{}",
        outline(&llm)
    );
    assert_eq!(tool_result(after, "call_a"), None);
    assert!(condense_summaries(after).is_empty(), "{}", outline(&llm));
    // condense keeps pruning: the read after the compaction is stubbed.
    assert_eq!(
        tool_result(&main[6], "call_c"),
        Some(stub_text("t3")),
        "{}\n{}",
        outline(&llm),
        env.protocol_log()
    );
    assert_eq!(
        condense_summaries(&main[6]),
        vec![format!("- summary of CHARLIE-c0c3{}", refs_footer("t3"))]
    );
    // An output from before the compaction comes back whole.
    let recovered = tool_result(&main[7], "call_q").expect("the query is answered");
    for line in numbered(&files[0].1) {
        assert!(recovered.contains(&line), "{line:?} in\n{recovered}");
    }
    let live = condense_summaries(&main[7]);

    // A new process shows what the live one showed, and keeps pruning.
    llm.push(read("call_d", 3, 20_000));
    llm.push(Reply::text("Still here.").with_usage(20_000, 10));
    let run2 = env.run("And delta.txt?", true);
    run2.assert_success();
    let main = llm.main_requests();
    assert_eq!(main.len(), 10, "{}\n{}", run2.report(), outline(&llm));
    assert_eq!(
        condense_summaries(&main[8]),
        live,
        "the resumed render shows the summaries the live one did\n{}",
        outline(&llm)
    );
    assert_eq!(tool_result(&main[8], "call_c"), Some(stub_text("t3")));
    let delta = tool_result(&main[9], "call_d").expect("the read is answered");
    assert!(
        delta.starts_with("[Summarized in pruner summary, ref `t"),
        "the resumed process stubs a new read: {delta}\n{}\n{}",
        outline(&llm),
        env.protocol_log()
    );
}

/// The footer core puts under a summary naming its refs.
fn refs_footer(refs: &str) -> String {
    format!("\n\n---\n**Summarized tool refs**: `{refs}`\nUse `context_tree_query` with these refs to retrieve the original full outputs.")
}

/// A compaction keeps the tail of recent turns when what came before is big
/// enough: OpenCode moves that tail after its summary. condense starts its
/// session again from its log at the first call after the compaction, so
/// the tail's stubs keep their summary on screen, and a new process sends
/// what the live one sent.
#[test]
fn a_compaction_keeping_a_tail() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    const MARKERS: [&str; 4] = ["ALPHA-7a11", "BRAVO-7a12", "CHARLIE-7a13", "KILO-7a14"];
    llm.set_summary_responder(summary_naming_markers(&MARKERS));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(
        &json!({"enabled": true, "autoBudgetThreshold": 0.1, "economy": {"policy": "reference"}}),
    );
    // Three reads of 25 KB: more than the 15k tokens OpenCode keeps, so the
    // second prompt's turn is the tail.
    let files: Vec<_> = ["alpha", "bravo", "charlie", "kilo"]
        .iter()
        .zip(MARKERS)
        .map(|(name, marker)| {
            let path = env.project.join(format!("{name}.txt"));
            let bytes = if *name == "kilo" { 5000 } else { 25_000 };
            fs::write(&path, big_file(marker, bytes)).expect("write a file");
            path
        })
        .collect();
    let read = |id: &str, n: usize, tokens: u64| read_call(id, &files[n]).with_usage(tokens, 10);
    llm.push(read("call_a", 0, 20_000));
    llm.push(read("call_b", 1, 20_000));
    llm.push(read("call_c", 2, 20_000));
    llm.push(Reply::text("Read all three.").with_usage(20_000, 10));
    env.run("Read alpha, bravo and charlie.", false)
        .assert_success();
    // The second prompt's read reaches the model's limit: OpenCode compacts.
    llm.push(read("call_k", 3, 125_000));
    llm.push(Reply::text(COMPACTED_TEXT).with_usage(30_000, 50));
    llm.push(Reply::text("Done.").with_usage(20_000, 10));
    let run = env.run("Read kilo.txt.", true);
    run.assert_success();
    let main = llm.main_requests();
    assert_eq!(main.len(), 7, "{}\n{}", run.report(), outline(&llm));
    let after = &main[6];
    let texts = after.texts_of_role("user");
    assert!(
        texts
            .first()
            .is_some_and(|t| t.contains("What did we do so far?")),
        "{}",
        outline(&llm)
    );
    // The tail (OpenCode picks it by size): at least the second prompt and
    // its read, after OpenCode's summary; the first read is not in it.
    assert!(
        after.any_message_contains("Read kilo.txt.") && after.any_message_contains(COMPACTED_TEXT),
        "{}",
        outline(&llm)
    );
    assert_eq!(tool_result(after, "call_a"), None, "{}", outline(&llm));
    let stub = tool_result(after, "call_k").expect("the tail's read is sent");
    assert!(
        stub.starts_with("[Summarized in pruner summary, ref `t"),
        "{stub}\n{}",
        outline(&llm)
    );
    // Exactly the summaries of the tail's reads are shown.
    let kept: Vec<String> = ["call_a", "call_b", "call_c", "call_k"]
        .iter()
        .zip(MARKERS)
        .filter(|(call, _)| tool_result(after, call).is_some())
        .map(|(_, marker)| format!("- summary of {marker}"))
        .collect();
    let live = condense_summaries(after);
    let named: Vec<String> = live
        .iter()
        .map(|t| t.lines().next().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        named,
        kept,
        "the tail's summaries stay shown, the rest's do not\n{}\n{}",
        outline(&llm),
        env.protocol_log()
    );

    // Each where a resumed branch has it: after its read's result.
    let at = |needle: &str| {
        after
            .messages()
            .iter()
            .position(|m| support::fake_llm::message_text(m).contains(needle))
    };
    assert!(
        at("- summary of KILO-7a14") > at("KILO-7a14 line 0000").or(at(&stub)),
        "the tail's summary follows its read\n{}",
        outline(&llm)
    );

    llm.push(Reply::text("Still here.").with_usage(20_000, 10));
    env.run("Anything else?", true).assert_success();
    let main = llm.main_requests();
    assert_eq!(main.len(), 8, "{}", outline(&llm));
    assert_eq!(
        condense_summaries(&main[7]),
        live,
        "a new process shows what the live one did\n{}",
        outline(&llm)
    );
    assert_eq!(tool_result(&main[7], "call_k"), Some(stub));
}

/// The TUI's `/compact` (`POST /session/{id}/summarize`, what the TUI
/// sends, to one `opencode serve` holding the session as the TUI's process
/// does; the prompts run in it through `opencode run --attach`). The
/// reads are big enough for OpenCode to keep a tail of the last turns.
/// condense keeps working through it: the compaction is written from the
/// stubs and summaries the model was shown, the next call holds OpenCode's
/// summary, the tail with exactly its reads' summaries still shown, and
/// the new prompt, a read after it is stubbed with its summary shown, every
/// ref pages its output back whole, and a new process shows what the live
/// one showed.
#[test]
fn a_manual_compaction_keeps_condense_working() {
    let Some(install) = require_opencode() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let markers = [
        "ALPHA-3c01",
        "BRAVO-3c02",
        "CHARLIE-3c03",
        "DELTA-3c04",
        "ECHO-3c05",
    ];
    llm.set_summary_responder(summary_naming_markers(&[
        "ALPHA-3c01",
        "BRAVO-3c02",
        "CHARLIE-3c03",
        "DELTA-3c04",
        "ECHO-3c05",
    ]));
    let env = OpenCodeEnv::new(install, &llm.base_url(), Some(&sidecar_bin()));
    env.write_condense_config(
        &json!({"enabled": true, "autoBudgetThreshold": 0.1, "economy": {"policy": "reference"}}),
    );
    // Three reads of 25 KB: more than the 15k tokens OpenCode keeps, so
    // the compaction takes the first reads and keeps the last turns.
    let files: Vec<_> = ["alpha", "bravo", "charlie", "delta", "echo"]
        .iter()
        .zip(markers)
        .enumerate()
        .map(|(n, (name, marker))| {
            let path = env.project.join(format!("{name}.txt"));
            let text = big_file(marker, if n < 3 { 25_000 } else { 5000 });
            fs::write(&path, &text).expect("write a file");
            (path, text)
        })
        .collect();
    let read = |id: &str, n: usize| {
        Reply::tool_call(id, "read", json!({"filePath": files[n].0})).with_usage(20_000, 10)
    };
    let server = env.serve();
    for (n, id) in ["call_a", "call_b", "call_c"].iter().enumerate() {
        llm.push(read(id, n));
    }
    llm.push(Reply::text("Read all three.").with_usage(20_000, 10));
    let run = env.run_attached(&server, "Read alpha, bravo and charlie.", false);
    run.assert_success();
    let session = run.session_id().expect("the run names its session");
    llm.push(read("call_d", 3));
    llm.push(Reply::text("Read delta.").with_usage(20_000, 10));
    env.run_attached(&server, "Read delta.txt.", true)
        .assert_success();
    let before = llm.main_requests().len();

    llm.push(Reply::text(COMPACTED_TEXT).with_usage(30_000, 50));
    let answer = server.compact(&session);
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (200, "true"),
        "{}",
        env.serve_log()
    );
    let main = llm.main_requests();
    assert_eq!(
        main.len(),
        before + 1,
        "one compaction call\n{}",
        outline(&llm)
    );
    let compaction = main[before].clone();
    assert!(compaction.tool_names().is_empty(), "{}", outline(&llm));
    assert!(
        compaction.any_message_contains("keep each ref"),
        "the compaction is asked to keep the refs\n{}",
        outline(&llm)
    );

    llm.push(read("call_e", 4));
    let refs = ["t1", "t2", "t3", "t4", "t5"];
    // One query per ref: OpenCode cuts a tool output past 50 KB.
    let query = |short_ref: &str| json!({"toolCallIds": [short_ref]});
    let queries = refs[1..].iter().fold(
        Reply::tool_call("call_q1", "context_tree_query", query(refs[0])),
        |reply, short_ref| {
            reply.and_tool_call(
                format!("call_q{}", &short_ref[1..]),
                "context_tree_query",
                query(short_ref),
            )
        },
    );
    llm.push(queries.with_usage(20_000, 10));
    llm.push(Reply::text("Done.").with_usage(20_000, 10));
    let prompt = "Read echo.txt, then look back.";
    env.run_attached(&server, prompt, true).assert_success();
    let main = llm.main_requests();
    assert_eq!(main.len(), before + 4, "{}", outline(&llm));
    // The next call: OpenCode's summary, the tail and the prompt; the
    // first read is not in the tail, the second prompt's read is.
    let first = &main[before + 1];
    assert!(
        first.any_message_contains(COMPACTED_TEXT)
            && first.any_message_contains("Read delta.txt.")
            && first.any_message_contains(prompt),
        "{}",
        outline(&llm)
    );
    assert_eq!(tool_result(first, "call_a"), None, "{}", outline(&llm));
    assert_eq!(
        tool_result(first, "call_d"),
        Some(stub_text("t4")),
        "{}\n{}",
        outline(&llm),
        env.protocol_log()
    );
    // What the compaction took away it was given as the model saw it:
    // stubs and summaries, each output's ref, never the output.
    let calls = ["call_a", "call_b", "call_c", "call_d"];
    let (kept, taken): (Vec<_>, Vec<_>) = calls
        .iter()
        .zip(refs)
        .zip(markers)
        .partition(|((call, _), _)| tool_result(first, call).is_some());
    for ((_, short_ref), marker) in &taken {
        assert!(
            compaction.any_message_contains(&format!("ref `{short_ref}`"))
                && compaction.any_message_contains(&format!("- summary of {marker}"))
                && !compaction.any_message_contains(&format!("{marker} line 0000")),
            "the compaction summarizes what the model was shown ({marker})\n{}",
            outline(&llm)
        );
    }
    // Exactly the tail's reads' summaries are kept, each after its read.
    let kept: Vec<String> = kept
        .iter()
        .map(|((_, short_ref), marker)| format!("- summary of {marker}{}", refs_footer(short_ref)))
        .collect();
    assert_eq!(
        condense_summaries(first),
        kept,
        "the tail's summaries are kept, the rest's are not\n{}",
        outline(&llm)
    );
    let at = |needle: &str| {
        first
            .messages()
            .iter()
            .position(|m| support::fake_llm::message_text(m).contains(needle))
    };
    assert!(
        at("- summary of DELTA-3c04") > at(&stub_text("t4")),
        "the tail's summary follows its read\n{}",
        outline(&llm)
    );
    // condense keeps pruning: the read after the compaction is stubbed,
    // its summary shown.
    let after_read = &main[before + 2];
    assert_eq!(tool_result(after_read, "call_e"), Some(stub_text("t5")));
    assert_eq!(
        condense_summaries(after_read),
        [
            kept,
            vec![format!("- summary of ECHO-3c05{}", refs_footer("t5"))]
        ]
        .concat(),
        "{}",
        outline(&llm)
    );
    // Every output comes back whole: those the compaction took away, the
    // tail's and the one read after it.
    for (n, (_, text)) in files.iter().enumerate() {
        let call = format!("call_q{}", n + 1);
        let recovered = tool_result(&main[before + 3], &call).expect("the query is answered");
        for line in numbered(text) {
            assert!(recovered.contains(&line), "{line:?} in\n{recovered}");
        }
    }
    let live = condense_summaries(&main[before + 3]);
    drop(server);

    // A new process shows what the live one showed.
    llm.push(Reply::text("Still here.").with_usage(20_000, 10));
    env.run("Anything else?", true).assert_success();
    let main = llm.main_requests();
    assert_eq!(main.len(), before + 5, "{}", outline(&llm));
    assert_eq!(
        condense_summaries(&main[before + 4]),
        live,
        "the resumed render shows the summaries the live one did\n{}",
        outline(&llm)
    );
    for (call, short_ref) in [("call_d", "t4"), ("call_e", "t5")] {
        assert_eq!(
            tool_result(&main[before + 4], call),
            Some(stub_text(short_ref))
        );
    }
}
