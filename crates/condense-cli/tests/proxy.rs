//! `condense proxy` as a user starts it.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

mod support;

fn condense() -> Command {
    Command::new(env!("CARGO_BIN_EXE_condense"))
}

#[test]
fn a_non_loopback_address_is_refused_without_the_flag() {
    let out = condense()
        .args(["proxy", "--host", "0.0.0.0", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--allow-remote"), "{err}");
}

#[test]
fn a_settings_file_that_cannot_be_read_is_a_data_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("settings.json");
    std::fs::write(&bad, "{not json").unwrap();
    let out = condense()
        .args(["proxy", "--port", "0", "--settings"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("malformed settings"));
}

#[test]
fn the_proxy_answers_on_loopback_and_reports_a_dead_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = condense()
        .args(["proxy", "--port", "0", "--upstream"])
        .arg(format!("http://127.0.0.1:{dead}"))
        .arg("--dir")
        .arg(dir.path())
        .env("XDG_CONFIG_HOME", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().trim_start_matches("http://").to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{line}");
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    write!(
        s,
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(answer.contains("condense proxy"), "{answer}");
}

#[cfg(unix)]
#[test]
fn a_proxy_told_to_stop_saves_the_misses_its_conversations_counted() {
    use condense_testkit::fake_llm::{FakeLlm, Reply};
    use condense_testkit::proxy_client::{post_tool_calls, saved_misses};
    use support::ProxyProcess;

    const CALLS: usize = 6;
    // Every answer reads nothing from the cache: each call a miss.
    let llm = FakeLlm::start((0..CALLS).map(|_| Reply::text("ok").with_usage(3_000, 10)));
    let dir = tempfile::tempdir().unwrap();
    let upstream = format!("http://{}", llm.addr());
    let settings = dir.path().join("settings.json");
    std::fs::write(&settings, "{}").unwrap();
    let proxy = ProxyProcess::start(
        0,
        &[
            "--upstream".as_ref(),
            upstream.as_ref(),
            "--dir".as_ref(),
            dir.path().as_os_str(),
            "--settings".as_ref(),
            settings.as_os_str(),
        ],
    );
    for status in post_tool_calls(&proxy.addr, "s-stop", CALLS) {
        assert!(status.contains(" 200"), "{status}");
    }
    // Only the first report was due before the stop (then 16 reports, or
    // a minute).
    assert_eq!(saved_misses(dir.path()), [(1, 1)]);
    let (status, stderr) = proxy.terminate();
    assert!(status.success(), "{status:?}");
    assert!(stderr.contains("condense proxy: stopping"), "{stderr}");
    // Each call brings the previous answer's usage; the first call expected
    // no cached prefix and the last answer's usage never came back.
    let counted = CALLS as u64 - 2;
    assert_eq!(saved_misses(dir.path()), [(counted, counted)]);
}
