//! A Claude Code–shaped conversation through the proxy's sessions, in
//! process: what goes upstream at each call, across a restart, beside
//! another conversation, and with results Claude Code cleared itself.

mod support;

use std::path::Path;

use condense_host_proxy::view::MCP_QUERY_TOOL;
use condense_host_proxy::{Credentials, SessionOptions, Sessions};
use condense_testkit::proxy_client::saved_misses;
use serde_json::Value;
use support::{output, settings, Convo};

fn sessions(dir: &Path, policy: &str) -> Sessions {
    Sessions::new(
        dir.to_path_buf(),
        SessionOptions::offline(settings(policy), MCP_QUERY_TOOL),
    )
}

/// What goes upstream for `body`: the rewritten body, or `body` itself.
async fn sent(s: &Sessions, body: &str, now: i64) -> String {
    let (_, p) = s.prepare(None, &Credentials::default(), body, now).await;
    p.body.unwrap_or_else(|| body.to_owned())
}

/// The parts of a body outside `messages`, and its messages.
fn split(body: &str) -> (Value, Vec<Value>) {
    let mut v: Value = serde_json::from_str(body).unwrap();
    let messages = v["messages"].take();
    v.as_object_mut().unwrap().remove("messages");
    (v, messages.as_array().cloned().unwrap_or_default())
}

/// Every tool_use is answered in the next message, and every result
/// answers a call of the message before it.
fn assert_paired(messages: &[Value]) {
    let mut open: Vec<String> = Vec::new();
    for m in messages {
        let blocks = m["content"].as_array().cloned().unwrap_or_default();
        let results: Vec<String> = blocks
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["tool_use_id"].as_str().unwrap().to_owned())
            .collect();
        for r in &results {
            assert!(open.contains(r), "orphan result {r}");
        }
        for o in &open {
            assert!(results.contains(o), "unanswered call {o}");
        }
        open = blocks
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap().to_owned())
            .collect();
    }
}

/// The text of a tool_result block.
fn result_text(b: &Value) -> String {
    match &b["content"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The refs (`tN`) of the stubs in the body, with the call each stands in.
fn stubs(messages: &[Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in messages {
        for b in m["content"].as_array().cloned().unwrap_or_default() {
            if b["type"] != "tool_result" {
                continue;
            }
            let text = result_text(&b);
            if let Some(rest) = text.strip_prefix("[Summarized in pruner summary, ref `") {
                let r = rest.split('`').next().unwrap().to_owned();
                out.push((r, b["tool_use_id"].as_str().unwrap().to_owned()));
            }
        }
    }
    out
}

/// A session of prompts, tool turns and replies; returns each call's body.
fn script() -> Vec<String> {
    script_convo().1
}

/// [`script`]'s conversation as it ends, and each call's body.
fn script_convo() -> (Convo, Vec<String>) {
    let mut c = Convo::default();
    let mut bodies = Vec::new();
    c.prompt("Build the project and fix what fails.");
    bodies.push(c.body("sess-a"));
    for task in 0..3 {
        for _ in 0..2 {
            c.tools(2, 6000);
            bodies.push(c.body("sess-a"));
        }
        c.reply(&format!("Task {task} is done."));
        c.prompt(&format!("Now task {}.", task + 1));
        bodies.push(c.body("sess-a"));
    }
    (c, bodies)
}

#[tokio::test]
async fn outputs_become_stubs_that_page_back_whole_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "reference");
    let bodies = script();
    let mut last = String::new();
    for (i, body) in bodies.iter().enumerate() {
        last = sent(&s, body, 1_700_000_000_000 + i as i64 * 10_000).await;
        // Outside `messages`, every byte is the client's.
        let at = body.find("\"messages\":").unwrap();
        assert_eq!(&last[..at], &body[..at]);
        let tail = &body[body.find("],\"system\":").unwrap()..];
        assert!(last.ends_with(tail));
        let (rest_in, _) = split(body);
        let (rest_out, messages) = split(&last);
        assert_eq!(rest_in, rest_out);
        assert_paired(&messages);
    }
    let (_, messages) = split(&last);
    let stubbed = stubs(&messages);
    assert!(
        stubbed.len() >= 4,
        "the first tasks' outputs are stubs: {stubbed:?}"
    );
    assert!(last.contains(MCP_QUERY_TOOL), "stubs name the MCP tool");
    // Each stub's original comes back whole through the session's query.
    let key = s
        .prepare(None, &Credentials::default(), bodies.last().unwrap(), 0)
        .await
        .0
        .unwrap();
    for (r, call) in &stubbed {
        let n: usize = call.trim_start_matches("toolu_").parse().unwrap();
        let answer = s
            .query(&key, std::slice::from_ref(r), Default::default(), 0)
            .await
            .unwrap();
        let text = answer["text"].as_str().unwrap();
        assert!(
            text.contains(&output(n, 6000)),
            "{r} pages back output {n} whole"
        );
    }
    // Each came back from the log: once the engine has seen a tool
    // result, the session holds its skeleton, not its text.
    let (parked, held) = s.parked(&key, 0).await.unwrap();
    assert_eq!(
        parked, 12,
        "three tasks of two turns of two calls ({held} held)"
    );

    // A log cut short under the session costs the texts it held, not the
    // session: the query says what it cannot read, requests still go.
    let log = dir.path().join(format!("{key}.jsonl"));
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, &text[..text.find('\n').unwrap() + 1]).unwrap();
    let answer = s
        .query(&key, &[stubbed[0].0.clone()], Default::default(), 0)
        .await
        .unwrap();
    let said = answer["text"].as_str().unwrap();
    assert!(said.contains("cannot be read back"), "{said}");
    let again = sent(&s, bodies.last().unwrap(), 1_800_000_000_000).await;
    assert_paired(&split(&again).1);
}

#[tokio::test]
async fn an_unchanged_history_goes_upstream_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "reference");
    let bodies = script();
    // Before any flush, every call goes as the client sent it.
    for (i, body) in bodies.iter().take(3).enumerate() {
        let (_, p) = s
            .prepare(
                None,
                &Credentials::default(),
                body,
                1_700_000_000_000 + i as i64,
            )
            .await;
        assert_eq!(p.body, None, "call {i}");
    }
}

#[tokio::test]
async fn the_same_request_renders_the_same_bytes_again_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let bodies = script();
    let t = |i: usize| 1_700_000_000_000 + i as i64 * 10_000;
    let mut seen = Vec::new();
    {
        let s = sessions(dir.path(), "reference");
        for (i, body) in bodies.iter().enumerate().take(bodies.len() - 1) {
            seen.push(sent(&s, body, t(i)).await);
        }
        // Sent again, the last call renders the same.
        let i = bodies.len() - 2;
        assert_eq!(sent(&s, &bodies[i], t(i)).await, seen[i]);
    }
    // A new proxy, from the logs alone.
    let s = sessions(dir.path(), "reference");
    let i = bodies.len() - 2;
    assert_eq!(sent(&s, &bodies[i], t(i)).await, seen[i]);
    // And the next call goes on from there as the live proxy would have.
    let live = {
        let d2 = tempfile::tempdir().unwrap();
        let s2 = sessions(d2.path(), "reference");
        let mut out = String::new();
        for (i, body) in bodies.iter().enumerate() {
            out = sent(&s2, body, t(i)).await;
        }
        out
    };
    let last = bodies.len() - 1;
    assert_eq!(sent(&s, &bodies[last], t(last)).await, live);
}

#[tokio::test]
async fn two_conversations_at_once_do_not_mix() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "reference");
    let a = script();
    let b: Vec<String> = script()
        .into_iter()
        .map(|x| {
            x.replace("sess-a", "sess-b")
                .replace("Build the project", "Test the project")
        })
        .collect();
    let alone = {
        let d2 = tempfile::tempdir().unwrap();
        let s2 = sessions(d2.path(), "reference");
        let mut out = Vec::new();
        for (i, body) in a.iter().enumerate() {
            out.push(sent(&s2, body, 1_700_000_000_000 + i as i64 * 10_000).await);
        }
        out
    };
    for i in 0..a.len() {
        let t = 1_700_000_000_000 + i as i64 * 10_000;
        let (ra, rb) = tokio::join!(sent(&s, &a[i], t), sent(&s, &b[i], t));
        assert_eq!(ra, alone[i], "call {i} of A");
        assert!(!rb.contains("Build the project"));
    }
    let logs = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(logs, 2, "one log a conversation");
}

#[tokio::test]
async fn a_body_the_proxy_cannot_read_goes_unchanged_with_a_notice() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "reference");
    for garbage in ["", "{", "[1,2]", r#"{"messages":[{"role":5}]}"#] {
        let (key, p) = s.prepare(None, &Credentials::default(), garbage, 0).await;
        assert_eq!((key, p.body), (None, None), "{garbage:?}");
        assert!(!p.notices.is_empty());
    }
    assert_eq!(std::fs::read_dir(dir.path()).map_or(0, |d| d.count()), 0);
}

#[tokio::test]
async fn results_claude_code_cleared_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "reference");
    let bodies = script();
    for (i, body) in bodies.iter().enumerate() {
        sent(&s, body, 1_700_000_000_000 + i as i64 * 10_000).await;
    }
    // Claude Code's microcompact clears the first result in place.
    let cleared = "[Old tool result content cleared]";
    let last = bodies.last().unwrap();
    let mut v: Value = serde_json::from_str(last).unwrap();
    v["messages"][2]["content"][0]["content"] =
        serde_json::json!([{"type": "text", "text": cleared}]);
    let body = v.to_string();
    let out = sent(&s, &body, 1_700_000_100_000).await;
    let (_, messages) = split(&out);
    assert_eq!(result_text(&messages[2]["content"][0]), cleared);
    assert_paired(&messages);
    // The others are still stubs.
    assert!(stubs(&messages).len() >= 3);
}

#[tokio::test]
async fn under_the_default_policy_stubs_wait_for_a_cold_cache() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "cache-aware");
    let bodies = script();
    let warm = |i: usize| 1_700_000_000_000 + i as i64 * 5_000;
    let n = bodies.len();
    for (i, body) in bodies.iter().enumerate().take(n - 1) {
        let out = sent(&s, body, warm(i)).await;
        let (_, messages) = split(&out);
        assert!(
            stubs(&messages).is_empty(),
            "call {i} is warm: nothing changes"
        );
    }
    // Past the 60-second TTL the prefix is written anew anyway.
    let cold = warm(n - 2) + 10 * 60_000;
    let out = sent(&s, &bodies[n - 1], cold).await;
    let (_, messages) = split(&out);
    assert_paired(&messages);
    assert!(
        stubs(&messages).len() >= 4,
        "the cold call shows the summaries"
    );
}

/// The text the model reads as the result of call `id`.
fn result_of(body: &str, id: &str) -> String {
    let (_, messages) = split(body);
    messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .map(|b| result_text(&b))
        .unwrap_or_default()
}

#[tokio::test]
async fn the_query_tools_placeholder_becomes_the_sessions_answer_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let t = |i: usize| 1_700_000_000_000 + i as i64 * 10_000;
    let mut c = Convo::default();
    c.prompt("Read the logs.");
    // One output long enough to page (over 50 KiB).
    c.tools(1, 120_000);
    c.tools(1, 6000);
    c.reply("Read them.");
    c.prompt("What did the first say?");
    let mut i = 0;
    let mut bodies = Vec::new();
    let s = sessions(dir.path(), "reference");
    for n in 1..=c.messages.len() {
        let mut part = Convo::default();
        part.messages = c.messages[..n].to_vec();
        if part.messages[n - 1]["role"] == "user" {
            bodies.push(sent(&s, &part.body("q"), t(i)).await);
            i += 1;
        }
    }
    let stub = result_of(bodies.last().unwrap(), "toolu_0001");
    // A spilled output's stub names its ref last.
    let r = stub
        .rsplit("ref `")
        .next()
        .and_then(|x| x.split('`').next())
        .unwrap()
        .to_owned();
    assert!(stub.contains(MCP_QUERY_TOOL), "{stub}");
    let id = c.query(serde_json::json!({"toolCallIds": [r]}));
    let first = sent(&s, &c.body("q"), t(i)).await;
    let answer = result_of(&first, &id);
    let whole = output(1, 120_000);
    assert!(!answer.contains(condense_host_proxy::query_tool::PENDING_MARKER));
    assert!(
        answer.contains(&whole[..40_000]),
        "the first page, verbatim"
    );
    assert!(!answer.contains(&whole), "a long output is paged");
    assert!(
        answer.contains("offset"),
        "the page says where the next starts"
    );
    // The next call, and a restarted proxy, show the same bytes.
    let id2 = c.query(serde_json::json!({"toolCallIds": [r], "offset": 600}));
    let second = sent(&s, &c.body("q"), t(i + 1)).await;
    assert_eq!(result_of(&second, &id), answer);
    let page2 = result_of(&second, &id2);
    assert!(
        page2.contains("line 600 of output 1"),
        "{}",
        &page2[..200.min(page2.len())]
    );
    drop(s);
    let s = sessions(dir.path(), "reference");
    assert_eq!(sent(&s, &c.body("q"), t(i + 1)).await, second);
}

#[tokio::test]
async fn a_request_read_after_the_previous_one_renders_as_one_read_whole() {
    // With Claude Code's session header, each call is read after the
    // previous one (only what it adds); without it, whole. Same bytes out,
    // through flushes, a query and a result Claude Code cleared.
    let whole_dir = tempfile::tempdir().unwrap();
    let fast_dir = tempfile::tempdir().unwrap();
    let whole = sessions(whole_dir.path(), "reference");
    let fast = sessions(fast_dir.path(), "reference");
    let mut bodies = script();
    let mut c = Convo::default();
    let last: Value = serde_json::from_str(bodies.last().unwrap()).unwrap();
    c.messages = last["messages"].as_array().unwrap().clone();
    c.query(serde_json::json!({"toolCallIds": ["t2"]}));
    bodies.push(c.body("sess-a"));
    c.messages[2]["content"][1]["content"] =
        serde_json::json!([{"type": "text", "text": "[Old tool result content cleared]"}]);
    c.tools(1, 5000);
    bodies.push(c.body("sess-a"));
    for (i, body) in bodies.iter().enumerate() {
        let t = 1_700_000_000_000 + i as i64 * 10_000;
        let (_, a) = whole.prepare(None, &Credentials::default(), body, t).await;
        let (_, b) = fast
            .prepare(Some("sess-a"), &Credentials::default(), body, t)
            .await;
        assert_eq!(a.body, b.body, "call {i}");
    }
}

#[tokio::test]
async fn reminders_beside_tool_results_stay_and_start_no_run() {
    // Claude Code puts system reminders as text beside the tool results of
    // a user message; they are sent as they are, and the turn goes on.
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "reference");
    let with_reminders: Vec<String> = script()
        .iter()
        .map(|b| {
            let mut v: Value = serde_json::from_str(b).unwrap();
            for m in v["messages"].as_array_mut().unwrap() {
                let blocks = m["content"].as_array_mut().unwrap();
                if blocks.iter().any(|b| b["type"] == "tool_result") {
                    blocks.push(serde_json::json!({"type": "text", "text": "<system-reminder>keep going</system-reminder>"}));
                }
            }
            v.to_string()
        })
        .collect();
    let mut last = String::new();
    for (i, body) in with_reminders.iter().enumerate() {
        last = sent(&s, body, 1_700_000_000_000 + i as i64 * 10_000).await;
        let (_, messages) = split(&last);
        assert_paired(&messages);
    }
    let (_, messages) = split(&last);
    assert!(stubs(&messages).len() >= 4, "outputs still become stubs");
    let reminders = last.matches("keep going").count();
    let sent_reminders = with_reminders.last().unwrap().matches("keep going").count();
    assert_eq!(reminders, sent_reminders, "every reminder is sent");
}

#[cfg(unix)]
#[tokio::test]
async fn the_logs_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("proxy");
    let s = sessions(&dir, "reference");
    for (i, body) in script().iter().enumerate().take(3) {
        sent(&s, body, 1_700_000_000_000 + i as i64).await;
    }
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!logs.is_empty());
    for log in logs {
        assert_eq!(mode(&log), 0o600, "{}", log.display());
    }
}

#[tokio::test]
async fn the_misses_counted_since_the_last_write_are_saved_when_the_session_closes() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "cache-aware");
    let bodies = script();
    for (i, body) in bodies.iter().enumerate() {
        let (key, _) = s
            .prepare(
                None,
                &Credentials::default(),
                body,
                1_700_000_000_000 + i as i64 * 5_000,
            )
            .await;
        // Every answer read nothing from the cache: a miss each call.
        let usage = condense_host_proxy::view::Usage {
            input: 100,
            cache_read: 0,
            cache_write: 9_000,
            output: 50,
        };
        // The first body has no tool results: no session yet.
        if let Some(key) = key {
            s.record_usage(&key, usage).await;
        }
    }
    // The first report was written at once; the rest wait for 16 reports
    // or a minute, which five seconds a call never reach.
    assert_eq!(saved_misses(dir.path()), [(1, 1)]);
    drop(s);
    // The session opens at the second body; each body brings the previous
    // answer's usage, which counts where the call was expected to read the
    // one before (not the session's first); the last answer's usage never
    // reached the engine.
    let counted = bodies.len() as u64 - 3;
    assert_eq!(saved_misses(dir.path()), [(counted, counted)]);
}

/// The tool results a session log holds, by call id, in order.
fn logged_results(dir: &Path, key: &str) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join(format!("{key}.jsonl"))).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "toolResult")
        .map(|e| e["message"]["toolCallId"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_conversation_first_seen_with_its_history_is_summarized_in_one_flush() {
    let bodies = script();
    let t = |i: usize| 1_700_000_000_000 + i as i64 * 10_000;
    let last = bodies.len() - 1;
    let live_dir = tempfile::tempdir().unwrap();
    let live = sessions(live_dir.path(), "reference");
    let mut seen = String::new();
    for (i, body) in bodies.iter().enumerate() {
        seen = sent(&live, body, t(i)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "reference");
    let (key, prepared) = s
        .prepare(None, &Credentials::default(), &bodies[last], t(last))
        .await;
    let key = key.unwrap();
    let first = prepared.body.expect("the history's outputs become stubs");
    let (_, messages) = split(&first);
    assert_paired(&messages);
    // The replies before the last asked for no flush of their own: their
    // runs' summaries come in the last reply's, the same outputs stubbed.
    let refs = |m: &[Value]| -> Vec<String> { stubs(m).into_iter().map(|(_, c)| c).collect() };
    assert_eq!(refs(&messages), refs(&split(&seen).1));
    for (r, call) in stubs(&messages) {
        let n: usize = call.trim_start_matches("toolu_").parse().unwrap();
        let answer = s
            .query(&key, std::slice::from_ref(&r), Default::default(), 0)
            .await
            .unwrap();
        assert!(answer["text"].as_str().unwrap().contains(&output(n, 6000)));
    }
    let log = std::fs::read_to_string(dir.path().join(format!("{key}.jsonl"))).unwrap();
    assert_eq!(log.matches("\"context-prune-flush-metrics\"").count(), 1);
    // The log holds each result once, and the session reads them from it.
    let logged = logged_results(dir.path(), &key);
    assert_eq!(logged, logged_results(live_dir.path(), &key));
    let (parked, _) = s.parked(&key, 0).await.unwrap();
    assert_eq!(parked, 12);
    // The conversation goes on from there, and after a restart alike.
    let (mut c, _) = script_convo();
    c.tools(1, 6000);
    let next = sent(&s, &c.body("sess-a"), t(last + 1)).await;
    assert_paired(&split(&next).1);
    assert_eq!(refs(&split(&next).1), refs(&messages));
    drop(s);
    let s = sessions(dir.path(), "reference");
    assert_eq!(sent(&s, &c.body("sess-a"), t(last + 1)).await, next);
}

#[tokio::test]
async fn a_conversation_first_seen_is_summarized_at_its_first_call_by_the_default_policy() {
    // condense has sent none of it: for its cache the call is cold.
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "cache-aware");
    let bodies = script();
    let n = bodies.len();
    let (key, p) = s
        .prepare(
            None,
            &Credentials::default(),
            &bodies[n - 2],
            1_700_000_000_000,
        )
        .await;
    let out = p.body.expect("the history's outputs become stubs");
    let (_, messages) = split(&out);
    assert_paired(&messages);
    assert!(stubs(&messages).len() >= 8, "{:?}", stubs(&messages));
    for (r, call) in stubs(&messages) {
        let n: usize = call.trim_start_matches("toolu_").parse().unwrap();
        let answer = s
            .query(key.as_deref().unwrap(), &[r], Default::default(), 0)
            .await
            .unwrap();
        assert!(answer["text"].as_str().unwrap().contains(&output(n, 6000)));
    }
}

#[tokio::test]
async fn a_history_first_seen_with_a_query_in_it_has_the_query_answered() {
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "reference");
    let (mut c, _) = script_convo();
    let id = c.query(serde_json::json!({"toolCallIds": ["toolu_0001"]}));
    c.tools(2, 6000);
    c.reply("Done.");
    c.prompt("Next.");
    let (key, prepared) = s
        .prepare(
            None,
            &Credentials::default(),
            &c.body("q"),
            1_700_000_000_000,
        )
        .await;
    let out = prepared.body.unwrap();
    let answer = result_of(&out, &id);
    assert!(!answer.contains(condense_host_proxy::query_tool::PENDING_MARKER));
    assert!(answer.contains(&output(1, 6000)), "{answer}");
    assert_paired(&split(&out).1);
    let logged = logged_results(dir.path(), &key.unwrap());
    let mut unique = logged.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(logged.len(), unique.len(), "each result logged once");
    assert_eq!(logged.len(), 15);
}

#[tokio::test]
async fn a_request_whose_result_answers_no_call_goes_as_written() {
    // The upstream refuses such a request; condense must not mend it.
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "reference");
    let (mut c, bodies) = script_convo();
    let t = |i: usize| 1_700_000_000_000 + i as i64 * 10_000;
    for (i, body) in bodies.iter().enumerate() {
        sent(&s, body, t(i)).await;
    }
    let last = c.messages.len() - 1;
    c.messages[last]["content"].as_array_mut().unwrap().push(
        serde_json::json!({"type": "tool_result", "tool_use_id": "toolu_none", "content": "stray"}),
    );
    let (_, p) = s
        .prepare(None, &Credentials::default(), &c.body("sess-a"), t(99))
        .await;
    support::assert_sent_as_written(&p, "answers no call");
}

#[tokio::test]
async fn an_oversized_output_in_a_history_first_seen_is_spilled_at_once() {
    // As its turn's end would have spilled it, had the proxy seen it.
    let dir = tempfile::tempdir().unwrap();
    let s = sessions(dir.path(), "reference");
    let mut c = Convo::default();
    c.prompt("Read the logs.");
    c.tools(1, 6000);
    c.tools(1, 120_000);
    c.tools(1, 6000);
    let (key, p) = s
        .prepare(
            None,
            &Credentials::default(),
            &c.body("big"),
            1_700_000_000_000,
        )
        .await;
    let out = p.body.expect("the oversized output becomes a stub");
    let stub = result_of(&out, "toolu_0002");
    assert!(stub.contains("spilled"), "{stub}");
    assert_eq!(
        result_of(&out, "toolu_0001"),
        output(1, 6000),
        "the others stay"
    );
    assert_paired(&split(&out).1);
    let answer = s
        .query(
            key.as_deref().unwrap(),
            &["toolu_0002".to_owned()],
            Default::default(),
            0,
        )
        .await
        .unwrap();
    let whole = output(2, 120_000);
    assert!(answer["text"].as_str().unwrap().contains(&whole[..40_000]));
}
