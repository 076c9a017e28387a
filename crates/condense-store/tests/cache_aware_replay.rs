//! The cache-aware policy's determinism over generated sessions.
//!
//! A generated pruned session gets `context-prune-switch` entries inserted
//! before randomly chosen LLM calls (before an assistant message, with the
//! context's message count, as the engine appends them). Then, at every call:
//! - the live state (core's `State` mutated entry by entry as flushes and
//!   switches happen) and a reload (the store's replay of the branch up to
//!   that call) render the same bytes under the cache-aware policy;
//! - under the reference policy the session with switches renders exactly
//!   as the same session without them.

mod common;

use common::rendered;
use condense_core::{Branch, Config, EconomyConfig, OccurrenceKey, Policy, Role};
use condense_store::entries::{summary_text, CondenseEntry};
use condense_store::replay::replay_branch;
use condense_store::{build_context, Entry, EntryType, Session};
use proptest::prelude::*;
use serde_json::{json, Value};

/// A pruned generated session's JSONL.
fn generated(seed: u64, tasks: usize) -> String {
    condense_gen::generate(&condense_gen::SynthOptions {
        seed,
        shape: condense_gen::Shape::Realistic { tasks },
        pruned: true,
        ..Default::default()
    })
}

/// `text` with a start switch before the first assistant message and a
/// switch entry before each one whose ordinal (among assistant messages)
/// `chosen` picks; parent ids relinked.
fn with_switches(text: &str, chosen: &[bool]) -> String {
    let session = Session::parse(text);
    let branch = session.branch(None);
    let mut lines: Vec<Value> = Vec::new();
    let mut header = None;
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("generated lines parse");
        if v["type"] == "session" {
            header = Some(line.to_owned());
        } else {
            lines.push(v);
        }
    }
    let mut out: Vec<Value> = Vec::new();
    let mut assistant = 0usize;
    for (k, (v, entry)) in lines.into_iter().zip(&branch).enumerate() {
        let is_assistant = entry
            .message
            .as_ref()
            .is_some_and(|m| m.is(&Role::Assistant));
        if is_assistant {
            // The engine starts gating at the first call it renders.
            let start = assistant == 0;
            if start || chosen.get(assistant).copied().unwrap_or(false) {
                let count = build_context(&branch[..k]).messages.len();
                let reason = if start { "start" } else { "pays" };
                out.push(json!({
                    "type": "custom", "customType": "context-prune-switch",
                    "data": {"reason": reason, "messageCount": count},
                    "id": format!("sw{assistant:06}"), "parentId": null,
                    "timestamp": "2026-01-01T00:00:00.000Z",
                }));
            }
            assistant += 1;
        }
        out.push(v);
    }
    let mut parent = Value::Null;
    let mut text = header.expect("a header") + "\n";
    for mut v in out {
        v["parentId"] = parent.clone();
        parent = v["id"].clone();
        text.push_str(&serde_json::to_string(&v).expect("values serialize"));
        text.push('\n');
    }
    text
}

/// Applies one branch entry to a live state, the way a flush or a switch
/// mutates it in the sidecar.
fn apply_live(state: &mut Branch, entry: &Entry) {
    let Some(Ok(parsed)) = CondenseEntry::from_entry(entry) else {
        return;
    };
    match parsed {
        CondenseEntry::Index(d) => {
            let backfilled = d.backfilled == Some(true);
            for r in d.tool_calls {
                state.add_record(r, !backfilled);
            }
            if let Some(refs) = d.refs.filter(|_| backfilled) {
                state.register_summary_refs(&refs);
            }
        }
        CondenseEntry::Summary(d) => {
            let refs = d.refs();
            state.register_summary_refs(&refs);
            state.register_summary_body(
                refs.iter().map(|r| r.key()).collect(),
                summary_text(entry).unwrap_or_default(),
            );
        }
        CondenseEntry::Chain(c) => state.register_chain(c),
        CondenseEntry::DedupAlias(a) => state.register_dedup_alias(
            &OccurrenceKey::new(a.new_tool_call_id, a.new_result_timestamp),
            &OccurrenceKey::new(a.original_tool_call_id, a.original_result_timestamp),
        ),
        CondenseEntry::Switch(s) => state.record_switch(s.message_count as usize),
        _ => {}
    }
}

fn config(policy: Policy) -> Config {
    Config {
        enabled: true,
        economy: EconomyConfig {
            policy,
            ..Config::default().economy
        },
        ..Config::default()
    }
}

/// Positions of the assistant messages (the LLM calls) on a branch.
fn calls(branch: &[&Entry]) -> Vec<usize> {
    branch
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EntryType::Message)
        .filter(|(_, e)| e.message.as_ref().is_some_and(|m| m.is(&Role::Assistant)))
        .map(|(k, _)| k)
        .collect()
}

/// The first position where two renders differ (or the shorter length).
fn first_difference(a: &[String], b: &[String]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

fn check(seed: u64, tasks: usize, chosen: &[bool]) -> Result<(), TestCaseError> {
    let switched_text = with_switches(&generated(seed, tasks), chosen);
    let switched = Session::parse(&switched_text);
    let branch = switched.branch(None);
    // The same entries without the switches (the lines are byte for byte
    // those of the switched file).
    let plain_branch: Vec<&Entry> = branch
        .iter()
        .copied()
        .filter(|e| !e.is_custom("context-prune-switch"))
        .collect();
    let cache_aware = config(Policy::CacheAware);
    let reference = config(Policy::Reference);

    let mut live = Branch::new();
    let mut applied = 0usize;
    let plain_calls = calls(&plain_branch);
    let switched_calls = calls(&branch);
    prop_assert_eq!(plain_calls.len(), switched_calls.len());
    // The start switch, then the chosen ones after the first call.
    let inserted = usize::from(!plain_calls.is_empty())
        + chosen
            .iter()
            .take(plain_calls.len())
            .skip(1)
            .filter(|c| **c)
            .count();
    prop_assert_eq!(branch.len() - plain_branch.len(), inserted);
    let mut indexed_seen = false;
    for (&k, &pk) in switched_calls.iter().zip(&plain_calls) {
        for e in &branch[applied..k] {
            apply_live(&mut live, e);
        }
        applied = k;
        let messages = build_context(&branch[..k]).messages;
        let (reloaded, problems) = replay_branch(&branch[..k]);
        prop_assert!(problems.is_empty(), "{:?}", problems);
        let live_bytes = rendered(&messages, &live, &cache_aware);
        let reload_bytes = rendered(&messages, &reloaded, &cache_aware);
        prop_assert!(
            live_bytes == reload_bytes,
            "call at entry {}: live and reload differ from message {:?}",
            k,
            first_difference(&live_bytes, &reload_bytes)
        );
        indexed_seen |= live.indexed_count() > 0;

        let (plain_state, _) = replay_branch(&plain_branch[..pk]);
        let plain_messages = build_context(&plain_branch[..pk]).messages;
        let with = rendered(&messages, &reloaded, &reference);
        let without = rendered(&plain_messages, &plain_state, &reference);
        prop_assert!(
            with == without,
            "call at entry {}: switches changed the reference render from message {:?}",
            k,
            first_difference(&with, &without)
        );
    }
    // Whenever a flush came before a call, the live state held records
    // (the generator's sessions do flush; this keeps the check from passing
    // on sessions with nothing to show).
    let flushed = switched_calls.last().is_some_and(|&last| {
        branch[..last]
            .iter()
            .any(|e| e.is_custom("context-prune-index"))
    });
    prop_assert_eq!(indexed_seen, flushed);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn reload_renders_what_the_live_state_rendered(
        seed in 0u64..10_000,
        tasks in 2usize..5,
        chosen in prop::collection::vec(prop::bool::weighted(0.2), 0..80),
    ) {
        check(seed, tasks, &chosen)?;
    }
}

/// With only the start switch, the cache-aware render shows nothing flushed
/// since, and a switch before the last call shows what the reference
/// policy shows.
#[test]
fn a_switch_at_the_last_call_shows_what_reference_shows() {
    let text = generated(11, 3);
    let session = Session::parse(&text);
    let n = calls(&session.branch(None)).len();
    let mut chosen = vec![false; n];
    chosen[n - 1] = true;
    let switched = Session::parse(&with_switches(&text, &chosen));
    let branch = switched.branch(None);
    let last = *calls(&branch).last().expect("calls");
    let messages = build_context(&branch[..last]).messages;
    let (state, _) = replay_branch(&branch[..last]);
    let shown = rendered(&messages, &state, &config(Policy::CacheAware));
    assert_eq!(
        shown,
        rendered(&messages, &state, &config(Policy::Reference))
    );
    let (before_switch, _) = replay_branch(&branch[..last - 1]);
    let pending = rendered(&messages, &before_switch, &config(Policy::CacheAware));
    assert_ne!(pending, shown, "the session has summaries to switch in");
}
