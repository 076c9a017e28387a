//! Recorded usage a call's counts make absurd (negative, or past a billion
//! tokens) is left out of the economics, and said so: at start for the
//! calls the branch holds, and at the call for a new one.

use condense_engine::{Effect, Engine, StartParams};
use serde_json::{json, Value};

const T0: i64 = 1_780_000_000_000;

fn warnings(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Notify { text, .. } if text.contains("left out of the economics") => {
                Some(text.clone())
            }
            _ => None,
        })
        .collect()
}

fn assistant(usage: Value) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": "done"}],
        "stopReason": "stop", "usage": usage, "timestamp": T0 + 1_000})
}

fn start(e: &mut Engine, usage: Value) -> Vec<Effect> {
    let prompt = json!({"type": "message", "id": "00000000", "parentId": null,
        "timestamp": "2026-06-01T00:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0}});
    let reply = json!({"type": "message", "id": "00000001", "parentId": "00000000",
        "timestamp": "2026-06-01T00:00:01.000Z", "message": assistant(usage)});
    e.start(StartParams {
        settings: json!({"contextPrune": {"enabled": true}}),
        session_id: "s".into(),
        session_dir: None,
        misses_dir: None,
        session_file: None,
        branch: condense_engine::jsonl([prompt.to_string(), reply.to_string()]),
        tree: false,
    })
}

#[test]
fn a_branch_with_absurd_usage_is_reported_at_start() {
    let absurd =
        json!({"input": 18446744073709551615u64, "output": 1, "cacheRead": 0, "cacheWrite": 0});
    let said = warnings(&start(&mut Engine::default(), absurd));
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("entry 00000001"), "{said:?}");
    let sane = json!({"input": 1200, "output": 10, "cacheRead": 0, "cacheWrite": 0});
    assert!(warnings(&start(&mut Engine::default(), sane)).is_empty());
}

#[test]
fn a_call_with_absurd_usage_is_reported_when_it_ends() {
    let sane = json!({"input": 1200, "output": 10, "cacheRead": 0, "cacheWrite": 0});
    let mut e = Engine::default();
    start(&mut e, sane.clone());
    let at = T0 + 60_000;
    for (usage, expected) in [(json!({"input": -3, "output": 1}), 1), (sane, 0)] {
        let message = condense_core::Message::from_value(&assistant(usage)).expect("a message");
        let (effects, _) = e.turn_end(1, &message, &[], None, 200_000, at);
        assert_eq!(warnings(&effects).len(), expected);
    }
}
