//! The pi-condense 2.9.1 fixture session, read and turned into context.

mod common;

use condense_core::Role;
use condense_store::context::branch_messages;
use condense_store::session::{EntryType, Session};
use serde_json::Value;

#[test]
fn copy_matches_the_shared_fixture() {
    let shared = common::shared_fixture_dir().join("session.jsonl");
    if let Ok(original) = std::fs::read_to_string(&shared) {
        assert_eq!(
            original,
            common::fixture_text(),
            "tests/fixtures copy drifted from shared/"
        );
    }
}

#[test]
fn reads_the_fixture_without_problems() {
    let s = Session::open(common::fixture_path()).unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.migrated_from, None);
    let h = s.header.as_ref().unwrap();
    assert_eq!(h.version, 3);
    assert_eq!(h.id, "01a22826-7bb8-791e-9186-c0d22436a575");
    assert_eq!(h.cwd, "/home/dev/project");
    assert_eq!(h.timestamp, "2026-11-29T16:32:20.408Z");
    assert_eq!(h.parent_session, None);

    assert_eq!(s.entries.len(), 66);
    assert!(s.ends_with_newline());
    let leaf = s.leaf().unwrap();
    assert_eq!((leaf.id.as_str(), leaf.line), ("696f01c8", 67));
    let first = &s.entries[0];
    assert_eq!(
        (first.kind.clone(), first.parent_id.as_deref()),
        (EntryType::ModelChange, None)
    );

    let count = |kind: EntryType| s.entries.iter().filter(|e| e.kind == kind).count();
    assert_eq!(count(EntryType::Message), 28);
    assert_eq!(count(EntryType::CustomMessage), 5);
    assert_eq!(count(EntryType::Custom), 31);

    // Message bodies are the line's own bytes.
    for e in s.entries.iter().filter(|e| e.kind == EntryType::Message) {
        let m = e.message.as_ref().unwrap();
        assert!(
            e.raw().contains(&format!("\"message\":{}}}", m.json())),
            "line {}",
            e.line
        );
    }
    // Re-emitting the session gives the file back.
    assert_eq!(s.to_jsonl(), common::fixture_text());
}

#[test]
fn branch_is_the_whole_linear_file() {
    let s = Session::parse(&common::fixture_text());
    let branch = s.branch(None);
    assert_eq!(branch.len(), 66);
    assert_eq!(branch[0].id, "b5d4c2cd");
    assert_eq!(branch[65].id, "696f01c8");
    for pair in branch.windows(2) {
        assert_eq!(pair[1].parent_id.as_deref(), Some(pair[0].id.as_str()));
    }
    // A branch from the middle.
    let mid = s.branch(Some("ae79ebdf"));
    assert_eq!(mid.len(), 8);
    assert_eq!(mid.last().unwrap().id, "ae79ebdf");
    assert!(s.branch(Some("nope")).is_empty());
    assert_eq!(
        s.entry("c4e5ba1c").unwrap().custom_type.as_deref(),
        Some("context-prune-frontier")
    );
}

/// (entry id, role, timestamp) of every context message, computed outside this crate.
const EXPECTED: &[(&str, &str, i64)] = &[
    ("ba3dfc6b", "user", 1795969940764),
    ("a6a74d05", "assistant", 1795969940803),
    ("afc6d012", "toolResult", 1795969940838),
    ("c6b257d6", "assistant", 1795969940841),
    ("0211d5a6", "toolResult", 1795969940849),
    ("ae79ebdf", "custom", 1795969940869),
    ("8dc4991e", "custom", 1795969940870),
    ("71103158", "assistant", 1795969940850),
    ("f8d7dbef", "user", 1795969942214),
    ("4c4d9b4a", "assistant", 1795969942242),
    ("daeba4d5", "toolResult", 1795969942283),
    ("57e6440a", "assistant", 1795969942285),
    ("cf64d74b", "toolResult", 1795969942298),
    ("53d7d63b", "custom", 1795969942314),
    ("65bd1f0f", "assistant", 1795969942299),
    ("ddf307ec", "user", 1795969943508),
    ("b369576e", "assistant", 1795969943536),
    ("135abc9c", "toolResult", 1795969943603),
    ("8ecca0ce", "assistant", 1795969943605),
    ("870c98a1", "user", 1795969944777),
    ("2ca8ac5f", "assistant", 1795969944811),
    ("7c112f0f", "toolResult", 1795969944861),
    ("c6f42509", "custom", 1795969944881),
    ("47a6850b", "assistant", 1795969944864),
    ("f1e8786b", "user", 1795969946198),
    ("8ac11aad", "assistant", 1795969946230),
    ("31708a8e", "toolResult", 1795969946300),
    ("41bc627f", "assistant", 1795969946304),
    ("ea8832bc", "user", 1795969947641),
    ("72eda7f5", "assistant", 1795969947693),
    ("364c9578", "toolResult", 1795969947742),
    ("5a64f68e", "custom", 1795969947765),
    ("696f01c8", "assistant", 1795969947745),
];

#[test]
fn context_messages_have_the_expected_roles_and_timestamps() {
    let s = Session::parse(&common::fixture_text());
    let ctx = s.context(None);
    let got: Vec<(&str, &str, i64)> = ctx
        .iter()
        .map(|(id, m)| (id, m.role().unwrap().as_str(), m.timestamp().unwrap()))
        .collect();
    assert_eq!(got, EXPECTED);
    assert_eq!(ctx.thinking_level, "off");
    let model = ctx.model.unwrap();
    assert_eq!(
        (model.provider.as_str(), model.id.as_str()),
        ("fake", "fake-1")
    );

    let paired = branch_messages(&s.branch(None));
    assert_eq!(paired.len(), EXPECTED.len());
    assert_eq!(paired[5].entry_id, "ae79ebdf");
    assert!(paired[5].message.is_summary_message());
    assert_eq!(
        paired[5].message.skeleton().summary_refs[0].tool_call_id,
        "call_0"
    );
}

#[test]
fn custom_messages_match_pi_condense_render() {
    let render: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/pi-condense-2.9.1.render.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let rendered_custom: Vec<&Value> = render.iter().filter(|m| m["role"] == "custom").collect();
    assert_eq!(rendered_custom.len(), 2);

    let s = Session::parse(&common::fixture_text());
    let ctx = s.context(None);
    for want in rendered_custom {
        let ts = want["timestamp"].as_i64().unwrap();
        let got = ctx
            .messages
            .iter()
            .find(|m| m.is(&Role::Custom) && m.timestamp() == Some(ts))
            .expect("the rendered custom message is in the context");
        // Same value, and the same text `JSON.stringify` gives (key order included).
        assert_eq!(&got.to_value().unwrap(), want);
        assert_eq!(got.json(), condense_store::json::to_string(want).unwrap());
    }
}
