//! OpenAI's Codex CLI for end-to-end tests: `@openai/codex` installed once
//! into the shared e2e cache (a native binary in a platform package of the
//! npm registry), run headless (`codex exec --json`, through `condense
//! codex` or pointed at a proxy by hand) in an isolated `HOME` and
//! `CODEX_HOME` against a [`crate::fake_llm::FakeLlm`], with every switch
//! that would reach another host turned off.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cache::{cache_dir, SKIP_ENV};
use crate::process::{run_bounded, BoundedOutput};

/// The Codex release the tests pin.
pub const CODEX_VERSION: &str = "0.169.0";
/// The model the config names: one Codex knows (with an unknown one it
/// lists MCP tools directly instead of deferring them behind its
/// `tool_search`).
pub const MODEL: &str = "gpt-5.5";
/// The environment variable the key is read from.
pub const KEY_ENV: &str = "OPENAI_API_KEY";

const INSTALL_TIMEOUT: Duration = Duration::from_secs(900);
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// A Codex installation in the cache.
#[derive(Debug)]
pub struct CodexInstall {
    pub dir: PathBuf,
    pub bin: PathBuf,
}

/// The install, or `None` when `CONDENSE_SKIP_E2E=1` (the test then passes
/// without running). An install failure panics with npm's output.
pub fn require_codex() -> Option<&'static CodexInstall> {
    if std::env::var(SKIP_ENV).is_ok_and(|v| v == "1") {
        eprintln!("e2e: {SKIP_ENV}=1, skipping a Codex end-to-end test");
        return None;
    }
    static INSTALL: OnceLock<Result<CodexInstall, String>> = OnceLock::new();
    match INSTALL.get_or_init(|| find_or_install(&cache_dir())) {
        Ok(install) => Some(install),
        Err(e) => panic!("Codex {CODEX_VERSION} could not be installed:\n{e}"),
    }
}

fn find_or_install(cache: &Path) -> Result<CodexInstall, String> {
    let package = json!({
        "name": "condense-e2e-codex",
        "private": true,
        "dependencies": {"@openai/codex": CODEX_VERSION},
    });
    crate::npm_install::install_once(
        cache,
        &format!("codex-{CODEX_VERSION}"),
        &package,
        &format!("@openai/codex@{CODEX_VERSION}"),
        INSTALL_TIMEOUT,
        verify,
    )
}

fn verify(dir: &Path) -> Result<CodexInstall, String> {
    let bin = dir.join("node_modules/.bin/codex");
    let out = run_bounded(Command::new(&bin).arg("--version"), Duration::from_secs(60))
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if !out.success() || !out.stdout.trim().ends_with(CODEX_VERSION) {
        return Err(format!(
            "{} --version answered {:?} (expected {CODEX_VERSION})",
            bin.display(),
            out.stdout.trim()
        ));
    }
    Ok(CodexInstall {
        dir: dir.to_path_buf(),
        bin,
    })
}

/// The `config.toml` lines that keep Codex off every host but the ones a
/// test names: no analytics, feedback, plugins, apps or updates.
const OFFLINE: &str = "approval_policy = \"never\"\n\
sandbox_mode = \"danger-full-access\"\n\
\n\
[analytics]\n\
enabled = false\n\
\n\
[feedback]\n\
enabled = false\n\
\n\
[features]\n\
plugins = false\n\
remote_plugin = false\n\
apps = false\n\
in_app_updates = false\n\
skill_mcp_dependency_install = false\n";

/// An isolated Codex home: `HOME`, `CODEX_HOME` (its `config.toml` the
/// model and the offline switches, no provider: `condense codex` adds one),
/// a project directory, and condense's settings and log directory.
pub struct CodexEnv {
    pub install: &'static CodexInstall,
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub codex_home: PathBuf,
    pub project: PathBuf,
    /// `condense codex --dir`: the proxy's logs.
    pub logs: PathBuf,
    /// `condense codex --settings`.
    pub settings: PathBuf,
    env: Vec<(String, String)>,
}

/// One run of Codex.
pub struct CodexRun {
    pub output: BoundedOutput,
    /// The JSON events of `exec --json`, one per line.
    pub events: Vec<Value>,
}

impl CodexRun {
    pub fn report(&self) -> String {
        format!(
            "status: {} \n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.output.describe_status(),
            crate::process::tail(&self.output.stdout, 20_000),
            crate::process::tail(&self.output.stderr, 20_000)
        )
    }

    pub fn assert_success(&self) {
        assert!(self.output.success(), "codex failed\n{}", self.report());
    }

    /// The thread id `thread.started` names.
    pub fn thread_id(&self) -> Option<String> {
        self.events
            .iter()
            .find(|e| e["type"] == "thread.started")
            .and_then(|e| e["thread_id"].as_str())
            .map(str::to_owned)
    }

    /// The agent's messages, in order.
    pub fn agent_messages(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
            .filter_map(|e| e["item"]["text"].as_str())
            .map(str::to_owned)
            .collect()
    }
}

impl CodexEnv {
    /// A home with condense's `settings` (the `settings.json` value).
    pub fn new(install: &'static CodexInstall, settings: &Value) -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        let home = root.path().join("home");
        let codex_home = home.join(".codex");
        let project = root.path().join("project");
        let logs = root.path().join("condense-proxy");
        let settings_file = root.path().join("condense-settings.json");
        for d in [&codex_home, &project] {
            fs::create_dir_all(d).expect("create a directory");
        }
        fs::write(&settings_file, settings.to_string()).expect("write settings");
        fs::write(
            codex_home.join("config.toml"),
            format!("model = \"{MODEL}\"\n{OFFLINE}"),
        )
        .expect("write config.toml");
        let env = vec![
            ("HOME".into(), home.display().to_string()),
            ("CODEX_HOME".into(), codex_home.display().to_string()),
            (KEY_ENV.into(), "sk-e2e-codex".into()),
            (
                "XDG_CONFIG_HOME".into(),
                root.path().join("config").display().to_string(),
            ),
            (
                "XDG_DATA_HOME".into(),
                root.path().join("data").display().to_string(),
            ),
            (
                "CONDENSE_CODEX_BIN".into(),
                install.bin.display().to_string(),
            ),
        ];
        CodexEnv {
            install,
            root,
            home,
            codex_home,
            project,
            logs,
            settings: settings_file,
            env,
        }
    }

    /// Sets (`Some`) or removes (`None`) a variable of the environment
    /// Codex runs in.
    pub fn set_env(&mut self, name: &str, value: Option<&str>) {
        self.env.retain(|(n, _)| n != name);
        if let Some(v) = value {
            self.env.push((name.into(), v.into()));
        }
    }

    /// Adds to `config.toml`: `keys` (top-level `key = value` lines)
    /// before its tables, `tables` after them (a provider of its own, an
    /// MCP server: the manual setup).
    pub fn add_config(&self, keys: &str, tables: &str) {
        let file = self.codex_home.join("config.toml");
        let text = fs::read_to_string(&file).expect("read config.toml");
        fs::write(&file, format!("{keys}\n{text}\n{tables}")).expect("write config.toml");
    }

    /// The arguments of `codex exec` for `prompt`: a new thread, or
    /// (`resume`) the last one continued.
    pub fn exec_args(prompt: &str, resume: bool) -> Vec<String> {
        let mut args: Vec<String> = ["exec", "--skip-git-repo-check", "--json"]
            .map(str::to_owned)
            .to_vec();
        if resume {
            args.extend(["resume".to_owned(), "--last".to_owned()]);
        }
        args.push(prompt.to_owned());
        args
    }

    /// `condense codex --openai-upstream UPSTREAM --port PORT --dir D
    /// --settings S -- exec …` in the project directory.
    pub fn run_condense_codex(
        &self,
        condense: &Path,
        upstream: &str,
        port: u16,
        prompt: &str,
        resume: bool,
    ) -> CodexRun {
        let mut cmd = Command::new(condense);
        cmd.arg("codex")
            .args(["--openai-upstream", upstream, "--port", &port.to_string()])
            .arg("--dir")
            .arg(&self.logs)
            .arg("--settings")
            .arg(&self.settings)
            .arg("--")
            .args(Self::exec_args(prompt, resume));
        self.run_with(&mut cmd)
    }

    /// `codex exec …` itself (the manual setup, the provider in
    /// `config.toml`).
    pub fn run_codex(&self, prompt: &str, resume: bool) -> CodexRun {
        let mut cmd = Command::new(&self.install.bin);
        cmd.args(Self::exec_args(prompt, resume));
        self.run_with(&mut cmd)
    }

    /// Runs `cmd` in the project directory with this home's environment
    /// and no standard input (a launcher of Codex, e.g. `npx condense
    /// codex`).
    pub fn run_with(&self, cmd: &mut Command) -> CodexRun {
        cmd.current_dir(&self.project).stdin(Stdio::null());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let output = run_bounded(cmd, RUN_TIMEOUT).expect("the launcher runs");
        let events = output
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        CodexRun { output, events }
    }

    /// Codex's rollouts of this home (`$CODEX_HOME/sessions/…`).
    pub fn rollouts(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut dirs = vec![self.codex_home.join("sessions")];
        while let Some(d) = dirs.pop() {
            for e in fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    out.push(p);
                }
            }
        }
        out.sort();
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
