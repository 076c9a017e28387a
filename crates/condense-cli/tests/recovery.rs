//! Recovery and pi's bytes through the binary (issue 15): lone surrogate
//! escapes in pi's messages, paged queries, refs the index lost, and
//! repeated refs.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use support::{condense, fixture, raw_fixture_entries, temp_dir};

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

const MARK: &str = "\u{E0FF}";

/// The fixture without condense's entries (so `compact` has work), with
/// lone surrogate escapes (what `JSON.stringify` writes for a string cut
/// inside a pair) in every tool output, every tool call's arguments and a
/// thinking block.
fn session_with_lone_surrogates(dir: &Path) -> PathBuf {
    let mut out = Vec::new();
    for mut e in raw_fixture_entries() {
        let is_result = e["message"]["role"] == "toolResult";
        let message = &mut e["message"];
        if let Some(blocks) = message["content"].as_array_mut() {
            for b in blocks {
                match b["type"].as_str() {
                    Some("text") if is_result => {
                        let t = b["text"].as_str().unwrap_or_default();
                        b["text"] = Value::from(format!("{t} cut {MARK} here"));
                    }
                    Some("toolCall") => {
                        b["arguments"]["note"] = Value::from(format!("arg {MARK}"));
                    }
                    _ => {}
                }
            }
            if message["role"] == "assistant" {
                blocks_push_thinking(message);
            }
        }
        out.push(e.to_string().replace(MARK, "\\ud83d"));
    }
    let path = dir.join("lone.jsonl");
    std::fs::write(&path, out.join("\n") + "\n").unwrap();
    path
}

fn blocks_push_thinking(message: &mut Value) {
    if let Some(blocks) = message["content"].as_array_mut() {
        blocks.insert(
            0,
            serde_json::json!({"type": "thinking", "thinking": format!("half {MARK}"), "thinkingSignature": "s"}),
        );
    }
}

#[test]
fn lone_surrogates_pass_through_and_every_command_keeps_working() {
    let dir = temp_dir("recovery", "lone");
    let s = session_with_lone_surrogates(&dir);
    let p = s.to_str().unwrap();
    let settings = dir.join("settings.json");
    // Purge and thinking strip on, so both rebuilders meet such messages.
    std::fs::write(
        &settings,
        r#"{"contextPrune":{"thinkingStrip":{"enabled":true,"keepLastTurns":0},"purgeErrors":{"enabled":true,"cooldownTurns":0}}}"#,
    )
    .unwrap();
    let st = settings.to_str().unwrap();

    let before = ok(&condense(&dir, &["render", "--json", "--settings", st, p]));
    assert!(
        before.contains("\\ud83d"),
        "the messages carrying one pass through with pi's bytes"
    );
    ok(&condense(&dir, &["status", p]));
    ok(&condense(&dir, &["status", "--json", p]));
    let compact = ok(&condense(&dir, &["compact", p, "--window", "1", "--json"]));
    let compact: Value = serde_json::from_str(&compact).unwrap();
    assert_eq!(compact["written"], true, "{compact}");
    let after = ok(&condense(&dir, &["render", "--json", "--settings", st, p]));
    assert!(after.len() < before.len());
    // An output summarized away comes back, its lone surrogate as U+FFFD.
    let q = ok(&condense(&dir, &["query", p, "t1"]));
    assert!(q.contains("cut \u{FFFD} here"), "{q}");
    let corpus = ok(&condense(
        &dir,
        &["corpus", dir.to_str().unwrap(), "--json"],
    ));
    let corpus: Value = serde_json::from_str(&corpus).unwrap();
    assert!(corpus.to_string().contains("sessions"), "{corpus}");
}

#[test]
fn query_pages_with_offset_and_limit() {
    let dir = temp_dir("recovery", "pages");
    let p = fixture();
    let p = p.to_str().unwrap();
    let whole = ok(&condense(&dir, &["query", p, "t2"]));
    let paged = ok(&condense(
        &dir,
        &["query", p, "t2", "--offset", "2", "--limit", "1"],
    ));
    let body = whole.split_once("\n\n").unwrap().1;
    let second = body.lines().nth(1).unwrap();
    let total = body.split('\n').count();
    let expected_notice = if total > 2 {
        format!("\n[Output truncated: lines 2-2 of {total} shown. To continue, call context_tree_query with toolCallIds [\"t2\"] and offset=3.]")
    } else {
        format!("\n[Lines 2-2 of {total} shown: the end of the output.]")
    };
    assert_eq!(
        paged.split_once("\n\n").unwrap().1,
        format!("{second}{expected_notice}")
    );
    let bad = condense(&dir, &["query", p, "t2", "--offset", "0"]);
    assert_eq!(bad.status.code(), Some(1), "a usage error");
}

#[test]
fn a_ref_the_index_lost_is_read_from_the_branch() {
    let dir = temp_dir("recovery", "lost");
    let p = fixture();
    let out = ok(&condense(&dir, &["query", p.to_str().unwrap(), "call_4"]));
    assert!(
        out.starts_with(
            "## toolRef: call_4\nSource: session branch (not in the index)\nTool: bash\n"
        ),
        "{out}"
    );
    assert!(out.contains("Status: ERROR"));
    assert!(out.contains("No such file or directory"));
}

#[test]
fn a_ref_named_5000_times_is_answered_once() {
    let dir = temp_dir("recovery", "repeat");
    let p = fixture();
    let p = p.to_str().unwrap();
    let once = condense(&dir, &["query", p, "t2"]);
    let mut args = vec!["query", p];
    args.extend(std::iter::repeat_n("t2", 5000));
    let many = condense(&dir, &args);
    assert_eq!(ok(&many), ok(&once));
}

#[test]
fn a_raw_id_pi_compacted_away_is_read_from_the_whole_branch() {
    // A read no flush indexed, pi's compaction, then a read after it.
    let dir = temp_dir("recovery", "compacted");
    let result = |id: &str| {
        let text: String = (0..50).map(|l| format!("{id} line {l:02}\n")).collect();
        serde_json::json!({"role": "toolResult", "toolCallId": id, "toolName": "read",
            "content": [{"type": "text", "text": text}], "isError": false, "timestamp": 3})
    };
    let call = |id: &str| {
        serde_json::json!({"role": "assistant", "content": [{"type": "toolCall", "id": id,
            "name": "read", "arguments": {"path": id}}], "stopReason": "toolUse", "timestamp": 2})
    };
    let user = serde_json::json!({"role": "user", "content": "go", "timestamp": 1});
    let mut lines = vec![
        serde_json::json!({"type": "session", "version": 3, "id": "c",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}),
    ];
    let mut parent = Value::Null;
    let items = [
        Some(user),
        Some(call("a0")),
        Some(result("a0")),
        None,
        Some(call("b0")),
        Some(result("b0")),
    ];
    for (n, item) in items.into_iter().enumerate() {
        let mut e = match item {
            Some(m) => serde_json::json!({"type": "message", "message": m}),
            None => serde_json::json!({"type": "compaction", "summary": "read a0",
                "firstKeptEntryId": null, "tokensBefore": 9000}),
        };
        e["id"] = Value::from(format!("c{n}"));
        e["parentId"] = parent;
        e["timestamp"] = Value::from("2026-01-01T00:00:01.000Z");
        parent = e["id"].clone();
        lines.push(e);
    }
    let file = dir.join("c.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, &text).unwrap();
    let out = ok(&condense(&dir, &["query", file.to_str().unwrap(), "a0"]));
    assert!(
        out.starts_with("## toolRef: a0\nSource: session branch (not in the index)\nTool: read\n")
            && out.contains("a0 line 49"),
        "{out}"
    );
    // The sidecar started on the same file answers alike.
    let mut engine = condense_engine::Engine::default();
    engine.start(condense_engine::StartParams {
        settings: Value::Null,
        session_id: "c".into(),
        session_dir: Some(dir.clone()),
        misses_dir: None,
        session_file: Some(file.clone()),
        branch: text.lines().skip(1).collect::<Vec<_>>().join("\n"),
        tree: false,
    });
    let answer = engine.query(&["a0".to_owned()], Default::default());
    assert_eq!(answer["text"].as_str(), Some(out.as_str()));
}
