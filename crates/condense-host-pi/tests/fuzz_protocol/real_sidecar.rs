//! The real sidecar binary, driven over its stdio: the calls the tests make
//! on it, a watchdog for a request never answered, and the crafted inputs.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::sidecar::Sidecar;

impl Sidecar {
    /// Sends `hello` with `id` and reads until its answer.
    pub fn hello_until(&mut self, id: &str) -> (Value, Vec<Value>) {
        self.send(
            json!({"id": id, "method": "hello", "params": {"protocol": 1}})
                .to_string()
                .as_bytes(),
        );
        self.until(id)
    }

    /// A sidecar past `hello`, its session started with `params`.
    pub fn with_session(params: Value) -> Sidecar {
        let mut s = Sidecar::start();
        s.call("1", "hello", json!({"protocol": 1}));
        let start = s.call("2", "session.start", params);
        assert!(start["result"]["effects"].is_array(), "{start}");
        s
    }

    pub fn call(&mut self, id: &str, method: &str, params: Value) -> Value {
        self.send(
            json!({"id": id, "method": method, "params": params})
                .to_string()
                .as_bytes(),
        );
        self.until(id).0
    }

    pub fn status(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc status"))
    }
}

/// Kills the sidecar after `secs` (a request never answered would block the
/// test's read for ever; a kill ends it with "the sidecar exited").
pub fn watchdog(s: &Sidecar, secs: u64) {
    let pid = s.child.id().to_string();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(secs));
        let _ = Command::new("kill")
            .arg("-9")
            .arg(pid)
            .stderr(Stdio::null())
            .status();
    });
}

/// One message entry line of a branch, its JSON text written by hand (a
/// lone surrogate escape cannot be built through `Value`).
pub fn entry_line(n: usize, message: &str) -> String {
    let parent = if n == 0 {
        "null".to_owned()
    } else {
        format!(r#""{:08x}""#, n - 1)
    };
    format!(
        r#"{{"type":"message","id":"{n:08x}","parentId":{parent},"timestamp":"2026-01-01T00:00:0{n}.000Z","message":{message}}}"#
    )
}

/// Reads raw lines until one carries `"id":"<id>"`; returns the lines before it.
pub fn raw_lines_until(s: &mut Sidecar, id: &str) -> Vec<String> {
    let marker = format!(r#""id":"{id}""#);
    let mut before = Vec::new();
    loop {
        let mut line = String::new();
        let n = s.stdout.read_line(&mut line).expect("read");
        assert!(n > 0, "the sidecar exited");
        if line.contains(&marker) {
            return before;
        }
        before.push(line);
    }
}

/// A crafted session: index records whose spill paths point outside the
/// blob directory (absolute, `..`, a symlink inside the blob directory).
pub fn crafted_session(dir: &Path) -> (String, Vec<Value>, PathBuf) {
    let session_id = "0190f5a1-0000-7000-8000-00000000c0de".to_owned();
    let blobs = dir.join(format!("{session_id}-blobs"));
    std::fs::create_dir_all(&blobs).expect("blob dir");
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "TOP SECRET").expect("secret");
    std::os::unix::fs::symlink(&secret, blobs.join("link@2.txt")).expect("symlink");
    let spills = [
        ("abs", "/etc/passwd".to_owned()),
        ("abs2", secret.display().to_string()),
        ("traversal", format!("{}/../secret.txt", blobs.display())),
        ("link", blobs.join("link@2.txt").display().to_string()),
    ];
    let records: Vec<Value> = spills
        .iter()
        .map(|(id, spill)| {
            json!({"toolCallId": id, "toolName": "bash", "args": {}, "resultText": "",
                "isError": false, "turnIndex": 0, "timestamp": 1, "resultTimestamp": 2,
                "spillPath": spill, "spillBytes": 10, "resultPreview": format!("PREVIEW {id}")})
        })
        .collect();
    let branch = vec![
        json!({"type": "custom", "customType": "context-prune-index",
        "data": {"toolCalls": records}, "id": "0000aaaa", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z"}),
    ];
    (session_id, branch, blobs)
}
