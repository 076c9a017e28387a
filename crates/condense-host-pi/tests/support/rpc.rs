//! pi in RPC mode (`--mode rpc`), driven a JSON line at a time: pi's RPC
//! mode turns every `ctx.ui` call into an `extension_ui_request` line and
//! reports the session's events (a run's end, a compaction) as lines, so a
//! test sees them as a client would.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::pi_env::{PiEnv, MODEL, PROVIDER};

/// pi in RPC mode on a session, driven line by line.
pub struct Rpc {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    /// Every line read so far (for failure reports).
    seen: Vec<Value>,
    /// pi's stderr, the shim's debug log among it (for failure reports).
    stderr_log: std::path::PathBuf,
}

impl Rpc {
    /// pi on `session` (`None`: a new session in pi's sessions directory)
    /// with the shim loaded, its sidecar `condense`.
    pub fn start(pi: &PiEnv, session: Option<&Path>) -> Rpc {
        let mut cmd: Command = pi.install().command();
        cmd.args([
            "--offline",
            "--no-extensions",
            "--no-skills",
            "--no-prompt-templates",
            "--no-context-files",
            "-e",
        ])
        .arg(super::scenario::extension_dir())
        .args(["--provider", PROVIDER, "--model", MODEL, "--mode", "rpc"]);
        if let Some(session) = session {
            cmd.arg("--session").arg(session);
        }
        cmd.current_dir(&pi.work_dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PI_CODING_AGENT_DIR", &pi.agent_dir)
            .env("HOME", &pi.home_dir)
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .env("NO_COLOR", "1")
            .env("CONDENSE_BIN", super::cli::condense_bin())
            .env("CONDENSE_PI_DEBUG", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let stderr_log = pi.agent_dir.join("rpc-stderr.log");
        let log = std::fs::File::create(&stderr_log).expect("create the stderr log");
        cmd.stderr(log);
        let mut child = cmd.spawn().expect("start pi --mode rpc");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        Rpc {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            stderr_log,
        }
    }

    pub fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").expect("write to pi");
        self.stdin.flush().expect("flush");
    }

    pub fn prompt(&mut self, text: &str) {
        self.send(json!({"type": "prompt", "message": text}));
    }

    /// The next line matching `want`, within 60 s.
    pub fn expect(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => {
                    self.seen.push(v.clone());
                    if want(&v) {
                        return v;
                    }
                }
                Err(_) => panic!("no {what} from pi\n{}", self.report()),
            }
        }
    }

    /// Every line read so far.
    pub fn seen(&self) -> &[Value] {
        &self.seen
    }

    /// Every line pi wrote so far, and its stderr.
    pub fn report(&self) -> String {
        let lines: Vec<String> = self.seen.iter().map(Value::to_string).collect();
        let stderr = std::fs::read_to_string(&self.stderr_log).unwrap_or_default();
        format!(
            "lines so far:\n{}\n--- stderr ---\n{stderr}",
            lines.join("\n")
        )
    }

    /// The next UI request of `method` whose `field` satisfies `want`.
    pub fn ui(&mut self, method: &str, field: &str, want: impl Fn(&str) -> bool) -> Value {
        self.expect(&format!("{method} request"), |v| {
            v["type"] == "extension_ui_request"
                && v["method"] == method
                && want(v[field].as_str().unwrap_or(""))
        })
    }

    pub fn answer(&mut self, request: &Value, value: Option<&str>) {
        let id = request["id"].clone();
        match value {
            Some(v) => self.send(json!({"type": "extension_ui_response", "id": id, "value": v})),
            None => {
                self.send(json!({"type": "extension_ui_response", "id": id, "cancelled": true}))
            }
        }
    }
}

impl Drop for Rpc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
