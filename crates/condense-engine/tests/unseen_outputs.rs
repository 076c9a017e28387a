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
