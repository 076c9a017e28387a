//! One isolated pi "machine" and a headless run's result.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::process::{run_bounded, tail, BoundedOutput};

use super::{merge_json, models_json, PiInstall, DEFAULT_RUN_TIMEOUT, MODEL, PROVIDER};

/// One isolated pi setup: agent dir, working dir and HOME in a temp dir.
pub struct PiEnv {
    install: &'static PiInstall,
    _root: tempfile::TempDir,
    /// `PI_CODING_AGENT_DIR`: `models.json`, `settings.json`, `sessions/`.
    pub agent_dir: PathBuf,
    /// pi's working directory (put the files the model should read here).
    pub work_dir: PathBuf,
    /// `HOME` for pi, so nothing outside the temp dir is read or written.
    pub home_dir: PathBuf,
    extensions: Vec<PathBuf>,
    /// Load the packages `pi install` put in the agent directory (no
    /// `--no-extensions`).
    installed_packages: bool,
    extra_args: Vec<String>,
    env: Vec<(String, String)>,
    env_removed: Vec<String>,
    timeout: Duration,
}

/// Environment variables removed from pi's environment for isolation.
const SCRUBBED_ENV: &[&str] = &[
    "PI_CODING_AGENT_SESSION_DIR",
    "PI_PACKAGE_DIR",
    "PI_CODING_AGENT",
    "PI_SESSION_ID",
    "PI_SESSION_FILE",
    "NODE_OPTIONS",
    "NODE_PATH",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
];

impl PiEnv {
    /// A fresh setup whose provider `fake` points at `base_url`, with
    /// `settings.json` = `{"compaction": {"enabled": false}}`.
    pub fn new(install: &'static PiInstall, base_url: &str) -> Self {
        let root = tempfile::Builder::new()
            .prefix("condense-e2e-")
            .tempdir()
            .expect("create a temp dir for pi");
        let agent_dir = root.path().join("agent");
        let work_dir = root.path().join("work");
        let home_dir = root.path().join("home");
        for dir in [&agent_dir, &work_dir, &home_dir] {
            fs::create_dir_all(dir).expect("create pi dirs");
        }
        let env = Self {
            install,
            _root: root,
            agent_dir,
            work_dir,
            home_dir,
            extensions: Vec::new(),
            installed_packages: false,
            extra_args: Vec::new(),
            env: Vec::new(),
            env_removed: Vec::new(),
            timeout: DEFAULT_RUN_TIMEOUT,
        };
        env.write_models(&models_json(base_url));
        env.write_settings(&json!({"compaction": {"enabled": false}}));
        env
    }

    /// Deep-merges `patch` into `settings.json`.
    pub fn with_settings(self, patch: Value) -> Self {
        let mut settings = self.settings();
        merge_json(&mut settings, &patch);
        self.write_settings(&settings);
        self
    }

    /// Loads this extension (file or package directory) with `-e`.
    pub fn with_extension(mut self, path: impl Into<PathBuf>) -> Self {
        self.extensions.push(path.into());
        self
    }

    /// Adds arguments placed before the prompt in every run.
    pub fn with_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.extra_args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for every run.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Removes an inherited environment variable from every run.
    pub fn without_env(mut self, key: impl Into<String>) -> Self {
        self.env_removed.push(key.into());
        self
    }

    /// Loads the packages `pi install` registered in this agent directory
    /// (prompts run without `--no-extensions`).
    pub fn with_installed_packages(mut self) -> Self {
        self.installed_packages = true;
        self
    }

    /// Sets the per-run timeout (default [`DEFAULT_RUN_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The installation this setup runs.
    pub fn install(&self) -> &'static PiInstall {
        self.install
    }

    /// Overwrites `models.json`.
    pub fn write_models(&self, models: &Value) {
        write_json_file(&self.agent_dir.join("models.json"), models);
    }

    /// The current `settings.json`.
    pub fn settings(&self) -> Value {
        fs::read_to_string(self.agent_dir.join("settings.json"))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_else(|| json!({}))
    }

    /// Overwrites `settings.json`.
    pub fn write_settings(&self, settings: &Value) {
        write_json_file(&self.agent_dir.join("settings.json"), settings);
    }

    /// Runs one prompt in a new session.
    pub fn prompt(&self, prompt: &str) -> PiRun {
        self.run_prompt(None, prompt)
    }

    /// Runs one more prompt in an existing session file.
    pub fn prompt_in_session(&self, session: &Path, prompt: &str) -> PiRun {
        self.run_prompt(Some(session), prompt)
    }

    fn run_prompt(&self, session: Option<&Path>, prompt: &str) -> PiRun {
        let mut args: Vec<OsString> = [
            "--offline",
            "--no-extensions",
            "--no-skills",
            "--no-prompt-templates",
            "--no-context-files",
        ]
        .iter()
        .filter(|a| !(self.installed_packages && **a == "--no-extensions"))
        .map(OsString::from)
        .collect();
        for ext in &self.extensions {
            args.push("-e".into());
            args.push(ext.into());
        }
        for arg in ["--provider", PROVIDER, "--model", MODEL, "--mode", "json"] {
            args.push(arg.into());
        }
        if let Some(session) = session {
            args.push("--session".into());
            args.push(session.into());
        }
        args.extend(self.extra_args.iter().map(OsString::from));
        args.push("-p".into());
        args.push(prompt.into());
        self.run(args)
    }

    /// Runs pi with exactly `args` (no defaults added) in this setup's
    /// directories and environment.
    pub fn run<I, S>(&self, args: I) -> PiRun
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let mut cmd = self.install.command();
        cmd.args(&args).current_dir(&self.work_dir);
        for key in SCRUBBED_ENV
            .iter()
            .copied()
            .chain(self.env_removed.iter().map(String::as_str))
        {
            cmd.env_remove(key);
        }
        cmd.env("PI_CODING_AGENT_DIR", &self.agent_dir)
            .env("HOME", &self.home_dir)
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .env("NO_COLOR", "1");
        for (key, value) in &self.env {
            cmd.env(key, value);
        }
        let output = run_bounded(&mut cmd, self.timeout)
            .unwrap_or_else(|e| panic!("cannot start pi ({}): {e}", self.install.node.display()));
        PiRun {
            args: args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            output,
        }
    }

    /// `<agent dir>/sessions`.
    pub fn sessions_dir(&self) -> PathBuf {
        self.agent_dir.join("sessions")
    }

    /// Every `*.jsonl` file under `sessions/`, sorted.
    pub fn session_files(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut stack = vec![self.sessions_dir()];
        let mut seen = HashSet::new();
        while let Some(dir) = stack.pop() {
            if !seen.insert(dir.clone()) {
                continue;
            }
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "jsonl") {
                    found.push(path);
                }
            }
        }
        found.sort();
        found
    }

    /// The session file `run` wrote (found by the session id in its header
    /// event). Panics if there is none.
    pub fn session_file(&self, run: &PiRun) -> PathBuf {
        let id = run
            .session_id()
            .unwrap_or_else(|| panic!("pi printed no session header\n{}", run.report()));
        let suffix = format!("_{id}.jsonl");
        self.session_files()
            .into_iter()
            .find(|p| p.to_string_lossy().ends_with(&suffix))
            .unwrap_or_else(|| {
                panic!(
                    "no session file *{suffix} under {} (files: {:?})\n{}",
                    self.sessions_dir().display(),
                    self.session_files(),
                    run.report()
                )
            })
    }
}

/// The result of one pi run.
#[derive(Debug, Clone)]
pub struct PiRun {
    /// The arguments given to pi's CLI.
    pub args: Vec<String>,
    /// Exit status, timing and captured output.
    pub output: BoundedOutput,
}

impl PiRun {
    /// Exited 0 within the timeout.
    pub fn success(&self) -> bool {
        self.output.success()
    }

    /// Panics (with the full report) unless the run succeeded.
    pub fn assert_success(&self) -> &Self {
        assert!(self.success(), "pi run failed\n{}", self.report());
        self
    }

    /// stdout parsed as JSON lines (`--mode json` events); lines that are
    /// not JSON objects are skipped.
    pub fn events(&self) -> Vec<Value> {
        self.output
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(Value::is_object)
            .collect()
    }

    /// The `type` of every event, in order.
    pub fn event_types(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter_map(|e| e.get("type").and_then(Value::as_str).map(str::to_owned))
            .collect()
    }

    /// The session header event (`{"type":"session",…}`), printed first.
    pub fn session_header(&self) -> Option<Value> {
        self.events()
            .into_iter()
            .find(|e| e.get("type").and_then(Value::as_str) == Some("session"))
    }

    /// The session id from the header event.
    pub fn session_id(&self) -> Option<String> {
        self.session_header()
            .and_then(|h| h.get("id").and_then(Value::as_str).map(str::to_owned))
    }

    /// A human-readable account of the run for failure messages.
    pub fn report(&self) -> String {
        format!(
            "pi {:?}\nstatus: {} in {:.1}s\n--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
            self.args,
            self.output.describe_status(),
            self.output.elapsed.as_secs_f64(),
            tail(&self.output.stdout, 6000),
            tail(&self.output.stderr, 6000),
        )
    }
}

fn write_json_file(path: &Path, value: &Value) {
    let text = serde_json::to_string_pretty(value).expect("serialize JSON");
    fs::write(path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}
