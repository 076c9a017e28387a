//! `npx condense claude` on a machine with Node and no Rust: the `condense`
//! package and its platform package installed from a real npm registry
//! (verdaccio on 127.0.0.1) serving what `cargo xtask dist` packed, then
//! Claude Code run through it against the scripted server.
//!
//! Needs `target/dist/*.tgz` (`cargo xtask dist`; CI's `dist` step runs it
//! before the e2e step) and fails, never skips, without them.

use std::path::Path;
use std::process::Command;

use condense_testkit::claude_env::{require_claude, ClaudeEnv};
use condense_testkit::fake_llm::{FakeLlm, Reply};
use condense_testkit::process::{path_without_rust, run_bounded, which};
use condense_testkit::registry::{dist_tarballs, Registry};
use serde_json::json;

#[test]
fn npx_condense_claude_runs_from_the_registry_without_rust() {
    let Some(claude) = require_claude() else {
        return;
    };
    let node = which("node").expect("node on PATH (CI's .ci/run installs it)");
    let registry = Registry::start(&node);
    for tarball in dist_tarballs() {
        registry.publish(&tarball);
    }
    let node_dir: Vec<&Path> = node.parent().into_iter().collect();
    let path = path_without_rust(&node_dir, "condense");
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("package.json"), r#"{"private":true}"#).unwrap();
    let mut npm = Command::new("npm");
    npm.args(["install", "--no-audit", "--no-fund", "condense"])
        .current_dir(project.path())
        .env("PATH", &path)
        .env("npm_config_update_notifier", "false");
    for (k, v) in registry.npm_env() {
        npm.env(k, v);
    }
    let installed = run_bounded(&mut npm, std::time::Duration::from_secs(300)).unwrap();
    assert!(
        installed.success(),
        "npm install condense:\n{}\n{}\n{}",
        installed.stdout,
        installed.stderr,
        registry.log()
    );

    let llm = FakeLlm::start([]);
    llm.push(Reply::tool_call(
        "toolu_a",
        "Bash",
        json!({"command": "cat a.txt", "description": "Read a.txt"}),
    ));
    llm.push(Reply::text("Read it."));
    let env = ClaudeEnv::new(claude, &json!({"contextPrune": {"enabled": true}}));
    std::fs::write(env.project.join("a.txt"), "alpha\n".repeat(500)).unwrap();
    let mut cmd = Command::new("npx");
    cmd.args(["--no", "--prefix"])
        .arg(project.path())
        .args(["condense", "claude", "--port", "0", "--upstream"])
        .arg(format!("http://{}", llm.addr()))
        .arg("--dir")
        .arg(&env.logs)
        .args([
            "--",
            "-p",
            "Read a.txt.",
            "--allowedTools",
            "Bash",
            "--output-format",
            "stream-json",
            "--verbose",
        ]);
    let run = env.run_with(cmd.env("PATH", &path));
    run.assert_success();
    assert!(
        run.mcp_servers()
            .iter()
            .any(|(n, s)| n == "condense" && s == "connected"),
        "the installed condense mcp is connected: {:?}\n{}",
        run.mcp_servers(),
        run.report()
    );
    let main = llm.main_requests();
    assert_eq!(main.len(), 2, "both calls went through the installed proxy");
    assert_eq!(
        env.logs().len(),
        1,
        "the installed proxy logged the session"
    );
}
