//! The sidecar protocol never panics and never stops answering
//! (docs/reliability.md): `serve` runs over an in-memory duplex and is fed
//! arbitrary lines (bytes, JSON, well-shaped requests with arbitrary params,
//! mutated real requests, stray responses and events); every request with an
//! `id` must get its answer, every line the sidecar writes must be JSON, and
//! a final `hello` must still be answered.
//!
//! Also the protocol's limits and the sidecar's sandbox: a line over 64 MiB is
//! refused without being buffered (measured on the real binary: its peak RSS
//! grows by far less than the line), the sidecar opens no socket and starts
//! no process, and spill paths from a crafted session are not read.

#[path = "../support/mod.rs"]
mod support;

mod duplex;
mod inputs;
mod real_sidecar;

use std::io::Write;
use std::path::{Path, PathBuf};

use condense_engine::sidecar::MAX_LINE;
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use serde_json::{json, Value};

use duplex::{drive, runtime, Duplex, ANSWERS, LLM_CALLS};
use inputs::{fixture_branch, fixture_messages, line};
use real_sidecar::{crafted_session, entry_line, raw_lines_until, watchdog};
use support::sidecar::Sidecar;

fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(n),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[test]
fn the_protocol_survives_arbitrary_lines() {
    let mut runner = TestRunner::new(cases(48));
    runner
        .run(&prop::collection::vec(line(), 0..16), |lines| {
            runtime()
                .block_on(drive(lines))
                .map_err(TestCaseError::fail)
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_session_with_work_survives_arbitrary_lines() {
    // Start a real session first, so the arbitrary lines hit an engine with
    // state (renders, flushes, queries, commands): the fixture's messages
    // without condense's entries, so every output is pending work, and a
    // reply that flushes it.
    let messages: Vec<Value> = fixture_branch()
        .iter()
        .filter(|e| e["type"] == "message")
        .cloned()
        .collect();
    let start = json!({"id": "start", "method": "session.start", "params": {
        "reason": "startup", "settings": {"contextPrune": {"enabled": true, "minBatchChars": 0}},
        "sessionId": "fuzz", "branch": messages, "messages": null}})
    .to_string()
    .into_bytes();
    let reply = json!({"id": "reply", "method": "message.end", "params": {"message": {
        "role": "assistant", "content": [{"type": "text", "text": "done"}], "stopReason": "stop",
        "timestamp": 1_900_000_000_000i64}}})
    .to_string()
    .into_bytes();
    let mut runner = TestRunner::new(cases(32));
    runner
        .run(&prop::collection::vec(line(), 0..12), |lines| {
            let mut all = vec![start.clone()];
            let half = lines.len() / 2;
            all.extend(lines[..half].iter().cloned());
            all.push(reply.clone());
            all.extend(lines[half..].iter().cloned());
            runtime().block_on(drive(all)).map_err(TestCaseError::fail)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "fuzzed sidecars answered {} requests and made {} llm.complete calls (all tests so far)",
        ANSWERS.load(std::sync::atomic::Ordering::Relaxed),
        LLM_CALLS.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// The limit is exact: a line of `MAX_LINE` bytes is read, one byte more is
/// refused (a `protocol.error`) and the next line is answered.
#[test]
fn the_line_limit_is_exact() {
    runtime().block_on(async {
        let mut d = Duplex::start();
        let padded = |id: &str, len: usize| {
            let head = format!(r#"{{"id":"{id}","method":"hello","params":{{"protocol":1,"pad":""#);
            let tail = r#""}}"#;
            let mut line = head.into_bytes();
            line.resize(len - tail.len(), b'x');
            line.extend_from_slice(tail.as_bytes());
            line
        };
        d.send(padded("at-limit", MAX_LINE));
        let mut got = Vec::new();
        let a = d
            .wait_for(&json!("at-limit"), &mut got)
            .await
            .expect("answered");
        assert_eq!(a["result"]["protocol"], 1);
        d.send(padded("over-limit", MAX_LINE + 1));
        d.send(
            json!({"id": "after", "method": "hello", "params": {"protocol": 1}})
                .to_string()
                .into_bytes(),
        );
        let a = d
            .wait_for(&json!("after"), &mut got)
            .await
            .expect("answered");
        assert_eq!(a["result"]["protocol"], 1);
        assert!(
            got.iter()
                .all(|g| g["id"] != "over-limit" || g.get("error").is_some()),
            "the over-long line was not refused: {got:?}"
        );
    });
}

// ---- the real binary ----------------------------------------------------------------------

/// Bytes the sidecar's peak RSS may grow by while refusing a 70 MB line.
const HWM_BUDGET_KB: u64 = 200 * 1024;

#[test]
#[cfg(target_os = "linux")]
fn a_70_mb_line_is_refused_and_memory_stays_bounded() {
    let mut s = Sidecar::start();
    let hello = s.call("h1", "hello", json!({"protocol": 1}));
    assert_eq!(hello["result"]["protocol"], 1);
    let before = s.status("VmHWM:");
    // 70 MB in 1 MB writes: a request whose id comes first, padded far past
    // the limit.
    let chunk = vec![b'x'; 1 << 20];
    s.stdin
        .write_all(br#"{"id":"big","method":"hello","params":{"protocol":1,"pad":""#)
        .expect("write");
    for _ in 0..70 {
        s.stdin.write_all(&chunk).expect("write");
    }
    s.stdin.write_all(b"\"}}\n").expect("write");
    let hello = s.call("h2", "hello", json!({"protocol": 1}));
    assert_eq!(hello["result"]["protocol"], 1, "still answering");
    let after = s.status("VmHWM:");
    // The refusal: the line got no result (an error answer at most)…
    let (_, before_h3) = s.hello_until("h3");
    assert!(
        before_h3
            .iter()
            .all(|v| v["id"] != "big" || v.get("error").is_some()),
        "{before_h3:?}"
    );
    let grew = after.saturating_sub(before);
    println!(
        "sidecar VmHWM {before} kB before, {after} kB after a 70 MB line (+{grew} kB, budget {HWM_BUDGET_KB} kB)"
    );
    assert!(
        grew < HWM_BUDGET_KB,
        "peak RSS grew by {grew} kB refusing a 70 MB line"
    );
    // …and a second one does not grow the peak further.
    for _ in 0..70 {
        s.stdin.write_all(&chunk).expect("write");
    }
    s.stdin.write_all(b"\n").expect("write");
    let _ = s.call("h4", "hello", json!({"protocol": 1}));
    let again = s.status("VmHWM:");
    assert!(
        again.saturating_sub(before) < HWM_BUDGET_KB,
        "peak RSS grew to {again} kB after a second long line"
    );
}

/// The refusal of an over-long line tells the shim: a `protocol.error`
/// notification comes before the next answer.
#[test]
fn an_over_long_line_gets_a_protocol_error() {
    let mut s = Sidecar::start();
    let mut line = vec![b'y'; MAX_LINE + 10];
    line.push(b'\n');
    s.stdin.write_all(&line).expect("write");
    let (_, before) = s.hello_until("h");
    assert!(
        before.iter().any(|v| v["method"] == "protocol.error"),
        "no protocol.error before the next answer: {before:?}"
    );
}

/// A request whose handler fails (a message with a lone surrogate escape
/// that core cannot re-read, as issue 15 found) is answered with an error,
/// and the sidecar keeps serving: no poisoned lock, no exit.
#[test]
fn a_failing_request_is_answered_and_the_sidecar_keeps_serving() {
    let mut s = Sidecar::start();
    watchdog(&s, 60);
    let branch = [
        entry_line(
            0,
            r#"{"role":"user","content":[{"type":"text","text":"go"}],"timestamp":1}"#,
        ),
        entry_line(
            1,
            r#"{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"\ud83d"}}],"stopReason":"toolUse","timestamp":2}"#,
        ),
        entry_line(
            2,
            r#"{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"cut \ud83d here"}],"isError":false,"timestamp":3}"#,
        ),
    ];
    let start = format!(
        r#"{{"id":"st","method":"session.start","params":{{"settings":{{"contextPrune":{{"enabled":true}}}},"sessionId":"s","model":null,"branch":[{}],"tree":false}}}}"#,
        branch.join(",")
    );
    s.send(start.as_bytes());
    let (answer, _) = s.until("st");
    if let Some(err) = answer.get("error") {
        assert_eq!(err["code"], "internal", "{answer}");
    }
    // The engine still answers: a render, a query, a command, a new session.
    let ctx = s.call("c", "context", json!({"keep": 0, "append": []}));
    assert!(ctx.get("result").is_some(), "{ctx}");
    let q = s.call("q", "query", json!({"toolCallIds": ["t1"]}));
    assert!(q.get("result").is_some(), "{q}");
    let status = s.call("cmd", "command", json!({"args": "status"}));
    assert!(status.get("result").is_some(), "{status}");
    let again = s.call(
        "st2",
        "session.start",
        json!({"settings": null, "sessionId": "s", "branch": [], "tree": false}),
    );
    assert!(again.get("result").is_some(), "{again}");
}

/// Valid JSON that serde's `Value` refuses (a lone surrogate escape, nesting
/// deeper than 128) is answered with an error carrying the request's id,
/// not only a `protocol.error` notification.
#[test]
fn json_serde_refuses_is_answered_with_an_error() {
    let mut s = Sidecar::start();
    watchdog(&s, 60);
    // A lone surrogate where the request is read leniently: answered (the
    // unreadable ref is skipped).
    s.send(br#"{"id":"q1","method":"query","params":{"toolCallIds":["\ud83d"]}}"#);
    let (a, _) = s.until("q1");
    assert!(a.get("result").is_some() || a.get("error").is_some(), "{a}");
    // Nesting past serde's limit where only a tree can read it: refused
    // with an error carrying the id.
    let deep = format!(
        r#"{{"id":7,"method":"session.start","params":{{"settings":{}{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    s.send(deep.as_bytes());
    s.send(br#"{"id":"h","method":"hello","params":{"protocol":1}}"#);
    let (_, before) = s.until("h");
    assert!(
        before
            .iter()
            .any(|v| v["id"] == 7 && v.get("error").is_some()),
        "{before:?}"
    );
    // Deep nesting where the request reads it as raw JSON: answered.
    let deep = format!(
        r#"{{"id":8,"method":"command","params":{{"args":{}{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    s.send(deep.as_bytes());
    let (a, _) = s.until(8);
    assert!(a.get("result").is_some(), "{a}");
    // A lone surrogate in the id itself, on a line serde refuses: the error
    // answer echoes the id's text as written.
    let line = format!(
        r#"{{"id":"\ud83d","method":"session.start","params":{{"settings":{}{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    s.send(line.as_bytes());
    s.send(br#"{"id":"h2","method":"hello","params":{"protocol":1}}"#);
    let before = raw_lines_until(&mut s, "h2");
    assert!(
        before
            .iter()
            .any(|l| l.starts_with(r#"{"id":"\ud83d","error":"#)),
        "{before:?}"
    );
    // A line with no id to recover still gets the notification.
    s.send(b"{not json");
    let (_, before) = s.hello_until("h3");
    assert!(before.iter().any(|v| v["method"] == "protocol.error"));
}

#[test]
#[cfg(unix)]
fn the_sidecar_refuses_crafted_spill_paths_opens_no_socket_and_runs_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (session_id, branch, _) = crafted_session(dir.path());
    let mut s = Sidecar::with_session(
        json!({"reason": "startup", "settings": {"contextPrune": {"enabled": true}},
               "sessionId": session_id, "sessionDir": dir.path(), "branch": branch, "messages": null}),
    );
    for id in ["abs", "abs2", "traversal", "link"] {
        let q = s.call("q", "query", json!({"toolCallIds": [id]}));
        let text = q["result"]["text"].as_str().unwrap_or_default();
        assert!(
            !text.contains("TOP SECRET") && !text.contains("root:"),
            "{id} leaked: {text}"
        );
        assert!(text.ends_with(&format!("PREVIEW {id}")), "{id}: {text}");
    }
    s.call(
        "3",
        "context",
        json!({"keep": 0, "append": fixture_messages()}),
    );
    // No socket among its file descriptors, no child process.
    let fds = std::fs::read_dir(format!("/proc/{}/fd", s.child.id())).expect("fds");
    for fd in fds.flatten() {
        let target = std::fs::read_link(fd.path()).unwrap_or_default();
        assert!(
            !target.to_string_lossy().starts_with("socket:"),
            "the sidecar holds a socket: {}",
            target.display()
        );
    }
    let tasks = std::fs::read_dir(format!("/proc/{}/task", s.child.id())).expect("tasks");
    for t in tasks.flatten() {
        let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        assert!(
            children.trim().is_empty(),
            "the sidecar started processes: {children}"
        );
    }
}

/// A blob directory that is a symlink (to `/`) is never read through by the
/// sidecar, and the sidecar holds the session file it serves (an exclusive
/// lock, as `condense compact` takes, fails) until it exits.
#[test]
#[cfg(unix)]
fn the_sidecar_never_reads_through_a_symlinked_blob_directory_and_holds_its_session() {
    use condense_store::append::{AppendError, Appender, LockMode};
    let dir = tempfile::tempdir().expect("tempdir");
    let (session_id, branch, blobs) = crafted_session(dir.path());
    std::fs::remove_dir_all(&blobs).expect("blob dir");
    std::os::unix::fs::symlink("/", &blobs).expect("symlink to /");
    let file = dir.path().join(format!("{session_id}.jsonl"));
    let header = json!({"type": "session", "version": 3, "id": session_id,
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": dir.path()});
    let lines: String = std::iter::once(&header)
        .chain(&branch)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, lines).expect("session");

    let mut s = Sidecar::with_session(
        json!({"reason": "startup", "settings": {"contextPrune": {"enabled": true}},
               "sessionId": session_id, "sessionDir": dir.path(), "sessionFile": file,
               "branch": branch, "messages": null}),
    );
    let q = s.call("q", "query", json!({"toolCallIds": ["abs"]}));
    let text = q["result"]["text"].as_str().unwrap_or_default();
    assert!(!text.contains("root:"), "/etc/passwd leaked: {text}");
    assert!(text.ends_with("PREVIEW abs"), "{text}");

    assert!(
        matches!(
            Appender::open(&file, LockMode::Try),
            Err(AppendError::Locked(_))
        ),
        "the sidecar holds the session it serves"
    );
    s.call("3", "shutdown", json!({}));
    drop(s);
    Appender::open(&file, LockMode::Try).expect("released when the sidecar exits");
}

/// The sidecar's sources start no process and open no listening or
/// connecting socket of their own (the summarizer's HTTP providers are not
/// wired in: LLM calls go through the shim).
#[test]
fn the_sidecar_sources_run_no_shell_and_open_no_port() {
    // `condense sidecar`'s entry and the engine's sources, where the serving
    // loop lives: the rest of the `condense` binary (the proxy, the agent
    // launchers) is not reached from it.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let entry = manifest.join("../condense-cli/src/sidecar.rs");
    assert!(entry.is_file(), "{} exists", entry.display());
    let mut files = vec![entry, manifest.join("../condense-engine/src")];
    let mut checked = 0;
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(
                std::fs::read_dir(&p)
                    .expect("dir")
                    .flatten()
                    .map(|e| e.path()),
            );
            continue;
        }
        if p.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&p).expect("source");
        for needle in [
            "process::Command",
            "Command::new",
            "TcpListener",
            "TcpStream",
            "UdpSocket",
            "UnixListener",
            "UnixStream",
            "condense_summarizer::http",
            "Anthropic::new",
            "OpenAiCompatible::new",
            "reqwest",
        ] {
            assert!(!text.contains(needle), "{} uses {needle}", p.display());
        }
        checked += 1;
    }
    assert!(checked >= 10, "sources found");
}

/// The blob directory comes from `sessionId`, which a crafted session file
/// controls (pi passes its header id). A spill must still land beside the
/// session, never at an absolute or `..` path the id names.
#[test]
fn a_crafted_session_id_cannot_move_spills_out_of_the_session_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sessions = dir.path().join("sessions");
    std::fs::create_dir_all(&sessions).expect("sessions dir");
    let escape = dir.path().join("escaped");
    let mut s = Sidecar::with_session(
        json!({"reason": "startup", "settings": {"contextPrune": {"enabled": true, "spillThreshold": 100}},
               "sessionId": escape.display().to_string(), "sessionDir": sessions, "branch": [], "messages": null}),
    );
    let assistant = json!({"role": "assistant", "content": [
        {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "cat big"}}],
        "stopReason": "toolUse", "timestamp": 10});
    let result = json!({"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
        "content": [{"type": "text", "text": "z".repeat(500)}], "isError": false, "timestamp": 20});
    let r = s.call(
        "3",
        "turn.end",
        json!({"turnIndex": 0, "message": assistant, "toolResults": [result],
               "usage": {"tokens": null, "contextWindow": 200000}, "now": 30}),
    );
    let spilled = r.to_string().contains("spillPath");
    assert!(spilled, "the output spilled: {r}");
    let outside = PathBuf::from(format!("{}-blobs", escape.display()));
    assert!(
        !outside.exists(),
        "a spill was written outside the session directory, in {}",
        outside.display()
    );
}
