//! `npx condense claude` and `npx condense codex` on a machine with Node and
//! no Rust: the `condense` package and its platform package installed (once
//! for both) from a real npm registry (verdaccio on 127.0.0.1) serving what
//! `cargo xtask dist` packed, then Claude Code and Codex run through it
//! against the scripted server.
//!
//! Needs `target/dist/*.tgz` (`cargo xtask dist`; CI's `dist` step runs it
//! before the e2e step) and fails, never skips, without them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use condense_testkit::claude_env::{require_claude, ClaudeEnv};
use condense_testkit::codex_env::{require_codex, CodexEnv};
use condense_testkit::fake_llm::{FakeLlm, Reply};
use condense_testkit::process::{path_without_rust, run_bounded, which};
use condense_testkit::registry::{dist_tarballs, Registry};
use serde_json::json;

/// The `condense` package installed from the registry into a project
/// directory, and a `PATH` with Node and no Rust toolchain nor `condense`.
struct Installed {
    project: PathBuf,
    path: String,
}

fn installed() -> &'static Installed {
    static INSTALLED: OnceLock<Installed> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        // First: without `cargo xtask dist` the test says so, and nothing else.
        let tarballs = dist_tarballs();
        let node = which("node").expect("node on PATH (CI's .ci/run installs it)");
        let registry = Registry::start(&node);
        for tarball in tarballs {
            registry.publish(&tarball);
        }
        let node_dir: Vec<&Path> = node.parent().into_iter().collect();
        let path = path_without_rust(&node_dir);
        let project = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("npx-condense");
        let _ = std::fs::remove_dir_all(&project);
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("package.json"), r#"{"private":true}"#).unwrap();
        let mut npm = Command::new("npm");
        npm.args(["install", "--no-audit", "--no-fund", "condense"])
            .current_dir(&project)
            .env("PATH", &path)
            .env("npm_config_update_notifier", "false");
        for (k, v) in registry.npm_env() {
            npm.env(k, v);
        }
        let out = run_bounded(&mut npm, std::time::Duration::from_secs(300)).unwrap();
        assert!(
            out.success(),
            "npm install condense:\n{}\n{}\n{}",
            out.stdout,
            out.stderr,
            registry.log()
        );
        Installed { project, path }
    })
}

#[test]
fn npx_condense_claude_runs_from_the_registry_without_rust() {
    let Some(claude) = require_claude() else {
        return;
    };
    let Installed { project, path } = installed();
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
        .arg(project)
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
    let run = env.run_with(cmd.env("PATH", path));
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

#[test]
fn npx_condense_codex_runs_from_the_registry_without_rust() {
    let Some(codex) = require_codex() else {
        return;
    };
    let Installed { project, path } = installed();
    let llm = FakeLlm::start([]);
    llm.push(Reply::tool_call(
        "call_a",
        "exec_command",
        json!({"cmd": "cat a.txt"}),
    ));
    llm.push(Reply::text("Read it."));
    let env = CodexEnv::new(codex, &json!({"contextPrune": {"enabled": true}}));
    std::fs::write(env.project.join("a.txt"), "alpha\n".repeat(500)).unwrap();
    let mut cmd = Command::new("npx");
    cmd.args(["--no", "--prefix"])
        .arg(project)
        .args(["condense", "codex", "--port", "0", "--openai-upstream"])
        .arg(format!("http://{}", llm.addr()))
        .arg("--dir")
        .arg(&env.logs)
        .arg("--")
        .args(CodexEnv::exec_args("Read a.txt.", false));
    let run = env.run_with(cmd.env("PATH", path));
    run.assert_success();
    assert_eq!(run.agent_messages(), ["Read it."], "{}", run.report());
    let main = llm.main_requests();
    assert_eq!(main.len(), 2, "both calls went through the installed proxy");
    // Codex names the MCP servers it connected (as deferred namespaces).
    assert!(
        main[0].body["input"].to_string().contains("mcp__condense"),
        "the installed condense mcp is Codex's MCP server"
    );
    assert_eq!(
        env.logs().len(),
        1,
        "the installed proxy logged the session"
    );
}
