//! Stubs are cached per occurrence between renders; the cache must never
//! show a stale stub after the state or the protection rules change.

use condense_core::Branch;
use condense_core::Config;
use condense_core::Message;
use condense_core::OccurrenceKey;
use condense_core::Protection;
use condense_core::{render, RenderSettings};
use condense_core::{SummaryRef, ToolCallRecord};
use serde_json::{json, Value};

mod support;

fn branch() -> Vec<Message> {
    [
        json!({"role":"user","content":"go","timestamp":1}),
        json!({"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"src/a.rs"}}],"timestamp":2}),
        json!({"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"AAAA"}],"isError":false,"timestamp":3}),
    ]
    .iter()
    .map(|v| Message::from_value(v).unwrap())
    .collect()
}

/// A user prompt, one read and the reply: a chain from timestamp 1 to 4.
fn finished_chain() -> Vec<Message> {
    [
        json!({"role":"user","content":"go","timestamp":1}),
        json!({"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{}}],"timestamp":2}),
        json!({"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"x"}],"isError":false,"timestamp":3}),
        json!({"role":"assistant","content":[{"type":"text","text":"done"}],"timestamp":4}),
    ]
    .iter()
    .map(|v| Message::from_value(v).unwrap())
    .collect()
}

/// The rendered messages' JSON, checked equal to a render from a cold copy
/// of the state.
fn warm_render_text(messages: &[Message], state: &Branch, settings: &RenderSettings<'_>) -> String {
    let r = render(messages, state, settings);
    assert_eq!(r, render(messages, &state.clone(), settings), "warm = cold");
    r.messages(messages)
        .iter()
        .map(|m| m.json().to_string())
        .collect::<String>()
}

fn record() -> ToolCallRecord {
    serde_json::from_value(json!({
        "toolCallId":"c1","toolName":"read","args":{"path":"src/a.rs"},"resultText":"AAAA",
        "isError":false,"turnIndex":0,"timestamp":2,"resultTimestamp":3
    }))
    .unwrap()
}

fn result_text(state: &Branch, config: &Config) -> String {
    let messages = branch();
    let protection = Protection::new(config);
    let r = render(
        &messages,
        state,
        &RenderSettings {
            config,
            protection: &protection,
        },
    );
    let out = r.messages(&messages);
    let v: Value = out[2].to_value().unwrap();
    v["content"][0]["text"].as_str().unwrap().to_owned()
}

#[test]
fn a_later_short_ref_replaces_the_cached_stub() {
    let config = Config::default();
    let mut state = Branch::new();
    state.add_record(record(), true);
    let first = result_text(&state, &config);
    assert!(first.contains("ref `c1`"), "{first}");
    assert_eq!(
        result_text(&state, &config),
        first,
        "repeat render identical"
    );
    state.register_summary_refs(&[SummaryRef {
        short_id: "t7".into(),
        tool_call_id: "c1".into(),
        result_timestamp: Some(3),
    }]);
    assert!(result_text(&state, &config).contains("ref `t7`"));
}

#[test]
fn changed_protection_rules_are_honoured_after_a_cached_render() {
    let mut config = Config::default();
    let mut state = Branch::new();
    state.add_record(record(), true);
    assert!(result_text(&state, &config).starts_with("[Summarized"));
    config.protected_paths = vec!["src/**".into()];
    assert_eq!(
        result_text(&state, &config),
        "AAAA",
        "now protected: verbatim"
    );
    config.protected_paths = vec![];
    assert!(result_text(&state, &config).starts_with("[Summarized"));
}

#[test]
fn a_record_turned_spilled_changes_the_stub() {
    let config = Config::default();
    let mut state = Branch::new();
    state.add_record(record(), true);
    assert!(result_text(&state, &config).starts_with("[Summarized"));
    let mut spilled = record();
    spilled.spill_path = Some("/s/c1.txt".into());
    spilled.spill_bytes = Some(4);
    state.add_record(spilled, true);
    assert!(
        result_text(&state, &config).starts_with("[Oversized output spilled to file — 4 bytes.]")
    );
    // An alias registered later still resolves through the new record.
    state.register_dedup_alias(&OccurrenceKey::parse("c9@8"), &OccurrenceKey::parse("c1@3"));
    assert!(state.is_summarized("c9", Some(8)));
}

#[test]
fn a_replaced_chain_entry_replaces_the_memoized_synthetic() {
    let config = Config::default();
    let protection = Protection::new(&config);
    let messages: Vec<Message> = [
        json!({"role":"user","content":"go","timestamp":1}),
        json!({"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"toolCall","id":"c1","name":"read","arguments":{}}],"timestamp":2}),
        json!({"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"x"}],"isError":false,"timestamp":3}),
        json!({"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"done"}],"timestamp":4}),
    ]
    .iter()
    .map(|v| Message::from_value(v).unwrap())
    .collect();
    let chain = |text: &str| -> condense_core::ChainEntry {
        serde_json::from_value(
            json!({"blockId":"b1","startUserTimestamp":1,"droppedToolCallIds":["c1"],
            "finalAssistantTimestamp":4,"toolRefs":[],"compressedAt":9,"rangeSummaryText":text}),
        )
        .unwrap()
    };
    let synthetic = |state: &Branch| -> Value {
        let r = render(
            &messages,
            state,
            &RenderSettings {
                config: &config,
                protection: &protection,
            },
        );
        let out = r.messages(&messages);
        assert_eq!(out.len(), 3, "start, synthetic, final assistant");
        assert_eq!(
            out[2].skeleton().thinking_blocks,
            0,
            "final thinking stripped"
        );
        out[1].to_value().unwrap()["content"][0]["text"].clone()
    };
    let mut state = Branch::new();
    state.register_chain(chain("FIRST"));
    assert!(synthetic(&state).as_str().unwrap().contains("FIRST"));
    assert!(
        synthetic(&state).as_str().unwrap().contains("FIRST"),
        "memoized render identical"
    );
    state.register_chain(chain("SECOND"));
    assert!(synthetic(&state).as_str().unwrap().contains("SECOND"));
}

/// A render with warm caches (the chain phase's range scan and synthetics,
/// the stubs) must equal one from a cold copy of the state, whatever changed
/// in the messages since: the caches are keyed by the state, and the scan is
/// checked against the messages it was made from.
#[test]
fn warm_renders_equal_cold_ones_after_the_messages_change() {
    let config = Config::default();
    let protection = Protection::new(&config);
    let settings = RenderSettings {
        config: &config,
        protection: &protection,
    };
    let (messages, state) = support::workload_chains(8, 3, 2);
    let cold = |m: &[Message]| render(m, &state.clone(), &settings);
    let base = render(&messages, &state, &settings);
    assert!(base.plan.is_some());
    assert_eq!(base, cold(&messages));

    let inside = messages
        .iter()
        .position(|m| m.is(&condense_core::Role::ToolResult))
        .expect("a tool result");
    let edit = |f: &dyn Fn(&mut Vec<Message>)| {
        let mut m = messages.clone();
        f(&mut m);
        m
    };
    let variants: Vec<(&str, Vec<Message>)> = vec![
        (
            "a result's id changed",
            edit(&|m| {
                let mut v = m[inside].to_value().unwrap();
                v["toolCallId"] = json!("someone_else");
                m[inside] = Message::from_value(&v).unwrap();
            }),
        ),
        (
            "a result's text changed",
            edit(&|m| {
                let mut v = m[inside].to_value().unwrap();
                v["content"] = json!([{"type": "text", "text": "edited"}]);
                m[inside] = Message::from_value(&v).unwrap();
            }),
        ),
        (
            "a message removed",
            edit(&|m| {
                m.remove(inside);
            }),
        ),
        (
            "the same content in new objects",
            edit(&|m| {
                for x in m.iter_mut() {
                    *x = Message::from_json(&x.json()).unwrap();
                }
            }),
        ),
        (
            "a turn appended",
            edit(&|m| {
                m.push(
                    Message::from_value(
                        &json!({"role":"user","content":"more","timestamp":99_999_999}),
                    )
                    .unwrap(),
                );
            }),
        ),
        ("the first half only", edit(&|m| m.truncate(m.len() / 2))),
    ];
    for (what, changed) in &variants {
        let warm = render(changed, &state, &settings);
        assert_eq!(warm, cold(changed), "{what}");
        // And back: the original renders as before.
        assert_eq!(
            render(&messages, &state, &settings),
            base,
            "{what}, then back"
        );
    }
}

/// Under the cache-aware policy each call renders with and without what is
/// pending, two sets of chains, and flushes change the state between calls:
/// warm renders must equal cold ones through all of it, including a chain
/// entry replaced under the same block id (its ids differ from what the
/// range holds, which the cold render reports).
#[test]
fn warm_renders_equal_cold_ones_across_switches_and_replaced_chains() {
    let mut config = Config::default();
    config.economy.policy = condense_core::Policy::CacheAware;
    let protection = Protection::new(&config);
    let settings = RenderSettings {
        config: &config,
        protection: &protection,
    };
    let (messages, mut state) = support::workload_chains(8, 3, 2);
    let check = |state: &Branch, what: &str| {
        for _ in 0..2 {
            let cold = state.clone();
            assert_eq!(
                render(&messages, state, &settings),
                render(&messages, &cold, &settings),
                "{what}: render"
            );
            assert_eq!(
                condense_core::render_after_switch(&messages, state, &settings),
                condense_core::render_after_switch(&messages, &cold, &settings),
                "{what}: render after a switch"
            );
        }
    };
    check(&state, "before any switch");
    state.record_switch(messages.len());
    check(&state, "after a switch");
    let first = state.chains().next().cloned().expect("a chain");
    let mut replaced = first.clone();
    replaced
        .dropped_tool_call_ids
        .push("not_in_the_range".to_owned());
    state.register_chain(replaced);
    check(&state, "a chain's dropped ids replaced");
    let before = render(&messages, &state, &settings);
    assert!(
        before
            .diagnostics
            .iter()
            .any(|d| d.kind == condense_core::DiagnosticKind::RangeIdMismatch),
        "the replaced entry no longer matches its range"
    );
    state.register_chain(first);
    check(&state, "the chain restored");
    state.record_switch(messages.len());
    check(&state, "after a second switch");
}

/// A chain's synthetic is kept across switches (they change what is shown,
/// not the chain's text), but a summary registered for one of its outputs
/// changes its text, and the next render shows it.
#[test]
fn a_chain_text_follows_its_summaries_across_switches() {
    let mut config = Config::default();
    config.economy.policy = condense_core::Policy::CacheAware;
    let protection = Protection::new(&config);
    let settings = RenderSettings {
        config: &config,
        protection: &protection,
    };
    let messages = finished_chain();
    let mut state = Branch::new();
    // The start switch: a branch with none renders ungated.
    state.record_switch(0);
    state.register_summary_body(vec![OccurrenceKey::new("c1", Some(3))], "FIRST".to_owned());
    state.register_chain(
        serde_json::from_value(json!({"blockId":"b1","startUserTimestamp":1,
            "droppedToolCallIds":["c1"],"droppedOccurrenceKeys":["c1@3"],
            "finalAssistantTimestamp":4,"toolRefs":[],"compressedAt":9}))
        .unwrap(),
    );
    let shown = |state: &Branch| warm_render_text(&messages, state, &settings);
    assert!(!shown(&state).contains("FIRST"), "pending before a switch");
    state.record_switch(messages.len());
    assert!(shown(&state).contains("FIRST"));
    state.register_summary_body(vec![OccurrenceKey::new("c1", Some(3))], "SECOND".to_owned());
    let after = shown(&state);
    assert!(
        after.contains("FIRST") && after.contains("SECOND"),
        "{after}"
    );
    state.record_switch(messages.len());
    let again = shown(&state);
    assert!(again.contains("SECOND"), "{again}");
}

/// A chain's body naming another block (`{b2}`) follows that block: its
/// registration after the first render, and each summary later covering
/// its outputs. A summary for other outputs leaves the text as it was.
#[test]
fn a_chain_text_follows_the_block_it_names() {
    let config = Config::default();
    let protection = Protection::new(&config);
    let settings = RenderSettings {
        config: &config,
        protection: &protection,
    };
    let messages = finished_chain();
    let text = |state: &Branch| warm_render_text(&messages, state, &settings);
    let mut state = Branch::new();
    state.register_chain(
        serde_json::from_value(json!({"blockId":"b1","startUserTimestamp":1,
            "droppedToolCallIds":["c1"],"finalAssistantTimestamp":4,"toolRefs":[],
            "compressedAt":9,"rangeSummaryText":"outer, then {b2}"}))
        .unwrap(),
    );
    assert!(
        text(&state).contains("outer, then {b2}"),
        "unknown block kept"
    );
    state.register_summary_body(vec![OccurrenceKey::new("c2", Some(50))], "INNER".to_owned());
    state.register_chain(
        serde_json::from_value(json!({"blockId":"b2","startUserTimestamp":40,
            "droppedToolCallIds":["c2"],"droppedOccurrenceKeys":["c2@50"],
            "finalAssistantTimestamp":60,"toolRefs":[],"compressedAt":70}))
        .unwrap(),
    );
    assert!(
        text(&state).contains("outer, then INNER"),
        "{}",
        text(&state)
    );
    state.register_summary_body(
        vec![OccurrenceKey::new("c9", Some(90))],
        "ELSEWHERE".to_owned(),
    );
    let unrelated = text(&state);
    assert!(unrelated.contains("outer, then INNER") && !unrelated.contains("ELSEWHERE"));
    state.register_summary_body(vec![OccurrenceKey::new("c2", Some(50))], "LATER".to_owned());
    let later = text(&state);
    assert!(
        later.contains("INNER") && later.contains("LATER"),
        "{later}"
    );
}

/// A result a switch showed as a stub (`seed` builds the state before that
/// switch), whose chain the rolling window then compresses, no summary
/// covering it, backfilling the result under a ref of its own. Under
/// `reference` the chain drops the stub at once. Under `cache-aware` the
/// chain is pending until a switch, and the stub stays as it was shown: the
/// new ref would rewrite the cached prompt from there without one.
fn a_backfilled_stub_waits_for_a_switch(
    messages: &[Message],
    seed: impl Fn(&mut Branch),
    (id, ts): (&str, i64),
    shown_ref: &str,
    backfilled_ref: &str,
) {
    let needle = format!(r#""toolCallId":"{id}""#);
    let stub = |out: &[Message]| -> Option<String> {
        out.iter()
            .find(|m| m.json().contains(&needle))
            .map(|m| m.to_value().unwrap()["content"][0]["text"].to_string())
    };
    for policy in [
        condense_core::Policy::Reference,
        condense_core::Policy::CacheAware,
    ] {
        let mut config = Config::default();
        config.economy.policy = policy;
        let protection = Protection::new(&config);
        let settings = RenderSettings {
            config: &config,
            protection: &protection,
        };
        let mut state = Branch::new();
        seed(&mut state);
        state.record_switch(messages.len());
        let shown = render(messages, &state, &settings).messages(messages);
        let before = stub(&shown).expect("the stub is in the prompt");
        assert!(before.contains(&format!("ref `{shown_ref}`")), "{before}");

        let plan = condense_core::plan_chains(messages, None, &state, &config, &protection, 0);
        let applied = condense_core::apply_chains(plan, Vec::new(), &[], &mut state, &config, 40);
        assert_eq!(
            state.short_ref(id, Some(ts)),
            Some(backfilled_ref),
            "{applied:?}"
        );

        let out = render(messages, &state, &settings).messages(messages);
        let after = stub(&out);
        let chain_shown = out.iter().any(|m| m.json().contains("<compressed-chain"));
        match policy {
            condense_core::Policy::Reference => {
                assert!(chain_shown && after.is_none(), "the chain drops the stub");
            }
            condense_core::Policy::CacheAware => {
                assert!(!chain_shown, "the chain is pending");
                assert_eq!(after.as_deref(), Some(before.as_str()), "no rewrite");
                assert_eq!(
                    render(messages, &state.clone(), &settings),
                    render(messages, &state, &settings),
                    "warm = cold"
                );
                let next = condense_core::render_after_switch(messages, &state, &settings)
                    .messages(messages);
                let tools = format!(r#"tools=\"{backfilled_ref}\""#);
                assert!(
                    next.iter().any(|m| m.json().contains(&tools)),
                    "a switch shows the chain with the backfilled ref"
                );
                state.record_switch(messages.len());
                let out = render(messages, &state, &settings).messages(messages);
                assert!(stub(&out).is_none(), "the switch shows the chain");
            }
        }
    }
}

/// A dedup alias shown by a switch keeps its stub (the original's ref) when
/// a later flush compresses its uncovered chain and backfills it with a ref
/// of its own, as pi-condense does.
#[test]
fn a_backfilled_alias_keeps_its_stub_until_a_switch_shows_its_chain() {
    let turn = |n: i64, id: &str| {
        let t = n * 10;
        [
            json!({"role":"user","content":format!("task {n}"),"timestamp":t}),
            json!({"role":"assistant","content":[{"type":"toolCall","id":id,"name":"read","arguments":{"path":"src/a.rs"}}],"timestamp":t + 1}),
            json!({"role":"toolResult","toolCallId":id,"toolName":"read","content":[{"type":"text","text":"SAME OUTPUT"}],"isError":false,"timestamp":t + 2}),
            json!({"role":"assistant","content":[{"type":"text","text":"done"}],"timestamp":t + 3}),
        ]
    };
    let messages: Vec<Message> = turn(1, "c1")
        .into_iter()
        .chain(turn(2, "c2"))
        .chain([json!({"role":"user","content":"next","timestamp":30})])
        .map(|v| Message::from_value(&v).unwrap())
        .collect();
    let seed = |state: &mut Branch| {
        let original = serde_json::from_value(json!({
            "toolCallId":"c1","toolName":"read","args":{"path":"src/a.rs"},"resultText":"SAME OUTPUT",
            "isError":false,"turnIndex":0,"timestamp":11,"resultTimestamp":12
        }))
        .unwrap();
        state.add_record(original, true);
        state.register_summary_refs(&[SummaryRef {
            short_id: "t1".into(),
            tool_call_id: "c1".into(),
            result_timestamp: Some(12),
        }]);
        state.register_summary_body(vec![OccurrenceKey::new("c1", Some(12))], "S1".into());
        state.register_dedup_alias(
            &OccurrenceKey::new("c2", Some(22)),
            &OccurrenceKey::new("c1", Some(12)),
        );
    };
    // The second task's chain: the alias was its only output.
    a_backfilled_stub_waits_for_a_switch(&messages, seed, ("c2", 22), "t1", "t2");
}

/// An eager spill (indexed at its turn's end without a short ref, its stub
/// naming the raw id) shown by a switch keeps that stub when a later flush
/// compresses its chain and backfills it with a ref of its own.
#[test]
fn a_backfilled_spill_keeps_its_stub_until_a_switch_shows_its_chain() {
    let messages: Vec<Message> = [
        json!({"role":"user","content":"task","timestamp":10}),
        json!({"role":"assistant","content":[{"type":"toolCall","id":"g1","name":"read","arguments":{"path":"big.log"}}],"timestamp":11}),
        json!({"role":"toolResult","toolCallId":"g1","toolName":"read","content":[{"type":"text","text":"HUGE OUTPUT"}],"isError":false,"timestamp":12}),
        json!({"role":"assistant","content":[{"type":"text","text":"done"}],"timestamp":13}),
        json!({"role":"user","content":"next","timestamp":20}),
    ]
    .iter()
    .map(|v| Message::from_value(v).unwrap())
    .collect();
    let seed = |state: &mut Branch| {
        let spilled = serde_json::from_value(json!({
            "toolCallId":"g1","toolName":"read","args":{"path":"big.log"},"resultText":"",
            "isError":false,"turnIndex":0,"timestamp":11,"resultTimestamp":12,
            "spillPath":"/s/g1@12.txt","spillBytes":11,"resultPreview":"HUGE"
        }))
        .unwrap();
        state.add_record(spilled, true);
    };
    a_backfilled_stub_waits_for_a_switch(&messages, seed, ("g1", 12), "g1", "t1");
}

/// A chain quoting a protected output keeps its synthetic between renders
/// of the same messages, and quotes the new text when the output message
/// is another one (the memo checks the messages themselves).
#[test]
fn a_chain_quoting_a_protected_output_follows_that_output() {
    let config = Config::default();
    let protection = Protection::new(&config);
    let messages = |out: &str| -> Vec<Message> {
        [
            json!({"role":"user","content":"go","timestamp":1}),
            json!({"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"todo","arguments":{}}],"timestamp":2}),
            json!({"role":"toolResult","toolCallId":"c1","toolName":"todo","content":[{"type":"text","text":out}],"isError":false,"timestamp":3}),
            json!({"role":"assistant","content":[{"type":"text","text":"done"}],"timestamp":4}),
        ]
        .iter()
        .map(|v| Message::from_value(v).unwrap())
        .collect()
    };
    let chain: condense_core::ChainEntry = serde_json::from_value(
        json!({"blockId":"b1","startUserTimestamp":1,"droppedToolCallIds":[],
        "protectedToolCallIds":["c1"],"finalAssistantTimestamp":4,"toolRefs":[],
        "compressedAt":9,"rangeSummaryText":"BODY"}),
    )
    .unwrap();
    let mut state = Branch::new();
    state.register_chain(chain);
    let synthetic = |messages: &[Message]| -> String {
        let r = render(
            messages,
            &state,
            &RenderSettings {
                config: &config,
                protection: &protection,
            },
        );
        let texts: Vec<String> = r
            .messages(messages)
            .iter()
            .filter(|m| m.skeleton().is_synthetic_chain)
            .map(|m| {
                m.to_value().unwrap()["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(texts.len(), 1, "one synthetic");
        texts[0].clone()
    };
    let first = messages("ITEM ONE");
    let cold = synthetic(&first);
    assert!(
        cold.contains("<protected-output tool=\"todo\">\nITEM ONE\n"),
        "{cold}"
    );
    assert_eq!(synthetic(&first), cold, "memoized render identical");
    let again = synthetic(&messages("ITEM TWO"));
    assert!(
        again.contains("ITEM TWO") && !again.contains("ITEM ONE"),
        "{again}"
    );
}
