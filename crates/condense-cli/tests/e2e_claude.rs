//! Claude Code (the real binary, from the npm registry) through condense,
//! against a scripted Anthropic server on 127.0.0.1: what the model was
//! sent, what Claude Code persisted, and what the proxy logged.
//!
//! Two setups: `condense claude` (the proxy in process, `condense mcp`
//! registered, Claude Code's tool search on), and the manual one (`condense
//! proxy` as its own process, `ANTHROPIC_BASE_URL` and `--mcp-config`,
//! `ENABLE_TOOL_SEARCH=false`), with a recording relay in front of the
//! proxy so what Claude Code sent can be compared with what went upstream.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use condense_host_proxy::query_tool::PENDING_MARKER;
use condense_testkit::claude_env::{require_claude, ClaudeEnv, ClaudeRun};
use condense_testkit::fake_llm::{FakeLlm, RecordedRequest, Reply};
use condense_testkit::relay::Relay;
use serde_json::{json, Value};
use support::ProxyProcess;

const QUERY_TOOL: &str = "mcp__condense__context_tree_query";

fn condense() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_condense"))
}

/// A note's text: distinct lines, about `chars` long.
fn note(name: &str, chars: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < chars {
        s.push_str(&format!(
            "{name} line {i}: the measurement {} came out at {} units\n",
            i * 13 + name.len(),
            (i * 37) % 101
        ));
        i += 1;
    }
    s
}

fn write_notes(project: &Path) {
    for n in ["a", "b", "c"] {
        std::fs::write(project.join(format!("{n}.txt")), note(n, 12_000)).unwrap();
    }
}

fn cat(id: &str, file: &str) -> (String, String, Value) {
    (
        id.to_owned(),
        "Bash".to_owned(),
        json!({"command": format!("cat {file}"), "description": format!("Read {file}")}),
    )
}

fn calls(list: &[(String, String, Value)]) -> Reply {
    let mut it = list.iter();
    let (id, name, args) = it.next().unwrap();
    let mut reply = Reply::tool_call(id, name, args.clone());
    for (id, name, args) in it {
        reply = reply.and_tool_call(id, name, args.clone());
    }
    reply
}

/// The first run's script: read a and b, then c, then reply.
fn script_reading(llm: &FakeLlm) {
    llm.push(calls(&[cat("toolu_a", "a.txt"), cat("toolu_b", "b.txt")]));
    llm.push(calls(&[cat("toolu_c", "c.txt")]));
    llm.push(Reply::text("I have read all three notes."));
}

fn common_args<'a>(prompt: &'a str, session: &'a str, resume: bool) -> Vec<&'a str> {
    vec![
        "-p",
        prompt,
        if resume { "--resume" } else { "--session-id" },
        session,
        "--allowedTools",
        "Bash,ToolSearch,mcp__condense__context_tree_query",
        "--max-turns",
        "12",
        "--output-format",
        "stream-json",
        "--verbose",
    ]
}

/// The text of the `tool_result` for call `id` in a request.
fn result_of(request: &Value, id: &str) -> Option<String> {
    request["messages"]
        .as_array()?
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .map(|b| match &b["content"] {
            Value::String(s) => s.clone(),
            Value::Array(a) => a
                .iter()
                .filter_map(|x| x["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
}

fn is_stub(text: &str) -> bool {
    text.starts_with("[Summarized in pruner summary, ref `") && text.contains(QUERY_TOOL)
}

/// The ref a stub names.
fn stub_ref(text: &str) -> String {
    text.split('`').nth(1).unwrap().to_owned()
}

/// The main (non-summary) requests that carry the prompt `prompt`.
fn main_with(llm: &FakeLlm, prompt: &str) -> Vec<RecordedRequest> {
    llm.main_requests()
        .into_iter()
        .filter(|r| r.body.to_string().contains(prompt))
        .collect()
}

fn transcript_text(env: &ClaudeEnv) -> String {
    env.transcripts()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_ok(run: &ClaudeRun) {
    run.assert_success();
    assert!(
        run.mcp_servers()
            .iter()
            .any(|(n, s)| n == "condense" && s == "connected"),
        "condense mcp is connected: {:?}\n{}",
        run.mcp_servers(),
        run.report()
    );
}

#[test]
fn condense_claude_prunes_at_a_cold_call_pages_back_through_tool_search_and_leaves_the_transcript_alone(
) {
    let Some(install) = require_claude() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let upstream = format!("http://{}", llm.addr());
    let env = ClaudeEnv::new(
        install,
        &json!({"contextPrune": {"enabled": true, "economy": {"ttlSeconds": 1}}}),
    );
    write_notes(&env.project);
    let session = "5b0c7a3e-8a5f-4b7e-9a53-1d5c2f7e9a01";
    script_reading(&llm);
    let run1 = env.run_condense_claude(
        &condense(),
        &upstream,
        0,
        &common_args("Read the three notes.", session, false),
    );
    assert_ok(&run1);
    // Past the one-second TTL: the next call is cold.
    std::thread::sleep(Duration::from_millis(1500));
    llm.push(Reply::tool_call(
        "toolu_s",
        "ToolSearch",
        json!({"query": format!("select:{QUERY_TOOL}"), "max_results": 1}),
    ));
    llm.push(Reply::tool_call(
        "toolu_q",
        QUERY_TOOL,
        json!({"toolCallIds": ["t1"]}),
    ));
    llm.push(Reply::text("a.txt lists measurements."));
    let run2 = env.run_condense_claude(
        &condense(),
        &upstream,
        0,
        &common_args("What did a.txt say?", session, true),
    );
    assert_ok(&run2);
    llm.assert_script_consumed();

    // 1. At the cold call the outputs are stubs naming the MCP tool.
    let second = main_with(&llm, "What did a.txt say?");
    let first_call = &second[0].body;
    for id in ["toolu_a", "toolu_b", "toolu_c"] {
        let text = result_of(first_call, id).unwrap();
        assert!(
            is_stub(&text),
            "{id} is a stub: {}",
            &text[..text.len().min(200)]
        );
    }
    assert_eq!(
        stub_ref(&result_of(first_call, "toolu_a").unwrap()),
        "t1",
        "a.txt is t1"
    );
    // 2. After ToolSearch loaded it, the query's result is a.txt, byte for byte.
    let last = &second.last().unwrap().body;
    let answer = result_of(last, "toolu_q").unwrap();
    // The original is what Claude Code sent (its Bash drops the file's
    // last newline).
    let sent_a = llm
        .main_requests()
        .iter()
        .find_map(|r| result_of(&r.body, "toolu_a").filter(|t| !is_stub(t)))
        .expect("a.txt was sent whole before it was summarized");
    assert!(
        answer.contains(&sent_a),
        "{}",
        &answer[..answer.len().min(300)]
    );
    assert!(!answer.contains(PENDING_MARKER));
    // 3. Claude Code's own transcript holds the originals and the MCP
    // server's placeholder, never a stub.
    let transcript = transcript_text(&env);
    assert!(transcript.contains(&note("b", 12_000).replace('\n', "\\n")[..2000]));
    assert!(transcript.contains(PENDING_MARKER));
    assert!(!transcript.contains("[Summarized in pruner summary"));
    // 8. The summaries went to the same upstream.
    let summaries = llm.summary_requests();
    assert!(
        !summaries.is_empty(),
        "a summary request reached the upstream"
    );
    assert!(summaries.iter().all(|r| r.path.starts_with("/v1/messages")));
    assert!(!env.logs().is_empty(), "the proxy logged the conversation");
    // The transcript replays in `condense simulate`: one call per request
    // the conversation made, with the usage each answer reported.
    let transcript = env
        .transcripts()
        .into_iter()
        .find(|p| p.to_string_lossy().contains(session))
        .expect("Claude Code's transcript of the session");
    let out = std::process::Command::new(condense())
        .args(["simulate", "--json"])
        .arg(&transcript)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls = llm.main_requests().len() as u64;
    assert_eq!(report["sessions"][0]["policies"]["none"]["calls"], calls);
    assert_eq!(report["sessions"][0]["recorded"]["calls"], calls);
}

/// `condense proxy` as its own process, forwarding to `upstream`.
fn start_proxy(upstream: &str, port: u16, dir: &Path, settings: &Path) -> ProxyProcess {
    ProxyProcess::start(
        port,
        &[
            "--upstream".as_ref(),
            upstream.as_ref(),
            "--dir".as_ref(),
            dir.as_os_str(),
            "--settings".as_ref(),
            settings.as_os_str(),
        ],
    )
}

fn manual_args<'a>(prompt: &'a str, session: &'a str, resume: bool, mcp: &'a str) -> Vec<&'a str> {
    let mut args = common_args(prompt, session, resume);
    args.extend(["--mcp-config", mcp, "--strict-mcp-config"]);
    args
}

fn mcp_config() -> String {
    json!({"mcpServers": {"condense": {"command": condense(), "args": ["mcp"]}}}).to_string()
}

/// A POST straight to the proxy; the answer's status line.
fn post(addr: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}

fn without_cache_control(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "cache_control")
                .map(|(k, x)| (k.clone(), without_cache_control(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_cache_control).collect()),
        other => other.clone(),
    }
}

#[test]
fn the_manual_setup_forwards_unchanged_history_byte_for_byte_and_survives_a_proxy_restart() {
    let Some(install) = require_claude() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let upstream = format!("http://{}", llm.addr());
    let mut env = ClaudeEnv::new(
        install,
        &json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}),
    );
    env.set_env("ENABLE_TOOL_SEARCH", "false");
    write_notes(&env.project);
    let mcp = mcp_config();
    let session = "0f6d8e1c-3b9a-4c2e-8d7f-6a5b4c3d2e10";
    let proxy = start_proxy(&upstream, 0, &env.logs, &env.settings);
    let port = proxy.port();
    let relay = Relay::start(proxy.addr.parse().unwrap());

    script_reading(&llm);
    let run1 = env.run_claude(
        &relay.url(),
        &manual_args("Read the three notes.", session, false, &mcp),
    );
    assert_ok(&run1);
    // 9. Nothing was summarized yet: every call went upstream as sent.
    let sent: Vec<Vec<u8>> = relay
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/v1/messages"))
        .map(|r| r.body)
        .collect();
    let got: Vec<Vec<u8>> = llm.requests().into_iter().map(|r| r.raw_body).collect();
    assert_eq!(sent.len(), 3);
    assert_eq!(
        got, sent,
        "an unchanged history is forwarded byte-identical"
    );

    // 4. A new proxy process on the same port, from the logs alone.
    proxy.stop();
    let proxy = start_proxy(&upstream, port, &env.logs, &env.settings);
    llm.push(Reply::tool_call(
        "toolu_q",
        QUERY_TOOL,
        json!({"toolCallIds": ["t1"], "offset": 100, "limit": 20}),
    ));
    llm.push(Reply::text("a.txt lists measurements."));
    let run2 = env.run_claude(
        &relay.url(),
        &manual_args("What did a.txt say?", session, true, &mcp),
    );
    assert_ok(&run2);
    let second = main_with(&llm, "What did a.txt say?");
    assert_eq!(second.len(), 2);
    for id in ["toolu_a", "toolu_b", "toolu_c"] {
        assert!(is_stub(&result_of(&second[0].body, id).unwrap()), "{id}");
    }
    // 2. The page asked for, verbatim, with the tool listed directly.
    let page = result_of(&second[1].body, "toolu_q").unwrap();
    let a = note("a", 12_000);
    let lines: Vec<&str> = a.lines().skip(99).take(20).collect();
    assert!(page.contains(&lines.join("\n")), "{page}");
    assert!(!page.contains(&note("a", 12_000)), "only the page");

    // The same request, sent again to a restarted proxy, goes upstream as
    // the same bytes.
    let last_sent = relay
        .requests()
        .into_iter()
        .rfind(|r| r.path.starts_with("/v1/messages"))
        .unwrap();
    let before = llm.requests().last().unwrap().raw_body.clone();
    proxy.stop();
    let proxy = start_proxy(&upstream, port, &env.logs, &env.settings);
    llm.push(Reply::text("again"));
    let status = post(
        &proxy.addr,
        "/v1/messages?beta=true",
        &[
            ("x-api-key", "sk-ant-e2e"),
            ("x-claude-code-session-id", session),
        ],
        &last_sent.body,
    );
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let after = llm.requests().last().unwrap().raw_body.clone();
    assert_eq!(
        without_cache_control(&serde_json::from_slice(&after).unwrap()),
        without_cache_control(&serde_json::from_slice(&before).unwrap())
    );
    assert_eq!(after, before, "a restarted proxy renders the same bytes");
    let err = proxy.stop();
    assert!(!err.contains("panicked"), "{err}");
    // 3. The proxy's log holds the originals; Claude Code's transcript too.
    let log: String = env
        .logs()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(log.contains(&note("c", 12_000).replace('\n', "\\n")[..2000]));
    assert!(!log.contains("sk-ant-e2e"), "no secret in the log");
}

#[test]
fn two_sessions_at_once_through_one_proxy_do_not_mix() {
    let Some(install) = require_claude() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let upstream = format!("http://{}", llm.addr());
    let mut env = ClaudeEnv::new(
        install,
        &json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}),
    );
    env.set_env("ENABLE_TOOL_SEARCH", "false");
    write_notes(&env.project);
    let proxy = start_proxy(&upstream, 0, &env.logs, &env.settings);
    let base = format!("http://{}", proxy.addr);
    let mcp = mcp_config();
    // Both first calls are answered late, so each session takes one tool
    // call before either takes a text.
    for _ in 0..2 {
        llm.push(calls(&[cat("toolu_x1", "a.txt")]).with_delay(Duration::from_secs(2)));
    }
    for _ in 0..2 {
        llm.push(Reply::text("Done."));
    }
    let sessions = [
        (
            "1d2c3b4a-0000-4000-8000-000000000001",
            "First session: read a.",
        ),
        (
            "1d2c3b4a-0000-4000-8000-000000000002",
            "Second session: read a.",
        ),
    ];
    std::thread::scope(|s| {
        let handles: Vec<_> = sessions
            .iter()
            .map(|(id, prompt)| {
                let (env, base, mcp) = (&env, &base, &mcp);
                s.spawn(move || env.run_claude(base, &manual_args(prompt, id, false, mcp)))
            })
            .collect();
        for h in handles {
            assert_ok(&h.join().unwrap());
        }
    });
    for r in llm.main_requests() {
        let body = r.body.to_string();
        let mine = sessions.iter().filter(|(_, p)| body.contains(p)).count();
        assert_eq!(mine, 1, "each request carries one session's prompt");
    }
    let logs = env.logs();
    assert_eq!(logs.len(), 2, "one log a conversation");
    for log in logs {
        let text = std::fs::read_to_string(log).unwrap();
        let mine = sessions.iter().filter(|(_, p)| text.contains(p)).count();
        assert_eq!(mine, 1, "each log holds one session");
    }
    proxy.stop();
}

#[test]
fn a_proxy_whose_sessions_cannot_be_logged_fails_open() {
    let Some(install) = require_claude() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let upstream = format!("http://{}", llm.addr());
    let mut env = ClaudeEnv::new(
        install,
        &json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}),
    );
    env.set_env("ENABLE_TOOL_SEARCH", "false");
    write_notes(&env.project);
    // The log directory is a file: no session can be opened.
    let blocked = env.root.path().join("not-a-dir");
    std::fs::write(&blocked, "x").unwrap();
    let proxy = start_proxy(&upstream, 0, &blocked, &env.settings);
    let relay = Relay::start(proxy.addr.parse().unwrap());
    script_reading(&llm);
    let run = env.run_claude(
        &relay.url(),
        &manual_args(
            "Read the three notes.",
            "2e3f4a5b-0000-4000-8000-000000000003",
            false,
            &mcp_config(),
        ),
    );
    assert_ok(&run);
    let sent: Vec<Vec<u8>> = relay
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/v1/messages"))
        .map(|r| r.body)
        .collect();
    let got: Vec<Vec<u8>> = llm.requests().into_iter().map(|r| r.raw_body).collect();
    assert_eq!(got, sent, "requests go upstream unchanged");
    let err = proxy.stop();
    assert!(err.contains("request sent unchanged"), "{err}");
}

#[test]
fn condense_claude_does_not_start_claude_when_its_proxy_cannot() {
    let Some(install) = require_claude() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let env = ClaudeEnv::new(install, &json!({}));
    let blocked = env.root.path().join("not-a-dir");
    std::fs::write(&blocked, "x").unwrap();
    let mut cmd = Command::new(condense());
    cmd.args(["claude", "--port", "0", "--upstream"])
        .arg(format!("http://{}", llm.addr()))
        .arg("--dir")
        .arg(blocked.join("logs"))
        .args(["--", "-p", "hello"])
        .env("CONDENSE_CLAUDE_BIN", &install.bin)
        .env("HOME", &env.home);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the proxy's directory"));
    assert!(llm.requests().is_empty(), "Claude Code never started");
}

/// Claude Code's `compact_boundary` events of a run.
fn compactions(run: &ClaudeRun) -> Vec<&Value> {
    run.events
        .iter()
        .filter(|e| e["subtype"] == "compact_boundary")
        .collect()
}

/// Claude Code compacts its own history near the window by the usage the
/// upstream reported (the model's window is 1M tokens). Through condense,
/// the compaction request and the history that follows it reach the
/// upstream like any other call. `DISABLE_AUTO_COMPACT=1` turns the
/// compaction off, and Claude Code then stops the run itself ("Prompt is
/// too long"), sending nothing more.
#[test]
fn claude_codes_auto_compact_goes_through_condense_and_disable_auto_compact_turns_it_off() {
    let Some(install) = require_claude() else {
        return;
    };
    let near_full = 995_000;
    let run = |disable: bool| {
        let llm = FakeLlm::start([]);
        let upstream = format!("http://{}", llm.addr());
        let mut env = ClaudeEnv::new(install, &json!({"contextPrune": {"enabled": true}}));
        if disable {
            env.set_env("DISABLE_AUTO_COMPACT", "1");
        }
        write_notes(&env.project);
        llm.push(calls(&[cat("toolu_a", "a.txt")]).with_usage(near_full, 10));
        for i in 0..4 {
            llm.push(Reply::text(format!("Summary {i} of the notes.")).with_usage(2_000, 10));
        }
        let session = "5b0c7a3e-8a5f-4b7e-9a53-1d5c2f7e9a0c";
        let out = env.run_condense_claude(
            &condense(),
            &upstream,
            0,
            &common_args("Read a.", session, false),
        );
        (llm, env, out)
    };

    let (llm, env, out) = run(false);
    assert_ok(&out);
    let boundaries = compactions(&out);
    assert_eq!(boundaries.len(), 1, "{}", out.report());
    assert_eq!(boundaries[0]["compact_metadata"]["trigger"], "auto");
    // What followed the compaction reached the upstream through the proxy:
    // the history that starts with Claude Code's summary, and the result of
    // a.txt sent whole before it, neither failed open nor stubbed.
    let main = llm.main_requests();
    let continued = main
        .iter()
        .filter(|r| {
            r.body
                .to_string()
                .contains("This session is being continued")
        })
        .count();
    assert!(continued >= 1, "{} requests", main.len());
    let sent_a = main
        .iter()
        .find_map(|r| result_of(&r.body, "toolu_a"))
        .expect("a.txt was sent");
    assert!(!is_stub(&sent_a));
    let notices = std::fs::read_to_string(env.logs.join("proxy.log")).unwrap_or_default();
    assert!(
        !notices.contains("sent unchanged"),
        "the proxy did not fail open: {notices}"
    );

    let (llm, _env, out) = run(true);
    assert!(compactions(&out).is_empty(), "{}", out.report());
    assert!(
        out.output.stdout.contains("Prompt is too long"),
        "{}",
        out.report()
    );
    assert_eq!(
        llm.main_requests().len(),
        1,
        "nothing is sent after the first answer's usage filled the window"
    );
}
