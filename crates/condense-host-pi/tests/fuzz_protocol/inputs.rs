//! What the fuzzed sidecars are fed: the real session fixture, arbitrary
//! JSON, requests shaped like each method's with arbitrary parts, and
//! arbitrary lines; and which of those lines ask for an answer.

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::{json, Map, Value};

pub fn fixture_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../condense-store/tests/fixtures/pi-condense-2.9.1.jsonl");
        std::fs::read_to_string(p).expect("fixture")
    })
}

/// The fixture's entries (the `branch` of a `session.start`).
pub fn fixture_branch() -> &'static [Value] {
    static BRANCH: OnceLock<Vec<Value>> = OnceLock::new();
    BRANCH.get_or_init(|| {
        fixture_text()
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).expect("entry"))
            .collect()
    })
}

/// The fixture's messages (for `context`, `turn.end`, `message.end`).
pub fn fixture_messages() -> &'static [Value] {
    static MESSAGES: OnceLock<Vec<Value>> = OnceLock::new();
    MESSAGES.get_or_init(|| {
        fixture_branch()
            .iter()
            .filter_map(|e| e.get("message").cloned())
            .collect()
    })
}

pub const METHODS: &[&str] = &[
    "hello",
    "session.start",
    "context",
    "turn.end",
    "message.end",
    "agent.start",
    "agent.end",
    "query",
    "command",
    "llm.event",
    "llm.cancel",
    "protocol.error",
    "",
    "nope",
];

pub const COMMANDS: &[&str] = &[
    "", "help", "now", "on", "off", "status", "stats", "compact", "tree", "now now", "on extra",
    "\u{0}", "é",
];

pub fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        prop::sample::select(&["s1", "s2", "t1", "text", "thinking", "usage", "toolCall"][..])
            .prop_map(Value::from),
    ]
}

pub fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        prop::sample::select(
            &[
                "id",
                "method",
                "params",
                "result",
                "error",
                "protocol",
                "keep",
                "append",
                "message",
                "toolResults",
                "usage",
                "tokens",
                "contextWindow",
                "turnIndex",
                "now",
                "toolCallIds",
                "args",
                "settings",
                "branch",
                "sessionId",
                "sessionDir",
                "tree",
                "requestId",
                "kind",
                "delta",
                "role",
                "content",
                "contextPrune",
                "enabled",
            ][..]
        )
        .prop_map(str::to_owned),
        "[a-z]{0,6}",
    ];
    leaf().prop_recursive(3, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

pub fn request_id() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        (0u64..50).prop_map(|n| Some(json!(n))),
        "[a-z0-9]{0,4}".prop_map(|s| Some(json!(s))),
        Just(Some(Value::Null)),
        Just(Some(json!({"nested": 1}))),
        Just(Some(json!(-1.5))),
        Just(None),
    ]
}

/// Params that look like what the method expects, with arbitrary parts.
pub fn shaped_params(method: &'static str) -> BoxedStrategy<Value> {
    let messages = fixture_messages().len();
    match method {
        "hello" => prop_oneof![Just(json!({"protocol": 1})), json_value()].boxed(),
        "session.start" => (
            0..fixture_branch().len() + 1,
            json_value(),
            any::<bool>(),
            prop::option::of(json_value()),
        )
            .prop_map(|(n, settings, tree, extra)| {
                let mut branch: Vec<Value> = fixture_branch()[..n].to_vec();
                if let Some(e) = extra {
                    branch.push(e);
                }
                json!({"reason": "startup", "settings": {"contextPrune": settings},
                       "sessionId": "fuzz", "branch": branch, "tree": tree, "messages": null})
            })
            .boxed(),
        "context" => (any::<u64>(), 0..messages, 0..messages, json_value())
            .prop_map(move |(keep, a, b, extra)| {
                let (a, b) = (a.min(b), a.max(b));
                let mut append: Vec<Value> = fixture_messages()[a..b].to_vec();
                append.push(extra);
                json!({"keep": keep % (messages as u64 + 3), "append": append})
            })
            .boxed(),
        "turn.end" | "message.end" => (0..messages, 0..messages, json_value(), any::<i64>())
            .prop_map(|(a, b, usage, now)| {
                let (a, b) = (a.min(b), a.max(b));
                json!({"turnIndex": a, "message": fixture_messages()[a],
                       "toolResults": fixture_messages()[a..b], "usage": usage, "now": now})
            })
            .boxed(),
        "query" => prop::collection::vec(
            prop_oneof![
                prop::sample::select(&["t1", "t2", "t3", "b1", "toolu_x", ""][..])
                    .prop_map(Value::from),
                json_value()
            ],
            0..4,
        )
        .prop_map(|ids| json!({"toolCallIds": ids}))
        .boxed(),
        "command" => prop::sample::select(COMMANDS)
            .prop_map(|a| json!({"args": a, "utcOffsetMinutes": 60}))
            .boxed(),
        "llm.event" => (json_value(), json_value())
            .prop_map(|(rid, delta)| json!({"requestId": rid, "kind": "text", "delta": delta}))
            .boxed(),
        _ => json_value().boxed(),
    }
}

/// A request of a known (or unknown) method with shaped params.
pub fn shaped() -> impl Strategy<Value = Vec<u8>> {
    (prop::sample::select(METHODS), request_id()).prop_flat_map(|(method, id)| {
        shaped_params(method).prop_map(move |params| {
            let mut m = Map::new();
            if let Some(id) = &id {
                m.insert("id".into(), id.clone());
            }
            m.insert("method".into(), json!(method));
            m.insert("params".into(), params);
            Value::Object(m).to_string().into_bytes()
        })
    })
}

/// One input line.
pub fn line() -> impl Strategy<Value = Vec<u8>> {
    let response = (request_id(), json_value()).prop_map(|(id, result)| {
        json!({"id": id.unwrap_or(json!("s1")), "result": result})
            .to_string()
            .into_bytes()
    });
    let mutated = (shaped(), any::<usize>(), any::<u8>(), any::<bool>()).prop_map(
        |(mut bytes, at, b, truncate)| {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                if truncate {
                    bytes.truncate(i);
                } else {
                    bytes[i] = b;
                }
            }
            bytes
        },
    );
    prop_oneof![
        4 => shaped(),
        1 => response,
        2 => mutated,
        1 => json_value().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..120),
        1 => Just(Vec::new()),
    ]
    .prop_map(|mut bytes| {
        bytes.retain(|b| *b != b'\n');
        bytes
    })
    .prop_filter("no shutdown request", |bytes| {
        parse(bytes).is_none_or(|v| v.get("method") != Some(&json!("shutdown")))
    })
}

pub fn parse(bytes: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(bytes);
    if text.trim().is_empty() {
        return None;
    }
    serde_json::from_str(&text).ok()
}

/// The id of the answer a line asks for, as the sidecar reads lines.
pub fn expected_answer(bytes: &[u8]) -> Option<Value> {
    let v = parse(bytes)?;
    let id = v.get("id")?.clone();
    v.get("method")?.as_str()?;
    Some(id)
}
