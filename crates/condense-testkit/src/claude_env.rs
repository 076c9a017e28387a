//! Claude Code for end-to-end tests: `@anthropic-ai/claude-code` installed
//! once into the shared e2e cache (its native binary ships in a platform
//! package of the npm registry), run headless (`claude -p`, through
//! `condense claude`) in an isolated home against a [`crate::fake_llm::FakeLlm`] with no
//! traffic to any other host.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cache::{cache_dir, SKIP_ENV};
use crate::process::{run_bounded, BoundedOutput};

/// The Claude Code release the tests pin.
pub const CLAUDE_VERSION: &str = "2.1.328";

const INSTALL_TIMEOUT: Duration = Duration::from_secs(900);
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// A Claude Code installation in the cache.
#[derive(Debug)]
pub struct ClaudeInstall {
    pub dir: PathBuf,
    pub bin: PathBuf,
}

/// The install, or `None` when `CONDENSE_SKIP_E2E=1` (the test then passes
/// without running). An install failure panics with npm's output.
pub fn require_claude() -> Option<&'static ClaudeInstall> {
    if std::env::var(SKIP_ENV).is_ok_and(|v| v == "1") {
        eprintln!("e2e: {SKIP_ENV}=1, skipping a Claude Code end-to-end test");
        return None;
    }
    static INSTALL: OnceLock<Result<ClaudeInstall, String>> = OnceLock::new();
    match INSTALL.get_or_init(|| find_or_install(&cache_dir())) {
        Ok(install) => Some(install),
        Err(e) => panic!("Claude Code {CLAUDE_VERSION} could not be installed:\n{e}"),
    }
}

fn find_or_install(cache: &Path) -> Result<ClaudeInstall, String> {
    let package = json!({
        "name": "condense-e2e-claude",
        "private": true,
        "dependencies": {"@anthropic-ai/claude-code": CLAUDE_VERSION},
    });
    crate::npm_install::install_once(
        cache,
        &format!("claude-code-{CLAUDE_VERSION}"),
        &package,
        &format!("@anthropic-ai/claude-code@{CLAUDE_VERSION}"),
        INSTALL_TIMEOUT,
        verify,
    )
}

fn verify(dir: &Path) -> Result<ClaudeInstall, String> {
    let bin = dir.join("node_modules/.bin/claude");
    let out = run_bounded(Command::new(&bin).arg("--version"), Duration::from_secs(60))
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if !out.success() || !out.stdout.trim().starts_with(CLAUDE_VERSION) {
        return Err(format!(
            "{} --version answered {:?} (expected {CLAUDE_VERSION})",
            bin.display(),
            out.stdout.trim()
        ));
    }
    Ok(ClaudeInstall {
        dir: dir.to_path_buf(),
        bin,
    })
}

/// An isolated Claude Code home: `HOME`, a project directory, and condense's
/// data and config directories, in one temporary directory.
pub struct ClaudeEnv {
    pub install: &'static ClaudeInstall,
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    /// `condense claude --dir`: the proxy's logs.
    pub logs: PathBuf,
    /// `condense claude --settings`.
    pub settings: PathBuf,
    env: Vec<(String, String)>,
}

/// One run of Claude Code.
pub struct ClaudeRun {
    pub output: BoundedOutput,
    /// The JSON events of `--output-format stream-json`, one per line.
    pub events: Vec<Value>,
}

impl ClaudeRun {
    pub fn report(&self) -> String {
        format!(
            "status: {} \n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.output.describe_status(),
            crate::process::tail(&self.output.stdout, 20_000),
            crate::process::tail(&self.output.stderr, 20_000)
        )
    }

    pub fn assert_success(&self) {
        assert!(self.output.success(), "claude failed\n{}", self.report());
    }

    /// The MCP servers Claude Code reports in its `init` event, with their
    /// status.
    pub fn mcp_servers(&self) -> Vec<(String, String)> {
        self.events
            .iter()
            .filter_map(|e| e.get("mcp_servers").and_then(Value::as_array))
            .flatten()
            .map(|s| {
                (
                    s["name"].as_str().unwrap_or("").to_owned(),
                    s["status"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }
}

impl ClaudeEnv {
    /// A home with condense's `settings` (the `settings.json` value).
    pub fn new(install: &'static ClaudeInstall, settings: &Value) -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        let home = root.path().join("home");
        let project = root.path().join("project");
        let logs = root.path().join("condense-proxy");
        let settings_file = root.path().join("condense-settings.json");
        for d in [&home, &project] {
            fs::create_dir_all(d).expect("create a directory");
        }
        fs::write(&settings_file, settings.to_string()).expect("write settings");
        let env = vec![
            ("HOME".into(), home.display().to_string()),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-e2e".into()),
            (
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
                "1".into(),
            ),
            ("DISABLE_AUTOUPDATER".into(), "1".into()),
            (
                "XDG_CONFIG_HOME".into(),
                root.path().join("config").display().to_string(),
            ),
            (
                "XDG_DATA_HOME".into(),
                root.path().join("data").display().to_string(),
            ),
            (
                "CONDENSE_CLAUDE_BIN".into(),
                install.bin.display().to_string(),
            ),
        ];
        ClaudeEnv {
            install,
            root,
            home,
            project,
            logs,
            settings: settings_file,
            env,
        }
    }

    /// Adds an environment variable to every run.
    pub fn set_env(&mut self, name: &str, value: &str) {
        self.env.retain(|(n, _)| n != name);
        self.env.push((name.into(), value.into()));
    }

    /// `condense claude --upstream UPSTREAM --port PORT [--dir D --settings S] -- ARGS`
    /// in the project directory, `claude`'s own arguments being
    /// `claude_args`.
    pub fn run_condense_claude(
        &self,
        condense: &Path,
        upstream: &str,
        port: u16,
        claude_args: &[&str],
    ) -> ClaudeRun {
        let mut cmd = Command::new(condense);
        cmd.arg("claude")
            .args(["--upstream", upstream, "--port", &port.to_string()])
            .arg("--dir")
            .arg(&self.logs)
            .arg("--settings")
            .arg(&self.settings)
            .arg("--")
            .args(claude_args);
        self.run_with(&mut cmd)
    }

    /// `claude ARGS` itself (the manual setup: `ANTHROPIC_BASE_URL` set to
    /// `base_url`, the MCP server registered by the caller's arguments).
    pub fn run_claude(&self, base_url: &str, claude_args: &[&str]) -> ClaudeRun {
        let mut cmd = Command::new(&self.install.bin);
        cmd.args(claude_args).env("ANTHROPIC_BASE_URL", base_url);
        self.run_with(&mut cmd)
    }

    /// Runs `cmd` in the project directory with this home's environment
    /// (a launcher of Claude Code, e.g. `npx condense claude`).
    pub fn run_with(&self, cmd: &mut Command) -> ClaudeRun {
        cmd.current_dir(&self.project);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let output = run_bounded(cmd, RUN_TIMEOUT).expect("the launcher runs");
        let events = output
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        ClaudeRun { output, events }
    }

    /// Claude Code's transcripts of this home (`~/.claude/projects/…`).
    pub fn transcripts(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let Ok(projects) = fs::read_dir(self.home.join(".claude/projects")) else {
            return out;
        };
        for p in projects.flatten() {
            if let Ok(files) = fs::read_dir(p.path()) {
                out.extend(
                    files
                        .flatten()
                        .map(|f| f.path())
                        .filter(|f| f.extension().is_some_and(|x| x == "jsonl")),
                );
            }
        }
        out
    }

    /// The proxy's conversation logs.
    pub fn logs(&self) -> Vec<PathBuf> {
        fs::read_dir(&self.logs)
            .map(|d| {
                d.flatten()
                    .map(|f| f.path())
                    .filter(|f| f.extension().is_some_and(|x| x == "jsonl"))
                    .collect()
            })
            .unwrap_or_default()
    }
}
