//! What the tests driving the engine through a recorded session share:
//! session files built from messages, a driver per policy, and the loop
//! that plays a branch call by call.

// Each test binary uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use condense_core::Message;
use condense_engine::drive::{Driver, DriverOptions};
use condense_engine::CallFacts;
use condense_store::session::{Entry, Session};
use condense_summarizer::Extractive;
use serde_json::{json, Value};

pub const T0: i64 = 1_780_000_000_000;

pub const MIN: i64 = 60_000;

/// A session file of `messages`, one entry each in a chain, the entries'
/// ids `<prefix>0000`, `<prefix>0001`, …; a value with a `type` is an
/// entry of its own (a compaction).
pub fn session_of(id: &str, prefix: &str, messages: Vec<Value>) -> Session {
    let mut text =
        json!({"type": "session", "version": 3, "id": id, "timestamp": "", "cwd": "/"}).to_string();
    let mut parent = Value::Null;
    for (n, m) in messages.into_iter().enumerate() {
        let entry_id = format!("{prefix}{n:04}");
        let at = m["timestamp"].as_i64().unwrap_or(T0);
        // An entry other than a message comes whole (its id and parent set).
        let e = if m.get("type").is_some() {
            let mut e = m;
            e["id"] = json!(entry_id);
            e["parentId"] = parent;
            e["timestamp"] = json!(condense_store::time::format_iso(at));
            e
        } else {
            json!({"type": "message", "id": entry_id, "parentId": parent,
                "timestamp": condense_store::time::format_iso(at), "message": m})
        };
        parent = json!(entry_id);
        text.push('\n');
        text.push_str(&e.to_string());
    }
    Session::parse(&text)
}

/// A driver under `policy`, unbounded (`maxExcess: null`: the cases that
/// want the bound say so with [`driver_with`]), spilling below `dir` when
/// there is one.
fn driver_spilling_into(policy: &str, dir: Option<&Path>) -> Driver {
    Driver::new(DriverOptions {
        settings: json!({"contextPrune": {"enabled": true,
            "economy": {"policy": policy, "maxExcess": null}}}),
        summarizer: Arc::new(Extractive::new()),
        tokens: Arc::new(|t: &str| t.len() as u64 / 4),
        session_dir: dir.map(Path::to_path_buf),
        miss_prior: None,
    })
    .expect("a driver")
}

/// A driver with the `economy` settings `economy`, spilling nowhere.
pub fn driver_with(economy: Value) -> Driver {
    Driver::new(DriverOptions {
        settings: json!({"contextPrune": {"enabled": true, "economy": economy}}),
        summarizer: Arc::new(Extractive::new()),
        tokens: Arc::new(|t: &str| t.len() as u64 / 4),
        session_dir: None,
        miss_prior: None,
    })
    .expect("a driver")
}

/// A driver under `policy` spilling below `dir`.
pub fn driver_in(policy: &str, dir: &Path) -> Driver {
    driver_spilling_into(policy, Some(dir))
}

/// A driver under `policy` that spills nowhere.
pub fn driver(policy: &str) -> Driver {
    driver_spilling_into(policy, None)
}

/// Plays the branch; returns each call's prompt. At a compaction pi's
/// list becomes the context it builds from the branch so far.
pub fn play(d: &mut Driver, branch: &[&Entry]) -> Vec<Vec<Message>> {
    play_watching(d, branch, |_, _| {})
}

/// [`play`], calling `before_call` with the driver and the prompts so far
/// before each call (the call's turn fed, its `context` not yet sent).
pub fn play_watching(
    d: &mut Driver,
    branch: &[&Entry],
    mut before_call: impl FnMut(&mut Driver, &[Vec<Message>]),
) -> Vec<Vec<Message>> {
    let mut prompts = Vec::new();
    let mut context: Vec<Message> = Vec::new();
    let mut fed = 0;
    for (i, e) in branch.iter().enumerate() {
        if e.kind == condense_store::session::EntryType::Compaction {
            context = condense_store::context::build_context(&branch[..=i]).messages;
            continue;
        }
        let Some(m) = &e.message else { continue };
        if m.is(&condense_core::Role::Assistant) {
            d.feed(&branch[fed..i], Some(1_000), 200_000);
            fed = i;
            before_call(d, &prompts);
            let facts = CallFacts {
                now_ms: m.timestamp(),
                model: Some("anthropic/claude-x".into()),
                summarizer_price: None,
            };
            prompts.push(d.context(&context, &facts));
        }
        context.push(m.clone());
    }
    d.finish(&branch[fed..], Some(1_000));
    prompts
}

/// One tool turn: an assistant message at `at` calling `read` on `path`
/// (call id `id`), and its 8,000-character result, lines tagged `tag`,
/// half a second later.
pub fn read_turn(id: &str, path: &str, tag: &str, at: i64) -> [Value; 2] {
    let text: String = (0..400).map(|l| format!("{tag} line {l:04}\n")).collect();
    [
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": id,
            "name": "read", "arguments": {"path": path}}], "stopReason": "toolUse",
            "timestamp": at, "provider": "anthropic", "model": "claude-x"}),
        json!({"role": "toolResult", "toolCallId": id, "toolName": "read",
            "content": [{"type": "text", "text": text}], "isError": false, "timestamp": at + 500}),
    ]
}

/// A run of `turns` tool turns (ids `<tag>0`, `<tag>1`, …, each reading an
/// 8,000-character file) from `t`, with a reply when `reply`.
pub fn run(tag: &str, turns: usize, t: i64, reply: bool) -> Vec<Value> {
    let mut messages = vec![
        json!({"role": "user", "content": [{"type": "text", "text": format!("go {tag}")}], "timestamp": t}),
    ];
    for n in 0..turns {
        let at = t + 1_000 * (2 * n as i64 + 1);
        let id = format!("{tag}{n}");
        messages.extend(read_turn(&id, &format!("{id}.txt"), &id, at));
    }
    if reply {
        let at = t + 1_000 * (2 * turns as i64 + 1);
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("{tag} done")}],
            "stopReason": "stop", "timestamp": at, "provider": "anthropic", "model": "claude-x"}));
    }
    messages
}

pub fn shows_read(prompt: &[Message], id: &str) -> bool {
    prompt
        .iter()
        .any(|m| m.json().contains(&format!("{id} line 0399")))
}

/// A task reading a giant file, a short one, a second task reading the
/// same giant content under another id, then short tasks a minute apart.
pub fn session_with_a_duplicate_giant_output() -> Session {
    let giant: String = (0..3_000)
        .map(|l| format!("big line {l:05}: data data data\n"))
        .collect();
    assert!(giant.len() > 65_536);
    let giant_task = |id: &str, t: i64| {
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": format!("read {id}")}], "timestamp": t}),
            json!({"role": "assistant", "content": [{"type": "toolCall", "id": id, "name": "read",
                "arguments": {"path": format!("{id}.log")}}], "stopReason": "toolUse", "timestamp": t + 1_000,
                "provider": "anthropic", "model": "claude-x"}),
            json!({"role": "toolResult", "toolCallId": id, "toolName": "read",
                "content": [{"type": "text", "text": giant}], "isError": false, "timestamp": t + 1_500}),
            json!({"role": "assistant", "content": [{"type": "text", "text": format!("{id} read")}],
                "stopReason": "stop", "timestamp": t + 2_000, "provider": "anthropic", "model": "claude-x"}),
        ]
    };
    let mut messages = giant_task("g0", T0);
    messages.extend(run("a", 1, T0 + MIN, true));
    messages.extend(giant_task("g2", T0 + 2 * MIN));
    for (k, tag) in ["b", "c", "d", "e", "f", "h"].iter().enumerate() {
        messages.extend(run(tag, 1, T0 + (k as i64 + 3) * MIN, true));
    }
    session_of("dup", "u", messages)
}

pub fn output() -> String {
    (0..300).map(|l| format!("line {l}: ok\n")).collect()
}

/// A task (a read and a reply), then after `gap_ms` a long second prompt
/// (20,000 characters: a rewrite from the read on costs more than the two
/// calls left can repay), its answer, and a third prompt with its answer a
/// minute later.
pub fn session(gap_ms: i64) -> Session {
    let t1 = T0 + 3_000 + gap_ms;
    let messages = vec![
        json!({"role": "user", "content": [{"type": "text", "text": "read f"}], "timestamp": T0}),
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "read",
            "arguments": {"path": "f.txt"}}], "stopReason": "toolUse", "timestamp": T0 + 1_000,
            "provider": "anthropic", "model": "claude-x"}),
        json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read",
            "content": [{"type": "text", "text": output()}], "isError": false, "timestamp": T0 + 2_000}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}],
            "stopReason": "stop", "timestamp": T0 + 2_500, "provider": "anthropic", "model": "claude-x"}),
        json!({"role": "user", "content": [{"type": "text", "text": "next ".repeat(4_000)}], "timestamp": t1}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "Sure."}],
            "stopReason": "stop", "timestamp": t1 + 1_000, "provider": "anthropic", "model": "claude-x"}),
        json!({"role": "user", "content": [{"type": "text", "text": "more"}], "timestamp": t1 + MIN}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "Yes."}],
            "stopReason": "stop", "timestamp": t1 + MIN + 1_000, "provider": "anthropic", "model": "claude-x"}),
    ];
    session_of("d", "e", messages)
}

/// A failed write with a large argument, five more turns, an idle gap past
/// the TTL, and one more prompt.
pub fn session_with_a_failed_write() -> Session {
    let body = "x".repeat(20_000);
    let mut messages = vec![
        json!({"role": "user", "content": [{"type": "text", "text": "write f"}], "timestamp": T0}),
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": "w1", "name": "write",
            "arguments": {"path": "f.txt", "content": body}}], "stopReason": "toolUse", "timestamp": T0 + 1_000}),
        json!({"role": "toolResult", "toolCallId": "w1", "toolName": "write",
            "content": [{"type": "text", "text": "EACCES"}], "isError": true, "timestamp": T0 + 2_000}),
    ];
    for n in 0..5 {
        let at = T0 + 3_000 + n * 2_000;
        messages.push(
            json!({"role": "assistant", "content": [{"type": "toolCall", "id": format!("l{n}"),
            "name": "ls", "arguments": {"path": "."}}], "stopReason": "toolUse", "timestamp": at}),
        );
        messages.push(json!({"role": "toolResult", "toolCallId": format!("l{n}"), "toolName": "ls",
            "content": [{"type": "text", "text": "f.txt"}], "isError": false, "timestamp": at + 500}));
    }
    let t1 = T0 + 20 * MIN;
    messages.push(
        json!({"role": "assistant", "content": [{"type": "text", "text": "Could not."}],
        "stopReason": "stop", "timestamp": T0 + 14_000}),
    );
    messages.push(
        json!({"role": "user", "content": [{"type": "text", "text": "retry"}], "timestamp": t1}),
    );
    messages.push(
        json!({"role": "assistant", "content": [{"type": "text", "text": "Ok."}],
        "stopReason": "stop", "timestamp": t1 + 1_000}),
    );
    session_of("w", "w", messages)
}

/// One prompt and `turns` tool turns a second apart, each reading an
/// 8,000-character file, and no reply (an autonomous run).
pub fn long_run(turns: usize) -> Session {
    let mut messages =
        vec![json!({"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0})];
    for n in 0..turns {
        let at = T0 + 1_000 * (2 * n as i64 + 1);
        let id = format!("r{n}");
        messages.push(
            json!({"role": "assistant", "content": [{"type": "toolCall", "id": id,
            "name": "read", "arguments": {"path": format!("f{n}.txt")}}], "stopReason": "toolUse",
            "timestamp": at, "provider": "anthropic", "model": "claude-x"}),
        );
        let text: String = (0..400).map(|l| format!("f{n} line {l:04}\n")).collect();
        messages.push(
            json!({"role": "toolResult", "toolCallId": id, "toolName": "read",
            "content": [{"type": "text", "text": text}], "isError": false, "timestamp": at + 500}),
        );
    }
    session_of("r", "x", messages)
}

/// Run 1's 25 tool turns and reply, and ten minutes later run 2's 20 tool
/// turns without a reply.
pub fn two_runs() -> Session {
    let mut messages = run("a", 25, T0, true);
    messages.extend(run("b", 20, T0 + 10 * MIN, false));
    session_of("l", "y", messages)
}

/// Run 1 (six reads, a reply), which pi compacts away, then run 2 (a read
/// and a reply) and run 3 (a reply), ten minutes apart.
pub fn a_run_compacted_away() -> Session {
    let mut messages = run("a", 6, T0, true);
    messages.push(json!({"type": "compaction", "summary": "earlier work",
        "firstKeptEntryId": null, "tokensBefore": 50_000}));
    messages.extend(run("b", 1, T0 + 10 * MIN, true));
    messages.extend(run("c", 0, T0 + 20 * MIN, true));
    session_of("k", "z", messages)
}

/// A task whose first read is too large to keep (spilled at its turn's
/// end, its stub naming the raw id), a long prompt, then short tasks a
/// minute apart.
pub fn session_with_an_eager_spill() -> Session {
    let giant: String = (0..3_000)
        .map(|l| format!("g0 line {l:05}: data data data\n"))
        .collect();
    assert!(giant.len() > 65_536);
    let mut messages = vec![
        json!({"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0}),
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": "g0", "name": "read",
            "arguments": {"path": "big.log"}}], "stopReason": "toolUse", "timestamp": T0 + 1_000,
            "provider": "anthropic", "model": "claude-x"}),
        json!({"role": "toolResult", "toolCallId": "g0", "toolName": "read",
            "content": [{"type": "text", "text": giant}], "isError": false, "timestamp": T0 + 1_500}),
    ];
    messages.extend(run("s", 1, T0 + 2_000, true).into_iter().skip(1));
    // A long prompt after it: a switch showing the first task's chain
    // rewrites it, which the few calls left do not repay.
    messages.push(
        json!({"role": "user", "content": [{"type": "text", "text": "next ".repeat(8_000)}],
        "timestamp": T0 + 30_000}),
    );
    messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Sure."}],
        "stopReason": "stop", "timestamp": T0 + 31_000, "provider": "anthropic", "model": "claude-x"}));
    for (k, tag) in ["b", "c", "d", "e", "f"].iter().enumerate() {
        messages.extend(run(tag, 1, T0 + (k as i64 + 1) * MIN, true));
    }
    session_of("g", "g", messages)
}

/// Run 1 (eight reads, a reply), which pi compacts at its end keeping its
/// last four reads (from `z0009`, read `a4`'s call), then run 2 (a read
/// and a reply) and run 3 (a reply), a minute apart: every call is warm
/// but the first after the compaction.
pub fn a_run_compacted_at_its_end() -> Session {
    let mut messages = run("a", 8, T0, true);
    messages.push(json!({"type": "compaction", "summary": "earlier work",
        "firstKeptEntryId": "z0009", "tokensBefore": 50_000, "timestamp": T0 + 18_000}));
    messages.extend(run("b", 1, T0 + MIN, true));
    messages.extend(run("c", 0, T0 + 2 * MIN, true));
    session_of("k", "z", messages)
}

/// The reasons of the switch entries the run wrote, in order.
pub fn switch_reasons(d: &Driver) -> Vec<String> {
    d.written()
        .iter()
        .filter_map(|w| match &w.effect {
            condense_engine::Effect::Append {
                custom_type, data, ..
            } if custom_type == condense_store::entries::CUSTOM_TYPE_SWITCH => {
                data["reason"].as_str().map(str::to_owned)
            }
            _ => None,
        })
        .collect()
}
