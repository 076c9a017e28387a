//! A conversation as Claude Code sends it: system blocks with cache
//! breakpoints, tools, the session in `metadata`, and one moving breakpoint
//! on the last block of the last message.

#![allow(dead_code)]

use serde_json::{json, Value};

/// A Claude Code–shaped conversation, grown one exchange at a time.
#[derive(Debug, Clone, Default)]
pub struct Convo {
    pub messages: Vec<Value>,
    calls: usize,
}

/// A tool output of about `chars` characters, distinct per `seed`.
pub fn output(seed: usize, chars: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < chars {
        s.push_str(&format!(
            "line {i} of output {seed}: the build step {} finished with status {}\n",
            i * 7 + seed,
            (i * 31 + seed) % 5
        ));
        i += 1;
    }
    s
}

impl Convo {
    pub fn prompt(&mut self, text: &str) {
        self.messages
            .push(json!({"role": "user", "content": [{"type": "text", "text": text}]}));
    }

    /// An assistant turn calling `n` tools, answered by outputs of `chars`.
    pub fn tools(&mut self, n: usize, chars: usize) -> Vec<String> {
        let mut uses = vec![json!({"type": "text", "text": "Let me look."})];
        let mut results = Vec::new();
        let mut ids = Vec::new();
        for _ in 0..n {
            self.calls += 1;
            let id = format!("toolu_{:04}", self.calls);
            uses.push(json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": format!("make step{}", self.calls)}}));
            results.push(json!({"type": "tool_result", "tool_use_id": id, "content": [{"type": "text", "text": output(self.calls, chars)}]}));
            ids.push(id);
        }
        self.messages
            .push(json!({"role": "assistant", "content": uses}));
        self.messages
            .push(json!({"role": "user", "content": results}));
        ids
    }

    pub fn reply(&mut self, text: &str) {
        self.messages
            .push(json!({"role": "assistant", "content": [{"type": "text", "text": text}]}));
    }

    /// The request body Claude Code would send now.
    pub fn body(&self, session: &str) -> String {
        let mut messages = self.messages.clone();
        if let Some(last) = messages.last_mut() {
            if let Some(blocks) = last["content"].as_array_mut() {
                if let Some(b) = blocks.last_mut() {
                    b["cache_control"] = json!({"type": "ephemeral"});
                }
            }
        }
        json!({
            "model": "claude-sonnet-4-5",
            "messages": messages,
            "system": [
                {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Be brief. caf\u{e9}", "cache_control": {"type": "ephemeral"}},
            ],
            "tools": [{"name": "Bash", "description": "runs", "input_schema": {"type": "object"}}],
            "metadata": {"user_id": format!("{{\"session_id\":\"{session}\"}}")},
            "max_tokens": 32000,
            "stream": true,
        })
        .to_string()
    }
}

/// Settings that enable condense with `policy`, and a short cache TTL.
pub fn settings(policy: &str) -> Value {
    json!({"contextPrune": {"enabled": true, "economy": {"policy": policy, "ttlSeconds": 60}}})
}

impl Convo {
    /// The model calls the MCP query tool; Claude Code answers with what
    /// the MCP server returned (the placeholder).
    pub fn query(&mut self, args: Value) -> String {
        self.calls += 1;
        let id = format!("toolu_{:04}", self.calls);
        self.messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": condense_host_proxy::view::MCP_QUERY_TOOL, "input": args}
        ]}));
        self.messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": [{"type": "text", "text": condense_host_proxy::query_tool::pending_text()}]}
        ]}));
        id
    }
}

/// A conversation as Codex sends it: developer and user context first,
/// reasoning before each call, `exec_command` outputs with Codex's header,
/// the MCP tool loaded through `tool_search`.
#[derive(Default, Clone)]
pub struct Codex {
    pub items: Vec<Value>,
    calls: usize,
}

impl Codex {
    pub fn new() -> Codex {
        let mut c = Codex::default();
        c.items.push(json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions instructions>never</permissions instructions>"}]}));
        c.items.push(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context><cwd>/w</cwd></environment_context>"}]}));
        c
    }

    pub fn prompt(&mut self, text: &str) {
        self.items.push(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}));
    }

    pub fn reasoning(&mut self) {
        let n = self.items.len();
        self.items.push(json!({"type": "reasoning", "summary": [], "content": null, "encrypted_content": format!("gAAAAB{n}secret+/=")}));
    }

    pub fn tools(&mut self, n: usize, chars: usize) {
        self.reasoning();
        let mut outputs = Vec::new();
        for _ in 0..n {
            self.calls += 1;
            let id = format!("call_{:04}", self.calls);
            let args = json!({"cmd": format!("make step{}", self.calls)}).to_string();
            self.items.push(json!({"type": "function_call", "name": "exec_command", "arguments": args, "call_id": id}));
            let text = format!("Chunk ID: a1\nWall time: 0.1 seconds\nProcess exited with code 0\nOriginal token count: 9\nOutput:\n{}", output(self.calls, chars));
            outputs.push(json!({"type": "function_call_output", "call_id": id, "output": text}));
        }
        self.items.extend(outputs);
    }

    pub fn reply(&mut self, text: &str) {
        self.reasoning();
        self.items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}));
    }

    /// The model loads the MCP tool through tool search, then calls it;
    /// Codex answers with what the MCP server returned (the placeholder).
    pub fn query(&mut self, args: Value) -> String {
        self.calls += 1;
        let search = format!("ts_{:04}", self.calls);
        self.items.push(json!({"type": "tool_search_call", "call_id": search, "execution": "client", "arguments": {"query": "context_tree_query"}, "status": "completed"}));
        self.items.push(json!({"type": "tool_search_output", "call_id": search, "execution": "client", "status": "completed", "tools": [{"type": "namespace", "name": "mcp__condense", "tools": [{"name": "context_tree_query"}]}]}));
        self.calls += 1;
        let id = format!("call_{:04}", self.calls);
        self.items.push(json!({"type": "function_call", "name": "context_tree_query", "namespace": "mcp__condense", "arguments": args.to_string(), "call_id": id}));
        self.items
            .push(json!({"type": "function_call_output", "call_id": id, "output": condense_host_proxy::query_tool::pending_text()}));
        id
    }

    pub fn body(&self) -> String {
        json!({
            "model": "gpt-5-codex",
            "instructions": "",
            "input": self.items,
            "tools": [
                {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
                {"type": "tool_search", "execution": "client"},
            ],
            "tool_choice": "auto",
            "parallel_tool_calls": true,
            "reasoning": {"effort": "medium"},
            "store": false,
            "stream": true,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "019a-thread",
        })
        .to_string()
    }
}

/// A request prepared as the client wrote it, for the reason the notice
/// names.
pub fn assert_sent_as_written(p: &condense_host_proxy::Prepared, reason: &str) {
    assert_eq!(p.body, None, "sent as the client wrote it");
    assert!(
        p.notices.iter().any(|n| n.contains(reason)),
        "{:?}",
        p.notices
    );
}
