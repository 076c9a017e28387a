//! `condense mcp` spoken to as an MCP client does, over stdio.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn the_server_lists_the_query_tool_and_answers_with_the_proxys_placeholder() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_condense"))
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |line: &str, answers: bool| -> serde_json::Value {
        writeln!(stdin, "{line}").unwrap();
        if !answers {
            return serde_json::Value::Null;
        }
        let mut reply = String::new();
        out.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap()
    };
    let init = ask(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#,
        true,
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "condense");
    ask(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        false,
    );
    let list = ask(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#, true);
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], "context_tree_query");
    assert_eq!(
        tools[0]["inputSchema"]["required"],
        serde_json::json!(["toolCallIds"])
    );
    let call = ask(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"context_tree_query","arguments":{"toolCallIds":["t1"]}}}"#,
        true,
    );
    let text = call["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with(condense_host_proxy::query_tool::PENDING_MARKER));
    let unknown = ask(
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"other","arguments":{}}}"#,
        true,
    );
    assert!(unknown["error"].is_object());
    drop(stdin);
    assert!(child.wait().unwrap().success(), "it ends when stdin closes");
}
