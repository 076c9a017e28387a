//! The generated content of a session: tool outputs of every shape paging
//! must carry, tool-call ids providers really use (and reuse), and the
//! messages built from them.

use condense_core::Message;
use condense_store::append::Appender;
use serde_json::{json, Value};

use super::Sim;

/// A tool call and its result, as generated.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) id: String,
    pub(super) name: &'static str,
    pub(super) args: Value,
    pub(super) text: String,
    pub(super) is_error: bool,
}

/// Stands for a lone high surrogate in generated outputs; the tool result's
/// JSON carries `\ud83d` in its place, which reads back as U+FFFD.
pub(super) const LONE_SURROGATE: char = '\u{E0FF}';

impl Sim {
    pub(super) fn text(&mut self, len: usize) -> String {
        const WORDS: [&str; 16] = [
            "error",
            "warning",
            "src/lib.rs",
            "fn",
            "main",
            "ok",
            "test",
            "passed",
            "failed",
            "→",
            "é",
            "😀",
            "0x1f",
            "\"quoted\"",
            "tab\there",
            "\\path",
        ];
        let mut pool = Vec::with_capacity(24);
        for i in 0..24 {
            let mut line = format!("{i:03}:");
            for _ in 0..self.rng.range(1, 10) {
                line.push(' ');
                let w: &&str = self.rng.pick(&WORDS[..]);
                line.push_str(w);
            }
            if self.rng.chance(10) {
                line.push_str("  ");
            }
            if self.rng.chance(5) {
                line.push('\r');
            }
            pool.push(line);
        }
        let mut out = String::with_capacity(len + 64);
        while out.len() < len {
            out.push_str(&pool[self.rng.below(pool.len() as u64) as usize]);
            out.push('\n');
        }
        let mut end = len.min(out.len());
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out
    }

    /// A tool output: mostly [`Self::text`], sometimes a shape paging must
    /// carry whole (over 2,000 lines, between 50 KiB and the spill
    /// threshold, one 80k-character line, unicode-heavy text) or one with a
    /// lone surrogate ([`LONE_SURROGATE`], written as `\ud83d` in the JSON).
    fn output_text(&mut self, len: usize) -> String {
        const UNICODE: [&str; 8] = ["é", "中文", "😀", "👩‍💻", "e\u{301}", "∑", "\u{10FFFF}", "ß"];
        match self.rng.below(100) {
            0..=2 => (0..self.rng.range(2_001, 4_500))
                .map(|i| format!("{i}\n"))
                .collect(),
            3..=5 => self.text_between(51_300, 65_000),
            6..=7 => (0..80_000)
                .map(|_| *self.rng.pick(&["a", "é", "😀", "中", " "][..]))
                .collect::<String>(),
            8..=10 => {
                let mut out = String::new();
                while out.len() < len.max(1) {
                    let piece: &&str = self.rng.pick(&UNICODE[..]);
                    out.push_str(piece);
                    if self.rng.chance(8) {
                        out.push('\n');
                    }
                }
                out
            }
            11..=12 => {
                let head = self.text(len / 2);
                let tail = self.text(len / 2);
                format!("{head}{LONE_SURROGATE}{tail}")
            }
            _ => self.text(len),
        }
    }

    pub(super) fn text_between(&mut self, lo: u64, hi: u64) -> String {
        let len = self.rng.range(lo, hi) as usize;
        self.text(len)
    }

    fn output_len(&mut self) -> usize {
        let max = self.max_output;
        match self.rng.below(1000) {
            0..=79 => self.rng.below(3) as usize,
            80..=459 => self.rng.range(3, 400) as usize,
            460..=849 => self.rng.range(400, 6_000) as usize,
            850..=994 => self.rng.range(6_000, 40_000.min(max as u64)) as usize,
            _ => self.rng.range(40_000.min(max as u64), max as u64) as usize,
        }
    }

    pub(super) fn new_id(&mut self, taken: &[String]) -> String {
        if !self.ids.is_empty() && self.rng.chance(12) {
            let id = self.rng.pick(&self.ids).clone();
            if !taken.contains(&id) {
                return id;
            }
        }
        self.next_n += 1;
        let n = self.next_n;
        let id = match self.rng.below(100) {
            0..=49 => {
                const B62: &[u8] =
                    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
                let tail: String = (0..22)
                    .map(|_| B62[self.rng.below(62) as usize] as char)
                    .collect();
                format!("toolu_01{tail}")
            }
            50..=74 => format!("call_{n}|fc_{n}"),
            75..=94 => format!("bash_{n}"),
            // Ids a file name must not take literally, from a tiny alphabet
            // so different ids can sanitize alike.
            _ => {
                let sep = *self.rng.pick(&["/", ":", "_", "|", "/../"]);
                format!("w{sep}{}", self.rng.below(3))
            }
        };
        if taken.contains(&id) {
            return format!("{id}-{n}");
        }
        self.ids.push(id.clone());
        id
    }

    fn call(&mut self, taken: &[String]) -> Call {
        let id = self.new_id(taken);
        let r = self.rng.below(100);
        if r >= 92 && !self.outputs.is_empty() {
            // The same output again (dedup), sometimes with trailing noise
            // the content hash normalizes away.
            let (name, args, text) = self.rng.pick(&self.outputs).clone();
            let text = if self.rng.chance(30) {
                format!("{text}  \r\n")
            } else {
                text
            };
            return Call {
                id,
                name,
                args,
                text,
                is_error: false,
            };
        }
        let len = self.output_len();
        let (name, args, is_error) = match r {
            0..=39 => {
                let n = self.rng.below(50);
                (
                    "bash",
                    json!({"command": format!("cargo test -p crate{n}")}),
                    self.rng.chance(10),
                )
            }
            40..=64 => {
                let path = match self.rng.below(100) {
                    0..=7 => format!("docs/skills/s{}/SKILL.md", self.rng.below(3)),
                    8..=12 => format!("secret/key{}.txt", self.rng.below(3)),
                    _ => format!("src/mod{}.rs", self.rng.below(40)),
                };
                ("read", json!({"path": path}), self.rng.chance(5))
            }
            65..=72 => ("grep", json!({"pattern": "fn main", "path": "src"}), false),
            73..=79 => ("todo", json!({"items": ["a", "b"]}), false),
            _ => {
                let content = self.text_between(100, 2_000);
                let failed = self.rng.chance(40);
                (
                    "write",
                    json!({"path": format!("src/out{}.rs", self.rng.below(9)), "content": content}),
                    failed,
                )
            }
        };
        let text = self.output_text(len);
        if self.outputs.len() < 64 && self.rng.chance(50) && text.len() < 200_000 {
            self.outputs.push((name, args.clone(), text.clone()));
        }
        Call {
            id,
            name,
            args,
            text,
            is_error,
        }
    }

    pub(super) fn calls(&mut self) -> Vec<Call> {
        let n = self.rng.range(1, 4) as usize;
        let mut out: Vec<Call> = Vec::with_capacity(n);
        for _ in 0..n {
            let taken: Vec<String> = out.iter().map(|c| c.id.clone()).collect();
            out.push(self.call(&taken));
        }
        out
    }

    pub(super) fn user_message(&mut self, text: &str) -> Message {
        let ts = self.tick(1_000, 60_000);
        Message::from_value(
            &json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}),
        )
        .expect("user message")
    }

    pub(super) fn assistant(&mut self, text: Option<&str>, calls: &[Call]) -> Message {
        let mut content = Vec::new();
        if self.rng.chance(40) {
            let t = self.text_between(10, 600);
            content.push(json!({"type": "thinking", "thinking": t, "thinkingSignature": "c2ln"}));
        }
        if let Some(t) = text {
            content.push(json!({"type": "text", "text": t}));
        }
        for c in calls {
            content
                .push(json!({"type": "toolCall", "id": c.id, "name": c.name, "arguments": c.args}));
        }
        let ts = self.tick(200, 3_000);
        Message::from_value(&json!({
            "role": "assistant", "content": content, "api": "anthropic-messages",
            "provider": "anthropic", "model": "claude-sim",
            "usage": {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120,
                      "cost": {"input": 0.0003, "output": 0.0003, "cacheRead": 0, "cacheWrite": 0, "total": 0.0006}},
            "stopReason": if calls.is_empty() { "stop" } else { "toolUse" },
            "timestamp": ts,
        }))
        .expect("assistant message")
    }

    pub(super) fn tool_result(&mut self, c: &Call, ts: i64) -> Message {
        self.tally.tool_results += 1;
        self.tally.output_bytes += c.text.len() as u64;
        self.tally.largest_output = self.tally.largest_output.max(c.text.len() as u64);
        let json = json!({
            "role": "toolResult", "toolCallId": c.id, "toolName": c.name,
            "content": [{"type": "text", "text": c.text}], "isError": c.is_error, "timestamp": ts,
        })
        .to_string();
        // What `JSON.stringify` writes for a string cut inside a pair.
        let json = json.replace(LONE_SURROGATE, "\\ud83d");
        Message::from_json(&json).expect("tool result")
    }

    fn custom_value(&mut self) -> (Value, Value) {
        let content = Value::String(format!(
            "note from another extension {}",
            self.rng.below(1000)
        ));
        (content, json!({"n": self.rng.below(10)}))
    }

    /// Appends another extension's custom message (in context as `custom`).
    pub(super) fn append_custom_message(&mut self, app: &mut Appender) -> Result<(), String> {
        let (content, details) = self.custom_value();
        let now = self.tick(1, 500);
        app.append_custom_message("other-extension", &content, true, &details, now)
            .map_err(|e| format!("append custom message: {e}"))?;
        let m = Message::from_value(&json!({"role": "custom", "customType": "other-extension",
            "content": content, "display": true, "details": details, "timestamp": now}))
        .expect("custom message");
        self.messages.push(m);
        self.entry_ts.push(Some(now));
        self.tally.messages += 1;
        Ok(())
    }
}
