//! What the CLI's integration tests share: a fresh temporary directory, the
//! built `condense` run with an agent directory of its own (so no user
//! settings leak in), and the JSON a successful run printed.

// Each test binary compiles this module and uses a different part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// An empty directory for one test: `condense-<suite>-<tag>-<pid>` under
/// the system's temporary directory, emptied first.
pub fn temp_dir(suite: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("condense-{suite}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create the test's temporary directory");
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
