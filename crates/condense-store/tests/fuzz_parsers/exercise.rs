//! What a reader does with what it parsed: every use condense makes of a
//! session or a message, so that a panic anywhere in them fails the property.

use condense_core::query;
use condense_core::Config;
use condense_core::{tool_result_text, Message};
use condense_store::context::build_context;
use condense_store::entries::CondenseEntry;
use condense_store::replay::replay_branch;
use condense_store::session::Session;
use serde_json::Value;

/// Everything condense does with a session it reads: the branch, the context,
/// replay, every entry decoder, the render and queries of every record.
pub fn exercise(session: &Session, bytes: &[u8]) {
    let lines = bytes.iter().filter(|b| **b == b'\n').count() + 1;
    for p in &session.problems {
        assert!(
            p.line <= lines,
            "problem line {} past the file ({lines} lines)",
            p.line
        );
        let _ = p.to_string();
    }
    let _ = session.to_jsonl();
    let _ = session.leaf();
    let branch = session.branch(None);
    let ctx = build_context(&branch);
    assert_eq!(ctx.messages.len(), ctx.entry_ids.len());
    for e in &session.entries {
        let _ = session.branch(Some(&e.id));
        let _ = e.payload::<Value>();
        let _ = e.custom_message_fields();
        let _ = e.raw_field("summary");
        let _ = CondenseEntry::from_entry(e).map(|r| r.map(|c| c.payload_json()));
        let _ = condense_store::entries::summary_text(e);
    }
    let (state, _) = replay_branch(&branch);
    let config = Config {
        enabled: true,
        ..Config::default()
    };
    let protection = condense_core::Protection::new(&config);
    let settings = condense_core::RenderSettings {
        config: &config,
        protection: &protection,
    };
    let r = condense_core::render(&ctx.messages, &state, &settings);
    let _ = r.messages(&ctx.messages);
    let mut ids: Vec<String> = state
        .records()
        .iter()
        .flat_map(|r| [r.tool_call_id.clone(), r.key().to_string()])
        .collect();
    ids.extend(["t1".to_owned(), "nope".to_owned()]);
    let _ = query(&state, &ids, |_| None);
    let _ = condense_core::capture_pending(
        &ctx.messages,
        &vec![None; ctx.messages.len()],
        ctx.turns_before,
        &state,
        &protection,
        config.batching_mode,
        0,
    );
}

pub fn exercise_message(m: &Message) {
    let _ = m.skeleton();
    let _ = m.to_exact_value();
    let text = m.result_text();
    let _ = (
        m.size(),
        m.role(),
        m.timestamp(),
        m.is_text_only_assistant(),
        m.is_summary_message(),
    );
    // A value serde cannot hold (a number out of range) is an error, not a
    // panic; one it holds is a message again, with the same text.
    if let Ok(v) = m.to_value() {
        assert_eq!(tool_result_text(&v), text);
        let again = Message::from_value(&v).expect("a message's own value is a message");
        assert_eq!(again.skeleton().role, m.skeleton().role);
    }
}
