//! OpenCode for end-to-end tests: installed once into the shared e2e cache,
//! run headless (`opencode run --format json`) in an isolated home against a
//! [`FakeLlm`], with condense's plugin loaded.
//!
//! The install is `opencode-ai` (the whole binary ships inside the npm
//! package) plus `@opencode-ai/plugin`, which OpenCode would otherwise
//! install into every config directory at startup (about 25 s): the
//! isolated config directory gets a `node_modules` link to the cache's.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cache::{cache_dir, workspace_root, SKIP_ENV};
use crate::fake_llm::FakeLlm;
use crate::process::{run_bounded, BoundedOutput};

/// The OpenCode release the tests pin.
pub const OPENCODE_VERSION: &str = "1.18.33";
/// The provider and model the fake server plays.
pub const PROVIDER: &str = "fake";
pub const MODEL: &str = "fake-1";

const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// An OpenCode installation in the cache.
#[derive(Debug)]
pub struct OpenCodeInstall {
    pub dir: PathBuf,
    pub bin: PathBuf,
}

impl OpenCodeInstall {
    pub fn node_modules(&self) -> PathBuf {
        self.dir.join("node_modules")
    }
}

/// The install, or `None` when `CONDENSE_SKIP_E2E=1` (the test then passes
/// without running). An install failure panics with npm's output.
pub fn require_opencode() -> Option<&'static OpenCodeInstall> {
    if std::env::var(SKIP_ENV).is_ok_and(|v| v == "1") {
        eprintln!("e2e: {SKIP_ENV}=1, skipping an OpenCode end-to-end test");
        return None;
    }
    static INSTALL: OnceLock<Result<OpenCodeInstall, String>> = OnceLock::new();
    match INSTALL.get_or_init(|| find_or_install(&cache_dir())) {
        Ok(install) => Some(install),
        Err(e) => panic!("OpenCode {OPENCODE_VERSION} could not be installed:\n{e}"),
    }
}

fn find_or_install(cache: &Path) -> Result<OpenCodeInstall, String> {
    let package = json!({
        "name": "condense-e2e-opencode",
        "private": true,
        "dependencies": {
            "opencode-ai": OPENCODE_VERSION,
            "@opencode-ai/plugin": OPENCODE_VERSION,
        },
    });
    crate::npm_install::install_once(
        cache,
        &format!("opencode-{OPENCODE_VERSION}"),
        &package,
        &format!("opencode-ai@{OPENCODE_VERSION}"),
        INSTALL_TIMEOUT,
        verify,
    )
}

fn verify(dir: &Path) -> Result<OpenCodeInstall, String> {
    let bin = dir.join("node_modules/.bin/opencode");
    let out = run_bounded(Command::new(&bin).arg("--version"), Duration::from_secs(60))
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if !out.success() || out.stdout.trim() != OPENCODE_VERSION {
        return Err(format!(
            "{} --version answered {:?} (expected {OPENCODE_VERSION})",
            bin.display(),
            out.stdout.trim()
        ));
    }
    Ok(OpenCodeInstall {
        dir: dir.to_path_buf(),
        bin,
    })
}

/// The plugin's host-neutral module (`plugin/plugin.ts`).
pub fn plugin_module() -> PathBuf {
    workspace_root().join("crates/condense-host-opencode/plugin/plugin.ts")
}

/// An isolated OpenCode home: config, data and project directory in a
/// temporary directory.
pub struct OpenCodeEnv {
    pub install: &'static OpenCodeInstall,
    /// Serves OpenCode's `small_model` (session titles), so those calls
    /// never take a reply of the test's script.
    pub titles: FakeLlm,
    pub root: tempfile::TempDir,
    pub project: PathBuf,
    pub config_dir: PathBuf,
    pub data_home: PathBuf,
    env: Vec<(String, String)>,
}

/// One `opencode run`.
pub struct OpenCodeRun {
    pub output: BoundedOutput,
    /// The JSON events of `--format json`, one per stdout line.
    pub events: Vec<Value>,
}

impl OpenCodeRun {
    pub fn report(&self) -> String {
        format!(
            "status: {:?} (timed out: {})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.output.status, self.output.timed_out, self.output.stdout, self.output.stderr
        )
    }

    pub fn assert_success(&self) {
        assert!(
            self.output.success(),
            "opencode run failed\n{}",
            self.report()
        );
    }

    /// The session id the events name.
    pub fn session_id(&self) -> Option<String> {
        self.events
            .iter()
            .find_map(|e| e.get("sessionID").and_then(Value::as_str))
            .map(str::to_owned)
    }
}

impl OpenCodeEnv {
    /// A home whose config points OpenCode at `base_url` and loads the plugin
    /// (the `plugins/` file re-exports it) with the sidecar `sidecar`.
    pub fn new(install: &'static OpenCodeInstall, base_url: &str, sidecar: Option<&Path>) -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        let home = root.path().join("home");
        let config_home = root.path().join("config");
        let data_home = root.path().join("data");
        let project = root.path().join("project");
        let config_dir = config_home.join("opencode");
        for d in [&home, &data_home, &project, &config_dir.join("plugins")] {
            fs::create_dir_all(d).expect("create a directory");
        }
        let titles = FakeLlm::start([]);
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "model": format!("{PROVIDER}/{MODEL}"),
            "small_model": "titles/title-1",
            "autoupdate": false,
            "share": "disabled",
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Fake",
                    "options": {"baseURL": base_url, "apiKey": "test-key"},
                    "models": {MODEL: {"name": "Fake 1", "tool_call": true, "limit": {"context": 128000, "output": 4096}}},
                },
                "titles": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Titles",
                    "options": {"baseURL": titles.base_url(), "apiKey": "test-key"},
                    "models": {"title-1": {"name": "Title 1", "limit": {"context": 128000, "output": 4096}}},
                },
            },
        });
        fs::write(config_dir.join("opencode.json"), config.to_string())
            .expect("write opencode.json");
        fs::write(
            config_dir.join("plugins/condense.ts"),
            format!(
                "import {{ tool }} from \"@opencode-ai/plugin\";\n\
                 import {{ condensePlugin }} from {};\n\
                 export const CondensePlugin = condensePlugin(tool);\n",
                Value::String(plugin_module().to_string_lossy().into_owned())
            ),
        )
        .expect("write the plugin file");
        // Pre-installed `@opencode-ai/plugin` (see the module doc).
        fs::write(
            config_dir.join("package.json"),
            json!({"dependencies": {"@opencode-ai/plugin": OPENCODE_VERSION}}).to_string(),
        )
        .expect("write package.json");
        std::os::unix::fs::symlink(install.node_modules(), config_dir.join("node_modules"))
            .expect("link node_modules");
        let mut env = vec![
            ("HOME", home.to_string_lossy().into_owned()),
            (
                "XDG_CONFIG_HOME",
                config_home.to_string_lossy().into_owned(),
            ),
            ("XDG_DATA_HOME", data_home.to_string_lossy().into_owned()),
            (
                "XDG_STATE_HOME",
                root.path().join("state").to_string_lossy().into_owned(),
            ),
            (
                "XDG_CACHE_HOME",
                root.path().join("cache").to_string_lossy().into_owned(),
            ),
            ("OPENCODE_DISABLE_MODELS_FETCH", "1".to_owned()),
            // The plugin's debug log (requests and answers), for failure reports.
            (
                "CONDENSE_OPENCODE_DEBUG",
                root.path()
                    .join("protocol.log")
                    .to_string_lossy()
                    .into_owned(),
            ),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1".to_owned()),
        ];
        if let Some(bin) = sidecar {
            env.push(("CONDENSE_BIN", bin.to_string_lossy().into_owned()));
        } else {
            env.push((
                "CONDENSE_BIN",
                root.path()
                    .join("no-such-sidecar")
                    .to_string_lossy()
                    .into_owned(),
            ));
        }
        OpenCodeEnv {
            install,
            titles,
            project,
            config_dir,
            data_home,
            env: env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            root,
        }
    }

    /// Runs OpenCode without condense's plugin (for condense as a proxy in
    /// front of its provider).
    pub fn without_plugin(&self) {
        fs::remove_file(self.config_dir.join("plugins/condense.ts"))
            .expect("remove the workspace plugin file");
    }

    /// Adds a local MCP server `name` running `command` to `opencode.json`.
    pub fn add_mcp_server(&self, name: &str, command: &[String]) {
        let file = self.config_dir.join("opencode.json");
        let mut config: Value =
            serde_json::from_str(&fs::read_to_string(&file).expect("read opencode.json"))
                .expect("opencode.json is JSON");
        config["mcp"][name] = json!({"type": "local", "command": command, "enabled": true});
        fs::write(&file, config.to_string()).expect("write opencode.json");
    }

    /// Adds (or replaces) provider `id` in `opencode.json`.
    pub fn add_provider(&self, id: &str, provider: Value) {
        let file = self.config_dir.join("opencode.json");
        let mut config: Value =
            serde_json::from_str(&fs::read_to_string(&file).expect("read opencode.json"))
                .expect("opencode.json is JSON");
        config["provider"][id] = provider;
        fs::write(&file, config.to_string()).expect("write opencode.json");
    }

    /// Loads the plugin as a user does, by package name in `opencode.json`
    /// (OpenCode installs it), instead of the workspace's module through
    /// `plugins/`, and with no `CONDENSE_BIN`. `env` joins every
    /// run's environment (a registry's npm settings, a `PATH`).
    pub fn use_plugin_package(&mut self, package: &str, env: Vec<(String, String)>) {
        fs::remove_file(self.config_dir.join("plugins/condense.ts"))
            .expect("remove the workspace plugin file");
        let file = self.config_dir.join("opencode.json");
        let mut config: Value = fs::read_to_string(&file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .expect("read opencode.json");
        config["plugin"] = json!([package]);
        fs::write(&file, config.to_string()).expect("write opencode.json");
        self.env.retain(|(k, _)| k != "CONDENSE_BIN");
        self.env.extend(env);
    }

    /// Writes `condense.json` (the `contextPrune` keys) into the global config directory.
    pub fn write_condense_config(&self, config: &Value) {
        fs::write(self.config_dir.join("condense.json"), config.to_string())
            .expect("write condense.json");
    }

    /// The plugin's debug log (requests and answers).
    pub fn protocol_log(&self) -> String {
        fs::read_to_string(self.root.path().join("protocol.log")).unwrap_or_default()
    }

    /// condense's storage directory for this home.
    pub fn condense_dir(&self) -> PathBuf {
        self.data_home.join("opencode/storage/plugin/condense")
    }

    /// Marks the tool part answering `call_id` as OpenCode's own pruning
    /// does (`state.time.compacted`), in OpenCode's database, with the
    /// `bun:sqlite` of the Bun that the `opencode` binary embeds
    /// (`BUN_BE_BUN=1`). Returns how many parts were marked.
    pub fn mark_compacted(&self, call_id: &str) -> usize {
        let db = self.data_home.join("opencode/opencode.db");
        let script = "import { Database } from 'bun:sqlite';\n\
             const db = new Database(process.argv[2]);\n\
             const r = db.query(\"update part set data = json_set(data, '$.state.time.compacted', ?) \
             where json_extract(data, '$.callID') = ? and json_extract(data, '$.type') = 'tool'\").run(Date.now(), process.argv[3]);\n\
             console.log(String(r.changes));\n";
        let file = self.root.path().join("mark-compacted.ts");
        fs::write(&file, script).expect("write the script");
        let mut cmd = Command::new(&self.install.bin);
        cmd.arg(&file).arg(&db).arg(call_id).env("BUN_BE_BUN", "1");
        let out = run_bounded(&mut cmd, Duration::from_secs(60)).expect("run bun");
        assert!(
            out.success(),
            "marking {call_id} compacted failed: {}",
            out.stderr
        );
        out.stdout.trim().parse().unwrap_or(0)
    }

    /// `opencode export SESSION > file`: the session's info and messages as
    /// OpenCode's CLI prints them (what a user hands `condense simulate`).
    /// Into a file, as a user redirects it: into a pipe, OpenCode's process
    /// may exit before a large export is written out.
    pub fn export_to(&self, session_id: &str, file: &Path) {
        let mut cmd = self.command_of("sh");
        cmd.args(["-c", r#"exec "$0" export "$1" > "$2""#])
            .arg(&self.install.bin)
            .arg(session_id)
            .arg(file);
        let out = run_bounded(&mut cmd, Duration::from_secs(60)).expect("run opencode export");
        assert!(out.success(), "opencode export failed: {}", out.stderr);
    }

    /// `opencode` in the project, with this home's environment only.
    pub(crate) fn command(&self) -> Command {
        self.command_of(&self.install.bin)
    }

    /// `program` in the project, with this home's environment only.
    fn command_of(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(&self.project).env_clear();
        for key in ["PATH", "LANG", "TERM"] {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// `opencode run --format json [--continue] <prompt>` in the project.
    pub fn run(&self, prompt: &str, continue_session: bool) -> OpenCodeRun {
        self.run_with(&[], prompt, continue_session)
    }

    /// [`OpenCodeEnv::run`] with `args` after `run` (`--attach URL`).
    pub(crate) fn run_with(
        &self,
        args: &[&str],
        prompt: &str,
        continue_session: bool,
    ) -> OpenCodeRun {
        let mut cmd = self.command();
        cmd.arg("run").args(["--format", "json"]).args(args);
        if continue_session {
            cmd.arg("--continue");
        }
        cmd.arg(prompt);
        let output = run_bounded(&mut cmd, RUN_TIMEOUT).expect("run opencode");
        let events = output
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        OpenCodeRun { output, events }
    }
}
