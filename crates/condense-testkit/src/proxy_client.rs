//! A conversation posted straight to a condense proxy, as Claude Code
//! would post it, and the miss counts the proxy saved for it.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

/// Posts a conversation of `calls` requests in session `session` to the
/// proxy at `addr` (`host:port`): each request adds a tool call and its
/// output to the one before, as an agent's loop does. Returns each
/// answer's status line.
pub fn post_tool_calls(addr: &str, session: &str, calls: usize) -> Vec<String> {
    let mut messages = vec![json!({"role": "user", "content": "Build it."})];
    (0..calls)
        .map(|i| {
            let id = format!("toolu_{i}");
            messages.push(json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": id, "name": "Bash",
                 "input": {"command": format!("make step{i}")}}]}));
            messages.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id,
                 "content": format!("step {i} built\n").repeat(200)}]}));
            let body = json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 100,
                "stream": true,
                "metadata": {"user_id": format!("{{\"session_id\":\"{session}\"}}")},
                "messages": messages,
            });
            post_messages(addr, &body.to_string())
        })
        .collect()
}

/// A `POST /v1/messages` of `body` to `addr`, read to its end; the
/// answer's status line.
pub fn post_messages(addr: &str, body: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The calls and misses each session's misses file in the proxy's
/// directory `dir` counts, summed over its providers and gaps.
pub fn saved_misses(dir: &Path) -> Vec<(u64, u64)> {
    let Ok(files) = std::fs::read_dir(dir.join("condense-misses")) else {
        return Vec::new();
    };
    files
        .map(|f| {
            let v: Value =
                serde_json::from_slice(&std::fs::read(f.unwrap().path()).unwrap()).unwrap();
            v["providers"]
                .as_object()
                .unwrap()
                .values()
                .flat_map(|buckets| buckets.as_array().unwrap())
                .fold((0, 0), |(c, m), b| {
                    (c + b[0].as_u64().unwrap(), m + b[1].as_u64().unwrap())
                })
        })
        .collect()
}
