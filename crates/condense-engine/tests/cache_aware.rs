//! The cache-aware policy inside the engine: a switch is an append effect
//! returned with the `context` answer that already renders it, so a reload
//! of the session with that entry renders the same; the reference policy
//! never switches.

use condense_core::{Message, PlanStep};
use condense_engine::{jsonl, CallFacts, Effect, Engine, StartParams};
use serde_json::{json, Value};

const T0: i64 = 1_780_000_000_000;

/// A prompt, a read of `lines` lines, a reply, with the start switch the
/// engine recorded at the first call.
fn read_and_reply(lines: usize) -> Vec<Value> {
    let text = read_output(lines);
    let messages = [
        json!({"role": "user", "content": [{"type": "text", "text": "read f"}], "timestamp": T0}),
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "read",
            "arguments": {"path": "f.txt"}}], "stopReason": "toolUse", "timestamp": T0 + 1}),
        json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read",
            "content": [{"type": "text", "text": text}], "isError": false, "timestamp": T0 + 2}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}],
            "stopReason": "stop", "timestamp": T0 + 3}),
    ];
    let mut out: Vec<Value> = messages
        .into_iter()
        .map(|m| json!({"type": "message", "message": m}))
        .collect();
    out.insert(
        1,
        json!({"type": "custom", "customType": "context-prune-switch",
            "data": {"reason": "start", "messageCount": 1}}),
    );
    out
}

fn read_output(lines: usize) -> String {
    (0..lines).map(|l| format!("line {l}: ok\n")).collect()
}

/// [`read_and_reply`] of 200 lines, then the flush's summary and index
/// entries (what a flush at the reply appended).
fn branch_lines() -> Vec<Value> {
    let text = read_output(200);
    let mut out = read_and_reply(200);
    out.push(json!({"type": "custom_message", "customType": "context-prune-summary",
        "content": "- `t1` read f.txt: 200 lines, all ok.", "display": false,
        "details": {"toolCallRefs": [{"shortId": "t1", "toolCallId": "c1", "resultTimestamp": T0 + 2}],
            "toolNames": ["read"], "turnIndex": 0, "timestamp": T0 + 1}}));
    out.push(
        json!({"type": "custom", "customType": "context-prune-index",
        "data": {"toolCalls": [{"toolCallId": "c1", "toolName": "read", "args": {"path": "f.txt"},
            "resultText": text, "isError": false, "turnIndex": 0, "timestamp": T0 + 1,
            "resultTimestamp": T0 + 2}]}}),
    );
    out
}

/// Entry lines with ids, parent links and timestamps.
fn linked(lines: &[Value]) -> String {
    let mut out = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let mut e = line.clone();
        e["id"] = json!(format!("{n:08x}"));
        e["parentId"] = if n == 0 {
            Value::Null
        } else {
            json!(format!("{:08x}", n - 1))
        };
        e["timestamp"] = json!(condense_store::time::format_iso(T0 + n as i64));
        out.push(e.to_string());
    }
    jsonl(out)
}

fn started(policy: &str, lines: &[Value]) -> Engine {
    // Unbounded: these cases are about the projections.
    started_with(
        json!({"contextPrune": {"enabled": true,
            "economy": {"policy": policy, "maxExcess": null}}}),
        lines,
    )
}

/// An engine started from `lines` with pi's `settings`.
fn started_with(settings: Value, lines: &[Value]) -> Engine {
    let mut e = Engine::default();
    e.start(StartParams {
        settings,
        session_id: "s".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch: linked(lines),
        tree: false,
    });
    e
}

fn next_prompt() -> Message {
    Message::from_value(
        &json!({"role": "user", "content": [{"type": "text", "text": "next"}], "timestamp": T0 + 10}),
    )
    .expect("a message")
}

/// The rendered messages' JSON for the engine's messages and `steps`.
fn rendered(e: &Engine, steps: &Option<Vec<PlanStep>>) -> Vec<String> {
    let input = e.messages();
    let out: Vec<Message> = match steps {
        None => input.to_vec(),
        Some(steps) => condense_core::apply_steps(steps, input),
    };
    out.iter().map(|m| m.json().to_string()).collect()
}

fn switches(effects: &[Effect]) -> Vec<Value> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Append {
                custom_type, data, ..
            } if custom_type == "context-prune-switch" => Some(data.clone()),
            _ => None,
        })
        .collect()
}

fn call(now: i64) -> CallFacts {
    CallFacts {
        now_ms: Some(now),
        model: Some("anthropic/claude-x".into()),
        summarizer_price: None,
    }
}

#[test]
fn a_resume_past_the_ttl_switches_in_what_is_pending_and_the_answer_shows_it() {
    let lines = branch_lines();
    let mut e = started("cache-aware", &lines);
    let n = e.messages().len();
    let (steps, effects) = e.context_at(n, vec![next_prompt()], &call(RESUMED));
    let switched = switches(&effects);
    assert_eq!(switched.len(), 1, "{effects:?}");
    assert_eq!(switched[0]["reason"], "idle-expiry");
    assert_eq!(switched[0]["messageCount"], json!(n + 1));
    assert!(switched[0]["removedTokens"].as_u64().unwrap_or(0) > 0);
    let shown = rendered(&e, &steps);
    assert!(shown[2].contains("[Summarized in pruner summary, ref `t1`."));

    // The reference policy shows the same at once, and never switches.
    let mut reference = started("reference", &lines);
    let (ref_steps, ref_effects) = reference.context_at(n, vec![next_prompt()], &call(RESUMED));
    assert!(switches(&ref_effects).is_empty());
    assert_eq!(rendered(&reference, &ref_steps), shown);

    // A reload of the session with the switch appended (as the shim does)
    // renders the same bytes, and has nothing left to switch.
    let mut with_switch = lines.clone();
    with_switch.push(
        json!({"type": "custom", "customType": "context-prune-switch",
        "data": switched[0].clone()}),
    );
    let mut reloaded = started("cache-aware", &with_switch);
    let (re_steps, re_effects) = reloaded.context_at(n, vec![next_prompt()], &call(RESUMED + 10));
    assert!(switches(&re_effects).is_empty());
    assert_eq!(rendered(&reloaded, &re_steps), shown);

    // Later calls find nothing pending.
    let (_, later) = e.context_at(n + 1, vec![], &call(RESUMED + 400_000));
    assert!(switches(&later).is_empty());
}

/// Past the default profile's 5-minute time to live after the branch's
/// last call.
const RESUMED: i64 = T0 + 6 * 60_000;

/// The default policy: cache-aware, bounded against no pruning.
fn started_bounded(lines: &[Value]) -> Engine {
    started_with(json!({"contextPrune": {"enabled": true}}), lines)
}

/// A process resumed a minute after the branch's last call sends the
/// prefix that call sent, and the provider still holds it: the call is
/// warm, so under the bound (nothing saved yet) nothing pending is shown.
/// Past the time to live the same call is cold and shows it all, free.
/// [`branch_lines`] and a long exchange after the summarized read: showing
/// its stub rewrites that exchange, which a warm call would otherwise read.
fn branch_with_a_long_exchange() -> Vec<Value> {
    let mut lines = branch_lines();
    let long = "a question with a long paste. ".repeat(300);
    for m in [
        json!({"role": "user", "content": [{"type": "text", "text": long}], "timestamp": T0 + 4}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "Answered."}],
            "stopReason": "stop", "timestamp": T0 + 5}),
    ] {
        lines.push(json!({"type": "message", "message": m}));
    }
    lines
}

#[test]
fn a_resume_within_the_ttl_finds_the_cache_warm() {
    let lines = branch_with_a_long_exchange();
    let mut warm = started_bounded(&lines);
    let n = warm.messages().len();
    let (steps, effects) = warm.context_at(n, vec![next_prompt()], &call(T0 + 60_000));
    assert!(switches(&effects).is_empty(), "{effects:?}");
    assert!(rendered(&warm, &steps)
        .iter()
        .all(|m| !m.contains("ref `t1`")));

    let mut cold = started_bounded(&lines);
    let (steps, effects) = cold.context_at(n, vec![next_prompt()], &call(RESUMED));
    assert_eq!(reasons(&effects), ["idle-expiry"]);
    assert!(rendered(&cold, &steps)[2].contains("[Summarized in pruner summary, ref `t1`."));
}

/// A model change the branch records after its last call sends the next
/// call to another model's cache: cold at once, whatever the time.
#[test]
fn a_resume_to_another_model_finds_the_cache_cold() {
    let mut lines = branch_lines();
    lines.push(json!({"type": "model_change", "provider": "anthropic", "modelId": "claude-y"}));
    let mut e = started_bounded(&lines);
    let n = e.messages().len();
    let (_, effects) = e.context_at(n, vec![next_prompt()], &call(T0 + 60_000));
    assert_eq!(reasons(&effects), ["resume"]);
}

#[test]
fn nothing_pending_never_switches() {
    let lines = branch_lines();
    // No flush yet: the first call after the resume has nothing to show.
    let lines = [&lines[..1], &lines[2..5]].concat();
    let mut e = started("cache-aware", &lines);
    let n = e.messages().len();
    let (steps, effects) = e.context_at(n, vec![next_prompt()], &call(T0 + 10));
    assert_eq!(reasons(&effects), ["start"], "the branch had no switch");
    assert!(steps.is_none());
    let (steps, effects) = e.context_at(n + 1, vec![], &call(T0 + 400_000));
    assert!(switches(&effects).is_empty());
    assert!(steps.is_none());
}

fn reasons(effects: &[Effect]) -> Vec<String> {
    switches(effects)
        .iter()
        .map(|s| s["reason"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The notices among `effects`.
fn notices(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Notify { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_long_runs_flush_says_it_is_one() {
    let prompt =
        json!({"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0});
    let mut e = started(
        "cache-aware",
        &[json!({"type": "message", "message": prompt})],
    );
    let mut said = Vec::new();
    for n in 0..14i64 {
        let at = T0 + 1_000 * (2 * n + 1);
        let held = e.messages().len();
        e.context_at(held, Vec::new(), &call(at));
        let id = format!("r{n}");
        let assistant = Message::from_value(
            &json!({"role": "assistant", "content": [{"type": "toolCall",
            "id": id, "name": "read", "arguments": {"path": format!("f{n}.txt")}}],
            "stopReason": "toolUse", "timestamp": at}),
        )
        .expect("a message");
        let text: String = (0..400).map(|l| format!("f{n} line {l:04}\n")).collect();
        let result = Message::from_value(&json!({"role": "toolResult", "toolCallId": id,
            "toolName": "read", "content": [{"type": "text", "text": text}], "isError": false,
            "timestamp": at + 500}))
        .expect("a message");
        let (effects, trigger) = e.turn_end(n, &assistant, &[result], None, 200_000, at + 600);
        if trigger.is_some() {
            said.extend(
                notices(&effects)
                    .into_iter()
                    .filter(|t| !t.contains("queued")),
            );
        }
    }
    assert!(!said.is_empty(), "the run flushed from its tenth turn");
    assert!(
        said.iter()
            .all(|t| t.starts_with("pruner: long run — compacting ")),
        "{said:?}"
    );
}

fn msg(v: Value) -> Message {
    Message::from_value(&v).expect("a message")
}

/// A failed write with a 4,000-character argument, a read with a
/// 40,000-character output, and an `ls`: by the fourth call the failure is
/// two turns old, so a switch would purge its argument (what it removes
/// sits before the large output, which it would rewrite).
fn failed_write_then_a_large_read(first_prompt: &str) -> Vec<Vec<Message>> {
    let tool_call = |id: &str, name: &str, args: Value, at: i64| {
        msg(
            json!({"role": "assistant", "content": [{"type": "toolCall", "id": id, "name": name,
            "arguments": args}], "stopReason": "toolUse", "timestamp": at}),
        )
    };
    let result = |id: &str, name: &str, text: String, error: bool, at: i64| {
        msg(
            json!({"role": "toolResult", "toolCallId": id, "toolName": name,
            "content": [{"type": "text", "text": text}], "isError": error, "timestamp": at}),
        )
    };
    vec![
        vec![msg(
            json!({"role": "user", "content": [{"type": "text", "text": first_prompt}], "timestamp": T0}),
        )],
        vec![
            tool_call(
                "w1",
                "write",
                json!({"path": "f.txt", "content": "x".repeat(4_000)}),
                T0 + 1_000,
            ),
            result("w1", "write", "EACCES".into(), true, T0 + 2_000),
        ],
        vec![
            tool_call("r1", "read", json!({"path": "g.txt"}), T0 + 3_000),
            result("r1", "read", "y".repeat(40_000), false, T0 + 4_000),
        ],
        vec![
            tool_call("l1", "ls", json!({"path": "."}), T0 + 5_000),
            result("l1", "ls", "f.txt".into(), false, T0 + 6_000),
        ],
    ]
}

#[test]
fn a_switch_is_free_when_the_call_rewrites_the_suffix_anyway() {
    // The engine starts on the first prompt alone (nothing to show: only
    // the start switch), then sees three calls, each adding one turn.
    let start = |prompt: &str| {
        let calls = failed_write_then_a_large_read(prompt);
        let lines: Vec<Value> = calls[0]
            .iter()
            .map(|m| json!({"type": "message", "message": serde_json::from_str::<Value>(&m.json()).expect("json")}))
            .collect();
        let mut e = started("cache-aware", &lines);
        let (_, effects) = e.context_at(1, vec![], &call(T0 + 500));
        assert_eq!(reasons(&effects), ["start"]);
        let mut held = 1;
        for (n, turn) in calls[1..3].iter().enumerate() {
            let (_, effects) =
                e.context_at(held, turn.clone(), &call(T0 + 2_500 + 2_000 * n as i64));
            assert!(switches(&effects).is_empty(), "{effects:?}");
            held += turn.len();
        }
        (e, calls, held)
    };

    // The fourth call, warm: the purge removes P tokens, but the rewrite
    // from the failed call on, the large output included, costs more than
    // the eight calls expected after it save (R = 3 · 3 calls so far).
    let (mut e, calls, held) = start("go");
    let (_, effects) = e.context_at(held, calls[3].clone(), &call(T0 + 6_500));
    assert!(switches(&effects).is_empty(), "{effects:?}");

    // The same call when the host's context changed at its first message
    // (as after pi's compaction): the whole prompt is written whether it
    // switches or not, so the switch costs nothing beyond it and pays.
    let (mut e, _, _) = start("go");
    let mut changed: Vec<Message> = failed_write_then_a_large_read("GO")
        .into_iter()
        .flatten()
        .collect();
    changed.truncate(held + calls[3].len());
    let (_, effects) = e.context_at(0, changed, &call(T0 + 6_500));
    let switched = switches(&effects);
    assert_eq!(switched.len(), 1, "{effects:?}");
    assert_eq!(switched[0]["reason"], "pays");
    let removed = switched[0]["removedTokens"]
        .as_f64()
        .expect("removed tokens");
    assert!(removed > 900.0, "the purged argument: {removed}");
    assert_eq!(switched[0]["rewriteCost"], json!(0.0));
    // Eight later calls, each reading P fewer tokens at 0.1.
    let saving = switched[0]["projectedSaving"].as_f64().expect("saving");
    assert!((saving - 8.0 * removed * 0.1).abs() < 1e-6, "{saving}");
}

#[test]
fn the_estimate_against_no_pruning_starts_again_with_each_session() {
    let lines = branch_lines();
    let mut e = started("cache-aware", &lines);
    let saved = |e: &Engine| {
        e.economy_report()
            .against_no_pruning
            .map(|a| a.saved_units)
            .expect("the cache-aware policy reports its estimate")
    };
    assert_eq!(saved(&e), 0.0);
    // The resume switch shows the summary in place of 2,400 characters of
    // output: both prompts are written whole, the pruned one is smaller.
    let n = e.messages().len();
    let (_, effects) = e.context_at(n, vec![next_prompt()], &call(T0 + 10));
    assert_eq!(switches(&effects).len(), 1);
    assert!(saved(&e) > 0.0, "{}", saved(&e));
    // Another session (or a restart): nothing it saved pays for a bet here.
    e.start(StartParams {
        settings: json!({"contextPrune": {"enabled": true, "economy": {"policy": "cache-aware"}}}),
        session_id: "other".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch: linked(&lines[..4]),
        tree: false,
    });
    assert_eq!(saved(&e), 0.0);
}

/// A branch pi-condense wrote (a summary, no switch entry) under the
/// default settings: the first call renders exactly what `reference`
/// renders and records the start switch, which removes nothing; a reload
/// with it renders the same and records no other.
#[test]
fn the_default_takes_over_a_pi_condense_branch_without_changing_a_byte() {
    let lines: Vec<Value> = branch_lines()
        .into_iter()
        .filter(|l| l["customType"] != "context-prune-switch")
        .collect();
    let mut e = started_bounded(&lines);
    assert!(e.config().economy.policy.gates_on_switch());
    let n = e.messages().len();
    let (steps, effects) = e.context_at(n, vec![next_prompt()], &call(T0 + 10));
    assert_eq!(reasons(&effects), ["start"]);
    let start = switches(&effects).remove(0);
    assert_eq!(start["messageCount"], json!(n + 1));
    assert!(start.get("removedTokens").is_none(), "{start}");
    let shown = rendered(&e, &steps);
    assert!(shown[2].contains("[Summarized in pruner summary, ref `t1`."));
    let mut reference = started("reference", &lines);
    let (ref_steps, _) = reference.context_at(n, vec![next_prompt()], &call(T0 + 10));
    assert_eq!(rendered(&reference, &ref_steps), shown);
    // The start switch is no decision: status leaves it out.
    assert_eq!(e.economy_report().switches, 0);

    let mut with_start = lines.clone();
    with_start.push(json!({"type": "custom", "customType": "context-prune-switch", "data": start}));
    let mut reloaded = started_bounded(&with_start);
    let (re_steps, re_effects) = reloaded.context_at(n, vec![next_prompt()], &call(T0 + 20));
    assert!(switches(&re_effects).is_empty(), "{re_effects:?}");
    assert_eq!(rendered(&reloaded, &re_steps), shown);
    assert_eq!(reloaded.economy_report().switches, 0);
}

/// A run's reply left its flush to the next run, and the process ended. A
/// restarted engine weighs that flush with the turns the branch holds (its
/// queue is empty: no turn ended in this process) at the call it precedes:
/// a minute later the call is warm and nothing saved pays for the
/// summarizer, so it waits; past the time to live the call is cold, and
/// showing the summary there saves more than the summarizer reads.
#[test]
fn a_replys_flush_held_across_a_restart_is_weighed_with_the_branchs_turns() {
    let lines = read_and_reply(2_000);
    assert_eq!(started_bounded(&lines).agent_start(T0 + 60_000), None);
    assert!(started_bounded(&lines).agent_start(RESUMED).is_some());
}

/// pi's tree navigation inside a running process (`session_tree`): the
/// next prompt shares with the last one what comes before the fork, and
/// the provider holds it, so the call after it is as warm as any other.
#[test]
fn a_navigation_in_a_running_process_keeps_the_cache_warm() {
    let lines = branch_with_a_long_exchange();
    let mut e = started_bounded(&lines);
    let n = e.messages().len();
    let (_, effects) = e.context_at(n, vec![next_prompt()], &call(T0 + 60_000));
    assert!(switches(&effects).is_empty(), "{effects:?}");
    // Back to the last reply, and a prompt from there.
    e.start(StartParams {
        settings: Value::Null,
        session_id: "s".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch: linked(&lines),
        tree: true,
    });
    let n = e.messages().len();
    let (_, effects) = e.context_at(n, vec![next_prompt()], &call(T0 + 70_000));
    assert!(switches(&effects).is_empty(), "{effects:?}");
}

/// The line `/pruner status` gives of what the policy holds back.
fn holding(e: &Engine) -> String {
    e.economy_report()
        .lines()
        .into_iter()
        .find(|l| l.starts_with("holding back:"))
        .expect("a holding line under the cache-aware policy")
}

/// `/pruner status` says in one line what is held back and why: a warm
/// call under the bound with nothing saved may not bet, an unbounded one
/// waits while the rewrite costs more than it saves, and a cold call shows
/// it all.
#[test]
fn the_status_says_what_is_held_back_and_why() {
    let lines = branch_with_a_long_exchange();
    let mut bounded = started_bounded(&lines);
    let n = bounded.messages().len();
    let (_, effects) = bounded.context_at(n, vec![next_prompt()], &call(T0 + 60_000));
    assert!(switches(&effects).is_empty());
    assert!(
        holding(&bounded).ends_with("summarized, not shown (allowance spent)"),
        "{}",
        holding(&bounded)
    );

    let mut unbounded = started("cache-aware", &lines);
    let (_, effects) = unbounded.context_at(n, vec![next_prompt()], &call(T0 + 60_000));
    assert!(switches(&effects).is_empty());
    assert!(
        holding(&unbounded).ends_with("summarized, not shown (waiting for a cold cache)"),
        "{}",
        holding(&unbounded)
    );

    let (_, effects) = unbounded.context_at(n + 1, vec![], &call(T0 + 60_000 + 400_000));
    assert_eq!(reasons(&effects), ["idle-expiry"]);
    assert_eq!(holding(&unbounded), "holding back: nothing");
}
