//! The prompts: batch serialization with `[[N:tool]]` labels, the result
//! cut, and the shapes of both user messages.

mod support;

use condense_core::CapturedBatch;
use condense_summarizer::prompt::{
    batch_user_message, call_label, cut_result, range_user_message, serialize_batch, BATCH_PROMPT,
    RANGE_PROMPT, RESULT_CUT,
};
use serde_json::json;
use support::{batch, call};

#[test]
fn labels_count_from_one_in_call_order() {
    let cases = [
        (0, "read", "[[1:read]]"),
        (1, "bash", "[[2:bash]]"),
        (11, "", "[[12:]]"),
    ];
    for (i, tool, label) in cases {
        assert_eq!(call_label(i, tool), label);
    }
}

#[test]
fn serializes_calls_with_labels_args_and_status() {
    let mut failing = call(
        "c2",
        "bash",
        json!({"command": "cargo test"}),
        "error[E0308]: mismatched types",
    );
    failing.is_error = true;
    let b = batch(vec![
        call(
            "c1",
            "read",
            json!({"path": "src/lib.rs", "limit": 20}),
            "pub mod a;",
        ),
        failing,
        call("c3", "ls", json!({}), ""),
    ]);
    let expected = "[[1:read]] Tool: read({\n  \"path\": \"src/lib.rs\",\n  \"limit\": 20\n})\nResult (OK): pub mod a;\n---\n[[2:bash]] Tool: bash({\n  \"command\": \"cargo test\"\n})\nResult (ERROR): error[E0308]: mismatched types\n---\n[[3:ls]] Tool: ls({})\nResult (OK): ";
    assert_eq!(serialize_batch(&b), expected);
}

#[test]
fn assistant_prose_comes_first() {
    let b = CapturedBatch {
        assistant_text: "Let me look.".into(),
        ..batch(vec![call("c1", "read", json!({"path": "a"}), "A")])
    };
    assert_eq!(
        serialize_batch(&b),
        "Assistant said: Let me look.\n\n[[1:read]] Tool: read({\n  \"path\": \"a\"\n})\nResult (OK): A"
    );
}

#[test]
fn results_are_cut_at_2000_utf16_units() {
    let exact = "a".repeat(RESULT_CUT);
    assert_eq!(cut_result(&exact), exact);
    let long = "b".repeat(RESULT_CUT + 345);
    assert_eq!(
        cut_result(&long),
        format!("{} ...[345 chars truncated]", "b".repeat(RESULT_CUT))
    );
    // Units, not bytes or chars: 1,000 emoji are exactly 2,000 units.
    let emoji = "\u{1f600}".repeat(1000);
    assert_eq!(cut_result(&emoji), emoji);
    let more = format!("{emoji}xyz");
    assert_eq!(cut_result(&more), format!("{emoji} ...[3 chars truncated]"));
    // A cut that would split a surrogate pair keeps one unit fewer.
    let odd = format!("a{}", "\u{1f600}".repeat(1000));
    assert_eq!(
        cut_result(&odd),
        format!("a{} ...[1 chars truncated]", "\u{1f600}".repeat(999))
    );
}

#[test]
fn batch_message_wraps_the_serialization_in_tags_after_the_prompt() {
    let b = batch(vec![call("c1", "read", json!({}), "x")]);
    assert_eq!(
        batch_user_message(&b),
        format!(
            "{BATCH_PROMPT}\n\n<tool-call-batch>\n{}\n</tool-call-batch>",
            serialize_batch(&b)
        )
    );
}

#[test]
fn the_batch_prompt_asks_for_the_label_contract() {
    for needle in ["1-3", "[[1:read]]", "label", "exactly", "paths", "error"] {
        assert!(BATCH_PROMPT.contains(needle), "{needle}");
    }
}

#[test]
fn range_message_joins_summaries_with_a_blank_line() {
    assert_eq!(
        range_user_message(&["- one `t1`", "- two `t2`"]),
        format!("{RANGE_PROMPT}\n\n<sub-task-summaries>\n- one `t1`\n\n- two `t2`\n</sub-task-summaries>")
    );
    assert!(RANGE_PROMPT.contains("`t7`"));
}
