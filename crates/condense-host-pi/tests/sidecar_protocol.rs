//! The sidecar over its real stdio: handshake, a session started from the
//! pi-condense fixture's branch, a `context` that must render what
//! pi-condense rendered, an incremental `context`, a `query`, bad input,
//! pi's compaction (`session.compact`).

mod support;

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};
use support::sidecar::Sidecar;

/// Request ids, unique across the test process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Sidecar {
    /// A sidecar past `hello`, with an empty session `session_id` started:
    /// `contextPrune` settings `context_prune`, session model `model`.
    fn with_empty_session(session_id: &str, context_prune: Value, model: Value) -> Sidecar {
        let mut s = Sidecar::start();
        let hello = s.call(
            "hello",
            json!({"protocol": 1, "shim": "test", "host": {"name": "pi", "version": "1.6.0"}}),
        );
        assert_eq!(hello["result"]["protocol"], 1, "{hello}");
        let start = s.call(
            "session.start",
            json!({"reason": "startup", "settings": {"contextPrune": context_prune},
                   "model": model, "sessionId": session_id, "branch": []}),
        );
        assert!(start["result"]["effects"].is_array(), "{start}");
        s
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_answering(method, params, |_| {
            panic!("no request of the sidecar expected")
        })
    }

    /// [`Sidecar::call`], answering each `llm.complete` the sidecar sends
    /// meanwhile with `complete(params)`'s result.
    fn call_answering(
        &mut self,
        method: &str,
        params: Value,
        mut complete: impl FnMut(&Value) -> Value,
    ) -> Value {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.send(
            json!({"id": id, "method": method, "params": params})
                .to_string()
                .as_bytes(),
        );
        loop {
            let v = self.read();
            if v["id"] == json!(id) {
                return v;
            }
            if v["method"] == "llm.complete" {
                let result = complete(&v["params"]);
                self.send(
                    json!({"id": v["id"], "result": result})
                        .to_string()
                        .as_bytes(),
                );
            }
        }
    }
}

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../condense-store/tests/fixtures")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

/// The pi-condense 2.9.1 session fixture as the tests feed it.
struct Session {
    /// Its header's `id`.
    id: Value,
    /// Its entries after the header: `session.start`'s `branch`.
    branch: Vec<Value>,
    /// The messages pi hands to `context` (message entries and custom
    /// messages), built the way pi builds them.
    messages: Vec<Value>,
    /// What pi-condense rendered from them.
    expected: Vec<Value>,
}

fn pi_condense_session() -> Session {
    let text = fixture("pi-condense-2.9.1.jsonl");
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let id = lines.next().expect("a header")["id"].clone();
    let store_session = condense_store::session::Session::parse(&text);
    let messages = condense_store::context::branch_messages(&store_session.branch(None))
        .iter()
        .map(|c| serde_json::from_str(&c.message.json()).unwrap())
        .collect();
    Session {
        id,
        branch: lines.collect(),
        messages,
        expected: serde_json::from_str(&fixture("pi-condense-2.9.1.render.json")).unwrap(),
    }
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
    let Session {
        id,
        branch,
        messages,
        expected,
    } = pi_condense_session();

    let mut s = Sidecar::start();
    let hello = s.call(
        "hello",
        json!({"protocol": 1, "shim": "test", "host": {"name": "pi", "version": "0.83.0"}}),
    );
    assert_eq!(hello["result"]["protocol"], 1);
    let bad = s.call("hello", json!({"protocol": 99}));
    assert_eq!(bad["error"]["code"], "protocol-mismatch");

    let start = s.call(
        "session.start",
        json!({"reason": "startup", "settings": {"contextPrune": {"enabled": true}},
               "sessionId": id, "branch": branch}),
    );
    assert!(start["result"]["effects"].is_array());

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
    s.send(b"{not json");
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
    let Session {
        id,
        branch,
        messages,
        expected,
    } = pi_condense_session();
    let settings = json!({"contextPrune": {"enabled": true}});
    let variants = [
        // Expected types: the raw path.
        json!({"reason": "startup", "settings": settings, "sessionId": id,
               "model": null, "branch": branch, "messages": null, "tree": false}),
        // `tree` of another type and the keys in another order: the Value path.
        json!({"tree": 0, "branch": branch, "sessionId": id, "settings": settings}),
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

#[test]
fn settings_with_a_lone_surrogate_start_the_session_read_as_u_fffd() {
    let mut s = Sidecar::start();
    s.call("hello", json!({"protocol": 1}));
    // `JSON.stringify` writes half an emoji as a lone escape, which serde
    // refuses; the session must still start, with the setting read.
    let line = r#"{"id":300,"method":"session.start","params":{"reason":"startup","settings":{"contextPrune":{"enabled":true,"protectedTools":["bash\ud83d"]}},"branch":[]}}"#;
    s.send(line.as_bytes());
    let started = loop {
        let v = s.read();
        if v["id"] == json!(300) {
            break v;
        }
    };
    assert!(started["result"]["effects"].is_array(), "{started}");
    let tools = s.call("command", json!({"args": "protected-tools"}));
    assert_eq!(
        tools["result"]["effects"][0]["text"], "Protected tools: bash\u{FFFD}",
        "{tools}"
    );
}

/// Messages with lone surrogate escapes (`JSON.stringify` of a string cut
/// inside a pair) are rendered through untouched, and the sidecar keeps
/// serving: a paged `query` finds the raw result on the branch it holds.
#[test]
fn lone_surrogates_pass_through_and_queries_page() {
    let mut s = Sidecar::with_empty_session(
        "lone",
        json!({"enabled": true, "thinkingStrip": {"enabled": true, "keepLastTurns": 0}}),
        Value::Null,
    );
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
    s.send(line.as_bytes());
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

/// `hello` lists `/pruner`'s subcommands (the shim's completions) in the
/// order the bare `/pruner` picker offers them: one list.
#[test]
fn hello_lists_the_pruner_subcommands_of_the_picker() {
    let mut s = Sidecar::with_empty_session("hello", json!({"enabled": true}), Value::Null);
    let hello = s.call(
        "hello",
        json!({"protocol": 1, "shim": "test", "host": {"name": "pi", "version": "1.6.0"}}),
    );
    let commands = hello["result"]["commands"].as_array().expect("commands");
    let picker = s.call("command", json!({"args": "", "utcOffsetMinutes": 0}));
    let select = &picker["result"]["effects"][0];
    assert_eq!(select["kind"], "select", "{picker}");
    let names: Vec<&Value> = commands.iter().map(|c| &c["name"]).collect();
    let values: Vec<&Value> = select["values"]
        .as_array()
        .expect("values")
        .iter()
        .collect();
    assert_eq!(names, values);
    assert!(names.contains(&&json!("compact")), "{names:?}");
    for (command, option) in commands
        .iter()
        .zip(select["options"].as_array().expect("options"))
    {
        let description = command["description"].as_str().expect("description");
        assert!(!description.is_empty(), "{command}");
        let option = option.as_str().expect("option text");
        assert!(
            option.ends_with(&format!(" — {description}")),
            "{option} / {command}"
        );
    }
}

/// The summarizer's thinking setting reaches `llm.complete` resolved, as
/// pi-ai's `reasoningEffort` (`null`: none), for the session model and for a
/// model named with a `:thinking` suffix.
#[test]
fn llm_complete_carries_the_resolved_effort() {
    let mut s = Sidecar::with_empty_session(
        "effort",
        json!({"enabled": true, "pruneOn": "on-demand", "summarizerThinking": "lots"}),
        json!({"provider": "fake", "id": "fake-1"}),
    );
    let mut turn = 0;
    // One pending turn, then `/pruner now`: the params of its summarizer call.
    let mut summarize = |s: &mut Sidecar| -> Vec<Value> {
        turn += 1;
        let call = format!("call_{turn}");
        // A different output each turn: a repeated one would be deduplicated.
        let big = format!("line of file {turn}, worth a summary\n").repeat(200);
        let end = s.call(
            "turn.end",
            json!({
                "turnIndex": turn,
                "message": {"role": "assistant", "timestamp": turn * 10,
                            "content": [{"type": "toolCall", "id": call, "name": "read",
                                         "arguments": {"path": format!("f{turn}.txt")}}]},
                "toolResults": [{"role": "toolResult", "toolCallId": call, "toolName": "read",
                                 "content": [{"type": "text", "text": big}],
                                 "isError": false, "timestamp": turn * 10 + 1}],
                "usage": {"tokens": 1000, "contextWindow": 200000},
                "now": turn * 10 + 2,
            }),
        );
        assert!(end.get("result").is_some(), "{end}");
        let mut seen = Vec::new();
        let now = s.call_answering(
            "command",
            json!({"args": "now", "utcOffsetMinutes": 0}),
            |params| {
                seen.push(params.clone());
                json!({"text": "- [[1:read]] Read a file.", "stopReason": "stop",
                       "usage": {"input": 10, "output": 5, "cost": 0}})
            },
        );
        assert!(now.get("result").is_some(), "{now}");
        seen
    };
    let effort = |seen: &[Value]| -> (Value, Value) {
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(seen[0].get("thinking").is_none(), "{seen:?}");
        (seen[0]["model"].clone(), seen[0]["reasoningEffort"].clone())
    };

    // A level the config does not know reads as `default`: no effort.
    assert_eq!(effort(&summarize(&mut s)), (json!("default"), Value::Null));
    for (level, expected) in [
        ("default", Value::Null),
        ("off", Value::Null),
        ("minimal", json!("minimal")),
        ("low", json!("low")),
        ("medium", json!("medium")),
        ("high", json!("high")),
        ("xhigh", json!("xhigh")),
    ] {
        let set = s.call(
            "command",
            json!({"args": format!("thinking {level}"), "utcOffsetMinutes": 0}),
        );
        assert!(set.get("result").is_some(), "{set}");
        assert_eq!(
            effort(&summarize(&mut s)),
            (json!("default"), expected),
            "summarizerThinking {level}"
        );
    }
    // `/pruner model id:thinking` sets both.
    s.call(
        "command",
        json!({"args": "model openai/gpt-4.1-mini:low", "utcOffsetMinutes": 0}),
    );
    assert_eq!(
        effort(&summarize(&mut s)),
        (json!("openai/gpt-4.1-mini"), json!("low"))
    );
    s.call(
        "command",
        json!({"args": "model openai/gpt-4.1-mini:off", "utcOffsetMinutes": 0}),
    );
    assert_eq!(
        effort(&summarize(&mut s)),
        (json!("openai/gpt-4.1-mini"), Value::Null)
    );
}

/// `[[N:tool]]` labels of a summarizer prompt, in order.
fn labels(prompt: &str) -> Vec<String> {
    prompt
        .match_indices("[[")
        .filter_map(|(at, _)| {
            let rest = &prompt[at..];
            let end = rest.find("]]")?;
            let label = &rest[..end + 2];
            let (n, _) = label[2..].split_once(':')?;
            n.parse::<u32>().ok().map(|_| label.to_owned())
        })
        .collect()
}

#[test]
fn session_compact_flushes_what_pi_kept_and_makes_the_next_call_cold() {
    const T0: i64 = 1_780_000_000_000;
    let mut s = Sidecar::with_empty_session(
        "compact",
        json!({"enabled": true, "economy": {"policy": "cache-aware", "maxExcess": 0}}),
        json!({"provider": "fake", "id": "fake-1"}),
    );
    let read = |n: i64| -> [Value; 2] {
        let at = T0 + 1_000 * (2 * n + 1);
        let id = format!("r{n}");
        let text = format!("f{n}: a line of the file, worth a summary\n").repeat(200);
        [
            json!({"role": "assistant", "content": [{"type": "toolCall", "id": id, "name": "read",
                "arguments": {"path": format!("f{n}.txt")}}], "stopReason": "toolUse", "timestamp": at}),
            json!({"role": "toolResult", "toolCallId": id, "toolName": "read",
                "content": [{"type": "text", "text": text}], "isError": false, "timestamp": at + 500}),
        ]
    };
    let reply = json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}],
        "stopReason": "stop", "timestamp": T0 + 9_000});
    let mut run =
        vec![json!({"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": T0})];
    (0..4).for_each(|n| run.extend(read(n)));
    run.push(reply.clone());
    let first = s.call(
        "context",
        json!({"keep": 0, "append": run, "now": T0 + 10_000, "model": "fake/fake-1"}),
    );
    assert!(first.get("result").is_some(), "{first}");
    // pi compacts at the run's end and keeps its last two reads: within the
    // bound nothing saved pays a warm flush, but the next call writes its
    // whole prompt anyway, and the kept reads' summaries save more there
    // than the summarizer reads.
    let mut kept = vec![
        json!({"role": "compactionSummary", "summary": "earlier work",
        "tokensBefore": 50_000, "timestamp": T0 + 9_500}),
    ];
    (2..4).for_each(|n| kept.extend(read(n)));
    kept.push(reply);
    let kept_len = kept.len();
    let mut prompts = Vec::new();
    let compacted = s.call_answering(
        "session.compact",
        json!({"keep": 0, "append": kept, "now": T0 + 20_000}),
        |params| {
            let prompt = params["user"].as_str().unwrap_or_default().to_owned();
            let text: Vec<String> = labels(&prompt)
                .iter()
                .map(|l| format!("- {l} Read a file."))
                .collect();
            prompts.push(prompt);
            json!({"text": text.join("\n"), "stopReason": "stop",
                   "usage": {"input": 10, "output": 5, "cost": 0}})
        },
    );
    let effects = compacted["result"]["effects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        effects
            .iter()
            .any(|e| e["customType"] == "context-prune-summary"),
        "{compacted}"
    );
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert!(prompts[0].contains("f2:") && prompts[0].contains("f3:"));
    assert!(
        !prompts[0].contains("f0:"),
        "what pi left out is not summarized"
    );
    // The next call, within the cache's five minutes, is still cold: a
    // free switch shows the summaries.
    let next = s.call(
        "context",
        json!({"keep": kept_len, "append": [{"role": "user",
            "content": [{"type": "text", "text": "next"}], "timestamp": T0 + 30_000}],
            "now": T0 + 30_000, "model": "fake/fake-1"}),
    );
    let effects = next["result"]["effects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let switch = effects
        .iter()
        .find(|e| e["customType"] == "context-prune-switch")
        .unwrap_or_else(|| panic!("no switch: {next}"));
    assert_eq!(switch["data"]["reason"], "compaction", "{switch}");
    let steps = next["result"]["steps"].to_string();
    assert!(steps.contains("Summarized in pruner summary"), "{steps}");
}

/// A shim may send a reply's `message.end` and the next `context` without
/// waiting for the first answer: an `ordered` `context` is answered after
/// the flush the reply starts, so it renders that flush's stub; one without
/// `ordered` is answered at once, from the copy as it stands.
#[test]
fn an_ordered_context_is_answered_after_the_flush_sent_before_it() {
    const T0: i64 = 1_780_000_000_000;
    for ordered in [true, false] {
        let mut s = Sidecar::with_empty_session(
            "ordered",
            json!({"enabled": true, "economy": {"policy": "reference"}}),
            json!({"provider": "fake", "id": "fake-1"}),
        );
        let big = "line of a file worth a summary\n".repeat(200);
        let end = s.call(
            "turn.end",
            json!({
                "turnIndex": 0,
                "message": {"role": "assistant", "timestamp": T0,
                            "content": [{"type": "toolCall", "id": "call_1", "name": "read",
                                         "arguments": {"path": "f1.txt"}}]},
                "toolResults": [{"role": "toolResult", "toolCallId": "call_1", "toolName": "read",
                                 "content": [{"type": "text", "text": big}],
                                 "isError": false, "timestamp": T0 + 1}],
                "usage": {"tokens": 1000, "contextWindow": 200000},
                "now": T0 + 2,
            }),
        );
        assert!(end.get("result").is_some(), "{end}");
        // The reply, then the next call, sent back to back.
        let reply = json!({"role": "assistant", "timestamp": T0 + 3, "stopReason": "stop",
                           "content": [{"type": "text", "text": "done"}]});
        s.send(
            json!({"id": "reply", "method": "message.end", "params": {"message": reply, "now": T0 + 3}})
                .to_string()
                .as_bytes(),
        );
        let mut context = json!({"keep": 2, "append": [], "now": T0 + 4, "model": "fake/fake-1"});
        if ordered {
            context["ordered"] = json!(true);
        }
        s.send(
            json!({"id": "call", "method": "context", "params": context})
                .to_string()
                .as_bytes(),
        );
        // Unordered, the summarizer is answered only once the context is:
        // a context that waited for the flush would never be answered, so
        // the watchdog ends the sidecar and the read fails instead of hanging.
        let _watchdog = s.kill_after(std::time::Duration::from_secs(60));
        let mut order = Vec::new();
        let mut rendered = Value::Null;
        let mut held = Vec::new();
        while order.len() < 3 {
            let v = s.read();
            if v["method"] == "llm.complete" {
                order.push("llm.complete");
                held.push(v["id"].clone());
            } else if v["id"] == "reply" {
                order.push("message.end");
            } else if v["id"] == "call" {
                order.push("context");
                rendered = v;
            }
            if ordered || !rendered.is_null() {
                for id in held.drain(..) {
                    s.send(
                        json!({"id": id, "result": {"text": "- [[1:read]] Read a file.",
                               "stopReason": "stop", "usage": {"input": 10, "output": 5, "cost": 0}}})
                        .to_string()
                        .as_bytes(),
                    );
                }
            }
        }
        let steps = rendered["result"]["steps"].to_string();
        if ordered {
            assert_eq!(order, ["llm.complete", "message.end", "context"]);
            assert!(steps.contains("Summarized in pruner summary"), "{rendered}");
        } else {
            assert_eq!(order.last(), Some(&"message.end"), "{order:?}");
            assert!(
                !steps.contains("Summarized in pruner summary"),
                "{rendered}"
            );
        }
    }
}
