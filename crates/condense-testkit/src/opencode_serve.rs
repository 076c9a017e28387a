//! One OpenCode server (`opencode serve`) for a test, holding its sessions
//! in one process as the TUI does (the TUI is a client of the same
//! server): prompts run in it through `opencode run --attach`, and what
//! the TUI's commands ask of it goes to its HTTP API, e.g. `/compact`,
//! which is `POST /session/{id}/summarize` with the current model.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::opencode_env::{OpenCodeEnv, OpenCodeRun, MODEL, PROVIDER};

const START_TIMEOUT: Duration = Duration::from_secs(120);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `opencode serve`; killed when dropped.
pub struct OpenCodeServer {
    child: Child,
    port: u16,
    /// Its base URL (`http://127.0.0.1:PORT`).
    pub url: String,
}

impl OpenCodeEnv {
    /// Starts `opencode serve` in the project with this home's environment,
    /// and waits until it listens. Its stderr goes to `serve.log` in the
    /// home's root ([`OpenCodeEnv::serve_log`]).
    pub fn serve(&self) -> OpenCodeServer {
        // A port the system just handed out: `--port 0` means OpenCode's
        // default (4096), which tests running at once would share.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let log = std::fs::File::create(self.root.path().join("serve.log")).expect("serve.log");
        let mut child = self
            .command()
            .args([
                "serve",
                "--print-logs",
                "--hostname",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start opencode serve");
        let stdout = child.stdout.take().expect("its stdout");
        let (tx, rx) = mpsc::channel();
        // Read to the end, so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let _ = tx.send(());
                }
            }
        });
        let mut server = OpenCodeServer {
            child,
            port,
            url: format!("http://127.0.0.1:{port}"),
        };
        if rx.recv_timeout(START_TIMEOUT).is_err() {
            server.stop();
            panic!(
                "opencode serve did not listen within {START_TIMEOUT:?}:\n{}",
                self.serve_log()
            );
        }
        server
    }

    /// What `opencode serve` wrote to stderr.
    pub fn serve_log(&self) -> String {
        std::fs::read_to_string(self.root.path().join("serve.log")).unwrap_or_default()
    }

    /// `opencode run --attach URL --format json [--continue] <prompt>`: the
    /// prompt runs in `server`.
    pub fn run_attached(
        &self,
        server: &OpenCodeServer,
        prompt: &str,
        continue_session: bool,
    ) -> OpenCodeRun {
        self.run_with(&["--attach", &server.url], prompt, continue_session)
    }
}

/// An HTTP answer: its status and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl OpenCodeServer {
    /// The TUI's `/compact` of `session_id`: `POST /session/{id}/summarize`
    /// with the model the tests configure. OpenCode answers once the
    /// compaction has run.
    pub fn compact(&self, session_id: &str) -> Answer {
        self.post(
            &format!("/session/{session_id}/summarize"),
            &json!({"providerID": PROVIDER, "modelID": MODEL}),
        )
    }

    /// `POST path` with a JSON body, on a connection of its own.
    pub fn post(&self, path: &str, body: &Value) -> Answer {
        let body = body.to_string();
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to opencode");
        stream
            .set_read_timeout(Some(REQUEST_TIMEOUT))
            .expect("a read timeout");
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.port,
            body.len()
        )
        .expect("send the request");
        // Read as far as the answer goes: the server may keep the
        // connection open whatever the request says.
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            if let Some(answer) = parse_answer(&raw) {
                break answer;
            }
            match stream.read(&mut buf) {
                Ok(0) => break parse_answer(&raw).unwrap_or_else(|| partial(&raw)),
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                Err(e) => {
                    break Answer {
                        status: 0,
                        body: format!(
                            "no whole answer within {REQUEST_TIMEOUT:?} ({e}): {}",
                            String::from_utf8_lossy(&raw)
                        ),
                    }
                }
            }
        }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OpenCodeServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The answer `raw` holds, once it holds all of it (its headers, and its
/// body as `Content-Length` or the last chunk says).
fn parse_answer(raw: &[u8]) -> Option<Answer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let rest = &raw[split + 4..];
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
    };
    let body = if header("transfer-encoding:").is_some_and(|v| v == "chunked") {
        dechunk(rest)?
    } else {
        let length: usize = header("content-length:")?.parse().ok()?;
        rest.get(..length)?.to_vec()
    };
    Some(Answer {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// What a connection closed early left.
fn partial(raw: &[u8]) -> Answer {
    Answer {
        status: 0,
        body: format!("an incomplete answer: {}", String::from_utf8_lossy(raw)),
    }
}

/// A chunked body's data, once its last chunk has come.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n")?;
        let size = String::from_utf8_lossy(&rest[..eol]);
        let n = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if n == 0 {
            return Some(out);
        }
        let data = rest.get(eol + 2..eol + 2 + n)?;
        out.extend_from_slice(data);
        rest = rest.get(eol + 4 + n..)?;
    }
}
