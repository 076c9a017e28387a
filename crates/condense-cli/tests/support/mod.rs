//! What the CLI's integration tests share: a fresh temporary directory, the
//! built `condense` run with an agent directory of its own (so no user
//! settings leak in), and the JSON a successful run printed.

// Each test binary compiles this module and uses a different part of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// The store's fixture sessions, with what pi-condense made of them.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../condense-store/tests/fixtures")
}

/// The store's copy of the pi-condense 2.9.1 session.
pub fn fixture() -> PathBuf {
    fixtures_dir().join("pi-condense-2.9.1.jsonl")
}

/// The fixture's entries without condense's (so `compact` has work to do),
/// each one after the header parented on the entry kept before it.
pub fn raw_fixture_entries() -> Vec<Value> {
    let text = std::fs::read_to_string(fixture()).expect("fixture");
    let mut out = Vec::new();
    let mut prev: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let mut e: Value = serde_json::from_str(line).expect("fixture line");
        if i > 0 {
            if e["customType"]
                .as_str()
                .is_some_and(|c| c.starts_with("context-prune"))
            {
                continue;
            }
            e["parentId"] = prev.clone().map_or(Value::Null, Value::String);
            prev = e["id"].as_str().map(str::to_owned);
        }
        out.push(e);
    }
    out
}

/// [`raw_fixture_entries`] as session text.
pub fn raw_fixture_text() -> String {
    let lines: Vec<String> = raw_fixture_entries().iter().map(Value::to_string).collect();
    lines.join("\n") + "\n"
}

/// The pi-mono fixtures: `shared/` beside the checkout (CI, main), or beside
/// the worktrees' parent.
pub fn pi_mono_dir() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        "../../../shared/fixtures/pi-mono",
        "../../../../shared/fixtures/pi-mono",
    ]
    .iter()
    .map(|rel| manifest.join(rel))
    .find(|p| p.is_dir())
    .expect("shared/fixtures/pi-mono beside the checkout")
}

/// An empty directory for one test: `condense-<suite>-<tag>-<pid>` under
/// the system's temporary directory, emptied first.
pub fn temp_dir(suite: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("condense-{suite}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create the test's temporary directory");
    d
}

/// One directory for all the tests of a binary (they run at once, so it is
/// never emptied): `condense-<suite>-<pid>` under the system's temporary
/// directory.
pub fn process_dir(suite: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("condense-{suite}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("create the tests' temporary directory");
    d
}

/// Runs `condense args…` with `dir/agent-home` as pi's agent directory.
pub fn condense(dir: &Path, args: &[&str]) -> Output {
    let agent = dir.join("agent-home");
    std::fs::create_dir_all(&agent).expect("create the agent directory");
    Command::new(env!("CARGO_BIN_EXE_condense"))
        .args(args)
        .env("PI_CODING_AGENT_DIR", &agent)
        .output()
        .expect("condense runs")
}

/// The JSON a run printed, after asserting it succeeded (its stderr in the
/// failure message).
pub fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "status {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// What `condense gen` is asked for: `tokens` of `shape` (the default when
/// `None`) from `seed`, with idle gaps before `idle_gaps` percent of the
/// prompts.
pub struct Generated<'a> {
    pub tokens: u64,
    pub seed: u64,
    pub idle_gaps: u64,
    pub shape: Option<&'a str>,
    /// `--miss-rates`: the cache misses the usage reports.
    pub miss_rates: Option<&'a str>,
}

/// Writes the session `g` asks for to `file`, asserting `condense gen`
/// succeeded.
pub fn generate(dir: &Path, file: &Path, g: &Generated<'_>) {
    let (tokens, seed, gaps) = (
        g.tokens.to_string(),
        g.seed.to_string(),
        g.idle_gaps.to_string(),
    );
    let mut args = vec![
        "gen",
        "--tokens",
        &tokens,
        "--seed",
        &seed,
        "--idle-gaps",
        &gaps,
    ];
    if let Some(shape) = g.shape {
        args.extend(["--shape", shape]);
    }
    if let Some(rates) = g.miss_rates {
        args.extend(["--miss-rates", rates]);
    }
    let path = file.to_str().expect("a UTF-8 path");
    args.extend(["-o", path]);
    let out = condense(dir, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `condense proxy` as its own process, on 127.0.0.1.
pub struct ProxyProcess {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub addr: String,
}

impl ProxyProcess {
    /// `condense proxy --port <port> <args>`; waits for the address it
    /// prints.
    pub fn start(port: u16, args: &[&OsStr]) -> ProxyProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_condense"))
            .args(["proxy", "--port", &port.to_string()])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line.trim().trim_start_matches("http://").to_owned();
        assert!(
            addr.starts_with("127.0.0.1:"),
            "the proxy started: {line:?}"
        );
        ProxyProcess { child, addr }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// Asks it to stop (`SIGTERM`) and waits; returns its exit status and
    /// what it printed on standard error.
    #[cfg(unix)]
    pub fn terminate(self) -> (std::process::ExitStatus, String) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let out = self.child.wait_with_output().unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Stops it; returns what it printed on standard error.
    pub fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        err
    }
}
