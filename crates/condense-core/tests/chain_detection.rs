//! Chain detection, closing-message threading and chain eligibility.
//!
//! A chain is user → (assistant with tool calls, tool results)… → text-only
//! assistant; a new user message interrupts; synthetic `<compressed-chain>`
//! user messages pass through; an open chain at the end is dropped. Each
//! case below states the expected ranges in full, worked out from those
//! rules.

use std::collections::HashSet;

use condense_core::in_grace_keys;
use condense_core::ChainEntry;
use condense_core::Config;
use condense_core::Message;
use condense_core::OccurrenceKey;
use condense_core::Protection;
use condense_core::State;
use condense_core::{detect_chains, select_eligible, with_closing_message, ChainRange};
use serde_json::{json, Value};

// ---- message builders -----------------------------------------------------------

fn msg(v: Value) -> Message {
    Message::from_value(&v).unwrap()
}

fn user(ts: i64) -> Message {
    msg(
        json!({"role": "user", "content": [{"type": "text", "text": "do the thing"}], "timestamp": ts}),
    )
}

fn user_no_ts() -> Message {
    msg(json!({"role": "user", "content": [{"type": "text", "text": "no clock"}]}))
}

fn synthetic(ts: i64) -> Message {
    msg(json!({"role": "user", "content": [{"type": "text",
        "text": "<compressed-chain id=\"b1\" tools=\"t1\">\nsummary\n</compressed-chain>"}], "timestamp": ts}))
}

/// An assistant calling `bash` with empty arguments for each id.
fn calls(ts: i64, ids: &[&str]) -> Message {
    let blocks: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type": "toolCall", "id": id, "name": "bash", "arguments": {}}))
        .collect();
    assistant_blocks(ts, blocks)
}

fn assistant_blocks(ts: i64, blocks: Vec<Value>) -> Message {
    let mut content = vec![json!({"type": "text", "text": "working..."})];
    content.extend(blocks);
    msg(json!({"role": "assistant", "content": content, "timestamp": ts, "stopReason": "toolUse"}))
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"type": "toolCall", "id": id, "name": name, "arguments": args})
}

fn result(ts: i64, id: &str) -> Message {
    result_named(ts, id, "bash")
}

fn result_named(ts: i64, id: &str, name: &str) -> Message {
    msg(
        json!({"role": "toolResult", "toolCallId": id, "toolName": name,
        "content": [{"type": "text", "text": "output"}], "isError": false, "timestamp": ts}),
    )
}

fn text(ts: i64) -> Message {
    msg(
        json!({"role": "assistant", "content": [{"type": "text", "text": "done"},
        {"type": "thinking", "thinking": "thoughts", "thinkingSignature": "sig"}],
        "timestamp": ts, "stopReason": "stop"}),
    )
}

fn text_no_ts() -> Message {
    msg(
        json!({"role": "assistant", "content": [{"type": "text", "text": "done"}], "stopReason": "stop"}),
    )
}

fn custom(ts: i64) -> Message {
    msg(
        json!({"role": "custom", "customType": "other-ext", "content": "note", "display": true, "timestamp": ts}),
    )
}

fn protection(tools: &[&str], paths: &[&str]) -> Protection {
    let config = Config {
        protected_tools: tools.iter().map(|s| (*s).to_owned()).collect(),
        protected_paths: paths.iter().map(|s| (*s).to_owned()).collect(),
        ..Config::default()
    };
    Protection::new(&config)
}

// ---- expected ranges --------------------------------------------------------------

/// An expected chain: (start ts, start index, end index, last index, final ts).
#[derive(Clone, Copy)]
struct At(i64, usize, Option<usize>, usize, Option<i64>);

fn range(at: At, ids: &[&str], keys: &[(&str, Option<i64>)], protected: &[&str]) -> ChainRange {
    let At(start_ts, start, end, last, final_ts) = at;
    ChainRange {
        start_user_timestamp: start_ts,
        start_index: start,
        end_index: end,
        last_index: last,
        final_assistant_timestamp: final_ts,
        middle_tool_call_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
        middle_occurrence_keys: keys
            .iter()
            .map(|(id, ts)| OccurrenceKey::new(*id, *ts))
            .collect(),
        protected_tool_call_ids: protected.iter().map(|s| (*s).to_owned()).collect(),
    }
}

struct Case {
    name: &'static str,
    messages: Vec<Message>,
    tools: &'static [&'static str],
    paths: &'static [&'static str],
    expected: Vec<ChainRange>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "empty input",
            messages: vec![],
            tools: &[],
            paths: &[],
            expected: vec![],
        },
        Case {
            name: "one closed chain: every middle id and result occurrence",
            messages: vec![
                user(100),
                calls(200, &["tc1", "tc2"]),
                result(300, "tc1"),
                result(310, "tc2"),
                text(400),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(
                At(100, 0, Some(4), 4, Some(400)),
                &["tc1", "tc2"],
                &[("tc1", Some(300)), ("tc2", Some(310))],
                &[],
            )],
        },
        Case {
            name: "several chains, in order",
            messages: vec![
                user(100),
                calls(200, &["tc1"]),
                result(300, "tc1"),
                text(400),
                user(500),
                calls(600, &["tc2"]),
                result(700, "tc2"),
                text(800),
            ],
            tools: &[],
            paths: &[],
            expected: vec![
                range(
                    At(100, 0, Some(3), 3, Some(400)),
                    &["tc1"],
                    &[("tc1", Some(300))],
                    &[],
                ),
                range(
                    At(500, 4, Some(7), 7, Some(800)),
                    &["tc2"],
                    &[("tc2", Some(700))],
                    &[],
                ),
            ],
        },
        Case {
            name: "an open chain at the end is dropped",
            messages: vec![user(100), calls(200, &["tc1"]), result(300, "tc1")],
            tools: &[],
            paths: &[],
            expected: vec![],
        },
        Case {
            name: "closed chain then open chain: only the closed one",
            messages: vec![
                user(100),
                calls(200, &["tc1"]),
                result(300, "tc1"),
                text(400),
                user(500),
                calls(600, &["tc2"]),
                result(700, "tc2"),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(
                At(100, 0, Some(3), 3, Some(400)),
                &["tc1"],
                &[("tc1", Some(300))],
                &[],
            )],
        },
        Case {
            name: "a synthetic chain message is not a chain start",
            messages: vec![synthetic(50), text(200)],
            tools: &[],
            paths: &[],
            expected: vec![],
        },
        Case {
            name: "synthetic before a real chain is a passthrough",
            messages: vec![
                synthetic(50),
                user(100),
                calls(200, &["tc1"]),
                result(300, "tc1"),
                text(400),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(
                At(100, 1, Some(4), 4, Some(400)),
                &["tc1"],
                &[("tc1", Some(300))],
                &[],
            )],
        },
        Case {
            name: "synthetic inside an open chain neither interrupts nor restarts it",
            messages: vec![
                user(100),
                calls(200, &["a"]),
                synthetic(250),
                result(300, "a"),
                text(400),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(
                At(100, 0, Some(4), 4, Some(400)),
                &["a"],
                &[("a", Some(300))],
                &[],
            )],
        },
        Case {
            name: "a user message interrupts: previous chain emitted with no final",
            messages: vec![
                user(100),
                calls(200, &["tc1"]),
                result(300, "tc1"),
                user(400),
                text(500),
            ],
            tools: &[],
            paths: &[],
            expected: vec![
                range(
                    At(100, 0, None, 2, None),
                    &["tc1"],
                    &[("tc1", Some(300))],
                    &[],
                ),
                range(At(400, 3, Some(4), 4, Some(500)), &[], &[], &[]),
            ],
        },
        Case {
            name: "two user messages in a row: the first is an empty interrupted chain",
            messages: vec![user(100), user(200), text(300)],
            tools: &[],
            paths: &[],
            expected: vec![
                range(At(100, 0, None, 0, None), &[], &[], &[]),
                range(At(200, 1, Some(2), 2, Some(300)), &[], &[], &[]),
            ],
        },
        Case {
            name: "other roles inside a chain are ignored",
            messages: vec![
                user(100),
                calls(200, &["tc1"]),
                custom(210),
                msg(
                    json!({"role": "bashExecution", "command": "ls", "output": "x", "timestamp": 220}),
                ),
                msg(
                    json!({"role": "custom", "customType": "context-prune-summary", "content": "s",
                    "display": false, "details": {"toolCallRefs": [{"shortId": "t1", "toolCallId": "zz"}]},
                    "timestamp": 230}),
                ),
                result(300, "tc1"),
                msg(json!({"role": "hologram", "timestamp": 310})),
                text(400),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(
                At(100, 0, Some(7), 7, Some(400)),
                &["tc1"],
                &[("tc1", Some(300))],
                &[],
            )],
        },
        Case {
            name: "messages before the first user message belong to no chain",
            messages: vec![
                calls(10, &["early"]),
                result(20, "early"),
                text(30),
                user(100),
                calls(200, &["tc1"]),
                result(300, "tc1"),
                text(400),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(
                At(100, 3, Some(6), 6, Some(400)),
                &["tc1"],
                &[("tc1", Some(300))],
                &[],
            )],
        },
        Case {
            name: "ids distinct in first-seen order; reused id gives a second occurrence",
            messages: vec![
                user(100),
                calls(200, &["tc2", "tc1"]),
                result(300, "tc1"),
                result(310, "tc2"),
                calls(400, &["tc1"]),
                result(500, "tc1"),
                text(600),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(
                At(100, 0, Some(6), 6, Some(600)),
                &["tc2", "tc1"],
                &[("tc1", Some(300)), ("tc2", Some(310)), ("tc1", Some(500))],
                &[],
            )],
        },
        Case {
            name: "a result with no matching call still contributes; no timestamp gives a bare key",
            messages: vec![
                user(100),
                result(150, "orphan"),
                calls(200, &["tc1"]),
                msg(
                    json!({"role": "toolResult", "toolCallId": "tc1", "toolName": "bash",
                    "content": [{"type": "text", "text": "x"}], "isError": false}),
                ),
                text(400),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(
                At(100, 0, Some(4), 4, Some(400)),
                &["orphan", "tc1"],
                &[("orphan", Some(150)), ("tc1", None)],
                &[],
            )],
        },
        Case {
            name: "a toolCall block without an id keeps the assistant a middle turn",
            messages: vec![
                user(100),
                assistant_blocks(
                    200,
                    vec![json!({"type": "toolCall", "name": "bash", "arguments": {}})],
                ),
                text(300),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(At(100, 0, Some(2), 2, Some(300)), &[], &[], &[])],
        },
        Case {
            name: "protected by tool name on the assistant block",
            messages: vec![
                user(100),
                assistant_blocks(
                    200,
                    vec![
                        call("tw1", "todowrite", json!({"todos": []})),
                        call("b1", "bash", json!({})),
                    ],
                ),
                result_named(300, "tw1", "todowrite"),
                result_named(310, "b1", "bash"),
                text(400),
            ],
            tools: &["todowrite"],
            paths: &[],
            expected: vec![range(
                At(100, 0, Some(4), 4, Some(400)),
                &["tw1", "b1"],
                &[("tw1", Some(300)), ("b1", Some(310))],
                &["tw1"],
            )],
        },
        Case {
            name: "protected by path glob through the call's arguments",
            messages: vec![
                user(100),
                assistant_blocks(
                    200,
                    vec![
                        call(
                            "r1",
                            "read",
                            json!({"path": "/home/u/.agents/skills/sdd/SKILL.md"}),
                        ),
                        call("r2", "read", json!({"path": "/home/u/src/main.rs"})),
                        call("r3", "read", json!({"path": 42})),
                    ],
                ),
                result_named(300, "r1", "read"),
                result_named(310, "r2", "read"),
                result_named(320, "r3", "read"),
                text(400),
            ],
            tools: &[],
            paths: &["**/skills/**/*.md"],
            expected: vec![range(
                At(100, 0, Some(5), 5, Some(400)),
                &["r1", "r2", "r3"],
                &[("r1", Some(300)), ("r2", Some(310)), ("r3", Some(320))],
                &["r1"],
            )],
        },
        Case {
            name: "protected ids follow block order, whichever rule protects them",
            messages: vec![
                user(100),
                assistant_blocks(
                    200,
                    vec![
                        call("p1", "read", json!({"path": "skills/a.md"})),
                        call("n1", "todowrite", json!({})),
                        call("u1", "bash", json!({})),
                    ],
                ),
                text(400),
            ],
            tools: &["todowrite"],
            paths: &["**/skills/**/*.md"],
            expected: vec![range(
                At(100, 0, Some(2), 2, Some(400)),
                &["p1", "n1", "u1"],
                &[],
                &["p1", "n1"],
            )],
        },
        Case {
            name: "arguments read as input ?? arguments (null input falls through)",
            messages: vec![
                user(100),
                assistant_blocks(
                    200,
                    vec![
                        json!({"type": "toolCall", "id": "i1", "name": "read",
                            "input": {"path": "skills/a.md"}, "arguments": {"path": "x.txt"}}),
                        json!({"type": "toolCall", "id": "i2", "name": "read",
                            "input": null, "arguments": {"path": "skills/b.md"}}),
                        json!({"type": "toolCall", "id": "i3", "name": "read",
                            "input": {"path": "x.txt"}, "arguments": {"path": "skills/c.md"}}),
                    ],
                ),
                result_named(300, "i1", "read"),
                result_named(310, "i2", "read"),
                result_named(320, "i3", "read"),
                text(400),
            ],
            tools: &[],
            paths: &["**/skills/**/*.md"],
            expected: vec![range(
                At(100, 0, Some(5), 5, Some(400)),
                &["i1", "i2", "i3"],
                &[("i1", Some(300)), ("i2", Some(310)), ("i3", Some(320))],
                &["i1", "i2"],
            )],
        },
        Case {
            name: "tool result fallback is by tool name only",
            messages: vec![
                user(100),
                // Results with no call in the chain (the call was cut off).
                result_named(150, "tw9", "todowrite"),
                result_named(160, "rd9", "read"),
                text(400),
            ],
            tools: &["todowrite"],
            paths: &["**"],
            expected: vec![range(
                At(100, 0, Some(3), 3, Some(400)),
                &["tw9", "rd9"],
                &[("tw9", Some(150)), ("rd9", Some(160))],
                &["tw9"],
            )],
        },
        Case {
            name: "an interrupted chain carries its protected ids too",
            messages: vec![
                user(100),
                assistant_blocks(200, vec![call("tw1", "todowrite", json!({}))]),
                result_named(300, "tw1", "todowrite"),
                user(400),
            ],
            tools: &["todowrite"],
            paths: &[],
            expected: vec![range(
                At(100, 0, None, 2, None),
                &["tw1"],
                &[("tw1", Some(300))],
                &["tw1"],
            )],
        },
        Case {
            name: "no protection configured: nothing protected",
            messages: vec![
                user(100),
                assistant_blocks(
                    200,
                    vec![call("r1", "read", json!({"path": "skills/a.md"}))],
                ),
                result_named(300, "r1", "read"),
                text(400),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(
                At(100, 0, Some(3), 3, Some(400)),
                &["r1"],
                &[("r1", Some(300))],
                &[],
            )],
        },
        Case {
            name: "a user message without a timestamp interrupts but starts no emitted chain",
            messages: vec![
                user(100),
                calls(200, &["a"]),
                result(300, "a"),
                user_no_ts(),
                calls(500, &["b"]),
                result(600, "b"),
                text(700),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(
                At(100, 0, None, 2, None),
                &["a"],
                &[("a", Some(300))],
                &[],
            )],
        },
        Case {
            name: "a closing assistant without a timestamp: closed, but no final timestamp",
            messages: vec![
                user(100),
                calls(200, &["a"]),
                result(300, "a"),
                text_no_ts(),
            ],
            tools: &[],
            paths: &[],
            expected: vec![range(
                At(100, 0, Some(3), 3, None),
                &["a"],
                &[("a", Some(300))],
                &[],
            )],
        },
    ]
}

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

/// A closed chain starting at `ts` whose middle is one result per id (the
/// result timestamp is `ts + 50`).
fn closed(ts: i64, ids: &[&str]) -> ChainRange {
    ChainRange {
        start_user_timestamp: ts,
        start_index: 0,
        end_index: Some(1),
        last_index: 1,
        final_assistant_timestamp: Some(ts + 100),
        middle_tool_call_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
        middle_occurrence_keys: ids
            .iter()
            .map(|id| OccurrenceKey::new(*id, Some(ts + 50)))
            .collect(),
        protected_tool_call_ids: vec![],
    }
}

fn tools(ts: i64) -> ChainRange {
    closed(ts, &[&format!("tc-{ts}")])
}

fn interrupted(ts: i64) -> ChainRange {
    ChainRange {
        end_index: None,
        final_assistant_timestamp: None,
        ..tools(ts)
    }
}

fn no_final_ts(ts: i64) -> ChainRange {
    ChainRange {
        final_assistant_timestamp: None,
        ..tools(ts)
    }
}

fn state_with_compressed(starts: &[i64]) -> State {
    let mut state = State::new();
    for (i, ts) in starts.iter().enumerate() {
        state.register_chain(ChainEntry {
            block_id: format!("b{}", i + 1),
            start_user_timestamp: *ts,
            dropped_tool_call_ids: vec![],
            final_assistant_timestamp: Some(ts + 100),
            tool_refs: vec![],
            compressed_at: 0,
            range_summary_text: None,
            body_source: None,
            protected_tool_call_ids: None,
            dropped_occurrence_keys: None,
            extra: Default::default(),
        });
    }
    state
}

struct Eligible {
    name: &'static str,
    chains: Vec<ChainRange>,
    window: u32,
    compressed: &'static [i64],
    grace: Vec<OccurrenceKey>,
    expected: &'static [i64],
}

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
