//! Message builders: pi messages in their JSON shapes, one per role and
//! variant the cases need.

use condense_core::Config;
use condense_core::Message;
use condense_core::Protection;
use serde_json::{json, Value};

pub fn msg(v: Value) -> Message {
    Message::from_value(&v).unwrap()
}

pub fn user(ts: i64) -> Message {
    msg(
        json!({"role": "user", "content": [{"type": "text", "text": "do the thing"}], "timestamp": ts}),
    )
}

pub fn user_no_ts() -> Message {
    msg(json!({"role": "user", "content": [{"type": "text", "text": "no clock"}]}))
}

pub fn synthetic(ts: i64) -> Message {
    msg(json!({"role": "user", "content": [{"type": "text",
        "text": "<compressed-chain id=\"b1\" tools=\"t1\">\nsummary\n</compressed-chain>"}], "timestamp": ts}))
}

/// An assistant calling `bash` with empty arguments for each id.
pub fn calls(ts: i64, ids: &[&str]) -> Message {
    let blocks: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type": "toolCall", "id": id, "name": "bash", "arguments": {}}))
        .collect();
    assistant_blocks(ts, blocks)
}

pub fn assistant_blocks(ts: i64, blocks: Vec<Value>) -> Message {
    let mut content = vec![json!({"type": "text", "text": "working..."})];
    content.extend(blocks);
    msg(json!({"role": "assistant", "content": content, "timestamp": ts, "stopReason": "toolUse"}))
}

pub fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"type": "toolCall", "id": id, "name": name, "arguments": args})
}

pub fn result(ts: i64, id: &str) -> Message {
    result_named(ts, id, "bash")
}

pub fn result_named(ts: i64, id: &str, name: &str) -> Message {
    msg(
        json!({"role": "toolResult", "toolCallId": id, "toolName": name,
        "content": [{"type": "text", "text": "output"}], "isError": false, "timestamp": ts}),
    )
}

pub fn text(ts: i64) -> Message {
    msg(
        json!({"role": "assistant", "content": [{"type": "text", "text": "done"},
        {"type": "thinking", "thinking": "thoughts", "thinkingSignature": "sig"}],
        "timestamp": ts, "stopReason": "stop"}),
    )
}

pub fn text_no_ts() -> Message {
    msg(
        json!({"role": "assistant", "content": [{"type": "text", "text": "done"}], "stopReason": "stop"}),
    )
}

pub fn custom(ts: i64) -> Message {
    msg(
        json!({"role": "custom", "customType": "other-ext", "content": "note", "display": true, "timestamp": ts}),
    )
}

pub fn protection(tools: &[&str], paths: &[&str]) -> Protection {
    let config = Config {
        protected_tools: tools.iter().map(|s| (*s).to_owned()).collect(),
        protected_paths: paths.iter().map(|s| (*s).to_owned()).collect(),
        ..Config::default()
    };
    Protection::new(&config)
}
