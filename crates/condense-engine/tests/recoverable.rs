//! `Driver::unrecoverable` counts what `context_tree_query` cannot give
//! back whole, as the live tool answers: from the index when it knows the
//! key (then never from the context, which may still hold the message),
//! and an output it does not know from the whole branch the session file
//! holds (pi's compaction leaves outputs only there).

use condense_engine::drive::Driver;
use condense_store::session::Session;
use serde_json::{json, Value};

mod support;
use support::*;

/// Run 1 reads a giant file (spilled at its turn's end) and replies; when
/// `compacted`, pi then compacts run 1 away; run 2 is a prompt and a reply.
fn a_spilled_read(compacted: bool) -> Session {
    let giant: String = (0..3_000)
        .map(|l| format!("g0 line {l:05}: data data data\n"))
        .collect();
    let mut messages = vec![
        json!({"role": "user", "content": [{"type": "text", "text": "read it"}], "timestamp": T0}),
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": "g0", "name": "read",
            "arguments": {"path": "big.log"}}], "stopReason": "toolUse", "timestamp": T0 + 1_000,
            "provider": "anthropic", "model": "claude-x"}),
        json!({"role": "toolResult", "toolCallId": "g0", "toolName": "read",
            "content": [{"type": "text", "text": giant}], "isError": false, "timestamp": T0 + 1_500}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "Read."}],
            "stopReason": "stop", "timestamp": T0 + 2_000, "provider": "anthropic", "model": "claude-x"}),
    ];
    if compacted {
        messages.push(json!({"type": "compaction", "summary": "read big.log",
            "firstKeptEntryId": null, "tokensBefore": 30_000}));
    }
    messages.extend(next_run(T0 + MIN));
    session_of("s", "s", messages)
}

/// A prompt and its reply at `t`.
fn next_run(t: i64) -> Vec<Value> {
    vec![
        json!({"role": "user", "content": [{"type": "text", "text": "next"}], "timestamp": t}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "Ok."}],
            "stopReason": "stop", "timestamp": t + 1_000, "provider": "anthropic", "model": "claude-x"}),
    ]
}

fn played(session: &Session, dir: &std::path::Path) -> Driver {
    let mut d = driver_in("reference", dir);
    let prompts = play(&mut d, &session.branch(None));
    assert!(
        prompts
            .last()
            .is_some_and(|p| p.iter().all(|m| !m.json().contains("g0 line 02999"))),
        "the last call is sent the output's stub"
    );
    assert_eq!(d.removed_outputs(), 1);
    d
}

/// Deletes every spill blob below `dir`.
fn lose_the_spills(dir: &std::path::Path) {
    let blobs = std::fs::read_dir(dir)
        .expect("the session dir")
        .map(|e| e.expect("an entry").path())
        .find(|p| p.is_dir())
        .expect("a blob directory");
    for blob in std::fs::read_dir(&blobs).expect("the blob directory") {
        std::fs::remove_file(blob.expect("a blob").path()).expect("a blob removed");
    }
}

#[test]
fn an_output_pis_compaction_left_only_in_the_index_is_recoverable_until_its_spill_is_lost() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let d = played(&a_spilled_read(true), dir.path());
    assert!(
        d.engine()
            .messages()
            .iter()
            .all(|m| !m.json().contains("\"g0\"")),
        "the compaction left the read out of the context"
    );
    assert_eq!(d.unrecoverable(), 0, "the index gives it back");
    lose_the_spills(dir.path());
    assert_eq!(d.unrecoverable(), 1, "the index has only its preview");
}

#[test]
fn an_output_the_index_cannot_give_back_is_lost_though_the_context_still_holds_it() {
    // `context_tree_query` answers a key the index knows from the index
    // alone: the message still in the context is never read.
    let dir = tempfile::tempdir().expect("a temp dir");
    let d = played(&a_spilled_read(false), dir.path());
    assert!(d
        .engine()
        .messages()
        .iter()
        .any(|m| m.json().contains("g0 line 02999")));
    assert_eq!(d.unrecoverable(), 0);
    lose_the_spills(dir.path());
    assert_eq!(d.unrecoverable(), 1);
}

#[test]
fn an_output_only_the_session_file_still_holds_is_recoverable() {
    // A result whose call is not on the branch is swept from every prompt
    // and never indexed; once pi compacts it out of the context,
    // `context_tree_query` still reads it by its raw id from the file.
    let text: String = (0..200).map(|l| format!("o1 line {l:03}\n")).collect();
    let mut messages = vec![
        json!({"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0}),
        json!({"role": "toolResult", "toolCallId": "o1", "toolName": "read",
            "content": [{"type": "text", "text": text}], "isError": false, "timestamp": T0 + 500}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "Ok."}],
            "stopReason": "stop", "timestamp": T0 + 1_000, "provider": "anthropic", "model": "claude-x"}),
    ];
    let before = session_of("o", "o", messages.clone());
    messages.push(json!({"type": "compaction", "summary": "went",
        "firstKeptEntryId": null, "tokensBefore": 3_000}));
    messages.extend(next_run(T0 + MIN));
    let after = session_of("o", "o", messages);
    for (session, compacted) in [(before, false), (after, true)] {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut d = driver_in("reference", dir.path());
        let prompts = play(&mut d, &session.branch(None));
        assert!(prompts
            .iter()
            .all(|p| p.iter().all(|m| !m.json().contains("o1 line"))));
        assert_eq!(d.removed_outputs(), 1, "compacted: {compacted}");
        let in_context = d
            .engine()
            .messages()
            .iter()
            .any(|m| m.json().contains("o1 line"));
        assert_eq!(in_context, !compacted);
        assert_eq!(d.unrecoverable(), 0, "compacted: {compacted}");
    }
}
