//! The `condense-pi` binary cargo built, over its real stdio: what the
//! protocol tests (`sidecar_protocol.rs`, `fuzz_protocol/`) talk to.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

/// A running sidecar, killed when dropped.
pub struct Sidecar {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: BufReader<ChildStdout>,
}

impl Sidecar {
    /// Starts the sidecar (its stderr discarded).
    pub fn start() -> Sidecar {
        let mut child = Command::new(super::cli::condense_bin())
            .arg("sidecar")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("sidecar starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Sidecar {
            child,
            stdin,
            stdout,
        }
    }

    /// Writes `line` and its newline.
    pub fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).expect("write");
        self.stdin.write_all(b"\n").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// The next line the sidecar writes, as JSON.
    pub fn read(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).expect("read");
        assert!(n > 0, "the sidecar exited");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"))
    }

    /// Kills the sidecar after `limit` unless the returned guard is dropped
    /// first, so a test waiting for an answer that never comes fails (its
    /// read sees the sidecar exit) instead of hanging.
    pub fn kill_after(&self, limit: std::time::Duration) -> Watchdog {
        let (cancel, cancelled) = std::sync::mpsc::channel::<()>();
        let pid = self.child.id().to_string();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = cancelled.recv_timeout(limit) {
                let _ = Command::new("kill").args(["-9", &pid]).status();
            }
        });
        Watchdog { _cancel: cancel }
    }

    /// Reads lines until the answer with `id`; returns it and the lines before it.
    pub fn until(&mut self, id: impl Into<Value>) -> (Value, Vec<Value>) {
        let id: Value = id.into();
        let mut before = Vec::new();
        loop {
            let v = self.read();
            if v["id"] == id && v.get("method").is_none() {
                return (v, before);
            }
            before.push(v);
        }
    }
}

/// Cancels a [`Sidecar::kill_after`] when dropped.
pub struct Watchdog {
    _cancel: std::sync::mpsc::Sender<()>,
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
