//! Under the cache-aware policy, outside pressure, no call shows a tool
//! output as a stub before some earlier call sent it raw: the model gets
//! the output its own call asked for, then a summary of it.

use std::collections::{HashMap, HashSet};

use condense_core::{Message, Role};
use condense_store::session::{Entry, Session};
use serde_json::{json, Value};

mod support;
use support::*;

fn result_id(m: &Message) -> Option<String> {
    m.is(&Role::ToolResult)
        .then(|| m.skeleton().tool_call_id.clone())
        .flatten()
}

/// Each (call, tool-call id) whose prompt shows that output other than as
/// recorded (a stub) while no earlier prompt held it as recorded, each
/// output once.
fn stubbed_before_seen(branch: &[&Entry], prompts: &[Vec<Message>]) -> Vec<(usize, String)> {
    let recorded: HashMap<String, &Message> = branch
        .iter()
        .filter_map(|e| e.message.as_ref())
        .filter_map(|m| result_id(m).map(|id| (id, m)))
        .collect();
    let mut seen = HashSet::new();
    let mut unseen = Vec::new();
    for (call, prompt) in prompts.iter().enumerate() {
        for m in prompt {
            let Some(id) = result_id(m) else { continue };
            if recorded.get(&id).is_some_and(|r| *r == m) {
                seen.insert(id);
            } else if seen.insert(id.clone()) {
                // Reported once, at the first call that shows it unseen.
                unseen.push((call, id));
            }
        }
    }
    unseen
}

/// Plays `s` under `economy`: the outputs stubbed unseen, and whether
/// anything was summarized and shown at all (else the check is empty).
fn play_session(s: &Session, economy: Value) -> (Vec<(usize, String)>, u64, u64) {
    let branch = s.branch(None);
    let mut d = driver_with(economy);
    let prompts = play(&mut d, &branch);
    assert_eq!(d.unrecoverable(), 0);
    d.reload_renders_the_same().expect("same render");
    (
        stubbed_before_seen(&branch, &prompts),
        d.flushes(),
        d.switches(),
    )
}

/// One prompt, then `turns` reads a second apart, with a pause of `pause`
/// ms before each read in `paused` (the cache goes cold there).
fn long_run_pausing(turns: usize, paused: &[usize], pause: i64) -> Session {
    let mut messages =
        vec![json!({"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0})];
    let mut at = T0;
    for n in 0..turns {
        at += 1_000 + if paused.contains(&n) { pause } else { 0 };
        messages.extend(read_turn(
            &format!("r{n}"),
            &format!("f{n}.txt"),
            &format!("f{n}"),
            at,
        ));
        at += 1_000;
    }
    session_of("p", "p", messages)
}

#[test]
fn a_long_runs_flush_never_shows_an_output_as_a_stub_before_a_call_sent_it() {
    let (unseen, flushes, switches) = play_session(
        &long_run(30),
        json!({"policy": "cache-aware", "maxExcess": null}),
    );
    assert!(flushes > 0 && switches > 0, "the run was summarized");
    assert_eq!(unseen, Vec::<(usize, String)>::new());
    let (unseen, flushes, switches) = play_session(
        &two_runs(),
        json!({"policy": "cache-aware", "maxExcess": null}),
    );
    assert!(flushes > 0 && switches > 0);
    assert_eq!(unseen, Vec::<(usize, String)>::new());
}

#[test]
fn a_long_runs_flush_after_a_cold_pause_never_shows_an_output_unseen() {
    // Pauses past the cache's five minutes: a cold call rewrites the
    // prompt anyway, the moment a switch is cheapest.
    let s = long_run_pausing(30, &[12, 18, 24], 10 * MIN);
    let (unseen, flushes, switches) =
        play_session(&s, json!({"policy": "cache-aware", "maxExcess": null}));
    assert!(flushes > 0 && switches > 0);
    assert_eq!(unseen, Vec::<(usize, String)>::new());
}

#[test]
fn the_bounded_policys_long_run_never_shows_an_output_unseen() {
    // Run 1's savings pay run 2's flushes, which merge its turns.
    let (unseen, flushes, switches) = play_session(
        &two_runs(),
        json!({"policy": "cache-aware", "maxExcess": 0}),
    );
    assert!(flushes > 0 && switches > 0);
    assert_eq!(unseen, Vec::<(usize, String)>::new());
}

/// One prompt, then `turns` reads a second apart; read `slow`'s tool takes
/// `takes` ms (a build or a test suite): its result comes that long after
/// its call, and the run's next call after it.
fn run_with_a_slow_tool(turns: usize, slow: usize, takes: i64) -> Session {
    session_of("slow", "s", slow_tool_messages(turns, slow, takes, true))
}

/// The messages of [`run_with_a_slow_tool`]; without `replies`, the
/// recording stops at the last turn's result: a run cut off (pi stopped, or
/// the session still running) before the call those results go to.
fn slow_tool_messages(turns: usize, slow: usize, takes: i64, replies: bool) -> Vec<Value> {
    let mut messages =
        vec![json!({"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0})];
    let mut at = T0;
    for n in 0..turns {
        at += 1_000;
        let [call, mut result] =
            read_turn(&format!("r{n}"), &format!("f{n}.txt"), &format!("f{n}"), at);
        if n == slow {
            at += takes;
            result["timestamp"] = json!(at + 500);
        }
        messages.extend([call, result]);
        at += 1_000;
    }
    if replies {
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Read them."}],
            "stopReason": "stop", "timestamp": at + 1_000, "provider": "anthropic", "model": "claude-x"}));
    }
    messages
}

/// A tool outliving the cache's time to live makes the run's next call
/// cold, a rewrite of the whole prompt whatever condense does: the default
/// policy summarizes at that turn's end what earlier calls sent, and that
/// call shows it, free, while the slow tool's own output, which no call has
/// sent yet, goes to the model raw. No gap between prompts ever comes in a
/// single autonomous run, so without this the bound (nothing saved) would
/// never show a summary there.
#[test]
fn a_tool_outliving_the_cache_has_the_run_summarized_at_its_turns_end() {
    let s = run_with_a_slow_tool(6, 4, 6 * MIN);
    let branch = s.branch(None);
    let mut d = driver_with(json!({"policy": "cache-aware", "maxExcess": 0}));
    let prompts = play(&mut d, &branch);
    assert_eq!(d.unrecoverable(), 0);
    d.reload_renders_the_same().expect("same render");
    assert_eq!(switch_reasons(&d), ["start", "idle-expiry"]);
    assert_eq!(
        stubbed_before_seen(&branch, &prompts),
        Vec::<(usize, String)>::new()
    );
    // The call after the slow tool: the four reads before it as stubs,
    // its own output raw.
    let after = &prompts[5];
    let raw = |id: &str| {
        after.iter().any(|m| {
            result_id(m).as_deref() == Some(id)
                && branch
                    .iter()
                    .filter_map(|e| e.message.as_ref())
                    .any(|r| r == m)
        })
    };
    assert!(
        (0..4).all(|n| !raw(&format!("r{n}"))),
        "the first four summarized"
    );
    assert!(raw("r4"), "the slow tool's output sent raw");
    // Before it, nothing was summarized: the calls were warm.
    assert!(prompts[..5]
        .iter()
        .all(|p| p.iter().all(|m| !m.is_summary_message())));
}

/// The same slow tool as the last of a recording that stops at its result:
/// the call the turn-end flush would pay for is not in it, so neither is
/// the flush. Priced up to its last call, the session never summarized
/// anything; run, the flush would have billed its summarizer for nothing
/// and the default more than no pruning (generated sessions cut there did:
/// docs/economy.md).
#[test]
fn a_run_cut_off_after_a_slow_tool_is_priced_up_to_its_last_call() {
    let s = session_of("cut", "c", slow_tool_messages(5, 4, 6 * MIN, false));
    let branch = s.branch(None);
    let mut d = driver_with(json!({"policy": "cache-aware", "maxExcess": 0}));
    let prompts = play(&mut d, &branch);
    assert_eq!(prompts.len(), 5);
    assert_eq!(d.flushes(), 0);
    assert_eq!(d.summarizer_tokens().input, 0);
    assert_eq!(d.unrecoverable(), 0);
    d.reload_renders_the_same().expect("same render");
    // With the reply that answers those results, the turn's end flushes
    // (the test above): only the missing call keeps it out.
    let s = session_of("cut", "c", slow_tool_messages(5, 4, 6 * MIN, true));
    let branch = s.branch(None);
    let mut d = driver_with(json!({"policy": "cache-aware", "maxExcess": 0}));
    play(&mut d, &branch);
    assert_eq!(d.flushes(), 1);
    assert!(d.summarizer_tokens().input > 0);
}
