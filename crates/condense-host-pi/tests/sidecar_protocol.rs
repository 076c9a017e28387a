//! The sidecar over its real stdio: handshake, a session started from the
//! pi-condense fixture's branch, a `context` that must render what
//! pi-condense rendered, an incremental `context`, a `query`, bad input.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

struct Sidecar {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Sidecar {
    fn start() -> Sidecar {
        let mut child = Command::new(env!("CARGO_BIN_EXE_condense-pi"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("sidecar starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Sidecar {
            child,
            stdin,
            stdout,
            next: 0,
        }
    }

    fn send_line(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"))
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send_line(&json!({"id": id, "method": method, "params": params}).to_string());
        loop {
            let v = self.read();
            if v["id"] == json!(id) {
                return v;
            }
        }
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../condense-store/tests/fixtures")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

fn apply(steps: &[Value], input: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for s in steps {
        if let Some(k) = s.get("keep") {
            let (a, b) = (
                k[0].as_u64().unwrap() as usize,
                k[1].as_u64().unwrap() as usize,
            );
            out.extend_from_slice(&input[a..b]);
        } else {
            out.push(s["message"].clone());
        }
    }
    out
}

#[test]
fn renders_and_queries_the_fixture_like_pi_condense() {
    let text = fixture("pi-condense-2.9.1.jsonl");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let branch: Vec<Value> = lines[1..].to_vec();
    // The messages pi hands to `context`: message entries and custom messages.
    let expected: Vec<Value> =
        serde_json::from_str(&fixture("pi-condense-2.9.1.render.json")).unwrap();

    let mut s = Sidecar::start();
    let hello = s.call(
        "hello",
        json!({"protocol": 1, "shim": "test", "pi": "0.83.0"}),
    );
    assert_eq!(hello["result"]["protocol"], 1);
    let bad = s.call("hello", json!({"protocol": 99}));
    assert_eq!(bad["error"]["code"], "protocol-mismatch");

    let start = s.call(
        "session.start",
        json!({"reason": "startup", "settings": {"contextPrune": {"enabled": true}},
               "sessionId": lines[0]["id"], "branch": branch}),
    );
    assert!(start["result"]["effects"].is_array());

    // pi's view of the branch, built the way pi builds it.
    let store_session = condense_store::session::Session::parse(&text);
    let b = store_session.branch(None);
    let messages: Vec<Value> = condense_store::context::branch_messages(&b)
        .iter()
        .map(|c| serde_json::from_str(c.message.json()).unwrap())
        .collect();

    let r = s.call("context", json!({"keep": 0, "append": messages}));
    let steps = r["result"]["steps"].as_array().expect("steps").clone();
    assert_eq!(apply(&steps, &messages), expected);

    // Nothing new: keep everything, append nothing, same plan.
    let again = s.call("context", json!({"keep": messages.len(), "append": []}));
    assert_eq!(again["result"]["steps"], json!(steps));
    assert!(again["result"].get("reuse").is_none(), "no base, no reuse");

    // Built on the answer the shim holds: nothing re-sent, same output.
    let seq = again["result"]["seq"].as_u64().expect("seq");
    let incremental = s.call(
        "context",
        json!({"keep": messages.len(), "append": [], "base": seq}),
    );
    assert_eq!(incremental["result"]["reuse"], json!(steps.len()));
    assert_eq!(incremental["result"]["steps"], json!([]));
    assert_eq!(incremental["result"]["seq"], json!(seq + 1));

    // A new message at the end: the plan's unchanged head is reused, the
    // rest is sent, and together they render what a whole answer would.
    let mut longer = messages.clone();
    longer.push(
        json!({"role": "user", "content": "one more thing", "timestamp": 1_900_000_000_000i64}),
    );
    let grown = s.call(
        "context",
        json!({"keep": messages.len(), "append": [longer.last().unwrap()], "base": seq + 1}),
    );
    let reuse = grown["result"]["reuse"].as_u64().expect("reuse") as usize;
    assert!(reuse > 0 && reuse < steps.len() + 1, "reuse {reuse}");
    let mut whole: Vec<Value> = steps[..reuse].to_vec();
    whole.extend(grown["result"]["steps"].as_array().unwrap().iter().cloned());
    let mut expected_longer = expected.clone();
    expected_longer.push(longer.last().unwrap().clone());
    assert_eq!(apply(&whole, &longer), expected_longer);

    // A base the sidecar no longer has (the shim dropped an answer) gets a whole answer.
    let stale = s.call(
        "context",
        json!({"keep": longer.len(), "append": [], "base": seq}),
    );
    assert!(stale["result"].get("reuse").is_none());
    assert_eq!(
        apply(stale["result"]["steps"].as_array().unwrap(), &longer),
        expected_longer
    );

    let q = s.call("query", json!({"toolCallIds": ["t2"]}));
    assert_eq!(
        q["result"]["text"].as_str().unwrap(),
        fixture("pi-condense-2.9.1.query-t2.txt")
    );

    // Garbage does not kill it.
    s.send_line("{not json");
    let n = s.read();
    assert_eq!(n["method"], "protocol.error");
    let unknown = s.call("frobnicate", json!({}));
    assert_eq!(unknown["error"]["code"], "unknown-method");

    let bye = s.call("shutdown", json!({}));
    assert!(bye["result"].is_object());
    let status = s.child.wait().unwrap();
    assert!(status.success());
}

/// `session.start` is read with its branch as raw JSON when its fields have
/// the expected types, and through a `Value` tree otherwise; both give the
/// same state (checked through the render of the fixture).
#[test]
fn session_start_reads_the_same_either_way() {
    let text = fixture("pi-condense-2.9.1.jsonl");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let branch: Vec<Value> = lines[1..].to_vec();
    let expected: Vec<Value> =
        serde_json::from_str(&fixture("pi-condense-2.9.1.render.json")).unwrap();
    let store_session = condense_store::session::Session::parse(&text);
    let b = store_session.branch(None);
    let messages: Vec<Value> = condense_store::context::branch_messages(&b)
        .iter()
        .map(|c| serde_json::from_str(c.message.json()).unwrap())
        .collect();
    let settings = json!({"contextPrune": {"enabled": true}});
    let variants = [
        // Expected types: the raw path.
        json!({"reason": "startup", "settings": settings, "sessionId": lines[0]["id"],
               "model": null, "branch": branch, "messages": null, "tree": false}),
        // `tree` of another type and the keys in another order: the Value path.
        json!({"tree": 0, "branch": branch, "sessionId": lines[0]["id"], "settings": settings}),
    ];
    for (i, params) in variants.into_iter().enumerate() {
        let mut s = Sidecar::start();
        let start = s.call("session.start", params);
        assert!(
            start["result"]["effects"].is_array(),
            "variant {i}: {start}"
        );
        let r = s.call("context", json!({"keep": 0, "append": messages}));
        let steps = r["result"]["steps"].as_array().expect("steps").clone();
        assert_eq!(apply(&steps, &messages), expected, "variant {i}");
    }
}

/// Messages with lone surrogate escapes (`JSON.stringify` of a string cut
/// inside a pair) are rendered through untouched, and the sidecar keeps
/// serving: a paged `query` finds the raw result on the branch it holds.
#[test]
fn lone_surrogates_pass_through_and_queries_page() {
    let mut s = Sidecar::start();
    s.call(
        "hello",
        json!({"protocol": 1, "shim": "test", "pi": "1.6.0"}),
    );
    let start = s.call(
        "session.start",
        json!({"reason": "startup", "settings": {"contextPrune": {"enabled": true,
               "thinkingStrip": {"enabled": true, "keepLastTurns": 0}}},
               "sessionId": "lone", "branch": []}),
    );
    assert!(start["result"]["effects"].is_array(), "{start}");
    let assistant = r#"{"role":"assistant","content":[{"type":"thinking","thinking":"half \ud83d","thinkingSignature":"s"},{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"echo \ud83d"}}],"stopReason":"toolUse","timestamp":2}"#;
    let result = r#"{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"one\ntwo \udc00\nthree"}],"isError":false,"timestamp":3}"#;
    let messages = [
        r#"{"role":"user","content":"go","timestamp":1}"#,
        assistant,
        result,
        r#"{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop","timestamp":4}"#,
    ];
    let line = format!(
        r#"{{"id":100,"method":"context","params":{{"keep":0,"append":[{}]}}}}"#,
        messages.join(",")
    );
    s.send_line(&line);
    let rendered = loop {
        let v = s.read();
        if v["id"] == json!(100) {
            break v;
        }
    };
    assert!(rendered.get("result").is_some(), "{rendered}");
    let q = s.call(
        "query",
        json!({"toolCallIds": ["c1", "c1"], "offset": 2, "limit": 1}),
    );
    assert_eq!(
        q["result"]["text"],
        "## toolRef: c1\nSource: session branch (not in the index)\nTool: bash\nArgs: {\n  \"command\": \"echo \u{FFFD}\"\n}\nStatus: OK\nTurn: -1\n\ntwo \u{FFFD}\n[Output truncated: lines 2-2 of 3 shown. To continue, call context_tree_query with toolCallIds [\"c1\"] and offset=3.]"
    );
    // Still serving.
    let again = s.call("context", json!({"keep": 4, "append": []}));
    assert!(again.get("result").is_some(), "{again}");
    let bye = s.call("shutdown", json!({}));
    assert!(bye["result"].is_object());
}
