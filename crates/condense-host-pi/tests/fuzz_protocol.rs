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

mod support;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use condense_engine::sidecar::{serve, MAX_LINE};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use support::sidecar::Sidecar;

// ---- inputs -----------------------------------------------------------------------------

fn fixture_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../condense-store/tests/fixtures/pi-condense-2.9.1.jsonl");
        std::fs::read_to_string(p).expect("fixture")
    })
}

/// The fixture's entries (the `branch` of a `session.start`).
fn fixture_branch() -> &'static [Value] {
    static BRANCH: OnceLock<Vec<Value>> = OnceLock::new();
    BRANCH.get_or_init(|| {
        fixture_text()
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).expect("entry"))
            .collect()
    })
}

/// The fixture's messages (for `context`, `turn.end`, `message.end`).
fn fixture_messages() -> &'static [Value] {
    static MESSAGES: OnceLock<Vec<Value>> = OnceLock::new();
    MESSAGES.get_or_init(|| {
        fixture_branch()
            .iter()
            .filter_map(|e| e.get("message").cloned())
            .collect()
    })
}

const METHODS: &[&str] = &[
    "hello",
    "session.start",
    "context",
    "turn.end",
    "message.end",
    "agent.start",
    "agent.end",
    "query",
    "command",
    "llm.event",
    "llm.cancel",
    "protocol.error",
    "",
    "nope",
];

const COMMANDS: &[&str] = &[
    "", "help", "now", "on", "off", "status", "stats", "compact", "tree", "now now", "on extra",
    "\u{0}", "é",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        prop::sample::select(&["s1", "s2", "t1", "text", "thinking", "usage", "toolCall"][..])
            .prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        prop::sample::select(
            &[
                "id",
                "method",
                "params",
                "result",
                "error",
                "protocol",
                "keep",
                "append",
                "message",
                "toolResults",
                "usage",
                "tokens",
                "contextWindow",
                "turnIndex",
                "now",
                "toolCallIds",
                "args",
                "settings",
                "branch",
                "sessionId",
                "sessionDir",
                "tree",
                "requestId",
                "kind",
                "delta",
                "role",
                "content",
                "contextPrune",
                "enabled",
            ][..]
        )
        .prop_map(str::to_owned),
        "[a-z]{0,6}",
    ];
    leaf().prop_recursive(3, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

fn request_id() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        (0u64..50).prop_map(|n| Some(json!(n))),
        "[a-z0-9]{0,4}".prop_map(|s| Some(json!(s))),
        Just(Some(Value::Null)),
        Just(Some(json!({"nested": 1}))),
        Just(Some(json!(-1.5))),
        Just(None),
    ]
}

/// Params that look like what the method expects, with arbitrary parts.
fn shaped_params(method: &'static str) -> BoxedStrategy<Value> {
    let messages = fixture_messages().len();
    match method {
        "hello" => prop_oneof![Just(json!({"protocol": 1})), json_value()].boxed(),
        "session.start" => (
            0..fixture_branch().len() + 1,
            json_value(),
            any::<bool>(),
            prop::option::of(json_value()),
        )
            .prop_map(|(n, settings, tree, extra)| {
                let mut branch: Vec<Value> = fixture_branch()[..n].to_vec();
                if let Some(e) = extra {
                    branch.push(e);
                }
                json!({"reason": "startup", "settings": {"contextPrune": settings},
                       "sessionId": "fuzz", "branch": branch, "tree": tree, "messages": null})
            })
            .boxed(),
        "context" => (any::<u64>(), 0..messages, 0..messages, json_value())
            .prop_map(move |(keep, a, b, extra)| {
                let (a, b) = (a.min(b), a.max(b));
                let mut append: Vec<Value> = fixture_messages()[a..b].to_vec();
                append.push(extra);
                json!({"keep": keep % (messages as u64 + 3), "append": append})
            })
            .boxed(),
        "turn.end" | "message.end" => (0..messages, 0..messages, json_value(), any::<i64>())
            .prop_map(|(a, b, usage, now)| {
                let (a, b) = (a.min(b), a.max(b));
                json!({"turnIndex": a, "message": fixture_messages()[a],
                       "toolResults": fixture_messages()[a..b], "usage": usage, "now": now})
            })
            .boxed(),
        "query" => prop::collection::vec(
            prop_oneof![
                prop::sample::select(&["t1", "t2", "t3", "b1", "toolu_x", ""][..])
                    .prop_map(Value::from),
                json_value()
            ],
            0..4,
        )
        .prop_map(|ids| json!({"toolCallIds": ids}))
        .boxed(),
        "command" => prop::sample::select(COMMANDS)
            .prop_map(|a| json!({"args": a, "utcOffsetMinutes": 60}))
            .boxed(),
        "llm.event" => (json_value(), json_value())
            .prop_map(|(rid, delta)| json!({"requestId": rid, "kind": "text", "delta": delta}))
            .boxed(),
        _ => json_value().boxed(),
    }
}

/// A request of a known (or unknown) method with shaped params.
fn shaped() -> impl Strategy<Value = Vec<u8>> {
    (prop::sample::select(METHODS), request_id()).prop_flat_map(|(method, id)| {
        shaped_params(method).prop_map(move |params| {
            let mut m = Map::new();
            if let Some(id) = &id {
                m.insert("id".into(), id.clone());
            }
            m.insert("method".into(), json!(method));
            m.insert("params".into(), params);
            Value::Object(m).to_string().into_bytes()
        })
    })
}

/// One input line.
fn line() -> impl Strategy<Value = Vec<u8>> {
    let response = (request_id(), json_value()).prop_map(|(id, result)| {
        json!({"id": id.unwrap_or(json!("s1")), "result": result})
            .to_string()
            .into_bytes()
    });
    let mutated = (shaped(), any::<usize>(), any::<u8>(), any::<bool>()).prop_map(
        |(mut bytes, at, b, truncate)| {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                if truncate {
                    bytes.truncate(i);
                } else {
                    bytes[i] = b;
                }
            }
            bytes
        },
    );
    prop_oneof![
        4 => shaped(),
        1 => response,
        2 => mutated,
        1 => json_value().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..120),
        1 => Just(Vec::new()),
    ]
    .prop_map(|mut bytes| {
        bytes.retain(|b| *b != b'\n');
        bytes
    })
    .prop_filter("no shutdown request", |bytes| {
        parse(bytes).is_none_or(|v| v.get("method") != Some(&json!("shutdown")))
    })
}

fn parse(bytes: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(bytes);
    if text.trim().is_empty() {
        return None;
    }
    serde_json::from_str(&text).ok()
}

/// The id of the answer a line asks for, as the sidecar reads lines.
fn expected_answer(bytes: &[u8]) -> Option<Value> {
    let v = parse(bytes)?;
    let id = v.get("id")?.clone();
    v.get("method")?.as_str()?;
    Some(id)
}

// ---- the in-memory sidecar ----------------------------------------------------------------

/// `llm.complete` requests the fuzzed sidecars made (so a run shows it
/// reached flushes), and answers checked.
static LLM_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static ANSWERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// A `std::io::Write` that hands its bytes to a channel.
struct ChannelWrite(mpsc::UnboundedSender<Vec<u8>>);

impl std::io::Write for ChannelWrite {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .send(buf.to_vec())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A `serve` over a duplex; the client side answers the sidecar's
/// `llm.complete` requests and collects every answer it gets.
struct Duplex {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    answers: mpsc::UnboundedReceiver<Result<Value, String>>,
    served: tokio::task::JoinHandle<()>,
}

impl Duplex {
    fn start() -> Duplex {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_r, server_w) = tokio::io::split(server);
        // `serve` writes with `std::io::Write`: bytes go through a channel to
        // a task that writes them into the duplex.
        let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let mut server_w = server_w;
        tokio::spawn(async move {
            while let Some(bytes) = out_rx.recv().await {
                if server_w.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        });
        let served = tokio::spawn(serve(
            tokio::io::BufReader::new(server_r),
            ChannelWrite(out_tx),
        ));
        let (client_r, mut client_w) = tokio::io::split(client);
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if client_w.write_all(&line).await.is_err()
                    || client_w.write_all(b"\n").await.is_err()
                {
                    break;
                }
            }
        });
        let (answers_tx, answers) = mpsc::unbounded_channel();
        let llm = tx.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(client_r).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                let v: Value = match serde_json::from_str(&l) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => {
                        let _ = answers_tx.send(Err(format!(
                            "the sidecar wrote a non-object line: {l:.200}"
                        )));
                        continue;
                    }
                };
                if v["method"] == "llm.complete" {
                    LLM_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let reply = json!({"id": v["id"], "result": {"text": "- [[1:bash]] ran", "stopReason": "stop",
                        "usage": {"input": 10, "output": 5, "cost": 0.0}}});
                    let _ = llm.send(reply.to_string().into_bytes());
                } else if v.get("id").is_some() && v.get("method").is_none() {
                    let _ = answers_tx.send(Ok(v));
                }
            }
        });
        Duplex {
            tx,
            answers,
            served,
        }
    }

    fn send(&self, line: Vec<u8>) {
        let _ = self.tx.send(line);
    }

    /// Waits for the answer with this id, collecting the others.
    async fn wait_for(&mut self, id: &Value, got: &mut Vec<Value>) -> Result<Value, String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let next = tokio::time::timeout_at(deadline, self.answers.recv())
                .await
                .map_err(|_| format!("no answer to {id} within 30 s"))?
                .ok_or("the sidecar closed its output")??;
            if &next["id"] == id {
                return Ok(next);
            }
            got.push(next);
        }
    }
}

/// Feeds the lines, then `hello`; checks the answers.
async fn drive(lines: Vec<Vec<u8>>) -> Result<(), String> {
    let mut d = Duplex::start();
    let mut expected: Vec<Value> = Vec::new();
    for l in &lines {
        if let Some(id) = expected_answer(l) {
            expected.push(id);
        }
        d.send(l.clone());
    }
    let final_id = json!("final-hello");
    d.send(
        json!({"id": final_id, "method": "hello", "params": {"protocol": 1}})
            .to_string()
            .into_bytes(),
    );
    let mut got = Vec::new();
    let hello = d.wait_for(&final_id, &mut got).await?;
    if hello["result"]["protocol"] != 1 {
        return Err(format!("the final hello was answered with {hello}"));
    }
    // Every request gets its answer (a handler that panicked never answers).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut missing = expected.clone();
        for a in &got {
            if let Some(i) = missing.iter().position(|id| *id == a["id"]) {
                missing.remove(i);
            }
        }
        if missing.is_empty() {
            ANSWERS.fetch_add(expected.len() as u64, std::sync::atomic::Ordering::Relaxed);
            break;
        }
        match tokio::time::timeout_at(deadline, d.answers.recv()).await {
            Ok(Some(Ok(a))) => got.push(a),
            Ok(Some(Err(e))) => return Err(e),
            _ => return Err(format!("requests never answered: {missing:?}")),
        }
    }
    d.send(
        json!({"id": "bye", "method": "shutdown"})
            .to_string()
            .into_bytes(),
    );
    d.wait_for(&json!("bye"), &mut got).await?;
    match tokio::time::timeout(Duration::from_secs(10), d.served).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("serve panicked: {e}")),
        Err(_) => Err("serve did not stop after shutdown".into()),
    }
}

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

impl Sidecar {
    /// Sends `hello` with `id` and reads until its answer.
    fn hello_until(&mut self, id: &str) -> (Value, Vec<Value>) {
        self.send(
            json!({"id": id, "method": "hello", "params": {"protocol": 1}})
                .to_string()
                .as_bytes(),
        );
        self.until(id)
    }

    /// A sidecar past `hello`, its session started with `params`.
    fn with_session(params: Value) -> Sidecar {
        let mut s = Sidecar::start();
        s.call("1", "hello", json!({"protocol": 1}));
        let start = s.call("2", "session.start", params);
        assert!(start["result"]["effects"].is_array(), "{start}");
        s
    }

    fn call(&mut self, id: &str, method: &str, params: Value) -> Value {
        self.send(
            json!({"id": id, "method": method, "params": params})
                .to_string()
                .as_bytes(),
        );
        self.until(id).0
    }

    fn status(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc status"))
    }
}

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

/// Kills the sidecar after `secs` (a request never answered would block the
/// test's read for ever; a kill ends it with "the sidecar exited").
fn watchdog(s: &Sidecar, secs: u64) {
    let pid = s.child.id().to_string();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(secs));
        let _ = Command::new("kill")
            .arg("-9")
            .arg(pid)
            .stderr(Stdio::null())
            .status();
    });
}

/// One message entry line of a branch, its JSON text written by hand (a
/// lone surrogate escape cannot be built through `Value`).
fn entry_line(n: usize, message: &str) -> String {
    let parent = if n == 0 {
        "null".to_owned()
    } else {
        format!(r#""{:08x}""#, n - 1)
    };
    format!(
        r#"{{"type":"message","id":"{n:08x}","parentId":{parent},"timestamp":"2026-01-01T00:00:0{n}.000Z","message":{message}}}"#
    )
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

/// Reads raw lines until one carries `"id":"<id>"`; returns the lines before it.
fn raw_lines_until(s: &mut Sidecar, id: &str) -> Vec<String> {
    let marker = format!(r#""id":"{id}""#);
    let mut before = Vec::new();
    loop {
        let mut line = String::new();
        let n = s.stdout.read_line(&mut line).expect("read");
        assert!(n > 0, "the sidecar exited");
        if line.contains(&marker) {
            return before;
        }
        before.push(line);
    }
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

/// A crafted session: index records whose spill paths point outside the
/// blob directory (absolute, `..`, a symlink inside the blob directory).
fn crafted_session(dir: &Path) -> (String, Vec<Value>, PathBuf) {
    let session_id = "0190f5a1-0000-7000-8000-00000000c0de".to_owned();
    let blobs = dir.join(format!("{session_id}-blobs"));
    std::fs::create_dir_all(&blobs).expect("blob dir");
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "TOP SECRET").expect("secret");
    std::os::unix::fs::symlink(&secret, blobs.join("link@2.txt")).expect("symlink");
    let spills = [
        ("abs", "/etc/passwd".to_owned()),
        ("abs2", secret.display().to_string()),
        ("traversal", format!("{}/../secret.txt", blobs.display())),
        ("link", blobs.join("link@2.txt").display().to_string()),
    ];
    let records: Vec<Value> = spills
        .iter()
        .map(|(id, spill)| {
            json!({"toolCallId": id, "toolName": "bash", "args": {}, "resultText": "",
                "isError": false, "turnIndex": 0, "timestamp": 1, "resultTimestamp": 2,
                "spillPath": spill, "spillBytes": 10, "resultPreview": format!("PREVIEW {id}")})
        })
        .collect();
    let branch = vec![
        json!({"type": "custom", "customType": "context-prune-index",
        "data": {"toolCalls": records}, "id": "0000aaaa", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z"}),
    ];
    (session_id, branch, blobs)
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
    // The binary's own sources and the engine's, where the serving loop lives.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![
        manifest.join("src"),
        manifest.join("../condense-engine/src"),
    ];
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
