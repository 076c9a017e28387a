//! The `context` protocol when the host and the sidecar disagree: a
//! request the sidecar's copy cannot honour (a `keep` past what it holds, a
//! message it cannot read) is refused (`out-of-sync`), never answered with
//! a plan for a list the host does not hold; one it honours renders the
//! host's list as a fresh engine sent the whole list renders it.

use condense_core::{apply_steps, Message};
use condense_engine::sidecar::checked_context;
use condense_engine::{Engine, StartParams};
use proptest::prelude::*;
use serde_json::{json, value::RawValue};

const T0: i64 = 1_780_000_000_000;

fn engine() -> Engine {
    let mut e = Engine::default();
    // Failed calls' arguments are purged at render time once they ripen:
    // renders change the list with no flush, so the comparison has teeth.
    e.start(StartParams {
        settings: json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}),
        session_id: "sync".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch: String::new(),
        tree: false,
    });
    e
}

/// One turn: a prompt, a call with a large argument, its result (failed
/// or not).
fn turn(n: usize, failed: bool) -> Vec<Message> {
    let id = format!("call_{n}");
    let t = T0 + n as i64 * 1000;
    [
        json!({"role": "user", "content": [{"type": "text", "text": format!("step {n}")}], "timestamp": t}),
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": id, "name": "write", "arguments": {"path": format!("f{n}.txt"), "content": "x".repeat(3000)}}], "stopReason": "toolUse", "timestamp": t + 1}),
        json!({"role": "toolResult", "toolCallId": id, "toolName": "write", "content": [{"type": "text", "text": if failed { "error: denied" } else { "ok" }}], "isError": failed, "timestamp": t + 2}),
    ]
    .iter()
    .map(|v| Message::from_json(&v.to_string()).unwrap())
    .collect()
}

fn raw(messages: &[Message]) -> Vec<Box<RawValue>> {
    messages
        .iter()
        .map(|m| RawValue::from_string(m.json().to_string()).unwrap())
        .collect()
}

/// What the model is sent for `host` by an engine that receives it whole.
fn fresh_render(host: &[Message]) -> Vec<Message> {
    let mut e = engine();
    let (steps, _) = e.context(0, host.to_vec());
    steps.map_or_else(|| host.to_vec(), |s| apply_steps(&s, host))
}

#[derive(Debug, Clone)]
enum Op {
    /// The host's list grows by a turn.
    Turn(bool),
    /// The host sends `context`: `keep` off what it synced by this much,
    /// with an unreadable message among the appended ones or not.
    Send { keep_off: i64, garbage: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => any::<bool>().prop_map(Op::Turn),
        4 => (prop_oneof![3 => Just(0i64), 1 => -3i64..6], prop::bool::weighted(0.15))
            .prop_map(|(keep_off, garbage)| Op::Send { keep_off, garbage }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn a_context_is_rendered_for_the_hosts_list_or_refused(ops in prop::collection::vec(op(), 1..24)) {
        let mut e = engine();
        let mut host: Vec<Message> = Vec::new();
        // What the host believes the sidecar holds (a shim's key table).
        let mut synced = 0usize;
        let mut turns = 0;
        for op in ops {
            match op {
                Op::Turn(failed) => {
                    host.extend(turn(turns, failed));
                    turns += 1;
                }
                Op::Send { keep_off, garbage } => {
                    let keep = (synced as i64 + keep_off).max(0) as usize;
                    let mut append = raw(&host[keep.min(host.len())..]);
                    if garbage {
                        append.push(RawValue::from_string(r#"{"role": 5}"#.to_owned()).unwrap());
                    }
                    match checked_context(&e, keep, &append) {
                        Err(why) => {
                            prop_assert!(garbage || keep > e.host_len(), "refused a request it could honour: {why}");
                            // The host passes its list unchanged and resends it whole.
                            synced = 0;
                        }
                        Ok(messages) => {
                            prop_assert!(!garbage);
                            prop_assert!(keep <= e.host_len());
                            let (steps, _) = e.context(keep, messages);
                            if keep > host.len() {
                                // A keep past the host's own list is the host's lie;
                                // whatever comes back, it addresses what the engine holds.
                                synced = 0;
                                continue;
                            }
                            if let Some(steps) = &steps {
                                for s in steps {
                                    if let condense_core::PlanStep::Keep(r) = s {
                                        prop_assert!(r.end <= host.len(), "a plan past the host's list: {r:?} of {}", host.len());
                                    }
                                }
                            }
                            let out = steps.map_or_else(|| host.clone(), |s| apply_steps(&s, &host));
                            let expected = fresh_render(&host);
                            let as_json = |m: &[Message]| m.iter().map(|x| x.json().to_string()).collect::<Vec<_>>();
                            prop_assert_eq!(as_json(&out), as_json(&expected));
                            synced = host.len();
                        }
                    }
                }
            }
        }
    }
}

/// A history handed over whole queues the work its turns' ends would have
/// queued, one turn at a time, and renders the same.
#[test]
fn a_history_appended_whole_queues_what_its_turns_would_have() {
    let history: Vec<Message> = (0..12).flat_map(|n| turn(n, n % 5 == 3)).collect();
    let mut by_turn = engine();
    let mut held = 0;
    for (n, m) in history.chunks(3).enumerate() {
        let (_, _) = by_turn.context(held, m[..1].to_vec());
        held += 1;
        by_turn.message_end(&m[1]);
        let (_, _) = by_turn.turn_end(n as i64, &m[1], &m[2..], None, 200_000, T0);
        let (_, _) = by_turn.context(held, m[1..].to_vec());
        held += 2;
    }
    let mut whole = engine();
    let _ = whole.appended(0, history.clone(), T0);
    assert_eq!(whole.pending_len(), by_turn.pending_len());
    assert!(whole.pending_len() > 0);
    let (a, _) = whole.context(history.len(), Vec::new());
    let (b, _) = by_turn.context(history.len(), Vec::new());
    assert_eq!(a, b);
}
