//! The `detect_chains` table: each case's branch and protected tools and
//! paths, and the chain ranges it must give, stated in full.

use condense_core::ChainRange;
use condense_core::Message;
use condense_core::OccurrenceKey;
use serde_json::json;

use crate::messages::{
    assistant_blocks, call, calls, custom, msg, result, result_named, synthetic, text, text_no_ts,
    user, user_no_ts,
};

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

pub struct Case {
    pub name: &'static str,
    pub messages: Vec<Message>,
    pub tools: &'static [&'static str],
    pub paths: &'static [&'static str],
    pub expected: Vec<ChainRange>,
}

pub fn cases() -> Vec<Case> {
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
