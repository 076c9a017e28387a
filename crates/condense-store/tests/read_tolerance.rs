//! Reading damaged, old and branched session files.

mod common;

use common::{label, user, HEADER};
use condense_core::Role;
use condense_store::session::{EntryType, ProblemKind, Session};

fn kinds(s: &Session) -> Vec<(usize, ProblemKind)> {
    s.problems.iter().map(|p| (p.line, p.kind)).collect()
}

#[test]
fn torn_last_line_is_reported_and_skipped() {
    let text = format!(
        "{HEADER}\n{}\n{}\n{}",
        user("a1", None, 1),
        user("a2", Some("a1"), 2),
        r#"{"type":"message","id":"a3","par"#
    );
    let s = Session::parse(&text);
    assert_eq!(kinds(&s), vec![(4, ProblemKind::TornLastLine)]);
    assert_eq!(s.entries.len(), 2);
    assert_eq!(s.leaf().unwrap().id, "a2");
    assert!(!s.ends_with_newline());
    assert_eq!(s.context(None).messages.len(), 2);
}

#[test]
fn a_whole_last_line_without_newline_is_kept() {
    let text = format!(
        "{HEADER}\n{}\n{}",
        user("a1", None, 1),
        user("a2", Some("a1"), 2)
    );
    let s = Session::parse(&text);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.leaf().unwrap().id, "a2");
    assert!(!s.ends_with_newline());
}

#[test]
fn malformed_middle_lines_are_reported_and_skipped() {
    let text = format!(
        "{HEADER}\n{}\n{{not json\n[1,2]\n{}\n{}\n",
        user("a1", None, 1),
        r#"{"id":"zz","parentId":"a1"}"#,
        user("a2", Some("a1"), 2),
    );
    let s = Session::parse(&text);
    assert_eq!(
        kinds(&s),
        vec![
            (3, ProblemKind::Malformed),
            (4, ProblemKind::Malformed),
            (5, ProblemKind::Malformed)
        ]
    );
    assert!(s.problems[0]
        .to_string()
        .starts_with("line 3: malformed line"));
    let ids: Vec<_> = s.branch(None).iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids, vec!["a1", "a2"]);
    assert_eq!(s.entries[1].line, 6);
}

#[test]
fn unknown_entry_types_are_kept_and_reported_once_per_type() {
    let usage = |id: &str, parent: &str| {
        format!(
            r#"{{"type":"usage","id":"{id}","parentId":"{parent}","timestamp":"t","kind":"x","future":[1]}}"#
        )
    };
    let text = format!(
        "{HEADER}\n{}\n{}\n{}\n{}\n",
        user("a1", None, 1),
        usage("u1", "a1"),
        usage("u2", "u1"),
        user("a2", Some("u2"), 2)
    );
    let s = Session::parse(&text);
    assert_eq!(kinds(&s), vec![(3, ProblemKind::UnknownEntryType)]);
    assert!(s.problems[0].message.contains("`usage` (2 entries)"));
    assert_eq!(s.entries[1].kind, EntryType::Unknown("usage".into()));
    assert_eq!(s.entries[1].raw(), usage("u1", "a1"));
    assert_eq!(s.entries[1].raw_field("future"), Some("[1]"));
    // The branch runs through them; the context skips them.
    assert_eq!(s.branch(None).len(), 4);
    assert_eq!(s.context(None).entry_ids, vec!["a1", "a2"]);
    assert_eq!(s.to_jsonl(), text);
}

#[test]
fn header_problems() {
    // No header: entries are still read.
    let s = Session::parse(&format!("{}\n{}\n", user("a1", None, 1), HEADER));
    assert_eq!(
        kinds(&s),
        vec![
            (1, ProblemKind::MissingHeader),
            (2, ProblemKind::StrayHeader)
        ]
    );
    assert!(s.header.is_none());
    assert_eq!(s.entries.len(), 1);

    // A newer version is read as v3 and reported.
    let newer = HEADER.replace("\"version\":3", "\"version\":4");
    let s = Session::parse(&format!("{newer}\n{}\n", user("a1", None, 1)));
    assert_eq!(kinds(&s), vec![(1, ProblemKind::UnsupportedVersion)]);
    assert_eq!(s.header.as_ref().unwrap().version, 4);

    // Empty files are fine.
    let s = Session::parse("");
    assert!(s.problems.is_empty() && s.entries.is_empty() && s.header.is_none());
}

#[test]
fn missing_and_duplicate_ids() {
    let text = format!(
        "{HEADER}\n{}\n{}\n{}\n",
        user("a1", None, 1),
        r#"{"type":"message","parentId":"a1","timestamp":"t","message":{"role":"user","content":"x","timestamp":2}}"#,
        user("a1", None, 3),
    );
    let s = Session::parse(&text);
    assert_eq!(
        kinds(&s),
        vec![(3, ProblemKind::MissingId), (4, ProblemKind::DuplicateId)]
    );
    assert_eq!(s.entry("a1").unwrap().line, 4);
}

#[test]
fn bad_messages_are_kept_without_a_message() {
    let text = format!(
        "{HEADER}\n{}\n{}\n",
        r#"{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":[1]}"#,
        r#"{"type":"message","id":"a2","parentId":"a1","timestamp":"t"}"#,
    );
    let s = Session::parse(&text);
    assert_eq!(
        kinds(&s),
        vec![(2, ProblemKind::BadMessage), (3, ProblemKind::BadMessage)]
    );
    assert_eq!(s.entries.len(), 2);
    assert!(s.entries.iter().all(|e| e.message.is_none()));
    assert!(s.context(None).messages.is_empty());
}

#[test]
fn invalid_utf8_is_replaced_and_reported() {
    let mut bytes = format!("{HEADER}\n").into_bytes();
    bytes.extend_from_slice(br#"{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":"x"#);
    bytes.push(0xff);
    bytes.extend_from_slice(b"\",\"timestamp\":1}}\n");
    let s = Session::from_bytes(bytes);
    assert_eq!(kinds(&s), vec![(0, ProblemKind::InvalidUtf8)]);
    assert!(s.entries[0]
        .message
        .as_ref()
        .unwrap()
        .json()
        .contains('\u{fffd}'));
}

#[test]
fn two_branches_leaf_is_the_last_line() {
    // a1 ─ a2 ─ a3
    //        └─ b3 ─ b4   (written after a3: the leaf)
    let text = format!(
        "{HEADER}\n{}\n{}\n{}\n{}\n{}\n",
        user("a1", None, 1),
        user("a2", Some("a1"), 2),
        user("a3", Some("a2"), 3),
        user("b3", Some("a2"), 4),
        label("b4", Some("b3")),
    );
    let s = Session::parse(&text);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.leaf().unwrap().id, "b4");
    let ids = |leaf: Option<&str>| {
        s.branch(leaf)
            .iter()
            .map(|e| e.id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(None), vec!["a1", "a2", "b3", "b4"]);
    assert_eq!(ids(Some("a3")), vec!["a1", "a2", "a3"]);
    let ts: Vec<_> = s
        .context(None)
        .messages
        .iter()
        .map(|m| m.timestamp().unwrap())
        .collect();
    assert_eq!(ts, vec![1, 2, 4]);
    assert_eq!(s.context(Some("a3")).entry_ids, vec!["a1", "a2", "a3"]);
}

#[test]
fn parent_cycles_stop_the_walk() {
    let text = format!(
        "{HEADER}\n{}\n{}\n",
        label("a1", Some("a2")),
        label("a2", Some("a1"))
    );
    let s = Session::parse(&text);
    let ids: Vec<_> = s.branch(None).iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids, vec!["a1", "a2"]);
}

#[test]
fn v1_sessions_are_migrated_like_pi() {
    let text = [
        r#"{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
        r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"one","timestamp":1}}"#,
        r#"{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"user","content":"two","timestamp":2}}"#,
        r#"{"type":"message","timestamp":"2025-01-01T00:00:03.000Z","message":{"role":"hookMessage","customType":"h","content":"three","display":true,"timestamp":3}}"#,
        r#"{"type":"compaction","timestamp":"2025-01-01T00:00:04.000Z","summary":"S","firstKeptEntryIndex":2,"tokensBefore":9}"#,
        r#"{"type":"message","timestamp":"2025-01-01T00:00:05.000Z","message":{"role":"user","content":"five","timestamp":5}}"#,
    ]
    .join("\n")
        + "\n";
    let s = Session::parse(&text);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.migrated_from, Some(1));
    let h = s.header.as_ref().unwrap();
    assert_eq!(h.version, 1);
    assert_eq!(
        h.raw(),
        r#"{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w","version":3}"#
    );

    // Ids are assigned and chained in file order.
    let ids: Vec<&str> = s.entries.iter().map(|e| e.id.as_str()).collect();
    assert!(ids
        .iter()
        .all(|id| id.len() == 8 && id.chars().all(|c| c.is_ascii_hexdigit())));
    assert_eq!(
        ids.iter().collect::<std::collections::HashSet<_>>().len(),
        5
    );
    assert_eq!(s.entries[0].parent_id, None);
    for pair in s.entries.windows(2) {
        assert_eq!(pair[1].parent_id.as_deref(), Some(pair[0].id.as_str()));
    }
    assert_eq!(
        s.entries[0].raw(),
        format!(
            r#"{{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{{"role":"user","content":"one","timestamp":1}},"id":"{}","parentId":null}}"#,
            ids[0]
        )
    );
    // firstKeptEntryIndex 2 (header = 0) is the second entry.
    assert_eq!(
        s.entries[3].raw(),
        format!(
            r#"{{"type":"compaction","timestamp":"2025-01-01T00:00:04.000Z","summary":"S","tokensBefore":9,"id":"{}","parentId":"{}","firstKeptEntryId":"{}"}}"#,
            ids[3], ids[2], ids[1]
        )
    );
    // hookMessage became custom.
    let m = s.entries[2].message.as_ref().unwrap();
    assert_eq!(m.role(), Some(&Role::Custom));
    assert!(s.entries[2]
        .raw()
        .contains(r#""message":{"role":"custom","customType":"h""#));

    let ctx = s.context(None);
    assert_eq!(
        ctx.messages.iter().map(|m| m.json().to_string()).collect::<Vec<_>>(),
        vec![
            r#"{"role":"compactionSummary","summary":"S","tokensBefore":9,"timestamp":1735689604000}"#.to_owned(),
            r#"{"role":"user","content":"two","timestamp":2}"#.to_owned(),
            r#"{"role":"custom","customType":"h","content":"three","display":true,"timestamp":3}"#.to_owned(),
            r#"{"role":"user","content":"five","timestamp":5}"#.to_owned(),
        ]
    );
    // The migrated text reads back as a v3 file with the same tree.
    let again = Session::parse(&s.to_jsonl());
    assert!(again.problems.is_empty() && again.migrated_from.is_none());
    assert_eq!(
        again
            .entries
            .iter()
            .map(|e| e.id.as_str())
            .collect::<Vec<_>>(),
        ids
    );
}

#[test]
fn v2_sessions_rename_hook_messages_only() {
    let user_line = user("a1", None, 1);
    let hook = r#"{"type":"message","id":"a2","parentId":"a1","timestamp":"t","message":{"role":"hookMessage","customType":"h","content":"x","display":false,"timestamp":2}}"#;
    let text = format!(
        "{}\n{user_line}\n{hook}\n",
        HEADER.replace("\"version\":3", "\"version\":2")
    );
    let s = Session::parse(&text);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.migrated_from, Some(2));
    assert!(s.header.as_ref().unwrap().raw().contains("\"version\":3"));
    assert_eq!(s.entries[0].raw(), user_line);
    assert_eq!(
        s.entries[1].raw(),
        r#"{"type":"message","id":"a2","parentId":"a1","timestamp":"t","message":{"role":"custom","customType":"h","content":"x","display":false,"timestamp":2}}"#
    );
    assert!(s.entries[1].message.as_ref().unwrap().is(&Role::Custom));
}

#[test]
fn a_leaf_whose_parent_chain_cycles_is_reported_where_it_cycles() {
    let header = r#"{"type":"session","version":3,"id":"s","timestamp":"","cwd":"/"}"#;
    let m = |id: &str, parent: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"","message":{{"role":"user","content":"x","timestamp":1}}}}"#
        )
    };
    // a <- b <- c, and a's parent is c: the leaf c's chain comes back to c.
    let text = [header.to_owned(), m("a", "c"), m("b", "a"), m("c", "b")].join("\n");
    let s = Session::parse(&text);
    assert_eq!(kinds(&s), vec![(4, ProblemKind::ParentCycle)]);
    assert_eq!(
        s.branch(None).len(),
        3,
        "the branch still reads up to the cycle"
    );
    // A chain that ends at a root is no problem.
    let text = [header.to_owned(), m("a", ""), m("b", "a")]
        .join("\n")
        .replace(r#""parentId":"""#, r#""parentId":null"#);
    assert!(kinds(&Session::parse(&text)).is_empty());
}

#[test]
fn a_switch_whose_message_count_is_no_count_says_what_it_holds() {
    let header = r#"{"type":"session","version":3,"id":"s","timestamp":"","cwd":"/"}"#;
    let switch = |id: &str, parent: &str, count: &str| {
        format!(
            r#"{{"type":"custom","customType":"context-prune-switch","data":{{"reason":"cold","messageCount":{count}}},"id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:00.000Z"}}"#
        )
    };
    let text = [
        header.to_owned(),
        r#"{"type":"message","id":"m","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"x","timestamp":1}}"#.to_owned(),
        switch("a", "m", "-1"),
        switch("b", "a", "1e300"),
        switch("c", "b", r#""3""#),
        r#"{"type":"custom","customType":"context-prune-switch","data":{"reason":"cold"},"id":"d","parentId":"c","timestamp":"2026-01-01T00:00:00.000Z"}"#.to_owned(),
    ]
    .join("\n");
    let s = Session::parse(&text);
    let (_, problems) = condense_store::replay::replay_branch(&s.branch(None));
    let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "switch entry whose messageCount -1 is not a count of messages",
            "switch entry whose messageCount 1e+300 is not a count of messages",
            "switch entry whose messageCount \"3\" is not a count of messages",
            "switch entry without a messageCount",
        ]
    );
}
