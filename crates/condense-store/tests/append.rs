//! Appending entries to session files.

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use condense_core::Message;
use condense_core::SummarizerStats;
use condense_store::append::{AppendError, Appender, LockMode};
use condense_store::entries::{SummaryMessageDetails, CUSTOM_TYPE_STATS, CUSTOM_TYPE_SUMMARY};
use condense_store::session::{EntryType, ProblemKind, Session};
use serde_json::Map;

const NOW: i64 = 1_795_969_950_000; // 2026-11-29T16:32:30.000Z

fn temp_copy(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("session.jsonl");
    std::fs::write(&path, common::fixture_text() + extra).unwrap();
    path
}

/// Yields the given 32-bit ids (as the high half), then counts up.
fn ids(first: &[u32]) -> impl FnMut() -> u64 + Send + 'static {
    let mut queue: Vec<u32> = first.iter().rev().copied().collect();
    let mut next = 0xa000_0000u32;
    move || {
        let id = queue.pop().unwrap_or_else(|| {
            next += 1;
            next
        });
        u64::from(id) << 32 | 0xdead_beef
    }
}

fn summary_details() -> SummaryMessageDetails {
    SummaryMessageDetails {
        tool_call_refs: Some(vec![]),
        tool_call_ids: None,
        tool_names: vec![],
        turn_index: 13,
        timestamp: NOW - 10,
        extra: Map::new(),
    }
}

#[test]
fn appended_entries_chain_onto_the_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let path = temp_copy(dir.path(), "");
    // The first candidate collides with the fixture's leaf id and is skipped.
    let (app, session) = Appender::open_reading(&path, LockMode::Try).unwrap();
    let mut app = app.with_id_source(ids(&[0x696f01c8]));
    assert_eq!(app.leaf_id(), Some("696f01c8"));
    assert_eq!(session.entries.len(), 66);

    let stats = SummarizerStats {
        total_input_tokens: 7,
        total_cost: 0.5,
        ..Default::default()
    };
    let a = app.append_custom(CUSTOM_TYPE_STATS, &stats, NOW).unwrap();
    let b = app
        .append_custom_message(
            CUSTOM_TYPE_SUMMARY,
            "- `t9` summary",
            false,
            &summary_details(),
            NOW + 1,
        )
        .unwrap();
    let m = Message::from_json(r#"{"role":"user","content":"next","timestamp":1795969950002}"#)
        .unwrap();
    let c = app.append_message(&m, NOW + 2).unwrap();
    assert_eq!(
        (a.as_str(), b.as_str(), c.as_str()),
        ("a0000001", "a0000002", "a0000003")
    );
    assert_eq!(app.leaf_id(), Some("a0000003"));
    drop(app);

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with(&common::fixture_text()),
        "old lines are untouched"
    );
    let added: Vec<&str> = text[common::fixture_text().len()..].lines().collect();
    assert_eq!(
        added[0],
        r#"{"type":"custom","customType":"context-prune-stats","data":{"totalInputTokens":7,"totalOutputTokens":0,"totalCost":0.5,"callCount":0,"chainsCompressed":0,"rangesSummarized":0},"id":"a0000001","parentId":"696f01c8","timestamp":"2026-11-29T16:32:30.000Z"}"#
    );
    assert_eq!(
        added[2],
        r#"{"type":"message","id":"a0000003","parentId":"a0000002","timestamp":"2026-11-29T16:32:30.002Z","message":{"role":"user","content":"next","timestamp":1795969950002}}"#
    );

    let s = Session::open(&path).unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert!(s.ends_with_newline());
    assert_eq!(s.entries.len(), 69);
    let unique: HashSet<&str> = s.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(unique.len(), 69);
    let new: Vec<_> = s.entries[66..]
        .iter()
        .map(|e| (e.id.as_str(), e.parent_id.as_deref()))
        .collect();
    assert_eq!(
        new,
        vec![
            ("a0000001", Some("696f01c8")),
            ("a0000002", Some("a0000001")),
            ("a0000003", Some("a0000002"))
        ]
    );
    assert_eq!(s.branch(None).len(), 69);
    let ctx = s.context(None);
    let tail: Vec<_> = ctx
        .iter()
        .skip(33)
        .map(|(id, m)| (id.to_owned(), m.json().to_string()))
        .collect();
    assert_eq!(
        tail,
        vec![
            (
                "a0000002".to_owned(),
                format!(
                    r#"{{"role":"custom","customType":"context-prune-summary","content":"- `t9` summary","display":false,"details":{{"toolCallRefs":[],"toolNames":[],"turnIndex":13,"timestamp":{}}},"timestamp":{}}}"#,
                    NOW - 10,
                    NOW + 1
                )
            ),
            ("a0000003".to_owned(), m.json().to_string()),
        ]
    );
}

#[test]
fn append_after_a_torn_last_line_starts_a_fresh_line() {
    let dir = tempfile::tempdir().unwrap();
    let torn = r#"{"type":"custom","customType":"context-prune-index","data":{"toolCa"#;
    let path = temp_copy(dir.path(), torn);
    let (app, session) = Appender::open_reading(&path, LockMode::Try).unwrap();
    let mut app = app.with_id_source(ids(&[]));
    assert_eq!(
        session
            .problems
            .iter()
            .map(|p| (p.line, p.kind))
            .collect::<Vec<_>>(),
        vec![(68, ProblemKind::TornLastLine)]
    );
    assert_eq!(app.leaf_id(), Some("696f01c8"));
    app.append_custom("x", &serde_json::json!({"k": 1}), NOW)
        .unwrap();
    app.append_custom("x", &serde_json::json!({"k": 2}), NOW)
        .unwrap();
    drop(app);

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(&format!("{torn}\n{{\"type\":\"custom\"")));
    let s = Session::open(&path).unwrap();
    // The fragment is now an ordinary malformed line, never glued to data.
    assert_eq!(
        s.problems
            .iter()
            .map(|p| (p.line, p.kind))
            .collect::<Vec<_>>(),
        vec![(68, ProblemKind::Malformed)]
    );
    let tail: Vec<_> = s.entries[66..]
        .iter()
        .map(|e| (e.line, e.parent_id.clone().unwrap()))
        .collect();
    assert_eq!(
        tail,
        vec![(69, "696f01c8".to_owned()), (70, "a0000001".to_owned())]
    );
    assert_eq!(s.entries[67].payload_raw(), Some(r#"{"k":2}"#));
}

#[test]
fn a_second_appender_waits_for_the_lock_and_sees_the_first_ones_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = temp_copy(dir.path(), "");
    let mut first = Appender::open(&path, LockMode::Try)
        .unwrap()
        .with_id_source(ids(&[0xb0000001, 0xb0000002]));
    assert!(matches!(
        Appender::open(&path, LockMode::Try),
        Err(AppendError::Locked(_))
    ));

    first.append_custom("x", &1, NOW).unwrap();
    let waiter = {
        let path = path.clone();
        std::thread::spawn(move || {
            let mut second = Appender::open(&path, LockMode::Wait)
                .unwrap()
                .with_id_source(ids(&[0xc0000001]));
            let leaf = second.leaf_id().map(str::to_owned);
            second.append_custom("y", &2, NOW).unwrap();
            leaf
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    first.append_custom("x", &3, NOW).unwrap();
    drop(first);
    assert_eq!(waiter.join().unwrap().as_deref(), Some("b0000002"));

    let s = Session::open(&path).unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    let ids: Vec<_> = s
        .branch(None)
        .iter()
        .rev()
        .take(3)
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(ids, vec!["c0000001", "b0000002", "b0000001"]);
}

#[test]
fn set_leaf_starts_a_new_branch() {
    let dir = tempfile::tempdir().unwrap();
    let path = temp_copy(dir.path(), "");
    let mut app = Appender::open(&path, LockMode::Try)
        .unwrap()
        .with_id_source(ids(&[]));
    assert!(matches!(
        app.set_leaf(Some("nope")),
        Err(AppendError::UnknownEntry(_))
    ));
    app.set_leaf(Some("47a6850b")).unwrap();
    let id = app.append_custom("x", &0, NOW).unwrap();
    drop(app);
    let s = Session::open(&path).unwrap();
    assert_eq!(s.leaf().unwrap().id, id);
    let branch = s.branch(None);
    assert_eq!(branch.len(), 46); // the 45 entries of lines 2..=46, plus the new one
    assert_eq!(branch[branch.len() - 2].id, "47a6850b");
    assert_eq!(s.branch(Some("696f01c8")).len(), 66);
}

#[test]
fn refuses_files_it_must_not_append_to() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let v2 = write(
        "v2.jsonl",
        format!(
            "{}\n{}\n",
            common::HEADER.replace("\"version\":3", "\"version\":2"),
            common::user("a1", None, 1)
        ),
    );
    assert!(matches!(
        Appender::open(&v2, LockMode::Try),
        Err(AppendError::NeedsMigration { version: 2, .. })
    ));
    let v4 = write(
        "v4.jsonl",
        format!(
            "{}\n",
            common::HEADER.replace("\"version\":3", "\"version\":4")
        ),
    );
    assert!(matches!(
        Appender::open(&v4, LockMode::Try),
        Err(AppendError::NewerVersion { version: 4, .. })
    ));
    let headless = write("none.jsonl", format!("{}\n", common::user("a1", None, 1)));
    assert!(matches!(
        Appender::open(&headless, LockMode::Try),
        Err(AppendError::NoHeader(_))
    ));
    let missing = dir.path().join("missing.jsonl");
    assert!(matches!(
        Appender::open(&missing, LockMode::Try),
        Err(AppendError::Io { .. })
    ));
}

#[test]
fn an_empty_session_gets_a_root_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(&path, format!("{}\n", common::HEADER)).unwrap();
    let mut app = Appender::open(&path, LockMode::Wait).unwrap();
    assert_eq!(app.leaf_id(), None);
    let id = app.append_custom("x", &serde_json::json!(null), 0).unwrap();
    assert!(id.len() == 8 && id.chars().all(|c| c.is_ascii_hexdigit()));
    drop(app);
    let s = Session::open(&path).unwrap();
    assert_eq!(s.entries[0].kind, EntryType::Custom);
    assert_eq!(s.entries[0].parent_id, None);
    assert_eq!(s.entries[0].timestamp, "1970-01-01T00:00:00.000Z");
}

#[test]
fn a_stuck_id_source_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let path = temp_copy(dir.path(), "");
    let mut app = Appender::open(&path, LockMode::Try)
        .unwrap()
        .with_id_source(|| 0x696f_01c8_0000_0000);
    assert!(matches!(
        app.append_custom("x", &0, NOW),
        Err(AppendError::IdsExhausted(100))
    ));
    drop(app);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        common::fixture_text()
    );
}

#[cfg(unix)]
/// The range `append_message_at` gives is the message's JSON in the file,
/// byte for byte, also after a file that ended without a newline.
#[test]
fn a_message_appended_at_a_range_reads_back_from_it() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    // No newline after the last line: the append starts with one.
    let text = common::fixture_text();
    let path = temp_copy(dir.path(), "");
    std::fs::write(&path, text.trim_end_matches('\n')).unwrap();
    let mut app = Appender::open(&path, LockMode::Try).unwrap();
    let reader = app.reader().unwrap();
    let messages = [
        r#"{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"é\n\"x\" \ud83d\ude00"}],"isError":false,"timestamp":1}"#,
        r#"{"role":"user","content":"plain","timestamp":2}"#,
    ];
    for json in messages {
        let m = Message::from_json(json).unwrap();
        let (_, range) = app.append_message_at(&m, NOW).unwrap();
        let range = range.expect("the message ends its line");
        let mut back = vec![0; (range.end - range.start) as usize];
        reader.read_exact_at(&mut back, range.start).unwrap();
        assert_eq!(String::from_utf8(back).unwrap(), json);
    }
    let s = Session::open(&path).unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
}
