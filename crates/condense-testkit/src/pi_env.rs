//! Node + pi for end-to-end tests, and headless pi runs against a fake LLM.
//!
//! # Installation
//!
//! A [`PiTarget`] names one combination of pi package, pi version and Node
//! version. [`require_pi`] (or [`PiInstall::get`]) uses the default target,
//! [`PiTarget::default_target`]: [`PI_PACKAGE`]@[`PI_VERSION`] on Node
//! [`NODE_VERSION`]. [`require_pi_target`] (or [`PiInstall::get_target`])
//! takes any other, e.g. [`PiTarget::pi_1_6`] or [`PiTarget::pi_0_73`].
//!
//! A target is installed with the system `npm`: the npm package `node` (which
//! carries a Node binary) at the target's Node version, and the pi package,
//! into `<cache>/<PiTarget::dir_name>/` (`pi-<version>-node-<node>` for
//! [`PI_PACKAGE`], the scope added for other package names). The cache
//! directory is `$CONDENSE_E2E_CACHE`, or `<workspace>/.cache/pi-e2e`
//! (git-ignored). An install goes to a staging directory first and is renamed
//! into place only after `node --version` and `pi --version` answer as
//! expected, so a broken or concurrent install never leaves a half-filled
//! cache behind. Each target is installed at most once per test process.
//!
//! If Node or pi cannot be had, [`require_pi`] and [`require_pi_target`]
//! **panic** with the reason: an end-to-end test never passes or skips
//! silently. The one exception is a developer convenience: with
//! `CONDENSE_SKIP_E2E=1` in the environment, they return `None` without
//! trying, and the test returns early saying so. CI never sets it.
//!
//! # Running pi
//!
//! [`PiEnv`] is one isolated pi "machine": a temporary directory holding the
//! agent directory (`PI_CODING_AGENT_DIR`, with `models.json` for provider
//! `fake` and `settings.json`), a working directory (pi's cwd) and a `HOME`.
//! [`PiEnv::prompt`] runs
//! `pi --offline --no-extensions -e <ext>… --provider fake --model fake-1 --mode json -p <prompt>`
//! with a timeout; [`PiEnv::prompt_in_session`] adds `--session <file>`.
//! [`PiRun`] holds the exit status, stdout (json-mode events) and stderr.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::cache::{cache_dir, SKIP_ENV};
use crate::process::{run_bounded, tail, which, BoundedOutput};

/// The `node` npm package version (it carries the Node binary). pi ≥ 0.75
/// requires Node ≥ 22.19.
pub const NODE_VERSION: &str = "22.23.3";
/// The pi package on the npm registry.
pub const PI_PACKAGE: &str = "@earendil-works/pi-coding-agent";
/// The pinned pi version: the line pi-condense 2.9.1 targets (`^0.83`) and the
/// version that wrote `fixtures/pi-condense-2.9.1`.
pub const PI_VERSION: &str = "0.83.0";
/// pi's package name up to 0.73 (0.74 moved to [`PI_PACKAGE`]).
pub const PI_PACKAGE_LEGACY: &str = "@mariozechner/pi-coding-agent";
/// The last pi under [`PI_PACKAGE_LEGACY`]; it declares Node ≥ 20.6.
pub const PI_VERSION_LEGACY: &str = "0.73.1";
/// A Node 20 the npm registry's `node` package has (`npm view node@20 version`).
pub const NODE_20_VERSION: &str = "20.20.2";
/// The current pi 1.x line tested besides the pinned version.
pub const PI_VERSION_1_6: &str = "1.6.0";

/// Overrides [`PI_VERSION`] (developer convenience, to try another pi).
pub const PI_VERSION_ENV: &str = "CONDENSE_E2E_PI_VERSION";
/// Overrides [`PI_PACKAGE`] for the default target (developer convenience,
/// e.g. `@mariozechner/pi-coding-agent` with `CONDENSE_E2E_PI_VERSION=0.73.1`).
pub const PI_PACKAGE_ENV: &str = "CONDENSE_E2E_PI_PACKAGE";
/// Overrides [`NODE_VERSION`] for the default target (developer convenience).
pub const NODE_VERSION_ENV: &str = "CONDENSE_E2E_NODE_VERSION";

/// The provider name written to `models.json`.
pub const PROVIDER: &str = "fake";
/// The model id written to `models.json`.
pub const MODEL: &str = "fake-1";

/// Upper bound for `npm install`.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// Upper bound for `--version` checks.
const VERSION_TIMEOUT: Duration = Duration::from_secs(60);
/// Default upper bound for one pi run.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Staging directories older than this are leftovers of killed installs.
const STALE_STAGING: Duration = Duration::from_secs(6 * 60 * 60);

/// One (pi package, pi version, Node version) combination to install and run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PiTarget {
    /// The pi package on the npm registry, e.g. [`PI_PACKAGE`].
    pub package: String,
    /// The pi version, e.g. [`PI_VERSION`].
    pub version: String,
    /// The version of the npm package `node` (the Node binary), e.g. [`NODE_VERSION`].
    pub node: String,
}

impl PiTarget {
    /// Any combination.
    pub fn new(package: &str, version: &str, node: &str) -> Self {
        Self {
            package: package.to_owned(),
            version: version.to_owned(),
            node: node.to_owned(),
        }
    }

    /// The default: [`PI_PACKAGE`] at [`pi_version`] (the pinned
    /// [`PI_VERSION`]) on Node [`NODE_VERSION`]. `$CONDENSE_E2E_PI_PACKAGE`,
    /// `$CONDENSE_E2E_PI_VERSION` and `$CONDENSE_E2E_NODE_VERSION` override
    /// each part, to run every end-to-end test on another pi.
    pub fn default_target() -> Self {
        Self::new(
            &env_or(PI_PACKAGE_ENV, PI_PACKAGE),
            &pi_version(),
            &env_or(NODE_VERSION_ENV, NODE_VERSION),
        )
    }

    /// [`PI_PACKAGE`]@[`PI_VERSION_1_6`] on Node [`NODE_VERSION`].
    pub fn pi_1_6() -> Self {
        Self::new(PI_PACKAGE, PI_VERSION_1_6, NODE_VERSION)
    }

    /// [`PI_PACKAGE_LEGACY`]@[`PI_VERSION_LEGACY`] on Node [`NODE_20_VERSION`].
    pub fn pi_0_73() -> Self {
        Self::new(PI_PACKAGE_LEGACY, PI_VERSION_LEGACY, NODE_20_VERSION)
    }

    /// The install directory's name inside the cache: `pi-<version>-node-<node>`
    /// for [`PI_PACKAGE`] (the name the default install always had), with the
    /// package's scope in front for any other package
    /// (`pi-mariozechner-0.73.1-node-20.20.2`).
    pub fn dir_name(&self) -> String {
        if self.package == PI_PACKAGE {
            return format!("pi-{}-node-{}", self.version, self.node);
        }
        let scope: String = self
            .package
            .split('/')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        format!("pi-{scope}-{}-node-{}", self.version, self.node)
    }
}

impl std::fmt::Display for PiTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{} on Node {}", self.package, self.version, self.node)
    }
}

/// A verified Node + pi installation.
#[derive(Debug, Clone)]
pub struct PiInstall {
    /// The install directory (`<cache>/<PiTarget::dir_name>`).
    pub dir: PathBuf,
    /// The Node binary.
    pub node: PathBuf,
    /// pi's CLI entry script (from its package.json `bin.pi`).
    pub cli: PathBuf,
    /// The pi version installed.
    pub pi_version: String,
    /// What was installed.
    pub target: PiTarget,
}

/// Returns the default installation ([`PiTarget::default_target`]), or
/// `None` if `CONDENSE_SKIP_E2E=1`.
///
/// Panics with a clear message if Node or pi cannot be found or installed.
pub fn require_pi() -> Option<&'static PiInstall> {
    require_pi_target(&PiTarget::default_target())
}

/// Returns the installation of `target`, or `None` if `CONDENSE_SKIP_E2E=1`.
///
/// Panics with a clear message if Node or pi cannot be found or installed.
pub fn require_pi_target(target: &PiTarget) -> Option<&'static PiInstall> {
    if std::env::var(SKIP_ENV).is_ok_and(|v| v == "1") {
        eprintln!(
            "e2e: {SKIP_ENV}=1 is set: skipping this end-to-end test (developer convenience; \
             CI never sets it)"
        );
        return None;
    }
    match PiInstall::get_target(target) {
        Ok(install) => Some(install),
        Err(err) => panic!(
            "e2e: {target} is needed for this end-to-end test and could not be \
             installed:\n{err}\n\nFix: make `npm` available (Debian: `apt-get install -y nodejs \
             npm`) with access to the npm registry, or set {SKIP_ENV}=1 to skip end-to-end \
             tests locally."
        ),
    }
}

/// The pi version to use: `$CONDENSE_E2E_PI_VERSION` or [`PI_VERSION`].
pub fn pi_version() -> String {
    env_or(PI_VERSION_ENV, PI_VERSION)
}

/// `$key` trimmed, or `default` when it is unset or blank.
fn env_or(key: &str, default: &str) -> String {
    std::env::var(key)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// One target's install result, computed at most once per test process.
type InstallCell = Arc<OnceLock<Result<&'static PiInstall, String>>>;

impl PiInstall {
    /// Finds or installs the default target ([`PiTarget::default_target`])
    /// once per test process.
    pub fn get() -> Result<&'static PiInstall, String> {
        Self::get_target(&PiTarget::default_target())
    }

    /// Finds or installs `target` once per test process. Tests asking for
    /// the same target at the same time wait for one install; different
    /// targets install independently.
    pub fn get_target(target: &PiTarget) -> Result<&'static PiInstall, String> {
        static INSTALLS: OnceLock<Mutex<HashMap<PiTarget, InstallCell>>> = OnceLock::new();
        let cell = {
            let mut map = INSTALLS
                .get_or_init(Default::default)
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            Arc::clone(map.entry(target.clone()).or_default())
        };
        cell.get_or_init(|| {
            let started = Instant::now();
            let result = find_or_install(&cache_dir(), target);
            if let Ok(install) = &result {
                eprintln!(
                    "e2e: {target} ready in {:.1}s at {}",
                    started.elapsed().as_secs_f64(),
                    install.dir.display()
                );
            }
            // Installs live for the whole test process.
            result.map(|install| &*Box::leak(Box::new(install)))
        })
        .clone()
    }

    /// A `Command` running pi's CLI with the install's Node binary.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.node);
        cmd.arg(&self.cli);
        cmd
    }
}

fn find_or_install(cache: &Path, pi: &PiTarget) -> Result<PiInstall, String> {
    let name = pi.dir_name();
    let target = cache.join(&name);
    if target.join(".complete").is_file() {
        if let Ok(install) = verify(&target, pi) {
            return Ok(install);
        }
        eprintln!(
            "e2e: cached install at {} failed verification; reinstalling",
            target.display()
        );
    }
    fs::create_dir_all(cache).map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    remove_stale_staging(cache);

    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let staging = cache.join(format!(".staging-{}-{nanos}", std::process::id()));
    let result = install_into(&staging, pi).and_then(|_| {
        fs::write(staging.join(".complete"), format!("{name}\n"))
            .map_err(|e| format!("cannot write the completion marker: {e}"))?;
        if target.exists() && !target.join(".complete").is_file() {
            // A directory without the marker is nobody's finished install.
            let _ = fs::remove_dir_all(&target);
        }
        match fs::rename(&staging, &target) {
            Ok(()) => Ok(()),
            // Another process finished first; use its install.
            Err(_) if target.join(".complete").is_file() => Ok(()),
            Err(e) => Err(format!(
                "cannot move {} to {}: {e}",
                staging.display(),
                target.display()
            )),
        }
    });
    if staging.exists() {
        let _ = fs::remove_dir_all(&staging);
    }
    result?;
    verify(&target, pi)
}

/// Runs `npm install` for the target's packages in `dir` and verifies it.
fn install_into(dir: &Path, pi: &PiTarget) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let manifest = json!({
        "name": "condense-pi-e2e",
        "private": true,
        "description": "Node + pi for condense's end-to-end tests (generated; safe to delete)",
        "dependencies": {
            "node": pi.node,
            pi.package.as_str(): pi.version,
        },
        // npm 11 asks for install scripts to be approved; `node` needs its
        // preinstall script to fetch the platform binary.
        "allowScripts": {"node": true},
    });
    fs::write(
        dir.join("package.json"),
        serde_json::to_string_pretty(&manifest).unwrap_or_default(),
    )
    .map_err(|e| format!("cannot write package.json: {e}"))?;

    let npm = which("npm").ok_or_else(|| {
        "`npm` is not on PATH (CI's .ci/run installs Debian's nodejs and npm when it is missing)"
            .to_owned()
    })?;
    eprintln!(
        "e2e: installing node@{} and {}@{} into {} …",
        pi.node,
        pi.package,
        pi.version,
        dir.display()
    );
    let mut cmd = Command::new(&npm);
    cmd.current_dir(dir)
        .args(["install", "--no-audit", "--no-fund", "--loglevel=warn"])
        .env("npm_config_update_notifier", "false");
    let out = run_bounded(&mut cmd, INSTALL_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", npm.display()))?;
    eprintln!(
        "e2e: npm install finished in {:.1}s ({})",
        out.elapsed.as_secs_f64(),
        out.describe_status()
    );
    if !out.success() {
        return Err(format!(
            "`npm install` in {} failed ({}).\n--- stdout ---\n{}\n--- stderr ---\n{}",
            dir.display(),
            out.describe_status(),
            tail(&out.stdout, 4000),
            tail(&out.stderr, 8000)
        ));
    }
    verify(dir, pi).map(|_| ())
}

/// Checks that `dir` holds a working Node and pi of the target's versions.
fn verify(dir: &Path, pi: &PiTarget) -> Result<PiInstall, String> {
    let node = dir.join("node_modules/node/bin/node");
    let out = run_bounded(Command::new(&node).arg("--version"), VERSION_TIMEOUT)
        .map_err(|e| format!("cannot run {}: {e}", node.display()))?;
    let got = out.stdout.trim();
    if !out.success() || got != format!("v{}", pi.node) {
        return Err(format!(
            "{} --version printed {got:?} ({}), expected v{}; stderr: {}",
            node.display(),
            out.describe_status(),
            pi.node,
            tail(&out.stderr, 2000)
        ));
    }

    let pkg_dir = dir.join("node_modules").join(&pi.package);
    let pkg_json = pkg_dir.join("package.json");
    let pkg: Value = fs::read_to_string(&pkg_json)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .ok_or_else(|| format!("cannot read {}", pkg_json.display()))?;
    let bin = match pkg.get("bin") {
        Some(Value::String(path)) => Some(path.as_str()),
        Some(Value::Object(map)) => map.get("pi").and_then(Value::as_str),
        _ => None,
    }
    .ok_or_else(|| format!("{} has no `bin.pi`", pkg_json.display()))?;
    let cli = pkg_dir.join(bin);
    let install = PiInstall {
        dir: dir.to_path_buf(),
        node,
        cli,
        pi_version: pi.version.clone(),
        target: pi.clone(),
    };
    let out = run_bounded(install.command().arg("--version"), VERSION_TIMEOUT)
        .map_err(|e| format!("cannot run pi: {e}"))?;
    // pi ≥ 0.74 prints its version on stdout, 0.73 on stderr.
    let printed = match out.stdout.trim() {
        "" => out.stderr.trim(),
        stdout => stdout,
    };
    if !out.success() || printed != pi.version {
        return Err(format!(
            "`pi --version` printed {printed:?} ({}), expected {}; stderr: {}",
            out.describe_status(),
            pi.version,
            tail(&out.stderr, 2000)
        ));
    }
    Ok(install)
}

fn remove_stale_staging(cache: &Path) {
    let Ok(entries) = fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_STAGING);
        if stale && entry.file_name().to_string_lossy().starts_with(".staging-") {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// The default `models.json` for provider [`PROVIDER`] / model [`MODEL`]
/// served at `base_url` (e.g. [`crate::fake_llm::FakeLlm::base_url`]).
pub fn models_json(base_url: &str) -> Value {
    json!({
        "providers": {
            PROVIDER: {
                "baseUrl": base_url,
                "api": "openai-completions",
                "apiKey": "sk-fake-e2e",
                "compat": {"supportsDeveloperRole": false, "supportsStore": false},
                "models": [{"id": MODEL, "contextWindow": 32000, "maxTokens": 4096}],
            }
        }
    })
}

/// Deep-merges `patch` into `base` (objects merge key by key; anything else
/// replaces).
pub fn merge_json(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, value) in patch {
                merge_json(base.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (base, patch) => *base = patch.clone(),
    }
}

/// Writes a pi extension package into `dir`: a `package.json` whose
/// `pi.extensions` is `["./index.ts"]`, plus `files` (`(relative path,
/// contents)`, which should include `index.ts`).
pub fn write_extension(dir: &Path, files: &[(&str, &str)]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let manifest = json!({
        "name": "condense-e2e-extension",
        "private": true,
        "type": "module",
        "pi": {"extensions": ["./index.ts"]},
    });
    fs::write(
        dir.join("package.json"),
        serde_json::to_string_pretty(&manifest)?,
    )?;
    for (path, contents) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(path, contents)?;
    }
    Ok(())
}

/// Reads a JSONL file (a pi session) into values; panics on unreadable
/// files or lines that are not JSON.
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text =
        fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| {
                panic!("{} line {}: not JSON ({e}): {l}", path.display(), i + 1)
            })
        })
        .collect()
}

/// The `message` payloads of a session's `type: "message"` entries, in file
/// order.
pub fn session_messages(entries: &[Value]) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("message"))
        .filter_map(|e| e.get("message").cloned())
        .collect()
}

/// The text of a pi message's `content` (a string, or the `text` of its
/// parts joined).
pub fn pi_message_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

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

fn write_json_file(path: &Path, value: &Value) {
    let text = serde_json::to_string_pretty(value).expect("serialize JSON");
    fs::write(path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
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
