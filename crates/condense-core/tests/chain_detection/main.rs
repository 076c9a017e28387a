//! Chain detection, closing-message threading and chain eligibility.
//!
//! A chain is user → (assistant with tool calls, tool results)… → text-only
//! assistant; a new user message interrupts; synthetic `<compressed-chain>`
//! user messages pass through; an open chain at the end is dropped. Each
//! case of the `detect_chains` table (`detect_cases.rs`) states the expected
//! ranges in full, worked out from those rules.

mod detect_cases;
mod eligible;
mod messages;

use std::collections::HashSet;

use condense_core::in_grace_keys;
use condense_core::Message;
use condense_core::OccurrenceKey;
use condense_core::Protection;
use condense_core::State;
use condense_core::{detect_chains, select_eligible, with_closing_message};
use serde_json::json;

use detect_cases::cases;
use eligible::{closed, interrupted, no_final_ts, state_with_compressed, tools, Eligible};
use messages::{
    assistant_blocks, call, calls, msg, protection, result, result_named, text, text_no_ts, user,
};

#[test]
fn detect_chains_table() {
    for case in cases() {
        let p = protection(case.tools, case.paths);
        let got = detect_chains(&case.messages, &p);
        assert_eq!(got, case.expected, "{}", case.name);
    }
}

#[test]
fn closed_and_resolvable() {
    let p = Protection::default();
    let chains = detect_chains(
        &[
            user(1),
            calls(2, &["a"]),
            result(3, "a"),
            user(4),
            text_no_ts(),
            user(6),
            text(7),
        ],
        &p,
    );
    let flags: Vec<(bool, bool)> = chains
        .iter()
        .map(|c| (c.is_closed(), c.is_resolvable()))
        .collect();
    assert_eq!(flags, vec![(false, false), (true, false), (true, true)]);
}

// ---- with_closing_message -------------------------------------------------------------

#[test]
fn with_closing_message_table() {
    let branch = vec![user(100), calls(200, &["tc1"]), result(300, "tc1")];
    let closed_branch = vec![
        user(100),
        calls(200, &["tc1"]),
        result(300, "tc1"),
        text(400),
    ];
    let other_text = msg(
        json!({"role": "assistant", "content": [{"type": "text", "text": "other words"}],
        "timestamp": 400}),
    );
    // (name, branch, closing, expected length, borrowed?)
    type Row<'a> = (&'static str, &'a [Message], Option<Message>, usize, bool);
    let cases: Vec<Row> = vec![
        ("no closing message", &branch, None, 3, true),
        (
            "appends a closing message the branch lacks",
            &branch,
            Some(text(400)),
            4,
            false,
        ),
        (
            "already last (same role and timestamp)",
            &closed_branch,
            Some(text(400)),
            4,
            true,
        ),
        (
            "same role and timestamp, other content: still no append",
            &closed_branch,
            Some(other_text),
            4,
            true,
        ),
        (
            "same timestamp, other role: appends",
            &branch,
            Some(user(300)),
            4,
            false,
        ),
        ("empty branch: appends", &[], Some(text(1)), 1, false),
    ];
    for (name, input, closing, len, borrowed) in cases {
        let out = with_closing_message(input, closing.as_ref());
        assert_eq!(out.len(), len, "{name}");
        assert_eq!(
            matches!(out, std::borrow::Cow::Borrowed(_)),
            borrowed,
            "{name}"
        );
        assert_eq!(&out[..input.len()], input, "{name}: prefix unchanged");
        if !borrowed {
            assert_eq!(out.last(), closing.as_ref(), "{name}");
        }
    }
}

#[test]
fn threading_the_closing_message_closes_the_newest_chain() {
    let branch = vec![
        user(100),
        calls(200, &["tc1"]),
        result(300, "tc1"),
        text(400),
        user(500),
        calls(600, &["tc2"]),
        result(700, "tc2"),
    ];
    let p = Protection::default();
    assert_eq!(
        detect_chains(&branch, &p).len(),
        1,
        "newest chain reads as open"
    );
    let closing = text(800);
    let threaded = with_closing_message(&branch, Some(&closing));
    let chains = detect_chains(&threaded, &p);
    assert_eq!(chains.len(), 2);
    assert_eq!(chains[1].start_user_timestamp, 500);
    assert_eq!(chains[1].final_assistant_timestamp, Some(800));
    assert_eq!(chains[1].end_index, Some(7));
}

// ---- select_eligible ------------------------------------------------------------------

#[test]
fn select_eligible_table() {
    let cases = vec![
        Eligible {
            name: "empty",
            chains: vec![],
            window: 3,
            compressed: &[],
            grace: vec![],
            expected: &[],
        },
        Eligible {
            name: "fewer than K",
            chains: vec![tools(100), tools(300)],
            window: 3,
            compressed: &[],
            grace: vec![],
            expected: &[],
        },
        Eligible {
            name: "exactly K",
            chains: vec![tools(100), tools(300), tools(500)],
            window: 3,
            compressed: &[],
            grace: vec![],
            expected: &[],
        },
        Eligible {
            name: "K + 1: the oldest",
            chains: vec![tools(100), tools(300), tools(500), tools(700)],
            window: 3,
            compressed: &[],
            grace: vec![],
            expected: &[100],
        },
        Eligible {
            name: "K + 3: the three oldest, in order",
            chains: [100, 300, 500, 700, 900, 1100]
                .iter()
                .map(|t| tools(*t))
                .collect(),
            window: 3,
            compressed: &[],
            grace: vec![],
            expected: &[100, 300, 500],
        },
        Eligible {
            name: "interrupted chains never selected and take no window slot",
            chains: vec![
                tools(100),
                interrupted(200),
                tools(500),
                tools(700),
                tools(900),
            ],
            window: 3,
            compressed: &[],
            grace: vec![],
            expected: &[100],
        },
        Eligible {
            name: "a closed chain with no final timestamp is not a candidate",
            chains: vec![no_final_ts(100), tools(300)],
            window: 0,
            compressed: &[],
            grace: vec![],
            expected: &[300],
        },
        Eligible {
            name: "compressed chains excluded before the window is counted",
            chains: vec![tools(100), tools(300), tools(500), tools(700)],
            window: 1,
            compressed: &[100, 300],
            grace: vec![],
            expected: &[500],
        },
        Eligible {
            name: "K = 0: every candidate",
            chains: vec![tools(100), tools(300), tools(500)],
            window: 0,
            compressed: &[],
            grace: vec![],
            expected: &[100, 300, 500],
        },
        Eligible {
            name: "K = 0 with one compressed",
            chains: vec![tools(100), tools(300), tools(500)],
            window: 0,
            compressed: &[100],
            grace: vec![],
            expected: &[300, 500],
        },
        Eligible {
            name: "empty middles never selected and take no window slot (K = 0)",
            chains: vec![
                closed(100, &[]),
                closed(200, &[]),
                closed(300, &["a", "b"]),
                closed(400, &["c"]),
            ],
            window: 0,
            compressed: &[],
            grace: vec![],
            expected: &[300, 400],
        },
        Eligible {
            name: "empty middles never selected and take no window slot (K = 1)",
            chains: vec![
                closed(100, &[]),
                closed(200, &[]),
                closed(300, &["a", "b"]),
                closed(400, &["c"]),
            ],
            window: 1,
            compressed: &[],
            grace: vec![],
            expected: &[300],
        },
        Eligible {
            name: "a chain holding an in-grace recovery result is deferred",
            chains: vec![closed(1, &["a", "t1"]), closed(2, &["b"])],
            window: 0,
            compressed: &[],
            grace: vec![OccurrenceKey::new("t1", Some(51))],
            expected: &[2],
        },
        Eligible {
            name: "grace matches the occurrence, not the bare id",
            chains: vec![closed(1, &["a", "t1"]), closed(2, &["b"])],
            window: 0,
            compressed: &[],
            grace: vec![
                OccurrenceKey::new("t1", Some(999)),
                OccurrenceKey::new("t1", None),
            ],
            expected: &[1, 2],
        },
        Eligible {
            name: "deferral after the window cut: an in-window grace chain shifts nothing",
            chains: vec![
                closed(1, &["a"]),
                closed(2, &["b"]),
                closed(3, &["c"]),
                closed(4, &["d", "t1"]),
                closed(5, &["e"]),
            ],
            window: 2,
            compressed: &[],
            grace: vec![OccurrenceKey::new("t1", Some(54))],
            expected: &[1, 2, 3],
        },
        Eligible {
            name: "a deferred chain does not pull a newer one out of the window",
            chains: vec![closed(1, &["t1"]), closed(2, &["b"]), closed(3, &["c"])],
            window: 2,
            compressed: &[],
            grace: vec![OccurrenceKey::new("t1", Some(51))],
            expected: &[],
        },
    ];
    for case in cases {
        let state = state_with_compressed(case.compressed);
        let grace: HashSet<OccurrenceKey> = case.grace.into_iter().collect();
        let got: Vec<i64> = select_eligible(&case.chains, &state, case.window, &grace)
            .iter()
            .map(|c| c.start_user_timestamp)
            .collect();
        assert_eq!(got, case.expected, "{}", case.name);
    }
}

#[test]
fn grace_deferral_across_the_real_boundary() {
    // detect_chains + in_grace_keys + select_eligible, as a flush wires them.
    let messages = vec![
        user(1),
        assistant_blocks(
            1,
            vec![
                json!({"type": "toolCall", "id": "t1", "name": "context_tree_query", "input": {}}),
            ],
        ),
        result_named(100, "t1", "context_tree_query"),
        text(2),
        user(3),
        assistant_blocks(3, vec![call("b", "bash", json!({}))]),
        result_named(200, "b", "bash"),
        text(4),
    ];
    let chains = detect_chains(&messages, &Protection::default());
    assert_eq!(
        chains
            .iter()
            .map(|c| c.start_user_timestamp)
            .collect::<Vec<_>>(),
        vec![1, 3]
    );
    let grace = in_grace_keys(&messages, 3);
    assert_eq!(grace, HashSet::from([OccurrenceKey::new("t1", Some(100))]));
    let eligible: Vec<i64> = select_eligible(&chains, &State::new(), 0, &grace)
        .iter()
        .map(|c| c.start_user_timestamp)
        .collect();
    assert_eq!(eligible, vec![3]);
    // Grace disabled: both compress.
    let none = in_grace_keys(&messages, 0);
    assert_eq!(select_eligible(&chains, &State::new(), 0, &none).len(), 2);
}
