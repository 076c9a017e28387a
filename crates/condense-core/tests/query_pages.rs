//! `context_tree_query` pages: every byte of a recovered output is reachable
//! through `offset`/`limit`, old calls answer as before, repeated refs are
//! answered once within a bounded answer, and a raw id the index lost is
//! found on the branch.

use condense_core::{
    query, query_with, Message, PageRequest, QueryOptions, State, ToolCallRecord,
    QUERY_MAX_ANSWER_BYTES as MAX_ANSWER_BYTES, QUERY_MAX_BYTES as MAX_BYTES,
};
use proptest::prelude::*;
use serde_json::json;

fn record(id: &str, ts: i64, text: &str) -> ToolCallRecord {
    serde_json::from_value(json!({
        "toolCallId": id, "toolName": "bash", "args": {"cmd": "ls"}, "resultText": text,
        "isError": false, "turnIndex": 0, "timestamp": ts, "resultTimestamp": ts,
    }))
    .unwrap()
}

fn state_with(outputs: &[(&str, &str)]) -> State {
    let mut s = State::new();
    for (i, (id, text)) in outputs.iter().enumerate() {
        s.add_record(record(id, i as i64 + 1, text), true);
    }
    s
}

fn ask(state: &State, id: &str, offset: Option<u64>, limit: Option<u64>) -> String {
    let options = QueryOptions {
        page: PageRequest { offset, limit },
        branch: &[],
    };
    query_with(state, &[id.to_owned()], options, |_| None).text
}

/// The header every block of `record("a", …)` starts with.
const HEADER: &str =
    "## toolRef: a\nTool: bash\nArgs: {\n  \"cmd\": \"ls\"\n}\nStatus: OK\nTurn: 0\n\n";

/// Pages through `id` as the notices say, and joins the pages back.
fn read_whole(state: &State, id: &str, limit: Option<u64>) -> String {
    let mut out = String::new();
    let mut offset = None;
    for _ in 0..10_000 {
        let answer = ask(state, id, offset, limit);
        let body = answer.strip_prefix(HEADER).expect("one block");
        let Some(cut) = body.rfind("\n[Output truncated: lines ") else {
            let end = body.rfind("\n[Lines ").unwrap_or(body.len());
            if offset.is_some() || limit.is_some() {
                assert!(body[end..].contains("the end of the output"), "{body}");
            }
            out.push_str(&body[..end]);
            return out;
        };
        let (page, notice) = body.split_at(cut);
        // Only a limit that stops on blank lines shows nothing visible.
        assert!(
            !page.is_empty() || limit.is_some(),
            "an empty page: {notice}"
        );
        assert!(page.len() <= MAX_BYTES);
        out.push_str(page);
        if !notice.contains("which line") {
            out.push('\n');
        }
        let next = notice
            .rsplit("offset=")
            .next()
            .and_then(|n| n.strip_suffix(".]"))
            .and_then(|n| n.parse().ok())
            .expect("the notice says how to continue");
        offset = Some(next);
    }
    panic!("paging never ended");
}

#[test]
fn an_output_that_fits_answers_exactly_as_before() {
    let s = state_with(&[("a", "one\ntwo")]);
    assert_eq!(ask(&s, "a", None, None), format!("{HEADER}one\ntwo"));
    assert_eq!(
        ask(&s, "a", Some(2), None),
        format!("{HEADER}two\n[Lines 2-2 of 2 shown: the end of the output.]")
    );
}

#[test]
fn over_two_thousand_lines_says_how_to_continue_and_comes_back_whole() {
    let text: String = (1..=4500).map(|i| format!("line {i}\n")).collect();
    let s = state_with(&[("a", &text)]);
    let first = ask(&s, "a", None, None);
    assert!(first.ends_with(
        "line 2000\n[Output truncated: lines 1-2000 of 4501 shown. To continue, call context_tree_query with toolCallIds [\"a\"] and offset=2001.]"
    ));
    let limited = ask(&s, "a", Some(10), Some(3));
    assert!(limited.contains("\n\nline 10\nline 11\nline 12\n[Output truncated: lines 10-12"));
    assert!(read_whole(&s, "a", None) == text);
    assert!(read_whole(&s, "a", Some(777)) == text);
}

#[test]
fn between_50_kib_and_the_spill_threshold_the_tail_is_reachable() {
    let text: String = (0..900)
        .map(|i| format!("{i:04} {}\n", "x".repeat(60)))
        .collect();
    assert!(text.len() > MAX_BYTES && text.len() < 64 * 1024);
    let s = state_with(&[("a", &text)]);
    assert!(read_whole(&s, "a", None) == text);
}

#[test]
fn a_single_80k_line_is_split_and_never_empty() {
    for unit in ["y", "é", "😀", "中"] {
        let text = unit.repeat(80_000);
        let s = state_with(&[("a", &text)]);
        let first = ask(&s, "a", None, None);
        assert!(
            !first.contains("0/1 lines"),
            "the old empty body: {}",
            &first[..200]
        );
        assert!(first.contains("which line 2 continues"));
        assert!(read_whole(&s, "a", None) == text, "unit {unit}");
    }
}

#[test]
fn a_split_line_is_named_by_its_number_and_the_cut_by_its_bytes() {
    let s = state_with(&[("a", &"y".repeat(80_000))]);
    let first = ask(&s, "a", None, None);
    let notice = first.rsplit('\n').next().unwrap();
    assert_eq!(
        notice,
        format!(
            "[Output truncated: lines 1-1 of 2 shown; line 1 is part of a line longer than {} bytes, which line 2 continues. To continue, call context_tree_query with toolCallIds [\"a\"] and offset=2.]",
            condense_core::QUERY_MAX_BYTES - 2048
        )
    );
}

#[test]
fn an_offset_past_the_end_says_so() {
    let s = state_with(&[("a", "one")]);
    assert!(ask(&s, "a", Some(5), None)
        .ends_with("(offset 5 is past the end of this output: it has 1 lines)"));
}

#[test]
fn a_ref_named_5000_times_is_answered_once() {
    let big = "z".repeat(40_000);
    let s = state_with(&[("a", &big)]);
    let ids = vec!["a".to_owned(); 5000];
    let out = query(&s, &ids, |_| None);
    assert_eq!(out.text.matches("## toolRef: a").count(), 1);
    assert_eq!(out.results.len(), 1);
    assert_eq!(out.text, ask(&s, "a", None, None));
}

#[test]
fn many_distinct_refs_are_bounded_and_the_rest_named() {
    let big = "w".repeat(40_000);
    let outputs: Vec<(String, String)> = (0..50).map(|i| (format!("r{i}"), big.clone())).collect();
    let refs: Vec<(&str, &str)> = outputs
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let s = state_with(&refs);
    let ids: Vec<String> = outputs.iter().map(|(id, _)| id.clone()).collect();
    let out = query(&s, &ids, |_| None);
    assert!(
        out.text.len() <= MAX_ANSWER_BYTES + 1024,
        "{}",
        out.text.len()
    );
    let shown = out.text.matches("## toolRef: ").count();
    assert!((1..50).contains(&shown));
    assert_eq!(out.results.len(), shown);
    let tail = out.text.rsplit("\n\n---\n\n").next().unwrap();
    assert!(tail.starts_with("[Answer size limit"), "{tail}");
    assert!(tail.contains(&format!("{} ref(s) not answered", 50 - shown)));
    assert!(tail.contains(&format!("\"r{shown}\"")) && tail.contains("\"r49\""));
}

#[test]
fn a_raw_id_the_index_lost_is_found_on_the_branch() {
    let branch: Vec<Message> = [
        json!({"role":"user","content":"go","timestamp":1}),
        json!({"role":"assistant","content":[{"type":"toolCall","id":"call_4","name":"bash","arguments":{"command":"cat x"}}],"timestamp":2}),
        json!({"role":"toolResult","toolCallId":"call_4","toolName":"bash","content":[{"type":"text","text":"no such file"}],"isError":true,"timestamp":3}),
    ]
    .iter()
    .map(|v| Message::from_value(v).unwrap())
    .collect();
    let s = State::new();
    let ids = vec!["call_4".to_owned()];
    assert!(query(&s, &ids, |_| None)
        .text
        .contains("(not found in index"));
    let options = QueryOptions {
        page: PageRequest::default(),
        branch: &branch,
    };
    let out = query_with(&s, &ids, options, |_| None);
    assert_eq!(
        out.text,
        "## toolRef: call_4\nSource: session branch (not in the index)\nTool: bash\nArgs: {\n  \"command\": \"cat x\"\n}\nStatus: ERROR\nTurn: -1\n\nno such file"
    );
    assert_eq!(out.results.len(), 1);
    let keyed = query_with(&s, &["call_4@3".to_owned()], options, |_| None);
    assert!(keyed.text.ends_with("no such file"));
    let other = query_with(&s, &["call_4@9".to_owned()], options, |_| None);
    assert!(other.text.contains("(not found in index"));
}

fn output() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z ]{0,80}".prop_map(|s| s),
        Just("\n".to_owned()),
        Just("é中😀\u{301}".to_owned()),
        (1usize..90_000).prop_map(|n| "q".repeat(n)),
        (1usize..30_000).prop_map(|n| "😀".repeat(n)),
        (1usize..3000).prop_map(|n| "l\n".repeat(n)),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Paging with any limit gives every output back whole, each page
    /// non-empty and within 50 KiB.
    #[test]
    fn every_output_comes_back_whole_through_pages(text in output(), limit in prop::option::of(1u64..2500)) {
        let s = state_with(&[("a", &text)]);
        prop_assert!(read_whole(&s, "a", limit) == text, "not whole: {} bytes", text.len());
    }
}
