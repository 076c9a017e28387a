//! Context metrics per the single-chain observability spec (2026-08-12).
//!
//! Each case names, by hand, which messages (or thinking blocks) each metric
//! must count; the expected numbers are then the spec's convention applied
//! to those: chars = `JSON.stringify(x).length`, tokens = `round(chars / 4)`
//! (thinking: summed, then rounded; gap: rounded per result, then summed),
//! share = `round(100 × numerator / total)`.

use condense_core::Branch;
use condense_core::Config;
use condense_core::Message;
use condense_core::Protection;
use condense_core::{compute_context_metrics, ContextMetrics};
use condense_core::{Frontier, ToolCallRecord};
use serde_json::{json, Value};

// ---- builders -----------------------------------------------------------------------

fn msg(v: &Value) -> Message {
    Message::from_value(v).unwrap()
}

fn user(ts: i64) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": "do the thing"}], "timestamp": ts})
}

fn thinking(text: &str) -> Value {
    json!({"type": "thinking", "thinking": text, "thinkingSignature": "sig"})
}

fn calls(ts: i64, ids: &[&str]) -> Value {
    calls_with(
        ts,
        None,
        ids.iter().map(|id| call(id, "bash", json!({}))).collect(),
    )
}

fn calls_with(ts: i64, think: Option<Value>, blocks: Vec<Value>) -> Value {
    let mut content: Vec<Value> = think.into_iter().collect();
    content.push(json!({"type": "text", "text": "working..."}));
    content.extend(blocks);
    json!({"role": "assistant", "content": content, "timestamp": ts, "usage": {}, "stopReason": "toolUse"})
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"type": "toolCall", "id": id, "name": name, "arguments": args})
}

fn result(ts: i64, id: &str) -> Value {
    result_with(ts, id, "bash", "output")
}

fn result_with(ts: i64, id: &str, name: &str, text: &str) -> Value {
    json!({"role": "toolResult", "toolCallId": id, "toolName": name,
        "content": [{"type": "text", "text": text}], "isError": false, "timestamp": ts})
}

fn text(ts: i64) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": "done"}], "timestamp": ts,
        "usage": {}, "stopReason": "stop"})
}

fn text_thinking(ts: i64, think: &str) -> Value {
    json!({"role": "assistant", "content": [thinking(think), {"type": "text", "text": "done"}],
        "timestamp": ts, "usage": {}, "stopReason": "stop"})
}

fn frontier(id: &str, turn: i64) -> Frontier {
    serde_json::from_value(json!({
        "lastAttemptedToolCallId": id, "lastAttemptedToolName": "bash",
        "lastAttemptedTurnIndex": turn, "lastAttemptedTimestamp": 0,
        "attemptedBatchCount": 1, "attemptedToolCallCount": 1,
        "rawCharCount": 0, "summaryCharCount": 0, "outcome": "summarized"
    }))
    .unwrap()
}

fn state_with(summarized: &[(&str, i64)]) -> Branch {
    let mut state = Branch::new();
    for (id, ts) in summarized {
        let record: ToolCallRecord = serde_json::from_value(json!({
            "toolCallId": id, "toolName": "bash", "args": {}, "resultText": "x",
            "isError": false, "turnIndex": 0, "timestamp": ts, "resultTimestamp": ts
        }))
        .unwrap();
        state.add_record(record, false);
    }
    state
}

fn protection(tools: &[&str], paths: &[&str]) -> Protection {
    Protection::new(&Config {
        protected_tools: tools.iter().map(|s| (*s).to_owned()).collect(),
        protected_paths: paths.iter().map(|s| (*s).to_owned()).collect(),
        ..Config::default()
    })
}

// ---- the spec's arithmetic, stated independently --------------------------------------

/// `Math.round(n / 4)`.
fn round4(n: usize) -> u64 {
    (n as f64 / 4.0).round() as u64
}

/// `JSON.stringify(v).length` for ASCII content.
fn json_len(v: &Value) -> usize {
    let s = serde_json::to_string(v).unwrap();
    assert!(s.is_ascii(), "fixtures stay ASCII so bytes = UTF-16 units");
    s.len()
}

// ---- the table ----------------------------------------------------------------------

#[derive(Default)]
struct Case {
    name: &'static str,
    messages: Vec<Value>,
    frontier: Option<(&'static str, i64)>,
    summarized: &'static [(&'static str, i64)],
    tools: &'static [&'static str],
    paths: &'static [&'static str],
    /// The thinking blocks the open segment holds.
    thinking: Vec<Value>,
    /// Indices of the messages in the share's numerator (the largest chain
    /// or the open segment).
    share: Vec<usize>,
    /// Indices of the tool results in the frontier gap.
    gap: Vec<usize>,
}

fn cases() -> Vec<Case> {
    let open_block = thinking("open thought that survives");
    let only_block = thinking("the only thought");
    vec![
        Case {
            name: "open segment thinking: only after the last text-only assistant",
            messages: vec![
                user(100),
                text_thinking(200, "excluded thought A"),
                user(300),
                calls(400, &["tc1"]),
                result(500, "tc1"),
                text_thinking(600, "excluded thought B"),
                user(700),
                calls_with(
                    800,
                    Some(open_block.clone()),
                    vec![call("tc2", "bash", json!({}))],
                ),
                result(900, "tc2"),
            ],
            thinking: vec![open_block],
            // Chains: [0..1] closed, [2..5] closed (largest), open [6..8].
            share: vec![2, 3, 4, 5],
            gap: vec![4, 8],
            ..Case::default()
        },
        Case {
            name: "no text-only assistant: the whole branch is the open segment",
            messages: vec![
                user(100),
                calls_with(
                    200,
                    Some(only_block.clone()),
                    vec![call("tc1", "bash", json!({}))],
                ),
                result(300, "tc1"),
            ],
            thinking: vec![only_block],
            share: vec![0, 1, 2],
            gap: vec![2],
            ..Case::default()
        },
        Case {
            name: "thinking of several open assistants is summed, then rounded",
            messages: vec![
                user(100),
                calls_with(
                    200,
                    Some(thinking("ab")),
                    vec![call("a", "bash", json!({}))],
                ),
                result(300, "a"),
                calls_with(
                    400,
                    Some(thinking("cd")),
                    vec![call("b", "bash", json!({}))],
                ),
                result(500, "b"),
            ],
            thinking: vec![thinking("ab"), thinking("cd")],
            share: vec![0, 1, 2, 3, 4],
            gap: vec![2, 4],
            ..Case::default()
        },
        Case {
            name: "no thinking anywhere",
            messages: vec![user(100), calls(200, &["tc1"]), result(300, "tc1")],
            share: vec![0, 1, 2],
            gap: vec![2],
            ..Case::default()
        },
        Case {
            name: "closed chain larger than the open segment",
            messages: vec![
                user(100),
                calls(200, &["tc1"]),
                result_with(300, "tc1", "bash", &"x".repeat(2000)),
                text(400),
                user(500),
                text(600),
            ],
            // The last message is text-only: the open segment is empty.
            share: vec![0, 1, 2, 3],
            gap: vec![2],
            ..Case::default()
        },
        Case {
            name: "open segment larger than any closed chain",
            messages: vec![
                user(100),
                calls(200, &["tc1"]),
                result(300, "tc1"),
                text(400),
                user(500),
                calls(600, &["tc2"]),
                result_with(700, "tc2", "bash", &"y".repeat(3000)),
            ],
            share: vec![4, 5, 6],
            gap: vec![2, 6],
            ..Case::default()
        },
        Case {
            name: "max, not sum: two similar chains",
            messages: vec![
                user(100),
                calls(200, &["a"]),
                result_with(300, "a", "bash", &"a".repeat(900)),
                text(400),
                user(500),
                calls(600, &["b"]),
                result_with(700, "b", "bash", &"b".repeat(1000)),
                text(800),
            ],
            share: vec![4, 5, 6, 7],
            gap: vec![2, 6],
            ..Case::default()
        },
        Case {
            name: "a summary message outside every chain counts in the denominator only",
            messages: vec![
                user(100),
                calls(200, &["tc1"]),
                result_with(300, "tc1", "bash", &"x".repeat(2000)),
                text(400),
                json!({"role": "custom", "customType": "context-prune-summary",
                    "content": "s".repeat(3000), "display": true, "timestamp": 450}),
                text(500),
            ],
            share: vec![0, 1, 2, 3],
            gap: vec![2],
            ..Case::default()
        },
        Case {
            name: "an interrupted chain counts, through the message before the interrupting user",
            messages: vec![
                user(100),
                calls(200, &["tc1"]),
                result_with(300, "tc1", "bash", &"z".repeat(5000)),
                user(400),
                text(500),
            ],
            share: vec![0, 1, 2],
            gap: vec![2],
            ..Case::default()
        },
        Case {
            name: "user messages inside the open segment count toward it",
            messages: vec![
                user(100),
                calls(200, &["a"]),
                result(300, "a"),
                text(400),
                user(500),
                calls(600, &["b"]),
                result_with(700, "b", "bash", &"q".repeat(400)),
                user(800),
                calls(900, &["c"]),
                result_with(1000, "c", "bash", &"q".repeat(400)),
            ],
            // Open segment [4..9] beats the interrupted chain [4..6] and the
            // closed one [0..3].
            share: vec![4, 5, 6, 7, 8, 9],
            gap: vec![2, 6, 9],
            ..Case::default()
        },
        Case {
            name: "a chain whose start has no timestamp is still measured",
            messages: vec![
                json!({"role": "user", "content": [{"type": "text", "text": "no clock"}]}),
                calls(200, &["a"]),
                result_with(300, "a", "bash", &"w".repeat(2000)),
                text(400),
                user(500),
                text(600),
            ],
            share: vec![0, 1, 2, 3],
            gap: vec![2],
            ..Case::default()
        },
        Case {
            name: "gap: no frontier counts every result",
            messages: vec![
                user(100),
                calls(200, &["tc1", "tc2"]),
                result(300, "tc1"),
                result(310, "tc2"),
            ],
            share: vec![0, 1, 2, 3],
            gap: vec![2, 3],
            ..Case::default()
        },
        Case {
            name: "gap: boundary mid-turn excludes calls up to the frontier's, counts later ones",
            messages: vec![
                user(100),
                calls(200, &["tc1", "tc2", "tc3"]),
                result(300, "tc1"),
                result(310, "tc2"),
                result(320, "tc3"),
            ],
            frontier: Some(("tc2", 0)),
            share: vec![0, 1, 2, 3, 4],
            gap: vec![4],
            ..Case::default()
        },
        Case {
            name: "gap: id not in the matched turn counts the whole branch",
            messages: vec![
                user(100),
                calls(200, &["tc1", "tc2"]),
                result(300, "tc1"),
                result(310, "tc2"),
            ],
            frontier: Some(("tc-does-not-exist", 0)),
            share: vec![0, 1, 2, 3],
            gap: vec![2, 3],
            ..Case::default()
        },
        Case {
            name: "gap: turn index not on the branch counts the whole branch",
            messages: vec![user(100), calls(200, &["tc1"]), result(300, "tc1")],
            frontier: Some(("tc1", 99)),
            share: vec![0, 1, 2],
            gap: vec![2],
            ..Case::default()
        },
        Case {
            name: "gap: the turn counter starts at 0 and counts text-only assistants",
            messages: vec![
                user(100),
                text(150),
                user(200),
                calls(300, &["c1"]),
                result(400, "c1"),
                calls(500, &["c2"]),
                result(600, "c2"),
            ],
            frontier: Some(("c1", 1)),
            share: vec![2, 3, 4, 5, 6],
            gap: vec![6],
            ..Case::default()
        },
        Case {
            name: "gap: the first assistant with the turn index decides (no later search)",
            messages: vec![
                user(100),
                text(150),
                user(200),
                calls(300, &["c1"]),
                result(400, "c1"),
                calls(500, &["c2"]),
                result(600, "c2"),
            ],
            // Turn 2 is the `c2` assistant, which has no `c1`: whole branch.
            frontier: Some(("c1", 2)),
            share: vec![2, 3, 4, 5, 6],
            gap: vec![4, 6],
            ..Case::default()
        },
        Case {
            name: "gap: results before the boundary turn are outside the window",
            messages: vec![
                user(100),
                calls(200, &["old"]),
                result(300, "old"),
                calls(400, &["b1"]),
                result(500, "b1"),
                calls(600, &["new"]),
                result(700, "new"),
            ],
            frontier: Some(("b1", 1)),
            share: vec![0, 1, 2, 3, 4, 5, 6],
            gap: vec![6],
            ..Case::default()
        },
        Case {
            name: "gap: an id reused in a later turn counts (exclusion is positional)",
            messages: vec![
                user(100),
                calls(200, &["tc1"]),
                result(300, "tc1"),
                text(400),
                user(500),
                calls(600, &["tc1"]),
                result_with(700, "tc1", "bash", &"y".repeat(196)),
            ],
            frontier: Some(("tc1", 0)),
            // The open segment holds the 196-char result: it is the larger.
            share: vec![4, 5, 6],
            gap: vec![6],
            ..Case::default()
        },
        Case {
            name: "gap: a summarized occurrence is excluded, another occurrence of the id is not",
            messages: vec![
                user(100),
                calls(200, &["tc1"]),
                result(300, "tc1"),
                calls(400, &["tc1"]),
                result(500, "tc1"),
            ],
            summarized: &[("tc1", 300)],
            share: vec![0, 1, 2, 3, 4],
            gap: vec![4],
            ..Case::default()
        },
        Case {
            name: "gap: protected by tool name",
            messages: vec![
                user(100),
                calls_with(
                    200,
                    None,
                    vec![
                        call("tw", "todowrite", json!({})),
                        call("b", "bash", json!({})),
                    ],
                ),
                result_with(300, "tw", "todowrite", "plan"),
                result(310, "b"),
            ],
            tools: &["todowrite"],
            share: vec![0, 1, 2, 3],
            gap: vec![3],
            ..Case::default()
        },
        Case {
            name: "gap: protected by path glob, args from the pairing call",
            messages: vec![
                user(100),
                calls_with(
                    200,
                    None,
                    vec![
                        call(
                            "s",
                            "read",
                            json!({"path": "/home/u/.agents/skills/x/SKILL.md"}),
                        ),
                        call("n", "read", json!({"path": "/home/u/src/lib.rs"})),
                    ],
                ),
                result_with(300, "s", "read", "skill body"),
                result_with(310, "n", "read", "code"),
            ],
            paths: &["**/skills/**/*.md"],
            share: vec![0, 1, 2, 3],
            gap: vec![3],
            ..Case::default()
        },
        Case {
            name: "gap: args read as input ?? arguments",
            messages: vec![
                user(100),
                calls_with(
                    200,
                    None,
                    vec![
                        json!({"type": "toolCall", "id": "i", "name": "read",
                            "input": {"path": "skills/a.md"}, "arguments": {"path": "plain.txt"}}),
                        json!({"type": "toolCall", "id": "j", "name": "read",
                            "input": {"path": "plain.txt"}, "arguments": {"path": "skills/a.md"}}),
                    ],
                ),
                result_with(300, "i", "read", "x"),
                result_with(310, "j", "read", "y"),
            ],
            paths: &["**/skills/**/*.md"],
            share: vec![0, 1, 2, 3],
            gap: vec![3],
            ..Case::default()
        },
        Case {
            name: "gap: a reused id pairs with the nearest preceding assistant's call",
            messages: vec![
                user(100),
                calls_with(
                    200,
                    None,
                    vec![call("tc1", "read", json!({"path": "/normal.md"}))],
                ),
                result_with(300, "tc1", "read", "output"),
                text(400),
                user(500),
                calls_with(
                    600,
                    None,
                    vec![call("tc1", "read", json!({"path": "/skills/secret.md"}))],
                ),
                result_with(700, "tc1", "read", "output"),
            ],
            paths: &["**/skills/**/*.md"],
            // The closed chain has the extra text-only assistant: it is the larger.
            share: vec![0, 1, 2, 3],
            gap: vec![2],
            ..Case::default()
        },
    ]
}

#[test]
fn metrics_table() {
    for case in cases() {
        let messages: Vec<Message> = case.messages.iter().map(msg).collect();
        let sizes: Vec<usize> = case.messages.iter().map(json_len).collect();
        let total: usize = sizes.iter().sum();
        let thinking_chars: usize = case.thinking.iter().map(json_len).sum();
        let numerator: usize = case.share.iter().map(|&i| sizes[i]).sum();
        let expected = ContextMetrics {
            open_cycle_thinking_tokens: round4(thinking_chars),
            largest_chain_share_pct: (100.0 * numerator as f64 / total as f64).round() as u64,
            frontier_gap_tokens: case.gap.iter().map(|&i| round4(sizes[i])).sum(),
        };
        let frontier = case.frontier.map(|(id, turn)| frontier(id, turn));
        let got = compute_context_metrics(
            &messages,
            0,
            frontier.as_ref(),
            &state_with(case.summarized),
            &protection(case.tools, case.paths),
        );
        assert_eq!(got, expected, "{}", case.name);
    }
}

#[test]
fn empty_branch_is_all_zeros() {
    let got = compute_context_metrics(
        &[],
        0,
        Some(&frontier("x", 0)),
        &Branch::new(),
        &Protection::default(),
    );
    assert_eq!(got, ContextMetrics::default());
}

/// Literal numbers, worked out by hand from the JSON texts.
#[test]
fn exact_values() {
    // {"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":""}],"isError":false,"timestamp":300}
    // is 127 chars with an empty text; 10 chars of text make 137 → round(34.25) = 34.
    let r = msg(&result_with(300, "c1", "bash", "0123456789"));
    assert_eq!(r.size(), 137);
    // {"type":"thinking","thinking":"","thinkingSignature":"sig"} is 59 chars;
    // with "abc" it is 62. Two such blocks: 124 chars → 31 tokens when summed
    // first, but 16 + 16 = 32 if each block were rounded on its own.
    assert_eq!(serde_json::to_string(&thinking("abc")).unwrap().len(), 62);
    let messages = vec![
        msg(&user(100)),
        msg(&calls_with(
            200,
            Some(thinking("abc")),
            vec![call("c1", "bash", json!({}))],
        )),
        r,
        msg(&calls_with(
            400,
            Some(thinking("abc")),
            vec![call("c2", "bash", json!({}))],
        )),
    ];
    let got = compute_context_metrics(&messages, 0, None, &Branch::new(), &Protection::default());
    assert_eq!(got.open_cycle_thinking_tokens, 31, "summed, then rounded");
    assert_eq!(got.frontier_gap_tokens, 34);
    assert_eq!(got.largest_chain_share_pct, 100);
}

#[test]
fn serializes_with_wire_names() {
    let m = ContextMetrics {
        open_cycle_thinking_tokens: 1,
        largest_chain_share_pct: 2,
        frontier_gap_tokens: 3,
    };
    assert_eq!(
        serde_json::to_string(&m).unwrap(),
        r#"{"openCycleThinkingTokens":1,"largestChainSharePct":2,"frontierGapTokens":3}"#
    );
}
