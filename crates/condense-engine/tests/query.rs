//! `context_tree_query` for a raw tool-call id the index does not know,
//! after pi's compaction: the output is on the branch (the session file),
//! though no longer in the context pi sends, and the live engine answers
//! it as a reload of the file does (docs/decisions.md, "A raw id the index
//! lost is read from the branch").

use std::path::Path;

use condense_core::{Message, PageRequest};
use condense_engine::{Engine, StartParams};
use serde_json::{json, Value};

const T0: i64 = 1_780_000_000_000;

fn read_output(id: &str) -> String {
    (0..200).map(|l| format!("{id} line {l:03}\n")).collect()
}

/// A run of reads `a0`, `a1` that pi compacts away before any flush
/// indexed them (nothing triggered one: the run has not replied), then the
/// run goes on with `b0`. Each item is a message, or an entry (a compaction).
fn story() -> Vec<Value> {
    let mut out =
        vec![json!({"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0})];
    let mut at = T0;
    for id in ["a0", "a1"] {
        at += 1_000;
        out.push(read_call(id, at));
        out.push(read_result(id, at + 500));
    }
    out.push(json!({"type": "compaction", "summary": "read a0 and a1",
        "firstKeptEntryId": null, "tokensBefore": 90_000, "timestamp": at + 600}));
    out.push(read_call("b0", at + 1_000));
    out.push(read_result("b0", at + 1_500));
    out
}

fn read_call(id: &str, at: i64) -> Value {
    json!({"role": "assistant", "content": [{"type": "toolCall", "id": id, "name": "read",
        "arguments": {"path": format!("{id}.txt")}}], "stopReason": "toolUse",
        "timestamp": at, "provider": "anthropic", "model": "claude-x"})
}

fn read_result(id: &str, at: i64) -> Value {
    json!({"role": "toolResult", "toolCallId": id, "toolName": "read",
        "content": [{"type": "text", "text": read_output(id)}], "isError": false, "timestamp": at})
}

/// The story as pi's session file lines (header first), entries chained.
fn session_lines(story: &[Value]) -> Vec<String> {
    let mut lines = vec![
        json!({"type": "session", "version": 3, "id": "q", "timestamp": "", "cwd": "/"})
            .to_string(),
    ];
    let mut parent = Value::Null;
    for (n, item) in story.iter().enumerate() {
        let id = format!("q{n:04}");
        let at = item["timestamp"].as_i64().unwrap_or(T0);
        let mut e = if item.get("type").is_some() {
            item.clone()
        } else {
            json!({"type": "message", "message": item})
        };
        e["id"] = json!(id);
        e["parentId"] = parent;
        e["timestamp"] = json!(condense_store::time::format_iso(at));
        parent = json!(id);
        lines.push(e.to_string());
    }
    lines
}

fn message(v: &Value) -> Message {
    Message::from_json(&v.to_string()).expect("a message")
}

fn start(engine: &mut Engine, file: &Path, branch: &[String]) {
    engine.start(StartParams {
        settings: json!({"contextPrune": {"enabled": true}}),
        session_id: "q".into(),
        session_dir: file.parent().map(Path::to_path_buf),
        misses_dir: None,
        session_file: Some(file.to_path_buf()),
        branch: branch.join("\n"),
        tree: false,
    });
}

fn query_text(engine: &Engine, id: &str) -> String {
    let answer = engine.query(&[id.to_owned()], PageRequest::default());
    answer["text"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_raw_id_pi_compacted_away_is_found_live_as_on_a_reload() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("q.jsonl");
    let story = story();
    let lines = session_lines(&story);
    // pi writes every entry as it goes: by the query, the file holds the story.
    std::fs::write(&file, lines.join("\n") + "\n").expect("the session file");

    // Live: a new session, then the calls pi makes.
    let mut live = Engine::default();
    start(&mut live, &file, &[]);
    let compaction = story
        .iter()
        .position(|v| v.get("type").is_some())
        .expect("a compaction");
    let before: Vec<Message> = story[..compaction].iter().map(message).collect();
    // Each call sends what came since the last one.
    let mut sent = 0;
    for (i, m) in before.iter().enumerate() {
        if m.is(&condense_core::Role::Assistant) {
            live.context(sent, before[sent..i].to_vec());
            sent = i;
        }
    }
    live.context(sent, before[sent..].to_vec());
    assert!(
        query_text(&live, "a0").contains("a0 line 199"),
        "before the compaction, the context holds it"
    );
    // pi compacts: its list is now the summary and what came after.
    let compacted = condense_store::context::build_context(
        &condense_store::session::Session::parse(&lines.join("\n")).branch(None),
    )
    .messages;
    assert_eq!(compacted.len(), 3, "the summary, b0's call and result");
    live.context(0, compacted);
    for id in ["a0", "a1"] {
        let text = query_text(&live, id);
        assert!(
            text.starts_with(&format!(
                "## toolRef: {id}\nSource: session branch (not in the index)\nTool: read\n"
            )) && text.contains(&format!("{id} line 199")),
            "live, after the compaction: {text}"
        );
    }

    // A reload: the engine started on the file's branch.
    let mut reloaded = Engine::default();
    start(&mut reloaded, &file, &lines[1..]);
    for id in ["a0", "a1", "b0", "nothing"] {
        assert_eq!(
            query_text(&reloaded, id),
            query_text(&live, id),
            "{id}: live and reloaded answer alike"
        );
    }
}
