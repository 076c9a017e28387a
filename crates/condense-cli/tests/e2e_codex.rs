//! Codex (the real binary, from the npm registry) through condense, against
//! a scripted Responses API server on 127.0.0.1: what the model was sent,
//! what Codex persisted, and what the proxy logged.
//!
//! Two setups: `condense codex` (the proxy in process, `-c` overrides for
//! the provider and `condense mcp`), and the manual one (`condense proxy` as
//! its own process, the provider and the MCP server in `config.toml`), with
//! a recording relay in front of the proxy so what Codex sent can be
//! compared with what went upstream.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use condense_host_proxy::query_tool::PENDING_MARKER;
use condense_testkit::codex_env::{require_codex, CodexEnv, CodexRun};
use condense_testkit::fake_llm::{FakeLlm, RecordedRequest, Reply};
use condense_testkit::relay::Relay;
use serde_json::{json, Value};
use support::ProxyProcess;

/// The query tool as Codex calls it (the fake splits it into the namespace
/// `mcp__condense` and the name `context_tree_query`).
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
            "{name}: measurement {i} reads {} units\n",
            i * 37 % 101
        ));
        i += 1;
    }
    s
}

fn write_notes(project: &Path) {
    for (name, chars) in [("a", 9_000), ("b", 12_000), ("c", 7_000)] {
        std::fs::write(project.join(format!("{name}.txt")), note(name, chars)).unwrap();
    }
}

/// The first prompt's script: three reads, each after reasoning, then a
/// reply.
fn script_reading(llm: &FakeLlm) {
    for (id, file) in [
        ("call_a", "a.txt"),
        ("call_b", "b.txt"),
        ("call_c", "c.txt"),
    ] {
        llm.push(
            Reply::tool_call(id, "exec_command", json!({"cmd": format!("cat {file}")}))
                .with_reasoning(format!("I should read {file}.")),
        );
    }
    llm.push(Reply::text("Read all three."));
}

/// The items of a Responses request.
fn input(request: &RecordedRequest) -> Vec<Value> {
    request.body["input"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The text of the output answering `call_id`.
fn output_of(request: &RecordedRequest, call_id: &str) -> Option<String> {
    input(request)
        .into_iter()
        .find(|i| i["type"] == "function_call_output" && i["call_id"] == call_id)
        .map(|i| match &i["output"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
}

fn is_stub(text: &str) -> bool {
    text.starts_with("[Summarized in pruner summary")
}

fn stub_ref(text: &str) -> String {
    text.split("ref `")
        .nth(1)
        .unwrap()
        .split('`')
        .next()
        .unwrap()
        .to_owned()
}

/// The main requests whose last user message holds `prompt`.
fn main_with(llm: &FakeLlm, prompt: &str) -> Vec<RecordedRequest> {
    llm.main_requests()
        .into_iter()
        .filter(|r| {
            input(r)
                .iter()
                .rev()
                .find(|i| i["type"] == "message" && i["role"] == "user")
                .is_some_and(|m| m.to_string().contains(prompt))
        })
        .collect()
}

fn assert_ok(run: &CodexRun) {
    run.assert_success();
    assert!(
        !run.agent_messages().is_empty(),
        "codex answered\n{}",
        run.report()
    );
}

fn rollout_text(env: &CodexEnv) -> String {
    env.rollouts()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

#[test]
fn condense_codex_prunes_at_a_cold_call_pages_back_through_mcp_and_leaves_the_rollout_alone() {
    let Some(install) = require_codex() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let upstream = format!("http://{}", llm.addr());
    let env = CodexEnv::new(
        install,
        &json!({"contextPrune": {"enabled": true, "economy": {"ttlSeconds": 1}}}),
    );
    write_notes(&env.project);
    script_reading(&llm);
    let run1 = env.run_condense_codex(&condense(), &upstream, 0, "Read the three notes.", false);
    assert_ok(&run1);
    // Past the one-second TTL: the next call is cold.
    std::thread::sleep(Duration::from_millis(1500));
    llm.push(Reply::tool_call(
        "call_q",
        QUERY_TOOL,
        json!({"toolCallIds": ["t1"]}),
    ));
    llm.push(Reply::text("a.txt lists measurements."));
    let run2 = env.run_condense_codex(&condense(), &upstream, 0, "What did a.txt say?", true);
    assert_ok(&run2);
    llm.assert_script_consumed();
    assert_eq!(run1.thread_id(), run2.thread_id(), "one thread, resumed");

    // The MCP tool is deferred behind Codex's tool search, its namespace
    // named to the model.
    let first = &llm.main_requests()[0].body;
    assert!(
        first["tools"].to_string().contains("\"tool_search\""),
        "{}",
        first["tools"]
    );
    assert!(first["input"].to_string().contains("mcp__condense"));
    // 1. At the cold call the outputs are stubs naming the MCP tool.
    // (Its first call; the tool search comes after.)
    let second = main_with(&llm, "What did a.txt say?");
    let at_cold = &second[0];
    for id in ["call_a", "call_b", "call_c"] {
        let text = output_of(at_cold, id).unwrap();
        assert!(is_stub(&text), "{id}: {}", &text[..text.len().min(200)]);
        assert!(text.contains(QUERY_TOOL), "{text}");
    }
    assert_eq!(stub_ref(&output_of(at_cold, "call_a").unwrap()), "t1");
    // 2. The query's output is a.txt as Codex sent it, byte for byte, in
    // place of the MCP server's placeholder.
    let sent_a = llm
        .main_requests()
        .iter()
        .find_map(|r| output_of(r, "call_a").filter(|t| !is_stub(t)))
        .expect("a.txt was sent whole before it was summarized");
    let answer = output_of(second.last().unwrap(), "call_q").unwrap();
    assert!(!answer.contains(PENDING_MARKER), "{answer}");
    assert!(
        answer.contains(&sent_a),
        "{}",
        &answer[..answer.len().min(300)]
    );
    // 3. Reasoning went back as the model gave it: every reasoning item
    // upstream carries an `encrypted_content` the fake produced, unchanged.
    let reasoning: Vec<Value> = second
        .iter()
        .flat_map(input)
        .filter(|i| i["type"] == "reasoning")
        .collect();
    assert!(!reasoning.is_empty());
    for r in &reasoning {
        let enc = r["encrypted_content"].as_str().unwrap();
        let summary = r["summary"][0]["text"].as_str().unwrap_or("");
        assert_eq!(
            enc,
            format!(
                "enc:{}:{}",
                r["id"].as_str().unwrap().trim_start_matches("rs_"),
                summary.len()
            ),
            "{r}"
        );
    }
    // 4. Codex's rollout holds the originals and the placeholder, never a
    // stub.
    let rollout = rollout_text(&env);
    assert!(rollout.contains(PENDING_MARKER));
    assert!(!rollout.contains("[Summarized in pruner summary"));
    assert!(rollout.contains("a: measurement 3 reads"));
    // 5. Summaries went to the same upstream, as Chat Completions.
    let summaries = llm.summary_requests();
    assert!(
        !summaries.is_empty(),
        "a summary request reached the upstream"
    );
    assert!(summaries
        .iter()
        .all(|r| r.path.ends_with("/v1/chat/completions")));
    assert!(!env.logs().is_empty(), "the proxy logged the conversation");
    // 6. The rollout replays in `condense simulate`: one call per request
    // the thread made, with the usage each answer reported.
    let out = std::process::Command::new(condense())
        .args(["simulate", "--json"])
        .arg(env.codex_home.join("sessions"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["profile"]["name"], "openai",
        "rollouts price as OpenAI"
    );
    let calls = llm.main_requests().len() as u64;
    assert_eq!(report["sessions"][0]["policies"]["none"]["calls"], calls);
    assert_eq!(report["sessions"][0]["recorded"]["calls"], calls);
}

/// `condense proxy` as its own process, forwarding OpenAI calls to
/// `upstream`.
fn start_proxy(upstream: &str, port: u16, dir: &Path, settings: &Path) -> ProxyProcess {
    ProxyProcess::start(
        port,
        &[
            "--openai-upstream".as_ref(),
            upstream.as_ref(),
            "--upstream".as_ref(),
            "http://127.0.0.1:9".as_ref(),
            "--dir".as_ref(),
            dir.as_os_str(),
            "--settings".as_ref(),
            settings.as_os_str(),
        ],
    )
}

/// The provider and the MCP server in `config.toml` (the manual setup).
fn manual_config(env: &CodexEnv, base_url: &str) {
    env.add_config(
        "model_provider = \"condense\"",
        &format!(
            "[model_providers.condense]\n\
         name = \"condense proxy\"\n\
         base_url = \"{base_url}/v1\"\n\
         env_key = \"OPENAI_API_KEY\"\n\
         wire_api = \"responses\"\n\
         [mcp_servers.condense]\n\
         command = {}\n\
         args = [\"mcp\"]\n",
            serde_json::Value::String(condense().display().to_string())
        ),
    );
}

#[test]
fn the_manual_setup_forwards_unchanged_history_byte_for_byte_and_survives_a_proxy_restart() {
    let Some(install) = require_codex() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let upstream = format!("http://{}", llm.addr());
    let env = CodexEnv::new(
        install,
        &json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}),
    );
    write_notes(&env.project);
    let proxy = start_proxy(&upstream, 0, &env.logs, &env.settings);
    let port = proxy.port();
    let relay = Relay::start(proxy.addr.parse().unwrap());
    manual_config(&env, &relay.url());
    script_reading(&llm);
    let run1 = env.run_codex("Read the three notes.", false);
    assert_ok(&run1);
    // Before any summary, Codex's requests went upstream byte for byte.
    let sent: Vec<Vec<u8>> = relay
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/responses"))
        .map(|r| r.body)
        .collect();
    let got: Vec<RecordedRequest> = llm.main_requests();
    assert_eq!(got.len(), sent.len());
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(&g.raw_body, s, "call {i} went as Codex sent it");
    }
    // The next prompt's first call, rendered by this proxy …
    llm.push(Reply::text("Noted."));
    let run2 = env.run_codex("Anything else?", true);
    assert_ok(&run2);
    let before = llm.main_requests().last().unwrap().raw_body.clone();
    let asked = relay
        .requests()
        .into_iter()
        .rfind(|r| r.path.ends_with("/responses"))
        .unwrap()
        .body;
    assert_ne!(before, asked, "the first prompt's outputs are stubs now");
    // … and by a restarted one, from its log: the same bytes.
    proxy.stop();
    let proxy = start_proxy(&upstream, port, &env.logs, &env.settings);
    llm.push(Reply::text("Noted."));
    let status = post(&proxy.addr, "/v1/responses", &asked);
    assert!(status.contains("200"), "{status}");
    let after = llm.main_requests().last().unwrap().raw_body.clone();
    assert_eq!(after, before, "a restarted proxy renders the same bytes");
    llm.assert_script_consumed();
    proxy.stop();
}

#[test]
fn a_proxy_whose_sessions_cannot_be_logged_fails_open() {
    let Some(install) = require_codex() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let upstream = format!("http://{}", llm.addr());
    let env = CodexEnv::new(
        install,
        &json!({"contextPrune": {"enabled": true, "economy": {"policy": "reference"}}}),
    );
    write_notes(&env.project);
    // The log directory is a file: no session can be opened.
    let blocked = env.root.path().join("not-a-dir");
    std::fs::write(&blocked, "x").unwrap();
    let proxy = start_proxy(&upstream, 0, &blocked, &env.settings);
    let relay = Relay::start(proxy.addr.parse().unwrap());
    manual_config(&env, &relay.url());
    script_reading(&llm);
    let run = env.run_codex("Read the three notes.", false);
    assert_ok(&run);
    let sent: Vec<Vec<u8>> = relay
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/responses"))
        .map(|r| r.body)
        .collect();
    let got: Vec<Vec<u8>> = llm
        .main_requests()
        .into_iter()
        .map(|r| r.raw_body)
        .collect();
    assert_eq!(got, sent, "requests go upstream unchanged");
    let err = proxy.stop();
    assert!(err.contains("request sent unchanged"), "{err}");
}

/// A POST straight to the proxy; the answer's status line.
fn post(addr: &str, path: &str, body: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nauthorization: Bearer sk-e2e-codex\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
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

/// Codex compacts its own history once the usage the upstream reported
/// passes `model_auto_compact_token_limit`: it asks the model for a handoff
/// summary, then starts again from it. Through condense, both requests
/// reach the upstream like any other call, the output the summary is made
/// from whole, and nothing fails open.
#[test]
fn codexs_auto_compact_goes_through_condense() {
    let Some(install) = require_codex() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let upstream = format!("http://{}", llm.addr());
    let env = CodexEnv::new(install, &json!({"contextPrune": {"enabled": true}}));
    env.add_config("model_auto_compact_token_limit = 50000", "");
    write_notes(&env.project);
    llm.push(
        Reply::tool_call("call_a", "exec_command", json!({"cmd": "cat a.txt"}))
            .with_usage(60_000, 10),
    );
    llm.push(Reply::text("Summary: a.txt holds measurements.").with_usage(2_000, 10));
    llm.push(Reply::text("Done reading a.").with_usage(2_000, 10));
    let run = env.run_condense_codex(&condense(), &upstream, 0, "Read a.", false);
    assert_ok(&run);
    llm.assert_script_consumed();

    let main = llm.main_requests();
    let compaction = main
        .iter()
        .position(|r| r.body.to_string().contains("CONTEXT CHECKPOINT COMPACTION"))
        .unwrap_or_else(|| panic!("Codex compacted\n{}", run.report()));
    let output = output_of(&main[compaction], "call_a").expect("the output is in the request");
    assert!(!is_stub(&output));
    assert!(output.contains(&note("a", 9_000)[..2_000]));
    let after = &main[compaction + 1..];
    assert_eq!(after.len(), 1);
    assert!(after[0]
        .body
        .to_string()
        .contains("Summary: a.txt holds measurements."));
    let notices = std::fs::read_to_string(env.logs.join("proxy.log")).unwrap_or_default();
    assert!(
        !notices.contains("sent unchanged"),
        "the proxy did not fail open: {notices}"
    );
}

/// A ChatGPT sign-in's `auth.json`: a token whose claims name the account
/// (Codex reads them, and never checks the signature).
fn chatgpt_login() -> (String, String) {
    use base64::Engine as _;
    let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let claims = json!({
        "email": "user@example.com",
        "exp": 4_102_444_800u64,
        "https://api.openai.com/auth": {
            "chatgpt_plan_type": "plus",
            "chatgpt_account_id": "acct-e2e",
            "chatgpt_user_id": "user-e2e",
        },
    });
    let token = format!("{}.{}.sig", b64(json!({"alg": "none"})), b64(claims));
    let auth = json!({
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": null,
        "tokens": {"id_token": token, "access_token": token, "refresh_token": "rt-e2e", "account_id": "acct-e2e"},
        "last_refresh": "2026-12-05T00:00:00Z",
    });
    (auth.to_string(), token)
}

/// Signed in with ChatGPT and no API key, `condense codex` sends Codex's
/// calls to the ChatGPT backend through the proxy, the token and account
/// untouched; the outputs become stubs at a cold call as with a key, and
/// the token goes nowhere else (summaries are extractive).
#[test]
fn condense_codex_signed_in_with_chatgpt_goes_through_the_proxy_to_the_chatgpt_backend() {
    let Some(install) = require_codex() else {
        return;
    };
    let llm = FakeLlm::start([]);
    let upstream = format!("http://{}", llm.addr());
    let mut env = CodexEnv::new(
        install,
        &json!({"contextPrune": {"enabled": true, "economy": {"ttlSeconds": 1}}}),
    );
    env.set_env("OPENAI_API_KEY", None);
    let (auth, token) = chatgpt_login();
    std::fs::write(env.codex_home.join("auth.json"), auth).unwrap();
    write_notes(&env.project);
    let run = |prompt: &str, resume: bool| {
        let mut cmd = std::process::Command::new(condense());
        cmd.arg("codex")
            .args(["--chatgpt-upstream", &upstream, "--port", "0"])
            .args(["--openai-upstream", "http://127.0.0.1:9"])
            .arg("--dir")
            .arg(&env.logs)
            .arg("--settings")
            .arg(&env.settings)
            .arg("--")
            .args(CodexEnv::exec_args(prompt, resume));
        env.run_with(&mut cmd)
    };
    script_reading(&llm);
    let first = run("Read the three notes.", false);
    assert_ok(&first);
    assert!(first.output.stderr.contains("signed in with ChatGPT"));
    std::thread::sleep(Duration::from_millis(1500));
    llm.push(Reply::text("a.txt lists measurements."));
    let second = run("What did a.txt say?", true);
    assert_ok(&second);
    // Every scripted answer was asked for (Codex also lists the ChatGPT
    // backend's models, which the fake does not know).
    assert_eq!(llm.remaining(), 0);
    assert!(llm.main_requests().iter().all(|r| !r.exhausted));

    let requests = llm.requests();
    assert!(requests
        .iter()
        .all(|r| r.path.starts_with("/backend-api/codex/")));
    for r in llm.main_requests() {
        assert_eq!(r.path, "/backend-api/codex/responses");
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {token}").as_str())
        );
        assert_eq!(r.header("chatgpt-account-id"), Some("acct-e2e"));
    }
    assert!(
        llm.summary_requests().is_empty(),
        "summaries are extractive"
    );
    // At the cold call the outputs read before are stubs.
    let cold = &main_with(&llm, "What did a.txt say?")[0];
    for id in ["call_a", "call_b", "call_c"] {
        let text = output_of(cold, id).unwrap();
        assert!(is_stub(&text), "{id}: {}", &text[..text.len().min(200)]);
    }
    assert!(!env.logs().is_empty(), "the proxy logged the conversation");
}
