//! Messages of pi 0.73 and 1.6 shapes read and write back byte for byte,
//! unknown roles, block types and fields included, and their skeletons say
//! what the pipeline needs.

use condense_core::{Message, Role, ToolCallBlock};

/// One message per shape; each line is exactly what pi writes.
const SHAPES: &[(&str, &str)] = &[
    (
        "0.73 user with image",
        r###"{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"timestamp":1795969940764}"###,
    ),
    (
        "0.73 user string content",
        r###"{"role":"user","content":"plain prompt","timestamp":1795969940765}"###,
    ),
    (
        "0.73 assistant with signed and redacted thinking",
        r###"{"role":"assistant","content":[{"type":"thinking","thinking":"plan","thinkingSignature":"sig=="},{"type":"thinking","thinking":"","thinkingSignature":"opaque","redacted":true},{"type":"text","text":"ok","textSignature":"ts"},{"type":"toolCall","id":"toolu_01","name":"read","arguments":{"path":"a.rs"},"thoughtSignature":"x"}],"api":"anthropic-messages","provider":"anthropic","model":"claude","usage":{"input":10,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":12,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":1795969940832,"responseModel":"claude-x","responseId":"msg_1","diagnostics":[]}"###,
    ),
    (
        "0.73 tool result with details",
        r###"{"role":"toolResult","toolCallId":"toolu_01","toolName":"read","content":[{"type":"text","text":"fn main() {}"}],"details":{"truncation":null},"isError":false,"timestamp":1795969940838}"###,
    ),
    (
        "0.73 bash execution",
        r###"{"role":"bashExecution","command":"ls","output":"a\nb","exitCode":0,"cancelled":false,"truncated":false,"timestamp":1795969940900}"###,
    ),
    (
        "0.73 custom message",
        r###"{"role":"custom","customType":"notice","content":[{"type":"text","text":"hi"}],"display":true,"details":{"k":1},"timestamp":1795969940901}"###,
    ),
    (
        "0.73 compaction summary",
        r###"{"role":"compactionSummary","summary":"## Goal\n…","tokensBefore":123456,"timestamp":1795969940902}"###,
    ),
    (
        "0.73 branch summary",
        r###"{"role":"branchSummary","summary":"left branch","fromId":"ab12cd34","timestamp":1795969940903}"###,
    ),
    (
        "1.6 assistant with new usage and stop reason",
        r###"{"role":"assistant","content":[{"type":"toolCall","id":"c9","name":"bash","arguments":{"command":"make"},"argumentsError":null,"namespace":"builtin"}],"api":"openai-completions","provider":"fake","model":"fake-1","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"cacheWrite1h":0,"reasoning":5,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0,"totalFromProvider":0.001}},"stopReason":"deferred","timestamp":1795969941000}"###,
    ),
    (
        "1.6 tool result with usage and nested calls",
        r###"{"role":"toolResult","toolCallId":"c9","toolName":"bash","content":[{"type":"text","text":"done"}],"isError":true,"timestamp":1795969941001,"usage":{"input":3},"nestedCalls":[{"id":"n1"}],"durationMs":42}"###,
    ),
    (
        "1.6 system message",
        r###"{"role":"system","content":"You are pi.","timestamp":1795969941002}"###,
    ),
    (
        "unknown role and block type",
        r###"{"role":"hologram","content":[{"type":"sparkle","x":[1,{"y":null}]}],"timestamp":1795969941003,"future":true}"###,
    ),
    (
        "non-ASCII and escapes",
        r###"{"role":"user","content":[{"type":"text","text":"żółw \"q\" \\ \n\t😀"}],"timestamp":1795969941004}"###,
    ),
];

#[test]
fn every_shape_round_trips_byte_for_byte() {
    for (name, text) in SHAPES {
        let m = Message::from_json(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(m.json(), *text, "{name}: text kept as given");
        let value = m.to_value().unwrap();
        assert_eq!(
            &serde_json::to_string(&value).unwrap(),
            text,
            "{name}: value re-serializes identically"
        );
        let rebuilt = Message::from_value(&value).unwrap();
        assert_eq!(rebuilt.json(), *text, "{name}: from_value keeps key order");
    }
}

#[test]
fn sizes_count_utf16_units_of_the_json() {
    let (_, text) = SHAPES.last().unwrap();
    let m = Message::from_json(text).unwrap();
    assert_eq!(m.size(), text.encode_utf16().count());
}

#[test]
fn skeletons_of_the_shapes() {
    let get = |n: &str| {
        let (_, t) = SHAPES.iter().find(|(name, _)| *name == n).unwrap();
        Message::from_json(t).unwrap()
    };
    let a = get("0.73 assistant with signed and redacted thinking");
    assert_eq!(a.role(), Some(&Role::Assistant));
    assert_eq!(a.skeleton().thinking_blocks, 2);
    assert_eq!(
        a.skeleton().tool_calls,
        vec![ToolCallBlock {
            id: "toolu_01".into(),
            name: "read".into()
        }]
    );
    assert!(!a.is_text_only_assistant());

    let r = get("1.6 tool result with usage and nested calls");
    assert!(r.skeleton().is_error);
    assert_eq!(r.skeleton().tool_call_id.as_deref(), Some("c9"));

    assert_eq!(
        get("1.6 system message").role(),
        Some(&Role::Other("system".into()))
    );
    assert_eq!(
        get("0.73 bash execution").role(),
        Some(&Role::BashExecution)
    );
    assert_eq!(
        get("0.73 compaction summary").role(),
        Some(&Role::CompactionSummary)
    );
    assert_eq!(
        get("0.73 branch summary").role(),
        Some(&Role::BranchSummary)
    );
    assert_eq!(
        get("0.73 user string content").timestamp(),
        Some(1795969940765)
    );
}
